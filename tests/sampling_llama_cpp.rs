//! stencil's `llama.cpp` preset against llama.cpp's own sampler chain (penalties, DRY,
//! top-n-sigma, top-k, typical, top-p, min-p, XTC, temperature), step by step, on a
//! fixed logits sequence over the default model's vocabulary.
//!
//! `scripts/llama_cpp_chain.py` ran llama.cpp (through llama-cpp-python) and recorded,
//! per chain of settings and per step, the surviving token ids and their selection
//! probabilities in `tests/fixtures/llama_cpp_chain.json`. This test builds the same rows,
//! feeds the same history, maps llama.cpp's parameters onto a [`SamplingConfig`] with
//! the `llama.cpp` order and asks the sampler the decode loop uses
//! ([`Generator::sampler_for`]: DRY's breakers derived from the model's vocabulary).
//! Where `llama_cpp` imports (`STENCIL_LLAMA_CPP_PYTHON` names the interpreter, else
//! `python3`), the script runs again and the live record is compared too.
//!
//! Ignored by default: it needs ../shared/data/models (the corpus step of `.ci/run`).
#![cfg(feature = "decode")]

#[path = "support/json_schema_common.rs"]
mod json_schema_common;

use std::path::{Path, PathBuf};
use std::process::Command;

use json_schema_common::shared_data;
use serde_json::{json, Value};
use stencil::decode::{Generator, Model, ModelTokenizer};
use stencil::sampling::{DecoderState, SamplingConfig, StepOptions, Unconstrained};

fn model_path() -> PathBuf {
    shared_data().join("models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
}

fn fixture_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/llama_cpp_chain.json")
}

/// The script's row formula, in the same arithmetic: an f64 rounded once to f32.
fn row(spec: &Value, step: u64, boosts: &Value) -> Vec<f32> {
    let num = |k: &str| spec[k].as_f64().unwrap();
    let width = spec["width"].as_u64().unwrap();
    let (stride, shift) = (
        spec["stride"].as_u64().unwrap(),
        spec["shift"].as_u64().unwrap(),
    );
    let mut row: Vec<f32> = (0..width)
        .map(|i| {
            (num("offset") + ((i * stride + step * shift) % width) as f64 / num("scale")) as f32
        })
        .collect();
    for b in boosts.as_array().unwrap() {
        row[b[0].as_u64().unwrap() as usize] = b[1].as_f64().unwrap() as f32;
    }
    row
}

/// llama.cpp's parameters as a stencil configuration. llama.cpp's penalties count every
/// accepted token (here the prompt too) within the last `repeat_last_n`; its "off"
/// values (k <= 0, p >= 1, min-p 0, n-sigma <= 0, XTC probability 0) become absent keys.
fn stencil_config(s: &Value) -> SamplingConfig {
    let f = |k: &str| s[k].as_f64().unwrap();
    let window = json!({"include_prompt": true, "last_n": s["repeat_last_n"]});
    let mut cfg = json!({
        "order": "llama.cpp",
        "seed": 7,
        "temperature": f("temperature"),
        "repetition_penalty": f("repeat_penalty"),
        "repetition_scope": window,
        "frequency_penalty": f("frequency_penalty"),
        "frequency_scope": window,
        "presence_penalty": f("presence_penalty"),
        "presence_scope": window,
        "dry": {
            "multiplier": f("dry_multiplier"),
            "base": f("dry_base"),
            "allowed_length": s["dry_allowed_length"],
            "penalty_last_n": s["dry_penalty_last_n"],
            "sequence_breakers": s["dry_sequence_breakers"],
        },
    });
    if f("top_n_sigma") > 0.0 {
        cfg["top_n_sigma"] = s["top_n_sigma"].clone();
    }
    if f("top_k") > 0.0 {
        cfg["top_k"] = s["top_k"].clone();
    }
    for key in ["typical_p", "top_p"] {
        if f(key) < 1.0 {
            cfg[key] = s[key].clone();
        }
    }
    if f("min_p") > 0.0 {
        cfg["min_p"] = s["min_p"].clone();
    }
    if f("xtc_probability") > 0.0 {
        cfg["xtc"] = json!({"probability": f("xtc_probability"), "threshold": f("xtc_threshold")});
    }
    serde_json::from_value(cfg).unwrap()
}

/// Every chain and step of a record: the same survivors, probabilities within 2e-6
/// (llama.cpp keeps f32 logits; both sides' softmax runs over them).
fn compare(generator: &Generator, record: &Value, source: &str) {
    let prompt: Vec<u32> = serde_json::from_value(record["prompt"].clone()).unwrap();
    let steps = record["steps"].as_array().unwrap();
    let chains = record["chains"].as_array().unwrap();
    assert!(
        chains.len() >= 3 && steps.len() >= 10,
        "{source}: a short record"
    );
    let mut compared = 0;
    for chain in chains {
        let name = chain["settings"]["name"].as_str().unwrap();
        let sampler = generator
            .sampler_for(&stencil_config(&chain["settings"]))
            .unwrap();
        let mut state: DecoderState<Unconstrained> = sampler.new_state(prompt.clone(), None, None);
        for (t, (step, want)) in steps
            .iter()
            .zip(chain["steps"].as_array().unwrap())
            .enumerate()
        {
            let row = row(&record["row"], t as u64, &step["boosts"]);
            let out = sampler.step(&state, &row, &StepOptions::default()).unwrap();
            let want_ids: Vec<u32> = serde_json::from_value(want["ids"].clone()).unwrap();
            let want_probs: Vec<f64> = serde_json::from_value(want["probs"].clone()).unwrap();
            assert_eq!(
                out.selection.ids, want_ids,
                "{source}: {name}, step {t}: survivors"
            );
            for ((id, got), want) in out
                .selection
                .ids
                .iter()
                .zip(&out.selection.probs)
                .zip(&want_probs)
            {
                assert!(
                    (got - want).abs() < 2e-6,
                    "{source}: {name}, step {t}: p({id}) = {got}, llama.cpp {want}"
                );
            }
            state
                .replay(&[step["accept"].as_u64().unwrap() as u32])
                .unwrap();
            compared += 1;
        }
    }
    eprintln!(
        "{source}: {compared} steps over {} chains agree",
        chains.len()
    );
}

/// llama.cpp's record made now, where `llama_cpp` imports.
fn live_record(model: &Path) -> Option<Value> {
    let python = std::env::var("STENCIL_LLAMA_CPP_PYTHON").unwrap_or_else(|_| "python3".into());
    let imports = Command::new(&python)
        .args(["-c", "import llama_cpp"])
        .output();
    if !imports.is_ok_and(|o| o.status.success()) {
        eprintln!("llama_cpp does not import in {python}: the recorded fixture only");
        return None;
    }
    let out = std::env::temp_dir().join(format!("llama_cpp_chain-{}.json", std::process::id()));
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/llama_cpp_chain.py");
    let run = Command::new(&python)
        .arg(script)
        .arg(model)
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let record = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let _ = std::fs::remove_file(&out);
    Some(record)
}

#[test]
#[ignore = "needs ../shared/data/models (corpus step)"]
fn llama_cpp_preset_matches_llama_cpps_sampler_chain() {
    let model = Model::load(&model_path(), &candle_core::Device::Cpu).unwrap();
    let tokenizer =
        ModelTokenizer::from_gguf(model.gguf_metadata().unwrap(), "default model").unwrap();
    let generator = Generator::new(model, tokenizer);
    let fixture: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture_path()).unwrap()).unwrap();
    // The recorded prompt is what this tokenizer makes of the text.
    let prompt = generator
        .tokenizer()
        .encode(fixture["prompt_text"].as_str().unwrap())
        .unwrap();
    assert_eq!(json!(prompt), fixture["prompt"]);
    compare(&generator, &fixture, "recorded fixture");
    if let Some(live) = live_record(&model_path()) {
        compare(&generator, &live, "llama.cpp now");
    }
}
