//! `stencil bench --tokenizer FILE (--gbnf FILE --input FILE | --lark FILE --input FILE | --maskbench FILE...) [--every N] [--json] [--cold] [--repeat N]`
//!
//! Owns the bench loop and its report: loading the workloads (a GBNF or Lark
//! grammar with one input, or MaskBench records), running each engine through
//! the [`Engine`] interface, and printing the figures and ratios.
//!
//! The MaskBench protocol (DESIGN.md): for each grammar, compile and compute the
//! first mask (time to first mask); then for each token of the instance's
//! tokenization, compute the mask, check the token is allowed, consume it (time
//! between masks). Peers run on the same grammars and token sequences in the same
//! process (build with `--features peers`), so the figures are ratios that hold on a
//! noisy machine. Each step's mask is fingerprinted (text tokens only) and compared
//! across engines: differing steps are counted as disagreements.

use std::cell::RefCell;
use std::io::Read;
use std::sync::Arc;
use std::time::Instant;
use stencil::bits::{has_bit, mask_words, set_bit};

use clap::Args;
use serde_json::{json, Value};

use stencil::frontend::json_schema::{JsonSchemaOptions, PropertyOrder};
use stencil::frontend::lark::LarkOptions;
use stencil::frontend::structural_tag::StructuralTagOptions;
use stencil::matcher::TokenMatcher;
use stencil::vocab::Vocabulary;
use stencil::{Compiler, CompilerOptions};

use super::engine::{Engine, GrammarSpec, Session};
#[cfg(feature = "peers")]
use super::tally::ttfm_common;
use super::tally::{fingerprint, summary, Tally};

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// tokenizer.json (or .json.gz) of the vocabulary to mask over.
    #[arg(long, value_name = "FILE")]
    tokenizer: String,
    /// GBNF grammar to measure (with --input).
    #[arg(
        long,
        value_name = "FILE",
        requires = "input",
        conflicts_with = "maskbench"
    )]
    gbnf: Option<String>,
    /// Lark grammar to measure (llguidance's dialect, start rule `start`; with
    /// --input). llguidance reads the same text; outlines-core is not run.
    #[arg(
        long,
        value_name = "FILE",
        requires = "input",
        conflicts_with_all = ["maskbench", "gbnf"]
    )]
    lark: Option<String>,
    /// Structural tag to measure (XGrammar's JSON format; with --input). No
    /// peer reads the format: llguidance runs on --peer-lark where given.
    #[arg(
        long,
        value_name = "FILE",
        requires = "input",
        conflicts_with_all = ["maskbench", "gbnf", "lark"]
    )]
    structural_tag: Option<String>,
    /// With --structural-tag: the same constraint as a Lark grammar (lazy
    /// rules, `%json`), which llguidance runs on the same token sequence.
    #[arg(long, value_name = "FILE", requires = "structural_tag")]
    peer_lark: Option<String>,
    /// Text the grammar accepts; its tokenization is the token sequence.
    #[arg(long, value_name = "FILE")]
    input: Option<String>,
    /// MaskBench `*.jsonl.gz` files (JSON schemas with instances).
    #[arg(long, value_name = "FILE", num_args = 1.., required_unless_present_any = ["gbnf", "lark", "structural_tag"])]
    maskbench: Vec<String>,
    /// Take every Nth MaskBench record.
    #[arg(long, default_value_t = 1)]
    every: usize,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// Compile each grammar with a fresh compiler (by default one compiler
    /// serves the whole run, as an engine keeps one per vocabulary), so every
    /// grammar starts cold.
    #[arg(long)]
    cold: bool,
    /// Largest regular part fused into one terminal (see
    /// `CompileOptions::max_terminal_weight`): smaller compiles faster, larger
    /// leaves the parser less to do at mask time.
    #[arg(long, value_name = "WEIGHT")]
    max_terminal_weight: Option<usize>,
    /// Memory the compiler may keep for what grammars share, in MiB.
    #[arg(long, value_name = "MIB", default_value_t = 256)]
    compiler_memory_mb: usize,
    /// Run the whole protocol N times per engine, each run as cold as a fresh
    /// process (stencil starts with a fresh compiler), and
    /// report each mask's and each compile's fastest time: a shared machine's
    /// interruptions only ever add time, and one of them lands on some mask of
    /// every long run, so a single run's max often measures the machine.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    repeat: u32,
    /// Also print stencil's N slowest masks: workload, instance, step, and the text
    /// just before the step (where the tail comes from).
    #[arg(long, value_name = "N", default_value_t = 0)]
    slowest: usize,
    /// Run stencil alone, even in a build with peers (for a profiler's view of
    /// stencil's masks only).
    #[arg(long, conflicts_with = "peers")]
    no_peers: bool,
    /// Peers to run in a build with peers, comma-separated (outlines-core runs on
    /// JSON Schema only, and its index build takes seconds per schema).
    #[arg(
        long,
        value_name = "NAMES",
        value_delimiter = ',',
        default_value = "llguidance,outlines-core",
        value_parser = ["llguidance", "outlines-core"]
    )]
    peers: Vec<String>,
}

/// One grammar with the texts to run through it.
pub(super) struct Workload {
    name: String,
    grammar: GrammarSpec,
    /// (text, is it valid)
    instances: Vec<(Vec<u8>, bool)>,
}

/// stencil through one [`Compiler`] per run, as an engine holds one per
/// vocabulary; `--cold` makes a fresh one for each grammar.
struct Stencil {
    vocab: Arc<Vocabulary>,
    options: CompilerOptions,
    cold: bool,
    compiler: RefCell<Arc<Compiler>>,
}

impl Stencil {
    fn new(vocab: Arc<Vocabulary>, options: CompilerOptions, cold: bool) -> Stencil {
        let compiler = Compiler::with_options(Arc::clone(&vocab), options.clone());
        Stencil {
            vocab,
            options,
            cold,
            compiler: RefCell::new(Arc::new(compiler)),
        }
    }

    fn fresh_compiler(&self) {
        let compiler = Compiler::with_options(Arc::clone(&self.vocab), self.options.clone());
        *self.compiler.borrow_mut() = Arc::new(compiler);
    }
}

struct StencilSession {
    matcher: TokenMatcher,
}

impl Engine for Stencil {
    fn name(&self) -> &'static str {
        "stencil"
    }

    fn compile(&self, grammar: &GrammarSpec) -> Result<Box<dyn Session>, String> {
        if self.cold {
            self.fresh_compiler();
        }
        let compiler = Arc::clone(&self.compiler.borrow());
        let tables = match grammar {
            GrammarSpec::Gbnf(text) => compiler.compile_gbnf(text),
            GrammarSpec::Lark(text) => compiler.compile_lark(text),
            GrammarSpec::StructuralTag { tag, .. } => {
                compiler.compile_structural_tag(tag, &StructuralTagOptions::default())
            }
            GrammarSpec::JsonSchema(schema) => {
                // MaskBench instances are compact JSON in arbitrary key order.
                let options = JsonSchemaOptions {
                    property_order: PropertyOrder::Any,
                    ..JsonSchemaOptions::default()
                };
                compiler.compile_json_schema(schema, &options)
            }
        }
        .map_err(|e| e.to_string())?;
        Ok(Box::new(StencilSession {
            matcher: TokenMatcher::new(tables),
        }))
    }

    fn forget_earlier_runs(&self) {
        self.fresh_compiler();
    }

    fn shared_memory_bytes(&self) -> usize {
        self.compiler.borrow().memory_usage()
    }
}

impl Session for StencilSession {
    fn fill_mask(&mut self, mask: &mut [u32]) {
        self.matcher.fill_next_token_bitmask(mask);
    }

    fn consume(&mut self, token: u32) -> bool {
        self.matcher.consume_token(token).is_ok()
    }

    fn is_accepting(&mut self) -> bool {
        self.matcher.is_accepting()
    }

    fn memory_bytes(&self) -> usize {
        let tables = self.matcher.tables();
        tables.grammar().memory_usage() + tables.memory_usage()
    }
}

fn run_engine(
    engine: &dyn Engine,
    workloads: &[Workload],
    tokenized: &[Vec<Vec<u32>>],
    text_tokens: &[u32],
) -> Tally {
    let mut tally = Tally::default();
    let mut mask = vec![0u32; text_tokens.len() + 1];
    for (workload_index, (workload, token_lists)) in workloads.iter().zip(tokenized).enumerate() {
        let mut per_instance = Vec::new();
        let admitted = engine.admits(&workload.grammar);
        let started = Instant::now();
        let first = admitted
            .and_then(|()| engine.compile(&workload.grammar))
            .map(|mut session| {
                session.fill_mask(&mut mask);
                session
            });
        let ttfm = started.elapsed().as_secs_f64() * 1e6;
        let mut first = match first {
            Ok(session) => {
                tally.compiled += 1;
                tally.ttfm_us.push(ttfm);
                tally.first_masks.push(Some(ttfm));
                Some(session)
            }
            Err(e) => {
                tally.failed += 1;
                tally.first_masks.push(None);
                tally.errors.push(format!("{}: {e}", workload.name));
                tally.fingerprints.push(Vec::new());
                continue;
            }
        };
        for (instance, ((_, valid), tokens)) in
            workload.instances.iter().zip(token_lists).enumerate()
        {
            // The first instance reuses the session whose first mask was timed.
            let mut session = match first.take() {
                Some(s) => s,
                None => match engine.compile(&workload.grammar) {
                    Ok(s) => s,
                    Err(_) => break,
                },
            };
            let mut steps = Vec::with_capacity(tokens.len());
            let mut refused_at = None;
            for (step, &token) in tokens.iter().enumerate() {
                let started = Instant::now();
                session.fill_mask(&mut mask);
                let micros = started.elapsed().as_secs_f64() * 1e6;
                tally.tbm_us.push(micros);
                tally.steps.push((micros, workload_index, instance, step));
                steps.push(fingerprint(&mask, text_tokens));
                let allowed = has_bit(&mask, token as usize);
                if !allowed || !session.consume(token) {
                    refused_at = Some(step);
                    break;
                }
            }
            let accepted = refused_at.is_none() && session.is_accepting();
            if *valid && !accepted {
                tally.valid_rejected += 1;
                let step = refused_at.unwrap_or(tokens.len());
                tally.refusals.push((workload_index, instance, step));
            }
            if !*valid && accepted {
                tally.invalid_accepted += 1;
            }
            tally.memory.push(session.memory_bytes());
            tally.shared_memory.push(engine.shared_memory_bytes());
            per_instance.push(steps);
        }
        tally.fingerprints.push(per_instance);
    }
    tally
}

/// [`run_engine`] `repeat` times, each after [`Engine::forget_earlier_runs`]:
/// the first run's verdicts, each mask's and compile's fastest time.
fn run_repeated(
    engine: &dyn Engine,
    repeat: u32,
    workloads: &[Workload],
    tokenized: &[Vec<Vec<u32>>],
    text_tokens: &[u32],
) -> Result<Tally, String> {
    let mut fastest = run_engine(engine, workloads, tokenized, text_tokens);
    for run in 2..=repeat {
        engine.forget_earlier_runs();
        let again = run_engine(engine, workloads, tokenized, text_tokens);
        // The same grammars and tokens: the same masks, in the same order.
        let same = again.tbm_us.len() == fastest.tbm_us.len()
            && again.ttfm_us.len() == fastest.ttfm_us.len()
            && again.fingerprints == fastest.fingerprints;
        if !same {
            return Err(format!(
                "{}: run {run} of {repeat} computed other masks than the first",
                engine.name()
            ));
        }
        for (t, again) in fastest.tbm_us.iter_mut().zip(&again.tbm_us) {
            *t = t.min(*again);
        }
        for (t, again) in fastest.ttfm_us.iter_mut().zip(&again.ttfm_us) {
            *t = t.min(*again);
        }
        for (first, again) in fastest.first_masks.iter_mut().zip(&again.first_masks) {
            if let (Some(t), Some(again)) = (first, again) {
                *t = t.min(*again);
            }
        }
        for (step, again) in fastest.steps.iter_mut().zip(&again.steps) {
            step.0 = step.0.min(again.0);
        }
    }
    Ok(fastest)
}

/// What the peers measured: a summary per peer run, their compile errors, and
/// the peers asked for but not run, with the reason.
#[derive(Default)]
struct PeerResults {
    summaries: serde_json::Map<String, Value>,
    errors: Vec<String>,
    skipped: serde_json::Map<String, Value>,
    /// Per peer: its time to first mask per workload.
    first_masks: Vec<(String, Vec<Option<f64>>)>,
}

#[cfg(feature = "peers")]
fn run_peers(
    vocab: &Vocabulary,
    args: &BenchArgs,
    workloads: &[Workload],
    tokenized: &[Vec<Vec<u32>>],
    text_tokens: &[u32],
    ours: &Tally,
) -> Result<PeerResults, String> {
    let wanted = |name: &str| args.peers.iter().any(|p| p == name);
    let mut results = PeerResults::default();
    let mut engines: Vec<Box<dyn Engine>> = Vec::new();
    let structural = workloads
        .iter()
        .any(|w| matches!(w.grammar, GrammarSpec::StructuralTag { .. }));
    let reads_no_structural_tag = json!("it reads no structural tag (XGrammar's format)");
    if wanted("llguidance") && structural && args.peer_lark.is_none() {
        results
            .skipped
            .insert("llguidance".into(), reads_no_structural_tag.clone());
    } else if wanted("llguidance") {
        engines.push(Box::new(
            super::peers::Llguidance::new(vocab).map_err(|e| format!("llguidance: {e}"))?,
        ));
    }
    // outlines-core reads JSON Schema and regular expressions, no GBNF or Lark.
    if wanted("outlines-core") && structural {
        results
            .skipped
            .insert("outlines-core".into(), reads_no_structural_tag);
    } else if wanted("outlines-core") {
        if workloads
            .iter()
            .any(|w| matches!(w.grammar, GrammarSpec::JsonSchema(_)))
        {
            engines.push(Box::new(
                super::peers::OutlinesCore::new(vocab)
                    .map_err(|e| format!("outlines-core: {e}"))?,
            ));
        } else {
            results.skipped.insert(
                "outlines-core".into(),
                json!("it reads JSON Schema only, not a GBNF or Lark grammar"),
            );
        }
    }
    for peer in &engines {
        let mut tally = run_repeated(
            peer.as_ref(),
            args.repeat,
            workloads,
            tokenized,
            text_tokens,
        )?;
        let mut value = summary(peer.name(), &args.tokenizer, &mut tally);
        value["disagreements_with_stencil"] = json!(disagreements(ours, &tally));
        value["ttfm_common_us"] = ttfm_common(ours, &tally);
        results
            .first_masks
            .push((peer.name().to_string(), tally.first_masks.clone()));
        const SHOWN: usize = 10;
        let errors = &mut results.errors;
        errors.extend(
            tally
                .errors
                .iter()
                .take(SHOWN)
                .map(|e| format!("{} failed to compile {e}", peer.name())),
        );
        if tally.errors.len() > SHOWN {
            errors.push(format!(
                "{} failed to compile {} more",
                peer.name(),
                tally.errors.len() - SHOWN
            ));
        }
        errors.extend(refusal_lines(
            peer.name(),
            &tally,
            workloads,
            tokenized,
            vocab,
        ));
        results.summaries.insert(peer.name().to_string(), value);
    }
    Ok(results)
}

/// Without `--features peers` there is nothing to compare against.
#[cfg(not(feature = "peers"))]
fn run_peers(
    _: &Vocabulary,
    _: &BenchArgs,
    _: &[Workload],
    _: &[Vec<Vec<u32>>],
    _: &[u32],
    _: &Tally,
) -> Result<PeerResults, String> {
    Ok(PeerResults::default())
}

/// Steps where two engines' masks differ (text tokens only), over runs both finished.
#[cfg(feature = "peers")]
fn disagreements(a: &Tally, b: &Tally) -> usize {
    let mut count = 0;
    for (wa, wb) in a.fingerprints.iter().zip(&b.fingerprints) {
        for (ia, ib) in wa.iter().zip(wb) {
            count += ia.iter().zip(ib).filter(|(x, y)| x != y).count();
        }
    }
    count
}

fn load_workloads(args: &BenchArgs, vocab: &Arc<Vocabulary>) -> Result<Vec<Workload>, String> {
    if let Some(path) = &args.structural_tag {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
        let tag: Value = serde_json::from_str(&text)
            .map_err(|e| format!("{path}:{}:{}: not JSON: {e}", e.line(), e.column()))?;
        // Read once, untimed: a mistake is the user's error, with its pointer.
        Compiler::new(Arc::clone(vocab))
            .compile_structural_tag(&tag, &StructuralTagOptions::default())
            .map_err(|e| format!("{path}: {e}"))?;
        let peer_lark = match &args.peer_lark {
            Some(lark) => Some(
                std::fs::read_to_string(lark).map_err(|e| format!("cannot read {lark}: {e}"))?,
            ),
            None => None,
        };
        let input_path = args.input.as_deref().unwrap_or_default();
        let input =
            std::fs::read(input_path).map_err(|e| format!("cannot read {input_path}: {e}"))?;
        return Ok(vec![Workload {
            name: path.clone(),
            grammar: GrammarSpec::StructuralTag { tag, peer_lark },
            instances: vec![(input, true)],
        }]);
    }
    let grammar_file = match (&args.gbnf, &args.lark) {
        (Some(path), _) => Some((path, false)),
        (None, Some(path)) => Some((path, true)),
        (None, None) => None,
    };
    if let Some((path, is_lark)) = grammar_file {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
        let grammar = if is_lark {
            // Read once, untimed, so a grammar with a mistake (or a token name
            // the vocabulary lacks) is the user's error, exit 2 with its line and
            // column, rather than a failed compile.
            let grammar = stencil::frontend::lark::parse(&text, &LarkOptions::default())
                .map_err(|e| format!("{path}:{e}"))?;
            if grammar.has_token_sets() {
                Compiler::new(Arc::clone(vocab))
                    .bind_tokens(&grammar)
                    .map_err(|e| format!("{path}:{e}"))?;
            }
            GrammarSpec::Lark(text)
        } else {
            GrammarSpec::Gbnf(text)
        };
        let input_path = args.input.as_deref().unwrap_or_default();
        let input =
            std::fs::read(input_path).map_err(|e| format!("cannot read {input_path}: {e}"))?;
        return Ok(vec![Workload {
            name: path.clone(),
            grammar,
            instances: vec![(input, true)],
        }]);
    }
    let mut workloads = Vec::new();
    let mut index = 0usize;
    for path in &args.maskbench {
        let raw = std::fs::read(path).map_err(|e| format!("cannot read {path}: {e}"))?;
        let mut text = String::new();
        flate2::read::GzDecoder::new(&raw[..])
            .read_to_string(&mut text)
            .map_err(|e| format!("{path}: not a gzip file: {e}"))?;
        for (line_no, line) in text.lines().enumerate() {
            index += 1;
            if !(index - 1).is_multiple_of(args.every.max(1)) {
                continue;
            }
            let outer: Value =
                serde_json::from_str(line).map_err(|e| format!("{path}:{}: {e}", line_no + 1))?;
            let record: Value = serde_json::from_str(outer["record"].as_str().unwrap_or("null"))
                .map_err(|e| format!("{path}:{}: record: {e}", line_no + 1))?;
            let instances = record["tests"]
                .as_array()
                .map(|tests| {
                    tests
                        .iter()
                        .filter_map(|t| {
                            let data = serde_json::to_string(t.get("data")?).ok()?;
                            Some((data.into_bytes(), t["valid"].as_bool().unwrap_or(false)))
                        })
                        .collect()
                })
                .unwrap_or_default();
            workloads.push(Workload {
                name: outer["file"].as_str().unwrap_or("?").to_string(),
                grammar: GrammarSpec::JsonSchema(record["schema"].clone()),
                instances,
            });
        }
    }
    Ok(workloads)
}

pub fn run(args: &BenchArgs) -> i32 {
    match run_inner(args) {
        Ok(()) => 0,
        Err(message) => {
            eprintln!("error: {message}");
            2
        }
    }
}

fn run_inner(args: &BenchArgs) -> Result<(), String> {
    let vocab =
        Arc::new(Vocabulary::from_tokenizer_file(&args.tokenizer).map_err(|e| e.to_string())?);
    let tokenizer = stencil::vocab::load_tokenizer(&args.tokenizer).map_err(|e| e.to_string())?;
    let workloads = load_workloads(args, &vocab)?;
    let tokenized: Vec<Vec<Vec<u32>>> = workloads
        .iter()
        .map(|w| {
            w.instances
                .iter()
                .map(|(text, _)| {
                    let text = String::from_utf8_lossy(text);
                    tokenizer
                        .encode(text.as_ref(), false)
                        .map(|e| e.get_ids().to_vec())
                        .unwrap_or_default()
                })
                .collect()
        })
        .collect();
    // Bits of tokens with bytes: the ones masks are compared on.
    let mut text_tokens = vec![0u32; mask_words(vocab.len())];
    for &id in vocab.text_tokens() {
        set_bit(&mut text_tokens, id as usize);
    }

    let mut options = CompilerOptions {
        memory_limit: args.compiler_memory_mb << 20,
        ..CompilerOptions::default()
    };
    if let Some(weight) = args.max_terminal_weight {
        options.compile.max_terminal_weight = weight;
    }
    let ours = Stencil::new(Arc::clone(&vocab), options, args.cold);
    let mut our_tally = run_repeated(&ours, args.repeat, &workloads, &tokenized, &text_tokens)?;
    let mut result = summary(ours.name(), &args.tokenizer, &mut our_tally);
    let shared_max = our_tally.shared_memory.iter().copied().max().unwrap_or(0);
    result["compiler_memory_bytes_max"] = json!(shared_max);
    result["compiler_memory_limit"] = json!(ours.options.memory_limit);
    let peers = if args.no_peers {
        Default::default()
    } else {
        run_peers(
            &vocab,
            args,
            &workloads,
            &tokenized,
            &text_tokens,
            &our_tally,
        )?
    };
    result["peers"] = Value::Object(peers.summaries.clone());
    if !peers.skipped.is_empty() {
        result["peers_skipped"] = Value::Object(peers.skipped.clone());
    }
    result["repeat"] = json!(args.repeat);
    result["workloads"] = json!(workloads.len());
    result["instances_run"] = json!(workloads.iter().map(|w| w.instances.len()).sum::<usize>());

    if args.json {
        println!("{result}");
        // The JSON object is one line on stdout; the slowest masks go to stderr.
        if args.slowest > 0 {
            eprint!(
                "{}{}",
                slowest_compile_lines(args.slowest, &our_tally, &peers, &workloads),
                slowest_lines(args.slowest, &our_tally, &workloads, &tokenized, &vocab)
            );
        }
    } else {
        print_table(&result);
        for e in our_tally.errors.iter().take(10) {
            println!("stencil failed to compile {e}");
        }
        for line in refusal_lines("stencil", &our_tally, &workloads, &tokenized, &vocab) {
            println!("{line}");
        }
        for e in &peers.errors {
            println!("{e}");
        }
        print!(
            "{}{}",
            slowest_compile_lines(args.slowest, &our_tally, &peers, &workloads),
            slowest_lines(args.slowest, &our_tally, &workloads, &tokenized, &vocab)
        );
    }
    Ok(())
}

/// Where `engine` refused valid instances (the first ten), a line each with
/// the last bytes of text before the refused token: what to look at when an
/// engine's "valid-rej" count is not zero.
fn refusal_lines(
    engine: &str,
    tally: &Tally,
    workloads: &[Workload],
    tokenized: &[Vec<Vec<u32>>],
    vocab: &Vocabulary,
) -> Vec<String> {
    const SHOWN: usize = 10;
    let mut lines: Vec<String> = tally
        .refusals
        .iter()
        .take(SHOWN)
        .map(|&(workload, instance, step)| {
            let tokens = &tokenized[workload][instance];
            let before = vocab.decode(&tokens[..step]);
            let tail = &before[before.len().saturating_sub(60)..];
            let what = match tokens.get(step) {
                Some(&token) => format!(
                    "refused token {step} of {}: ...{:?} then {:?}",
                    tokens.len(),
                    String::from_utf8_lossy(tail),
                    String::from_utf8_lossy(vocab.token_bytes(token)),
                ),
                None => format!(
                    "did not accept it at its end: ...{:?}",
                    String::from_utf8_lossy(tail)
                ),
            };
            format!(
                "{engine} rejected valid {} #{instance}: {what}",
                workloads[workload].name
            )
        })
        .collect();
    if tally.refusals.len() > SHOWN {
        lines.push(format!(
            "{engine} rejected {} more valid instances",
            tally.refusals.len() - SHOWN
        ));
    }
    lines
}

/// stencil's `n` slowest first masks (the compiles), a line each with the
/// workload's index in the run and each peer's time on it.
fn slowest_compile_lines(
    n: usize,
    tally: &Tally,
    peers: &PeerResults,
    workloads: &[Workload],
) -> String {
    let mut firsts: Vec<(f64, usize)> = tally
        .first_masks
        .iter()
        .enumerate()
        .filter_map(|(i, t)| Some(((*t)?, i)))
        .collect();
    firsts.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut out = String::new();
    for &(micros, workload) in firsts.iter().take(n) {
        out.push_str(&format!(
            "{micros:9.1} us  first mask of {} (workload {workload})",
            workloads[workload].name
        ));
        for (peer, times) in &peers.first_masks {
            match times.get(workload).copied().flatten() {
                Some(t) => out.push_str(&format!(", {peer} {t:.1} us")),
                None => out.push_str(&format!(", {peer} did not compile it")),
            }
        }
        out.push('\n');
    }
    out
}

/// The `n` slowest masks of a run, a line each with the last bytes of text before
/// it.
fn slowest_lines(
    n: usize,
    tally: &Tally,
    workloads: &[Workload],
    tokenized: &[Vec<Vec<u32>>],
    vocab: &Vocabulary,
) -> String {
    let mut steps = tally.steps.clone();
    steps.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut out = String::new();
    for &(micros, workload, instance, step) in steps.iter().take(n) {
        let before = vocab.decode(&tokenized[workload][instance][..step]);
        let tail = &before[before.len().saturating_sub(60)..];
        let next = vocab.token_bytes(tokenized[workload][instance][step]);
        out.push_str(&format!(
            "{micros:9.1} us  {} #{instance} step {step}: ...{:?} then {:?}\n",
            workloads[workload].name,
            String::from_utf8_lossy(tail),
            String::from_utf8_lossy(next),
        ));
    }
    out
}

fn print_table(result: &Value) {
    let mut rows = vec![result.clone()];
    if let Some(peers) = result["peers"].as_object() {
        rows.extend(peers.values().cloned());
    }
    println!(
        "{} workloads, {} instances, tokenizer {}",
        result["workloads"], result["instances_run"], result["tokenizer"]
    );
    println!(
        "{:<12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>8} {:>8} {:>8} {:>9} {:>9}",
        "engine",
        "tbm p50",
        "p90",
        "p99",
        "p99.9",
        "max",
        "ttfm p50",
        "ttfm max",
        "masks",
        "compiled",
        "failed",
        "valid-rej",
        "inval-acc"
    );
    for r in &rows {
        println!(
            "{:<12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>8} {:>8} {:>8} {:>9} {:>9}",
            r["engine"].as_str().unwrap_or("?"),
            // A JSON value's Display ignores width: pad its text.
            r["tbm_us"]["p50"].to_string(),
            r["tbm_us"]["p90"].to_string(),
            r["tbm_us"]["p99"].to_string(),
            r["tbm_us"]["p999"].to_string(),
            r["tbm_us"]["max"].to_string(),
            r["ttfm_us"]["p50"].to_string(),
            r["ttfm_us"]["max"].to_string(),
            r["masks"].to_string(),
            r["schemas"]["compiled"].to_string(),
            r["schemas"]["failed"].to_string(),
            r["instances"]["valid_rejected"].to_string(),
            r["instances"]["invalid_accepted"].to_string(),
        );
    }
    if let Some(peers) = result["peers"].as_object() {
        for (name, peer) in peers {
            let ratio = |key: &str, p: &str| {
                let ours = result[key][p].as_f64().unwrap_or(0.0);
                let theirs = peer[key][p].as_f64().unwrap_or(0.0);
                if theirs > 0.0 {
                    // Two significant digits where a ratio is far below 1
                    // (outlines-core's compiles).
                    let ratio = ours / theirs;
                    let decimals = if ratio > 0.0 && ratio < 0.1 {
                        (1.0 - ratio.log10().floor()) as usize
                    } else {
                        2
                    };
                    format!("{ratio:.decimals$}")
                } else {
                    "-".into()
                }
            };
            println!(
                "stencil/{name}: tbm p50 {} p90 {} p99 {} p99.9 {} max {}; ttfm p50 {}; disagreeing steps {}",
                ratio("tbm_us", "p50"),
                ratio("tbm_us", "p90"),
                ratio("tbm_us", "p99"),
                ratio("tbm_us", "p999"),
                ratio("tbm_us", "max"),
                ratio("ttfm_us", "p50"),
                peer["disagreements_with_stencil"]
            );
        }
    }
    if let Some(skipped) = result["peers_skipped"].as_object() {
        for (name, why) in skipped {
            println!("{name} not run: {}", why.as_str().unwrap_or("?"));
        }
    }
    println!(
        "all times in microseconds; memory per compiled grammar (max) {} bytes; \
         shared by the compiler (max) {} of its {} bytes",
        result["memory_bytes_max"],
        result["compiler_memory_bytes_max"],
        result["compiler_memory_limit"]
    );
    if result["repeat"].as_u64().is_some_and(|n| n > 1) {
        println!(
            "each time is the fastest of {} cold runs (--repeat)",
            result["repeat"]
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// Allows every token; once told to forget, a drifting one allows token 0 only.
    struct Fake {
        forgotten: Cell<u32>,
        drifts: bool,
    }

    struct FakeSession {
        allow_all: bool,
    }

    impl Engine for Fake {
        fn name(&self) -> &'static str {
            "fake"
        }

        fn compile(&self, _: &GrammarSpec) -> Result<Box<dyn Session>, String> {
            let allow_all = !(self.drifts && self.forgotten.get() > 0);
            Ok(Box::new(FakeSession { allow_all }))
        }

        fn forget_earlier_runs(&self) {
            self.forgotten.set(self.forgotten.get() + 1);
        }
    }

    impl Session for FakeSession {
        fn fill_mask(&mut self, mask: &mut [u32]) {
            mask.fill(if self.allow_all { u32::MAX } else { 1 });
        }

        fn consume(&mut self, _: u32) -> bool {
            true
        }

        fn is_accepting(&mut self) -> bool {
            true
        }
    }

    fn repeated(engine: &Fake, repeat: u32) -> Result<Tally, String> {
        let workloads = [Workload {
            name: "w".into(),
            grammar: GrammarSpec::Gbnf(String::new()),
            instances: vec![(b"ab".to_vec(), true)],
        }];
        run_repeated(engine, repeat, &workloads, &[vec![vec![0, 1]]], &[u32::MAX])
    }

    #[test]
    fn repeated_runs_start_cold_and_keep_one_time_per_mask() {
        let engine = Fake {
            forgotten: Cell::new(0),
            drifts: false,
        };
        let tally = repeated(&engine, 3).unwrap();
        assert_eq!(engine.forgotten.get(), 2, "forgotten before runs 2 and 3");
        assert_eq!((tally.tbm_us.len(), tally.ttfm_us.len()), (2, 1));
        assert_eq!((tally.compiled, tally.valid_rejected), (1, 0));
    }

    #[test]
    fn repeated_runs_that_compute_other_masks_are_an_error() {
        let engine = Fake {
            forgotten: Cell::new(0),
            drifts: true,
        };
        let error = repeated(&engine, 3).err().expect("the second run differs");
        assert!(error.contains("run 2 of 3"), "{error}");
        assert!(
            repeated(&engine, 1).is_ok(),
            "one run has nothing to differ from"
        );
    }
}
