//! Terminal expressions: what an upper-case terminal (or the body of a `lazy`
//! rule, or an `%ignore`) denotes, before it becomes IR.
//!
//! A terminal is regular, so its expression is a regex tree ([`Rx`]) whose leaves
//! are `regex-syntax` [`Hir`]s: string literals (with the `i` flag), `"a".."z"`
//! ranges, `/regex/flags` in Rust syntax, and `%regex {"substring_...": ...}`.
//! Beside regex's own operators it has llguidance's `&` (intersection) and `~`
//! (complement), which no regex has and which the lowering builds as automata
//! ([`super::dfa`]). Named terminals stay references ([`Rx::Term`]) so each is
//! lowered once and shared.
//!
//! The leaves are built here, with their errors as messages and offsets the
//! caller turns into line:column.

use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir};

use crate::frontend::Limits;

/// Index of a named terminal in the lowering's table.
pub(crate) type TermId = usize;

/// A regular expression over terminals.
#[derive(Debug, Clone)]
pub(crate) enum Rx {
    Leaf(Hir),
    Term(TermId),
    Seq(Vec<Rx>),
    Alt(Vec<Rx>),
    Repeat {
        rx: Box<Rx>,
        min: u32,
        max: Option<u32>,
    },
    /// Strings every member matches.
    And(Vec<Rx>),
    /// Byte strings the member does not match (invalid UTF-8 included, as in
    /// llguidance).
    Not(Box<Rx>),
    /// `chunks[n..m].concat()` for any `n <= m`.
    Substring(Vec<String>),
}

impl Rx {
    /// Whether building this needs an automaton (`&` or `~` somewhere).
    pub fn needs_automaton(&self) -> bool {
        match self {
            Rx::Leaf(_) | Rx::Term(_) | Rx::Substring(_) => false,
            Rx::And(_) | Rx::Not(_) => true,
            Rx::Seq(items) | Rx::Alt(items) => items.iter().any(Rx::needs_automaton),
            Rx::Repeat { rx, .. } => rx.needs_automaton(),
        }
    }

    /// Calls `f` on every named terminal referenced directly.
    pub fn for_each_term(&self, f: &mut impl FnMut(TermId)) {
        match self {
            Rx::Leaf(_) | Rx::Substring(_) => {}
            Rx::Term(t) => f(*t),
            Rx::Seq(items) | Rx::Alt(items) | Rx::And(items) => {
                items.iter().for_each(|i| i.for_each_term(f))
            }
            Rx::Repeat { rx, .. } | Rx::Not(rx) => rx.for_each_term(f),
        }
    }
}

/// A string literal; `insensitive` for the `i` flag (Unicode simple case folding,
/// as `(?i)` in a regex).
pub(crate) fn literal(text: &str, insensitive: bool) -> Hir {
    if !insensitive {
        return Hir::literal(text.as_bytes());
    }
    regex_syntax::ParserBuilder::new()
        .case_insensitive(true)
        .build()
        .parse(&regex_syntax::escape(text))
        .unwrap_or_else(|_| Hir::literal(text.as_bytes()))
}

/// `"from".."to"`: one character from `from` to `to`.
pub(crate) fn range(from: &str, to: &str) -> Result<Hir, String> {
    let single = |s: &str| {
        let mut chars = s.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) => Some(c),
            _ => None,
        }
    };
    let from = single(from).ok_or("range start must be a single character")?;
    let to = single(to).ok_or("range end must be a single character")?;
    if from > to {
        return Err(format!("invalid range order: {from:?}..{to:?}"));
    }
    Ok(Hir::class(Class::Unicode(ClassUnicode::new([
        ClassUnicodeRange::new(from, to),
    ]))))
}

/// A regex error: a message and the byte offset in the pattern it is about.
pub(crate) struct RegexError {
    pub offset: usize,
    pub message: String,
}

/// `/pattern/flags`: Rust regex syntax; flags `i`, `m`, `s`, `x`, `u` as the
/// inline flags of the same names.
pub(crate) fn regex(pattern: &str, flags: &str, limits: &Limits) -> Result<Hir, RegexError> {
    let mut builder = regex_syntax::ParserBuilder::new();
    builder.nest_limit(limits.max_nesting.min(u32::MAX as usize) as u32);
    for flag in flags.chars() {
        match flag {
            'i' => builder.case_insensitive(true),
            'm' => builder.multi_line(true),
            's' => builder.dot_matches_new_line(true),
            'x' => builder.ignore_whitespace(true),
            'u' => builder.unicode(true),
            'l' => {
                return Err(RegexError {
                    offset: pattern.len() + 1,
                    message: "l-flag is not supported in regexes".into(),
                })
            }
            other => {
                return Err(RegexError {
                    offset: pattern.len() + 1,
                    message: format!("unknown regex flag `{other}` (flags: i, m, s, x, u)"),
                })
            }
        };
    }
    let hir = builder.build().parse(pattern).map_err(|e| {
        let (offset, message) = match &e {
            regex_syntax::Error::Parse(p) => (p.span().start.offset, p.kind().to_string()),
            regex_syntax::Error::Translate(t) => (t.span().start.offset, t.kind().to_string()),
            other => (0, other.to_string()),
        };
        RegexError {
            offset,
            message: format!("invalid regex /{pattern}/: {message}"),
        }
    })?;
    if !hir.properties().look_set().is_empty() {
        return Err(RegexError {
            offset: 0,
            message: format!(
                "invalid regex /{pattern}/: assertions (`^`, `$`, `\\b`, ...) are not supported in a terminal"
            ),
        });
    }
    Ok(hir)
}

/// The chunks of `%regex {"substring_words" | "substring_chars" | "substring_chunks": ...}`
/// (llguidance's structured regex): exactly one field.
pub(crate) fn substring_chunks(spec: &serde_json::Value) -> Result<Vec<String>, String> {
    let serde_json::Value::Object(map) = spec else {
        return Err("failed to parse %regex: expected a JSON object".into());
    };
    for key in map.keys() {
        if !matches!(
            key.as_str(),
            "substring_words" | "substring_chars" | "substring_chunks"
        ) {
            return Err(format!(
                "failed to parse %regex: unknown field `{key}`, expected one of `substring_chunks`, `substring_words`, `substring_chars`"
            ));
        }
    }
    let set: Vec<&String> = map.keys().collect();
    match set.len() {
        0 => return Err("no fields set on %regex".into()),
        1 => {}
        _ => return Err(format!("only one field can be set on %regex; got {set:?}")),
    }
    let (key, value) = map.iter().next().ok_or("no fields set on %regex")?;
    let text = || {
        value
            .as_str()
            .ok_or_else(|| format!("failed to parse %regex: `{key}` must be a string"))
    };
    Ok(match key.as_str() {
        "substring_words" => words(text()?),
        "substring_chars" => text()?.chars().map(String::from).collect(),
        _ => {
            let items = value
                .as_array()
                .ok_or("failed to parse %regex: `substring_chunks` must be an array of strings")?;
            items
                .iter()
                .map(|v| {
                    v.as_str().map(String::from).ok_or_else(|| {
                        "failed to parse %regex: `substring_chunks` must be an array of strings"
                            .to_string()
                    })
                })
                .collect::<Result<_, _>>()?
        }
    })
}

/// Runs of whitespace, of word characters (alphanumeric or `_`), and of other
/// characters, in order (llguidance's `substring_words` chunking).
fn words(text: &str) -> Vec<String> {
    #[derive(PartialEq)]
    enum Kind {
        Space,
        Word,
        Other,
    }
    let kind = |c: char| {
        if c.is_whitespace() {
            Kind::Space
        } else if c.is_alphanumeric() || c == '_' {
            Kind::Word
        } else {
            Kind::Other
        }
    };
    let mut chunks: Vec<String> = Vec::new();
    let mut last = None;
    for c in text.chars() {
        let k = kind(c);
        match chunks.last_mut() {
            Some(chunk) if last.as_ref() == Some(&k) => chunk.push(c),
            _ => chunks.push(c.to_string()),
        }
        last = Some(k);
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_runs_of_one_kind() {
        assert_eq!(words("foo bar. baz"), ["foo", " ", "bar", ".", " ", "baz"]);
        assert_eq!(words("a  b"), ["a", "  ", "b"]);
        assert!(words("").is_empty());
    }

    #[test]
    fn ranges_need_single_ordered_characters() {
        assert!(range("a", "z").is_ok());
        assert!(range("ab", "c").unwrap_err().contains("range start"));
        assert!(range("a", "cd").unwrap_err().contains("range end"));
        assert!(range("d", "a").unwrap_err().contains("invalid range order"));
    }
}
