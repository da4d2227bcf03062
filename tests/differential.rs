//! Differential test: stencil's byte matcher against a naive reference recognizer
//! (`support/reference.rs`) that reads the grammar IR directly.
//!
//! For every grammar (the shipped ones, the vendored fixtures, and inline grammars
//! that stress left recursion, ambiguity, nullable rules, counters, Unicode and the
//! regex front-end) it generates a deterministic set of strings: random derivations,
//! mutations of them, and random bytes over the grammar's alphabet. For every string
//! and every prefix of it, the matcher's verdicts must equal the reference's:
//!
//! * the prefix is consumed without error iff it is a viable prefix;
//! * `is_accepting()` iff the prefix is a sentence;
//! * at sampled positions, `allowed_bytes()` is exactly the set of bytes `b` for which
//!   `prefix + b` is viable;
//! * after `rollback(k)` and a different suffix, the matcher behaves like a fresh one
//!   fed the same bytes.

#[path = "support/reference.rs"]
mod reference;

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use reference::{Reference, Rng, MAX_LEN};
use stencil::automaton::{CompileOptions, CompiledGrammar};
use stencil::frontend::gbnf::{self, GbnfOptions};
use stencil::frontend::{self, Limits};
use stencil::grammar::Grammar;
use stencil::matcher::{MatchError, Matcher};

/// Generated strings are cut to this length; a rolled-back string plus a new
/// suffix may be up to `MAX_LEN`.
const LEN: usize = 40;
const SEED: u64 = 0x5EED_5EED_0001;

/// Inline GBNF grammars, each stressing one tricky part.
const INLINE_GBNF: &[(&str, &str)] = &[
    ("left-recursion", "root ::= a\na ::= a \"x\" | \"x\""),
    ("left-recursion-nullable", "root ::= a \"!\"\na ::= a \"x\" | \"\""),
    ("ambiguous-ss", "root ::= s\ns ::= s s | \"a\""),
    ("ambiguous-ss-nullable", "root ::= s \"b\"?\ns ::= s s | \"a\" | \"\""),
    (
        "nullable-chain",
        "root ::= a b c\na ::= \"x\"?\nb ::= a a | \"\"\nc ::= b \"y\" | b",
    ),
    (
        "empty-alternatives",
        "root ::= ( | \"a\" | \"b\" \"c\" | ) \"d\" | \"\" | e\ne ::= \"\" | \"e\" e",
    ),
    ("only-empty-rule", "root ::= e \"a\" e e\ne ::= \"\""),
    ("nested-repeat-optional", "root ::= (\"ab\"?){2,3} \"c\""),
    ("nested-repeat-counts", "root ::= ((\"a\" | \"bb\"){1,2}){2,3} \"c\"?"),
    ("nested-star", "root ::= (\"a\"* \"b\"?)* \"c\""),
    ("exact-counts", "root ::= x{2,3} \"-\" x{3}\nx ::= \"a\" | \"aa\" | \"\" | \"b\""),
    ("big-counter-regular", "root ::= \"a\"{0,2000} \"b\""),
    ("big-counter-parser", "root ::= \"abc\"{0,2000} \"d\"{2,}"),
    ("big-counter-alt", "root ::= (\"x\" | \"yz\"){3,2500}"),
    ("big-counter-nested", "root ::= (\"ab\" [a-z]{0,3000}){2,3} \"!\""),
    ("big-counter-min", "root ::= \"q\" (\"ab\" | \"c\"){5,3000} | \"z\"{4,4000} \"y\"?"),
    ("counter-of-rule", "root ::= item{1,4000}\nitem ::= \"[\" item{0,2} \"]\" | \"o\""),
    (
        "unicode-dot",
        "root ::= . . \"x\"? [α-ω]+ | [^a-z]{1,3} \"!\"",
    ),
    (
        "unicode-classes",
        "root ::= [\\u00e9\\u4e00-\\u9fff\\U0001F600-\\U0001F64F]{1,4} \".\" [^\\u0000-\\u00ff]?",
    ),
    ("negated-class-string", "root ::= \"\\\"\" [^\"\\\\\\n]* \"\\\"\""),
    ("non-ascii-plus", "root ::= [^\\x00-\\x7F]+ \"|\" ."),
    (
        "arith-left-recursive",
        "root ::= expr\nexpr ::= term ((\"+\" | \"-\") term)*\nterm ::= factor | term \"*\" factor\nfactor ::= [0-9]+ | \"(\" expr \")\"",
    ),
    ("palindrome", "root ::= \"a\" root \"a\" | \"b\" root \"b\" | \"c\" | \"\""),
    (
        "unproductive-branch",
        "root ::= \"a\" | \"b\" dead | \"c\" (dead)? \"d\"\ndead ::= \"c\" dead",
    ),
    (
        "keywords-vs-identifiers",
        "root ::= [a-z]+ \" \" [a-z]+ | \"if\" \" \" \"then\" | \"i\" [f]{0,3}",
    ),
    (
        "mutual-recursion",
        "root ::= a\na ::= \"(\" b \")\" | \"\"\nb ::= a a | \"x\" a",
    ),
];

/// Patterns for the regex front-end (anchored at both ends).
const INLINE_REGEX: &[&str] = &[
    r"[a-c]{2,5}(x|yz)*",
    r"\d{1,3}(\.\d{1,3}){3}",
    r"(a|ab)(c|bcd)(d*)",
    r"[^\n]{0,10}\n?",
    r"(?s).{2,4}é",
    r"\w+@\w+\.(com|org)",
    r"(ab|c){0,5000}d",
    r"(?i)hello|wörld",
    r"[\x{80}-\x{10FFFF}]{2}z?",
    r"a{3}b{2,}c{0,2}",
    r"((a|b)*c){2,3}",
    r"(x?){3}y",
    r"(^ab|^c)d*(e$|f$)|^$",
];

/// Grammars built directly in the IR: permutations (no text syntax has them).
fn ir_cases() -> Vec<(String, Grammar)> {
    use stencil::grammar::{Expr, Permutation, Rule, RuleId};
    let lit = |s: &str| Expr::literal(s.as_bytes());
    let regex = |pattern: &str| {
        Expr::Regex(
            regex_syntax::ParserBuilder::new()
                .build()
                .parse(pattern)
                .unwrap(),
        )
    };
    let rule = |name: &str, expr: Expr| Rule {
        name: name.into(),
        expr,
        location: None,
    };
    let object =
        |p: Permutation| Expr::Seq(vec![lit("{"), Expr::Permutation(Box::new(p)), lit("}")]);
    let excluding = |pattern: &str, excluded: &[&str]| {
        let Expr::Regex(regex) = regex(pattern) else {
            unreachable!()
        };
        Expr::Excluding(Box::new(stencil::grammar::Excluding {
            regex,
            excluded: excluded.iter().map(|x| x.as_bytes().to_vec()).collect(),
        }))
    };
    let mut out = Vec::new();
    out.push((
        "permutation-basic",
        vec![rule(
            "root",
            object(Permutation {
                members: vec![lit("a"), lit("bb"), lit("c")],
                required: vec![true, false, false],
                extra: None,
                separator: lit(","),
                min: 0,
                max: None,
            }),
        )],
    ));
    out.push((
        "permutation-extra-counted",
        vec![rule(
            "root",
            object(Permutation {
                members: vec![lit("a:1"), lit("b:2"), lit("c:3")],
                required: vec![false, true, false],
                extra: Some(regex("x[0-9]")),
                separator: regex(", ?"),
                min: 2,
                max: Some(3),
            }),
        )],
    ));
    out.push((
        "permutation-ambiguous-empty-separator",
        vec![rule(
            "root",
            Expr::Permutation(Box::new(Permutation {
                members: vec![lit("a"), lit("b"), lit("ab"), regex("b+")],
                required: vec![false, true, false, false],
                extra: None,
                separator: Expr::Empty,
                min: 1,
                max: None,
            })),
        )],
    ));
    // Nested objects through a recursive rule, and a member that is a rule.
    out.push((
        "permutation-nested",
        vec![
            rule(
                "root",
                object(Permutation {
                    members: vec![
                        Expr::Seq(vec![lit("k:"), Expr::Ref(RuleId(1))]),
                        Expr::Seq(vec![lit("n:"), Expr::Ref(RuleId(0))]),
                        lit("z"),
                    ],
                    required: vec![false, false, true],
                    extra: Some(Expr::Seq(vec![
                        regex("[pq]"),
                        lit("="),
                        Expr::Ref(RuleId(1)),
                    ])),
                    separator: lit(","),
                    min: 0,
                    max: Some(3),
                }),
            ),
            rule(
                "value",
                Expr::Alt(vec![regex("[0-9]{1,3}"), Expr::Ref(RuleId(0))]),
            ),
        ],
    ));
    out.push((
        "permutation-exactly-two-of-five",
        vec![rule(
            "root",
            object(Permutation {
                members: ["a", "b", "c", "d", "e"].iter().map(|s| lit(s)).collect(),
                required: vec![false; 5],
                extra: None,
                separator: lit(" "),
                min: 2,
                max: Some(2),
            }),
        )],
    ));
    // A separator that matches nothing: sequences of at most one item remain.
    out.push((
        "permutation-impossible-separator",
        vec![rule(
            "root",
            Expr::Alt(vec![
                lit("y"),
                Expr::Seq(vec![
                    lit("x"),
                    Expr::Permutation(Box::new(Permutation {
                        members: vec![lit("a"), lit("bb"), lit("c")],
                        required: vec![false, false, false],
                        extra: Some(regex("[0-9]")),
                        separator: Expr::Alt(Vec::new()),
                        min: 0,
                        max: None,
                    })),
                    lit("!"),
                ]),
                Expr::Seq(vec![
                    lit("z"),
                    Expr::Permutation(Box::new(Permutation {
                        members: vec![lit("a"), lit("bb")],
                        required: vec![false, true],
                        extra: None,
                        separator: Expr::Alt(Vec::new()),
                        min: 1,
                        max: Some(2),
                    })),
                ]),
            ]),
        )],
    ));
    // Finitely many strings out of an infinite leaf: object keys but the declared
    // ones, beside the declared members; and exclusions that change the shortest
    // string, contain the empty one, or are no strings of the leaf at all.
    out.push((
        "excluding-object-keys",
        vec![rule(
            "root",
            object(Permutation {
                members: vec![lit("\"a\":1"), lit("\"ab\":2")],
                required: vec![false, false],
                extra: Some(Expr::Seq(vec![
                    excluding(r#""[ab]*""#, &[r#""a""#, r#""ab""#]),
                    lit(":0"),
                ])),
                separator: lit(","),
                min: 0,
                max: None,
            }),
        )],
    ));
    out.push((
        "excluding-shortest-and-empty",
        vec![rule(
            "root",
            Expr::Alt(vec![
                Expr::Seq(vec![
                    excluding("[ab]*", &["", "a", "b", "aa", "zz"]),
                    lit("!"),
                ]),
                Expr::Seq(vec![lit("c"), excluding("c*d", &["d", "cd"])]),
            ]),
        )],
    ));
    out.into_iter()
        .map(|(name, rules)| {
            (
                format!("ir:{name}"),
                Grammar {
                    rules,
                    root: RuleId(0),
                },
            )
        })
        .collect()
}

struct Case {
    name: String,
    grammar: Grammar,
    compiled: Arc<CompiledGrammar>,
}

fn load_cases(failures: &mut Vec<String>) -> Vec<Case> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut sources: Vec<(String, Result<Grammar, String>)> = Vec::new();
    let mut files = Vec::new();
    for dir in [
        "grammars",
        "tests/fixtures/gbnf/llama.cpp",
        "tests/fixtures/gbnf",
    ] {
        let mut in_dir: Vec<_> = std::fs::read_dir(root.join(dir))
            .unwrap_or_else(|e| panic!("reading {dir}: {e}"))
            .map(|entry| entry.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "gbnf"))
            .collect();
        in_dir.sort();
        files.extend(in_dir);
    }
    for path in files {
        let name = path.strip_prefix(root).unwrap().display().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        let parsed = gbnf::parse(&text, &GbnfOptions::default()).map_err(|e| e.to_string());
        sources.push((name, parsed));
    }
    for (name, text) in INLINE_GBNF {
        let parsed = gbnf::parse(text, &GbnfOptions::default()).map_err(|e| e.to_string());
        sources.push((format!("inline:{name}"), parsed));
    }
    for pattern in INLINE_REGEX {
        let parsed = frontend::regex::parse(pattern, &Limits::default()).map_err(|e| e.to_string());
        sources.push((format!("regex:/{pattern}/"), parsed));
    }
    for (name, grammar) in ir_cases() {
        sources.push((name, Ok(grammar)));
    }
    let mut cases = Vec::new();
    for (name, parsed) in sources {
        let grammar = match parsed {
            Ok(g) => g,
            Err(e) => {
                failures.push(format!("[{name}] does not parse: {e}"));
                continue;
            }
        };
        match CompiledGrammar::compile(&grammar, &CompileOptions::default()) {
            Ok(compiled) => cases.push(Case {
                name,
                grammar,
                compiled: Arc::new(compiled),
            }),
            Err(e) => failures.push(format!("[{name}] does not compile: {e}")),
        }
    }
    cases
}

#[derive(Default)]
struct Stats {
    grammars: usize,
    strings: usize,
    prefixes: usize,
    allowed_checks: usize,
    rollbacks: usize,
    /// Strings that are sentences / viable prefixes as a whole.
    sentences: usize,
    viable: usize,
}

/// Checks one grammar; returns its mismatches.
struct Checker<'a> {
    case: &'a Case,
    reference: Reference,
    failures: Vec<String>,
}

fn esc(s: &[u8]) -> String {
    s.escape_ascii().to_string()
}

fn verdict(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

impl Checker<'_> {
    fn fail(&mut self, s: &[u8], k: usize, what: &str, stencil: String, reference: String) {
        self.failures.push(format!(
            "[{}] string \"{}\" (len {}), prefix length {k} \"{}\": {what}: stencil {stencil}, reference {reference}",
            self.case.name,
            esc(s),
            s.len(),
            esc(&s[..k.min(s.len())]),
        ));
    }

    /// Feeds `s` to `matcher` (at position 0) and compares every prefix with the
    /// reference. Returns how many bytes were consumed.
    fn check_string(&mut self, matcher: &mut Matcher, s: &[u8], stats: &mut Stats) -> usize {
        let verdicts = self.reference.prefixes(s);
        stats.strings += 1;
        stats.sentences += usize::from(verdicts.sentence(s.len()));
        stats.viable += usize::from(verdicts.viable(s.len()));
        let mut k = 0;
        loop {
            stats.prefixes += 1;
            if matcher.position() != k {
                self.fail(
                    s,
                    k,
                    "position",
                    matcher.position().to_string(),
                    k.to_string(),
                );
                return k;
            }
            let accepting = matcher.is_accepting();
            if accepting != verdicts.sentence(k) {
                let (a, b) = (verdict(accepting), verdict(verdicts.sentence(k)));
                self.fail(s, k, "is sentence", a.into(), b.into());
                return k;
            }
            if k == s.len() {
                return k;
            }
            let result = matcher.consume_byte(s[k]);
            let expected = verdicts.viable(k + 1);
            match result {
                Ok(()) if expected => k += 1,
                Ok(()) => {
                    self.fail(s, k + 1, "viable prefix", "yes".into(), "no".into());
                    matcher.rollback(1);
                    return k;
                }
                Err(MatchError::Rejected { offset }) => {
                    if expected {
                        self.fail(s, k + 1, "viable prefix", "no".into(), "yes".into());
                    } else if offset != k || matcher.position() != k {
                        let got = format!(
                            "Rejected{{offset: {offset}}} at position {}",
                            matcher.position()
                        );
                        self.fail(
                            s,
                            k + 1,
                            "rejection offset/state",
                            got,
                            format!("offset {k}"),
                        );
                    }
                    return k;
                }
                Err(e) => {
                    self.fail(
                        s,
                        k + 1,
                        "consume_byte",
                        format!("{e}"),
                        verdict(expected).into(),
                    );
                    return k;
                }
            }
        }
    }

    /// `allowed_bytes()` at the matcher's position against the reference.
    fn check_allowed(&mut self, matcher: &Matcher, prefix: &[u8], stats: &mut Stats) {
        stats.allowed_checks += 1;
        let allowed = matcher.allowed_bytes();
        let expected = self.reference.allowed_next(prefix);
        let extra: Vec<u8> = (0..=255u8)
            .filter(|&b| allowed.contains(b) && !expected[b as usize])
            .collect();
        let missing: Vec<u8> = (0..=255u8)
            .filter(|&b| !allowed.contains(b) && expected[b as usize])
            .collect();
        if !extra.is_empty() || !missing.is_empty() {
            let mut got = format!("{allowed:?}");
            let _ = write!(
                got,
                " (allows {:02X?} wrongly, lacks {:02X?})",
                extra, missing
            );
            let exp: Vec<String> = ranges(&expected)
                .into_iter()
                .map(|(a, b)| format!("{a:02X}-{b:02X}"))
                .collect();
            self.fail(prefix, prefix.len(), "allowed_bytes", got, exp.join(","));
        }
    }

    /// Roll back `back` bytes of the consumed `s[..m]`, feed `t`, and compare with a
    /// fresh matcher fed the same bytes (which itself is compared with the reference).
    fn check_rollback(
        &mut self,
        matcher: &mut Matcher,
        s: &[u8],
        m: usize,
        back: usize,
        t: &[u8],
        stats: &mut Stats,
    ) {
        stats.rollbacks += 1;
        matcher.rollback(back);
        let kept = m - back;
        let mut combined = s[..kept].to_vec();
        combined.extend_from_slice(t);
        combined.truncate(MAX_LEN);
        if matcher.position() != kept {
            let got = matcher.position().to_string();
            self.fail(
                &combined,
                kept,
                "position after rollback",
                got,
                kept.to_string(),
            );
            return;
        }
        let mut fresh = Matcher::new(Arc::clone(&self.case.compiled));
        self.check_string(&mut fresh, &combined, stats);
        let mut replay = Matcher::new(Arc::clone(&self.case.compiled));
        replay.consume_bytes(&combined[..kept]).unwrap();
        for k in kept..combined.len() {
            let a = matcher.consume_byte(combined[k]);
            let b = replay.consume_byte(combined[k]);
            if a != b || matcher.is_accepting() != replay.is_accepting() {
                let got = format!("{a:?}, accepting {}", matcher.is_accepting());
                let exp = format!("fresh matcher: {b:?}, accepting {}", replay.is_accepting());
                self.fail(&combined, k + 1, "after rollback", got, exp);
                return;
            }
            if a.is_err() {
                break;
            }
        }
        if matcher.allowed_bytes() != replay.allowed_bytes() {
            let (got, exp) = (
                format!("{:?}", matcher.allowed_bytes()),
                format!("{:?}", replay.allowed_bytes()),
            );
            self.fail(
                &combined,
                matcher.position(),
                "allowed_bytes after rollback",
                got,
                exp,
            );
        }
    }
}

fn ranges(set: &[bool; 256]) -> Vec<(u8, u8)> {
    let mut out: Vec<(u8, u8)> = Vec::new();
    for b in 0..=255u8 {
        if set[b as usize] {
            match out.last_mut() {
                Some((_, hi)) if *hi as u16 + 1 == b as u16 => *hi = b,
                _ => out.push((b, b)),
            }
        }
    }
    out
}

/// A mutation of `s`: insert, delete or replace a byte, truncate, or splice.
fn mutate(s: &[u8], pool: &[Vec<u8>], alphabet: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut out = s.to_vec();
    let byte = |rng: &mut Rng| {
        if alphabet.is_empty() || rng.chance(1, 8) {
            rng.next_u64() as u8
        } else {
            *rng.pick(alphabet)
        }
    };
    for _ in 0..1 + rng.below(2) {
        match rng.below(5) {
            0 => {
                let at = rng.below(out.len() + 1);
                let b = byte(rng);
                out.insert(at, b);
            }
            1 if !out.is_empty() => {
                out.remove(rng.below(out.len()));
            }
            2 if !out.is_empty() => {
                let at = rng.below(out.len());
                out[at] = byte(rng);
            }
            3 if !out.is_empty() => out.truncate(rng.below(out.len())),
            _ => {
                let other = rng.pick(pool);
                let cut = rng.below(out.len() + 1);
                let from = rng.below(other.len() + 1);
                out.truncate(cut);
                out.extend_from_slice(&other[from..]);
            }
        }
    }
    out.truncate(LEN);
    out
}

fn run_case(case: &Case, rng: &mut Rng, scale: usize, stats: &mut Stats) -> Vec<String> {
    const ALLOWED_CHECKS: usize = 40;
    let (positives, mutants, random) = (60 * scale, 120 * scale, 40 * scale);
    let reference = Reference::new(&case.grammar);
    assert!(reference.is_productive(), "{}: empty language", case.name);
    let alphabet = reference.alphabet();
    let mut pool: Vec<Vec<u8>> = Vec::new();
    for _ in 0..positives {
        let depth = 2 + rng.below(10) as u32;
        let soft_len = 4 + rng.below(LEN);
        let mut s = reference.sample(rng, depth, soft_len);
        s.truncate(LEN);
        pool.push(s);
    }
    for _ in 0..mutants {
        let base = rng.pick(&pool[..positives]).clone();
        let m = mutate(&base, &pool[..positives], &alphabet, rng);
        pool.push(m);
    }
    for _ in 0..random {
        let len = rng.below(17);
        let s: Vec<u8> = (0..len)
            .map(|_| {
                if alphabet.is_empty() || rng.chance(1, 10) {
                    rng.next_u64() as u8
                } else {
                    *rng.pick(&alphabet)
                }
            })
            .collect();
        pool.push(s);
    }

    let mut checker = Checker {
        case,
        reference,
        failures: Vec::new(),
    };
    let mut matcher = Matcher::new(Arc::clone(&case.compiled));
    let mut allowed_checks = 0;
    for idx in 0..pool.len() {
        if checker.failures.len() >= 3 {
            break;
        }
        let s = pool[idx].clone();
        if rng.chance(1, 2) {
            matcher.reset();
        } else {
            matcher = Matcher::new(Arc::clone(&case.compiled));
        }
        let m = checker.check_string(&mut matcher, &s, stats);
        if rng.chance(1, 4) && allowed_checks < ALLOWED_CHECKS * scale {
            // allowed_bytes at a random position of the consumed prefix.
            allowed_checks += 1;
            let k = rng.below(m + 1);
            let mut probe = Matcher::new(Arc::clone(&case.compiled));
            probe.consume_bytes(&s[..k]).unwrap();
            checker.check_allowed(&probe, &s[..k], stats);
        }
        if rng.chance(1, 4) {
            let back = rng.below(m + 1);
            let t = rng.pick(&pool).clone();
            checker.check_rollback(&mut matcher, &s, m, back, &t, stats);
        }
    }
    stats.grammars += 1;
    checker.failures
}

#[test]
fn matcher_agrees_with_reference_recognizer() {
    let mut failures = Vec::new();
    let cases = load_cases(&mut failures);
    let mut stats = Stats::default();
    // For longer hunts: STENCIL_DIFF_SEED=n STENCIL_DIFF_SCALE=k; for the counts
    // and timings: STENCIL_DIFF_STATS=1 cargo test --test differential -- --nocapture
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let seed = env("STENCIL_DIFF_SEED").unwrap_or(SEED);
    let scale = env("STENCIL_DIFF_SCALE").unwrap_or(1).max(1) as usize;
    let verbose = std::env::var_os("STENCIL_DIFF_STATS").is_some();
    let mut rng = Rng::new(seed);
    for case in &cases {
        let started = std::time::Instant::now();
        failures.extend(run_case(case, &mut rng, scale, &mut stats));
        if verbose {
            eprintln!("{:>8.2?} {}", started.elapsed(), case.name);
        }
    }
    if verbose {
        eprintln!(
            "differential: {} grammars, {} strings ({} sentences, {} viable), {} prefixes, \
             {} allowed-bytes checks, {} rollbacks",
            stats.grammars,
            stats.strings,
            stats.sentences,
            stats.viable,
            stats.prefixes,
            stats.allowed_checks,
            stats.rollbacks
        );
    }
    assert!(
        failures.is_empty(),
        "{} mismatch(es) between stencil and the reference:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The reference recognizer on hand-checked cases, independent of stencil's
/// matcher (only the front-ends are used, to build the IR).
#[test]
fn reference_recognizer_sanity() {
    // (grammar, sentences, viable prefixes that are not sentences, non-viable strings)
    type Case<'a> = (&'a str, &'a [&'a str], &'a [&'a str], &'a [&'a str]);
    let gbnf_cases: &[Case] = &[
        (
            "root ::= (\"ab\"?){2,3} \"c\"",
            &["c", "abc", "ababc", "abababc"],
            &["", "a", "ab", "ababab", "ababa"],
            &["abababa", "ababababc", "b", "cc", "abcab"],
        ),
        (
            "root ::= a\na ::= a \"x\" | \"x\"",
            &["x", "xx", "xxxxx"],
            &[""],
            &["y", "xy"],
        ),
        (
            "root ::= \"a\" | \"b\" dead\ndead ::= \"c\" dead",
            &["a"],
            &[""],
            &["b", "bc", "ab"],
        ),
        (
            "root ::= \"a\"{0,2000} \"b\"",
            &["b", "aaab"],
            &["aaaa", ""],
            &["ba", "abb"],
        ),
        (
            "root ::= \"abc\"{2,3}",
            &["abcabc", "abcabcabc"],
            &["abca", "abcab"],
            &["abcabcabca", "abcc"],
        ),
        ("root ::= [α-ω]", &["α", "ω"], &[""], &["a", "αα"]),
        (
            "root ::= s\ns ::= s s | \"a\" | \"\"",
            &["", "a", "aaaa"],
            &[],
            &["b", "ab"],
        ),
        (
            "root ::= x{2}\nx ::= \"a\" | \"\"",
            &["", "a", "aa"],
            &[],
            &["aaa", "b"],
        ),
        (
            "root ::= \"a\" root \"a\" | \"b\" root \"b\" | \"c\" | \"\"",
            &["", "c", "abcba", "abba", "aa"],
            &["a", "abcb", "ab"],
            &["abcab", "cc", "acb"],
        ),
        (
            "root ::= \"a\"{5,}",
            &["aaaaa", "aaaaaaaa"],
            &["aaaa", ""],
            &["b", "aaaaab"],
        ),
        (
            "root ::= ( | \"a\" ) \"b\" ( )",
            &["b", "ab"],
            &["", "a"],
            &["aab", "bb"],
        ),
        (
            "root ::= (\"x\" | \"yz\"){3,2500}",
            &["xxx", "yzxyz", "xxxxxxxx"],
            &["xx", "xxy", ""],
            &["xxz", "z"],
        ),
    ];
    let regex_cases: &[Case] = &[
        (
            "(a|ab)(c|bcd)(d*)",
            &["ac", "abcd", "abcdd", "abc"],
            &["ab", "a"],
            &["abd", "b", "acb", "abcb"],
        ),
        (
            r"\d{1,3}(\.\d{1,3}){3}",
            &["1.2.3.4", "١.22.333.4"],
            &["1.", "1.2.3", "\u{661}"],
            &["1..2", "1234"],
        ),
    ];
    let check = |name: &str, grammar: &Grammar, case: &Case| {
        let reference = Reference::new(grammar);
        for s in case.1 {
            assert!(
                reference.is_sentence(s.as_bytes()),
                "{name}: {s:?} should be a sentence"
            );
        }
        for s in case.1.iter().chain(case.2) {
            assert!(
                reference.is_viable_prefix(s.as_bytes()),
                "{name}: {s:?} should be viable"
            );
        }
        for s in case.2 {
            assert!(
                !reference.is_sentence(s.as_bytes()),
                "{name}: {s:?} should not be a sentence"
            );
        }
        for s in case.3 {
            assert!(
                !reference.is_viable_prefix(s.as_bytes()),
                "{name}: {s:?} should not be viable"
            );
        }
    };
    for case in gbnf_cases {
        let grammar = gbnf::parse(case.0, &GbnfOptions::default()).unwrap();
        check(case.0, &grammar, case);
    }
    for case in regex_cases {
        let grammar = frontend::regex::parse(case.0, &Limits::default()).unwrap();
        check(case.0, &grammar, case);
    }
    // A string split inside a multi-byte character.
    let grammar = gbnf::parse("root ::= [α-ω]", &GbnfOptions::default()).unwrap();
    let reference = Reference::new(&grammar);
    assert!(reference.is_viable_prefix(b"\xce"));
    assert!(!reference.is_viable_prefix(b"\xce\x00"));
    assert!(!reference.is_viable_prefix(b"\xc0"));

    // The byte-class shortcut of `allowed_next` agrees with one analysis per byte.
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("grammars/json.gbnf"))
            .unwrap();
    let grammar = gbnf::parse(&text, &GbnfOptions::default()).unwrap();
    let reference = Reference::new(&grammar);
    for prefix in [
        "",
        "{\"a\u{e9}",
        "{\"a\u{e9}\":[1",
        "{\"\u{4e00}",
        "[1.5e",
        "\"\\u00",
    ] {
        let mut bytes = prefix.as_bytes().to_vec();
        if prefix.starts_with("{\"\u{4e00}") {
            bytes.pop(); // end inside the character
        }
        let allowed = reference.allowed_next(&bytes);
        for b in 0..=255u8 {
            let mut s = bytes.clone();
            s.push(b);
            assert_eq!(
                allowed[b as usize],
                reference.is_viable_prefix(&s),
                "json: {prefix:?} + {b:#04x}"
            );
        }
    }
}

/// Permutations of one-byte members, checked exhaustively against their definition
/// (not against the reference recognizer, which shares the parser's saturated
/// counting): every combination of required flags, extra, separator and bounds,
/// every string up to 7 bytes. A separator that matches nothing leaves sequences
/// of at most one item (no separator is written before the first). A prefix is viable when items (real counts, no
/// saturation) can still be added to reach an ending.
#[test]
fn small_permutations_match_their_definition() {
    use stencil::grammar::{Expr, Permutation, Rule, RuleId};
    const MEMBERS: &[u8] = b"abc";
    const EXTRA: u8 = b'x';
    const DEPTH: usize = 7;
    struct Spec {
        required: [bool; 3],
        extra: bool,
        comma: bool,
        /// The separator matches nothing: at most one item.
        no_separator: bool,
        min: u32,
        max: Option<u32>,
    }
    impl Spec {
        fn ends(&self, used: u8, count: u32) -> bool {
            count >= self.min
                && self.max.is_none_or(|m| count <= m)
                && (0..3).all(|k| !self.required[k] || used & 1 << k != 0)
        }
        /// Some sequence of further items reaches an ending (searched with real
        /// counts; 8 more items always suffice here).
        fn finishable(&self, used: u8, count: u32, budget: u32) -> bool {
            if self.ends(used, count) {
                return true;
            }
            if budget == 0
                || self.max.is_some_and(|m| count >= m)
                || (self.no_separator && count >= 1)
            {
                return false;
            }
            let extra = self.extra && self.finishable(used, count + 1, budget - 1);
            extra
                || (0..3).any(|k| {
                    used & 1 << k == 0 && self.finishable(used | 1 << k, count + 1, budget - 1)
                })
        }
        /// `(sentence, viable)` for `s` between the brackets.
        fn judge(&self, s: &[u8]) -> (bool, bool) {
            let (mut used, mut count, mut after_sep) = (0u8, 0u32, false);
            for (i, &b) in s.iter().enumerate() {
                let expect_item = !self.comma || i % 2 == 0;
                if expect_item {
                    if self.no_separator && count >= 1 {
                        return (false, false);
                    }
                    let k = MEMBERS.iter().position(|&m| m == b);
                    match k {
                        Some(k) if used & 1 << k == 0 => used |= 1 << k,
                        None if self.extra && b == EXTRA => {}
                        _ => return (false, false),
                    }
                    count += 1;
                    after_sep = false;
                } else {
                    if b != b',' {
                        return (false, false);
                    }
                    after_sep = true;
                }
            }
            let sentence = !after_sep && self.ends(used, count);
            // After a separator another item must come.
            let viable = if after_sep {
                self.max.is_none_or(|m| count < m)
                    && ((self.extra && self.finishable(used, count + 1, 8))
                        || (0..3).any(|k| {
                            used & 1 << k == 0 && self.finishable(used | 1 << k, count + 1, 8)
                        }))
            } else {
                self.finishable(used, count, 8)
            };
            (sentence, viable)
        }
        /// Bytes of a shortest completion of a viable `s`, the closing `>` included.
        fn shortest(&self, s: &[u8]) -> usize {
            let (mut used, mut count) = (0u8, 0u32);
            for &b in s {
                if let Some(k) = MEMBERS.iter().position(|&m| m == b) {
                    used |= 1 << k;
                }
                if b != b',' {
                    count += 1;
                }
            }
            let after_sep = s.last() == Some(&b',');
            let fewest = |used: u8, count: u32| (0..=8).find(|&j| self.finishable(used, count, j));
            let items = if after_sep {
                let extra = self.extra.then(|| fewest(used, count + 1)).flatten();
                (0..3)
                    .filter(|&k| used & 1 << k == 0)
                    .filter_map(|k| fewest(used | 1 << k, count + 1))
                    .chain(extra)
                    .min()
                    .unwrap()
                    + 1
            } else {
                fewest(used, count).unwrap()
            };
            let seps = if !self.comma || items == 0 {
                0
            } else if after_sep || count == 0 {
                items - 1
            } else {
                items
            };
            items as usize + seps as usize + 1
        }
    }
    let lit = |b: u8| Expr::literal(&[b]);
    let mut failures = Vec::new();
    let mut specs = Vec::new();
    for r in 0..8u8 {
        for extra in [false, true] {
            for (comma, no_separator) in [(false, false), (true, false), (false, true)] {
                for min in 0..4 {
                    for max in [None, Some(0), Some(1), Some(2), Some(3)] {
                        specs.push(Spec {
                            required: [r & 1 != 0, r & 2 != 0, r & 4 != 0],
                            extra,
                            comma,
                            no_separator,
                            min,
                            max,
                        });
                    }
                }
            }
        }
    }
    for spec in specs {
        let name = format!(
            "required {:?} extra {} comma {} no separator {} min {} max {:?}",
            spec.required, spec.extra, spec.comma, spec.no_separator, spec.min, spec.max
        );
        let permutation = Permutation {
            members: MEMBERS.iter().map(|&b| lit(b)).collect(),
            required: spec.required.to_vec(),
            extra: spec.extra.then(|| lit(EXTRA)),
            separator: match (spec.comma, spec.no_separator) {
                (true, _) => lit(b','),
                (_, true) => Expr::Alt(Vec::new()),
                _ => Expr::Empty,
            },
            min: spec.min,
            max: spec.max,
        };
        // `<` ... `>` around it, so that an empty permutation is a sentence too.
        let grammar = Grammar {
            rules: vec![Rule {
                name: "root".into(),
                expr: Expr::Seq(vec![
                    lit(b'<'),
                    Expr::Permutation(Box::new(permutation)),
                    lit(b'>'),
                ]),
                location: None,
            }],
            root: RuleId(0),
        };
        let satisfiable = spec.finishable(0, 0, 8);
        let compiled = match CompiledGrammar::compile(&grammar, &CompileOptions::default()) {
            Ok(c) => Arc::new(c),
            Err(e) => {
                if satisfiable {
                    failures.push(format!("{name}: compile error {e}"));
                }
                continue;
            }
        };
        let mut m = Matcher::new(Arc::clone(&compiled));
        if m.consume_byte(b'<').is_err() {
            if satisfiable {
                failures.push(format!("{name}: '<' rejected"));
            }
            continue;
        }
        // Depth-first over strings, following the matcher while it agrees.
        let mut stack: Vec<Vec<u8>> = vec![Vec::new()];
        while let Some(s) = stack.pop() {
            m.reset();
            m.consume_byte(b'<').unwrap();
            let consumed = m.consume_bytes(&s).is_ok();
            let (sentence, viable) = spec.judge(&s);
            if consumed != viable {
                failures.push(format!(
                    "{name}: <{}: matcher viable {consumed}, definition {viable}",
                    String::from_utf8_lossy(&s)
                ));
                continue;
            }
            if !consumed {
                continue;
            }
            let accepts_close = m.accepts_bytes(b">");
            if accepts_close != sentence {
                failures.push(format!(
                    "{name}: <{}>: matcher {accepts_close}, definition {sentence}",
                    String::from_utf8_lossy(&s)
                ));
            }
            match m.shortest_completion(100) {
                Some(c) => {
                    if c.len() != spec.shortest(&s) {
                        failures.push(format!(
                            "{name}: <{} completed by {:?}, but {} bytes suffice",
                            String::from_utf8_lossy(&s),
                            String::from_utf8_lossy(&c),
                            spec.shortest(&s)
                        ));
                    }
                    let mut done = m.clone();
                    if done.consume_bytes(&c).is_err() || !done.is_accepting() {
                        failures.push(format!(
                            "{name}: <{} completed by {:?} is not accepted",
                            String::from_utf8_lossy(&s),
                            String::from_utf8_lossy(&c)
                        ));
                    }
                }
                None => failures.push(format!(
                    "{name}: <{}: viable but no completion",
                    String::from_utf8_lossy(&s)
                )),
            }
            if s.len() < DEPTH {
                for &b in b"abcx,y" {
                    stack.push([s.as_slice(), &[b]].concat());
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures[..failures.len().min(30)].join("\n")
    );
}
