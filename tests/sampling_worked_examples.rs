//! Every worked number of the two specification texts, reproduced through the public API
//! to the printed precision.

#[path = "support/sampling_common.rs"]
mod common;
use common::*;
use serde_json::json;
use stencil::sampling::logits::softmax_f32;
use stencil::sampling::processors::watermark::z_score;
use stencil::sampling::rng::RngStream;
use stencil::sampling::select;
use stencil::sampling::{Layer, SelectionDistribution};

// ---- §3.9: one complete hand-computed selection ----------------------------------------

const SEC39_LOGITS: [f32; 3] = [2.0, 1.5, 0.5];
/// c_A = 2, c_B = 1, c_C = 0.
const SEC39_HISTORY: [u32; 3] = [0, 0, 1];

fn sec39(order: serde_json::Value, top_p: f64) -> stencil::sampling::Sampler {
    sampler(json!({
        "order": order, "presence_penalty": 0.1, "frequency_penalty": 0.2,
        "temperature": 0.8, "top_p": top_p, "strategy": "categorical"
    }))
}

#[test]
fn sec_3_9_reference_order_stage_by_stage() {
    let s = sec39(json!("reference"), 0.8);
    let o = step(&s, &SEC39_HISTORY, &SEC39_LOGITS, Some(0.63));
    assert_eq!(
        o.trace.order,
        [
            "grammar",
            "presence_penalty",
            "frequency_penalty",
            "temperature",
            "softmax",
            "top_p"
        ]
    );
    assert_all_printed(
        &stage_logits(&o, "frequency_penalty"),
        &["1.5", "1.2", "0.5"],
    );
    assert_all_printed(&stage_logits(&o, "temperature"), &["1.875", "1.5", "0.625"]);
    assert_all_printed(&stage_probs(&o, "softmax"), &["0.507", "0.348", "0.145"]);
    assert_eq!(stage_ids(&o, "top_p"), [0, 1]);
    assert_eq!(o.support.ids, [0, 1]);
    let sel = [
        o.selection.prob(0),
        o.selection.prob(1),
        o.selection.prob(2),
    ];
    assert_all_printed(&sel, &["0.593", "0.407", "0"]);
    assert_eq!(o.token, 1, "u = 0.63 selects B");
    assert_eq!(o.trace.u, Some(0.63));
    // The cumulative interval of A is [0, 0.593): a u just below it selects A.
    assert_eq!(step(&s, &SEC39_HISTORY, &SEC39_LOGITS, Some(0.59)).token, 0);
    // B's probability differs in every layer (raw softmax, processed softmax, selection).
    let raw_b = softmax_f32(&SEC39_LOGITS)[1];
    assert_printed(raw_b, "0.331");
    assert_printed(stage_probs(&o, "softmax")[1], "0.348");
    assert_printed(o.selection.prob(1), "0.407");
    // The step reports the sampled token under all three layers, each named.
    assert_eq!(layer_probability(&o, Layer::Raw), raw_b);
    assert_printed(layer_probability(&o, Layer::Processed), "0.348");
    assert_printed(layer_probability(&o, Layer::Selection), "0.407");
    // The trace records each processor's parameters beside its name.
    assert_eq!(
        o.trace.params[1],
        json!({"alpha": 0.1f32, "scope": {"include_prompt": false, "exclude_special": false}})
    );
    assert_eq!(o.trace.params[3], json!({"t": 0.8f32}));
    assert_eq!(o.trace.params[5], json!({"p": 0.8}));
}

/// The sampled token's probability in `layer`, from the step's logprobs.
fn layer_probability(o: &stencil::sampling::StepOutcome, layer: Layer) -> f64 {
    o.logprobs
        .iter()
        .find(|l| l.layer == layer)
        .unwrap_or_else(|| panic!("no {layer:?} logprob in {:?}", o.logprobs))
        .value
        .exp()
}

#[test]
fn sec_3_9_top_p_moved_before_penalties() {
    let order = json!([
        "softmax",
        "top_p",
        "presence_penalty",
        "frequency_penalty",
        "temperature"
    ]);
    let s = sec39(order, 0.8);
    let o = step(&s, &SEC39_HISTORY, &SEC39_LOGITS, Some(0.63));
    // Top-p now reads the raw softmax, not the processed one: its inputs change ...
    assert_all_printed(&stage_probs(&o, "softmax"), &["0.547", "0.331", "0.122"]);
    assert_eq!(stage_ids(&o, "top_p"), [0, 1]);
    // ... the penalties and temperature then act on the two survivors only ...
    assert_all_printed(&stage_logits(&o, "frequency_penalty"), &["1.5", "1.2"]);
    assert_all_printed(&stage_logits(&o, "temperature"), &["1.875", "1.5"]);
    // ... and in this instance the final support and choice happen to coincide.
    assert_eq!(o.support.ids, [0, 1]);
    assert_all_printed(
        &[o.selection.prob(0), o.selection.prob(1)],
        &["0.593", "0.407"],
    );
    assert_eq!(o.token, 1);
    // The processed layer has no truncation in it, wherever the order puts one.
    assert_printed(layer_probability(&o, Layer::Processed), "0.348");
    // With p0 = 0.86 the two orders disagree: the text's "no reason to hold".
    let reference = step(
        &sec39(json!("reference"), 0.86),
        &SEC39_HISTORY,
        &SEC39_LOGITS,
        Some(0.63),
    );
    let moved = step(
        &sec39(
            json!([
                "top_p",
                "presence_penalty",
                "frequency_penalty",
                "temperature"
            ]),
            0.86,
        ),
        &SEC39_HISTORY,
        &SEC39_LOGITS,
        Some(0.63),
    );
    assert_eq!(reference.support.ids, [0, 1, 2]);
    assert_eq!(moved.support.ids, [0, 1]);
}

// ---- §9.3.1 / Table 9-7: temperature, entropy, top-p and min-p counts -----------------

fn entropy_bits(p: &[f64]) -> f64 {
    -p.iter()
        .filter(|&&x| x > 0.0)
        .map(|&x| x * x.log2())
        .sum::<f64>()
}

/// tau, five probabilities, entropy (bit), 2^H, top-p(0.9) kept, min-p(0.1) kept.
type Table97Row = (
    f32,
    [&'static str; 5],
    &'static str,
    &'static str,
    usize,
    usize,
);

#[test]
fn table_9_7_three_temperatures() {
    let rows: [Table97Row; 3] = [
        (
            0.5,
            ["0.8647", "0.1170", "0.0158", "0.0021", "0.0003"],
            "0.661",
            "1.58",
            2,
            2,
        ),
        (
            1.0,
            ["0.6364", "0.2341", "0.0861", "0.0317", "0.0117"],
            "1.443",
            "2.72",
            3,
            3,
        ),
        (
            2.0,
            ["0.4287", "0.2600", "0.1577", "0.0956", "0.0580"],
            "2.012",
            "4.03",
            4,
            5,
        ),
    ];
    for (t, probs, h, eff, top_p_kept, min_p_kept) in rows {
        let o = step(&sampler(json!({"temperature": t})), &[], &ROW, Some(0.5));
        let p = o.selection.probs.clone();
        assert_all_printed(&p, &probs);
        let hb = entropy_bits(&p);
        assert_printed(hb, h);
        assert_printed(hb.exp2(), eff);
        let tp = step(
            &sampler(json!({"temperature": t, "top_p": 0.9})),
            &[],
            &ROW,
            Some(0.5),
        );
        assert_eq!(tp.support.len(), top_p_kept, "top-p(0.9) at tau={t}");
        let mp = step(
            &sampler(json!({"temperature": t, "min_p": 0.1})),
            &[],
            &ROW,
            Some(0.5),
        );
        assert_eq!(mp.support.len(), min_p_kept, "min-p(0.1) at tau={t}");
    }
}

#[test]
fn sec_9_3_1_arithmetic_and_limits() {
    let e: Vec<f64> = ROW.iter().map(|&z| f64::from(z).exp()).collect();
    assert_all_printed(&e, &["7.389", "2.718", "1", "0.368", "0.135"]);
    assert_printed(e.iter().sum(), "11.611");
    let o = step(&sampler(json!({"temperature": 1.0})), &[], &ROW, Some(0.5));
    assert_printed(o.selection.prob(0), "0.636");
    // tau = 0.5 equals squaring the tau = 1 probabilities and renormalising.
    let p1 = &o.selection.probs;
    let sq: f64 = p1.iter().map(|p| p * p).sum();
    assert_printed(p1[0] * p1[0] / sq, "0.8647");
    let half = step(&sampler(json!({"temperature": 0.5})), &[], &ROW, Some(0.5));
    assert!((half.selection.prob(0) - p1[0] * p1[0] / sq).abs() < 1e-6);
    // Temperature never changes the argmax.
    assert_eq!(half.selection.ids[0], 0);
    // tau -> infinity: uniform over Llama 3's 128,256 tokens, about 7.8e-6 each.
    let width = 128_256;
    let row: Vec<f32> = (0..width).map(|i| ((i % 41) as f32) / 10.0 - 2.0).collect();
    let hot = step(
        &sampler(json!({"temperature": 1.0e6})),
        &[],
        &row,
        Some(0.5),
    );
    for &p in &hot.selection.probs {
        assert_printed(p * 1e6, "7.8");
    }
    // tau = 0 is greedy, never a division.
    let g = step(&sampler(json!({"temperature": 0.0})), &[], &ROW, None);
    assert_eq!(g.token, 0);
    assert_eq!(g.trace.strategy, "greedy");
    assert!(!g.trace.order.contains(&"temperature"));
}

// ---- §9.3.2 top-k, §9.3.3 top-p, §9.3.4 min-p -----------------------------------------

#[test]
fn sec_9_3_2_top_k() {
    let o = step(
        &sampler(json!({"temperature": 1.0, "top_k": 2})),
        &[],
        &ROW,
        Some(0.5),
    );
    assert_eq!(o.support.ids, [0, 1]);
    assert_all_printed(&o.selection.probs, &["0.7311", "0.2689"]);
    let before = stage_probs(&o, "temperature");
    assert_printed(before[0] + before[1], "0.8705");
}

#[test]
fn sec_9_3_3_top_p() {
    let o = step(
        &sampler(json!({"temperature": 1.0, "top_p": 0.9})),
        &[],
        &ROW,
        Some(0.5),
    );
    let p = stage_probs(&o, "softmax");
    let cum: Vec<f64> = p
        .iter()
        .scan(0.0, |c, x| {
            *c += x;
            Some(*c)
        })
        .take(3)
        .collect();
    assert_all_printed(&cum, &["0.6364", "0.8705", "0.9567"]);
    assert_eq!(o.support.len(), 3);
    assert_all_printed(&o.selection.probs, &["0.6652", "0.2447", "0.0900"]);
}

/// One head token at 0.3 and 10,000 tail tokens at 7e-5 each.
fn long_tail() -> Vec<f32> {
    let mut row = vec![(7e-5f64).ln() as f32; 10_001];
    row[0] = (0.3f64).ln() as f32;
    row
}

#[test]
fn sec_9_3_3_long_tail_fills_the_nucleus() {
    let row = long_tail();
    let o = step(&sampler(json!({"top_p": 0.9})), &[], &row, Some(0.5));
    assert_printed((0.6 / 7e-5f64).ceil(), "8572");
    assert_eq!(o.support.len(), 1 + 8572, "head + 8,572 tail tokens");
    // Ties among equal tail tokens break by id ascending: the lowest tail ids stay.
    assert_eq!(*o.support.ids.last().unwrap(), 8572);
    let tail: f64 = o.selection.probs[1..].iter().sum();
    assert_printed(tail, "0.6667"); // 0.6 / 0.9 = 2/3
}

#[test]
fn sec_9_3_4_min_p_long_tail() {
    let row = long_tail();
    let o = step(&sampler(json!({"min_p": 0.1})), &[], &row, Some(0.5));
    assert_eq!(
        o.support.ids,
        [0],
        "threshold 0.03 removes every 7e-5 tail token"
    );
    assert_printed(0.1 * 0.3, "0.03");
    // Keeping the tail needs alpha <= 7e-5 / 0.3 ~ 2.3e-4.
    let keep = step(&sampler(json!({"min_p": 2.3e-4})), &[], &row, Some(0.5));
    assert_eq!(keep.support.len(), 10_001);
    let drop = step(&sampler(json!({"min_p": 2.4e-4})), &[], &row, Some(0.5));
    assert_eq!(drop.support.len(), 1);
    // At tau = 2 the threshold is 0.1 * 0.4287 = 0.0429 and all five tokens stay.
    let hot = step(&sampler(json!({"temperature": 2.0})), &[], &ROW, Some(0.5));
    assert_printed(0.1 * hot.selection.prob(0), "0.0429");
}

// ---- §9.3.6 penalties, bias, watermark ------------------------------------------------

#[test]
fn sec_9_3_6_repetition_penalty() {
    let s = sampler(json!({"repetition_penalty": 1.2, "temperature": 1.0}));
    let o = step(&s, &[0], &ROW, Some(0.5));
    assert_printed(stage_logits(&o, "repetition_penalty")[0], "1.667");
    assert_printed(softmax_f32(&ROW)[0], "0.6364");
    assert_printed(o.selection.prob(0), "0.5564");
    // Sign-aware: a non-positive logit is multiplied, moving it down too.
    let neg = step(&s, &[3], &ROW, Some(0.5));
    assert!((stage_logits(&neg, "repetition_penalty")[3] - (-1.2)).abs() < 1e-6);
    // Multiplicative strength depends on the logit: z = 5 loses 0.833, z = 0.5 loses 0.083.
    let big = step(&s, &[0, 1], &[5.0, 0.5], Some(0.5));
    let z = stage_logits(&big, "repetition_penalty");
    assert_printed(5.0 - z[0], "0.833");
    assert_printed(0.5 - z[1], "0.083");
}

#[test]
fn sec_9_3_6_frequency_and_presence() {
    let s = sampler(json!({"frequency_penalty": 0.2, "presence_penalty": 0.5}));
    let o = step(&s, &[1, 1, 1], &[0.0, 0.0], Some(0.5));
    assert_printed(-f64::from(o.processed.get(1)), "1.1"); // 3 x 0.2 + 0.5
    assert_eq!(o.processed.get(0), 0.0);
    // 50 occurrences at 0.2: minus 10, i.e. probability times e^-10 ~ 4.5e-5.
    let f = sampler(json!({"frequency_penalty": 0.2}));
    let long = step(&f, &[0; 50], &[0.0, 0.0], Some(0.5));
    assert_printed(-f64::from(long.processed.get(0)), "10");
    let ratio = long.selection.prob(0) / long.selection.prob(1);
    assert_printed(ratio * 1e5, "4.5");
}

#[test]
fn sec_9_3_6_watermark_z_score() {
    assert_printed((200.0f64 * 0.25).sqrt(), "7.07");
    assert_printed(z_score(140, 200, 0.5), "5.66");
    assert_printed(z_score(100, 200, 0.5), "0");
    // z > 4 has a one-sided false-positive rate of about 3e-5.
    let tail = normal_upper_tail(4.0);
    assert_printed(tail * 1e5, "3");
}

/// Upper tail of the standard normal by Simpson's rule on [x, x + 12].
fn normal_upper_tail(x: f64) -> f64 {
    let n = 20_000;
    let h = 12.0 / n as f64;
    let f = |t: f64| (-t * t / 2.0).exp() / (2.0 * std::f64::consts::PI).sqrt();
    let mut s = f(x) + f(x + 12.0);
    for i in 1..n {
        s += f(x + i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
    }
    s * h / 3.0
}

// ---- §9.3.7: same parameters, engine orders -------------------------------------------

#[test]
fn sec_9_3_7_temperature_then_truncation_vs_truncation_then_temperature() {
    let cfg = |order: &str| sampler(json!({"order": order, "temperature": 2.0, "top_p": 0.9}));
    for preset in ["reference", "hf", "vllm"] {
        let o = step(&cfg(preset), &[], &ROW, Some(0.5));
        assert_all_printed(
            &o.selection.probs,
            &["0.4551", "0.2760", "0.1674", "0.1015"],
        );
    }
    let o = step(&cfg("llama.cpp"), &[], &ROW, Some(0.5));
    assert_eq!(o.trace.order, ["grammar", "top_p", "temperature"]);
    assert_all_printed(&o.selection.probs, &["0.5065", "0.3072", "0.1863"]);
    assert_eq!(o.selection.prob(3), 0.0);
}

// ---- §9.3.8: the exponential race -----------------------------------------------------

fn race_frequencies(draws: u64, seed: u64) -> Vec<f64> {
    let sel = SelectionDistribution {
        ids: (0..5).collect(),
        probs: softmax_f32(&ROW),
    };
    let rng = RngStream::new(seed);
    let mut hits = [0u64; 5];
    for step in 0..draws {
        hits[select::exponential_race(&sel, rng, step).unwrap()] += 1;
    }
    hits.iter().map(|&h| h as f64 / draws as f64).collect()
}

fn assert_third_decimal(freq: &[f64]) {
    let table: [f64; 5] = [0.6364, 0.2341, 0.0861, 0.0317, 0.0117];
    let book: [f64; 5] = [0.6362, 0.2345, 0.0860, 0.0317, 0.0116];
    for i in 0..5 {
        assert!((book[i] - table[i]).abs() < 1e-3);
        assert!(
            (freq[i] - table[i]).abs() < 1e-3,
            "token {i}: {} vs {}",
            freq[i],
            table[i]
        );
    }
}

#[test]
fn sec_9_3_8_exponential_race_1e5() {
    // A second seed at 1e5 draws, checked at 5 standard errors; the 1e6 run below is the
    // text's experiment (about 1 s in debug).
    let f = race_frequencies(100_000, 7);
    let table = [0.6364, 0.2341, 0.0861, 0.0317, 0.0117];
    for i in 0..5 {
        let se = (table[i] * (1.0 - table[i]) / 1e5f64).sqrt();
        assert!((f[i] - table[i]).abs() < 5.0 * se, "token {i}: {}", f[i]);
    }
}

#[test]
fn sec_9_3_8_exponential_race_1e6_matches_to_third_decimal() {
    assert_third_decimal(&race_frequencies(1_000_000, 7));
}

// ---- Remaining arithmetic in the texts ------------------------------------------------

#[test]
fn sec_9_3_3_sorting_cost_and_vocabulary_size() {
    let n = 128_000.0f64 + 256.0; // base tokens + reserved special tokens
    assert_printed(n, "128256");
    assert_printed(n * n.log2() / 1e6, "2.2"); // ~2.2 x 10^6 comparisons
}

#[test]
fn sec_9_3_6_multiplicative_penalty_is_ten_times_stronger_on_large_logits() {
    let s = sampler(json!({"repetition_penalty": 1.2}));
    let o = step(&s, &[0, 1], &[5.0, 0.5], Some(0.5));
    let z = stage_logits(&o, "repetition_penalty");
    assert_printed((5.0 - z[0]) / (0.5 - z[1]), "10");
}

#[test]
fn sec_9_3_8_half_precision_limits() {
    // FP16's smallest positive (subnormal) value ~6e-8; BF16's 7 explicit mantissa bits
    // give ~0.8% relative precision. These motivate FP32 softmax (ours accumulates in f64).
    assert_printed(2f64.powi(-24) * 1e8, "6");
    assert_printed(2f64.powi(-7) * 100.0, "0.8");
}
