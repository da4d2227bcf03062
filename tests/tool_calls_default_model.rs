//! The default model (SmolLM2-135M-Instruct) calling tools from 50 tool sets of
//! the BFCL records in JSONSchemaBench (`../shared/data/jsonschemabench/maskbench/
//! BFCL_*.jsonl.gz`: each `anyOf` branch, or the one object, is a function name
//! and its parameters), offered as the server offers them to a model whose
//! template has no tools (described in a system message, Hermes calls):
//!
//! * `required` and a named tool: every output is calls that parse back, each
//!   naming a tool (the named one) with arguments that validate against its
//!   schema (the `jsonschema` crate, independent of stencil);
//! * `auto`: every call that appears parses and validates;
//! * a reasoning budget: the span never holds more tokens than the budget;
//! * `none`: no call.
//!
//! Ignored by default (the release corpus step of `.ci/run`).
#![cfg(feature = "decode")]

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Value};
use stencil::decode::reasoning::ReasoningBudget;
use stencil::decode::{FinishReason, Generation, Generator, Model, ModelTokenizer, Request};
use stencil::frontend::json_schema::JsonSchemaOptions;
use stencil::frontend::structural_tag::StructuralTagOptions;
use stencil::frontend::tool_calls::{self, Reasoning, Tool, ToolCallFormat, ToolChoice};
use stencil::matcher::StopPolicy;
use stencil::sampling::SamplingConfig;

const TOOL_SETS: usize = 50;
const MAX_TOKENS: usize = 160;
const REASONING_BUDGET: usize = 8;
const BATCH: usize = 16;

fn shared_data() -> PathBuf {
    std::env::var("STENCIL_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/data")))
}

/// One BFCL record as a tool set: its `tools` array (OpenAI's shape), the
/// tools read, and the ground truth's call (name and arguments).
struct ToolSet {
    id: String,
    definitions: Value,
    tools: Vec<Tool>,
    expected: (String, Value),
}

fn tool_set(id: String, record: &Value) -> Option<ToolSet> {
    let schema = &record["schema"];
    let branches = match schema.get("anyOf") {
        Some(Value::Array(b)) => b.clone(),
        _ => vec![schema.clone()],
    };
    let mut definitions = Vec::new();
    for branch in &branches {
        let (name, parameters) = branch["properties"].as_object()?.iter().next()?;
        definitions.push(json!({"type": "function",
            "function": {"name": name, "parameters": parameters}}));
    }
    let definitions = Value::Array(definitions);
    let tools = tool_calls::read_tools(&definitions).ok()?;
    let strict = JsonSchemaOptions {
        strict: true,
        plain_integers: true,
        ..JsonSchemaOptions::default()
    };
    tool_calls::check_parameters(&definitions, &tools, &strict).ok()?;
    let truth = record["tests"]
        .as_array()?
        .iter()
        .find(|t| t["valid"] == true)?;
    let (name, arguments) = truth["data"].as_object()?.iter().next()?;
    Some(ToolSet {
        id,
        definitions,
        tools,
        expected: (name.clone(), arguments.clone()),
    })
}

/// 50 tool sets spread over the BFCL files whose schemas all compile.
fn tool_sets() -> Vec<ToolSet> {
    let dir = shared_data().join("jsonschemabench/maskbench");
    let mut all = Vec::new();
    let mut refused = 0;
    for set in [
        "simple",
        "multiple",
        "parallel",
        "parallel_multiple",
        "java",
        "javascript",
        "sql",
    ] {
        let file = std::fs::File::open(dir.join(format!("BFCL_{set}.jsonl.gz"))).unwrap();
        let mut text = String::new();
        flate2::read::GzDecoder::new(file)
            .read_to_string(&mut text)
            .unwrap();
        let lines: Vec<&str> = text.lines().collect();
        // Seven or eight from each file, spread over it.
        let take = TOOL_SETS.div_ceil(7);
        for k in 0..take {
            let line: Value = serde_json::from_str(lines[k * lines.len() / take]).unwrap();
            let record: Value = serde_json::from_str(line["record"].as_str().unwrap()).unwrap();
            match tool_set(line["file"].as_str().unwrap().to_string(), &record) {
                Some(t) => all.push(t),
                None => refused += 1,
            }
        }
    }
    println!(
        "{} tool sets, {refused} refused (a schema stencil cannot enforce)",
        all.len()
    );
    all.truncate(TOOL_SETS);
    all
}

fn load() -> Generator {
    let path = shared_data().join("models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf");
    let model = Model::load(&path, &candle_core::Device::Cpu).unwrap();
    let tokenizer =
        ModelTokenizer::from_gguf(model.gguf_metadata().unwrap(), "default model").unwrap();
    Generator::new(model, tokenizer)
}

/// How a request constrains the reply.
#[derive(Debug, Clone)]
struct Mode {
    choice: ToolChoice,
    parallel: bool,
    reasoning: bool,
}

fn request(g: &Generator, set: &ToolSet, mode: &Mode, seed: u64) -> Request {
    let tokenizer = g.tokenizer();
    let template = tokenizer.chat_template().unwrap();
    let prompting = tool_calls::ToolPrompting::for_template(Some(template), None);
    assert_eq!(prompting.format, ToolCallFormat::Hermes);
    assert!(
        !prompting.native,
        "the default model's template has no tools"
    );
    let (name, arguments) = &set.expected;
    let messages = json!([
        {"role": "system", "content": tool_calls::tool_system_prompt(prompting.format, &set.definitions)},
        {"role": "user", "content": format!("Please run {name} with {arguments}.")},
    ]);
    let prompt = stencil::decode::render_chat_json(template, &messages, None, None, None).unwrap();
    let tag = tool_calls::structural_tag(prompting.format, &set.tools, &mode.choice, mode.parallel)
        .unwrap();
    let span = mode
        .reasoning
        .then(|| Reasoning::for_template(Some(template), &prompt));
    let tag = match &span {
        Some(span) => tool_calls::with_reasoning(&tag, span),
        None => tag,
    };
    let mut options = StructuralTagOptions::default();
    options.json.strict = true;
    options.json.plain_integers = true;
    let tables = stencil::Compiler::new(Arc::clone(tokenizer.vocab()))
        .compile_structural_tag(&tag, &options)
        .unwrap_or_else(|e| panic!("{}: {e}", set.id));
    Request {
        prompt: tokenizer.encode_prompt(&prompt).unwrap(),
        grammar: Some(tables),
        stop_policy: StopPolicy::Stop,
        sampling: SamplingConfig {
            seed: Some(seed),
            // Half greedy, half sampled.
            temperature: Some(if seed.is_multiple_of(2) { 0.0 } else { 0.8 }),
            ..SamplingConfig::default()
        },
        max_tokens: MAX_TOKENS,
        jump_forward: true,
        logprobs: 0,
        trace: false,
        budget_steering: true,
        reasoning: span.map(|s| ReasoningBudget {
            open: s.open,
            close: s.close,
            max_tokens: REASONING_BUDGET,
        }),
    }
}

/// The calls of a reply, each checked: a tool of the set (the named one when
/// the mode names one), arguments that validate. Returns how many.
fn checked_calls(set: &ToolSet, mode: &Mode, g: &Generation) -> usize {
    let reply = if mode.reasoning {
        let span = Reasoning {
            open: Some("<think>".into()),
            close: "</think>".into(),
            optional: false,
            close_alone: false,
        };
        tool_calls::split_reasoning(&g.text, &span).1
    } else {
        &g.text
    };
    let parsed = tool_calls::parse_reply(ToolCallFormat::Hermes, reply, &set.tools);
    for call in &parsed.calls {
        let tool = set
            .tools
            .iter()
            .find(|t| t.name == call.name)
            .unwrap_or_else(|| panic!("{}: a call to {:?}: {:?}", set.id, call.name, g.text));
        if let ToolChoice::Function(name) = &mode.choice {
            assert_eq!(&call.name, name, "{}: {:?}", set.id, g.text);
        }
        let arguments: Value = serde_json::from_str(&call.arguments).unwrap();
        let validator = jsonschema::validator_for(&tool.parameters).unwrap();
        assert!(
            validator.is_valid(&arguments),
            "{}: {} arguments {arguments} do not validate against {}",
            set.id,
            call.name,
            tool.parameters
        );
    }
    if g.finish_reason == FinishReason::Stop {
        // Whatever is not a call is content: a call the parser missed would
        // leave its trigger there.
        assert!(
            !parsed.content.contains("<tool_call>"),
            "{}: an unread call in {:?}",
            set.id,
            g.text
        );
    }
    parsed.calls.len()
}

#[test]
#[ignore = "needs ../shared/data (models, jsonschemabench): the release corpus step"]
fn default_model_calls_validate_on_bfcl_tool_sets() {
    let sets = tool_sets();
    assert_eq!(sets.len(), TOOL_SETS, "not enough BFCL tool sets compile");
    let g = load();
    let mut jobs: Vec<(usize, Mode, Request)> = Vec::new();
    for (i, set) in sets.iter().enumerate() {
        let seed = i as u64;
        let mut modes = vec![
            Mode {
                choice: ToolChoice::Required,
                parallel: true,
                reasoning: false,
            },
            Mode {
                choice: ToolChoice::Function(set.expected.0.clone()),
                parallel: false,
                reasoning: false,
            },
            Mode {
                choice: ToolChoice::Auto,
                parallel: true,
                reasoning: !i.is_multiple_of(2),
            },
        ];
        if i.is_multiple_of(5) {
            modes.push(Mode {
                choice: ToolChoice::None,
                parallel: true,
                reasoning: false,
            });
        }
        for mode in modes {
            let r = request(&g, set, &mode, seed);
            jobs.push((i, mode, r));
        }
    }
    let (mut calls, mut forced_calls, mut auto_calls, mut reasoned) = (0, 0, 0, 0);
    for batch in jobs.chunks(BATCH) {
        let requests = batch.iter().map(|(_, _, r)| r.clone()).collect();
        let outputs = g.generate_batch(requests, &mut |_| {}).unwrap();
        for ((i, mode, _), out) in batch.iter().zip(outputs) {
            let set = &sets[*i];
            assert!(out.error.is_none(), "{}: {:?}", set.id, out.error);
            let n = checked_calls(set, mode, &out);
            calls += n;
            if let Some(spent) = out.reasoning_tokens {
                assert!(
                    spent <= REASONING_BUDGET,
                    "{}: {spent} reasoning tokens",
                    set.id
                );
                reasoned += 1;
            }
            match mode.choice {
                ToolChoice::Required | ToolChoice::Function(_) => {
                    assert_eq!(
                        out.finish_reason,
                        FinishReason::Stop,
                        "{} {:?}: {:?}",
                        set.id,
                        mode.choice,
                        out.text
                    );
                    assert!(
                        n >= 1,
                        "{} {:?}: no call in {:?}",
                        set.id,
                        mode.choice,
                        out.text
                    );
                    if !mode.parallel {
                        assert_eq!(n, 1, "{}: {:?}", set.id, out.text);
                    }
                    forced_calls += 1;
                }
                ToolChoice::Auto => auto_calls += n,
                ToolChoice::None => assert_eq!(n, 0, "{}: {:?}", set.id, out.text),
            }
        }
    }
    println!(
        "{} requests over {} tool sets: {forced_calls} required/named outputs all calls, \
         {calls} calls validated ({auto_calls} under auto), {reasoned} reasoning spans within \
         {REASONING_BUDGET} tokens",
        jobs.len(),
        sets.len()
    );
}
