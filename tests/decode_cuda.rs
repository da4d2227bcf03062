//! The decode loop on a CUDA GPU: built only with `--features cuda`, and then it needs
//! a GPU (a `cuda` build is made for one; these tests fail loudly without it rather
//! than skip). The packed mask expanded on the device must equal the CPU's direct
//! write bit for bit, and the tiny random-weight models must compute the CPU's
//! logits (to float tolerance) and write grammar-valid output on the GPU.
//!
//! `cargo test --release --features cuda --test decode_cuda` (the README's CUDA recipe
//! for nvcc).
#![cfg(feature = "cuda")]

#[path = "support/json_schema_common.rs"]
mod json_schema_common;
#[path = "support/tiny_model.rs"]
mod tiny_model;

use std::sync::Arc;

use candle_core::{Device, Tensor};
use json_schema_common::compile;
use serde_json::{json, Value};
use stencil::decode::mask::{apply_in_place, apply_on_device};
use stencil::decode::{FinishReason, Generator, Model, ModelTokenizer, Request};
use stencil::frontend::json_schema::JsonSchemaOptions;
use stencil::matcher::StopPolicy;
use stencil::sampling::SamplingConfig;
use stencil::tables::TokenTables;

fn gpu() -> Device {
    Device::new_cuda(0).expect("a cuda build's tests need a CUDA GPU")
}

/// A deterministic stream of pseudo-random words.
fn words(seed: u64, n: usize) -> Vec<u32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 16) as u32
        })
        .collect()
}

#[test]
fn mask_expanded_on_the_gpu_equals_the_direct_write() {
    let device = gpu();
    // Vocabulary widths of real models, word boundaries, and masks shorter than the
    // row (ids past the mask are disallowed).
    for (case, &width) in [1usize, 31, 32, 33, 49152, 50257, 128256, 151936]
        .iter()
        .enumerate()
    {
        let row: Vec<f32> = words(case as u64 + 1, width)
            .iter()
            .map(|w| *w as f32 / u32::MAX as f32 * 40.0 - 20.0)
            .collect();
        let full = width.div_ceil(32);
        let mut masks = vec![
            words(100 + case as u64, full),
            vec![u32::MAX; full],
            vec![0; full],
            words(200 + case as u64, full / 2),
        ];
        // Sparse masks, as a JSON grammar gives outside strings.
        masks.push(
            words(300 + case as u64, full)
                .iter()
                .map(|w| w & 0x0100_0010)
                .collect(),
        );
        for mask in masks {
            let mut expected = row.clone();
            apply_in_place(&mut expected, &mask);
            let logits = Tensor::new(row.as_slice(), &device).unwrap();
            let got = apply_on_device(&logits, &mask)
                .unwrap()
                .to_vec1::<f32>()
                .unwrap();
            assert_eq!(got.len(), width);
            let differing = got
                .iter()
                .zip(&expected)
                .filter(|(a, b)| a.to_bits() != b.to_bits())
                .count();
            assert_eq!(differing, 0, "width {width}, mask of {} words", mask.len());
        }
    }
}

fn generation_options() -> JsonSchemaOptions {
    JsonSchemaOptions {
        plain_integers: true,
        ..JsonSchemaOptions::default()
    }
}

fn greedy_request(generator: &Generator, schema: &Value) -> Request {
    let grammar = compile(schema, &generation_options()).unwrap();
    Request {
        prompt: generator.tokenizer().encode_prompt("Write JSON:").unwrap(),
        grammar: Some(Arc::new(TokenTables::new(
            grammar,
            Arc::clone(generator.tokenizer().vocab()),
        ))),
        stop_policy: StopPolicy::Stop,
        sampling: SamplingConfig {
            temperature: Some(0.0),
            ..SamplingConfig::default()
        },
        max_tokens: 48,
        jump_forward: true,
        logprobs: 0,
        trace: false,
        budget_steering: true,
        reasoning: None,
    }
}

/// The largest difference between two logit rows, relative to the row's scale.
fn relative_difference(a: &[f32], b: &[f32]) -> f32 {
    let scale = a.iter().fold(1e-6f32, |m, v| m.max(v.abs()));
    a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs())) / scale
}

fn check_model_on_the_gpu(load: impl Fn(&Device) -> Generator, tolerance: f32, what: &str) {
    let cpu = load(&Device::Cpu);
    let gpu = load(&gpu());
    assert!(!gpu.model().device().is_cpu());
    let prompt = cpu.tokenizer().encode_prompt("The logits of").unwrap();
    let on_cpu = cpu.model().session().unwrap().forward(&prompt).unwrap();
    let on_gpu = gpu.model().session().unwrap().forward(&prompt).unwrap();
    let difference = relative_difference(&on_cpu, &on_gpu);
    assert!(
        difference < tolerance,
        "{what}: logits differ by {difference}"
    );
    let schemas = [
        json!({"type": "object",
               "properties": {"name": {"type": "string", "maxLength": 8},
                              "age": {"type": "integer", "minimum": 0, "maximum": 120}},
               "required": ["name", "age"], "additionalProperties": false}),
        json!({"type": "array", "items": {"enum": ["red", "green", 7, null]}, "maxItems": 4}),
    ];
    for schema in &schemas {
        let validator = jsonschema::validator_for(schema).unwrap();
        let g = gpu
            .generate(greedy_request(&gpu, schema), &mut |_| {})
            .unwrap();
        assert_eq!(g.finish_reason, FinishReason::Stop, "{what}: {g:?}");
        let value: Value = serde_json::from_str(&g.text).unwrap();
        assert!(validator.is_valid(&value), "{what}: {}", g.text);
        let c = cpu
            .generate(greedy_request(&cpu, schema), &mut |_| {})
            .unwrap();
        // Near-ties in a random model's logits may break differently under the GPU's
        // arithmetic, so equal texts are reported, not required.
        eprintln!(
            "{what}: gpu {:?} cpu {:?} ({})",
            g.text,
            c.text,
            if g.tokens == c.tokens {
                "same tokens"
            } else {
                "different tokens"
            }
        );
    }
}

#[test]
fn tiny_gguf_model_runs_on_the_gpu() {
    let path = tiny_model::tiny_model();
    check_model_on_the_gpu(
        |device| {
            let model = Model::load(path, device).unwrap();
            let tokenizer =
                ModelTokenizer::from_gguf(model.gguf_metadata().unwrap(), "tiny model").unwrap();
            Generator::new(model, tokenizer)
        },
        1e-3,
        "gguf",
    );
}

#[test]
fn tiny_safetensors_llama_runs_on_the_gpu() {
    let dir = tiny_model::tiny_safetensors("llama");
    // The GPU loads safetensors weights as bf16 (8 significant bits).
    check_model_on_the_gpu(
        |device| {
            let model = Model::load(&dir, device).unwrap();
            let tokenizer = ModelTokenizer::from_file(&dir.join("tokenizer.json")).unwrap();
            Generator::new(model, tokenizer)
        },
        0.1,
        "safetensors llama",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
