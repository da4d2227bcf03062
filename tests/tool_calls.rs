//! Tool-call formats on real model outputs: llama.cpp's tool-call parsing vectors
//! (`../shared/data/chat-templates/tool_call_parsing.cases.json`, over the 70 chat
//! templates beside it). For every vector whose template renders a format stencil
//! builds, the model output must be accepted under the structural tag made from
//! the vector's tools (a streamed prefix: continuable), in `auto`, `required` and
//! named-function modes, and refused once a call names a function that is not a
//! tool, or under `tool_choice: "none"`. And every complete output parses back
//! (`parse_reply`) into llama.cpp's expected content and calls. XGrammar's
//! built-in model formats' cases run under stencil's format of the same model.
//! Skipped, with a message, when `../shared` is absent.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use stencil::frontend::json_schema::PatternCache;
use stencil::frontend::structural_tag::{self, StructuralTagOptions};
use stencil::frontend::tool_calls::{self, Reasoning, ToolCallFormat, ToolChoice};
use stencil::{CompileOptions, CompiledGrammar, Matcher};

#[path = "support/oracle.rs"]
#[allow(dead_code)]
mod oracle;

fn data() -> Option<PathBuf> {
    let dir = std::env::var("STENCIL_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/data")));
    dir.join("chat-templates")
        .is_dir()
        .then_some(dir.join("chat-templates"))
}

/// The chat templates' folder and llama.cpp's parsing vectors in it.
fn parsing_cases() -> Option<(PathBuf, Vec<Value>)> {
    let dir = data()?;
    let text = std::fs::read_to_string(dir.join("tool_call_parsing.cases.json")).unwrap();
    Some((dir, serde_json::from_str(&text).unwrap()))
}

fn accepts(grammar: &Arc<CompiledGrammar>, text: &str) -> bool {
    let mut m = Matcher::new(Arc::clone(grammar));
    m.consume_bytes(text.as_bytes()).is_ok() && m.is_accepting()
}

/// How the templates' reasoning spans open and close.
const REASONING_SPANS: [(&str, &str); 9] = [
    ("<think>", "</think>"),
    ("<mm:think>", "</mm:think>"),
    ("[THINK]", "[/THINK]"),
    ("<seed:think>", "</seed:think>"),
    ("<|channel>thought", "<channel|>"),
    ("<|START_THINKING|>", "<|END_THINKING|>"),
    (
        "<|channel|>analysis<|message|>",
        "<|end|><|start|>assistant",
    ),
    (
        "<|open|>think<|sep|>",
        "<|close|>think<|sep|><|open|>response<|sep|>",
    ),
    ("Here are my reasoning steps:", "[BEGIN FINAL RESPONSE]"),
];

/// A model output without its end-of-turn token: the decode loop stops at it (an
/// end-of-sequence token, never text), while llama.cpp's vectors keep some.
fn without_end_of_turn(input: &str) -> &str {
    input.strip_suffix("<|role_end|>").unwrap_or(input)
}

/// Whether `text` can still be continued into an accepted output.
fn viable(grammar: &Arc<CompiledGrammar>, text: &str) -> bool {
    Matcher::new(Arc::clone(grammar))
        .consume_bytes(text.as_bytes())
        .is_ok()
}

#[test]
fn real_outputs_are_accepted_in_their_models_format() {
    let Some((dir, cases)) = parsing_cases() else {
        eprintln!("../shared/data/chat-templates not found: skipped");
        return;
    };
    let (mut checked, mut templates) = (0, std::collections::BTreeSet::new());
    for case in &cases {
        let template = case["template"].as_str().unwrap();
        let text = std::fs::read_to_string(dir.join(template)).unwrap();
        let Some(format) = ToolCallFormat::detect(&text) else {
            continue;
        };
        let calls = case["expect"]["tool_calls"].as_array().unwrap();
        let input = without_end_of_turn(case["input"].as_str().unwrap());
        // Kimi K3's prompt opens the response block (thinking off); llama.cpp's
        // vectors write it again.
        let input = match format {
            ToolCallFormat::KimiK3 => input
                .strip_prefix("<|open|>response<|sep|>")
                .unwrap_or(input),
            _ => input,
        };
        // Reasoning spans are the reasoning part's (not built yet).
        if calls.is_empty() {
            continue;
        }
        // llama.cpp also reads calls without their opener (Qwen's `<tool_call>`,
        // Kimi's section); stencil writes it (those vectors are parse-back only).
        // (functionary v3.2's prompt writes the first message's `>>>`.)
        let triggers = input.matches(format.trigger()).count();
        let opened_by_prompt = format == ToolCallFormat::FunctionaryV32;
        if !opened_by_prompt
            && (triggers == 0 || (format == ToolCallFormat::QwenXml && triggers < calls.len()))
        {
            continue;
        }
        // A reasoning span first: opened by the model (`[THINK]`) or by the prompt;
        // MiniMax-M3's model may also write the close alone (`Reasoning::for_template`).
        let reasoning = REASONING_SPANS
            .into_iter()
            .find(|(_, close)| input.contains(close))
            .map(|(open, close)| {
                let close_alone = close == "</mm:think>";
                Reasoning {
                    open: (close_alone || input.starts_with(open)).then(|| open.to_string()),
                    close: close.to_string(),
                    optional: false,
                    close_alone,
                }
            });
        let tools = tool_calls::read_tools(&case["tools"]).unwrap();
        // OpenAI's default (llama.cpp's is false, but its parser reads text
        // after a call either way: inclusionAI Ling writes some).
        let parallel = case["params"]["parallel_tool_calls"]
            .as_bool()
            .unwrap_or(true);
        let compile = |choice: &ToolChoice| {
            let tag = tool_calls::structural_tag(format, &tools, choice, parallel).unwrap();
            let tag = match &reasoning {
                Some(r) => tool_calls::with_reasoning(&tag, r),
                None => tag,
            };
            let grammar = structural_tag::parse(
                &tag,
                &StructuralTagOptions::default(),
                &PatternCache::default(),
            )
            .unwrap_or_else(|e| panic!("{}: {e}\n{tag}", case["id"]));
            Arc::new(CompiledGrammar::compile(&grammar, &CompileOptions::default()).unwrap())
        };
        let auto = compile(&ToolChoice::Auto);
        if case["params"]["is_partial"] == true {
            // A streamed prefix: it must be continuable.
            assert!(
                viable(&auto, input),
                "{}: auto refuses the prefix {input:?}",
                case["id"]
            );
            checked += 1;
            continue;
        }
        assert!(
            accepts(&auto, input),
            "{}: auto refuses {input:?}",
            case["id"]
        );
        let name = calls[0]["name"].as_str().unwrap();
        let reply = match &reasoning {
            Some(r) => input[input.find(&r.close).unwrap() + r.close.len()..].trim_start(),
            None => input,
        };
        // Calls alone after the reasoning (llama.cpp may read text before a call
        // as reasoning the prompt opened: for stencil that is content).
        let blank = |key: &str| {
            case["expect"][key]
                .as_str()
                .is_none_or(|c| c.trim().is_empty())
        };
        if blank("content") && (reasoning.is_some() || blank("reasoning_content")) {
            let required = compile(&ToolChoice::Required);
            assert!(
                accepts(&required, input),
                "{}: required refuses {input:?}",
                case["id"]
            );
            if calls.len() == 1 {
                let named = compile(&ToolChoice::Function(name.to_string()));
                assert!(
                    accepts(&named, input),
                    "{}: named refuses {input:?}",
                    case["id"]
                );
            }
        } else {
            let required = compile(&ToolChoice::Required);
            assert!(
                !accepts(&required, input),
                "{}: required takes text before the call",
                case["id"]
            );
        }
        // Broken calls: a function that is not a tool, arguments off the schema.
        // (In the reply: a reasoning span may mention the function freely.)
        let unknown = input.replace(reply, &reply.replacen(name, "no_such_tool", 1));
        assert!(
            !accepts(&auto, &unknown),
            "{}: auto takes {unknown:?}",
            case["id"]
        );
        let none = compile(&ToolChoice::None);
        assert!(
            !accepts(&none, input),
            "{}: tool_choice none takes a call",
            case["id"]
        );
        checked += 1;
        templates.insert(template.to_string());
    }
    println!("{checked} outputs with tool calls checked, templates: {templates:?}");
    assert!(checked >= 8, "only {checked} vectors in a built format");
}

/// Outputs llama.cpp reads leniently and stencil's readers do not (no grammar
/// of stencil's writes them) or read otherwise, with the reason.
const UNREAD: [(&str, &str); 6] = [
    (
        "CohereForAI-c4ai-command-r-plus-tool_use#1",
        "a text reply that writes the prompt's `<|CHATBOT_TOKEN|>` again (llama.cpp drops it; for stencil it is content)",
    ),
    (
        "MiniMax-M3#18",
        "llama.cpp takes `oneOf`'s first branch, a string, and the tags as its text; stencil's strings never hold the tag opener, so the tags are the object branch's `{\"text\": \"hi\"}`",
    ),
    (
        "Apriel-1.6-15b-Thinker-fixed#1",
        "llama.cpp's reasoning starts with the prompt's `Here are my reasoning steps:`; stencil's is what the model wrote",
    ),
    (
        "Kimi-K2-Thinking#12",
        "calls without their section or `<|tool_call_end|>` (text, as a call cut short is)",
    ),
    (
        "Apriel-1.6-15b-Thinker-fixed#2",
        "llama.cpp's reasoning starts with the prompt's `Here are my reasoning steps:`; stencil's is what the model wrote",
    ),
    (
        "Kimi-K2-Thinking#13",
        "a call without its section or `<|tool_call_end|>` (text, as a call cut short is)",
    ),
];

/// The reply after a reasoning span (`</think>`, `[/THINK]`), and the span's text.
fn split_reasoning(input: &str) -> (&str, &str) {
    for (open, close) in REASONING_SPANS {
        if let Some(end) = input.find(close) {
            let reasoning = input[..end].strip_prefix(open).unwrap_or(&input[..end]);
            return (reasoning.trim(), &input[end + close.len()..]);
        }
    }
    ("", input)
}

#[test]
fn real_outputs_parse_back_into_the_expected_calls() {
    let Some((dir, cases)) = parsing_cases() else {
        eprintln!("../shared/data/chat-templates not found: skipped");
        return;
    };
    let (mut checked, mut partial, mut calls_seen) = (0, 0, 0);
    let mut by_format = std::collections::BTreeMap::<String, usize>::new();
    for case in &cases {
        let template = case["template"].as_str().unwrap();
        let text = std::fs::read_to_string(dir.join(template)).unwrap();
        let Some(format) = ToolCallFormat::detect(&text) else {
            continue;
        };
        if case["params"]["is_partial"] == true {
            // A streamed prefix: llama.cpp's partial calls are not stencil's
            // (a prefix is held back until it parses).
            partial += 1;
            continue;
        }
        let params = &case["params"];
        if !params["json_schema"].is_null() || params["continue_final_message"].is_string() {
            // A response format (llama.cpp unwraps a fenced JSON block), or a
            // reply continuing an earlier message: not a tool-call reply alone.
            continue;
        }
        let id = &case["id"];
        if let Some((_, why)) = UNREAD.iter().find(|(known, _)| id == known) {
            println!("{id}: not read back: {why}");
            continue;
        }
        let expect = &case["expect"];
        let input = without_end_of_turn(case["input"].as_str().unwrap());
        let tools = tool_calls::read_tools(&case["tools"]).unwrap();
        let (reasoning, parsed) = match format {
            // Harmony's and Muse Glimmer's reasoning is a message of its own:
            // the reader's.
            ToolCallFormat::Harmony | ToolCallFormat::MuseGlimmer => {
                let parsed = tool_calls::parse_reply(format, input, &tools);
                (parsed.reasoning.clone(), parsed)
            }
            _ => {
                let (reasoning, reply) = split_reasoning(input);
                let parsed = tool_calls::parse_reply(format, reply, &tools);
                (reasoning.to_string(), parsed)
            }
        };
        // Whitespace at the span's edges is the template's (Ling keeps a newline).
        let expected_reasoning = expect["reasoning_content"].as_str().unwrap_or("").trim();
        if expected_reasoning.is_empty() && !reasoning.is_empty() {
            // The template keeps the span in the content (reasoning not parsed).
            continue;
        }
        if !expected_reasoning.is_empty() && reasoning.is_empty() {
            // A span the prompt opened and a call cut short (llama.cpp reads the
            // text before the call as reasoning): the reasoning part's.
            continue;
        }
        assert_eq!(reasoning, expected_reasoning, "{id}: reasoning");
        let content = expect["content"].as_str().unwrap_or("");
        assert_eq!(parsed.content.trim(), content.trim(), "{id}: content");
        let calls = expect["tool_calls"].as_array().unwrap();
        assert_eq!(parsed.calls.len(), calls.len(), "{id}: {parsed:?}");
        for (got, want) in parsed.calls.iter().zip(calls) {
            assert_eq!(got.name, want["name"].as_str().unwrap(), "{id}: name");
            let arguments: Value = serde_json::from_str(&got.arguments).unwrap();
            let expected: Value = match &want["arguments"] {
                Value::String(s) => serde_json::from_str(s).unwrap(),
                other => other.clone(),
            };
            assert_eq!(arguments, expected, "{id}: arguments");
            if let Some(want_id) = want["id"].as_str().filter(|s| !s.is_empty()) {
                assert_eq!(got.id.as_deref(), Some(want_id), "{id}: call id");
            }
        }
        checked += 1;
        calls_seen += calls.len();
        *by_format.entry(format!("{format:?}")).or_default() += 1;
    }
    println!(
        "{checked} complete outputs parsed back ({calls_seen} calls), {partial} partial skipped: {by_format:?}"
    );
    assert!(checked >= 40, "only {checked} vectors parsed back");
}

#[test]
fn requests_with_mistakes_are_located() {
    let cases = [
        (
            serde_json::json!({"x": 1}),
            None,
            "/tools: must be an array",
        ),
        (
            serde_json::json!([{"type": "function", "function": {"parameters": {}}}]),
            None,
            "/tools/0/function/name",
        ),
        (
            serde_json::json!([{"name": "a"}, {"name": "a"}]),
            None,
            "/tools/1/name: tool names must be non-empty and distinct",
        ),
        (
            serde_json::json!([{"name": "a", "parameters": 3}]),
            None,
            "/tools/0/parameters",
        ),
        (
            serde_json::json!([{"name": "a"}]),
            Some(serde_json::json!("always")),
            "/tool_choice: unknown tool_choice",
        ),
        (
            serde_json::json!([{"name": "a"}]),
            Some(serde_json::json!({"type": "function", "function": {"name": "b"}})),
            "/tool_choice/function/name: no tool named \"b\"",
        ),
    ];
    for (tools, choice, needle) in cases {
        let error = tool_calls::read_tools(&tools)
            .and_then(|t| tool_calls::read_tool_choice(choice.as_ref(), &t).map(|_| ()))
            .expect_err(needle);
        assert!(
            error.to_string().starts_with(needle),
            "{error} (wanted {needle})"
        );
    }
}

/// On real vocabularies a format's delimiters are added tokens (not special):
/// Qwen3's `<tool_call>`, DeepSeek V3's `<｜tool▁calls▁begin｜>`. A model writes
/// each as its one token, and the format's mask allows it there, then every
/// token of the call, to an accepted end.
#[test]
fn models_write_their_call_tokens_under_the_mask() {
    let Some(dir) = data() else {
        eprintln!("../shared/data not found: skipped");
        return;
    };
    let tools = tool_calls::read_tools(&serde_json::json!([{"type": "function", "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]))
    .unwrap();
    let cases = [
        (
            "qwen3",
            ToolCallFormat::Hermes,
            "<tool_call>",
            "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
        ),
        (
            "deepseek-v3",
            ToolCallFormat::DeepSeekV3,
            "<｜tool▁calls▁begin｜>",
            "Let me look.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        ),
    ];
    for (name, format, token, text) in cases {
        let path = dir.join(format!("../tokenizers/{name}/tokenizer.json"));
        let vocab = Arc::new(stencil::vocab::Vocabulary::from_tokenizer_file(&path).unwrap());
        let tokenizer = stencil::vocab::load_tokenizer(&path).unwrap();
        let tag = tool_calls::structural_tag(format, &tools, &ToolChoice::Auto, true).unwrap();
        let tables = stencil::Compiler::new(Arc::clone(&vocab))
            .compile_structural_tag(&tag, &StructuralTagOptions::default())
            .unwrap();
        let ids = tokenizer.encode(text, false).unwrap().get_ids().to_vec();
        let call = vocab.ids_named(token);
        assert_eq!(call.len(), 1, "{name}: one {token} token");
        assert!(
            ids.contains(&call[0]),
            "{name}: the tokenizer writes {token} as its one token"
        );
        let mut matcher = stencil::matcher::TokenMatcher::new(tables);
        let mut mask = vec![0u32; vocab.len().div_ceil(32)];
        for &id in &ids {
            matcher.fill_next_token_bitmask(&mut mask);
            assert!(
                mask[id as usize / 32] >> (id % 32) & 1 == 1,
                "{name}: token {id} ({:?}) masked",
                vocab.token_text(id)
            );
            matcher.consume_token(id).unwrap();
        }
        assert!(matcher.is_accepting(), "{name}");
    }
}

/// Where a model's delimiters are special tokens (LFM2's `<|tool_call_start|>`,
/// Cohere's `<|START_ACTION|>`, Kimi K2's, Gemma 4's), no text spells them and
/// the model writes each as its one token. Over Qwen3's vocabulary with those
/// delimiters added as special tokens: the mask allows the token where the
/// delimiter goes (and nowhere else: every mask equals the brute-force one),
/// the text spelling still works, and the output as the decode loop shows it
/// (`decode_shown`) reads back into the call.
#[test]
fn delimiters_that_are_special_tokens_are_written_as_those_tokens() {
    let Some(dir) = data() else {
        eprintln!("../shared/data not found: skipped");
        return;
    };
    let path = dir.join("../tokenizers/qwen3/tokenizer.json");
    let qwen = stencil::vocab::Vocabulary::from_tokenizer_file(&path).unwrap();
    let tokenizer = stencil::vocab::load_tokenizer(&path).unwrap();
    let tools = tool_calls::read_tools(&serde_json::json!([{"type": "function", "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]))
    .unwrap();
    // Pieces of the output: `<...|>`-like pieces in `specials` are one token.
    let cases: [(ToolCallFormat, &[&str], &[&str]); 8] = [
        (
            ToolCallFormat::Pythonic,
            &["<|tool_call_start|>", "<|tool_call_end|>"],
            &["Let me look. ", "<|tool_call_start|>", "[get_weather(city=\"Paris\")]", "<|tool_call_end|>"],
        ),
        (
            ToolCallFormat::Cohere,
            &["<|START_ACTION|>", "<|END_ACTION|>"],
            &["<|START_ACTION|>", "[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}\n]", "<|END_ACTION|>"],
        ),
        (
            ToolCallFormat::KimiK2,
            &["<|tool_calls_section_begin|>", "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>", "<|tool_calls_section_end|>"],
            &["Sure.", "<|tool_calls_section_begin|>", "<|tool_call_begin|>", "functions.get_weather:0", "<|tool_call_argument_begin|>", "{\"city\": \"Paris\"}", "<|tool_call_end|>", "<|tool_calls_section_end|>"],
        ),
        (
            ToolCallFormat::Gemma4,
            // Its string quote is the JSON Schema front-end's, respelled.
            &["<|tool_call>", "<tool_call|>", "<|\"|>"],
            &["<|tool_call>", "call:get_weather{city:", "<|\"|>", "Paris", "<|\"|>", "}", "<tool_call|>"],
        ),
        (
            ToolCallFormat::KimiK3,
            &["<|open|>", "<|close|>", "<|sep|>"],
            &[
                "Sure.", "<|close|>", "response", "<|sep|>", "<|open|>", "tools", "<|sep|>",
                "<|open|>", "call tool=\"get_weather\" index=\"1\"", "<|sep|>", "<|open|>",
                "argument key=\"city\" type=\"string\"", "<|sep|>", "Paris", "<|close|>",
                "argument", "<|sep|>", "<|close|>", "call", "<|sep|>", "<|close|>", "tools",
                "<|sep|>", "<|close|>", "message", "<|sep|>",
            ],
        ),
        (
            ToolCallFormat::MiniMaxM3,
            // Every tag opens with it, the arguments' too.
            &["]<]minimax[>["],
            &[
                "Sure.", "]<]minimax[>[", "<tool_call>\n", "]<]minimax[>[",
                "<invoke name=\"get_weather\">", "]<]minimax[>[", "<city>Paris", "]<]minimax[>[",
                "</city>", "]<]minimax[>[", "</invoke>\n", "]<]minimax[>[", "</tool_call>",
            ],
        ),
        (
            ToolCallFormat::MuseGlimmer,
            &["<|message|>", "<|eom|>", "<|start|>"],
            &[
                " to=self", "<|message|>", "The user wants the weather.", "<|eom|>", "<|start|>",
                "assistant to=get_weather", "<|message|>",
                "<atem:function_calls>\n<atem:invoke name=\"get_weather\">\n<atem:parameter name=\"city\">Paris</atem:parameter>\n</atem:invoke>\n</atem:function_calls>",
            ],
        ),
        (
            ToolCallFormat::Harmony,
            &["<|channel|>", "<|message|>", "<|end|>", "<|start|>", "<|constrain|>", "<|call|>"],
            &[
                "<|channel|>", "analysis", "<|message|>", "The user wants the weather.", "<|end|>",
                "<|start|>", "assistant", "<|channel|>", "commentary to=functions.get_weather ",
                "<|constrain|>", "json", "<|message|>", "{\"city\": \"Paris\"}", "<|call|>",
            ],
        ),
    ];
    for (format, specials, pieces) in cases {
        let mut tokens: Vec<Vec<u8>> = (0..qwen.len() as u32)
            .map(|id| qwen.token_bytes(id).to_vec())
            .collect();
        let mut special = qwen.special_tokens().to_vec();
        for name in specials {
            special.push((tokens.len() as u32, name.to_string()));
            tokens.push(Vec::new());
        }
        let vocab = Arc::new(stencil::vocab::Vocabulary::from_token_bytes(
            tokens,
            special,
            qwen.eos_ids().to_vec(),
        ));
        let tag = tool_calls::structural_tag(format, &tools, &ToolChoice::Auto, true).unwrap();
        let tables = stencil::Compiler::new(Arc::clone(&vocab))
            .compile_structural_tag(&tag, &StructuralTagOptions::default())
            .unwrap_or_else(|e| panic!("{format:?}: {e}"));
        let mut ids = Vec::new();
        for piece in pieces {
            match vocab.ids_named(piece) {
                named if specials.contains(piece) => ids.extend(named),
                _ => ids.extend(tokenizer.encode(*piece, false).unwrap().get_ids()),
            }
        }
        let special_ids: Vec<u32> = specials.iter().flat_map(|s| vocab.ids_named(s)).collect();
        assert!(
            ids.iter().any(|id| special_ids.contains(id)),
            "{format:?}: the output holds a special token"
        );
        oracle::assert_token_masks_agree(&tables, &ids);
        let mut matcher = stencil::matcher::TokenMatcher::new(Arc::clone(&tables));
        matcher.consume_tokens(&ids).unwrap();
        assert!(matcher.is_accepting(), "{format:?}: {pieces:?}");
        // The same output spelled in text is accepted too.
        let spelled = pieces.concat();
        let text_ids = tokenizer
            .encode(spelled.as_str(), false)
            .unwrap()
            .get_ids()
            .to_vec();
        let mut matcher = stencil::matcher::TokenMatcher::new(Arc::clone(&tables));
        matcher.consume_tokens(&text_ids).unwrap();
        assert!(matcher.is_accepting(), "{format:?}: {spelled} as text");
        let shown = String::from_utf8(vocab.decode_shown(&ids)).unwrap();
        assert_eq!(shown, spelled, "{format:?}");
        let parsed = tool_calls::parse_reply(format, &shown, &tools);
        assert_eq!(parsed.calls.len(), 1, "{format:?}: {parsed:?}");
        assert_eq!(parsed.calls[0].name, "get_weather");
        let arguments: Value = serde_json::from_str(&parsed.calls[0].arguments).unwrap();
        assert_eq!(
            arguments,
            serde_json::json!({"city": "Paris"}),
            "{format:?}"
        );
    }
}

/// Every format writes a call (`call_text`, as the server writes earlier calls
/// back into a prompt) that its own structural tag accepts in every mode that
/// allows it, and that reads back (whole and streamed) into the same call.
#[test]
fn every_format_reads_back_what_it_writes() {
    let tools = tool_calls::read_tools(&serde_json::json!([
        {"name": "edit", "parameters": {"type": "object", "properties": {
            "path": {"type": "string"}, "text": {"type": "string"}, "line": {"type": "integer"},
            "options": {"type": "object", "properties": {"dry": {"type": "boolean"}}}},
            "required": ["path", "text"]}},
        {"name": "noop", "parameters": {"type": "object", "properties": {}}}
    ]))
    .unwrap();
    let arguments = serde_json::json!({
        "path": "src/a b.rs", "text": "if a < b {\n    x = \"y\";\n}", "line": 12,
        "options": {"dry": true}});
    for (format, name) in ToolCallFormat::ALL.into_iter().zip(ToolCallFormat::NAMES) {
        assert_eq!(ToolCallFormat::by_name(name), Some(format));
        let text = tool_calls::call_text(format, "edit", &arguments, "a1b2c3d4e");
        for choice in [
            ToolChoice::Auto,
            ToolChoice::Required,
            ToolChoice::Function("edit".into()),
        ] {
            for parallel in [false, true] {
                let tag = tool_calls::structural_tag(format, &tools, &choice, parallel).unwrap();
                let grammar = structural_tag::parse(
                    &tag,
                    &StructuralTagOptions::default(),
                    &PatternCache::default(),
                )
                .unwrap();
                let grammar = Arc::new(
                    CompiledGrammar::compile(&grammar, &CompileOptions::default()).unwrap(),
                );
                assert!(
                    accepts(&grammar, &text),
                    "{format:?} {choice:?} parallel {parallel} refuses {text:?}\n{tag}"
                );
                let other = text.replacen("edit", "noop", 1);
                assert!(
                    !accepts(&grammar, &other),
                    "{format:?} {choice:?} takes noop with edit's arguments"
                );
            }
        }
        let reply = tool_calls::parse_reply(format, &text, &tools);
        assert_eq!(reply.content, "", "{format:?}: {text:?}");
        assert_eq!(reply.calls.len(), 1, "{format:?}: {text:?}");
        assert_eq!(reply.calls[0].name, "edit");
        let read: Value = serde_json::from_str(&reply.calls[0].arguments).unwrap();
        assert_eq!(read, arguments, "{format:?}: {text:?}");
        let streamed = tool_calls::calls_in_progress(format, &text, &tools);
        if format != ToolCallFormat::MistralNemo {
            let read: Value = serde_json::from_str(&streamed[0].arguments).unwrap();
            assert_eq!((streamed[0].name, read), ("edit", arguments.clone()));
        }
    }
}

/// Templates that do not render the conversation, with the reason.
const UNRENDERED: [(&str, &str); 1] = [(
    "fireworks-ai-llama-3-firefunction-v2.jinja",
    "expects the caller to pass `datetime` and `functions` variables",
)];

/// Every chat template of the test data renders a conversation with tools, a
/// call and the call's result, as the server hands it over: a template that
/// renders tools in a format stencil knows gets OpenAI's messages as they are;
/// any other gets the calls written into the assistant's text and the results
/// as user turns (the tools then go in a system message). The rendered prompt
/// shows the tool and the last question. Templates run through minijinja with
/// Python's string methods, as the decode loop runs them.
#[cfg(feature = "decode")]
#[test]
fn every_template_renders_tools_and_a_tool_result() {
    let Some(dir) = data() else {
        eprintln!("../shared/data/chat-templates not found: skipped");
        return;
    };
    let tools = serde_json::json!([{"type": "function", "function": {
        "name": "get_weather", "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "The city's name"}},
                       "required": ["city"]}}}]);
    let native = serde_json::json!([
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "a1b2c3d4e", "type": "function",
            "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "tool_call_id": "a1b2c3d4e", "name": "get_weather",
         "content": "{\"temperature\": 21}"},
        {"role": "assistant", "content": "It is 21 degrees in Paris."},
        {"role": "user", "content": "Thanks. And tomorrow?"},
    ]);
    let mut templates: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jinja"))
        .collect();
    templates.sort();
    let mut failures = Vec::new();
    let mut rendered = 0;
    for path in &templates {
        let template = std::fs::read_to_string(path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let prompting = tool_calls::ToolPrompting::for_template(Some(&template), None);
        let (messages, offered) = if prompting.native {
            (native.clone(), Some(&tools))
        } else {
            let call = tool_calls::call_text(
                prompting.format,
                "get_weather",
                &serde_json::json!({"city": "Paris"}),
                "a1b2c3d4e",
            );
            let offer = tool_calls::tool_system_prompt(prompting.format, &tools);
            let flat = serde_json::json!([
                {"role": "system", "content": format!("You are helpful.\n\n{offer}")},
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": call},
                {"role": "user", "content": "<tool_response>\n{\"temperature\": 21}\n</tool_response>"},
                {"role": "assistant", "content": "It is 21 degrees in Paris."},
                {"role": "user", "content": "Thanks. And tomorrow?"},
            ]);
            (flat, None)
        };
        let result = stencil::decode::render_chat_json(
            &template,
            &messages,
            offered,
            Some("<s>"),
            Some("</s>"),
        );
        let known = UNRENDERED.iter().find(|(n, _)| *n == name);
        match (result, known) {
            (Ok(text), None) => {
                rendered += 1;
                // A template that renders no tools (its model has none) still
                // renders the conversation.
                let tool_needle =
                    (template.contains("tools") || !prompting.native).then_some("get_weather");
                for needle in [tool_needle, Some("Thanks. And tomorrow?")]
                    .into_iter()
                    .flatten()
                {
                    if !text.contains(needle) {
                        failures.push(format!("{name}: no {needle:?} in the prompt"));
                    }
                }
            }
            (Ok(_), Some(_)) => {
                failures.push(format!("{name}: renders now; take it off UNRENDERED"))
            }
            (Err(e), None) => failures.push(format!("{name}: {e}")),
            (Err(_), Some((_, why))) => println!("{name}: not rendered: {why}"),
        }
    }
    println!(
        "{rendered} of {} templates rendered with tools and a tool result",
        templates.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(templates.len() >= 70);
}

/// XGrammar's built-in model formats (`get_model_structural_tag` in its
/// `structural_tag.cases.json`) whose format stencil also builds, as the same
/// request to stencil's format of that model. Names XGrammar has and stencil
/// has not (or writes otherwise: Cohere's `<cofl:...>`, EXAONE's Hermes without
/// newlines, Kimi K3) are counted, not run.
fn builtin_format(model: &str) -> Option<ToolCallFormat> {
    Some(match model {
        "qwen_3" => ToolCallFormat::Hermes,
        "qwen_3_coder" => ToolCallFormat::QwenXml,
        "glm_4_7" => ToolCallFormat::Glm,
        "minimax" => ToolCallFormat::MiniMax,
        "deepseek_v3_2" => ToolCallFormat::DeepSeekDsml,
        "deepseek_v4" => ToolCallFormat::DeepSeekV4,
        "deepseek_r1" => ToolCallFormat::DeepSeekR1,
        "kimi" => ToolCallFormat::KimiK2,
        "llama" => ToolCallFormat::Llama3Json,
        "harmony" => ToolCallFormat::Harmony,
        "kimi_k3" => ToolCallFormat::KimiK3,
        _ => return None,
    })
}

/// Where stencil's format of a model and XGrammar's built-in one differ on
/// purpose, by case (`test_fn#n`, numbered per function as in
/// `tests/structural_tag.rs`), with the reason.
const BUILTIN_DIFFERENCES: [(&str, &str); 8] = [
    (
        "test_kimi_k3_full_tool_call_with_nested_arguments_and_any_order#1",
        "XML parameters in any order (models reorder them), each once",
    ),
    (
        "test_kimi_k3_free_form_arguments_keep_every_type_attribute#0",
        "a tool without `parameters` takes no arguments (strict: declared ones only)",
    ),
    (
        "test_harmony_builtin_tool_instance#0",
        "gpt-oss's built-in tools (`to=browser.search`): stencil's tools are functions",
    ),
    (
        "test_tool_choice_instances#14",
        "Qwen3-Coder's template frames a string value in newlines: stencil writes that layout only",
    ),
    (
        "test_tool_choice_instances#15",
        "Qwen3-Coder's template frames a string value in newlines: stencil writes that layout only",
    ),
    (
        "test_glm_required_allows_termination_with_trailing_text#0",
        "`required` ends the reply with its calls: no text after them",
    ),
    (
        "test_glm_required_allows_termination_with_trailing_text#1",
        "`required` ends the reply with its calls: no text after them",
    ),
    (
        "test_any_order_reordered_arguments_accepted_only_when_enabled#1",
        "JSON arguments keep the schema's property order (XGrammar's `any_order` option)",
    ),
];

#[test]
fn xgrammar_builtin_model_cases_under_stencils_formats() {
    let Some(dir) = data() else {
        eprintln!("../shared/data not found: skipped");
        return;
    };
    let path = dir.join("../grammars/xgrammar/structural_tag.cases.json");
    let cases: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut seen = std::collections::HashMap::<String, usize>::new();
    let (mut checked, mut others, mut failures) = (0, Vec::new(), Vec::new());
    for case in &cases {
        let test_fn = case["test_fn"].as_str().unwrap();
        let n = seen.entry(test_fn.to_string()).or_default();
        let id = format!("{test_fn}#{n}");
        *n += 1;
        if case["kind"] != "builtin_model" {
            continue;
        }
        let call = &case["builtin_call"];
        let model = call["model"].as_str().unwrap();
        let Some(format) = builtin_format(model) else {
            others.push(model.to_string());
            continue;
        };
        let tools = match tool_calls::read_tools(&call["tools"]) {
            Ok(tools) => tools,
            // A built-in tool (harmony's `browser.search`), not a function.
            Err(_) => {
                others.push(format!("{model} built-in tool"));
                continue;
            }
        };
        let choice = tool_calls::read_tool_choice(call.get("tool_choice"), &tools).unwrap();
        let tag = tool_calls::structural_tag(format, &tools, &choice, true).unwrap();
        // XGrammar's `reasoning: true`: the prompt opened the span.
        let tag = match call["reasoning"] == true {
            true => tool_calls::with_reasoning(
                &tag,
                &Reasoning {
                    open: None,
                    close: "</think>".into(),
                    optional: false,
                    close_alone: false,
                },
            ),
            false => tag,
        };
        let grammar = structural_tag::parse(
            &tag,
            &StructuralTagOptions::default(),
            &PatternCache::default(),
        )
        .unwrap();
        let grammar =
            Arc::new(CompiledGrammar::compile(&grammar, &CompileOptions::default()).unwrap());
        let mut wrong = Vec::new();
        for (key, want) in [("accept", true), ("reject", false)] {
            for text in case[key].as_array().unwrap() {
                let text = text.as_str().unwrap();
                if accepts(&grammar, text) != want {
                    wrong.push(format!("{key}s {text:?}"));
                }
            }
        }
        let known = BUILTIN_DIFFERENCES.iter().find(|(c, _)| *c == id);
        match (wrong.is_empty(), known) {
            (true, None) => {}
            (true, Some((_, why))) => failures.push(format!("{id}: listed ({why}) but agrees now")),
            (false, Some(_)) => {}
            (false, None) => {
                failures.push(format!("{id} ({model}): XGrammar {}", wrong.join("; ")))
            }
        }
        checked += 1;
    }
    others.sort();
    others.dedup();
    println!("{checked} built-in model cases checked; not stencil's: {others:?}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked >= 20, "only {checked} cases");
}
