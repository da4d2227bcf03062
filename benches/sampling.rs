//! One run, one 128,256-wide row (Llama 3's vocabulary): the full default pipeline
//! (penalties, temperature, top-k 50, top-p 0.9) per step, one plain softmax over the same
//! row for scale, and top-p over the whole row with and without a full sort, on a flat and
//! a peaked row.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use stencil::sampling::logits::softmax_f32;
use stencil::sampling::processors::truncation::{top_p_positions_partial, top_p_positions_sorted};
use stencil::sampling::{DecoderState, Sampler, SamplingConfig, StepOptions, Unconstrained};

const WIDTH: usize = 128_256;

/// A deterministic logits row with a realistic spread (a few strong tokens, a long tail).
fn row() -> Vec<f32> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..WIDTH)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            (8.0 * u.powi(6) - 2.0 + 2.0 * u) as f32
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let logits = row();
    let cfg: SamplingConfig = serde_json::from_str(
        r#"{"repetition_penalty": 1.1, "presence_penalty": 0.3, "frequency_penalty": 0.2,
            "temperature": 0.8, "top_k": 50, "top_p": 0.9}"#,
    )
    .unwrap();
    let sampler = Sampler::from_config(&cfg).unwrap();
    let mut state: DecoderState<Unconstrained> =
        sampler.new_state((0..300).collect(), Some(1), None);
    state
        .replay(
            &(0..200)
                .map(|i| (i * 613) % WIDTH as u32)
                .collect::<Vec<_>>(),
        )
        .unwrap();
    let opts = StepOptions::default();

    let mut g = c.benchmark_group("row_128256");
    g.sample_size(30);
    g.bench_function("pipeline_default_step", |b| {
        b.iter(|| {
            black_box(
                sampler
                    .step(&state, black_box(&logits), &opts)
                    .unwrap()
                    .token,
            )
        })
    });
    g.bench_function("plain_softmax", |b| {
        b.iter(|| black_box(softmax_f32(black_box(&logits))))
    });
    // Two shapes: the row as is (flat tail, large nucleus) and sharpened x3 (peaked, small
    // nucleus, closer to a confident model). The nucleus sizes are printed for context.
    let peaked: Vec<f32> = logits.iter().map(|z| 3.0 * z).collect();
    for (name, r) in [("flat", &logits), ("peaked", &peaked)] {
        let probs = softmax_f32(r);
        eprintln!(
            "top-p 0.9 nucleus on the {name} row: {} tokens",
            top_p_positions_sorted(&probs, 0.9).len()
        );
        g.bench_function(format!("top_p_0.9_partial_selection_{name}"), |b| {
            b.iter(|| black_box(top_p_positions_partial(black_box(&probs), 0.9).len()))
        });
        g.bench_function(format!("top_p_0.9_full_sort_{name}"), |b| {
            b.iter(|| black_box(top_p_positions_sorted(black_box(&probs), 0.9).len()))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
