//! Token masks against their brute-force definition, on vendored real tokenizers
//! (GPT-2's byte-level BPE, Mistral's SentencePiece with byte fallback), plus the
//! token-level matcher API: consume, rollback, validate, EOS and stop policies.

#[path = "support/oracle.rs"]
#[allow(dead_code)]
mod oracle;

use std::sync::Arc;

use oracle::{differences, fast_mask, oracle_mask, prefix_positions};
use stencil::matcher::{StopPolicy, TokenError, TokenMatcher};
use stencil::tables::TokenTables;
use stencil::vocab::Vocabulary;
use stencil::{compile_gbnf, compile_regex, CompiledGrammar};

fn root(path: &str) -> String {
    format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))
}

fn vocab(name: &str) -> Arc<Vocabulary> {
    let path = root(&format!(
        "tests/fixtures/tokenizers/{name}/tokenizer.json.gz"
    ));
    Arc::new(Vocabulary::from_tokenizer_file(&path).unwrap_or_else(|e| panic!("{e}")))
}

fn gbnf(path: &str) -> Arc<CompiledGrammar> {
    compile_gbnf(&std::fs::read_to_string(root(path)).unwrap()).unwrap()
}

/// Compares fast and brute-force masks after prefixes of each sample, twice: cold,
/// then with every cache of the shared tables warm.
fn assert_masks_agree(name: &str, tables: &Arc<TokenTables>, samples: &[&[u8]], per_sample: usize) {
    let width = tables.mask_words() + 1; // one padding word: must stay zero
    let mut expected = Vec::new();
    for sample in samples {
        for p in prefix_positions(sample, per_sample) {
            let prefix = &sample[..p];
            expected.push((prefix, oracle_mask(tables, prefix, width)));
        }
    }
    for pass in ["cold", "cached"] {
        for (prefix, slow) in &expected {
            let fast = fast_mask(tables, prefix, width);
            let diff = differences(&fast, slow);
            assert!(
                diff.is_empty(),
                "{name} ({pass}): after {:?}: {} differences, e.g. tokens {:?} ({:?})",
                String::from_utf8_lossy(prefix),
                diff.len(),
                &diff[..diff.len().min(5)],
                diff.iter()
                    .take(5)
                    .map(|&t| String::from_utf8_lossy(tables.vocab().token_bytes(t)).into_owned())
                    .collect::<Vec<_>>()
            );
            assert_eq!(*fast.last().unwrap(), 0, "padding bits must be 0");
        }
    }
}

const JSON_SAMPLES: &[&[u8]] = &[
    br#"{"name": "caf\u00e9 \"x\"", "tags": ["a", "b"], "n": -12.5e3, "ok": true, "nested": {"k": null}}"#,
    "[1, 2, {\"\u{1F600}\": \"\u{4e2d}\u{6587}\"}]".as_bytes(),
];

#[test]
fn gpt2_masks_match_the_oracle() {
    let v = vocab("gpt2");
    let json = Arc::new(TokenTables::new(gbnf("grammars/json.gbnf"), Arc::clone(&v)));
    assert_masks_agree("gpt2/json", &json, JSON_SAMPLES, 12);
    let tool = Arc::new(TokenTables::new(
        gbnf("grammars/tool-call.gbnf"),
        Arc::clone(&v),
    ));
    assert_masks_agree(
        "gpt2/tool-call",
        &tool,
        &[r#"{"name": "web_search", "arguments": {"query": "rüst", "limit": 10}}"#.as_bytes()],
        10,
    );
}

/// Every prefix of texts where tokens cross terminal boundaries inside them: an
/// identifier that matches after each letter, whitespace before a value, a string
/// end followed by punctuation. The candidate walk splits such tokens at each
/// boundary (lexer side, then the parser past it, one level down for large
/// subtrees): every part of that walk decides some token here.
#[test]
fn tokens_across_terminal_boundaries_match_the_oracle() {
    let v = vocab("gpt2");
    let c = Arc::new(TokenTables::new(
        gbnf("tests/fixtures/gbnf/llama.cpp/c.gbnf"),
        Arc::clone(&v),
    ));
    let program = b"int main(int argc){int total = 0;for(int i = 0; i<argc; i = i+1){total = total+i*2;}return total;}";
    assert_masks_agree("gpt2/c", &c, &[program], program.len());
    let json = Arc::new(TokenTables::new(gbnf("grammars/json.gbnf"), Arc::clone(&v)));
    let text = b"{ \"a\" : [ 1 , \"x y\" ],\n  \"b\": {\"c\": -2.5e3}, \"d\":\"\" }";
    assert_masks_agree("gpt2/json-spaced", &json, &[text], text.len());
}

/// A Lark grammar whose `%ignore`d `#` comments are fused before every lexeme
/// (one lexeme per terminal) and whose names may follow each other without a
/// gap: a token holds a boundary after each letter of a name, and its rests
/// are answered at each until one accepts it.
#[test]
fn lark_comments_and_adjacent_names_match_the_oracle() {
    let v = vocab("gpt2");
    let compiler = stencil::Compiler::new(Arc::clone(&v));
    let t = compiler
        .compile_lark(
            r#"start: (rule _NL)*
rule: RULE ":" expansion ("|" expansion)*
expansion: (RULE | TOKEN | STRING)*
RULE: /[a-z][_a-z0-9]*/
TOKEN: /[A-Z][_A-Z0-9]*/
STRING: /"[^"\n]*"/
_NL: /(\r?\n)+/
COMMENT: /#[^\n]*/
%ignore /[ \t]+/
%ignore COMMENT
"#,
        )
        .unwrap();
    let sample = "start: item NAME \"x\" # note\nitem: aB | c_d# end\n";
    assert_masks_agree("lark comments", &t, &[sample.as_bytes()], 12);
}

/// Arrays of `maxLength` strings: after the first item every item is one counted
/// terminal repeated (`,"` + the counted body + `"`), whose count is reported in
/// canonical form while it is far from the bound (long bounds) and as it is near
/// it (short ones). Every prefix, through several items.
#[test]
fn repeated_counted_strings_match_the_oracle() {
    let v = vocab("gpt2");
    let compiler = stencil::Compiler::new(Arc::clone(&v));
    let options = stencil::frontend::json_schema::JsonSchemaOptions::default();
    for (min, max, text) in [
        (
            0,
            4096,
            &br#"["class1","class two","a b c d e f g","","last one here"]"#[..],
        ),
        (0, 6, &br#"["ab","abcdef","","x y z","abcde"]"#[..]),
        // The later items' first states take the body slice of their plain state.
        (1, 1024, &br#"["read:example","write","a\"b\\n","x"]"#[..]),
    ] {
        let schema = serde_json::json!({
            "type": "array",
            "items": {"type": "string", "minLength": min, "maxLength": max}
        });
        let tables = compiler.compile_json_schema(&schema, &options).unwrap();
        assert_masks_agree(
            &format!("gpt2/strings<={max}"),
            &tables,
            &[text],
            text.len(),
        );
    }
}

/// A bounded string beside `null` (`["string", "null"]` with `maxLength`): a
/// long bound keeps its counter and the alternation goes to the parser; a short
/// one is unrolled into the fused regex. Both agree with the oracle.
/// The grammar's terminal holding the most heap bytes.
fn heaviest_terminal(tables: &TokenTables) -> &stencil::automaton::Terminal {
    tables
        .grammar()
        .terminals()
        .iter()
        .max_by_key(|t| t.memory_usage())
        .unwrap()
}

#[test]
fn bounded_strings_beside_null_match_the_oracle() {
    let v = vocab("gpt2");
    let compiler = stencil::Compiler::new(Arc::clone(&v));
    let options = stencil::frontend::json_schema::JsonSchemaOptions::default();
    for (max, texts) in [
        (
            64,
            [
                &br#"{"a":"some text, \"quoted\"","b":null}"#[..],
                &br#"{"a":null,"b":"1234567890123456789012345678901234567890123456789012345678901234"}"#[..],
            ],
        ),
        (3, [&br#"{"a":"abc","b":null}"#[..], &br#"{"a":null,"b":""}"#[..]]),
    ] {
        let value = serde_json::json!({"type": ["string", "null"], "maxLength": max});
        let schema = serde_json::json!({
            "type": "object",
            "properties": {"a": value, "b": value},
            "required": ["a", "b"],
            "additionalProperties": false
        });
        let tables = compiler.compile_json_schema(&schema, &options).unwrap();
        // Unrolled, 64 characters are over a thousand states; counted, the
        // terminal's stored part stays small (its counter states are computed).
        let heaviest = heaviest_terminal(&tables);
        let (stored, states) = (heaviest.memory_usage(), heaviest.state_count());
        if max == 64 {
            assert!(stored < 64 << 10, "{stored} bytes in one terminal ({states} states)");
        }
        let longest = texts.iter().map(|t| t.len()).max().unwrap();
        assert_masks_agree(&format!("gpt2/string-or-null<={max}"), &tables, &texts, longest);
    }
}

#[test]
fn patterns_and_formats_under_a_length_bound_match_the_oracle() {
    // A pattern or a format intersected with `maxLength` keeps the count
    // computed (a counted product): masks equal the oracle near the bound, where
    // the pattern's own count and the length meet, and where a word must still
    // fit (`\\S+$` needs one more character).
    let v = vocab("gpt2");
    let compiler = stencil::Compiler::new(Arc::clone(&v));
    let options = stencil::frontend::json_schema::JsonSchemaOptions::default();
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "words": {"type": "string", "maxLength": 24, "pattern": "^(?:\\S+\\s+){0,9}\\S+$"},
            "email": {"type": "string", "format": "email", "maxLength": 300},
            "code": {"type": "string", "minLength": 10, "maxLength": 40, "pattern": "^[a-z]+(?:-[a-z]+)*$"}
        },
        "required": ["words", "email", "code"],
        "additionalProperties": false
    });
    let tables = compiler.compile_json_schema(&schema, &options).unwrap();
    let heaviest = heaviest_terminal(&tables);
    let products = (tables.grammar().terminals().iter())
        .filter(|t| t.counter_span().is_some_and(|k| k.carried))
        .count();
    assert_eq!(products, 3, "each string a counted product");
    // The email format under `maxLength: 300` unrolled was refused (a
    // million states); counted, it is the format's size.
    assert!(
        heaviest.memory_usage() < 4 << 20,
        "{} bytes",
        heaviest.memory_usage()
    );
    let texts: [&[u8]; 2] = [
        br#"{"words":"one two  three four fiv","email":"a.b@example.com","code":"abc-defg-hi"}"#,
        br#"{"words":"x","email":"someone@mail.example.org","code":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}"#,
    ];
    let longest = texts.iter().map(|t| t.len()).max().unwrap();
    assert_masks_agree("gpt2/pattern-under-length", &tables, &texts, longest);
}

#[test]
fn mistral_masks_match_the_oracle() {
    let v = vocab("mistral-7b-v0.1");
    let json = Arc::new(TokenTables::new(
        gbnf("grammars/json-bounded.gbnf"),
        Arc::clone(&v),
    ));
    assert_masks_agree("mistral/json-bounded", &json, JSON_SAMPLES, 12);
    let list = Arc::new(TokenTables::new(
        gbnf("tests/fixtures/gbnf/llama.cpp/japanese.gbnf"),
        v,
    ));
    assert_masks_agree(
        "mistral/japanese",
        &list,
        &["\u{65e5}\u{672c}\u{8a9e} \u{30ab}\u{30ca}".as_bytes()],
        10,
    );
}

#[test]
fn vocabularies_resolve_bytes() {
    let gpt2 = vocab("gpt2");
    assert_eq!(gpt2.len(), 50257);
    assert_eq!(gpt2.eos_ids(), &[50256]);
    assert!(
        gpt2.token_bytes(50256).is_empty(),
        "special tokens have no bytes"
    );
    // "Ġthe" is " the".
    assert!((0..gpt2.len() as u32).any(|id| gpt2.token_bytes(id) == b" the"));
    let mistral = vocab("mistral-7b-v0.1");
    assert_eq!(mistral.len(), 32000);
    assert_eq!(mistral.eos_ids(), &[2]);
    assert_eq!(
        mistral.token_bytes(3 + 0x0A),
        b"\n",
        "<0x0A> is a newline byte"
    );
    assert_eq!(mistral.token_bytes(22557), b" Hello", "\u{2581}Hello");
}

fn tables(grammar: Arc<CompiledGrammar>, v: &Arc<Vocabulary>) -> Arc<TokenTables> {
    Arc::new(TokenTables::new(grammar, Arc::clone(v)))
}

/// A vocabulary of every printable ASCII byte, `extra` tokens and an EOS: where
/// a test needs tokens a real vocabulary may not have.
fn printable_vocab(extra: impl IntoIterator<Item = Vec<u8>>) -> Arc<Vocabulary> {
    let mut tokens: Vec<Vec<u8>> = (0x20u8..0x7f).map(|b| vec![b]).collect();
    tokens.extend(extra);
    tokens.push(Vec::new());
    let eos = tokens.len() as u32 - 1;
    Arc::new(Vocabulary::from_token_bytes(
        tokens,
        vec![(eos, "</s>".into())],
        vec![eos],
    ))
}

fn token(v: &Vocabulary, text: &str) -> u32 {
    (0..v.len() as u32)
        .find(|&id| v.token_bytes(id) == text.as_bytes())
        .unwrap_or_else(|| panic!("no token {text:?}"))
}

#[test]
fn consume_rollback_validate() {
    let v = vocab("gpt2");
    let t = tables(compile_regex("(ab|cd)+").unwrap(), &v);
    let mut m = TokenMatcher::new(Arc::clone(&t));
    let ab = token(&v, "ab");
    let cd = token(&v, "cd");
    let a = token(&v, "a");
    let b = token(&v, "b");
    let x = token(&v, "x");
    let eos = v.eos_ids()[0];
    assert_eq!(
        m.validate_tokens(&[ab, cd, a, b, x, ab]),
        4,
        "stops before x"
    );
    assert_eq!(m.tokens_consumed(), 0, "validation leaves no trace");
    assert!(
        matches!(m.consume_token(eos), Err(TokenError::NotAllowed { .. })),
        "not accepting yet"
    );
    m.consume_tokens(&[ab, a]).unwrap();
    assert!(!m.is_accepting());
    assert!(!m.is_token_allowed(eos));
    m.consume_token(b).unwrap();
    assert!(m.is_accepting());
    m.rollback(2);
    assert!(m.is_accepting(), "back after `ab`");
    assert_eq!(m.byte_matcher().position(), 2);
    m.consume_token(eos).unwrap();
    assert!(m.is_terminated());
    assert_eq!(m.consume_token(ab), Err(TokenError::Terminated));
    let mut mask = vec![0u32; t.mask_words()];
    m.fill_next_token_bitmask(&mut mask);
    assert_eq!(
        oracle::differences(&mask, &{
            let mut only_eos = vec![0u32; t.mask_words()];
            only_eos[eos as usize / 32] |= 1 << (eos % 32);
            only_eos
        }),
        Vec::<u32>::new(),
        "a terminated matcher allows only EOS"
    );
    m.rollback(1);
    assert!(!m.is_terminated());
    assert!(matches!(
        m.consume_token(1 << 30),
        Err(TokenError::OutOfVocabulary { .. })
    ));
}

#[test]
fn accepting_state_without_continuation_allows_only_eos() {
    let v = vocab("gpt2");
    let t = tables(compile_regex("yes").unwrap(), &v);
    let mut m = TokenMatcher::new(Arc::clone(&t));
    m.consume_token(token(&v, "yes")).unwrap();
    let mut mask = vec![0u32; t.mask_words()];
    m.fill_next_token_bitmask(&mut mask);
    let allowed: Vec<u32> = differences(&mask, &vec![0; mask.len()]);
    assert_eq!(allowed, v.eos_ids());
}

#[test]
fn stop_policies() {
    let v = vocab("gpt2");
    let grammar = compile_regex("[0-9]+").unwrap();
    let seven = token(&v, "7");
    let space = token(&v, " ");
    let word = token(&v, " words");
    let eos = v.eos_ids()[0];

    let mut stop = TokenMatcher::with_policy(tables(Arc::clone(&grammar), &v), StopPolicy::Stop);
    stop.consume_token(seven).unwrap();
    assert!(!stop.is_token_allowed(space));
    assert!(stop.is_token_allowed(eos));

    let mut trailing = TokenMatcher::with_policy(
        tables(Arc::clone(&grammar), &v),
        StopPolicy::TrailingWhitespaceThenEos,
    );
    trailing.consume_token(seven).unwrap();
    assert!(!trailing.is_token_allowed(word));
    trailing.consume_token(space).unwrap();
    assert!(
        !trailing.is_token_allowed(space),
        "one whitespace token, then EOS"
    );
    assert!(!trailing.is_token_allowed(seven));
    trailing.consume_token(eos).unwrap();

    let mut free = TokenMatcher::with_policy(tables(grammar, &v), StopPolicy::AllowContinue);
    assert!(
        !free.is_token_allowed(word),
        "not before the grammar accepts"
    );
    free.consume_token(seven).unwrap();
    free.consume_token(word).unwrap();
    assert!(free.is_token_allowed(space) && free.is_token_allowed(eos));
    free.rollback(1);
    assert!(!free.is_token_allowed(token(&v, "x")) || free.is_accepting());
}

#[test]
fn forced_bytes() {
    let v = vocab("gpt2");
    let t = tables(gbnf("grammars/tool-call.gbnf"), &v);
    let mut m = TokenMatcher::new(t);
    assert_eq!(m.forced_bytes(), br#"{"name": ""#);
    m.consume_bytes(br#"{"name": "g"#).unwrap();
    assert_eq!(m.forced_bytes(), br#"et_weather", "arguments": {"city": ""#);
    assert_eq!(
        m.byte_matcher().position(),
        11,
        "forced_bytes leaves the state unchanged"
    );
}

#[path = "support/reference.rs"]
#[allow(dead_code)]
mod reference;

/// Random sentences of every shipped and vendored grammar (drawn by the reference
/// recognizer's sampler, seeded), masks compared with the oracle at a few prefixes
/// of each, on both vendored vocabularies. The corpus suite runs more.
#[test]
fn masks_on_random_sentences_of_every_grammar() {
    let files = [
        "grammars/json.gbnf",
        "grammars/json-bounded.gbnf",
        "grammars/tool-call.gbnf",
        "tests/fixtures/gbnf/llama.cpp/arithmetic.gbnf",
        "tests/fixtures/gbnf/llama.cpp/c.gbnf",
        "tests/fixtures/gbnf/llama.cpp/chess.gbnf",
        "tests/fixtures/gbnf/llama.cpp/english.gbnf",
        "tests/fixtures/gbnf/llama.cpp/japanese.gbnf",
        "tests/fixtures/gbnf/llama.cpp/json.gbnf",
        "tests/fixtures/gbnf/llama.cpp/json_arr.gbnf",
        "tests/fixtures/gbnf/llama.cpp/list.gbnf",
        "tests/fixtures/gbnf/vllm-sql.gbnf",
    ];
    let vocabs = [vocab("gpt2"), vocab("mistral-7b-v0.1")];
    let mut rng = reference::Rng::new(7);
    for (i, file) in files.iter().enumerate() {
        let text = std::fs::read_to_string(root(file)).unwrap();
        let ir = stencil::frontend::gbnf::parse(&text, &Default::default()).unwrap();
        let sentence = reference::Reference::new(&ir).sample(&mut rng, 8, 24);
        let sentence = &sentence[..sentence.len().min(48)];
        let v = &vocabs[i % 2];
        let tables = tables(compile_gbnf(&text).unwrap(), v);
        assert_masks_agree(file, &tables, &[sentence], 4);
    }
}

#[test]
fn bad_tokenizer_files_give_clear_errors() {
    let dir = std::env::temp_dir().join(format!("stencil-bad-tok-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = Vocabulary::from_tokenizer_file(dir.join("absent.json"))
        .unwrap_err()
        .to_string();
    assert!(
        missing.contains("cannot read") && missing.contains("absent.json"),
        "{missing}"
    );
    let path = dir.join("tokenizer.json");
    std::fs::write(&path, br#"{"model": {"type": "BPE", "vocab": "#).unwrap();
    let truncated = Vocabulary::from_tokenizer_file(&path)
        .unwrap_err()
        .to_string();
    assert!(
        truncated.contains("tokenizer.json") && truncated.contains("not a tokenizer"),
        "{truncated}"
    );
    let gz = dir.join("tokenizer.json.gz");
    std::fs::write(&gz, b"not gzip").unwrap();
    let not_gzip = Vocabulary::from_tokenizer_file(&gz)
        .unwrap_err()
        .to_string();
    assert!(not_gzip.contains("tokenizer.json.gz"), "{not_gzip}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Right-linear self-recursive rules (`rest ::= [a-z] rest | ""`, the shape the
/// JSON Schema front-end gives a pattern's `.*`) are lowered to one looping
/// terminal; the masks around them, and around a fixed-count part between two of
/// them, must still be the brute-force ones.
#[test]
fn right_linear_rules_match_the_oracle() {
    let v = vocab("gpt2");
    let text = r#"
root ::= "\"" rest [0-9a-f] [0-9a-f] [0-9a-f] [0-9a-f] rest "\"" tail
rest ::= [ !#-\[\]-~] rest | ""
tail ::= "ab" tail | "," | "}" | ""
"#;
    let compiled = compile_gbnf(text).unwrap();
    let t = tables(compiled, &v);
    let samples: &[&[u8]] = &[
        b"\"hello cafe world 12ab x\"ababab}",
        b"\"deadbeef\",",
        b"\"x1234",
    ];
    assert_masks_agree("right-linear", &t, samples, 12);
}

/// A long counted repetition (kept as a parser counter) shares cached candidate
/// checks between positions whose count is far from its bounds; close to `max`
/// the count matters again and the masks must stay the brute-force ones.
#[test]
fn long_counted_repetitions_match_the_oracle() {
    let v = vocab("gpt2");
    let compiled = compile_gbnf("root ::= \"\\\"\" [a-z ]{3,4990} \"\\\"\"\n").unwrap();
    let t = tables(compiled, &v);
    let closed = format!("\"{}\"", "the cat sat ".repeat(420).split_at(4990).0);
    let near_max = format!("\"{}", "ab ".repeat(1662).split_at(4985).0);
    let samples: &[&[u8]] = &[b"\"a", closed.as_bytes(), near_max.as_bytes()];
    assert_masks_agree("long repetition", &t, samples, 12);
}

fn schema_tables(schema: serde_json::Value, v: &Arc<Vocabulary>) -> Arc<TokenTables> {
    use stencil::frontend::json_schema::{compile_schema, JsonSchemaOptions, PropertyOrder};
    let options = JsonSchemaOptions {
        property_order: PropertyOrder::Any,
        ..JsonSchemaOptions::default()
    };
    let (grammar, _) = compile_schema(&schema, &options).unwrap();
    tables(
        Arc::new(CompiledGrammar::compile(&grammar, &Default::default()).unwrap()),
        v,
    )
}

/// JSON Schema shapes whose tables take shortcuts: keys that may still be any
/// other string (states that do not loop but survive every string text), a
/// pattern's `.+` (no line separators), `maxLength` strings read as one looping
/// lexeme while far from the bound and counted again near it, short fused
/// bounds, a pattern intersected with its length bounds or complemented. Prefixes
/// end inside escapes and multi-byte characters too.
#[test]
fn json_schema_shortcuts_match_the_oracle() {
    let v = vocab("gpt2");
    let cases: Vec<(serde_json::Value, Vec<String>)> = vec![
        (
            serde_json::json!({"type": "object", "properties": {
                "name": {"type": "string"}, "nameID": {"type": "integer"}}}),
            vec![r#"{"nameID":7,"name":"é x","named":"\u00e9","n":1}"#.into()],
        ),
        (
            serde_json::json!({"type": "object", "properties": {
                "image": {"type": "string", "pattern": "(.+/)?.+:.+"}}}),
            vec![r#"{"image":"docker.io/library/nginx:latest é"}"#.into()],
        ),
        (
            serde_json::json!({"type": "array", "items": {"type": "string", "maxLength": 300}}),
            vec![
                format!(r#"["ab\n\u00e9€ {}","x"]"#, "word ".repeat(30)),
                format!(r#"["{}"]"#, "the cat sat ".repeat(25).split_at(298).0),
            ],
        ),
        (
            serde_json::json!({"type": "object", "properties": {
                "code": {"type": "string", "minLength": 2, "maxLength": 5}}}),
            vec![r#"{"code":"ab\"é"}"#.into()],
        ),
        // Pattern and length as one product automaton.
        (
            serde_json::json!({"type": "object", "properties": {
                "id": {"type": "string", "pattern": "[0-9a-f]+", "minLength": 6, "maxLength": 12}}}),
            vec![r#"{"id":"zz\"é 0a1b"}"#.into()],
        ),
        // A string that must not match a pattern: the pattern's automaton
        // complemented inside the product.
        (
            serde_json::json!({"type": "object", "properties": {
                "tag": {"type": "string", "not": {"pattern": "^[a-z]+$"}}}}),
            vec![r#"{"tag":"ab\"é 0a1b"}"#.into()],
        ),
        // A million counter states: one counted terminal, not a parser counter.
        (
            serde_json::json!({"type": "object", "properties": {
                "text": {"type": "string", "minLength": 3, "maxLength": 65535}}}),
            vec![r#"{"text":"a\u00e9 b é \"quoted\" text"}"#.into()],
        ),
    ];
    for (schema, samples) in cases {
        let name = schema.to_string();
        let t = schema_tables(schema, &v);
        let samples: Vec<&[u8]> = samples.iter().map(|s| s.as_bytes()).collect();
        assert_masks_agree(&name, &t, &samples, 10);
    }
}

/// Keys by pattern (`patternProperties`): past a key's letters two lexemes are
/// alive and some 6,000 Llama-3 tokens (a quote and more) are candidates; the
/// candidate walk skips the subtrees holding no byte that may follow either
/// lexeme's end, which the oracle checks here on both vendored vocabularies.
#[test]
fn pattern_keys_match_the_oracle() {
    let schema = serde_json::json!({"type": "object", "properties": {
        "dictionary": {"type": "object", "additionalProperties": false,
            "patternProperties": {"^[a-zA-Z0-9]{1,10}$": {"type": "string"}}}},
        "additionalProperties": false});
    let sample = r#"{"dictionary":{"key1":"value1","Key2":"x","k3":""}}"#;
    for v in [vocab("gpt2"), vocab("mistral-7b-v0.1")] {
        let t = schema_tables(schema.clone(), &v);
        assert_masks_agree("pattern keys", &t, &[sample.as_bytes()], sample.len());
    }
}

/// Restricted character classes (a path pattern, an email pattern whose `.gov`
/// may be reached through `@`, a class that excludes a letter) let the table walk
/// take whole trie subtrees made only of a class no text of which kills the
/// lexeme; every prefix is compared with the oracle, on both vendored vocabularies.
#[test]
fn closed_byte_classes_match_the_oracle() {
    let cases: Vec<(serde_json::Value, &str)> = vec![
        (
            serde_json::json!({"type": "object", "properties": {
                "tag": {"type": "string", "pattern": "^[\\w\\/\\.:-]+$"}}}),
            r#"{"tag":"a/b.c:d-e_f9"}"#,
        ),
        (
            serde_json::json!({"type": "object", "properties": {
                "email": {"type": "string", "pattern": "^[^@^\\s]+@[^@^\\.^\\s]+(\\.[^@^\\.^\\s]*)*.gov.uk"}}}),
            r#"{"email":"john.doe@example@gov.uk and more"}"#,
        ),
        (
            serde_json::json!({"type": "object", "properties": {
                "word": {"type": "string", "pattern": "^[a-df-z ]*$"}}}),
            r#"{"word":"this is a cat in a hat"}"#,
        ),
        // Classes that also hold every non-ASCII character: a value without
        // digits, and keys without digits next to keys with one.
        (
            serde_json::json!({"type": "object", "properties": {
                "text": {"type": "string", "pattern": "^[^0-9]*$"}}}),
            r#"{"text":"héllo wörld, 中文 ok"}"#,
        ),
        (
            serde_json::json!({"type": "object",
                "patternProperties": {"[0-9]+": {"type": "integer"}},
                "additionalProperties": {"type": "string"}}),
            r#"{"clé é":"x","k1":2,"日本":"y"}"#,
        ),
        // Every non-ASCII character but the spaces.
        (
            serde_json::json!({"type": "object", "properties": {
                "key": {"type": "string", "pattern": "^[\\S]+$"}}}),
            r#"{"key":"clé-日本—x"}"#,
        ),
    ];
    for v in [vocab("gpt2"), vocab("mistral-7b-v0.1")] {
        for (schema, sample) in &cases {
            let name = schema.to_string();
            let t = schema_tables(schema.clone(), &v);
            assert_masks_agree(&name, &t, &[sample.as_bytes()], sample.len());
        }
        // A pattern string fused after a value's bounded leading blanks (a
        // counted terminal: the class is in its suffix), as `%json` keeps the
        // schema's property order.
        let lark = r#"start: %json {"type": "object", "required": ["id", "n"],
            "properties": {"id": {"type": "string", "pattern": "^[a-z\\d\\./-]+$"},
                           "n": {"type": "integer"}}}"#;
        let compiler = stencil::Compiler::new(Arc::clone(&v));
        let t = compiler.compile_lark(lark).unwrap();
        let sample = r#"{"id":"project-1.x/y","n":12}"#;
        assert_masks_agree(
            "pattern after blanks",
            &t,
            &[sample.as_bytes()],
            sample.len(),
        );
        // `format: "regex"`: nested groups in the parser, flat runs one terminal.
        let t = schema_tables(
            serde_json::json!({"type": "object", "properties": {
                "re": {"type": "string", "format": "regex"}}}),
            &v,
        );
        let sample = r#"{"re":"^(?:a|b(c[0-9]+)){2,3}\\d*(?=x)$"}"#;
        assert_masks_agree("format regex", &t, &[sample.as_bytes()], sample.len());
        // Without DEL among the exits (it is one in JSON strings), tokens that
        // split a character are walked for being non-ASCII non-members alone.
        let t = tables(compile_regex("[^0-9\\x7f\"]*\"!").unwrap(), &v);
        let sample = "héllo 中文 wörld\"!";
        assert_masks_agree("no digits", &t, &[sample.as_bytes()], sample.len());
    }
}

/// One matcher through whole samples, a longest-match token at a time: its masks
/// (which reuse the last configuration's masks and the last signature's accepted
/// candidates from one token to the next) are the brute-force ones at every step.
#[test]
fn consecutive_masks_of_one_matcher_match_the_oracle() {
    let v = vocab("gpt2");
    let schema = serde_json::json!({"type": "object", "properties": {
        "name": {"type": "string"}, "code": {"type": "string", "pattern": "^[a-z0-9-]+$"},
        "n": {"type": "number"}, "tags": {"type": "array", "items": {"type": "string"}}}});
    let t = schema_tables(schema, &v);
    let samples: &[&[u8]] = &[
        br#"{"name":"a long name, then \"quoted\" text","code":"abc-123-x","n":-12.5e3}"#,
        br#"{"tags":["one","two","three"],"name":"","n":7}"#,
    ];
    let width = t.mask_words() + 1;
    for sample in samples {
        let mut matcher = TokenMatcher::new(Arc::clone(&t));
        let mut at = 0;
        while at < sample.len() {
            let mut fast = vec![0u32; width];
            matcher.fill_next_token_bitmask(&mut fast);
            let diff = differences(&fast, &oracle_mask(&t, &sample[..at], width));
            assert!(
                diff.is_empty(),
                "after {:?}: {} differences, e.g. {:?}",
                String::from_utf8_lossy(&sample[..at]),
                diff.len(),
                &diff[..diff.len().min(5)]
            );
            let (id, len) = v.trie().longest_prefix(&sample[at..]).expect("a token");
            matcher
                .consume_token(id)
                .expect("the sample is in the language");
            at += len;
        }
    }
}

/// Counters (`maxLength`, `{1,32}`) take whole subtrees made of their class,
/// allowing the tokens short enough; past a match earlier in the token, the longer
/// ones are boundaries (the regex case: `a` matches, then `[c-z]{0,6}!` counts).
#[test]
fn counted_classes_match_the_oracle() {
    let schemas: Vec<(serde_json::Value, &str)> = vec![
        (
            serde_json::json!({"type": "object", "properties": {
                "p": {"type": "string", "maxLength": 8},
                "q": {"type": "string", "minLength": 2, "maxLength": 12}}}),
            r#"{"p":"50.00","q":"abcdefgh ijk"}"#,
        ),
        (
            serde_json::json!({"type": "object", "properties": {
                "n": {"type": "string", "pattern": "^[A-Za-z0-9 &'()*,-./@£]{1,32}$"}}}),
            r#"{"n":"My Savings Account (£)"}"#,
        ),
    ];
    for v in [vocab("gpt2"), vocab("mistral-7b-v0.1")] {
        for (schema, sample) in &schemas {
            let name = schema.to_string();
            let t = schema_tables(schema.clone(), &v);
            assert_masks_agree(&name, &t, &[sample.as_bytes()], sample.len());
        }
        let t = tables(compile_regex("[c-z]{0,6}!|a[c-z]{0,6}!|a").unwrap(), &v);
        assert_masks_agree("counter after a match", &t, &[b"accc!", b"zzz!"], 5);
        // The same terminal, then the parser's: a token longer than the counter
        // past `a` (`attention`) may end the terminal at `a`.
        let grammar = r#"root ::= ([c-z]{0,6} "!" | "a" [c-z]{0,6} "!" | "a") tail
tail ::= [c-z]* | "(" root ")""#;
        let t = tables(compile_gbnf(grammar).unwrap(), &v);
        assert_masks_agree(
            "counter after a match, then more",
            &t,
            &[b"attention", b"zz!(acc!dd)"],
            9,
        );
    }
}

/// Any-order objects are permutations whose progress (members used, items
/// written) is part of the cached candidate checks' signature: after `"a"` and
/// after `"b"` the same bytes may be allowed or not, and counts near
/// `maxProperties` matter.
#[test]
fn any_order_objects_match_the_oracle() {
    let v = vocab("gpt2");
    let schema = serde_json::json!({"type": "object", "properties": {
        "a": {"type": "integer"}, "b": {"type": "integer"}, "ab": {"type": "string"}},
        "required": ["a", "ab"], "minProperties": 3, "maxProperties": 4});
    let t = schema_tables(schema, &v);
    let samples: &[&[u8]] = &[
        br#"{"b":1,"x":2,"a":3,"ab":"z"}"#,
        br#"{"a":1,"ab":"q","b":2,"y":0}"#,
        br#"{"ab":"","a":10,"abc":[1]}"#,
    ];
    assert_masks_agree("any order", &t, samples, 10);
}

/// An object's "any other key" reads as the shared string body minus the
/// declared names: a token that spells a used declared name and goes on (` ":`
/// in Mistral's vocabulary, for the key `" "`) must not pass as another key.
#[test]
fn undeclared_keys_exclude_declared_names_across_tokens() {
    let v = vocab("mistral-7b-v0.1");
    let schema = serde_json::json!({"type": "object",
        "properties": {" ": {"type": "integer"}, "a": {"type": "integer"}},
        "additionalProperties": {"type": "string"}});
    let t = schema_tables(schema, &v);
    let samples: &[&[u8]] = &[br#"{" ":1,"x":"y","a":2}"#, br#"{"a":1," ":2}"#];
    assert_masks_agree("undeclared keys", &t, samples, 64);
    // A vocabulary where a declared name, its quote and a value's start are one
    // token: `a":"` reads as the integer key `a` (no) or as another key (never
    // `a`), so no lexeme may treat the quote after `a` as the end of a key.
    let v = printable_vocab([
        br#"a":""#.to_vec(),
        br#"a":1"#.to_vec(),
        br#"ab":""#.to_vec(),
    ]);
    let schema = serde_json::json!({"type": "object",
        "properties": {"a": {"type": "integer"}},
        "additionalProperties": {"type": "string"}});
    let t = schema_tables(schema, &v);
    let samples: &[&[u8]] = &[br#"{"ab":"c","a":1}"#, br#"{"a":1,"ab":"c"}"#];
    assert_masks_agree("undeclared keys, custom vocabulary", &t, samples, 64);
}

/// A lexeme that reads one string first (a key literal's rest) is read off the
/// trie path of that string, with a walk only below its end: tokens going on
/// into the key's value (`id":1`), past a literal that ends its terminal
/// (`hello w`, a boundary), and past a match that the terminal continues
/// (`ab12`, where the plain walk answers) must all agree with the oracle.
#[test]
fn literal_rests_match_the_oracle() {
    let v = printable_vocab(
        [
            r#"id":"#,
            r#"id":1"#,
            r#"id":""#,
            r#"id": "#,
            r#"d":[1"#,
            "idx",
            "i",
            "id",
            r#"name":"#,
            "hel",
            "hello",
            "hello w",
            "hellox",
            "lo wor",
            "hello(",
            "ab",
            "ab1",
            "ab12",
            "ab12x",
            "ab(",
            "b1x",
            "hix",
            "hi t",
        ]
        .map(|t| t.as_bytes().to_vec()),
    );
    let schema = serde_json::json!({"type": "object", "properties": {
        "id": {"type": "integer"}, "ids": {"type": "array", "items": {"type": "integer"}},
        "name": {"type": "string"}}});
    let t = schema_tables(schema, &v);
    let samples: &[&[u8]] = &[br#"{"id":12,"name":"x"}"#, br#"{"ids":[1,2],"id":3}"#];
    assert_masks_agree("literal rests, keys", &t, samples, 64);
    // `tail` is the parser's (recursive), so `hello` and `ab[0-9]*` end terminals.
    let grammar = r#"root ::= ("hello" | "ab" [0-9]* | "hi there") tail
tail ::= "x" | "(" root ")" | " wor" "ld""#;
    let t = tables(compile_gbnf(grammar).unwrap(), &v);
    let samples: &[&[u8]] = &[b"hello world", b"hello(ab12x)", b"ab(hi therex)", b"ab1x"];
    assert_masks_agree("literal rests, literals", &t, samples, 64);
}

/// Past a literal's end (an enum's closing quote, an integer's last digit) every
/// next byte kills the lexeme, and the tokens going on are the parser's to
/// decide: the walk jumps over dead siblings by the parent's child index, and
/// the siblings it jumps over are boundaries too (`",` after `" `, `1]` after
/// `1,`). A vocabulary whose `"` and `1` have enough children to be indexed,
/// then GPT-2's.
#[test]
fn dead_siblings_past_a_match_stay_candidates() {
    let schema = serde_json::json!({"type": "array", "items": {"anyOf": [
        {"enum": ["red", "green"]}, {"type": "integer"}]}});
    let samples: &[&[u8]] = &[br#"["red","green",12,1]"#, br#"[1,"red",10,"green"]"#];
    let pairs = [b'"', b'1'].map(|lead| b" !,-.0:]}x".map(|b| vec![lead, b]));
    let custom = printable_vocab(pairs.into_iter().flatten());
    for v in [custom, vocab("gpt2")] {
        let t = schema_tables(schema.clone(), &v);
        assert_masks_agree("dead siblings past a match", &t, samples, 64);
    }
}

/// A class slice's walk (a terminal closed under `[a-z]`, left only by `"`)
/// jumps over the siblings without an exit token, read from the parent's child
/// index; but past a match (`ab"B` ends a round of the terminal, `cd` starts
/// another) a dead sibling ends the terminal at that match and leaves the rest
/// to the parser: `ab"Bcd?` and `ab"Bcd!` are allowed, `ab"Bcd#` is not. The
/// tokens under `ab"Bcd` are enough children to be indexed.
#[test]
fn class_slice_jumps_keep_dead_siblings_past_a_match() {
    // `tail` is the parser's (recursive, so not fused into `word`).
    let grammar = r#"root ::= word tail
word ::= ([a-z]+ "\"" "B")+
tail ::= [a-z]* ("?" | "!") | "(" root ")""#;
    let lead = br#"ab"Bcd"#;
    let endings = b"!#$%&()*+,-.?@xz";
    let mut extra: Vec<Vec<u8>> = endings
        .iter()
        .map(|&b| [&lead[..], &[b]].concat())
        .collect();
    extra.extend([
        b"abc".to_vec(),
        b"xyz".to_vec(),
        br#"q"B"#.to_vec(),
        b"cd?".to_vec(),
    ]);
    let v = printable_vocab(extra);
    let t = tables(compile_gbnf(grammar).unwrap(), &v);
    let samples: &[&[u8]] = &[br#"ab"Bcd"Bxyz?"#, br#"q"Bab"Bcdx!"#, br#"ab"B(ab"Bcd?)"#];
    assert_masks_agree("class slice past a match", &t, samples, 64);
}

/// A slice's walk leaves out the tokens whose first byte past the body is a
/// raw control only where that byte kills the lexeme with no match before it:
/// in a JSON string (every schema above), not in a body that reads newlines
/// (`[^"\\]*`) nor in one at a match (a line without controls, then a
/// newline and more).
#[test]
fn control_bytes_end_only_the_bodies_they_kill() {
    let cases = [
        (
            r#"root ::= "\"" [^"\\]* "\"" ("," root)?"#,
            "\"a\nb c\",\"x\n\ty\"",
        ),
        (
            r#"root ::= [^\x00-\x1F]* ("\n" root)?"#,
            "ab c\nde f\n\ngh.\nxy\nz",
        ),
    ];
    // `xy` has only members and tokens that a control ends below it.
    let custom = printable_vocab(["xy", "xy\n", "xy\t", "xy\nz"].map(|t| t.as_bytes().to_vec()));
    for v in [custom, vocab("gpt2"), vocab("mistral-7b-v0.1")] {
        for (grammar, sample) in cases {
            let t = tables(compile_gbnf(grammar).unwrap(), &v);
            assert_masks_agree(grammar, &t, &[sample.as_bytes()], sample.len());
        }
    }
}

/// One matcher's consecutive masks reuse the last future signature while the
/// chart is the same, with the lexemes' states rewritten: inside a pattern
/// string `[a-z]+-[0-9]+`, `a-1",` goes on after letters but not after the
/// dash. A rollback that rebuilds the chart (a code in brackets, then one in
/// braces, both on the chart's second set) must not reuse the first one's
/// signature: `1"]` ends the brackets, `1"}` the braces.
#[test]
fn reused_signatures_follow_states_and_rollbacks() {
    let extra = [r#"a-1","#, r#"1","#, r#"1"]"#, r#"1"}"#];
    let v = printable_vocab(extra.map(|t| t.as_bytes().to_vec()));
    // Rules that recurse keep the code's terminal apart from what follows it.
    let grammar = compile_gbnf(
        r#"root ::= "[" item ("," item)* "]" | "{" item "}"
item ::= code | "[" item "]"
code ::= "\"" [a-z]+ "-" [0-9]+ "\"""#,
    )
    .unwrap();
    let t = tables(grammar, &v);
    let width = t.mask_words() + 1;
    let tokenize = |text: &[u8]| {
        let mut ids = Vec::new();
        let mut at = 0;
        while at < text.len() {
            let (id, len) = v.trie().longest_prefix(&text[at..]).expect("a token");
            ids.push(id);
            at += len;
        }
        ids
    };
    let check = |matcher: &mut TokenMatcher, prefix: &[u8]| {
        let mut fast = vec![0u32; width];
        matcher.fill_next_token_bitmask(&mut fast);
        let diff = differences(&fast, &oracle_mask(&t, prefix, width));
        let shown: Vec<String> = diff
            .iter()
            .map(|&id| String::from_utf8_lossy(v.token_bytes(id)).into_owned())
            .collect();
        assert!(
            diff.is_empty(),
            "after {:?}: differences {shown:?}",
            String::from_utf8_lossy(prefix)
        );
    };
    // A mask after every token.
    let sample = br#"["ab-12","cd-3"]"#;
    let mut matcher = TokenMatcher::new(Arc::clone(&t));
    let mut at = 0;
    for id in tokenize(sample) {
        check(&mut matcher, &sample[..at]);
        matcher.consume_token(id).expect("in the language");
        at += v.token_bytes(id).len();
    }
    // The same lexeme on the same set, another chart.
    let mut matcher = TokenMatcher::new(Arc::clone(&t));
    let array = tokenize(br#"["ab-1"#);
    matcher.consume_tokens(&array).expect("in the language");
    check(&mut matcher, br#"["ab-1"#);
    matcher.rollback(array.len());
    let object = br#"{"ab-1"#;
    matcher
        .consume_tokens(&tokenize(object))
        .expect("in the language");
    check(&mut matcher, object);
}
