//! The decode loop on a tiny random-weight Llama (a real GGUF file with GPT-2's
//! vocabulary, written by the test): outputs are grammar-valid and validate with an
//! independent JSON Schema validator, seeds reproduce, batches do not leak between
//! requests, jump-forward saves forward passes, streaming is the text.
#![cfg(feature = "decode")]

#[path = "support/json_schema_common.rs"]
mod json_schema_common;
#[path = "support/tiny_model.rs"]
mod tiny_model;

use std::sync::Arc;

use json_schema_common::compile;
use serde_json::{json, Value};
use stencil::decode::{Event, FinishReason, Generation, Generator, Model, ModelTokenizer, Request};
use stencil::frontend::json_schema::JsonSchemaOptions;
use stencil::matcher::{StopPolicy, TokenMatcher};
use stencil::sampling::order::OrderSpec;
use stencil::sampling::SamplingConfig;
use stencil::tables::TokenTables;
use stencil::vocab::Vocabulary;
use tiny_model::{gpt2_tokenizer_path, tiny_model};

fn generator() -> &'static Generator {
    static GENERATOR: std::sync::OnceLock<Generator> = std::sync::OnceLock::new();
    GENERATOR.get_or_init(|| {
        let path = tiny_model();
        let model = Model::load(path, &candle_core::Device::Cpu).unwrap();
        let tokenizer =
            ModelTokenizer::from_gguf(model.gguf_metadata().unwrap(), "tiny model").unwrap();
        Generator::new(model, tokenizer)
    })
}

fn schemas() -> Vec<Value> {
    vec![
        json!({"type": "object",
               "properties": {"name": {"type": "string", "maxLength": 8},
                              "age": {"type": "integer", "minimum": 0, "maximum": 120}},
               "required": ["name", "age"], "additionalProperties": false}),
        json!({"enum": ["red", "green", "blue", 7, null]}),
        json!({"type": "array", "items": {"type": "boolean"}, "maxItems": 4}),
        json!({"type": "integer", "minimum": -5, "maximum": 5}),
        json!({"type": "object", "properties": {"ok": {"type": "boolean"},
               "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3}},
               "required": ["ok", "tags"], "additionalProperties": false}),
    ]
}

fn tables(schema: &Value) -> Arc<TokenTables> {
    let grammar = compile(schema, &generation_options()).unwrap();
    Arc::new(TokenTables::new(
        grammar,
        Arc::clone(generator().tokenizer().vocab()),
    ))
}

fn request(schema: &Value, seed: Option<u64>, preset: &str) -> Request {
    let g = generator();
    Request {
        prompt: g.tokenizer().encode_prompt("Write JSON:").unwrap(),
        grammar: Some(tables(schema)),
        stop_policy: StopPolicy::Stop,
        sampling: SamplingConfig {
            order: Some(OrderSpec::Preset(preset.into())),
            seed,
            temperature: Some(if seed.is_some() { 1.0 } else { 0.0 }),
            ..SamplingConfig::default()
        },
        max_tokens: 64,
        jump_forward: true,
        logprobs: 0,
        trace: false,
        budget_steering: true,
        reasoning: None,
    }
}

fn run(r: Request) -> Generation {
    generator().generate(r, &mut |_| {}).unwrap()
}

/// A run and the text its events streamed.
fn run_streamed(r: Request) -> (Generation, String) {
    let mut streamed = String::new();
    let g = generator()
        .generate(r, &mut |e| {
            let Event::Text { text, .. } = e;
            streamed.push_str(text);
        })
        .unwrap();
    (g, streamed)
}

/// The grammar accepts every token of the output, in order, and then EOS-worthy.
fn assert_tokens_allowed(schema: &Value, g: &Generation) {
    let mut m = TokenMatcher::new(tables(schema));
    for &t in &g.tokens {
        m.consume_token(t)
            .unwrap_or_else(|e| panic!("{e} in {:?}", g.text));
    }
    assert_eq!(m.is_accepting(), g.grammar_complete, "{:?}", g.text);
}

#[test]
fn outputs_validate_and_seeds_reproduce() {
    let mut stopped = 0;
    for schema in schemas() {
        let validator = jsonschema::validator_for(&schema).unwrap();
        for (seed, preset) in [
            (None, "reference"),
            (Some(1), "hf"),
            (Some(2), "vllm"),
            (Some(3), "llama.cpp"),
        ] {
            let g = run(request(&schema, seed, preset));
            assert_tokens_allowed(&schema, &g);
            assert!(g.error.is_none(), "{:?}", g.error);
            if g.finish_reason == FinishReason::Stop {
                stopped += 1;
                assert!(g.grammar_complete);
                let value: Value =
                    serde_json::from_str(&g.text).unwrap_or_else(|e| panic!("{e}: {:?}", g.text));
                assert!(validator.is_valid(&value), "{schema} rejects {}", g.text);
            } else {
                assert_eq!(g.finish_reason, FinishReason::Length);
                assert_eq!(g.tokens.len(), 64);
                eprintln!("length: {schema} {seed:?}: {:?}", g.text);
            }
            let again = run(request(&schema, seed, preset));
            assert_eq!(again.tokens, g.tokens, "seed {seed:?} is not reproducible");
        }
    }
    // Every schema above is bounded: a random model still finishes within budget.
    assert_eq!(stopped, 20);
}

#[test]
fn batch_composition_does_not_change_tokens() {
    let schemas = schemas();
    let presets = ["reference", "hf", "vllm", "llama.cpp"];
    let requests: Vec<Request> = (0..8)
        .map(|i| {
            let seed = (i % 3 != 0).then_some(i as u64);
            request(&schemas[i % schemas.len()], seed, presets[i % 4])
        })
        .collect();
    let alone: Vec<Vec<u32>> = requests.iter().map(|r| run(r.clone()).tokens).collect();
    let batch = generator().generate_batch(requests, &mut |_| {}).unwrap();
    for (i, g) in batch.iter().enumerate() {
        assert_eq!(g.tokens, alone[i], "request {i} changed inside the batch");
    }
}

/// A prompt fed in chunks (as `stencil serve` feeds it) takes a forward pass
/// per chunk, and a request's text still does not depend on its batch.
#[test]
fn chunked_prefill_is_batch_independent() {
    let model = Model::load(tiny_model(), &candle_core::Device::Cpu).unwrap();
    let tokenizer =
        ModelTokenizer::from_gguf(model.gguf_metadata().unwrap(), "tiny model").unwrap();
    let chunked = Generator::new(model, tokenizer).with_prefill_chunk(2);
    let schemas = schemas();
    let requests: Vec<Request> = (0..4)
        .map(|i| request(&schemas[i], Some(i as u64 + 7), "hf"))
        .collect();
    let prompt = requests[0].prompt.len();
    assert!(prompt > 2, "the prompt must span chunks");
    let alone: Vec<Generation> = requests
        .iter()
        .map(|r| chunked.generate(r.clone(), &mut |_| {}).unwrap())
        .collect();
    let batch = chunked.generate_batch(requests, &mut |_| {}).unwrap();
    for (i, (a, b)) in alone.iter().zip(&batch).enumerate() {
        assert_eq!(a.tokens, b.tokens, "request {i} changed inside the batch");
        assert_tokens_allowed(&schemas[i], a);
        assert!(a.timings.forward_passes >= prompt.div_ceil(2));
    }
}

/// A generator over its own copy of the tiny model that keeps `bytes` of
/// prompt prefixes.
fn caching_generator(bytes: usize) -> Generator {
    let model = Model::load(tiny_model(), &candle_core::Device::Cpu).unwrap();
    let tokenizer =
        ModelTokenizer::from_gguf(model.gguf_metadata().unwrap(), "tiny model").unwrap();
    Generator::new(model, tokenizer).with_prefix_cache(bytes)
}

/// A seeded request for `prompt` with logprobs, so that a difference in any
/// logit shows.
fn prompted(prompt: &str, seed: u64) -> Request {
    let schemas = schemas();
    Request {
        prompt: generator().tokenizer().encode_prompt(prompt).unwrap(),
        logprobs: 3,
        ..request(&schemas[seed as usize % schemas.len()], Some(seed), "hf")
    }
}

/// Tokens and every logprob, written out (equal text: equal values).
fn outcome(g: &Generation) -> String {
    serde_json::to_string(&(&g.tokens, &g.logprobs)).unwrap()
}

/// Rows reused from the prefix cache are the rows a forward pass computes: the
/// tokens and logprobs of every request are those of a generator without one,
/// whether the prompt was seen whole, shares a beginning, or runs in a batch.
#[test]
fn prefix_cache_reuses_rows_without_changing_tokens() {
    let cached = caching_generator(64 << 20);
    let first = prompted("Write JSON:", 3);
    let again = prompted("Write JSON:", 4);
    let longer = prompted("Write JSON: a small one", 5);
    let plain = |r: &Request| outcome(&run(r.clone()));
    let g = cached.generate(first.clone(), &mut |_| {}).unwrap();
    assert_eq!(g.timings.cached_prompt_tokens, 0, "nothing cached yet");
    assert_eq!(outcome(&g), plain(&first));
    let g = cached.generate(again.clone(), &mut |_| {}).unwrap();
    // One token is always fed: its logits are the first sample's.
    assert_eq!(g.timings.cached_prompt_tokens, again.prompt.len() - 1);
    assert_eq!(outcome(&g), plain(&again));
    let shared = first
        .prompt
        .iter()
        .zip(&longer.prompt)
        .take_while(|(a, b)| a == b)
        .count();
    assert!(shared > 1 && shared < longer.prompt.len());
    let g = cached.generate(longer.clone(), &mut |_| {}).unwrap();
    assert_eq!(g.timings.cached_prompt_tokens, shared);
    assert_eq!(outcome(&g), plain(&longer));
    let batch: Vec<Request> = (10..14)
        .map(|seed| prompted("Write JSON: a small one", seed))
        .collect();
    let together = cached.generate_batch(batch.clone(), &mut |_| {}).unwrap();
    for (r, g) in batch.iter().zip(&together) {
        assert_eq!(g.timings.cached_prompt_tokens, r.prompt.len() - 1);
        assert_eq!(outcome(g), plain(r));
    }
}

/// The cache holds at most its bound: the least recently used prompt leaves.
#[test]
fn prefix_cache_keeps_to_its_bound() {
    let probe = caching_generator(64 << 20);
    probe
        .generate(prompted("Alpha beta", 1), &mut |_| {})
        .unwrap();
    let (entries, one) = probe.prefix_cache().unwrap().usage();
    assert_eq!(entries, 1);
    assert!(one > 0);
    // Room for one such prompt, not two.
    let cached = caching_generator(one + one / 2);
    let a = prompted("Alpha beta", 1);
    let b = prompted("Gamma delta", 2);
    assert_ne!(
        a.prompt[..2],
        b.prompt[..2],
        "the prompts must differ early"
    );
    for r in [&a, &b] {
        cached.generate(r.clone(), &mut |_| {}).unwrap();
        let (entries, bytes) = cached.prefix_cache().unwrap().usage();
        assert_eq!(entries, 1);
        assert!(bytes <= one + one / 2);
    }
    let g = cached.generate(a.clone(), &mut |_| {}).unwrap();
    assert!(
        g.timings.cached_prompt_tokens < a.prompt.len() - 1,
        "a was evicted by b"
    );
    let per_position = one / a.prompt.len();
    assert_eq!(one % a.prompt.len(), 0);
    // A prompt that extends a kept one replaces it.
    let extends = caching_generator(64 << 20);
    let longer = prompted("Alpha beta gamma delta epsilon zeta eta theta", 3);
    assert!(longer.prompt.starts_with(&a.prompt));
    for r in [&a, &longer] {
        extends.generate(r.clone(), &mut |_| {}).unwrap();
        let usage = extends.prefix_cache().unwrap().usage();
        assert_eq!(usage, (1, r.prompt.len() * per_position));
    }
    // Of a prompt past the whole bound, the beginning that fits is kept.
    let small = caching_generator(4 * per_position + per_position / 2);
    small.generate(longer.clone(), &mut |_| {}).unwrap();
    assert_eq!(small.prefix_cache().unwrap().usage(), (1, 4 * per_position));
    let g = small.generate(longer.clone(), &mut |_| {}).unwrap();
    assert_eq!(g.timings.cached_prompt_tokens, 4);
    assert_eq!(outcome(&g), outcome(&run(longer.clone())));
    // Below two positions nothing is kept.
    let tiny = caching_generator(per_position + 1);
    tiny.generate(a.clone(), &mut |_| {}).unwrap();
    assert_eq!(tiny.prefix_cache().unwrap().usage(), (0, 0));
}

#[test]
fn jump_forward_commits_a_token_alone_allowed() {
    // Token terminals by id: no byte spells them for the grammar, so only the
    // token terminal's one id is allowed there.
    let g = generator();
    let compiler = stencil::Compiler::new(Arc::clone(g.tokenizer().vocab()));
    let tables = compiler.compile_lark("start: <[50]> <[60]> \"!\"").unwrap();
    let mut r = request(&schemas()[0], None, "reference");
    r.grammar = Some(Arc::clone(&tables));
    let with = run(r);
    let mut r = request(&schemas()[0], None, "reference");
    r.grammar = Some(tables);
    r.jump_forward = false;
    let without = run(r);
    for g in [&with, &without] {
        assert_eq!(g.finish_reason, FinishReason::Stop, "{:?}", g.text);
        assert_eq!(&g.tokens[..2], &[50, 60], "{:?}", g.tokens);
    }
    assert_eq!(with.tokens, without.tokens);
    // Both ids, and `!`, then EOS: nothing is left to sample.
    assert!(with.timings.forced_tokens >= 2, "{:?}", with.timings);
    assert_eq!(without.timings.forced_tokens, 0);
    assert!(with.timings.forward_passes < without.timings.forward_passes);
}

#[test]
fn jump_forward_saves_forward_passes() {
    let schema = &schemas()[0];
    let with = run(request(schema, None, "reference"));
    let mut r = request(schema, None, "reference");
    r.jump_forward = false;
    let without = run(r);
    for g in [&with, &without] {
        assert_eq!(g.finish_reason, FinishReason::Stop, "{:?}", g.text);
        assert_tokens_allowed(schema, g);
    }
    assert_eq!(without.timings.forced_tokens, 0);
    // Without jump-forward: one pass per output token plus the one that chose EOS.
    assert_eq!(without.timings.forward_passes, without.tokens.len() + 1);
    // `{"name":"` and `","age":` are forced.
    assert!(with.timings.forced_tokens >= 4, "{:?}", with.timings);
    assert!(
        with.timings.forward_passes + with.timings.forced_tokens <= with.tokens.len() + 1,
        "{:?}",
        with.timings
    );
    assert!(with.timings.forward_passes < without.timings.forward_passes);
}

#[test]
fn length_finish_is_explicit() {
    let schema = &schemas()[0];
    let mut r = request(schema, None, "reference");
    r.max_tokens = 3;
    let g = run(r);
    assert_eq!(g.finish_reason, FinishReason::Length);
    assert!(!g.grammar_complete);
    assert_eq!(g.tokens.len(), 3);
}

/// A budget of zero writes nothing, with or without a grammar, jump-forward or
/// steering: the output never runs past `max_tokens`.
#[test]
fn zero_token_budget_writes_nothing() {
    // The enum schema forces nothing at the start; a const forces its whole text.
    for schema in [schemas()[1].clone(), json!({"const": "forced"})] {
        for (jump_forward, budget_steering) in [(true, true), (true, false), (false, false)] {
            let mut r = request(&schema, None, "reference");
            r.max_tokens = 0;
            r.jump_forward = jump_forward;
            r.budget_steering = budget_steering;
            let (g, streamed) = run_streamed(r);
            assert_eq!(g.finish_reason, FinishReason::Length, "{schema}");
            assert!(g.tokens.is_empty(), "{schema}: {:?}", g.text);
            assert_eq!(g.text, "");
            assert_eq!(streamed, "");
        }
    }
    let mut r = request(&schemas()[1], None, "reference");
    r.grammar = None;
    r.max_tokens = 0;
    let g = run(r);
    assert!(g.tokens.is_empty() && g.finish_reason == FinishReason::Length);
}

#[test]
fn streaming_yields_the_text_and_logprobs_name_their_layers() {
    let schema = json!({"type": "string", "maxLength": 12});
    let mut r = request(&schema, Some(7), "reference");
    r.logprobs = 3;
    let (g, streamed) = run_streamed(r);
    assert_eq!(streamed, g.text);
    let sampled: Vec<_> = g.logprobs.iter().filter(|l| !l.forced).collect();
    assert!(!sampled.is_empty());
    for l in sampled {
        assert_eq!(l.top_raw.len(), 3);
        assert!(l.top_selected.len() <= 3 && !l.top_selected.is_empty());
        let layers: Vec<String> = l
            .logprobs
            .iter()
            .map(|p| format!("{:?}", p.layer))
            .collect();
        assert!(layers.iter().any(|x| x == "Raw"), "{layers:?}");
        assert!(l.logprobs.iter().all(|p| p.value <= 1e-9));
        // The grammar only narrows: a token's selected probability is at least its raw one.
        let raw = l
            .logprobs
            .iter()
            .find(|p| format!("{:?}", p.layer) == "Raw")
            .unwrap();
        assert!(l.logprobs.iter().all(|p| p.value >= raw.value - 1e-6));
    }
}

/// A stop string ends the output where it first begins, even when it spans two
/// tokens; the tokens up to it are the same as without it (same seed), and the
/// streamed text never shows any of it.
#[test]
fn stop_strings_cut_the_output_where_they_begin() {
    let schema = json!({"type": "string", "pattern": "^[a-z ]*$", "maxLength": 40});
    let free = run(request(&schema, Some(3), "reference"));
    let vocab = generator().tokenizer().vocab();
    // The two bytes around the first boundary between two tokens past the
    // opening quote, each with text.
    let lengths: Vec<usize> = free
        .tokens
        .iter()
        .map(|&t| vocab.token_bytes(t).len())
        .collect();
    let mut boundary = lengths[0];
    let mut k = 1;
    while k < lengths.len() && (boundary < 2 || lengths[k] == 0) {
        boundary += lengths[k];
        k += 1;
    }
    assert!(k < lengths.len(), "too short an output: {:?}", free.text);
    let stop = free.text[boundary - 1..boundary + 1].to_string();
    let at = free.text.find(&stop).unwrap();

    let mut r = request(&schema, Some(3), "reference");
    r.sampling.stop = Some(vec!["never written".into(), stop.clone()]);
    let (g, streamed) = run_streamed(r);
    assert_eq!(g.text, free.text[..at], "stop {stop:?}");
    assert_eq!(streamed, g.text);
    assert_eq!(g.finish_reason, FinishReason::Stop);
    assert_eq!(g.stop_string.as_deref(), Some(stop.as_str()));
    assert!(!g.grammar_complete, "{:?}", g.text);
    // The tokens that wrote the stop string's first byte and the rest of it.
    let mut written = 0;
    let needed = free
        .tokens
        .iter()
        .take_while(|&&t| {
            let before = written;
            written += vocab.token_bytes(t).len();
            before < at + stop.len()
        })
        .count();
    assert_eq!(g.tokens, free.tokens[..needed]);

    // An empty stop string is refused, naming the field.
    let mut bad = request(&schema, Some(3), "reference");
    bad.sampling.stop = Some(vec![String::new()]);
    let e = generator().generate(bad, &mut |_| {}).err().unwrap();
    assert!(e.to_string().contains("`stop`"), "{e}");
}

/// With a reasoning budget, the span's close is written for the model once the
/// span holds that many tokens, the grammar takes it, and the constrained part
/// follows; without a grammar the budget holds the same way.
#[test]
fn reasoning_budget_forces_the_close() {
    use stencil::decode::reasoning::ReasoningBudget;
    use stencil::frontend::structural_tag::StructuralTagOptions;
    use stencil::frontend::tool_calls::{with_reasoning, Reasoning};

    let g = generator();
    let schema = &schemas()[0];
    let span = Reasoning {
        open: Some("<think>".into()),
        close: "</think>".into(),
        optional: false,
        close_alone: false,
    };
    let tag = with_reasoning(
        &json!({"type": "structural_tag", "format": {"type": "json_schema", "json_schema": schema}}),
        &span,
    );
    let tables = stencil::Compiler::new(Arc::clone(g.tokenizer().vocab()))
        .compile_structural_tag(&tag, &StructuralTagOptions::default())
        .unwrap();
    let validator = jsonschema::validator_for(schema).unwrap();
    for budget in [0, 3, 8] {
        for seed in 0..4 {
            let mut r = request(schema, Some(seed), "reference");
            r.grammar = Some(Arc::clone(&tables));
            r.max_tokens = 96;
            r.reasoning = Some(ReasoningBudget {
                open: span.open.clone(),
                close: span.close.clone(),
                max_tokens: budget,
            });
            let out = run(r);
            let spent = out.reasoning_tokens.unwrap();
            assert!(spent <= budget, "{spent} > {budget}: {:?}", out.text);
            let (_, answer) = out.text.split_once("</think>").expect("the span closed");
            assert!(out.text.starts_with("<think>"), "{:?}", out.text);
            if out.finish_reason == FinishReason::Stop {
                let value: Value = serde_json::from_str(answer.trim()).unwrap();
                assert!(validator.is_valid(&value), "{answer:?}");
            }
        }
    }
    // No grammar, a span the prompt opened: the close still comes in time.
    let mut r = request(schema, Some(1), "reference");
    r.grammar = None;
    r.max_tokens = 24;
    r.reasoning = Some(ReasoningBudget {
        open: None,
        close: "</think>".into(),
        max_tokens: 5,
    });
    let out = run(r);
    assert!(out.reasoning_tokens.unwrap() <= 5);
    let tokens = g.tokenizer().encode("</think>").unwrap();
    let at = out
        .tokens
        .windows(tokens.len())
        .position(|w| w == tokens.as_slice())
        .or_else(|| out.text.find("</think>").map(|_| 0))
        .expect("the close is in the output");
    assert!(at <= 5, "close at token {at}: {:?}", out.text);
}

#[test]
fn gguf_vocabulary_is_the_tokenizer_files() {
    let from_gguf = generator().tokenizer();
    let from_file = Vocabulary::from_tokenizer_file(gpt2_tokenizer_path()).unwrap();
    let gguf_vocab = from_gguf.vocab();
    assert_eq!(gguf_vocab.len(), from_file.len());
    for id in 0..from_file.len() as u32 {
        assert_eq!(
            gguf_vocab.token_bytes(id),
            from_file.token_bytes(id),
            "token {id}"
        );
    }
    assert_eq!(gguf_vocab.eos_ids(), &[50256]);
    let reference = stencil::vocab::load_tokenizer(gpt2_tokenizer_path()).unwrap();
    for text in [
        "Hello world!",
        "  {\"a\": [1, 2.5e-3]}\n",
        "naïve café 東京 ☃",
    ] {
        let expected = reference.encode(text, false).unwrap().get_ids().to_vec();
        assert_eq!(from_gguf.encode(text).unwrap(), expected, "{text:?}");
    }
}

/// Generation compiles integers without a zero fraction (`1`, never `1.0`).
fn generation_options() -> JsonSchemaOptions {
    JsonSchemaOptions {
        plain_integers: true,
        ..JsonSchemaOptions::default()
    }
}

#[test]
fn budget_steering_closes_within_max_tokens() {
    // Unbounded strings and arrays: a random model rarely closes them by itself.
    let schema = json!({"type": "object",
        "properties": {"note": {"type": "string"},
                       "items": {"type": "array", "items": {"type": "string"}}},
        "required": ["note", "items"], "additionalProperties": false});
    let validator = jsonschema::validator_for(&schema).unwrap();
    let (mut steered, mut unsteered_length) = (0, 0);
    for seed in 0..6u64 {
        for max_tokens in [16, 40] {
            let mut r = request(&schema, Some(seed), "reference");
            r.max_tokens = max_tokens;
            let g = run(r.clone());
            assert_eq!(
                g.finish_reason,
                FinishReason::Stop,
                "seed {seed}: {:?}",
                g.text
            );
            assert!(
                g.tokens.len() < max_tokens,
                "EOS counts: {}",
                g.tokens.len()
            );
            assert_tokens_allowed(&schema, &g);
            let value: Value = serde_json::from_str(&g.text).unwrap();
            assert!(validator.is_valid(&value), "{}", g.text);
            steered += usize::from(g.timings.steered);

            r.budget_steering = false;
            let free = run(r);
            unsteered_length += usize::from(free.finish_reason == FinishReason::Length);
        }
    }
    assert!(
        steered > 0 && unsteered_length > 0,
        "{steered} {unsteered_length}"
    );
}

#[test]
fn safetensors_llama_and_qwen2_checkpoints_generate() {
    let schema = json!({"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9},
                        "minItems": 2, "maxItems": 3});
    let validator = jsonschema::validator_for(&schema).unwrap();
    for model_type in ["llama", "qwen2"] {
        let dir = tiny_model::tiny_safetensors(model_type);
        let model = Model::load(&dir, &candle_core::Device::Cpu).unwrap();
        assert_eq!(model.logits_width(), 50257);
        let tokenizer = ModelTokenizer::from_file(&dir.join("tokenizer.json")).unwrap();
        assert_eq!(tokenizer.vocab().eos_ids(), &[50256]);
        let generator = Generator::new(model, tokenizer);
        let grammar = compile(&schema, &generation_options()).unwrap();
        let tables = Arc::new(TokenTables::new(
            grammar,
            Arc::clone(generator.tokenizer().vocab()),
        ));
        let request = Request {
            prompt: generator.tokenizer().encode_prompt("Numbers:").unwrap(),
            grammar: Some(tables),
            stop_policy: StopPolicy::Stop,
            sampling: SamplingConfig {
                temperature: Some(0.0),
                ..SamplingConfig::default()
            },
            max_tokens: 32,
            jump_forward: true,
            logprobs: 0,
            trace: false,
            budget_steering: true,
            reasoning: None,
        };
        let g = generator.generate(request.clone(), &mut |_| {}).unwrap();
        assert_eq!(g.finish_reason, FinishReason::Stop, "{model_type}: {:?}", g);
        let value: Value = serde_json::from_str(&g.text).unwrap();
        assert!(validator.is_valid(&value), "{model_type}: {}", g.text);
        // Greedy twice: the same text (the session's KV cache starts empty each time).
        let again = generator.generate(request, &mut |_| {}).unwrap();
        assert_eq!(again.tokens, g.tokens, "{model_type}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// `stencil generate ARGS`, as a user runs it.
fn run_generate(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_stencil"))
        .arg("generate")
        .args(args)
        .output()
        .unwrap()
}

/// A fresh folder for one test's files (the caller removes it).
fn scratch_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("stencil-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The JSON a `generate` run printed, once it exited 0 (its stderr otherwise).
fn succeeded(out: &std::process::Output) -> Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A structural tag alone is a grammar for `generate` (a regression: it was
/// refused as "no grammar").
#[test]
fn generate_takes_a_structural_tag() {
    let dir = scratch_dir("tag");
    let tag_path = dir.join("tag.json");
    let tag = json!({"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "const_string", "value": "answer: "},
        {"type": "json_schema", "json_schema": {"enum": ["yes", "no"]}}]}});
    std::fs::write(&tag_path, tag.to_string()).unwrap();
    let out = run_generate(&[
        "--model",
        tiny_model().to_str().unwrap(),
        "--structural-tag",
        tag_path.to_str().unwrap(),
        "--raw",
        "--prompt",
        "Q:",
        "--max-tokens",
        "8",
        "--output-json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = v["text"].as_str().unwrap();
    assert!(
        text == r#"answer: "yes""# || text == r#"answer: "no""#,
        "{text}"
    );
}

/// `stencil generate` as users call it (the contract's flags and `--output-json` keys).
/// `generate --tools`: every mode's output read back (`content`, `reasoning`,
/// `tool_calls`), calls that validate against their tool, `finish_reason`
/// `tool_calls`, the reasoning budget held; and the request's mistakes exit 2
/// naming the flag or the JSON pointer in the tools file.
#[test]
fn generate_calls_tools() {
    let dir = scratch_dir("tools");
    let tools = json!([
        {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
            "properties": {"city": {"type": "string", "maxLength": 12},
                           "days": {"type": "integer", "minimum": 1, "maximum": 7}},
            "required": ["city", "days"]}}},
        {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
            "properties": {"zone": {"enum": ["UTC", "CET"]}}, "required": ["zone"]}}}
    ]);
    let path = dir.join("tools.json");
    std::fs::write(&path, tools.to_string()).unwrap();
    let model = tiny_model().to_str().unwrap().to_string();
    let generate = |extra: &[&str]| {
        let mut args = vec![
            "--model",
            &model,
            "--tools",
            path.to_str().unwrap(),
            "--prompt",
            "Weather?",
            "--max-tokens",
            "64",
            "--temperature",
            "1",
            "--output-json",
        ];
        args.extend_from_slice(extra);
        let out = run_generate(&args);
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code(), v)
    };
    let schema_of = |name: &str| {
        tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["function"]["name"] == name)
            .unwrap()["function"]["parameters"]
            .clone()
    };
    let mut checked = 0;
    for (choice, format) in [
        ("required", "hermes"),
        ("get_time", "qwen-xml"),
        ("required", "minimax"),
    ] {
        for seed in ["1", "2"] {
            let (code, v) = generate(&[
                "--tool-choice",
                choice,
                "--tool-format",
                format,
                "--seed",
                seed,
            ]);
            if v["finish_reason"] == "length" {
                continue;
            }
            assert_eq!(code, Some(0), "{v}");
            assert_eq!(v["finish_reason"], "tool_calls", "{v}");
            let calls = v["tool_calls"].as_array().unwrap();
            assert!(!calls.is_empty(), "{v}");
            for call in calls {
                let name = call["name"].as_str().unwrap();
                if choice != "required" {
                    assert_eq!(name, choice);
                }
                let arguments: Value =
                    serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
                let validator = jsonschema::validator_for(&schema_of(name)).unwrap();
                assert!(
                    validator.is_valid(&arguments),
                    "{format}: {arguments} for {name}"
                );
            }
            checked += 1;
        }
    }
    assert!(
        checked >= 4,
        "only {checked} outputs closed within 64 tokens"
    );
    // `none`: no call, whatever the model writes.
    let (_, v) = generate(&["--tool-choice", "none", "--seed", "3"]);
    assert_eq!(v["tool_calls"], json!([]), "{v}");
    assert!(!v["text"].as_str().unwrap().contains("<tool_call>"), "{v}");
    // A reasoning budget: the span closes within it, calls follow.
    for budget in ["0", "4"] {
        let (_, v) = generate(&[
            "--tool-choice",
            "required",
            "--reasoning-budget",
            budget,
            "--seed",
            "4",
        ]);
        let text = v["text"].as_str().unwrap();
        assert!(
            text.starts_with("<think>") && text.contains("</think>"),
            "{v}"
        );
        assert!(v["reasoning"].is_string(), "{v}");
        let budget: usize = budget.parse().unwrap();
        let spent = v["reasoning_tokens"].as_u64().expect("reported") as usize;
        assert!(spent <= budget, "{spent} > {budget}: {v}");
        if v["finish_reason"] != "length" {
            assert_eq!(v["finish_reason"], "tool_calls", "{v}");
        }
    }
    // Mistakes: exit 2, named.
    let bad = |tools: &std::path::Path, extra: &[&str], needle: &str| {
        let mut args = vec![
            "--model",
            &model,
            "--tools",
            tools.to_str().unwrap(),
            "--prompt",
            "x",
        ];
        args.extend_from_slice(extra);
        let out = run_generate(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(needle), "{stderr} (wanted {needle})");
    };
    bad(
        &path,
        &["--tool-choice", "get_news"],
        "--tool-choice: /tool_choice/function/name: no tool named \"get_news\"",
    );
    bad(
        &path,
        &["--tool-format", "yaml"],
        "--tool-format: unknown format \"yaml\"",
    );
    let broken = dir.join("broken.json");
    std::fs::write(
        &broken,
        json!([{"name": "f", "parameters": {"type": "object",
        "properties": {"when": {"type": "strnig"}}}}])
        .to_string(),
    )
    .unwrap();
    bad(&broken, &[], "/tools/0/parameters/properties/when/type");
}

#[test]
fn generate_command_contract() {
    let dir = scratch_dir("cli");
    let schema_path = dir.join("schema.json");
    let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}},
                        "required": ["ok"], "additionalProperties": false});
    std::fs::write(&schema_path, schema.to_string()).unwrap();
    let model = tiny_model().to_str().unwrap();
    let schema_arg = schema_path.to_str().unwrap();
    let out = run_generate(&[
        "--model",
        model,
        "--schema",
        schema_arg,
        "--raw",
        "--prompt",
        "JSON:",
        "--max-tokens",
        "24",
        "--seed",
        "3",
        "--temperature",
        "0.7",
        "--top-p",
        "0.9",
        "--top-k",
        "40",
        "--min-p",
        "0.01",
        "--preset",
        "hf",
        "--output-json",
    ]);
    let v = succeeded(&out);
    for key in [
        "text",
        "finish_reason",
        "grammar_complete",
        "tokens",
        "timings",
    ] {
        assert!(v.get(key).is_some(), "missing {key} in {v}");
    }
    assert_eq!(v["finish_reason"], "stop");
    assert_eq!(v["grammar_complete"], true);
    let text: Value = serde_json::from_str(v["text"].as_str().unwrap()).unwrap();
    assert!(jsonschema::validator_for(&schema).unwrap().is_valid(&text));

    // A bad grammar fails before any model is loaded; a bad model path names it.
    let out = run_generate(&[
        "--model",
        "/nonexistent.gguf",
        "--regex",
        "(",
        "--output-json",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid grammar"));
    let out = run_generate(&["--model", "/nonexistent.gguf", "--json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent.gguf"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--max-tokens 0` (and a `--requests` line's `max_tokens: 0`) writes nothing.
#[test]
fn zero_max_tokens_from_the_command_line_writes_nothing() {
    let dir = scratch_dir("zero");
    let model = tiny_model().to_str().unwrap();
    let out = run_generate(&[
        "--model",
        model,
        "--json",
        "--raw",
        "--prompt",
        "JSON:",
        "--max-tokens",
        "0",
        "--output-json",
    ]);
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(v["text"], "", "{v}");
    assert_eq!(v["finish_reason"], "length", "{v}");
    assert_eq!(v["tokens"], 0, "{v}");

    let requests = dir.join("requests.jsonl");
    std::fs::write(
        &requests,
        "{\"prompt\": \"JSON:\", \"max_tokens\": 0}\n{\"prompt\": \"JSON:\", \"max_tokens\": 2}\n",
    )
    .unwrap();
    let out = run_generate(&[
        "--model",
        model,
        "--json",
        "--raw",
        "--requests",
        requests.to_str().unwrap(),
    ]);
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(lines[0]["text"], "", "{}", lines[0]);
    assert_eq!(lines[0]["tokens"], 0, "{}", lines[0]);
    let written = lines[1]["tokens"].as_u64().unwrap();
    assert!((1..=2).contains(&written), "{}", lines[1]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--sampling FILE` takes the library's keys, flags override them, `--requests`
/// lines take the same keys; every processor so configured runs (the trace lists
/// it), stop strings cut the text, and a wrong setting exits 2 naming it.
#[test]
fn generate_reads_sampling_settings_from_a_file_flags_and_lines() {
    let dir = scratch_dir("sampling");
    let settings = dir.join("sampling.json");
    std::fs::write(
        &settings,
        json!({"temperature": 0.9, "seed": 4, "repetition_penalty": 1.3,
               "frequency_penalty": 0.5, "typical_p": 0.95, "logit_bias": {"5": -1.0},
               "min_tokens": 2, "order": "hf", "dry": {"multiplier": 0.8}})
        .to_string(),
    )
    .unwrap();
    let trace = dir.join("trace.jsonl");
    let model = tiny_model().to_str().unwrap().to_string();
    let letters = [
        "--model",
        &model,
        "--raw",
        "--prompt",
        "Letters:",
        "--max-tokens",
        "16",
        "--regex",
        "x[ab]{6}y",
    ];
    let base = |extra: &[&str]| {
        let mut args = letters.to_vec();
        args.push("--output-json");
        args.extend_from_slice(extra);
        let out = run_generate(&args);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let value = serde_json::from_slice::<Value>(&out.stdout).unwrap_or(Value::Null);
        (out.status.code(), value, stderr)
    };
    let file = settings.to_str().unwrap();
    let (code, full, stderr) = base(&["--sampling", file, "--trace", trace.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{stderr}");
    let steps: Vec<Value> = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!steps.is_empty());
    for step in &steps {
        assert_eq!(step["order_source"], "hf");
        let order: Vec<&str> = step["order"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap())
            .collect();
        for processor in [
            "repetition_penalty",
            "frequency_penalty",
            "typical",
            "logit_bias",
            "min_length",
            "temperature",
            "dry",
        ] {
            assert!(order.contains(&processor), "{processor} not in {order:?}");
        }
        // DRY's default breakers ("\n", ":", "\"", "*") found in the vocabulary.
        let dry = order.iter().position(|p| *p == "dry").unwrap();
        assert!(step["params"][dry]["sequence_breakers"].as_u64().unwrap() >= 4);
        assert_eq!(step["strategy"], "categorical");
    }
    // A flag overrides the file: temperature 0 is greedy.
    let (_, _, stderr) = base(&[
        "--sampling",
        file,
        "--temperature",
        "0",
        "--trace",
        trace.to_str().unwrap(),
    ]);
    let first: Value = serde_json::from_str(
        std::fs::read_to_string(&trace)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(first["strategy"], "greedy", "{stderr}");

    // Stop strings from the flags cut the same output where the first begins.
    let text = full["text"].as_str().unwrap();
    let (code, cut, stderr) = base(&["--sampling", file, "--stop", "ab", "--stop", "ba"]);
    assert_eq!(code, Some(0), "{stderr}");
    let at = ["ab", "ba"].iter().filter_map(|s| text.find(s)).min();
    match at {
        Some(at) => {
            assert_eq!(cut["text"], text[..at]);
            assert_eq!(cut["finish_reason"], "stop");
            assert!(["ab", "ba"].contains(&cut["stop_string"].as_str().unwrap()));
            assert_eq!(cut["grammar_complete"], false);
        }
        None => assert_eq!(cut["text"], text),
    }

    // A requests line takes the same keys (its stop, its penalty).
    let requests = dir.join("requests.jsonl");
    std::fs::write(
        &requests,
        format!(
            "{}\n",
            json!({"stop": ["ab", "ba"], "repetition_penalty": 1.3, "frequency_penalty": 0.5,
                   "typical_p": 0.95, "logit_bias": {"5": -1.0}, "min_tokens": 2,
                   "dry": {"multiplier": 0.8},
                   "preset": "hf", "temperature": 0.9, "seed": 4})
        ),
    )
    .unwrap();
    let mut args = letters.to_vec();
    args.extend(["--requests", requests.to_str().unwrap()]);
    let out = run_generate(&args);
    let line: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        line["text"],
        cut["text"],
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Mistakes exit 2 and name the setting (the file's with line and column).
    std::fs::write(&settings, "{\n  \"temprature\": 1.0\n}").unwrap();
    let (code, _, stderr) = base(&["--sampling", file]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("sampling.json:2:") && stderr.contains("temprature"),
        "{stderr}"
    );
    for (flags, named) in [
        (vec!["--repetition-penalty", "0.5"], "repetition_penalty"),
        (vec!["--logit-bias", "five=1"], "--logit-bias"),
        (vec!["--stop", ""], "`stop`"),
        (vec!["--top-p", "1.5"], "top_p"),
    ] {
        let (code, _, stderr) = base(&flags);
        assert_eq!(code, Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains(named), "{flags:?}: {stderr}");
    }
    std::fs::write(&requests, "{\"top_p\": 0.5, \"dry_multiplier\": 1}\n").unwrap();
    let out = run_generate(&[
        "--model",
        "/nonexistent.gguf",
        "--json",
        "--requests",
        requests.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(":1:") && stderr.contains("dry_multiplier"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `n` samples share the prompt's forward pass (a forked KV cache each) and keep
/// their own sampler, grammar state and seed: sample `i` is what the request with
/// seed + i writes alone, and each is in the language.
#[test]
fn n_samples_fork_the_prompt_and_match_single_runs() {
    let schema = &schemas()[0];
    let base = request(schema, Some(5), "reference");
    let samples = generator()
        .generate_n(base.clone(), 3, &mut |_| {})
        .unwrap();
    assert_eq!(samples.len(), 3);
    for (i, sample) in samples.iter().enumerate() {
        assert_eq!(
            sample.finish_reason,
            FinishReason::Stop,
            "{:?}",
            sample.text
        );
        assert_tokens_allowed(schema, sample);
        let alone = request(schema, Some(5 + i as u64), "reference");
        let alone = generator().generate_n(alone, 1, &mut |_| {}).unwrap();
        assert_eq!(alone[0].tokens, sample.tokens, "sample {i}");
    }
    let texts: std::collections::BTreeSet<&str> = samples.iter().map(|s| s.text.as_str()).collect();
    assert!(texts.len() > 1, "three seeds, one text: {texts:?}");

    // From the command line: one object per sample, with its index.
    let out = run_generate(&[
        "--model",
        tiny_model().to_str().unwrap(),
        "--raw",
        "--prompt",
        "Letters:",
        "--regex",
        "[a-z]{3,8}",
        "--temperature",
        "1",
        "--seed",
        "2",
        "--n",
        "3",
        "--output-json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(line["index"], i);
        let text = line["text"].as_str().unwrap();
        assert!((3..=8).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_lowercase()));
    }
    let bad = run_generate(&["--json", "--n", "0"]);
    assert_eq!(bad.status.code(), Some(2));
}

/// Beam search over the model: every beam's text is in the language, the best
/// beam's score is the sum of its tokens' logprobs (recomputed here from fresh
/// forward passes over each prefix, under the grammar's mask), and one beam is
/// greedy decoding.
#[test]
fn beam_search_keeps_the_grammar_and_scores_its_tokens() {
    let schema = &schemas()[0];
    let mut r = request(schema, None, "reference");
    r.jump_forward = false;
    r.budget_steering = false;
    r.max_tokens = 24;
    let beams = generator().beam_search(&r, 3, 0.0).unwrap();
    assert!(!beams.is_empty() && beams.len() <= 3);
    for pair in beams.windows(2) {
        assert!(pair[0].score >= pair[1].score);
    }
    let validator = jsonschema::validator_for(schema).unwrap();
    for b in &beams {
        let mut m = TokenMatcher::new(tables(schema));
        for &t in &b.tokens {
            m.consume_token(t)
                .unwrap_or_else(|e| panic!("{e} in {:?}", b.text));
        }
        if b.finish_reason == FinishReason::Stop {
            assert!(b.grammar_complete && m.is_accepting(), "{:?}", b.text);
            let value: Value = serde_json::from_str(&b.text).unwrap();
            assert!(validator.is_valid(&value), "{}", b.text);
        }
    }
    // The best beam's score, token by token (length penalty 0: the sum itself).
    let best = &beams[0];
    let vocab = generator().tokenizer().vocab();
    let mut m = TokenMatcher::new(tables(schema));
    let mut prefix = r.prompt.clone();
    let mut sum = 0.0;
    let mut steps: Vec<u32> = best.tokens.clone();
    if best.finish_reason == FinishReason::Stop {
        steps.push(vocab.eos_ids()[0]);
    }
    for &t in &steps {
        let row = generator()
            .model()
            .session()
            .unwrap()
            .forward(&prefix)
            .unwrap();
        let mut mask = vec![0u32; row.len().div_ceil(32)];
        m.fill_next_token_bitmask(&mut mask);
        let allowed: Vec<f64> = (0..row.len())
            .filter(|&i| mask[i / 32] >> (i % 32) & 1 == 1)
            .map(|i| f64::from(row[i]))
            .collect();
        let max = allowed.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let lse = max + allowed.iter().map(|z| (z - max).exp()).sum::<f64>().ln();
        sum += f64::from(row[t as usize]) - lse;
        m.consume_token(t).unwrap();
        prefix.push(t);
    }
    assert!(
        (sum - best.sum_logprob).abs() < 1e-3 * sum.abs().max(1.0),
        "recomputed {sum}, beam {}",
        best.sum_logprob
    );
    assert!((best.score - best.sum_logprob).abs() < 1e-12);
    // Width 1 is greedy decoding.
    let one = generator().beam_search(&r, 1, 0.0).unwrap();
    let greedy = run(r.clone());
    assert_eq!(
        one[0].tokens, greedy.tokens,
        "{:?} vs {:?}",
        one[0].text, greedy.text
    );

    // From the command line.
    let out = run_generate(&[
        "--model",
        tiny_model().to_str().unwrap(),
        "--raw",
        "--prompt",
        "Letters:",
        "--regex",
        "[a-c]{2,5}",
        "--beams",
        "3",
        "--output-json",
    ]);
    let v = succeeded(&out);
    let beams = v["beams"].as_array().unwrap();
    assert!(!beams.is_empty() && beams.len() <= 3);
    assert_eq!(v["text"], beams[0]["text"]);
    for b in beams {
        let text = b["text"].as_str().unwrap();
        assert!((2..=5).contains(&text.len()) && text.bytes().all(|c| (b'a'..=b'c').contains(&c)));
    }
}

/// `--trace` writes, per sampled token, the raw row's summary (before the grammar),
/// every stage with its support (the grammar's removals visible), the processors'
/// parameters, the selection with the recorded `u`, three logprob layers and the
/// matcher before and after; the chosen token follows from the trace alone.
#[test]
fn generate_trace_rederives_each_token() {
    let dir = scratch_dir("trace");
    let settings = dir.join("sampling.json");
    std::fs::write(
        &settings,
        json!({"temperature": 0.8, "top_k": 40, "presence_penalty": 0.3, "seed": 9}).to_string(),
    )
    .unwrap();
    let trace = dir.join("trace.jsonl");
    let out = run_generate(&[
        "--model",
        tiny_model().to_str().unwrap(),
        "--raw",
        "--prompt",
        "Letters:",
        "--regex",
        "[a-z]{3,12}",
        "--max-tokens",
        "12",
        "--no-jump-forward",
        "--sampling",
        settings.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let steps: Vec<Value> = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(steps.len() >= 3);
    for step in &steps {
        let stage = |name: &str| {
            step["stages"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["processor"] == name)
                .unwrap_or_else(|| panic!("no {name} stage in {step}"))
                .clone()
        };
        // The raw row is the model's: the grammar stage removes most of it.
        let finite = step["raw"]["finite"].as_u64().unwrap();
        assert_eq!(finite, step["raw"]["width"].as_u64().unwrap());
        let allowed = stage("grammar")["support_size"].as_u64().unwrap();
        assert!(allowed < finite / 2, "{allowed} of {finite}");
        assert!(stage("top_k")["support_size"].as_u64().unwrap() <= 40);
        // Parameters beside each processor.
        let order = step["order"].as_array().unwrap();
        let at = |name: &str| order.iter().position(|p| p == name).unwrap();
        assert_eq!(step["params"][at("top_k")], json!({"k": 40}));
        assert_eq!(
            step["params"][at("temperature")]["t"].as_f64().unwrap() as f32,
            0.8
        );
        // Three layers, each a logprob (<= 0); in the reference order every
        // transform precedes every truncation, so the selection renormalises the
        // processed layer over a subset and is at least as large.
        let layer = |name: &str| {
            step["logprobs"]
                .as_array()
                .unwrap()
                .iter()
                .find(|l| l["layer"] == name)
                .unwrap_or_else(|| panic!("no {name} layer in {step}"))["value"]
                .as_f64()
                .unwrap()
        };
        let (raw, processed, selection) = (layer("raw"), layer("processed"), layer("selection"));
        assert!(raw <= 0.0 && processed <= selection + 1e-9 && selection <= 1e-12);
        // The matcher moved by the token.
        assert_ne!(step["constraint_before"], step["constraint_after"]);
        // The token again, from the selection and the recorded u (ids ascending,
        // the first whose cumulative probability passes u).
        let u = step["u"].as_f64().unwrap();
        let mut cumulative = 0.0;
        let mut chosen = None;
        for pair in step["selection"].as_array().unwrap() {
            cumulative += pair[1].as_f64().unwrap();
            if u < cumulative {
                chosen = pair[0].as_u64();
                break;
            }
        }
        assert_eq!(chosen, step["token"].as_u64(), "{step}");
        // The selection is the softmax of the last stage's candidates.
        let last = step["stages"].as_array().unwrap().last().unwrap();
        let candidates = last["candidates"].as_array().unwrap();
        assert_eq!(
            candidates.len(),
            step["selection"].as_array().unwrap().len()
        );
        for (c, pair) in candidates.iter().zip(step["selection"].as_array().unwrap()) {
            assert_eq!(c[0], pair[0]);
            assert!((c[2].as_f64().unwrap() - pair[1].as_f64().unwrap()).abs() < 1e-12);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `stencil generate --requests FILE`: lines override the flags, run as one batch,
/// and a line's text is what the same request writes alone.
#[test]
fn generate_requests_file_runs_as_one_batch() {
    let dir = scratch_dir("requests");
    let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}},
                        "required": ["ok"], "additionalProperties": false});
    let schema_path = dir.join("schema.json");
    std::fs::write(&schema_path, schema.to_string()).unwrap();
    let numbers = json!({"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9},
                         "minItems": 1, "maxItems": 3});
    let lines = [
        json!({"prompt": "JSON:", "seed": 1, "temperature": 0.9}),
        json!({"prompt": "Numbers:", "schema": numbers, "temperature": 0}),
        json!({"prompt": "Letters:", "regex": "[a-c]{2,4}", "seed": 5, "temperature": 1.0}),
        json!({"prompt": "JSON:", "seed": 1, "temperature": 0.9}),
    ];
    let requests_path = dir.join("requests.jsonl");
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&requests_path, text).unwrap();
    let model = tiny_model().to_str().unwrap();
    let common = [
        "--model",
        model,
        "--raw",
        "--max-tokens",
        "24",
        "--device",
        "cpu",
    ];
    let mut args = common.to_vec();
    args.extend([
        "--schema",
        schema_path.to_str().unwrap(),
        "--requests",
        requests_path.to_str().unwrap(),
    ]);
    let out = run_generate(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let results: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(results.len(), 4, "{stderr}");
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r["index"], i);
        assert_eq!(r["finish_reason"], "stop", "{r}");
    }
    let parse = |r: &Value| serde_json::from_str::<Value>(r["text"].as_str().unwrap()).unwrap();
    let ok = jsonschema::validator_for(&schema).unwrap();
    assert!(ok.is_valid(&parse(&results[0])));
    assert!(jsonschema::validator_for(&numbers)
        .unwrap()
        .is_valid(&parse(&results[1])));
    let letters = results[2]["text"].as_str().unwrap();
    assert!(
        (2..=4).contains(&letters.len()) && letters.bytes().all(|b| (b'a'..=b'c').contains(&b)),
        "{letters:?}"
    );
    assert_eq!(results[0]["text"], results[3]["text"]);
    assert_eq!(out.status.code(), Some(0));

    // Streamed: delta lines per request, whose concatenation is the final text.
    args.push("--stream");
    let out = run_generate(&args);
    let mut deltas = vec![String::new(); 4];
    let mut finals = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        match v.get("delta") {
            Some(d) => deltas[v["index"].as_u64().unwrap() as usize] += d.as_str().unwrap(),
            None => finals.push(v),
        }
    }
    assert_eq!(finals.len(), 4);
    for (i, f) in finals.iter().enumerate() {
        assert_eq!(f["text"], results[i]["text"]);
        assert_eq!(deltas[i], results[i]["text"].as_str().unwrap());
    }

    // The first line alone, as a plain request: the same text.
    let mut alone = common.to_vec();
    alone.extend([
        "--schema",
        schema_path.to_str().unwrap(),
        "--prompt",
        "JSON:",
        "--seed",
        "1",
        "--temperature",
        "0.9",
        "--output-json",
    ]);
    let out = run_generate(&alone);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["text"], results[0]["text"]);

    // Bad lines fail before the model loads, naming the line.
    let bad = |line: &str| {
        std::fs::write(&requests_path, format!("{{\"prompt\": \"x\"}}\n{line}\n")).unwrap();
        let out = run_generate(&[
            "--model",
            "/nonexistent.gguf",
            "--json",
            "--requests",
            requests_path.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(2), "{line}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(bad(r#"{"promt": "typo"}"#).contains(":2:"));
    assert!(bad(r#"{"regex": "a", "json": true}"#).contains("at most one"));
    assert!(bad(r#"{"preset": "nope"}"#).contains("unknown preset"));
    assert!(bad("not json").contains(":2:"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn device_flag_is_checked() {
    let model = tiny_model().to_str().unwrap();
    let run = |device: &str| {
        run_generate(&[
            "--json",
            "--device",
            device,
            "--model",
            model,
            "--raw",
            "--prompt",
            "x",
            "--max-tokens",
            "4",
        ])
    };
    let out = run("tpu");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown device"));
    if !cfg!(feature = "cuda") {
        let out = run("cuda:0");
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("without the `cuda` feature"));
    }
    let out = run("cpu");
    assert_ne!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The batched forward pass gives each sequence exactly the logits it gets alone
/// (prompts of different lengths in one batch, then single tokens and a
/// multi-token continuation at different positions), and those are candle's own
/// quantized Llama's up to the rounding of the quantized product.
#[test]
fn batched_forward_is_batch_invariant_and_matches_candles_model() {
    use candle_core::quantized::gguf_file;
    use candle_core::Device;
    use candle_transformers::models::quantized_llama::ModelWeights;
    use stencil::decode::Session;

    let path = tiny_model();
    let mut file = std::fs::File::open(path).unwrap();
    let content = gguf_file::Content::read(&mut file).unwrap();
    let reference = ModelWeights::from_gguf(content, &mut file, &Device::Cpu).unwrap();
    let model = Model::load(path, &Device::Cpu).unwrap();
    let feeds: [[&[u32]; 3]; 3] = [
        [&[10, 20, 30, 40, 50], &[7, 8], &[9]],
        [&[11], &[12, 13, 14], &[15]],
        [&[16], &[17], &[18, 19]],
    ];
    let mut references: Vec<(ModelWeights, usize)> = (0..3)
        .map(|_| {
            let mut m = reference.clone();
            m.clear_kv_cache();
            (m, 0)
        })
        .collect();
    let mut sessions: Vec<Session> = (0..3).map(|_| model.session().unwrap()).collect();
    let mut alone: Vec<Session> = (0..3).map(|_| model.session().unwrap()).collect();
    let mut worst = 0f32;
    for feed in feeds {
        let mut refs: Vec<&mut Session> = sessions.iter_mut().collect();
        let rows = Session::forward_batch(&mut refs, &feed).unwrap();
        for (i, row) in rows.iter().enumerate() {
            let got: Vec<f32> = row.to_vec1().unwrap();
            let single: Vec<f32> = alone[i].forward_tensor(feed[i]).unwrap().to_vec1().unwrap();
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&single), "sequence {i} differs in a batch");

            let (m, position) = &mut references[i];
            let input = candle_core::Tensor::new(feed[i], &Device::Cpu)
                .unwrap()
                .unsqueeze(0)
                .unwrap();
            let expected: Vec<f32> = m
                .forward(&input, *position)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap();
            *position += feed[i].len();
            assert_eq!(got.len(), expected.len());
            let spread = expected.iter().fold(0f32, |a, x| a.max(x.abs()));
            let off = got
                .iter()
                .zip(&expected)
                .fold(0f32, |a, (x, y)| a.max((x - y).abs()));
            worst = worst.max(off / spread);
        }
    }
    // Both quantize activations to 8 bits per 32-value block (candle per 256 in
    // some products): logits agree to a few parts in a thousand of their range.
    assert!(worst < 0.05, "logits off by {worst} of their range");
    assert!(
        worst > 0.0,
        "identical to candle: is the packed product in use?"
    );
}
