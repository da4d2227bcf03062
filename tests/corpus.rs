//! Corpus suites over `../shared/data` (real grammars and peers' test vectors).
//!
//! Ignored in the default `cargo test` (the data is not in the repository); `.ci/run`
//! runs them in release mode with `--include-ignored` when the folder exists. The
//! folder is `$STENCIL_SHARED_DATA`, else `../shared/data` beside the crate.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use stencil::{compile_gbnf, compile_regex, CompiledGrammar, Matcher};

fn shared_data() -> PathBuf {
    let path = std::env::var_os("STENCIL_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data"));
    assert!(
        path.is_dir(),
        "corpus folder {} not found (set STENCIL_SHARED_DATA)",
        path.display()
    );
    path
}

fn read_json(relative: &str) -> Value {
    let path = shared_data().join(relative);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn accepts(grammar: &Arc<CompiledGrammar>, input: &str) -> bool {
    let mut m = Matcher::new(Arc::clone(grammar));
    m.consume_bytes(input.as_bytes()).is_ok() && m.is_accepting()
}

fn strings(case: &Value, key: &str) -> Vec<String> {
    case[key]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Checks accept/reject lists; returns the wrong verdicts.
fn wrong_verdicts(name: &str, grammar: &Arc<CompiledGrammar>, case: &Value) -> Vec<String> {
    let mut wrong = Vec::new();
    for s in strings(case, "accept") {
        if !accepts(grammar, &s) {
            wrong.push(format!("{name}: rejected {s:?}, expected accept"));
        }
    }
    for s in strings(case, "reject") {
        if accepts(grammar, &s) {
            wrong.push(format!("{name}: accepted {s:?}, expected reject"));
        }
    }
    wrong
}

#[test]
#[ignore = "corpus: needs ../shared/data; run by .ci/run"]
fn every_shared_gbnf_grammar_compiles() {
    let dir = shared_data().join("gbnf");
    let mut files = Vec::new();
    for entry in walk(&dir) {
        if entry.extension().is_some_and(|e| e == "gbnf") {
            files.push(entry);
        }
    }
    assert!(files.len() >= 9, "found only {} grammars", files.len());
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        compile_gbnf(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    }
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out.sort();
    out
}

#[test]
#[ignore = "corpus: needs ../shared/data; run by .ci/run"]
fn llama_cpp_integration_cases() {
    let cases = read_json("gbnf/llama.cpp-tests/grammar-integration.cases.json");
    let (mut checked, mut wrong) = (0, Vec::new());
    for case in cases.as_array().unwrap() {
        let name = case["name"].as_str().unwrap_or("?");
        let grammar = case["grammar"].as_str().unwrap_or("");
        match case["kind"].as_str() {
            // The token cases compile (ids need no vocabulary); their text
            // inputs are checked here, the token sequences llama.cpp builds
            // with `token(id)` in tests/tokens.rs.
            Some("gbnf") => {
                let g = compile_gbnf(grammar).unwrap_or_else(|e| panic!("{name}: {e}"));
                wrong.extend(wrong_verdicts(name, &g, case));
                checked += 1;
            }
            Some("gbnf_invalid") => {
                let reason = case["reason"].as_str().unwrap_or("");
                let result = compile_gbnf(grammar);
                if reason.contains("left recursion") {
                    // llama.cpp cannot parse left recursion; the Earley parser can.
                    assert!(result.is_ok(), "{name}: {:?}", result.err());
                } else {
                    assert!(
                        result.is_err(),
                        "{name}: expected a compile error ({reason})"
                    );
                }
                checked += 1;
            }
            _ => {}
        }
    }
    assert!(checked >= 19, "checked only {checked} cases");
    assert!(
        wrong.is_empty(),
        "{} wrong verdicts:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
#[ignore = "corpus: needs ../shared/data; run by .ci/run"]
fn xgrammar_regex_and_ebnf_cases() {
    let cases = read_json("grammars/xgrammar/cases.json");
    let (mut compiled, mut unsupported, mut wrong) = (0, Vec::new(), Vec::new());
    for case in cases.as_array().unwrap() {
        let name = format!(
            "{}::{}",
            case["test_fn"].as_str().unwrap_or("?"),
            case["grammar"]
                .as_str()
                .unwrap_or("")
                .chars()
                .take(60)
                .collect::<String>()
        );
        let text = case["grammar"].as_str().unwrap_or("");
        let grammar = match case["kind"].as_str() {
            Some("regex") => compile_regex(text),
            Some("ebnf_xgrammar") if case.get("root_rule").is_none() => compile_gbnf(text),
            _ => continue,
        };
        match grammar {
            Ok(g) => {
                compiled += 1;
                wrong.extend(wrong_verdicts(&name, &g, case));
            }
            Err(e) => unsupported.push(format!("{name}: {e}")),
        }
    }
    println!(
        "xgrammar regex+ebnf cases: {compiled} compiled, {} unsupported",
        unsupported.len()
    );
    for u in &unsupported {
        println!("  unsupported {u}");
    }
    assert!(compiled >= 40, "compiled only {compiled}");
    assert!(
        wrong.is_empty(),
        "{} wrong verdicts:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

// ---------------------------------------------------------------------------------
// Vocabularies and token masks on every real tokenizer.

#[path = "support/oracle.rs"]
mod oracle;

use stencil::tables::TokenTables;
use stencil::vocab::Vocabulary;

const TOKENIZERS: &[&str] = &[
    "llama3/tokenizer.json",
    "qwen3/tokenizer.json",
    "gpt2/tokenizer.json",
    "llama2/tokenizer.json",
    "mistral-7b-v0.1/tokenizer.json",
    "deepseek-v3/tokenizer.json",
    "gemma3/tokenizer.json.gz",
    "gemma-256k/tokenizer.json.gz",
    "gpt-4o/tokenizer.json",
];

fn load_vocab(relative: &str) -> Arc<Vocabulary> {
    let path = shared_data().join("tokenizers").join(relative);
    Arc::new(Vocabulary::from_tokenizer_file(&path).unwrap_or_else(|e| panic!("{e}")))
}

/// llama.cpp's tokenizer vectors: the bytes of the expected token ids must spell the
/// input (SentencePiece vocabularies add one leading space).
#[test]
#[ignore = "corpus: needs ../shared/data; run by .ci/run"]
fn llama_cpp_vocab_vectors_decode_to_their_text() {
    let cases = [
        ("llama3/tokenizer.json", "ggml-vocab-llama-bpe", false),
        ("qwen3/tokenizer.json", "ggml-vocab-qwen2", false),
        ("gpt2/tokenizer.json", "ggml-vocab-gpt-2", false),
        ("llama2/tokenizer.json", "ggml-vocab-llama-spm", true),
        ("llama2/tokenizer.json", "ggml-vocab-phi-3", true),
    ];
    for (tokenizer, vectors, sentencepiece) in cases {
        let vocab = load_vocab(tokenizer);
        let dir = shared_data().join("tokenizers/llama.cpp-vocab-tests");
        let inputs = std::fs::read_to_string(dir.join(format!("{vectors}.gguf.inp"))).unwrap();
        let outputs = std::fs::read_to_string(dir.join(format!("{vectors}.gguf.out"))).unwrap();
        let inputs: Vec<&str> = inputs.split("\n__ggml_vocab_test__\n").collect();
        let outputs: Vec<&str> = outputs.lines().collect();
        assert!(inputs.len() >= 40, "{vectors}: {} inputs", inputs.len());
        for (text, ids) in inputs.iter().zip(&outputs) {
            let ids: Vec<u32> = ids.split_whitespace().map(|t| t.parse().unwrap()).collect();
            let bytes = vocab.decode(&ids);
            let expected = if sentencepiece && !text.is_empty() {
                format!(" {text}")
            } else {
                text.to_string()
            };
            assert_eq!(
                String::from_utf8_lossy(&bytes),
                expected,
                "{tokenizer} on {vectors}: ids {ids:?}"
            );
        }
    }
}

/// Every tokenizer loads, encodes and decodes back to the text, and its masks agree
/// with the brute-force definition (twice: cold, then from the caches).
#[test]
#[ignore = "corpus: needs ../shared/data; run by .ci/run"]
fn masks_match_the_oracle_on_every_tokenizer() {
    let grammar = compile_gbnf(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/grammars/json.gbnf"))
            .unwrap(),
    )
    .unwrap();
    let samples = [
        "{\"name\": \"caf\u{e9} \\\"x\\\"\", \"tags\": [\"a\", \"b\"], \"n\": -12.5e3, \"ok\": true}",
        "[1, 2, {\"\u{1F600}\": \"\u{4e2d}\u{6587}\", \"\u{43f}\u{440}\u{438}\": null}]",
    ];
    for relative in TOKENIZERS {
        let vocab = load_vocab(relative);
        assert!(
            !vocab.eos_ids().is_empty(),
            "{relative}: no EOS from tokenizer_config.json"
        );
        let path = shared_data().join("tokenizers").join(relative);
        let tokenizer = stencil::vocab::load_tokenizer(&path).unwrap();
        for text in samples {
            let ids = tokenizer.encode(text, false).unwrap().get_ids().to_vec();
            let decoded = String::from_utf8(vocab.decode(&ids)).unwrap();
            assert_eq!(
                decoded.trim_start_matches(' '),
                text.trim_start_matches(' '),
                "{relative}: round trip"
            );
        }
        let tables = Arc::new(TokenTables::new(Arc::clone(&grammar), Arc::clone(&vocab)));
        for pass in ["cold", "cached"] {
            for text in samples {
                for p in oracle::prefix_positions(text.as_bytes(), 25) {
                    let what = format!("{relative} ({pass})");
                    oracle::assert_mask_is_the_oracles(&tables, &text.as_bytes()[..p], &what);
                }
            }
        }
    }
}

/// Lark grammars with special tokens and lazy rules over Llama-3 and Qwen3: the
/// mask after every prefix of a real tokenization equals the brute-force one
/// (each token consumed in turn), special tokens included.
#[test]
#[ignore = "corpus: needs ../shared/data; run by .ci/run"]
fn special_token_masks_match_the_oracle_on_llama3_and_qwen3() {
    // Each case: grammar, then the output as pieces: `<...>` is one special
    // token (`<[id]>` by id: this Llama-3 vocabulary has 3.0's names, where
    // 3.1's `<|python_tag|>` 128010 is a reserved token), anything else text
    // tokenized as a whole.
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "qwen3/tokenizer.json",
            r#"start: <think> THOUGHT </think> "\n\n" answer
THOUGHT: /[^<>]*/
answer: TEXT | TEXT? <tool_call> "\n" call "\n" </tool_call>
TEXT: /[A-Za-z ,.!]+/
call: %json {"type": "object", "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}}, "required": ["name", "arguments"]}"#,
            &[
                "<think>",
                "Weather in Paris? Use the tool.",
                "</think>",
                "\n\nSure.",
                "<tool_call>",
                "\n{\"name\": \"get\", \"arguments\": {\"city\": \"Paris\"}}\n",
                "</tool_call>",
            ],
        ),
        (
            "qwen3/tokenizer.json",
            r#"start: head <tool_call> BODY </tool_call>
head[lazy]: /(.|\n)*/ "Call:"
BODY: /[a-z_]+\([0-9, ]*\)/"#,
            &[
                "I will call it.\nCall:",
                "<tool_call>",
                "add(1, 2)",
                "</tool_call>",
            ],
        ),
        (
            "llama3/tokenizer.json",
            r#"start: <|start_header_id|> ROLE <|end_header_id|> "\n\n" (TEXT | <[128010]> CALL)
ROLE: "assistant" | "ipython"
TEXT: /[^<]{0,80}/
CALL: /[a-z_.]+\([a-z0-9="', ]*\)/"#,
            &[
                "<|start_header_id|>",
                "assistant",
                "<|end_header_id|>",
                "\n\n",
                "<[128010]>",
                "brave_search.call(query=\"x\")",
            ],
        ),
        (
            "llama3/tokenizer.json",
            r#"start: item+ <[128010]> <[^128000-128255]>*
item[lazy]: /[a-z ]+/ ";"
"#,
            &["ab c;", "x;", "<[128010]>", "free text after the tag"],
        ),
    ];
    for (relative, grammar, pieces) in cases {
        let vocab = load_vocab(relative);
        let compiler = stencil::Compiler::new(Arc::clone(&vocab));
        let tables = compiler
            .compile_lark(grammar)
            .unwrap_or_else(|e| panic!("{relative}: {e}\n{grammar}"));
        let path = shared_data().join("tokenizers").join(relative);
        let tokenizer = stencil::vocab::load_tokenizer(&path).unwrap();
        let mut tokens = Vec::new();
        for piece in *pieces {
            if let Some(id) = piece.strip_prefix("<[").and_then(|p| p.strip_suffix("]>")) {
                tokens.push(id.parse().unwrap());
                continue;
            }
            let named = vocab.ids_named(piece);
            if piece.starts_with('<') && named.len() == 1 && vocab.token_bytes(named[0]).is_empty()
            {
                tokens.push(named[0]);
            } else {
                tokens.extend(tokenizer.encode(*piece, false).unwrap().get_ids());
            }
        }
        oracle::assert_token_masks_agree(&tables, &tokens);
        let mut matcher = stencil::matcher::TokenMatcher::new(Arc::clone(&tables));
        matcher.consume_tokens(&tokens).unwrap();
        assert!(
            matcher.is_accepting(),
            "{relative}: {pieces:?} is a sentence"
        );
    }
    // A structural tag over Llama-3 whose text trigger and delimiters are its
    // special tokens: written as those tokens, masks still the oracle's.
    let vocab = load_vocab("llama3/tokenizer.json");
    let tokenizer =
        stencil::vocab::load_tokenizer(shared_data().join("tokenizers/llama3/tokenizer.json"))
            .unwrap();
    let tag = serde_json::json!({"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": ["<|start_header_id|>"],
        "tags": [{"begin": "<|start_header_id|>ipython<|end_header_id|>\n\n",
                  "content": {"type": "json_schema", "json_schema": {"type": "object",
                      "properties": {"q": {"type": "string"}}, "required": ["q"]}},
                  "end": "\n"}]}});
    let tables = stencil::Compiler::new(Arc::clone(&vocab))
        .compile_structural_tag(&tag, &Default::default())
        .unwrap();
    let mut tokens = tokenizer
        .encode("Searching.", false)
        .unwrap()
        .get_ids()
        .to_vec();
    tokens.extend(vocab.ids_named("<|start_header_id|>"));
    tokens.extend(tokenizer.encode("ipython", false).unwrap().get_ids());
    tokens.extend(vocab.ids_named("<|end_header_id|>"));
    tokens.extend(
        tokenizer
            .encode("\n\n{\"q\": \"x\"}\nDone.", false)
            .unwrap()
            .get_ids(),
    );
    oracle::assert_token_masks_agree(&tables, &tokens);
    let mut matcher = stencil::matcher::TokenMatcher::new(tables);
    matcher.consume_tokens(&tokens).unwrap();
    assert!(matcher.is_accepting());
}

/// Free text in every state a delimiter's partial match leaves it in (after
/// `<`, `</th`, `<tool_cal`, a `<` that starts over): the masks equal the
/// brute-force ones at every byte, over Llama-3 and Qwen3. Those states take a
/// looping state's tables for most first bytes and walk the rest, and free
/// text that may end anywhere takes its class slice with every other byte as
/// an exit: both shortcuts are checked here against the definition.
#[test]
#[ignore = "corpus: needs ../shared/data; run by .ci/run"]
fn free_text_masks_match_the_oracle_in_partial_matches() {
    let lark = r#"start: "<think>" think body
think[suffix="</think>"]: /(.|\n)*/
body: (text "{" NAME "}" "</tool_call>")* tail
text[suffix="<tool_call>"]: /(.|\n)*/
NAME: /[a-z]+/
tail: /[^<]*/"#;
    let lark_text = "<think>a < b, </th and <</thin ok</think>x <tool <tool_cal <<tool_call>{f}</tool_call>\u{e9}t\u{e9} <tool_call>{g}</tool_call> end";
    // Text that may end anywhere, before a byte it cannot read ("x!").
    let sentences = r#"start: SENTENCE ("!" start)?
SENTENCE: /[^!]*/"#;
    let sentences_text = "Hi there! A sentence\n\u{e9}t\u{e9}! Last";
    let tag = serde_json::json!({"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"},
        {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": [{
            "begin": "<tool_call>", "end": "</tool_call>",
            "content": {"type": "json_schema", "json_schema": {"type": "object",
                "properties": {"n": {"type": "integer"}}, "required": ["n"]}}}]}]}});
    let tag_text = "<think>x </thi y</think>a <tool_ca b <<tool_call>{\"n\": 1}</tool_call> <to c";
    for relative in ["llama3/tokenizer.json", "qwen3/tokenizer.json"] {
        let vocab = load_vocab(relative);
        let compiler = stencil::Compiler::new(Arc::clone(&vocab));
        let grammars = [
            (compiler.compile_lark(lark).unwrap(), lark_text),
            (compiler.compile_lark(sentences).unwrap(), sentences_text),
            (
                compiler
                    .compile_structural_tag(&tag, &Default::default())
                    .unwrap(),
                tag_text,
            ),
        ];
        for (tables, text) in grammars {
            for p in (0..=text.len()).filter(|&p| text.is_char_boundary(p)) {
                oracle::assert_mask_is_the_oracles(&tables, &text.as_bytes()[..p], relative);
            }
        }
    }
}
