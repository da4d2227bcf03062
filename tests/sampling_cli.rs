//! The `stencil sample` contract, driven in-process through `cli::run_with`, plus one run
//! of the real binary for exit codes.

use clap::Parser;
use serde_json::{json, Value};
use std::io::Write;
use stencil::sampling::cli::{run_with, SampleArgs};

#[derive(Parser)]
struct Wrap {
    #[command(flatten)]
    args: SampleArgs,
}

fn tmp(name: &str, content: &str) -> String {
    let dir = std::env::temp_dir().join(format!("sampling-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::File::create(&p)
        .unwrap()
        .write_all(content.as_bytes())
        .unwrap();
    p.to_string_lossy().into_owned()
}

/// Parse argv like the binary does, run, return (result code or error code, stdout JSON).
fn run(argv: &[&str], stdin: &str) -> (i32, Option<Value>, String) {
    let args = match Wrap::try_parse_from(std::iter::once("sample").chain(argv.iter().copied())) {
        Ok(w) => w.args,
        Err(e) => return (2, None, e.to_string()),
    };
    let mut out = Vec::new();
    match run_with(&args, &mut stdin.as_bytes(), &mut out) {
        Ok(code) => {
            let text = String::from_utf8(out).unwrap();
            (
                code,
                Some(serde_json::from_str(&text).unwrap()),
                String::new(),
            )
        }
        Err(e) => (e.exit_code(), None, e.to_string()),
    }
}

#[test]
fn plain_output_is_just_the_token() {
    let l = tmp("plain.json", "[0.5, 3.0, 1.0]");
    let c = tmp("plain_cfg.json", r#"{"temperature": 0}"#);
    let (code, v, _) = run(&["--logits", &l, "--config", &c], "");
    assert_eq!(code, 0);
    assert_eq!(v.unwrap(), json!({"token": 1}));
}

#[test]
fn section_3_9_through_the_cli_with_trace() {
    let cfg = json!({"presence_penalty": 0.1, "frequency_penalty": 0.2, "temperature": 0.8,
                     "top_p": 0.8, "history": [0, 0, 1], "strategy": "categorical"});
    let c = tmp("s39.json", &cfg.to_string());
    let (code, v, err) = run(
        &["--logits", "-", "--config", &c, "--u", "0.63", "--trace"],
        "[2.0, 1.5, 0.5]",
    );
    assert_eq!(code, 0, "{err}");
    let v = v.unwrap();
    assert_eq!(v["token"], 1);
    let t = &v["trace"];
    assert_eq!(
        t["order"],
        json!([
            "grammar",
            "presence_penalty",
            "frequency_penalty",
            "temperature",
            "softmax",
            "top_p"
        ])
    );
    let sizes: Vec<(String, u64)> = t["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["processor"].as_str().unwrap().to_string(),
                s["support_size"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(sizes.last().unwrap(), &("top_p".to_string(), 2));
    let sel = t["selection"].as_array().unwrap();
    assert_eq!(sel.len(), 2);
    assert_eq!(sel[0][0], 0);
    assert!((sel[0][1].as_f64().unwrap() - 0.593).abs() < 5e-4);
    assert!((sel[1][1].as_f64().unwrap() - 0.407).abs() < 5e-4);
    assert_eq!(t["u"], 0.63);
    assert_eq!(t["rng"]["algorithm"], "philox4x32-10");
}

#[test]
fn seed_makes_draws_reproducible_and_recorded() {
    let l = tmp(
        "seed.json",
        &serde_json::to_string(&vec![0.0f32; 64]).unwrap(),
    );
    let a = run(&["--logits", &l, "--seed", "42", "--trace"], "")
        .1
        .unwrap();
    let b = run(&["--logits", &l, "--seed", "42", "--trace"], "")
        .1
        .unwrap();
    assert_eq!(a, b);
    assert_eq!(a["trace"]["rng"]["seed"], 42);
    let u = a["trace"]["u"].as_f64().unwrap();
    // The draw is the categorical u: uniform over 64 equal tokens picks floor(64u).
    assert_eq!(a["token"].as_u64().unwrap(), (u * 64.0).floor() as u64);
    let tokens: std::collections::BTreeSet<u64> = (0..20)
        .map(|s| {
            run(&["--logits", &l, "--seed", &s.to_string()], "")
                .1
                .unwrap()["token"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert!(
        tokens.len() > 5,
        "different seeds give different tokens: {tokens:?}"
    );
}

#[test]
fn order_presets_and_lists_from_config() {
    let l = tmp("order.json", "[2, 1, 0, -1, -2]");
    for (order, kept) in [
        (json!("hf"), 4),
        (json!("llama.cpp"), 3),
        (json!(["top_p", "temperature"]), 3),
    ] {
        let c = tmp(
            "order_cfg.json",
            &json!({"order": order, "temperature": 2.0, "top_p": 0.9}).to_string(),
        );
        let v = run(
            &["--logits", &l, "--config", &c, "--u", "0.1", "--trace"],
            "",
        )
        .1
        .unwrap();
        assert_eq!(
            v["trace"]["selection"].as_array().unwrap().len(),
            kept,
            "{order}"
        );
    }
}

#[test]
fn strategies_and_logit_bias_keys() {
    let l = tmp("strat.json", "[0, 0, 0]");
    let c = tmp(
        "strat_cfg.json",
        r#"{"logit_bias": {"2": 50}, "strategy": "exponential_race"}"#,
    );
    let v = run(
        &["--logits", &l, "--config", &c, "--seed", "1", "--trace"],
        "",
    )
    .1
    .unwrap();
    assert_eq!(v["token"], 2);
    assert_eq!(v["trace"]["u"], Value::Null);
    let g = tmp("greedy_cfg.json", r#"{"strategy": "greedy"}"#);
    let tie = tmp("tie.json", "[1, 3, 3, 0]");
    assert_eq!(
        run(&["--logits", &tie, "--config", &g], "").1.unwrap()["token"],
        1
    );
}

#[test]
fn bad_input_exits_2_with_a_message() {
    let good = tmp("good.json", "[1, 2]");
    let cases: Vec<(Vec<String>, &str, &str)> = vec![
        (
            vec!["--logits".into(), "-".into()],
            "[1, NaN]",
            "invalid JSON",
        ),
        (
            vec!["--logits".into(), "-".into()],
            "{\"a\": 1}",
            "expected a JSON array",
        ),
        (
            vec!["--logits".into(), "-".into()],
            "[1, \"x\"]",
            "logits[1]",
        ),
        (
            vec!["--logits".into(), "-".into()],
            "[1, 1e39]",
            "outside the f32 range",
        ),
        (vec!["--logits".into(), "-".into()], "[]", "empty"),
        (
            vec!["--logits".into(), "-".into()],
            "[\"-inf\", \"-inf\"]",
            "empty candidate support",
        ),
        (
            vec!["--logits".into(), "/nonexistent/x.json".into()],
            "",
            "reading logits file",
        ),
        (
            vec!["--logits".into(), good.clone(), "--u".into(), "1.5".into()],
            "",
            "[0, 1)",
        ),
        (
            vec![
                "--logits".into(),
                good.clone(),
                "--u".into(),
                "0.1".into(),
                "--seed".into(),
                "3".into(),
            ],
            "",
            "cannot be used",
        ),
        (
            vec![
                "--logits".into(),
                good.clone(),
                "--config".into(),
                tmp("k.json", r#"{"top_k": 0}"#),
            ],
            "",
            "top_k",
        ),
        (
            vec![
                "--logits".into(),
                good.clone(),
                "--config".into(),
                tmp("p.json", r#"{"top_p": 1.5}"#),
            ],
            "",
            "top_p",
        ),
        (
            vec![
                "--logits".into(),
                good.clone(),
                "--config".into(),
                tmp("t.json", r#"{"temperature": -1}"#),
            ],
            "",
            "temperature",
        ),
        (
            vec![
                "--logits".into(),
                good.clone(),
                "--config".into(),
                tmp("u.json", r#"{"top_q": 1}"#),
            ],
            "",
            "unknown field",
        ),
        (
            vec![
                "--logits".into(),
                good.clone(),
                "--config".into(),
                tmp("o.json", r#"{"order": "nope"}"#),
            ],
            "",
            "unknown preset",
        ),
        (
            vec![
                "--logits".into(),
                good.clone(),
                "--config".into(),
                tmp("b.json", r#"{"logit_bias": {"9": 1}}"#),
            ],
            "",
            "outside the logits width",
        ),
        (
            vec![
                "--logits".into(),
                good.clone(),
                "--config".into(),
                tmp("s.json", r#"{"strategy": "greedy"}"#),
                "--u".into(),
                "0.5".into(),
            ],
            "",
            "categorical",
        ),
    ];
    for (argv, stdin, needle) in cases {
        let argv: Vec<&str> = argv.iter().map(|s| s.as_str()).collect();
        let (code, out, msg) = run(&argv, stdin);
        assert_eq!(code, 2, "{argv:?}: {msg}");
        assert!(out.is_none());
        assert!(
            msg.contains(needle),
            "{argv:?}: message {msg:?} lacks {needle:?}"
        );
    }
}

#[test]
fn the_binary_exits_2_on_bad_input() {
    let bin = env!("CARGO_BIN_EXE_stencil");
    let bad = tmp("bin_bad.json", "[1, null]");
    let o = std::process::Command::new(bin)
        .args(["sample", "--logits", &bad])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("logits[1]"));
    let good = tmp("bin_good.json", "[0, 5, 1]");
    let o = std::process::Command::new(bin)
        .args(["sample", "--logits", &good, "--seed", "9"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        serde_json::from_slice::<Value>(&o.stdout).unwrap()["token"]
            .as_u64()
            .map(|t| t < 3),
        Some(true)
    );
}
