//! `pattern` and `patternProperties`: ECMA-262 regexes translated to the
//! `regex-syntax` dialect, then made whole-string.
//!
//! ECMA semantics kept: `\d \w \s` and their negations are the ECMA sets (ASCII
//! digits and word characters, ECMA white space and line terminators), `.` excludes
//! line terminators, `[^]` is any character, `[]` is nothing, `{` not starting a
//! quantifier is a literal, `\uXXXX` (surrogate pairs joined) and `\cX` escapes,
//! `\p{..}` as in Unicode mode. Matching is unanchored by the spec: a pattern is
//! `.*P.*` unless its branches start with `^` / end with `$`. Look-arounds,
//! backreferences and word boundaries cannot be decided by a finite automaton
//! reading left to right and are a clear error.

use std::rc::Rc;

use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir, HirKind, Look, Repetition};

use super::{JsonSchemaError, Result, SchemaCompiler};

const ECMA_SPACE: &str = r"\t\n\x0B\x0C\r \x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}";

/// Why a pattern has no exact whole-string regex. The message is the reason an
/// `Unsupported` error gives for the `pattern` keyword.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PatternError {
    #[error("pattern ends with a lone backslash")]
    LoneBackslash,
    /// `\b` or `\B` outside a class.
    #[error("word boundary assertion \\{0} is not supported")]
    WordBoundary(char),
    #[error("backreferences are not supported")]
    Backreference,
    #[error("named backreferences are not supported")]
    NamedBackreference,
    #[error("unterminated \\u{{")]
    UnterminatedCodePoint,
    #[error("unterminated \\p{{")]
    UnterminatedProperty,
    #[error("lone surrogate escapes are not supported")]
    LoneSurrogate,
    #[error("look-around assertions are not supported")]
    LookAround,
    #[error("unterminated character class")]
    UnterminatedClass,
    /// `^` or `$` inside a branch, which is no whole-string regex.
    #[error("anchors (^, $) are supported only at the start/end of a branch")]
    AnchorInside,
    #[error("unsupported assertion")]
    Assertion,
    /// The translated pattern does not parse.
    #[error("cannot parse pattern: {0}")]
    Parse(regex_syntax::ast::ErrorKind),
    /// The translated pattern parses, but `regex-syntax` cannot lower it (an
    /// unknown Unicode property, say).
    #[error("cannot translate pattern: {0}")]
    Translate(regex_syntax::hir::ErrorKind),
    /// Any other `regex-syntax` error (its type is non-exhaustive); boxed, as it
    /// is 128 bytes.
    #[error("{0}")]
    Syntax(Box<regex_syntax::Error>),
    #[error("repetition count above the limit of {limit}")]
    RepetitionOverLimit { limit: u64 },
}

type PatternResult<T> = std::result::Result<T, PatternError>;

/// Translates an ECMA-262 pattern into `regex-syntax` syntax.
pub(crate) fn translate(p: &str) -> PatternResult<String> {
    let chars: Vec<char> = p.chars().collect();
    let mut out = String::with_capacity(p.len() + 16);
    let mut i = 0;
    let mut in_class = false;
    let mut class_start = false;
    while i < chars.len() {
        let c = chars[i];
        let at_class_start = class_start;
        class_start = false;
        match c {
            '\\' => {
                i = translate_escape(&chars, i, in_class, &mut out)?;
                continue;
            }
            '[' if !in_class => {
                if chars.get(i + 1) == Some(&'^') && chars.get(i + 2) == Some(&']') {
                    out.push_str(r"[\x{0}-\x{10FFFF}]");
                    i += 3;
                    continue;
                }
                if chars.get(i + 1) == Some(&']') {
                    out.push_str(r"[^\x{0}-\x{10FFFF}]");
                    i += 2;
                    continue;
                }
                in_class = true;
                class_start = true;
                out.push('[');
                if chars.get(i + 1) == Some(&'^') {
                    out.push('^');
                    i += 1;
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            '[' | '&' | '~' if in_class => out.push_str(&format!(r"\x{{{:X}}}", c as u32)),
            '-' if in_class && at_class_start => out.push_str(r"\-"),
            '.' if !in_class => out.push_str(r"[^\n\r\x{2028}\x{2029}]"),
            '(' if !in_class && chars.get(i + 1) == Some(&'?') => {
                let next: String = chars.iter().skip(i + 2).take(2).collect();
                if next.starts_with('=') || next.starts_with('!') || next == "<=" || next == "<!" {
                    return Err(PatternError::LookAround);
                }
                if next.starts_with('<') {
                    out.push_str("(?P<");
                    i += 3;
                    continue;
                }
                out.push_str("(?");
                i += 2;
                continue;
            }
            '{' if !in_class => {
                let rest: String = chars[i + 1..].iter().take(24).collect();
                let q = rest.find('}').map(|e| &rest[..e]);
                let is_quant = q.is_some_and(|q| {
                    let (a, b) = q.split_once(',').unwrap_or((q, ""));
                    !a.is_empty()
                        && a.bytes().all(|x| x.is_ascii_digit())
                        && b.bytes().all(|x| x.is_ascii_digit())
                });
                if let (true, Some(q)) = (is_quant, q) {
                    out.push('{');
                    out.push_str(q);
                    out.push('}');
                    i += q.chars().count() + 2;
                    continue;
                }
                out.push_str(r"\{");
            }
            '}' if !in_class => out.push_str(r"\}"),
            ' ' | '#' => out.push_str(&format!(r"\x{{{:X}}}", c as u32)),
            c => out.push(c),
        }
        i += 1;
    }
    if in_class {
        return Err(PatternError::UnterminatedClass);
    }
    Ok(out)
}

/// Translates the escape starting at `chars[i]` (a backslash) onto `out` and
/// returns the index after it. Inside a class (`in_class`), class escapes are
/// written as ranges, without brackets of their own.
/// A pattern that opens with look-aheads at its start, `^(?=A)(?!B)C`, as what
/// it says: the string matches `^C`, and `^A`, and not `^B`. A look-ahead where
/// the string starts reads a prefix of the whole string, so each is a pattern of
/// its own, kept beside the rest (`patterns` and `not_patterns`) and intersected
/// like any two patterns on one string. `None` for any other pattern, and when
/// the rest has branches (`^(?!A)B|C`: the look-ahead binds `B` alone).
pub(crate) fn split_leading_lookaheads(p: &str) -> Option<(String, Vec<(bool, String)>)> {
    let chars: Vec<char> = p.chars().collect();
    if chars.first() != Some(&'^') {
        return None;
    }
    let mut looks = Vec::new();
    let mut i = 1;
    while chars.get(i) == Some(&'(')
        && chars.get(i + 1) == Some(&'?')
        && matches!(chars.get(i + 2), Some('=' | '!'))
    {
        let close = group_end(&chars, i)?;
        let mut body: String = chars[i + 3..close].iter().collect();
        if let Some(b) = body.strip_prefix('^') {
            body = b.to_string(); // already anchored at the start
        }
        looks.push((chars[i + 2] == '=', format!("^(?:{body})")));
        i = close + 1;
    }
    if looks.is_empty() || has_top_level_branch(&chars[i..]) {
        return None;
    }
    let rest: String = chars[i..].iter().collect();
    Some((format!("^{rest}"), looks))
}

/// The index of the `)` closing the group opened at `open`.
fn group_end(chars: &[char], open: usize) -> Option<usize> {
    structure(&chars[open..])
        .find(|&(_, c, depth)| c == ')' && depth == 0)
        .map(|(i, _, _)| open + i)
}

/// Whether `chars` has a `|` outside every group and class.
fn has_top_level_branch(chars: &[char]) -> bool {
    structure(chars).any(|(_, c, depth)| c == '|' && depth == 0)
}

/// Each character of a pattern outside escapes and classes, with its index and
/// the group depth it sits at (a group's parentheses at the depth outside it).
fn structure(chars: &[char]) -> impl Iterator<Item = (usize, char, usize)> + '_ {
    let (mut depth, mut in_class, mut escaped) = (0usize, false, false);
    chars.iter().enumerate().filter_map(move |(i, &c)| {
        if std::mem::take(&mut escaped) {
            return None;
        }
        match c {
            '\\' => {
                escaped = true;
                None
            }
            '[' if !in_class => {
                in_class = true;
                None
            }
            ']' if in_class => {
                in_class = false;
                None
            }
            _ if in_class => None,
            '(' => {
                depth += 1;
                Some((i, c, depth - 1))
            }
            ')' => {
                let at = depth.saturating_sub(1);
                depth = at;
                Some((i, c, at))
            }
            _ => Some((i, c, depth)),
        }
    })
}

fn translate_escape(
    chars: &[char],
    mut i: usize,
    in_class: bool,
    out: &mut String,
) -> PatternResult<usize> {
    let Some(&n) = chars.get(i + 1) else {
        return Err(PatternError::LoneBackslash);
    };
    i += 2;
    match n {
        'd' => out.push_str(if in_class { "0-9" } else { "[0-9]" }),
        'D' => out.push_str("[^0-9]"),
        'w' => out.push_str(if in_class {
            "0-9A-Za-z_"
        } else {
            "[0-9A-Za-z_]"
        }),
        'W' => out.push_str("[^0-9A-Za-z_]"),
        's' => {
            if in_class {
                out.push_str(ECMA_SPACE)
            } else {
                out.push_str(&format!("[{ECMA_SPACE}]"))
            }
        }
        'S' => out.push_str(&format!("[^{ECMA_SPACE}]")),
        'b' if in_class => out.push_str(r"\x08"),
        'b' | 'B' => return Err(PatternError::WordBoundary(n)),
        '1'..='9' if !in_class => return Err(PatternError::Backreference),
        'k' if chars.get(i) == Some(&'<') => return Err(PatternError::NamedBackreference),
        '0' => out.push_str(r"\x00"),
        'n' => out.push_str(r"\n"),
        'r' => out.push_str(r"\r"),
        't' => out.push_str(r"\t"),
        'f' => out.push_str(r"\x0C"),
        'v' => out.push_str(r"\x0B"),
        'c' => match chars.get(i) {
            Some(l) if l.is_ascii_alphabetic() => {
                out.push_str(&format!(r"\x{{{:X}}}", (*l as u32) % 32));
                i += 1;
            }
            _ => out.push_str(r"\\c"),
        },
        'x' => {
            let hex: String = chars.iter().skip(i).take(2).collect();
            if hex.len() == 2 && hex.chars().all(|h| h.is_ascii_hexdigit()) {
                out.push_str(&format!(r"\x{{{hex}}}"));
                i += 2;
            } else {
                out.push('x');
            }
        }
        'u' => {
            if chars.get(i) == Some(&'{') {
                let end = chars[i..]
                    .iter()
                    .position(|&x| x == '}')
                    .ok_or(PatternError::UnterminatedCodePoint)?;
                let hex: String = chars[i + 1..i + end].iter().collect();
                out.push_str(&format!(r"\x{{{hex}}}"));
                i += end + 1;
            } else {
                let read4 = |at: usize| -> Option<u32> {
                    let s: String = chars.get(at..at + 4)?.iter().collect();
                    u32::from_str_radix(&s, 16).ok().filter(|_| s.len() == 4)
                };
                let Some(mut cp) = read4(i) else {
                    out.push('u');
                    return Ok(i);
                };
                i += 4;
                if (0xD800..0xDC00).contains(&cp)
                    && chars.get(i) == Some(&'\\')
                    && chars.get(i + 1) == Some(&'u')
                {
                    if let Some(lo) = read4(i + 2).filter(|l| (0xDC00..0xE000).contains(l)) {
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                        i += 6;
                    }
                }
                if (0xD800..0xE000).contains(&cp) {
                    return Err(PatternError::LoneSurrogate);
                }
                out.push_str(&format!(r"\x{{{cp:X}}}"));
            }
        }
        'p' | 'P' => {
            out.push('\\');
            out.push(n);
            if chars.get(i) == Some(&'{') {
                let end = chars[i..]
                    .iter()
                    .position(|&x| x == '}')
                    .ok_or(PatternError::UnterminatedProperty)?;
                out.extend(&chars[i..=i + end]);
                i += end + 1;
            }
        }
        c if c.is_ascii_alphanumeric() => out.push(c), // identity escape
        c => out.push_str(&format!(r"\x{{{:X}}}", c as u32)),
    }
    Ok(i)
}

/// Any one character (a Unicode scalar value).
pub(crate) fn any_char_hir() -> Hir {
    Hir::class(Class::Unicode(ClassUnicode::new([ClassUnicodeRange::new(
        '\0',
        char::MAX,
    )])))
}

fn any_string() -> Hir {
    Hir::repetition(Repetition {
        min: 0,
        max: None,
        greedy: true,
        sub: Box::new(any_char_hir()),
    })
}

fn has_look(h: &Hir) -> bool {
    h.properties().look_set().iter().next().is_some()
}

/// Whole-string form of a search regex: `.*` where a branch is not anchored.
fn whole(h: &Hir) -> PatternResult<Hir> {
    match h.kind() {
        // The branches anchored at neither end share one `.*(A|B|...).*`: a
        // union of `.*A.*`, `.*B.*`, ... determinizes into every subset of the
        // words already seen (`Red|Blue|Yellow|...` unanchored, 30 colours:
        // 3 s, then past the size bound), the factored form into one
        // Aho-Corasick automaton.
        HirKind::Alternation(items) => {
            let (free, anchored): (Vec<&Hir>, Vec<&Hir>) =
                items.iter().partition(|branch| !has_look(branch));
            let mut branches = anchored
                .into_iter()
                .map(whole)
                .collect::<PatternResult<Vec<_>>>()?;
            if !free.is_empty() {
                branches.push(Hir::concat(vec![
                    any_string(),
                    Hir::alternation(
                        free.into_iter()
                            .map(|b| trim_right(&trim_left(b)))
                            .collect(),
                    ),
                    any_string(),
                ]));
            }
            Ok(Hir::alternation(branches))
        }
        HirKind::Capture(c) => whole(&c.sub),
        HirKind::Look(Look::Start) | HirKind::Look(Look::End) => Ok(any_string()),
        HirKind::Concat(items) => {
            let start = matches!(
                items.first().map(Hir::kind),
                Some(HirKind::Look(Look::Start))
            );
            let end = matches!(items.last().map(Hir::kind), Some(HirKind::Look(Look::End)));
            let lo = usize::from(start);
            let hi = items.len() - usize::from(end && items.len() > lo);
            let middle = &items[lo..hi];
            if middle.iter().any(has_look) {
                // `^` / `$` nested in a group at the edge, e.g. `(^a|b$)c`.
                if middle.len() == 1 && !start && !end {
                    return whole(&middle[0]);
                }
                // An anchor over a group of branches: `^(?:$|https://)`, which is
                // also how regex-syntax factors `^$|^https://`.
                if let [group] = middle {
                    if let Some(branches) = branches_of(group) {
                        let anchor = |branch: &Hir| {
                            let mut parts = Vec::new();
                            if start {
                                parts.push(Hir::look(Look::Start));
                            }
                            parts.push(branch.clone());
                            if end {
                                parts.push(Hir::look(Look::End));
                            }
                            whole(&Hir::concat(parts))
                        };
                        return Ok(Hir::alternation(
                            branches.iter().map(anchor).collect::<PatternResult<_>>()?,
                        ));
                    }
                }
                return Err(PatternError::AnchorInside);
            }
            let mut middle = Hir::concat(middle.to_vec());
            let mut out = Vec::new();
            if !start {
                out.push(any_string());
                middle = trim_left(&middle);
            }
            if !end {
                middle = trim_right(&middle);
            }
            out.push(middle);
            if !end {
                out.push(any_string());
            }
            Ok(Hir::concat(out))
        }
        _ if has_look(h) => Err(PatternError::Assertion),
        _ => Ok(Hir::concat(vec![
            any_string(),
            trim_right(&trim_left(h)),
            any_string(),
        ])),
    }
}

/// `h` after a `.*`: its leading unbounded repetition cut to its minimum
/// (`.*[a-z]+x` is `.*[a-z]x`: the `.*` takes the other letters). The search
/// automaton then tracks no run it does not need.
fn trim_left(h: &Hir) -> Hir {
    trim_edge(h, true)
}

/// `h` before a `.*`: its trailing unbounded repetition cut to its minimum
/// (`Africa/[A-Za-z]+.*` is `Africa/[A-Za-z].*`).
fn trim_right(h: &Hir) -> Hir {
    trim_edge(h, false)
}

fn trim_edge(h: &Hir, left: bool) -> Hir {
    match h.kind() {
        HirKind::Capture(c) => trim_edge(&c.sub, left),
        HirKind::Repetition(r) if r.max.is_none() => {
            Hir::repetition(regex_syntax::hir::Repetition {
                min: r.min,
                max: Some(r.min),
                greedy: r.greedy,
                sub: r.sub.clone(),
            })
        }
        HirKind::Concat(items) if !items.is_empty() => {
            let mut items = items.clone();
            let edge = if left { 0 } else { items.len() - 1 };
            items[edge] = trim_edge(&items[edge], left);
            Hir::concat(items)
        }
        HirKind::Alternation(items) => {
            Hir::alternation(items.iter().map(|b| trim_edge(b, left)).collect())
        }
        _ => h.clone(),
    }
}

/// The branches of an alternation (inside groups), if `h` is one.
fn branches_of(h: &Hir) -> Option<&[Hir]> {
    match h.kind() {
        HirKind::Alternation(items) => Some(items),
        HirKind::Capture(c) => branches_of(&c.sub),
        _ => None,
    }
}

/// The decoded-string regex a pattern means: matches exactly the valid strings.
pub(crate) fn pattern_to_hir(p: &str, max_repetition: u64) -> PatternResult<Hir> {
    let t = translate(p)?;
    let hir = regex_syntax::ParserBuilder::new()
        .nest_limit(100)
        .build()
        .parse(&t)
        .map_err(|e| match e {
            regex_syntax::Error::Parse(p) => PatternError::Parse(p.kind().clone()),
            regex_syntax::Error::Translate(t) => PatternError::Translate(t.kind().clone()),
            other => PatternError::Syntax(Box::new(other)),
        })?;
    check_reps(&hir, max_repetition)?;
    whole(&hir)
}

fn check_reps(h: &Hir, max: u64) -> PatternResult<()> {
    match h.kind() {
        HirKind::Repetition(r) => {
            if r.min as u64 > max || r.max.is_some_and(|m| m as u64 > max) {
                return Err(PatternError::RepetitionOverLimit { limit: max });
            }
            check_reps(&r.sub, max)
        }
        HirKind::Capture(c) => check_reps(&c.sub, max),
        HirKind::Concat(items) | HirKind::Alternation(items) => {
            items.iter().try_for_each(|i| check_reps(i, max))
        }
        _ => Ok(()),
    }
}

impl<'a> SchemaCompiler<'a> {
    /// The whole-string regex of a `pattern` at `ptr` (cached).
    pub(crate) fn pattern_hir(&mut self, p: &str, ptr: &str) -> Result<Hir> {
        if let Some((h, _)) = self.patterns.get(p) {
            return Ok(h.clone());
        }
        if p.len() > self.opts.limits.max_pattern_bytes {
            return Err(self.limit(
                ptr,
                format!(
                    "pattern longer than {} bytes",
                    self.opts.limits.max_pattern_bytes
                ),
            ));
        }
        let h = pattern_to_hir(p, self.opts.limits.max_repetition).map_err(|reason| {
            JsonSchemaError::Unsupported {
                keyword: "pattern".into(),
                pointer: ptr.into(),
                reason: format!("{reason} (pattern {p:?})"),
            }
        })?;
        self.patterns.insert(p.to_string(), (h.clone(), None));
        Ok(h)
    }

    /// Whether string `s` matches `pattern` (for enum filtering and property names).
    pub(crate) fn pattern_matches(&mut self, p: &str, ptr: &str, s: &str) -> Result<bool> {
        let h = self.pattern_hir(p, ptr)?;
        let re = match self.patterns.get(p).and_then(|x| x.1.clone()) {
            Some(re) => re,
            None => {
                let re = Rc::new(
                    build_matcher(&h)
                        .map_err(|e| self.limit(ptr, format!("pattern too large: {e}")))?,
                );
                self.patterns.get_mut(p).unwrap().1 = Some(re.clone());
                re
            }
        };
        Ok(re.is_match(s.as_bytes()))
    }
}

/// A full-match regex for a decoded-string Hir (the error: past the NFA size
/// limit; boxed, as it is 136 bytes).
pub(crate) fn build_matcher(
    h: &Hir,
) -> std::result::Result<regex_automata::meta::Regex, Box<regex_automata::meta::BuildError>> {
    let anchored = Hir::concat(vec![
        Hir::look(Look::Start),
        h.clone(),
        Hir::look(Look::End),
    ]);
    regex_automata::meta::Regex::builder()
        .configure(regex_automata::meta::Config::new().nfa_size_limit(Some(64 << 20)))
        .build_from_hir(&anchored)
        .map_err(Box::new)
}

/// Heap bytes the search automaton of an unanchored pattern may take to stay one
/// terminal (see [`determinizes_within_budget`]).
const SEARCH_DFA_BYTES: usize = 256 << 10;

/// Whether the whole-string regex `h` of a pattern that searches (`.*P.*`, or
/// `.*` inside) determinizes within [`SEARCH_DFA_BYTES`]. Most do (`[a-f0-9]{24}`
/// anywhere: 25 states); those that do not (`a.{20}` anywhere: one state per
/// subset of the last 21 positions) keep each `.*` as a parser-level rule instead.
/// One terminal is what the token tables are fast on: a `.*` rule ends after
/// every character, so almost every token of the string would go to the parser.
/// Asked through [`PatternCache::search_automaton_is_small`](super::PatternCache),
/// which remembers the verdicts.
pub(crate) fn determinizes_within_budget(h: &Hir) -> bool {
    use regex_automata::dfa::{dense, StartKind};
    use regex_automata::nfa::thompson;
    let Ok(nfa) = thompson::Compiler::new()
        .configure(thompson::Config::new().nfa_size_limit(Some(SEARCH_DFA_BYTES * 4)))
        .build_from_hir(h)
    else {
        return false;
    };
    dense::Builder::new()
        .configure(
            dense::Config::new()
                .start_kind(StartKind::Anchored)
                .minimize(false)
                .dfa_size_limit(Some(SEARCH_DFA_BYTES))
                .determinize_size_limit(Some(SEARCH_DFA_BYTES)),
        )
        .build_from_nfa(&nfa)
        .is_ok()
}

/// The strings a whole-string regex matches, when they are at most `most`
/// (`None`: more, or infinitely many).
pub(crate) fn finite_words(h: &Hir, most: usize) -> Option<Vec<String>> {
    use regex_syntax::hir::literal::{ExtractKind, Extractor};
    let mut extractor = Extractor::new();
    extractor.kind(ExtractKind::Prefix).limit_total(most);
    let seq = extractor.extract(h);
    if !seq.is_exact() {
        return None;
    }
    let words = seq.literals()?;
    if words.len() > most {
        return None;
    }
    words
        .iter()
        .map(|w| String::from_utf8(w.as_bytes().to_vec()).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_automata_of_common_patterns_are_small_and_exponential_ones_are_not() {
        let small = |p: &str| determinizes_within_budget(&pattern_to_hir(p, 1000).unwrap());
        assert!(small("[a-f0-9]{24}"));
        assert!(small(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}.\d{6}"));
        assert!(small("(.+/)?.+:.+"));
        assert!(!small("a.{20}"));
        // Unanchored words: one search for any of them (as `.*w.*` each, the
        // automaton tracked every subset of the words seen).
        let words = "Red|Blue|Yellow|Gold|Silver|Crystal|Ruby|Sapphire|Emerald|FireRed|LeafGreen|Diamond|Pearl|Platinum|HeartGold|SoulSilver|Black|White|X|Y";
        assert!(small(words));
        assert!(small(&format!("^Z$|{words}")));
    }

    #[test]
    fn unanchored_branches_search_anywhere_beside_anchored_ones() {
        for (p, yes, no) in [
            (
                "Red|Blue",
                &["Red", "a Blue b", "xRedBluex"][..],
                &["Re", "", "blue"][..],
            ),
            ("^Z$|Red|Blue", &["Z", "Reds", "oBlue"], &["Za", "aZ", "R"]),
            ("^a|b$|cd", &["ax", "xb", "xcdx"], &["xa", "bx", "c d"]),
            // Edge repetitions cut to their minimum: the same strings.
            (
                "UTC|(Africa/[A-Za-z]+)|(Asia/[A-Za-z]+)",
                &["Africa/a", "x Asia/Tokyo y", "UTC"],
                &["Africa/", "Asia/1", "utc"],
            ),
            ("[0-9]{2,}x", &["a12x", "123x"], &["1x", "12"]),
            ("^a[0-9]*", &["a", "a1b"], &["ba"]),
            ("b+$", &["ab", "bbb"], &["ba", ""]),
        ] {
            for s in yes {
                assert!(m(p, s), "{p} matches {s:?}");
            }
            for s in no {
                assert!(!m(p, s), "{p} does not match {s:?}");
            }
        }
    }

    #[test]
    fn leading_lookaheads_split_into_patterns() {
        let split = |p: &str| split_leading_lookaheads(p);
        assert_eq!(
            split(r"^(?!org\.bukkit\.)[a-z]+$"),
            Some((
                "^[a-z]+$".to_string(),
                vec![(false, r"^(?:org\.bukkit\.)".to_string())]
            ))
        );
        assert_eq!(
            split(r"^(?=[^=]+$)(?!^a|b)(x)"),
            Some((
                "^(x)".to_string(),
                vec![
                    (true, "^(?:[^=]+$)".to_string()),
                    (false, "^(?:a|b)".to_string())
                ]
            ))
        );
        // A parenthesis in a class or escaped does not close the group.
        assert_eq!(
            split(r"^(?![)\)])a").map(|(r, l)| (r, l[0].1.clone())),
            Some(("^a".to_string(), r"^(?:[)\)])".to_string()))
        );
        assert_eq!(split(r"^(?!a)b|c"), None, "binds the first branch only");
        assert_eq!(split(r"x(?!a)"), None);
        assert_eq!(split(r"^((?!a).)*$"), None);
        assert_eq!(split(r"^(?!a"), None);
    }

    fn m(p: &str, s: &str) -> bool {
        build_matcher(
            &pattern_to_hir(p, 1000).unwrap_or_else(|e| panic!("{p}: {e} ({:?})", translate(p))),
        )
        .unwrap()
        .is_match(s.as_bytes())
    }

    #[test]
    fn ecma_semantics() {
        assert!(m("^\\d+$", "123"));
        assert!(!m("^\\d+$", "١٢٣")); // Arabic-Indic digits are not \d in ECMA
        assert!(m("a", "xxaxx"));
        assert!(!m("^a", "xa"));
        assert!(m("^a|b$", "ab") && m("^a|b$", "xb") && !m("^a|b$", "xa"));
        assert!(m("^[^]$", "\n"));
        assert!(!m("^.$", "\n"));
        assert!(m("a{", "a{"));
        assert!(m("^a{2}$", "aa"));
        assert!(m("^\\w+$", "ab_9") && !m("^\\w+$", "é"));
        assert!(m("^\\p{L}+$", "éa"));
        assert!(m("^\\u00e9$", "é"));
        assert!(m("^[\\s]$", "\u{a0}"));
        assert!(m("^\\/$", "/"));
        assert!(m("^(?:a|b)$", "b"));
        assert!(m("^(?<n>a)$", "a"));
        // regex-syntax factors `^$|^h` into `^(?:$|h)`: the anchor is spread back.
        assert!(m("^$|^https://x\\.com/", "") && m("^$|^https://x\\.com/", "https://x.com/a"));
        assert!(!m("^$|^https://x\\.com/", "x") && !m("^$|^https://x\\.com/", "ahttps://x.com/"));
        assert!(m("^(?:a|b)c$", "bc") && !m("^(?:a|b)c$", "xbc"));
        assert!(pattern_to_hir("(?=a)", 10).is_err());
        assert!(pattern_to_hir("(a)\\1", 10).is_err());
        assert!(pattern_to_hir("\\bfoo", 10).is_err());
    }

    /// The reasons are what `Unsupported` errors (and the test suite's reports)
    /// quote: the same text as when they were strings.
    #[test]
    fn error_messages_are_unchanged() {
        let reason = |p: &str| pattern_to_hir(p, 10).unwrap_err().to_string();
        assert_eq!(
            reason("\\bfoo"),
            "word boundary assertion \\b is not supported"
        );
        assert_eq!(reason("\\u{41"), "unterminated \\u{");
        assert_eq!(reason("\\p{L"), "unterminated \\p{");
        assert_eq!(reason("(a)\\1"), "backreferences are not supported");
        assert_eq!(reason("(?=a)"), "look-around assertions are not supported");
        assert_eq!(reason("[a"), "unterminated character class");
        assert_eq!(
            reason("a^b"),
            "anchors (^, $) are supported only at the start/end of a branch"
        );
        assert_eq!(reason("a{11}"), "repetition count above the limit of 10");
        assert_eq!(reason("("), "cannot parse pattern: unclosed group");
    }
}
