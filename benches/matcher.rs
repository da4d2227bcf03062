//! Byte-matcher throughput and grammar compile time, on the shipped JSON grammar
//! and the llama.cpp grammars. Token masks and the peer comparison come with the
//! vocabulary stage; this measures the core they stand on.

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
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

criterion_group!(benches, bench);
criterion_main!(benches);
