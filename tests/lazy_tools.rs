//! llguidance's lazy-lexeme and tool-call cases (`../shared/data/grammars/
//! llguidance/lazy_tools.cases.json`: its `test_ll.rs` Lark grammars with
//! accepted and rejected texts, and its Python struct-tag cases) through the
//! library behind `stencil check`.
//!
//! A Lark case passes when its grammar compiles (token names bound to the
//! vendored GPT-2 vocabulary) and every verdict is right: accepted texts
//! accepted, rejected ones rejected, `reject_at_end_only` texts viable but not
//! complete; a trace case's trace replays token by token over Phi-3.5's
//! vocabulary (see [`replay`]): that is where `max_tokens=` and special
//! tokens are checked. A struct-tag case runs as the legacy structural tag vLLM sends
//! (`structures` + `triggers`), the same tags. Stop-controller cases are the
//! sampling side's (stop strings), not a grammar's. Cases that need what is
//! not built, or whose verdict comes from llguidance's different semantics, are
//! listed in [`KNOWN`] with the reason; the test fails when an unlisted case
//! fails or a listed one starts passing. Skipped, with a message, when
//! `../shared` is absent.

#[path = "support/lark_cases.rs"]
mod lark_cases;

use std::path::PathBuf;
use std::sync::Arc;

use lark_cases::{compile, strings, verdict};
use serde_json::{json, Value};
use stencil::bits::has_bit;
use stencil::frontend::json_schema::PatternCache;
use stencil::frontend::structural_tag::{self, StructuralTagOptions};
use stencil::matcher::TokenMatcher;
use stencil::{CompileOptions, CompiledGrammar};

fn cases() -> Option<Vec<Value>> {
    let dir = std::env::var("STENCIL_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/data")));
    let path = dir.join("grammars/llguidance/lazy_tools.cases.json");
    let text = std::fs::read_to_string(path).ok()?;
    Some(serde_json::from_str(&text).unwrap())
}

const OFF_BY_ONE: &str = "trace: `max_tokens=2` over a nested grammar lets llguidance take three tokens (its test says \"TODO we're off by one here\"); stencil cuts the rule after two, so the third ` a` is masked";

const RECURSIVE_BUDGET: &str = "`max_tokens=` over `%json` (a recursive grammar: a budget counts one lexeme, refused with the rule's location); llguidance's trace also takes four tokens under a budget of three (\"again, off by one\")";

const LAZY_COMMITS: &str = "trace: llguidance's lexer commits to a lazy lexeme once it matches (`f1_hd` ends at `<function`, so `=` is forced); stencil keeps every reading (`f_end`'s TEXT may go on), so nothing is forced there";

/// Cases listed by id (`test_fn#n`), with the reason.
const KNOWN: &[(&str, &str)] = &[
    ("test_ll_max_tokens#2", "trace: after ` Em‧ily` two readings remain: `name` = \"Emily\" cut by its budget (the literal `Emily Carter...` follows whole), or `name` empty and the literal under way; llguidance keeps only the second (forcing ` Carter is great; Height:`), stencil both (forcing nothing)"),
    ("test_ll_tool_str_prototype#0", LAZY_COMMITS),
    ("test_ll_tool_str_prototype#1", LAZY_COMMITS),
    ("test_ll_tool_str_prototype#3", LAZY_COMMITS),
    ("test_ll_tool_str_prototype#4", LAZY_COMMITS),
    ("test_ll_tool_str_json#0", LAZY_COMMITS),
    ("test_struct_tag_0#1", "a trigger that is a special token of llguidance's byte tokenizer (`⁂<|tool|>`), and a Lark grammar as a legacy struct tag's content: the legacy shape takes JSON Schemas"),
    ("test_ll_json#3", RECURSIVE_BUDGET),
    ("test_ll_json#4", RECURSIVE_BUDGET),
    ("test_ll_subgrammar_max_tokens#8", OFF_BY_ONE),
    ("test_ll_subgrammar_max_tokens#9", OFF_BY_ONE),
];

/// The struct tags of llguidance's Python `StructTag` as the legacy structural
/// tag: free text until a trigger, then `begin`, the schema, `end`.
fn legacy_tag(case: &Value) -> Result<Arc<CompiledGrammar>, String> {
    let tags = case["struct_tags"].as_array().ok_or("no struct_tags")?;
    let mut triggers: Vec<String> = Vec::new();
    let mut structures = Vec::new();
    for t in tags {
        let trigger = t["trigger"].as_str().ok_or("no trigger")?.to_string();
        if !triggers.contains(&trigger) {
            triggers.push(trigger);
        }
        structures.push(json!({"begin": t["begin"], "schema": t["grammar"], "end": t["end"]}));
    }
    let tag = json!({"type": "structural_tag", "structures": structures, "triggers": triggers});
    let grammar = structural_tag::parse(
        &tag,
        &StructuralTagOptions::default(),
        &PatternCache::default(),
    )
    .map_err(|e| e.to_string())?;
    CompiledGrammar::compile(&grammar, &CompileOptions::default())
        .map(Arc::new)
        .map_err(|e| e.to_string())
}

/// Phi-3.5-mini's vocabulary as the traces see it: Llama-2's 32000 tokens,
/// then the added tokens the traces name at the ids the tests give them
/// (`<|endoftext|>` 32000, the end of sequence; `<|assistant|>` 32001,
/// `<|system|>` 32006, `<|end|>` 32007, `<|user|>` 32010), the other ids up
/// to 35000 unused (the tests' `<[33000]>`); with each token's bytes to its id.
struct TraceVocabulary {
    compiler: stencil::Compiler,
    ids: std::collections::HashMap<Vec<u8>, u32>,
}

const PHI_ADDED: [(u32, &str); 5] = [
    (32000, "<|endoftext|>"),
    (32001, "<|assistant|>"),
    (32006, "<|system|>"),
    (32007, "<|end|>"),
    (32010, "<|user|>"),
];

fn trace_vocabulary() -> Option<&'static TraceVocabulary> {
    static VOCAB: std::sync::OnceLock<Option<TraceVocabulary>> = std::sync::OnceLock::new();
    VOCAB
        .get_or_init(|| {
            let dir = std::env::var("STENCIL_SHARED_DATA")
                .map(PathBuf::from)
                .unwrap_or_else(|_| {
                    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/data"))
                });
            let path = dir.join("tokenizers/llama2/tokenizer.json");
            let llama = stencil::vocab::Vocabulary::from_tokenizer_file(path.to_str()?).ok()?;
            let mut tokens: Vec<Vec<u8>> = (0..llama.len() as u32)
                .map(|id| llama.token_bytes(id).to_vec())
                .collect();
            tokens.resize(35_000, Vec::new());
            let mut special = llama.special_tokens().to_vec();
            special.extend(PHI_ADDED.iter().map(|&(id, name)| (id, name.to_string())));
            let vocab = stencil::vocab::Vocabulary::from_token_bytes(tokens, special, vec![32000]);
            // Byte-fallback tokens (`<0x20>`) come first: a later id with the
            // same bytes is the piece itself (`▁`), the one a trace shows.
            let mut ids = std::collections::HashMap::new();
            for id in 0..vocab.len() as u32 {
                let bytes = vocab.token_bytes(id);
                if !bytes.is_empty() {
                    ids.insert(bytes.to_vec(), id);
                }
            }
            for (id, name) in vocab.special_tokens() {
                ids.insert(name.as_bytes().to_vec(), *id);
            }
            Some(TraceVocabulary {
                compiler: stencil::Compiler::new(Arc::new(vocab)),
                ids,
            })
        })
        .as_ref()
}

/// A forced chunk as the trace prints it (Rust's `{:?}` of each token).
fn unescape(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// Replays an llguidance trace (`lark_trace`, see SOURCES.md) token by token
/// over Phi-3.5's vocabulary ([`TraceVocabulary`]): the first element is
/// what the grammar forced before generation (consumed), or, where the test
/// gave a prompt, that prompt (not the grammar's); a sampled token (odd
/// elements) must be allowed by the mask, and `✖tok` must not be, at that
/// point; a forced chunk (even elements) must be what the grammar forces next
/// (a prefix of its forced bytes); `≺EOS≻` must be allowed where it is
/// sampled. Tokens are spelled as text, `<|name|>` or `<[id]>`. The trace must
/// end where the grammar accepts. `Ok(false)`: the trace backtracks, which
/// the replay does not model.
fn replay(case: &Value) -> Result<bool, String> {
    let Some(trace) = case["trace"].as_array() else {
        return Ok(false);
    };
    if case["trace"].to_string().contains('↶') {
        return Ok(false);
    }
    let prompted = case["notes"].to_string().contains("prompt given");
    let Some(vocab) = trace_vocabulary() else {
        return Ok(false);
    };
    let tables = vocab
        .compiler
        .compile_lark(case["grammar"].as_str().unwrap())
        .map_err(|e| format!("refused over Phi-3.5: {e}"))?;
    let eos = *tables.vocab().eos_ids().first().ok_or("no EOS")?;
    let id = |token: &str| -> Result<u32, String> {
        if token == "≺EOS≻" {
            return Ok(eos);
        }
        if let Some(number) = token.strip_prefix("<[").and_then(|t| t.strip_suffix("]>")) {
            return number.parse().map_err(|e| format!("{token:?}: {e}"));
        }
        vocab
            .ids
            .get(token.as_bytes())
            .copied()
            .ok_or_else(|| format!("no Phi-3.5 token spells {token:?}"))
    };
    let mut m = TokenMatcher::new(Arc::clone(&tables));
    let mut mask = vec![0u32; tables.vocab().len().div_ceil(32)];
    for (k, chunk) in trace.iter().enumerate().skip(prompted as usize) {
        let chunk = chunk.as_str().unwrap();
        let forced = k % 2 == 0;
        let chunk = if forced {
            unescape(chunk)
        } else {
            chunk.to_string()
        };
        if forced && k > 0 {
            // Forced: the bytes the grammar forces begin with the chunk, or
            // (a special token, which no byte spells) its first token is the
            // only one the mask allows.
            let want: String = chunk.split('‧').collect();
            let got = m.forced_bytes();
            let first = id(chunk.split('‧').next().unwrap_or_default())?;
            m.fill_next_token_bitmask(&mut mask);
            let allowed: u32 = mask.iter().map(|w| w.count_ones()).sum();
            let only_first = allowed == 1 && has_bit(&mask, first as usize);
            if want.is_empty() || !(got.starts_with(want.as_bytes()) || only_first) {
                return Err(format!(
                    "chunk {k}: forces {:?} ({allowed} tokens allowed), the trace {want:?}",
                    String::from_utf8_lossy(&got)
                ));
            }
            // Jump-forward agrees: a token no byte spells is forced as a token.
            if got.is_empty() && m.forced_token() != Some(first) {
                return Err(format!("chunk {k}: forced_token is {:?}", m.forced_token()));
            }
        }
        // A piece: a token, then the tokens `✖` marks as masked after it.
        for piece in chunk.split('‧').filter(|p| !p.is_empty()) {
            let mut parts = piece.split('✖');
            let token = parts.next().unwrap_or_default();
            if !token.is_empty() {
                let t = id(token)?;
                if k > 0 {
                    m.fill_next_token_bitmask(&mut mask);
                    if !has_bit(&mask, t as usize) {
                        return Err(format!("chunk {k}: masks {token:?}"));
                    }
                }
                m.consume_token(t)
                    .map_err(|e| format!("chunk {k}: {token:?}: {e}"))?;
            }
            for banned in parts {
                let t = id(banned)?;
                m.fill_next_token_bitmask(&mut mask);
                if has_bit(&mask, t as usize) {
                    return Err(format!("chunk {k}: allows {banned:?}"));
                }
            }
        }
    }
    if !m.is_accepting() && !m.is_terminated() {
        return Err("the trace ends where the grammar does not accept".into());
    }
    Ok(true)
}

/// Runs one case; `Err` says what went wrong.
fn run(case: &Value) -> Result<(), String> {
    let text = case["grammar"].as_str().unwrap_or_default();
    // Phi-3.5's special tokens and ids: only its vocabulary binds them.
    if case["kind"] == "lark_trace" && (text.contains("<|") || text.contains("<[")) {
        return match replay(case)? {
            true => {
                REPLAYED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(())
            }
            false => Err("a trace with special tokens that was not replayed".into()),
        };
    }
    let grammar = match case["kind"].as_str().unwrap() {
        "struct_tag" => legacy_tag(case)?,
        _ => compile(text).map_err(|e| format!("refused: {e}"))?,
    };
    for text in strings(case, "accept") {
        if !verdict(&grammar, &text).0 {
            return Err(format!("rejects {text:?}"));
        }
    }
    for text in strings(case, "reject") {
        if verdict(&grammar, &text).0 {
            return Err(format!("accepts {text:?}"));
        }
    }
    for text in strings(case, "reject_at_end_only") {
        match verdict(&grammar, &text) {
            (false, true) => {}
            (true, _) => return Err(format!("accepts the prefix {text:?}")),
            (false, false) => return Err(format!("refuses the prefix {text:?} before its end")),
        }
    }
    if case["kind"] == "lark_trace" {
        REPLAYED.fetch_add(replay(case)? as usize, std::sync::atomic::Ordering::Relaxed);
    }
    Ok(())
}

/// Traces replayed token by token (the others need special tokens).
static REPLAYED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

#[test]
fn llguidance_lazy_and_tool_cases() {
    let Some(cases) = cases() else {
        eprintln!("../shared/data/grammars/llguidance not found: skipped");
        return;
    };
    let (mut passed, mut listed, mut sampling) = (0, 0, 0);
    let mut unexpected = Vec::new();
    let mut seen = std::collections::HashMap::<String, usize>::new();
    for case in &cases {
        let function = case["test_fn"].as_str().unwrap();
        let n = seen.entry(function.to_string()).or_default();
        let id = format!("{function}#{n}");
        *n += 1;
        if case["kind"] == "stop_controller" {
            // Stop strings and tokens over a token stream: the sampling side's.
            sampling += 1;
            continue;
        }
        let outcome = run(case);
        let known = KNOWN.iter().find(|(k, _)| *k == id);
        match (outcome, known) {
            (Ok(()), None) => passed += 1,
            (Err(_), Some(_)) => listed += 1,
            (Ok(()), Some(_)) => unexpected.push(format!("{id}: passes now; take it off KNOWN")),
            (Err(e), None) => unexpected.push(format!("{id}: {e}")),
        }
    }
    println!(
        "llguidance lazy/tool cases: {passed} pass ({} traces replayed token by token), {listed} listed, {sampling} stop-controller cases (sampling's), of {}",
        REPLAYED.load(std::sync::atomic::Ordering::Relaxed),
        cases.len()
    );
    assert!(unexpected.is_empty(), "{}", unexpected.join("\n"));
}
