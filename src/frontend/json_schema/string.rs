//! Strings: the JSON encoding of a decoded-string constraint.
//!
//! Constraints (`pattern`, `format`, `minLength`/`maxLength`, `const`) talk about
//! the *decoded* string, in code points; the grammar reads the *encoded* JSON text.
//! Two encodings are used:
//!
//! * unconstrained text (only lengths): every JSON escape is accepted, one code
//!   point per repetition of [`any_char`] (`\u00e9` and a surrogate pair each count
//!   once), so length bounds stay one `Repeat` counter;
//! * text under a regex (pattern, format, literal, property key): the canonical
//!   encoding serde_json writes: raw UTF-8 except `"`, `\` and control characters,
//!   which take their short or `\u00XX` escape. Every decoded string has exactly one
//!   canonical encoding, which keeps "key not in this set" exact; the price is that
//!   needless escapes (`\u0061` for `a`) are rejected there (an over-constraint).

use crate::grammar::{Expr, Intersection};
use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir, HirKind};

use super::format::RegexSyntax;
use super::node::Node;
use super::{alt, nothing, seq, PatternCache, Result, SchemaCompiler};
use crate::grammar::RuleId;

/// One code point of a JSON string body, any encoding.
pub(crate) fn any_char(cache: &PatternCache) -> Hir {
    cache.re(concat!(
        r#"[^"\\\x00-\x1F]"#,
        r#"|\\["\\/bfnrt]"#,
        r"|\\u(?:[0-9a-cA-Ce-fE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2})",
        r"|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}",
    ))
}

/// The canonical encoding of one decoded character.
fn encode_char(c: char) -> Hir {
    match c {
        '"' => Hir::literal(&b"\\\""[..]),
        '\\' => Hir::literal(&b"\\\\"[..]),
        '\u{8}' => Hir::literal(&b"\\b"[..]),
        '\u{c}' => Hir::literal(&b"\\f"[..]),
        '\n' => Hir::literal(&b"\\n"[..]),
        '\r' => Hir::literal(&b"\\r"[..]),
        '\t' => Hir::literal(&b"\\t"[..]),
        c if (c as u32) < 0x20 => {
            let hex = format!("{:02x}", c as u32);
            let mut parts = vec![Hir::literal(&b"\\u00"[..])];
            for h in hex.chars() {
                if h.is_ascii_alphabetic() {
                    let up = h.to_ascii_uppercase();
                    parts.push(Hir::class(Class::Unicode(ClassUnicode::new([
                        ClassUnicodeRange::new(h, h),
                        ClassUnicodeRange::new(up, up),
                    ]))));
                } else {
                    parts.push(Hir::literal(h.to_string().as_bytes()));
                }
            }
            Hir::concat(parts)
        }
        c => Hir::literal(c.to_string().as_bytes()),
    }
}

fn byte_set(bytes: &[u8]) -> Hir {
    use regex_syntax::hir::{ClassBytes, ClassBytesRange};
    Hir::class(Class::Bytes(ClassBytes::new(
        bytes.iter().map(|&b| ClassBytesRange::new(b, b)),
    )))
}

/// Characters that have no raw form inside a JSON string.
fn specials() -> ClassUnicode {
    ClassUnicode::new([
        ClassUnicodeRange::new('\0', '\u{1f}'),
        ClassUnicodeRange::new('"', '"'),
        ClassUnicodeRange::new('\\', '\\'),
    ])
}

/// The canonical encoding of one character from `class`.
pub(crate) fn encode_class(class: &ClassUnicode) -> Hir {
    let mut raw = class.clone();
    raw.difference(&specials());
    let mut alts = Vec::new();
    if !raw.ranges().is_empty() {
        alts.push(Hir::class(Class::Unicode(raw)));
    }
    let mut special = class.clone();
    special.intersect(&specials());
    let chars: Vec<char> = special.iter().flat_map(|r| r.start()..=r.end()).collect();
    // Short escapes (`\"`, `\\`, `\n`, ...) as one class after the backslash.
    let short: Vec<u8> = chars
        .iter()
        .filter_map(|&c| match c {
            '"' => Some(b'"'),
            '\\' => Some(b'\\'),
            '\u{8}' => Some(b'b'),
            '\u{c}' => Some(b'f'),
            '\n' => Some(b'n'),
            '\r' => Some(b'r'),
            '\t' => Some(b't'),
            _ => None,
        })
        .collect();
    if !short.is_empty() {
        alts.push(Hir::concat(vec![
            Hir::literal(&b"\\"[..]),
            byte_set(&short),
        ]));
    }
    // The other control characters as `\u00XX`, grouped by the high hex digit.
    for high in [0u32, 1] {
        let lows: Vec<u32> = chars
            .iter()
            .map(|&c| c as u32)
            .filter(|&c| c < 0x20 && c >> 4 == high && !matches!(c, 8 | 9 | 10 | 12 | 13))
            .map(|c| c & 15)
            .collect();
        if lows.is_empty() {
            continue;
        }
        let mut digits = Vec::new();
        for l in lows {
            let d = format!("{l:x}").into_bytes()[0];
            digits.push(d);
            if d.is_ascii_alphabetic() {
                digits.push(d.to_ascii_uppercase());
            }
        }
        alts.push(Hir::concat(vec![
            Hir::literal(format!("\\u00{high}").as_bytes()),
            byte_set(&digits),
        ]));
    }
    if alts.is_empty() {
        Hir::fail()
    } else {
        Hir::alternation(alts)
    }
}

/// Encodes a decoded-string regex (no look-arounds) as an IR expression over the
/// canonical JSON encoding; counted repetitions stay counters.
pub(crate) fn encode_hir(h: &Hir) -> Expr {
    encode_hir_with(h, &mut |_| None)
}

fn is_any_string(h: &Hir) -> bool {
    match h.kind() {
        HirKind::Repetition(r) if r.min == 0 && r.max.is_none() => match r.sub.kind() {
            HirKind::Class(Class::Unicode(c)) => {
                c.ranges().len() == 1
                    && c.ranges()[0].start() == '\0'
                    && c.ranges()[0].end() == char::MAX
            }
            _ => false,
        },
        _ => false,
    }
}

/// Whether `h` repeats something a bounded number of times, 8 or more (which
/// the automaton stage keeps as a counter instead of copies).
fn has_counted_repetition(h: &Hir) -> bool {
    match h.kind() {
        HirKind::Repetition(r) => r.max.is_some_and(|m| m >= 8) || has_counted_repetition(&r.sub),
        HirKind::Capture(c) => has_counted_repetition(&c.sub),
        HirKind::Concat(items) | HirKind::Alternation(items) => {
            items.iter().any(has_counted_repetition)
        }
        _ => false,
    }
}

/// Whether `h` has a `.*` (any string) somewhere.
fn contains_any_string(h: &Hir) -> bool {
    is_any_string(h)
        || match h.kind() {
            HirKind::Repetition(r) => contains_any_string(&r.sub),
            HirKind::Capture(c) => contains_any_string(&c.sub),
            HirKind::Concat(items) | HirKind::Alternation(items) => {
                items.iter().any(contains_any_string)
            }
            _ => false,
        }
}

/// [`encode_hir`], with `.*` (any string) replaced by the compiler's recursive rule.
pub(crate) fn encode_hir_rest(h: &Hir, rest: crate::grammar::RuleId) -> Expr {
    encode_hir_with(h, &mut |x| is_any_string(x).then_some(Expr::Ref(rest)))
}

fn encode_hir_with(h: &Hir, special: &mut dyn FnMut(&Hir) -> Option<Expr>) -> Expr {
    if let Some(e) = special(h) {
        return e;
    }
    let mut rec = |x: &Hir| encode_hir_with(x, special);
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => Expr::Empty,
        HirKind::Literal(lit) => {
            let s = String::from_utf8_lossy(&lit.0);
            Expr::Regex(Hir::concat(s.chars().map(encode_char).collect()))
        }
        HirKind::Class(Class::Unicode(c)) => Expr::Regex(encode_class(c)),
        HirKind::Class(Class::Bytes(b)) => {
            // Only ASCII byte classes reach here (the pattern translator emits Unicode ones).
            let ranges = b
                .iter()
                .filter(|r| r.start() < 0x80)
                .map(|r| ClassUnicodeRange::new(r.start() as char, r.end().min(0x7f) as char));
            Expr::Regex(encode_class(&ClassUnicode::new(ranges)))
        }
        HirKind::Repetition(r) => Expr::Repeat {
            expr: Box::new(rec(&r.sub)),
            min: r.min,
            max: r.max,
        },
        HirKind::Capture(c) => rec(&c.sub),
        HirKind::Concat(items) => seq(items.iter().map(&mut rec).collect()),
        HirKind::Alternation(items) => alt(items.iter().map(&mut rec).collect()),
    }
}

/// The canonical encoding of a decoded-string regex as one regex (`None` where the
/// encoding needs a rule: none does today).
pub(crate) fn encoded_hir(h: &Hir) -> Option<Hir> {
    expr_hir(&encode_hir(h))
}

/// The regex of an expression without rule references (`None` if it has one).
pub(crate) fn expr_hir(e: &Expr) -> Option<Hir> {
    Some(match e {
        Expr::Empty => Hir::empty(),
        Expr::Regex(h) => h.clone(),
        Expr::Ref(_)
        | Expr::Permutation(_)
        | Expr::Excluding(_)
        | Expr::Intersection(_)
        | Expr::Tokens(_)
        | Expr::Text(_)
        | Expr::Budget(_) => return None,
        Expr::Seq(items) => Hir::concat(items.iter().map(expr_hir).collect::<Option<_>>()?),
        Expr::Alt(items) => Hir::alternation(items.iter().map(expr_hir).collect::<Option<_>>()?),
        Expr::Repeat { expr, min, max } => Hir::repetition(regex_syntax::hir::Repetition {
            min: *min,
            max: *max,
            greedy: true,
            sub: Box::new(expr_hir(expr)?),
        }),
    })
}

/// A string value, canonical encoding (what serde_json writes).
pub(crate) fn literal_string(s: &str) -> Expr {
    Expr::literal(
        serde_json::to_string(s)
            .expect("strings serialize")
            .as_bytes(),
    )
}

/// Length in code points of the strings a decoded-string regex matches.
pub(crate) fn char_len(h: &Hir) -> (u64, Option<u64>) {
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => (0, Some(0)),
        HirKind::Literal(l) => {
            let n = String::from_utf8_lossy(&l.0).chars().count() as u64;
            (n, Some(n))
        }
        HirKind::Class(_) => (1, Some(1)),
        HirKind::Repetition(r) => {
            let (a, b) = char_len(&r.sub);
            let min = a.saturating_mul(r.min as u64);
            let max = match (b, r.max) {
                (Some(0), _) => Some(0),
                (Some(b), Some(m)) => Some(b.saturating_mul(m as u64)),
                _ => None,
            };
            (min, max)
        }
        HirKind::Capture(c) => char_len(&c.sub),
        HirKind::Concat(items) => {
            items
                .iter()
                .map(char_len)
                .fold((0, Some(0)), |(a, b), (c, d)| {
                    (
                        a.saturating_add(c),
                        b.zip(d).map(|(b, d)| b.saturating_add(d)),
                    )
                })
        }
        HirKind::Alternation(items) => {
            let lens: Vec<_> = items.iter().map(char_len).collect();
            let min = lens.iter().map(|l| l.0).min().unwrap_or(0);
            let max = lens.iter().try_fold(0u64, |m, l| l.1.map(|x| m.max(x)));
            (min, max)
        }
    }
}

fn fixed_len(h: &Hir) -> Option<u64> {
    match char_len(h) {
        (a, Some(b)) if a == b => Some(a),
        _ => None,
    }
}

/// Intersects a decoded-string regex with a length range when that is a matter of
/// adjusting one repetition: `X{a,b}` of fixed-length `X` between fixed-length
/// parts, per alternative. `None` when the shape is anything else.
pub(crate) fn restrict_length(h: &Hir, min: u64, max: Option<u64>) -> Option<Hir> {
    let (lo, hi) = char_len(h);
    if lo >= min && hi.is_some() && max.is_none_or(|m| hi.unwrap() <= m) {
        return Some(h.clone());
    }
    if max.is_some_and(|m| m < lo) || hi.is_some_and(|h| h < min) {
        return Some(Hir::fail());
    }
    match h.kind() {
        HirKind::Capture(c) => restrict_length(&c.sub, min, max),
        HirKind::Alternation(items) => {
            let parts: Option<Vec<Hir>> =
                items.iter().map(|i| restrict_length(i, min, max)).collect();
            Some(Hir::alternation(parts?))
        }
        HirKind::Repetition(_) => restrict_concat(std::slice::from_ref(h), min, max),
        HirKind::Concat(items) => restrict_concat(items, min, max),
        _ => None,
    }
}

fn restrict_concat(items: &[Hir], min: u64, max: Option<u64>) -> Option<Hir> {
    let variable: Vec<usize> = (0..items.len())
        .filter(|&i| fixed_len(&items[i]).is_none())
        .collect();
    let [v] = variable[..] else { return None };
    let fixed: u64 = items
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != v)
        .map(|(_, h)| fixed_len(h).unwrap())
        .sum();
    let HirKind::Repetition(r) = items[v].kind() else {
        // One variable part that is not a repetition: maybe a group around one.
        let inner = restrict_length(
            &items[v],
            min.saturating_sub(fixed),
            max.map(|m| m.saturating_sub(fixed)),
        )?;
        if max.is_some_and(|m| m < fixed) {
            return Some(Hir::fail());
        }
        let mut out = items.to_vec();
        out[v] = inner;
        return Some(Hir::concat(out));
    };
    let k = fixed_len(&r.sub)?;
    if k == 0 {
        return None;
    }
    if max.is_some_and(|m| m < fixed) {
        return Some(Hir::fail());
    }
    let need_min = min.saturating_sub(fixed).div_ceil(k);
    let need_max = max.map(|m| (m - fixed) / k);
    let new_min = need_min.max(r.min as u64);
    let new_max = match (need_max, r.max) {
        (Some(a), Some(b)) => Some(a.min(b as u64)),
        (Some(a), None) => Some(a),
        (None, b) => b.map(u64::from),
    };
    if new_max.is_some_and(|m| m < new_min) || new_min > u32::MAX as u64 {
        return Some(Hir::fail());
    }
    let mut out = items.to_vec();
    out[v] = Hir::repetition(regex_syntax::hir::Repetition {
        min: new_min as u32,
        max: new_max.map(|m| m.min(u32::MAX as u64) as u32),
        greedy: true,
        sub: r.sub.clone(),
    });
    Some(Hir::concat(out))
}

/// `h` (a string body in its encoding) between a JSON string's quotes.
pub(crate) fn quoted_hir(h: Hir) -> Hir {
    Hir::concat(vec![Hir::literal(*b"\""), h, Hir::literal(*b"\"")])
}

/// A string whose body is `both`, as one leaf from quote to quote: every
/// operand quoted (the product is the quoted product, since no body holds a
/// bare quote). Quoting the leaf from outside instead would make every state
/// between the quotes a match, so a token leaving the body's class there
/// would end a lexeme for the parser to refuse: the token tables would
/// record thousands of such boundaries where the quoted leaf has a few
/// hundred tokens that leave by its closing quote.
pub(crate) fn quoted_intersection(both: Intersection) -> Expr {
    let quote_all = |hirs: Vec<Hir>| hirs.into_iter().map(quoted_hir).collect();
    Expr::Intersection(Box::new(Intersection {
        regexes: quote_all(both.regexes),
        negated: quote_all(both.negated),
    }))
}

/// Every JSON string body in the canonical encoding (the universe
/// [`complement_of_set`] and property-name languages are encoded in).
pub(crate) fn canonical_body() -> Hir {
    Hir::repetition(regex_syntax::hir::Repetition {
        min: 0,
        max: None,
        greedy: true,
        sub: Box::new(encode_class(&ClassUnicode::new([ClassUnicodeRange::new(
            '\0',
            char::MAX,
        )]))),
    })
}

/// [`canonical_body`] between quotes.
pub(crate) fn canonical_string() -> Hir {
    Hir::concat(vec![
        Hir::literal(&b"\""[..]),
        canonical_body(),
        Hir::literal(&b"\""[..]),
    ])
}

/// The encodings of `s`, quotes included, that [`canonical_string`] matches: the
/// canonical one, with a `\u00XX` escape's hex letters in either case. `None`
/// when there are more than `limit`.
pub(crate) fn canonical_encodings(s: &str, limit: usize) -> Option<Vec<Vec<u8>>> {
    let canonical = serde_json::to_string(s)
        .expect("strings serialize")
        .into_bytes();
    let mut encodings = vec![Vec::with_capacity(canonical.len())];
    let (mut after_backslash, mut hex_left) = (false, 0);
    for &b in &canonical {
        if after_backslash {
            after_backslash = false;
            if b == b'u' {
                hex_left = 4;
            }
        } else if b == b'\\' {
            after_backslash = true;
        } else if hex_left > 0 {
            hex_left -= 1;
            if b.is_ascii_alphabetic() {
                if encodings.len() * 2 > limit {
                    return None;
                }
                let upper: Vec<Vec<u8>> = encodings
                    .iter()
                    .map(|e| [&e[..], &[b.to_ascii_uppercase()]].concat())
                    .collect();
                encodings.iter_mut().for_each(|e| e.push(b));
                encodings.extend(upper);
                continue;
            }
        }
        encodings.iter_mut().for_each(|e| e.push(b));
    }
    Some(encodings)
}

/// A decoded-string regex that matches every string except those of `set`.
pub(crate) fn complement_of_set(set: &[String]) -> Hir {
    let chars: Vec<Vec<char>> = set.iter().map(|s| s.chars().collect()).collect();
    complement_from(&chars.iter().map(|c| &c[..]).collect::<Vec<_>>())
}

fn any_class() -> ClassUnicode {
    ClassUnicode::new([ClassUnicodeRange::new('\0', char::MAX)])
}

fn any_unicode() -> Hir {
    Hir::class(Class::Unicode(any_class()))
}

fn complement_from(names: &[&[char]]) -> Hir {
    // A string is not a name iff it is a proper prefix of names that is no name
    // itself (`stops`), or it leaves the names' trie: a prefix of names, then a
    // character that continues none of them (`exits`), then anything. Written so
    // that every exit shares one `anything` tail (and, for plain ASCII names, one
    // class of the other characters after any prefix): its automaton is the trie
    // plus a few states, instead of a copy of the tail per trie node, which the
    // DFA builder would have to build and then merge away.
    // Characters no name uses at all continue no name anywhere: when the names
    // are plain ASCII (no escapes in their encoding), the non-ASCII characters and
    // the ones JSON escapes are one class after any trie prefix.
    let plain = |&c: &char| c.is_ascii() && c >= ' ' && c != '"' && c != '\\';
    let exits = if names.iter().all(|n| n.iter().all(plain)) {
        let mut common = specials();
        common.union(&ClassUnicode::new([ClassUnicodeRange::new(
            '\u{80}',
            char::MAX,
        )]));
        let mut alts = vec![Hir::concat(vec![
            trie_prefixes(names),
            Hir::class(Class::Unicode(common)),
        ])];
        alts.extend(trie_exits(names, true));
        Some(Hir::alternation(alts))
    } else {
        trie_exits(names, false)
    };
    let mut alts: Vec<Hir> = trie_stops(names).into_iter().collect();
    if let Some(exits) = exits {
        alts.push(Hir::concat(vec![
            exits,
            Hir::repetition(regex_syntax::hir::Repetition {
                min: 0,
                max: None,
                greedy: true,
                sub: Box::new(any_unicode()),
            }),
        ]));
    }
    Hir::alternation(alts)
}

/// The trie's first characters, and the suffixes below each.
fn trie_children<'s>(suffixes: &[&'s [char]]) -> Vec<(char, Vec<&'s [char]>)> {
    let mut firsts: Vec<char> = suffixes.iter().filter_map(|s| s.first().copied()).collect();
    firsts.sort_unstable();
    firsts.dedup();
    firsts
        .into_iter()
        .map(|c| {
            let rest = suffixes
                .iter()
                .filter(|s| s.first() == Some(&c))
                .map(|s| &s[1..])
                .collect();
            (c, rest)
        })
        .collect()
}

fn literal_char(c: char) -> Hir {
    Hir::literal(c.to_string().as_bytes())
}

/// Every prefix of the suffixes (the empty one included).
fn trie_prefixes(suffixes: &[&[char]]) -> Hir {
    let mut alts = vec![Hir::empty()];
    for (c, rest) in trie_children(suffixes) {
        alts.push(Hir::concat(vec![literal_char(c), trie_prefixes(&rest)]));
    }
    Hir::alternation(alts)
}

/// Every prefix of the suffixes that is not one of them (`None`: there is none; a
/// branch that can never match is left out rather than written as an empty
/// class, which would make `regex-syntax` report the whole alternation as
/// unmatchable).
fn trie_stops(suffixes: &[&[char]]) -> Option<Hir> {
    let mut alts = Vec::new();
    if !suffixes.iter().any(|s| s.is_empty()) {
        alts.push(Hir::empty());
    }
    for (c, rest) in trie_children(suffixes) {
        if let Some(below) = trie_stops(&rest) {
            alts.push(Hir::concat(vec![literal_char(c), below]));
        }
    }
    (!alts.is_empty()).then(|| Hir::alternation(alts))
}

/// A prefix of the suffixes, then one character that continues none of them
/// (only plain ASCII ones, no JSON escapes, when `plain_only`); `None` when there
/// is none.
fn trie_exits(suffixes: &[&[char]], plain_only: bool) -> Option<Hir> {
    let children = trie_children(suffixes);
    let mut others = ClassUnicode::new([ClassUnicodeRange::new('\0', char::MAX)]);
    if plain_only {
        others = ClassUnicode::new([ClassUnicodeRange::new('\0', '\u{7f}')]);
        others.difference(&specials());
    }
    others.difference(&ClassUnicode::new(
        children.iter().map(|&(c, _)| ClassUnicodeRange::new(c, c)),
    ));
    let mut alts = Vec::new();
    if !others.ranges().is_empty() {
        alts.push(Hir::class(Class::Unicode(others)));
    }
    for (c, rest) in children {
        if let Some(below) = trie_exits(&rest, plain_only) {
            alts.push(Hir::concat(vec![literal_char(c), below]));
        }
    }
    (!alts.is_empty()).then(|| Hir::alternation(alts))
}

/// What a string's keywords leave of its decoded text, before any encoding: the
/// JSON encoding ([`SchemaCompiler::emit_string`]) and the raw text of an XML
/// parameter (`xml`) both start here.
pub(crate) enum StringBody {
    /// Any text of `min..=max` code points.
    Chars { min: u64, max: Option<u64> },
    /// The text one regex matches (lengths already intersected in).
    Regex(Hir),
    /// The text every regex of `regexes` matches and none of `negated`, of
    /// `min..=max` code points: two patterns, a pattern whose shape
    /// [`restrict_length`] cannot cut, or a pattern the string must not match
    /// ([`Expr::Intersection`]).
    Both {
        regexes: Vec<Hir>,
        negated: Vec<Hir>,
        min: u64,
        max: Option<u64>,
    },
}

impl StringBody {
    /// A [`StringBody::Both`] as one IR leaf, each regex given in the encoding
    /// `encode` writes and the length bound as `one_char{min,max}`. With negated
    /// regexes, `one_char` must be in that same encoding: the complement is taken
    /// within the strings it spells, and a string spelled two ways would be
    /// excluded in one spelling only.
    pub(crate) fn intersection(
        regexes: &[Hir],
        negated: &[Hir],
        (min, max): (u64, Option<u64>),
        one_char: Hir,
        encode: impl Fn(&Hir) -> Option<Hir>,
    ) -> Expr {
        let Some(mut operands) = regexes.iter().map(&encode).collect::<Option<Vec<_>>>() else {
            return nothing();
        };
        let Some(negated) = negated.iter().map(&encode).collect::<Option<Vec<_>>>() else {
            return nothing();
        };
        if min > 0 || max.is_some() || operands.is_empty() {
            let count = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
            operands.push(Hir::repetition(regex_syntax::hir::Repetition {
                min: count(min),
                max: max.map(count),
                greedy: true,
                sub: Box::new(one_char),
            }));
        }
        Expr::Intersection(Box::new(Intersection {
            regexes: operands,
            negated,
        }))
    }
}

impl<'a> SchemaCompiler<'a> {
    pub(crate) fn emit_string(&mut self, node: &Node<'a>) -> Result<Expr> {
        match self.value_style {
            Some(style @ super::xml::ParameterStyle::Gemma) => {
                let raw = self.raw_text(node, style)?;
                return Ok(seq(vec![Expr::literal(style.end().as_bytes()), raw]));
            }
            Some(super::xml::ParameterStyle::MiniMaxM3) => return self.minimax_m3_text(node),
            _ => {}
        }
        if regex_format_alone(node) {
            let body = self.regex_format_rule()?;
            return Ok(seq(vec![
                Expr::literal(b"\""),
                Expr::Ref(body),
                Expr::literal(b"\""),
            ]));
        }
        let body = match self.string_body(node)? {
            None => return Ok(nothing()),
            Some(StringBody::Chars { min, max }) => Expr::Repeat {
                expr: Box::new(Expr::Regex(any_char(self.cache))),
                min: min as u32,
                max: max.map(|m| m as u32),
            },
            Some(StringBody::Both {
                regexes,
                negated,
                min,
                max,
            }) => {
                // A rule of its own, named where the schema asks for it: an automaton
                // too large to build is reported under that name.
                let s = &node.str;
                let at = (s.patterns.first().map(|(_, ptr)| ptr))
                    .or(s.formats.first().map(|(_, ptr)| ptr))
                    .or(s.not_patterns.first().map(|(_, ptr)| ptr))
                    .or(s.not_formats.first().map(|(_, ptr)| ptr))
                    .or(s.length_ptr.as_ref())
                    .map_or("/", String::as_str);
                let leaf = match StringBody::intersection(
                    &regexes,
                    &negated,
                    (min, max),
                    encode_class(&any_class()),
                    encoded_hir,
                ) {
                    Expr::Intersection(both) => quoted_intersection(*both),
                    none => return Ok(none),
                };
                let rule = self.new_rule(format!("{at} with its length bounds"), leaf)?;
                return Ok(Expr::Ref(rule));
            }
            Some(StringBody::Regex(h)) => {
                if contains_any_string(&h) && !self.cache.search_automaton_is_small(&h) {
                    let rest = self.any_rest_rule()?;
                    encode_hir_rest(&h, rest)
                } else {
                    self.encoded_body(&h, node)
                }
            }
        };
        Ok(seq(vec![Expr::literal(b"\""), body, Expr::literal(b"\"")]))
    }

    /// `format: "regex"` as a string body: [`RegexSyntax`]'s grammar, its
    /// nesting in rules (any depth) and each flat run one terminal. As one
    /// regex (groups two deep) its automaton took 0.7-1 s to build per schema.
    fn regex_format_rule(&mut self) -> Result<RuleId> {
        if let Some(id) = self.regex_format {
            return Ok(id);
        }
        let syntax = RegexSyntax::new();
        let cache = self.cache;
        // Each piece in the canonical encoding, one leaf.
        let piece = |pattern: &str| {
            let tree = encode_hir(&cache.re(pattern));
            expr_hir(&tree).map_or(tree, Expr::Regex)
        };
        let regex = self.new_rule("format \"regex\"".into(), Expr::Empty)?;
        let flat = self.new_rule(
            "format \"regex\": flat terms".into(),
            piece(&syntax.flat_run()),
        )?;
        let nested = alt(vec![
            seq(vec![
                piece(&syntax.group_open),
                Expr::Ref(regex),
                piece(&syntax.group_close),
            ]),
            seq(vec![
                piece(&syntax.lookaround_open),
                Expr::Ref(regex),
                Expr::literal(b")"),
            ]),
        ]);
        let branch = self.new_rule(
            "format \"regex\": branch".into(),
            seq(vec![
                Expr::Ref(flat),
                Expr::Repeat {
                    expr: Box::new(seq(vec![nested, Expr::Ref(flat)])),
                    min: 0,
                    max: None,
                },
            ]),
        )?;
        self.rules[regex.index()].expr = seq(vec![
            Expr::Ref(branch),
            Expr::Repeat {
                expr: Box::new(seq(vec![Expr::literal(b"|"), Expr::Ref(branch)])),
                min: 0,
                max: None,
            },
        ]);
        self.regex_format = Some(regex);
        Ok(regex)
    }

    /// A string body in its encoding: the expression tree (whose counted
    /// repetitions stay counters), or one regex leaf for a `format` alone. The
    /// automaton stage fuses a tree only up to a size estimate, which overrates
    /// the formats' large alternations of classes (`format: "regex"`): split into
    /// one terminal per character, every token of the string crossed a terminal
    /// boundary (70 ms masks). A format's regex is stencil's own, known to
    /// determinize, so it is written as the one leaf it is.
    fn encoded_body(&self, h: &Hir, node: &Node<'a>) -> Expr {
        let tree = encode_hir(h);
        let format_alone = node.str.patterns.is_empty() && node.str.formats.len() == 1;
        if format_alone && !has_counted_repetition(h) {
            if let Some(leaf) = expr_hir(&tree) {
                return Expr::Regex(leaf);
            }
        }
        tree
    }

    /// The decoded text a string node allows (`None`: no string at all).
    pub(crate) fn string_body(&mut self, node: &Node<'a>) -> Result<Option<StringBody>> {
        let s = &node.str;
        let (min, max) = (s.min, s.max);
        if max.is_some_and(|m| m < min) {
            return Ok(None);
        }
        let length_ptr = s.length_ptr.clone().unwrap_or_default();
        let too_big = |n: u64| n > self.opts.limits.max_repetition;
        if too_big(min) || max.is_some_and(too_big) {
            return Err(self.limit(
                &length_ptr,
                format!(
                    "string length bound above {}",
                    self.opts.limits.max_repetition
                ),
            ));
        }
        let mut regexes: Vec<Hir> = Vec::new();
        for (p, ptr) in &s.patterns {
            match self.pattern_hir(p, ptr) {
                Ok(h) => regexes.push(h),
                Err(e) => {
                    if self.opts.lenient {
                        self.unsupported("pattern", ptr, e.to_string())?;
                    } else {
                        return Err(e);
                    }
                }
            }
        }
        let patterns = regexes.len();
        for (f, ptr) in &s.formats {
            // Beside a pattern whose every string is a regex it accepts anyway,
            // `format: "regex"` adds nothing but a large automaton to intersect.
            if f == "regex" && super::format::regex_format_holds(&regexes[..patterns], self.cache) {
                continue;
            }
            match super::format::format_hir(f, self.cache) {
                Some(h) => regexes.push(h),
                None => {
                    self.unsupported("format", ptr, format!("format {f:?} is not supported"))?
                }
            }
        }
        if !node.excluded.is_empty() {
            let set: Vec<String> = node
                .excluded
                .iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect();
            if !set.is_empty() {
                regexes.push(complement_of_set(&set));
            }
        }
        let mut negated = Vec::new();
        for (p, ptr) in &s.not_patterns {
            negated.push(self.pattern_hir(p, ptr)?);
        }
        for (f, ptr) in &s.not_formats {
            match super::format::format_hir(f, self.cache) {
                Some(h) => negated.push(h),
                None => {
                    self.unsupported("format", ptr, format!("format {f:?} is not supported"))?
                }
            }
        }
        if !negated.is_empty() {
            return Ok(Some(StringBody::Both {
                regexes,
                negated,
                min,
                max,
            }));
        }
        let unbounded = min == 0 && max.is_none();
        Ok(Some(match &regexes[..] {
            [] => StringBody::Chars { min, max },
            [h] if unbounded => StringBody::Regex(h.clone()),
            [h] => match restrict_length(h, min, max) {
                Some(h) => StringBody::Regex(h),
                None => StringBody::Both {
                    regexes: vec![h.clone()],
                    negated,
                    min,
                    max,
                },
            },
            _ => StringBody::Both {
                regexes,
                negated,
                min,
                max,
            },
        }))
    }
}

/// Whether the string node is `format: "regex"` and nothing else (no pattern,
/// no length bound): then the format's grammar stands for it.
fn regex_format_alone(node: &Node<'_>) -> bool {
    let s = &node.str;
    !s.formats.is_empty()
        && s.formats.iter().all(|(f, _)| f == "regex")
        && s.patterns.is_empty()
        && s.not_patterns.is_empty()
        && s.not_formats.is_empty()
        && s.min == 0
        && s.max.is_none()
}
