//! The default model (SmolLM2-135M-Instruct, Q4_1 GGUF from ../shared/data/models)
//! on schemas drawn from the vendored JSON Schema Test Suite fixtures: every output
//! that finishes with `stop` validates with the `jsonschema` crate; seeds reproduce,
//! alone and inside a batch of 8 mixed requests.
//!
//! Ignored by default (release-mode corpus step, `.ci/run`). Each schema gets a greedy
//! run and one sampled run, the sampled runs cycling through three seeds x three
//! presets; `STENCIL_DECODE_FULL=1` runs the whole seed x preset matrix per schema.
#![cfg(feature = "decode")]

#[path = "support/json_schema_common.rs"]
mod json_schema_common;

use std::path::PathBuf;
use std::sync::Arc;

use json_schema_common::{compile, shared_data};
use serde_json::Value;
use stencil::decode::{FinishReason, Generator, Message, Model, ModelTokenizer, Request};
use stencil::frontend::json_schema::{Draft, JsonSchemaOptions};
use stencil::matcher::StopPolicy;
use stencil::sampling::order::OrderSpec;
use stencil::sampling::SamplingConfig;
use stencil::tables::TokenTables;

const SCHEMAS: usize = 100;
const MAX_TOKENS: usize = 96;

fn model_path() -> PathBuf {
    shared_data().join("models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
}

/// A fixture schema: its name, its draft (from the fixture folder) and the schema.
type Fixture = (String, Draft, Value);

fn options(draft: Draft) -> JsonSchemaOptions {
    JsonSchemaOptions {
        default_draft: Some(draft),
        ..generation_options()
    }
}

fn validator(draft: Draft, schema: &Value) -> jsonschema::Validator {
    let draft = match draft {
        Draft::Draft7 => jsonschema::Draft::Draft7,
        _ => jsonschema::Draft::Draft202012,
    };
    jsonschema::options()
        .with_draft(draft)
        .build(schema)
        .unwrap()
}

/// Compilable schemas from the vendored fixtures, evenly spread over them.
fn fixture_schemas() -> Vec<Fixture> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/json-schema");
    let mut files: Vec<(PathBuf, Draft)> = [
        ("draft2020-12", Draft::Draft202012),
        ("draft7", Draft::Draft7),
    ]
    .iter()
    .flat_map(|&(d, draft)| {
        std::fs::read_dir(dir.join(d))
            .unwrap()
            .map(move |e| (e.unwrap().path(), draft))
    })
    .filter(|(p, _)| p.extension().is_some_and(|x| x == "json"))
    .collect();
    files.sort_by(|a, b| a.0.cmp(&b.0));
    let mut all = Vec::new();
    for (file, draft) in files {
        let groups: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        for (i, group) in groups.as_array().unwrap().iter().enumerate() {
            let schema = group["schema"].clone();
            if compile(&schema, &options(draft)).is_ok() {
                let name = format!("{}#{i}", file.file_name().unwrap().to_string_lossy());
                all.push((name, draft, schema));
            }
        }
    }
    let step = (all.len() as f64 / SCHEMAS as f64).max(1.0);
    (0..SCHEMAS.min(all.len()))
        .map(|k| all[(k as f64 * step) as usize].clone())
        .collect()
}

fn load() -> Generator {
    let model = Model::load(&model_path(), &candle_core::Device::Cpu).unwrap();
    let tokenizer =
        ModelTokenizer::from_gguf(model.gguf_metadata().unwrap(), "default model").unwrap();
    Generator::new(model, tokenizer)
}

fn request(
    g: &Generator,
    (_, draft, schema): &Fixture,
    seed: Option<u64>,
    preset: &str,
) -> Request {
    let tokenizer = g.tokenizer();
    let prompt = format!(
        "Write one JSON document that validates against this JSON Schema. Reply with the JSON only.\n\n{schema}"
    );
    let text = stencil::decode::render_chat(
        tokenizer.chat_template().unwrap(),
        &[Message::new("user", &prompt)],
        None,
        None,
    )
    .unwrap();
    let grammar = compile(schema, &options(*draft)).unwrap();
    Request {
        prompt: tokenizer.encode_prompt(&text).unwrap(),
        grammar: Some(Arc::new(TokenTables::new(
            grammar,
            Arc::clone(tokenizer.vocab()),
        ))),
        stop_policy: StopPolicy::Stop,
        sampling: SamplingConfig {
            order: Some(OrderSpec::Preset(preset.into())),
            seed,
            temperature: Some(if seed.is_some() { 0.8 } else { 0.0 }),
            top_p: seed.map(|_| 0.95),
            ..SamplingConfig::default()
        },
        max_tokens: MAX_TOKENS,
        jump_forward: true,
        logprobs: 0,
        trace: false,
        budget_steering: true,
        reasoning: None,
    }
}

#[test]
#[ignore = "needs ../shared/data/models (corpus step)"]
fn default_model_outputs_validate() {
    if !model_path().is_file() {
        eprintln!("skipped: {} is absent", model_path().display());
        return;
    }
    let g = load();
    let schemas = fixture_schemas();
    let full = std::env::var_os("STENCIL_DECODE_FULL").is_some();
    let combos: Vec<(u64, &str)> = [1u64, 2, 3]
        .iter()
        .flat_map(|&s| ["reference", "hf", "vllm"].map(|p| (s, p)))
        .collect();
    let (mut runs, mut stopped, mut tokens) = (0, 0, 0);
    let started = std::time::Instant::now();
    for (k, fixture) in schemas.iter().enumerate() {
        let (name, draft, schema) = fixture;
        if k % 20 == 0 {
            eprintln!(
                "  schema {k}/{}: {runs} runs, {stopped} stopped, {tokens} tokens, {:.0} s",
                schemas.len(),
                started.elapsed().as_secs_f64()
            );
        }
        let validator = validator(*draft, schema);
        let mut settings: Vec<(Option<u64>, &str)> = vec![(None, "reference")];
        if full {
            settings.extend(combos.iter().map(|&(s, p)| (Some(s), p)));
        } else {
            let (s, p) = combos[k % combos.len()];
            settings.push((Some(s), p));
        }
        for (seed, preset) in settings {
            let out = g
                .generate(request(&g, fixture, seed, preset), &mut |_| {})
                .unwrap();
            runs += 1;
            tokens += out.tokens.len();
            assert!(out.error.is_none(), "{name}: {:?}", out.error);
            if out.finish_reason == FinishReason::Stop {
                stopped += 1;
                let value: Value = serde_json::from_str(&out.text)
                    .unwrap_or_else(|e| panic!("{name}: {e}: {:?}", out.text));
                assert!(
                    validator.is_valid(&value),
                    "{name} {seed:?} {preset}: {schema} rejects {}",
                    out.text
                );
            } else {
                assert_eq!(out.finish_reason, FinishReason::Length, "{name}");
                assert!(!out.grammar_complete || out.tokens.len() == MAX_TOKENS);
            }
        }
    }
    eprintln!(
        "default model: {} schemas, {runs} runs, {stopped} stopped and validated, {} hit \
         max_tokens={MAX_TOKENS}; {tokens} tokens in {:.0} s",
        schemas.len(),
        runs - stopped,
        started.elapsed().as_secs_f64()
    );
    assert!(
        stopped * 2 > runs,
        "most runs should finish: {stopped}/{runs}"
    );

    // Reproducibility: the same seed twice, and inside a batch of 8 mixed requests.
    let picks: Vec<usize> = (0..8).map(|i| i * schemas.len() / 8).collect();
    let requests: Vec<Request> = picks
        .iter()
        .enumerate()
        .map(|(i, &k)| {
            let (s, p) = combos[i % combos.len()];
            request(&g, &schemas[k], (i % 4 != 0).then_some(s), p)
        })
        .collect();
    let alone: Vec<_> = requests
        .iter()
        .map(|r| g.generate(r.clone(), &mut |_| {}).unwrap())
        .collect();
    let again: Vec<_> = requests
        .iter()
        .map(|r| g.generate(r.clone(), &mut |_| {}).unwrap())
        .collect();
    let batch = g.generate_batch(requests, &mut |_| {}).unwrap();
    for i in 0..8 {
        assert_eq!(alone[i].text, again[i].text, "request {i} not reproducible");
        assert_eq!(
            alone[i].text, batch[i].text,
            "request {i} changed inside the batch"
        );
    }
}

/// Generation compiles integers without a zero fraction (`1`, never `1.0`).
fn generation_options() -> JsonSchemaOptions {
    JsonSchemaOptions {
        plain_integers: true,
        ..JsonSchemaOptions::default()
    }
}
