//! Token terminals: grammars that name whole tokens (`<[id]>`, `!<[id]>`,
//! `<name>` in GBNF; `<[1-5]>`, `<[^11]>`, `<[*]>`, `<|eot_id|>` in Lark).
//!
//! llama.cpp's integration cases (its `test-grammar-integration.cpp` builds the
//! inputs with `token(id)`, which the vendored case file leaves out) are written
//! here over a small vocabulary whose special tokens are ids 10-14 and 20-21;
//! masks are compared with the brute-force definition (each token consumed in
//! turn) over the vendored GPT-2 and Mistral vocabularies; bad grammars name
//! their location.

#[path = "support/oracle.rs"]
#[allow(dead_code)]
mod oracle;

use std::sync::Arc;

use stencil::matcher::TokenMatcher;
use stencil::tables::TokenTables;
use stencil::vocab::Vocabulary;
use stencil::Compiler;

/// Ids 0-9 are text, 10-14 and 20-21 special, 30 EOS; 15-19 and 22-29 text
/// (15 is `<b>`, a text token spelled like a special one).
fn small_vocab() -> Arc<Vocabulary> {
    let texts = ["a", "b", "hello", " world", "x", "{", "}", "\"", "1", " "];
    let mut tokens: Vec<Vec<u8>> = Vec::new();
    let mut special = Vec::new();
    for id in 0..31u32 {
        match id {
            0..=9 => tokens.push(texts[id as usize].as_bytes().to_vec()),
            10..=14 | 20 | 21 => {
                tokens.push(Vec::new());
                special.push((id, format!("<|s{id}|>")));
            }
            30 => {
                tokens.push(Vec::new());
                special.push((id, "<|end|>".to_string()));
            }
            15 => tokens.push(b"<b>".to_vec()),
            _ => tokens.push(format!("t{id}").into_bytes()),
        }
    }
    Arc::new(Vocabulary::from_token_bytes(tokens, special, vec![30]))
}

fn gbnf(vocab: &Arc<Vocabulary>, grammar: &str) -> Arc<TokenTables> {
    Compiler::new(Arc::clone(vocab))
        .compile_gbnf(grammar)
        .unwrap_or_else(|e| panic!("{grammar}: {e}"))
}

/// Consumes `tokens`: `Ok` with whether the grammar then accepts, or the index
/// of the first token refused.
fn run(tables: &Arc<TokenTables>, tokens: &[u32]) -> Result<bool, usize> {
    let mut matcher = TokenMatcher::new(Arc::clone(tables));
    for (i, &token) in tokens.iter().enumerate() {
        let mut mask = vec![0u32; tables.mask_words()];
        matcher.fill_next_token_bitmask(&mut mask);
        let in_mask = mask[token as usize / 32] >> (token % 32) & 1 == 1;
        let consumed = matcher.consume_token(token).is_ok();
        assert_eq!(
            in_mask, consumed,
            "token {token} at {i}: mask and consume disagree"
        );
        if !consumed {
            return Err(i);
        }
    }
    Ok(matcher.is_accepting())
}

#[test]
fn llama_cpp_simple_grammar_with_tokens() {
    let vocab = small_vocab();
    let tables = gbnf(
        &vocab,
        "root ::= <[10]> content <[11]>\ncontent ::= (!<[11]>)*",
    );
    // The text between the two tokens is any tokens, special ones included.
    assert_eq!(run(&tables, &[10, 2, 3, 11]), Ok(true));
    assert_eq!(run(&tables, &[10, 11]), Ok(true));
    assert_eq!(run(&tables, &[10, 12, 4, 20, 11]), Ok(true));
    // Missing start token: the text tokens are refused at once.
    assert_eq!(run(&tables, &[2, 3, 11]), Err(0));
    // Not finished without the end token; nothing after it.
    assert_eq!(run(&tables, &[10, 2, 3]), Ok(false));
    assert_eq!(run(&tables, &[10, 2, 11, 2]), Err(3));
    assert_eq!(run(&tables, &[10, 11, 11]), Err(2));
}

#[test]
fn llama_cpp_complex_grammar_with_tokens() {
    let vocab = small_vocab();
    let tables = gbnf(
        &vocab,
        "root ::= reasoning+ content tool-call*
reasoning ::= <[10]> (!<[11]>)* <[11]>
content ::= <[20]> (!<[21]>)* <[21]>
tool-call ::= <[12]> name <[13]> args <[14]>
name ::= (!<[13]>)+
args ::= (!<[14]>)*",
    );
    assert_eq!(run(&tables, &[10, 2, 11, 20, 3, 21]), Ok(true));
    assert_eq!(run(&tables, &[10, 11, 10, 0, 11, 20, 21]), Ok(true));
    assert_eq!(
        run(
            &tables,
            &[10, 11, 20, 21, 12, 4, 13, 5, 6, 14, 12, 1, 13, 14]
        ),
        Ok(true)
    );
    // Content first: no reasoning span.
    assert_eq!(run(&tables, &[20, 21]), Err(0));
    // A tool call needs a name.
    assert_eq!(run(&tables, &[10, 11, 20, 21, 12, 13]), Err(5));
}

#[test]
fn text_and_tokens_mix_and_special_tokens_stay_out_unless_named() {
    let vocab = small_vocab();
    let tables = gbnf(&vocab, r#"root ::= "{" [a-z ]* "}" <[12]> "x""#);
    assert_eq!(run(&tables, &[5, 0, 1, 9, 6, 12, 4]), Ok(true));
    // `}` then `x` without the token between: refused.
    assert_eq!(run(&tables, &[5, 6, 4]), Err(2));
    // Inside the braces no special token is allowed (and EOS only at the end).
    let mut matcher = TokenMatcher::new(Arc::clone(&tables));
    matcher.consume_token(5).unwrap();
    let mut mask = vec![0u32; tables.mask_words()];
    matcher.fill_next_token_bitmask(&mut mask);
    for (id, _) in vocab.special_tokens() {
        assert_eq!(mask[0] >> id & 1, 0, "special token {id} allowed in text");
    }
    // After `}` only token 12 is allowed.
    matcher.consume_token(6).unwrap();
    matcher.fill_next_token_bitmask(&mut mask);
    assert_eq!(mask, vec![1 << 12]);
    // Nothing is forced while a token may come instead.
    assert!(matcher.forced_bytes().is_empty());
    matcher.consume_token(12).unwrap();
    assert_eq!(matcher.forced_bytes(), b"x");
    // Rollback undoes the token step exactly.
    matcher.rollback(2);
    matcher.fill_next_token_bitmask(&mut mask);
    assert_eq!(mask[0] >> 6 & 1, 1);
    assert_eq!(mask[0] >> 12 & 1, 0);
}

#[test]
fn a_text_token_named_by_id_is_read_whole_or_by_its_bytes() {
    let vocab = small_vocab();
    // Token 2 is `hello`: by id it is one token here, by bytes the same text.
    let tables = gbnf(
        &vocab,
        r#"root ::= (<[2]> "!" | "hel" "lo" " world") | <[2]> <[3]>"#,
    );
    assert_eq!(run(&tables, &[2, 3]), Ok(true));
    let tables = gbnf(&vocab, r#"root ::= <[2]> " world" | "hello" <[12]>"#);
    assert_eq!(run(&tables, &[2, 3]), Ok(true));
    assert_eq!(run(&tables, &[2, 12]), Ok(true));
    // Another token with the same text would not do: `<[0]>` is only token 0.
    let tables = gbnf(&vocab, "root ::= <[0]> <[1]>");
    assert_eq!(run(&tables, &[0, 1]), Ok(true));
    assert_eq!(run(&tables, &[1, 0]), Err(0));
}

#[test]
fn any_token_never_includes_end_of_sequence() {
    let vocab = small_vocab();
    let tables = gbnf(&vocab, "root ::= <[*]> <[*]>");
    let mut matcher = TokenMatcher::new(Arc::clone(&tables));
    let mut mask = vec![0u32; 1];
    matcher.fill_next_token_bitmask(&mut mask);
    assert_eq!(mask[0], (1u32 << 30) - 1, "every token but EOS (30)");
    assert_eq!(run(&tables, &[12, 3]), Ok(true));
    matcher.consume_tokens(&[12, 3]).unwrap();
    matcher.fill_next_token_bitmask(&mut mask);
    assert_eq!(mask[0], 1 << 30, "then only EOS");
}

#[test]
fn names_bind_to_special_tokens_and_to_text_tokens() {
    let vocab = small_vocab();
    let tables = gbnf(&vocab, "root ::= <|s12|> <b> !<|s13|>");
    assert_eq!(run(&tables, &[12, 15, 14]), Ok(true));
    assert_eq!(run(&tables, &[12, 15, 13]), Err(2));
    // `<b>` by id is also its bytes: a literal `<b>` takes the same token.
    let tables = gbnf(&vocab, "root ::= <b> \"x\" | \"<b>\" \"1\"");
    assert_eq!(run(&tables, &[15, 4]), Ok(true));
    assert_eq!(run(&tables, &[15, 8]), Ok(true));
}

fn gbnf_error(vocab: &Arc<Vocabulary>, grammar: &str) -> String {
    match Compiler::new(Arc::clone(vocab)).compile_gbnf(grammar) {
        Ok(_) => panic!("{grammar}: compiled"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_token_references_name_their_place() {
    let vocab = small_vocab();
    let cases = [
        (
            "root ::= \"a\" <|nope|>",
            "1:14: the vocabulary has no token `<|nope|>`",
        ),
        (
            "root ::= \"a\"\n  | <[31]>",
            "2:5: token id 31 is outside the vocabulary of 31 tokens",
        ),
        (
            "root ::= <|end|>",
            "1:10: token 30 `<|end|>` is the end-of-sequence token",
        ),
        ("root ::= <[5-3]>", "1:10: invalid token range"),
        ("root ::= <[]>", "1:10: empty token range"),
        ("root ::= < x>", "1:10: bad token reference"),
        ("root ::= !<[*]>", "1:10: `!<[*]>` matches no token"),
    ];
    for (grammar, message) in cases {
        let error = gbnf_error(&vocab, grammar);
        assert!(error.contains(message), "{grammar}: {error}");
    }
    // Without a vocabulary, ids compile and names cannot.
    assert!(stencil::compile_gbnf("root ::= <[5]>").is_ok());
    let error = stencil::compile_gbnf("root ::= \"a\" <think>")
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("names the token `<think>` (line 1:14), but is not bound to a vocabulary"),
        "{error}"
    );
}

#[test]
fn lark_special_tokens_compile_and_match() {
    let vocab = small_vocab();
    let compiler = Compiler::new(Arc::clone(&vocab));
    let tables = compiler
        .compile_lark("start: <|s10|> body <[11]>\nbody: (\"a\" | \"b\" | <[^10-14,20-21]>)*")
        .unwrap();
    assert_eq!(run(&tables, &[10, 0, 15, 1, 11]), Ok(true));
    assert_eq!(run(&tables, &[10, 12]), Err(1));
    for (grammar, message) in [
        ("start: FOO\nFOO: <[1234]>", "cannot be used in terminals"),
        (
            "start: \"A\" | <|foobarbaz|>",
            "the vocabulary has no token `<|foobarbaz|>`",
        ),
        (
            "start: <[^*]>",
            "negated wildcard token <[^*]> is not supported",
        ),
    ] {
        let error = match compiler.compile_lark(grammar) {
            Ok(_) => panic!("{grammar}: compiled"),
            Err(e) => e.to_string(),
        };
        assert!(error.contains(message), "{grammar}: {error}");
    }
}

fn vendored(name: &str) -> Arc<Vocabulary> {
    let path = format!(
        "{}/tests/fixtures/tokenizers/{name}/tokenizer.json.gz",
        env!("CARGO_MANIFEST_DIR")
    );
    Arc::new(Vocabulary::from_tokenizer_file(&path).unwrap_or_else(|e| panic!("{e}")))
}

/// Tokens of `text` by the vocabulary's greedy longest match (any tokenization
/// will do: the grammar is over bytes there).
fn greedy_tokens(vocab: &Vocabulary, text: &str) -> Vec<u32> {
    let mut out = Vec::new();
    let mut rest = text.as_bytes();
    while !rest.is_empty() {
        let (id, len) = (0..vocab.len() as u32)
            .map(|id| (id, vocab.token_bytes(id)))
            .filter(|(_, bytes)| !bytes.is_empty() && rest.starts_with(bytes))
            .map(|(id, bytes)| (id, bytes.len()))
            .max_by_key(|&(_, len)| len)
            .expect("every byte has a token");
        out.push(id);
        rest = &rest[len..];
    }
    out
}

#[test]
fn mistral_masks_with_special_tokens_match_the_oracle() {
    let vocab = vendored("mistral-7b-v0.1");
    let compiler = Compiler::new(Arc::clone(&vocab));
    // `<s>` (1) opens, `<unk>` (0) separates, text between; EOS `</s>` (2).
    let tables = compiler
        .compile_lark(
            r#"start: <s> item (<unk> item)* tail
item: "{" /[a-z ]*/ "}"
tail: /[0-9]+/ | <[*]>"#,
        )
        .unwrap();
    let mut tokens = vec![1];
    tokens.extend(greedy_tokens(&vocab, "{ab c}"));
    tokens.push(0);
    tokens.extend(greedy_tokens(&vocab, "{}"));
    tokens.extend(greedy_tokens(&vocab, "42"));
    oracle::assert_token_masks_agree(&tables, &tokens);
}

#[test]
fn gpt2_masks_around_any_token_match_the_oracle() {
    let vocab = vendored("gpt2");
    let compiler = Compiler::new(Arc::clone(&vocab));
    // A token of any kind, then JSON-ish text that may also start inside it.
    let tables = compiler
        .compile_gbnf(r#"root ::= "say" (<[*]> | " hi") "!" [a-z]{0,3} (!<[0-100]> | "")"#)
        .unwrap();
    let mut tokens = greedy_tokens(&vocab, "say");
    tokens.extend(greedy_tokens(&vocab, " hi!ab"));
    oracle::assert_token_masks_agree(&tables, &tokens);
    let mut tokens = greedy_tokens(&vocab, "say");
    tokens.push(50256 - 1);
    tokens.extend(greedy_tokens(&vocab, "!"));
    oracle::assert_token_masks_agree(&tables, &tokens);
}
