//! The compiler object: grammars compiled through one share what they have in
//! common, two compilers share nothing, and what a compiler keeps stays within
//! its memory limit.

use std::sync::Arc;

use serde_json::{json, Value};
use stencil::frontend::json_schema::JsonSchemaOptions;
use stencil::matcher::TokenMatcher;
use stencil::tables::TokenTables;
use stencil::vocab::Vocabulary;
use stencil::{Compiler, CompilerOptions};

fn gpt2() -> Arc<Vocabulary> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/tokenizers/gpt2/tokenizer.json.gz"
    );
    Arc::new(Vocabulary::from_tokenizer_file(path).unwrap_or_else(|e| panic!("{e}")))
}

/// The masks along `text`, one per byte boundary that is a token boundary of the
/// greedy longest-token cut.
fn masks_along(tables: &Arc<TokenTables>, text: &str) -> Vec<Vec<u32>> {
    let mut matcher = TokenMatcher::new(Arc::clone(tables));
    let trie = tables.vocab().trie();
    let mut rest = text.as_bytes();
    let mut masks = Vec::new();
    loop {
        let mut mask = vec![0u32; tables.mask_words()];
        matcher.fill_next_token_bitmask(&mut mask);
        masks.push(mask);
        let Some((id, len)) = trie.longest_prefix(rest) else {
            break;
        };
        matcher.consume_token(id).unwrap();
        rest = &rest[len..];
    }
    masks
}

/// An object with a string, a number and an enum: `n` makes each one distinct.
fn schema(n: usize) -> Value {
    json!({
        "type": "object",
        "properties": {
            format!("name{n}"): {"type": "string", "maxLength": 5 + n},
            "size": {"type": "integer", "minimum": n, "maximum": 1000 + n},
            "kind": {"enum": [format!("k{n}"), format!("kind-{n}"), n]}
        },
        "required": [format!("name{n}"), "size", "kind"]
    })
}

fn instance(n: usize) -> String {
    format!(r#"{{"name{n}":"abc","size":{},"kind":"k{n}"}}"#, n + 7)
}

#[test]
fn grammars_of_one_compiler_share_and_two_compilers_do_not() {
    let vocab = gpt2();
    let options = JsonSchemaOptions::default();
    let compiler = Compiler::new(Arc::clone(&vocab));
    let first = compiler.compile_json_schema(&schema(1), &options).unwrap();
    let first_masks = masks_along(&first, &instance(1));
    let after_first = compiler.memory_usage();
    assert!(after_first > 0);

    // The same schema again builds nothing new: every automaton and table is
    // found, and the masks are the same.
    let again = compiler.compile_json_schema(&schema(1), &options).unwrap();
    assert!(Arc::ptr_eq(first.shared(), again.shared()));
    assert_eq!(masks_along(&again, &instance(1)), first_masks);
    assert_eq!(compiler.memory_usage(), after_first);

    // Another compiler starts empty and builds its own; masks agree.
    let other = Compiler::new(Arc::clone(&vocab));
    assert_eq!(other.memory_usage(), 0);
    let separate = other.compile_json_schema(&schema(1), &options).unwrap();
    assert!(!Arc::ptr_eq(first.shared(), separate.shared()));
    assert_eq!(masks_along(&separate, &instance(1)), first_masks);
    assert_eq!(other.memory_usage(), after_first);
    assert_eq!(compiler.memory_usage(), after_first);

    // Tables made on their own agree too.
    let alone = Arc::new(TokenTables::new(
        Arc::clone(first.grammar()),
        Arc::clone(&vocab),
    ));
    assert_eq!(masks_along(&alone, &instance(1)), first_masks);

    // Cleared, the compiler holds nothing; grammars compiled before keep working.
    compiler.clear();
    assert_eq!(compiler.memory_usage(), 0);
    assert_eq!(masks_along(&first, &instance(1)), first_masks);
}

#[test]
fn a_compiler_stays_within_its_memory_limit() {
    let vocab = gpt2();
    let options = JsonSchemaOptions::default();
    let limit = 1 << 20;
    let run = |memory_limit: usize| {
        let compiler = Compiler::with_options(
            Arc::clone(&vocab),
            CompilerOptions {
                memory_limit,
                ..CompilerOptions::default()
            },
        );
        let mut most = 0;
        for n in 0..24 {
            let tables = compiler.compile_json_schema(&schema(n), &options).unwrap();
            let masks = masks_along(&tables, &instance(n));
            assert!(masks.len() > 10);
            most = most.max(compiler.memory_usage());
            assert!(
                compiler.memory_usage() <= memory_limit,
                "schema {n}: {} bytes kept, limit {memory_limit}",
                compiler.memory_usage()
            );
        }
        most
    };
    // Unbounded, the same work keeps well past the limit; bounded, never past it.
    let unbounded = run(1 << 30);
    assert!(
        unbounded > 2 * limit,
        "the workload keeps only {unbounded} bytes"
    );
    let bounded = run(limit);
    assert!(bounded <= limit && bounded > limit / 8, "{bounded}");
}

#[test]
fn compile_errors_name_their_place() {
    let compiler = Compiler::new(gpt2());
    let err = compiler
        .compile_json_schema(
            &json!({"properties": {"a": {"type": "strin"}}}),
            &JsonSchemaOptions::default(),
        )
        .unwrap_err();
    assert!(err.to_string().contains("/properties/a"), "{err}");
    let err = compiler.compile_gbnf("root ::= \"a\" b").unwrap_err();
    assert!(err.to_string().contains("1:"), "{err}");
    let err = compiler.compile_regex("a(b").unwrap_err();
    assert!(err.to_string().contains("byte offset"), "{err}");
}

#[test]
fn a_lark_grammar_with_json_masks_as_its_schema_does() {
    let vocab = gpt2();
    let compiler = Compiler::new(Arc::clone(&vocab));
    let mut embedded = schema(1);
    embedded["x-guidance"] = json!({"whitespace_flexible": false});
    let lark = compiler
        .compile_lark(&format!("start: %json {embedded}"))
        .unwrap();
    let direct = compiler
        .compile_json_schema(&schema(1), &JsonSchemaOptions::default())
        .unwrap();
    assert_eq!(
        masks_along(&lark, &instance(1)),
        masks_along(&direct, &instance(1))
    );
    let e = compiler.compile_lark("start: \"a\" <|eot|>").unwrap_err();
    assert!(e.to_string().starts_with("1:12: "), "{e}");
}
