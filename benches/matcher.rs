//! Byte-matcher throughput, grammar compile time and token-mask time, on the
//! shipped JSON grammar and the llama.cpp grammars, with the vendored GPT-2
//! vocabulary (so it runs on a fresh clone). The side-by-side comparison with
//! llguidance on Llama-3 is `stencil bench` (README).

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use stencil::matcher::TokenMatcher;
use stencil::tables::TokenTables;
use stencil::vocab::Vocabulary;
use stencil::{compile_gbnf, Matcher};

fn json_document() -> String {
    let mut doc = String::from("{\"items\": [");
    for i in 0..200 {
        if i > 0 {
            doc.push_str(", ");
        }
        doc.push_str(&format!(
            "{{\"id\": {i}, \"name\": \"item number {i} \\u00e9\", \"price\": {}.{:02}, \"tags\": [\"a\", \"b\"], \"ok\": true}}",
            i * 3,
            i % 100
        ));
    }
    doc.push_str("]}");
    doc
}

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn bench(c: &mut Criterion) {
    let json_grammar = read("grammars/json.gbnf");
    let doc = json_document();

    let mut group = c.benchmark_group("compile");
    for name in ["json", "c", "chess", "english"] {
        let text = read(&format!("tests/fixtures/gbnf/llama.cpp/{name}.gbnf"));
        group.bench_function(name, |b| b.iter(|| compile_gbnf(&text).unwrap()));
    }
    group.finish();

    let grammar = compile_gbnf(&json_grammar).unwrap();
    let mut group = c.benchmark_group("consume");
    group.throughput(Throughput::Bytes(doc.len() as u64));
    group.bench_function("json_document", |b| {
        b.iter(|| {
            let mut m = Matcher::new(Arc::clone(&grammar));
            m.consume_bytes(doc.as_bytes()).unwrap();
            assert!(m.is_accepting());
        })
    });
    group.finish();

    let mut group = c.benchmark_group("allowed_bytes");
    let mut m = Matcher::new(Arc::clone(&grammar));
    m.consume_bytes(br#"{"items": [{"id": 1, "name": "in a str"#)
        .unwrap();
    group.bench_function("inside_string", |b| b.iter(|| m.allowed_bytes()));
    let mut m = Matcher::new(Arc::clone(&grammar));
    m.consume_bytes(br#"{"items": [{"id": 1, "#).unwrap();
    group.bench_function("between_members", |b| b.iter(|| m.allowed_bytes()));
    group.finish();
}

fn bench_masks(c: &mut Criterion) {
    let vocab = Arc::new(
        Vocabulary::from_tokenizer_file(format!(
            "{}/tests/fixtures/tokenizers/gpt2/tokenizer.json.gz",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap(),
    );
    let grammar = compile_gbnf(&read("grammars/json.gbnf")).unwrap();
    let mut group = c.benchmark_group("mask_gpt2_json");
    let prefixes: [(&str, &[u8]); 3] = [
        (
            "inside_string",
            br#"{"items": [{"id": 1, "name": "in a str"#,
        ),
        ("after_comma", br#"{"items": [{"id": 1,"#),
        ("inside_number", br#"{"items": [{"id": 12"#),
    ];
    for (name, prefix) in prefixes {
        let tables = Arc::new(TokenTables::new(Arc::clone(&grammar), Arc::clone(&vocab)));
        let mut m = TokenMatcher::new(Arc::clone(&tables));
        m.consume_bytes(prefix).unwrap();
        let mut mask = vec![0u32; tables.mask_words()];
        group.bench_function(format!("{name}_warm"), |b| {
            b.iter(|| m.fill_next_token_bitmask(&mut mask))
        });
        group.bench_function(format!("{name}_cold"), |b| {
            b.iter(|| {
                // Fresh tables: every cache empty, as for a newly compiled grammar.
                let tables = Arc::new(TokenTables::new(Arc::clone(&grammar), Arc::clone(&vocab)));
                let mut m = TokenMatcher::new(tables);
                m.consume_bytes(prefix).unwrap();
                m.fill_next_token_bitmask(&mut mask);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench, bench_masks);
criterion_main!(benches);
