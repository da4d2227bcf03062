//! `format`: the standard formats as decoded-string regexes.
//!
//! Each regex accepts a subset of the format's valid strings, never more: where the
//! full rule is not regular or not worth it, the regex is stricter (documented per
//! format below), so enforcing it never lets an invalid string through. Formats
//! outside the JSON Schema specification are annotations (ignored, as the spec
//! says); spec formats without a regex here are reported as unsupported.

use regex_syntax::hir::Hir;

use super::PatternCache;
use crate::grammar::dfa::AnchoredDfa;

/// Formats defined by the JSON Schema specification (draft 4 to 2020-12).
const SPEC_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Whether `format` is one the specification defines (others are annotations).
pub(crate) fn is_known(format: &str) -> bool {
    SPEC_FORMATS.contains(&format)
}

const DATE: &str = r"(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29)";

/// RFC 3339 full-time. Leap seconds only as `23:59:60` in UTC (stricter than the
/// RFC, which allows them at any offset that maps to 23:59:60Z).
const TIME: &str = r"(?:(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?(?:[zZ]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])|23:59:60(?:\.[0-9]+)?(?:[zZ]|[+-]00:00))";

const IPV4: &str = r"(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";

const H16: &str = "[0-9a-fA-F]{1,4}";

/// A hostname label with no `--` in positions 3-4 (so no punycode `xn--` labels,
/// which would need decoding to validate), of at most `max` characters (`max >= 5`).
fn label(max: u32) -> String {
    let a = "[A-Za-z0-9]";
    let ah = "[A-Za-z0-9-]";
    format!(
        "(?:{a}(?:{ah}?{a})?|{a}{ah}{{2}}{a}|{a}{ah}(?:{a}{ah}|-{a}){ah}{{0,{}}}{a})",
        max - 5
    )
}

/// RFC 1123 hostname. Total length must stay within 253: the first label may have
/// 63 characters, at most 7 more labels of at most 23 (stricter than the RFC).
fn hostname() -> String {
    format!("{}(?:\\.{}){{0,7}}", label(63), label(23))
}

fn ipv6() -> String {
    let h = H16;
    let forms = [
        format!("(?:{h}:){{7}}{h}"),
        format!("(?:{h}:){{1,7}}:"),
        format!("(?:{h}:){{1,6}}:{h}"),
        format!("(?:{h}:){{1,5}}(?::{h}){{1,2}}"),
        format!("(?:{h}:){{1,4}}(?::{h}){{1,3}}"),
        format!("(?:{h}:){{1,3}}(?::{h}){{1,4}}"),
        format!("(?:{h}:){{1,2}}(?::{h}){{1,5}}"),
        format!("{h}:(?::{h}){{1,6}}"),
        format!(":(?:(?::{h}){{1,7}}|:)"),
        format!("(?:{h}:){{6}}{IPV4}"),
        format!("::(?:{h}:){{0,5}}{IPV4}"),
        format!("(?:{h}:){{1,5}}:{IPV4}"),
    ];
    format!("(?:{})", forms.join("|"))
}

const UNRESERVED: &str = r"A-Za-z0-9\-._~";
const SUB_DELIMS: &str = r"!$&'()*+,;=";

fn uri_parts() -> (String, String, String, String) {
    let pct = "%[0-9A-Fa-f]{2}";
    let pchar = format!("(?:[{UNRESERVED}{SUB_DELIMS}:@]|{pct})");
    let pchar_nc = format!("(?:[{UNRESERVED}{SUB_DELIMS}@]|{pct})");
    let userinfo = format!("(?:[{UNRESERVED}{SUB_DELIMS}:]|{pct})*");
    let host = format!("(?:\\[{}\\]|(?:[{UNRESERVED}{SUB_DELIMS}]|{pct})*)", ipv6());
    let authority = format!("(?:{userinfo}@)?{host}(?::[0-9]*)?");
    let abempty = format!("(?:/{pchar}*)*");
    let absolute = format!("/(?:{pchar}+(?:/{pchar}*)*)?");
    let rootless = format!("{pchar}+(?:/{pchar}*)*");
    let noscheme = format!("{pchar_nc}+(?:/{pchar}*)*");
    let query = format!("(?:{pchar}|[/?])*");
    let hier = format!("(?://{authority}{abempty}|{absolute}|{rootless}|)");
    let relative = format!("(?://{authority}{abempty}|{absolute}|{noscheme}|)");
    let tail = format!("(?:\\?{query})?(?:#{query})?");
    let uri = format!("[A-Za-z][A-Za-z0-9+.\\-]*:{hier}{tail}");
    let rel = format!("{relative}{tail}");
    (uri, rel, pchar, query)
}

/// The decoded-string regex of a supported format.
pub(crate) fn format_hir(format: &str, cache: &PatternCache) -> Option<Hir> {
    let pattern = match format {
        "date" => DATE.to_string(),
        "time" => TIME.to_string(),
        "date-time" => format!("{DATE}[tT]{TIME}"),
        "duration" => {
            let t = r"T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)";
            format!(
                r"P(?:(?:[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)(?:{t})?|{t}|[0-9]+W)"
            )
        }
        // Dot-atom local part at a hostname (no quoted local parts, no IP literals).
        // ASCII addresses are valid internationalized addresses (a subset).
        "email" | "idn-email" => {
            let atext = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~\-]+";
            format!(r"{atext}(?:\.{atext})*@{}", hostname())
        }
        // ASCII LDH hostnames are valid IDN hostnames (a subset: no U-labels).
        "hostname" | "idn-hostname" => hostname(),
        "ipv4" => IPV4.to_string(),
        "ipv6" => ipv6(),
        "uuid" => "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
            .to_string(),
        // ASCII URIs are IRIs (a subset: no non-ASCII characters).
        "uri" | "iri" => uri_parts().0,
        "uri-reference" | "iri-reference" => {
            let (uri, rel, _, _) = uri_parts();
            format!("(?:{uri}|{rel})")
        }
        // RFC 6570 levels 1-4: literals and expressions `{op? var(:n|*)?, ...}`.
        "uri-template" => {
            let var = r"(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})(?:\.?(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2}))*(?::[1-9][0-9]{0,3}|\*)?";
            let lit = r#"(?:[^\x00-\x20"'<>\\^`{|}\x7F]|%[0-9A-Fa-f]{2})"#;
            format!(r"(?:{lit}|\{{[+#./;?&=,!@|]?{var}(?:,{var})*\}})*")
        }
        "regex" => ecma_regex(REGEX_GROUP_DEPTH),
        "json-pointer" => "(?:/(?:[^~/]|~[01])*)*".to_string(),
        "relative-json-pointer" => "(?:0|[1-9][0-9]*)(?:#|(?:/(?:[^~/]|~[01])*)*)".to_string(),
        _ => return None,
    };
    Some(cache.re(&pattern))
}

/// Deepest group nesting of the regular `format: "regex"` (deeper ones are
/// rejected): where the format must be one regex (beside a `pattern` or length
/// bounds, or as raw text); alone, it is [`RegexSyntax`]'s grammar, any depth.
const REGEX_GROUP_DEPTH: u32 = 2;

/// The pieces of the ECMA-262 regular expressions valid with the `u` flag (the
/// strict reading; they are valid without it too) that `format: "regex"`
/// accepts. Rejecting a valid regex is an over-constraint, accepting an invalid
/// one an under-constraint, so everything not surely valid is left out: named
/// groups and backreferences, `\p{..}`, `\0`, ranges whose ends are not two
/// printable ASCII characters in order, a `-` inside a class other than first
/// or last, `{n,m}` quantifiers whose order takes more than a digit count to
/// see.
///
/// Groups nest, so the language is context-free: a regex is branches split by
/// `|`, each a run of flat terms (no group) with groups between them, a group
/// `(` or `(?:`, a regex, `)` and an optional quantifier, a lookaround `(?=`,
/// `(?!`, `(?<=` or `(?<!`, a regex and `)`.
pub(crate) struct RegexSyntax {
    /// An assertion or a quantified atom other than a group.
    pub(crate) flat_term: String,
    /// What opens a group: `(` or `(?:`.
    pub(crate) group_open: String,
    /// What closes a group: `)` and an optional quantifier.
    pub(crate) group_close: String,
    /// What opens a lookaround (which takes no quantifier).
    pub(crate) lookaround_open: String,
}

impl RegexSyntax {
    pub(crate) fn new() -> RegexSyntax {
        let (flat_term, quantifier) = ecma_terms();
        RegexSyntax {
            flat_term,
            group_open: r"\((?:\?:)?".to_string(),
            group_close: format!(r"\){quantifier}?"),
            lookaround_open: r"\(\?<?[=!]".to_string(),
        }
    }

    /// Any number of flat terms.
    pub(crate) fn flat_run(&self) -> String {
        format!("(?:{})*", self.flat_term)
    }
}

/// A term of a regex that holds no group (an assertion, or an atom with an
/// optional quantifier), and the quantifier.
fn ecma_terms() -> (String, String) {
    const SYNTAX: &str = r"\^$\\.*+?()\[\]{}|";
    let hex = "[0-9A-Fa-f]";
    let char_escape = format!(
        r"\\(?:[fnrtv]|c[A-Za-z]|x{hex}{{2}}|u{hex}{{4}}|u\{{0*(?:{hex}{{1,5}}|10{hex}{{4}})\}}|[{SYNTAX}/])"
    );
    let atom_escape = format!(r"(?:{char_escape}|\\[dDwWsS])");
    // Ranges x-y, x <= y, both printable ASCII other than `\`, `]` and `-`.
    let plain = |c: char| (' '..='~').contains(&c) && !matches!(c, '\\' | ']' | '-');
    let ranges: Vec<String> = (' '..='~')
        .filter(|&x| plain(x))
        .map(|x| {
            let ends: String = (x..='~')
                .filter(|&y| plain(y))
                .map(|y| regex_syntax::escape(&y.to_string()))
                .collect();
            format!("{}-[{ends}]", regex_syntax::escape(&x.to_string()))
        })
        .collect();
    let class_atom = format!(
        r"(?:{}|[^\\\]\-]|{char_escape}|\\[dDwWsSb\-])",
        ranges.join("|")
    );
    let class = format!(r"\[\^?-?{class_atom}*-?\]");
    // {n}, {n,}, and {n,m} with n < m by digit count, or both single digits in order.
    let ordered_pairs: Vec<String> = (0..=9).map(|n| format!("{n},[{n}-9]")).collect();
    let quantifier = format!(
        r"(?:(?:[*+?]|\{{[0-9]+,?\}}|\{{(?:{}|[0-9],[1-9][0-9]{{1,4}}|[1-9][0-9],[1-9][0-9]{{2,4}})\}})\??)",
        ordered_pairs.join("|")
    );
    let assertion = r"(?:\^|\$|\\[bB])";
    let atom = format!(r"(?:[^{SYNTAX}]|\.|{atom_escape}|{class})");
    (format!("{assertion}|{atom}{quantifier}?"), quantifier)
}

/// Most heap bytes, and states, of the DFA that [`regex_format_holds`] walks.
const HOLDS_DFA_BYTES: usize = 4 << 20;
const HOLDS_MAX_STATES: usize = 20_000;

/// Whether every string some pattern of `patterns` (decoded-string regexes)
/// matches is a regex `format: "regex"` accepts, so that the format adds
/// nothing beside them: one DFA over the pattern and the format's flat form
/// (no groups, small), walked for a string the first matches and the second
/// does not. `false` when none is proven so (or the DFA is too large).
pub(crate) fn regex_format_holds(patterns: &[Hir], cache: &PatternCache) -> bool {
    let flat = cache.re(&ecma_regex(0));
    patterns.iter().any(|pattern| {
        let both = [pattern.clone(), flat.clone()];
        let Ok(dfa) = AnchoredDfa::build(&both, HOLDS_DFA_BYTES, HOLDS_DFA_BYTES) else {
            return false;
        };
        let Ok((states, _)) = dfa.reachable(HOLDS_MAX_STATES) else {
            return false;
        };
        states.iter().all(|&state| {
            let matched: Vec<usize> = dfa.patterns_matched(state).collect();
            !matched.contains(&0) || matched.contains(&1)
        })
    })
}

/// The regular subset of [`RegexSyntax`]'s language with groups nested at most
/// `depth` deep, as one regex.
fn ecma_regex(depth: u32) -> String {
    let RegexSyntax {
        flat_term: flat,
        group_open: open,
        group_close: close,
        lookaround_open: look,
    } = RegexSyntax::new();
    let mut regex = format!(r"(?:(?:{flat})*(?:\|(?:{flat})*)*)");
    for _ in 0..depth {
        let term = format!(r"(?:{flat}|{look}{regex}\)|{open}{regex}{close})");
        regex = format!(r"(?:{term}*(?:\|{term}*)*)");
    }
    regex
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_of_regexes_makes_the_regex_format_hold() {
        let cache = PatternCache::default();
        let holds = |p: &str| regex_format_holds(&[cache.re(p)], &cache);
        assert!(holds("[0-9]+(?:a|b)"));
        assert!(holds(r"(?:-?0*\d+\.)?(?:2[0-3]|1[0-9]|0?[0-9]):[0-5][0-9]"));
        assert!(!holds("a.*"), "`a(` is no regex");
        assert!(!holds("[a-z]*[*]"), "`*` alone quantifies nothing");
        assert!(!regex_format_holds(&[], &cache));
    }

    fn m(f: &str, s: &str) -> bool {
        super::super::pattern::build_matcher(&format_hir(f, &PatternCache::default()).unwrap())
            .unwrap()
            .is_match(s.as_bytes())
    }

    #[test]
    fn formats() {
        assert!(m("date", "2020-02-29") && !m("date", "2021-02-29") && !m("date", "2020-04-31"));
        assert!(
            m("date-time", "1963-06-19T08:30:06.283185Z")
                && !m("date-time", "1963-06-19 08:30:06Z")
        );
        assert!(m("time", "08:30:06+01:00") && !m("time", "08:30:06"));
        assert!(m("duration", "P4DT12H30M5S") && !m("duration", "PT") && !m("duration", "P1W2D"));
        assert!(m("email", "joe.bloggs@example.com") && !m("email", "joe..bloggs@example.com"));
        assert!(
            m("hostname", "www.example-site.com")
                && !m("hostname", "-a.com")
                && !m("hostname", "xn--X")
        );
        assert!(m("ipv4", "192.168.0.1") && !m("ipv4", "192.168.0.01") && !m("ipv4", "256.0.0.1"));
        assert!(
            m("ipv6", "::1")
                && m("ipv6", "1:2:3:4:5:6:7:8")
                && m("ipv6", "::ffff:1.2.3.4")
                && !m("ipv6", "1:2:3")
        );
        assert!(
            m("uuid", "2eb8aa08-aa98-11ea-b4aa-73b441d16380")
                && !m("uuid", "2eb8aa08-aa98-11ea-b4aa-73b441d1638")
        );
        assert!(
            m("uri", "http://foo.bar/?baz=qux#quux")
                && !m("uri", "//foo.bar")
                && !m("uri", "http://x y")
        );
        let regex = super::super::pattern::build_matcher(
            &format_hir("regex", &PatternCache::default()).unwrap(),
        )
        .unwrap();
        let m_regex = |s: &str| regex.is_match(s.as_bytes());
        for valid in [
            "",
            "abc",
            r"^[a-zA-Z0-9_]{3,16}$",
            r"^[a-zA-Z0-9]+$",
            r#"^\s*(it|describe)\(\s*['"]([^'"]+)['"]"#,
            r"(?:a|b)*?c{2,}",
            r"[\d\-.]+(?=x)|\u{1F600}",
            r"(a(b)c)",
            r"[^]",
            "[-a-]",
        ] {
            assert!(m_regex(valid), "valid regex {valid:?} rejected");
        }
        for invalid in [
            "^(abc]", "*a", "a{2,1}", "[z-a]", r"\", "a)", "(?=a)*", "^*", r"\k<x>", "a{", "]",
            r"[\d-z]", "a???", r"\u12", r"\-", r"\c1",
        ] {
            assert!(!m_regex(invalid), "invalid regex {invalid:?} accepted");
        }
        assert!(
            m("uri-reference", "//foo.bar/?baz=qux#quux")
                && m("uri-reference", "#f")
                && !m("uri-reference", "\\\\WINDOWS")
        );
    }
}
