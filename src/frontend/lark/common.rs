//! `%import common.NAME`: the terminals of Lark's `grammars/common.lark`, each as
//! one regex in Rust syntax with the language Lark's definition gives it.
//!
//! Two of Lark's definitions lean on Python regex features a byte automaton does
//! not have, and are written here as the language they are meant to match:
//! `ESCAPED_STRING` (Lark: a lazy `.*?` and a look-behind) is a quoted string whose
//! backslashes escape the next character, and `C_COMMENT` (Lark: a lazy `(.|\n)*?`)
//! is `/*`, then text with no `*/`, then `*/`. llguidance makes the same choices.

/// The regex of `common.NAME`, if Lark's common grammar defines `NAME`.
pub(crate) fn lookup(name: &str) -> Option<&'static str> {
    COMMON.iter().find(|(n, _)| *n == name).map(|(_, rx)| *rx)
}

/// Every name `%import common` knows, for the error message.
pub(crate) fn names() -> impl Iterator<Item = &'static str> {
    COMMON.iter().map(|(n, _)| *n)
}

const COMMON: &[(&str, &str)] = &[
    ("DIGIT", r"[0-9]"),
    ("HEXDIGIT", r"[a-fA-F0-9]"),
    ("INT", r"[0-9]+"),
    ("SIGNED_INT", r"[+-]?[0-9]+"),
    ("DECIMAL", r"[0-9]+\.[0-9]*|\.[0-9]+"),
    ("_EXP", r"[eE][+-]?[0-9]+"),
    (
        "FLOAT",
        r"[0-9]+[eE][+-]?[0-9]+|([0-9]+\.[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?",
    ),
    (
        "SIGNED_FLOAT",
        r"[+-]?([0-9]+[eE][+-]?[0-9]+|([0-9]+\.[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)",
    ),
    (
        "NUMBER",
        r"[0-9]+|[0-9]+[eE][+-]?[0-9]+|([0-9]+\.[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?",
    ),
    (
        "SIGNED_NUMBER",
        r"[+-]?([0-9]+|[0-9]+[eE][+-]?[0-9]+|([0-9]+\.[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)",
    ),
    ("ESCAPED_STRING", r#""([^"\\]|\\.)*""#),
    ("LCASE_LETTER", r"[a-z]"),
    ("UCASE_LETTER", r"[A-Z]"),
    ("LETTER", r"[A-Za-z]"),
    ("WORD", r"[A-Za-z]+"),
    ("CNAME", r"[_A-Za-z][_A-Za-z0-9]*"),
    ("WS_INLINE", r"[ \t]+"),
    ("WS", r"[ \t\f\r\n]+"),
    ("CR", r"\r"),
    ("LF", r"\n"),
    ("NEWLINE", r"(\r?\n)+"),
    ("SH_COMMENT", r"#[^\n]*"),
    ("CPP_COMMENT", r"//[^\n]*"),
    ("C_COMMENT", r"/\*[^*]*\*+([^/*][^*]*\*+)*/"),
    ("SQL_COMMENT", r"--[^\n]*"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_common_regex_parses() {
        for (name, rx) in COMMON {
            regex_syntax::Parser::new()
                .parse(rx)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}
