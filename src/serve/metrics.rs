//! `GET /metrics`: counters and gauges in Prometheus' text format, kept in
//! atomics so that recording never waits on a lock in the decode loop.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::decode::Generation;

/// What the server has done since it started.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Requests by outcome (`stop`, `length`, `tool_calls`, `cancelled`,
    /// `error`, or an HTTP status for a request refused before it ran).
    outcomes: Mutex<BTreeMap<String, u64>>,
    prompt_tokens: AtomicU64,
    /// Prompt tokens whose rows came from the prefix cache.
    cached_prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
    /// Requests waiting for a place in the batch.
    pub queue_depth: AtomicUsize,
    /// Requests in the running batch.
    pub batch_size: AtomicUsize,
    /// Decode steps run (one per running request per round).
    pub steps: AtomicU64,
    mask_micros: AtomicU64,
    forward_micros: AtomicU64,
}

impl Metrics {
    pub fn count(&self, outcome: &str) {
        let mut outcomes = self.outcomes.lock().unwrap_or_else(|e| e.into_inner());
        *outcomes.entry(outcome.to_string()).or_default() += 1;
    }

    /// A finished generation's tokens and times.
    pub fn record(&self, g: &Generation) {
        let t = &g.timings;
        self.prompt_tokens
            .fetch_add(t.prompt_tokens as u64, Ordering::Relaxed);
        self.cached_prompt_tokens
            .fetch_add(t.cached_prompt_tokens as u64, Ordering::Relaxed);
        self.completion_tokens
            .fetch_add(g.tokens.len() as u64, Ordering::Relaxed);
        self.mask_micros
            .fetch_add((t.mask_ms * 1000.0) as u64, Ordering::Relaxed);
        self.forward_micros.fetch_add(
            ((t.prompt_ms + t.decode_ms) * 1000.0) as u64,
            Ordering::Relaxed,
        );
    }

    /// The Prometheus exposition text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let outcomes = self.outcomes.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(out, "# HELP stencil_requests_total Requests by outcome.");
        let _ = writeln!(out, "# TYPE stencil_requests_total counter");
        for (outcome, n) in outcomes.iter() {
            let _ = writeln!(out, "stencil_requests_total{{outcome=\"{outcome}\"}} {n}");
        }
        let counter = |out: &mut String, name: &str, help: &str, value: f64| {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} counter");
            let _ = writeln!(out, "{name} {value}");
        };
        let gauge = |out: &mut String, name: &str, help: &str, value: usize| {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} gauge");
            let _ = writeln!(out, "{name} {value}");
        };
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        counter(
            &mut out,
            "stencil_prompt_tokens_total",
            "Prompt tokens of finished requests.",
            load(&self.prompt_tokens) as f64,
        );
        counter(
            &mut out,
            "stencil_prompt_cached_tokens_total",
            "Prompt tokens of finished requests whose rows the prefix cache held.",
            load(&self.cached_prompt_tokens) as f64,
        );
        counter(
            &mut out,
            "stencil_completion_tokens_total",
            "Output tokens of finished requests.",
            load(&self.completion_tokens) as f64,
        );
        counter(
            &mut out,
            "stencil_decode_steps_total",
            "Decode steps (one request, one forward pass).",
            load(&self.steps) as f64,
        );
        counter(
            &mut out,
            "stencil_mask_seconds_total",
            "Time computing grammar masks (beside the forward passes).",
            load(&self.mask_micros) as f64 / 1e6,
        );
        counter(
            &mut out,
            "stencil_forward_seconds_total",
            "Time in forward passes and sampling.",
            load(&self.forward_micros) as f64 / 1e6,
        );
        gauge(
            &mut out,
            "stencil_queue_depth",
            "Requests waiting for a place in the batch.",
            self.queue_depth.load(Ordering::Relaxed),
        );
        gauge(
            &mut out,
            "stencil_batch_size",
            "Requests in the running batch.",
            self.batch_size.load(Ordering::Relaxed),
        );
        out
    }
}
