//! The Lark text cut into tokens: names, strings, regexes, punctuation, directives
//! and the newlines that end rules.
//!
//! The token set follows llguidance's Lark lexer (`parser/src/lark/lexer.rs` there):
//! `#` and `//` comments, `"..."` strings in JSON syntax plus `\xHH` and an `i`
//! flag, `/.../flags` regexes, `<...>` special tokens, `@name` grammar references,
//! and the directives `%ignore`, `%import`, `%json`, `%regex`, `%llguidance`,
//! `%lark`, ... . The JSON value after `%json`, `%regex` and `%llguidance` is read
//! here, with `serde_json`, because it is not made of Lark tokens. Newlines are
//! tokens (a rule ends at one unless the next line starts with `|`); runs of blank
//! and comment lines are one newline token.
//!
//! Two deliberate departures from llguidance's greedy token regexes, both making
//! texts work that it rejects: a number takes a fraction only when a digit follows
//! the dot (so `"a"~2..4` is a range, not the number `2.`), and a name with both
//! cases (`myRule`) is one bad name rather than a rule glued to a terminal.

use super::source::SourceMap;
use crate::frontend::FrontendError;

/// What a token is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    /// One or more line ends (with the blank and comment lines between them).
    Newline,
    Colon,
    DoubleColon,
    Equals,
    Comma,
    Dot,
    DotDot,
    Arrow,
    LParen,
    RParen,
    LBrace,
    RBrace,
    LBracket,
    RBracket,
    Tilde,
    VBar,
    And,
    /// `+`, `*` or `?`.
    Op(u8),
    /// A lower-case name (a rule); `pinned` when written `!name`.
    Rule {
        name: String,
        pinned: bool,
    },
    /// An upper-case name (a terminal).
    Terminal(String),
    /// `_` alone (parametric rules: `name::_`).
    Underscore,
    /// A number as written (sign, digits, fraction, exponent, or `0x` hex).
    Number(String),
    /// A string literal, escapes resolved; `insensitive` for the `i` flag.
    Str {
        value: String,
        insensitive: bool,
    },
    /// A `/regex/flags` literal: the pattern as written between the slashes.
    Regex {
        pattern: String,
        flags: String,
    },
    /// `<...>`: the text between the angle brackets.
    SpecialToken(String),
    /// `@name`: the name.
    GrammarRef(String),
    /// A `%` directive without a JSON argument.
    Directive(Directive),
    /// `%json`, `%regex`, `%llguidance` or `%grammar_options` with its JSON value.
    JsonDirective {
        directive: JsonDirective,
        value: serde_json::Value,
    },
}

/// Directives that take Lark syntax (or nothing) after them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Directive {
    Ignore,
    Import,
    Override,
    Declare,
    Lark,
    If,
}

/// Directives followed by a JSON value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JsonDirective {
    Json,
    Regex,
    Llguidance,
    /// XGrammar's spelling of `%llguidance`.
    GrammarOptions,
}

impl JsonDirective {
    pub fn spelling(self) -> &'static str {
        match self {
            JsonDirective::Json => "%json",
            JsonDirective::Regex => "%regex",
            JsonDirective::Llguidance => "%llguidance",
            JsonDirective::GrammarOptions => "%grammar_options",
        }
    }
}

impl Tok {
    /// How the token reads in a message.
    pub fn describe(&self) -> String {
        match self {
            Tok::Newline => "the end of the line".into(),
            Tok::Colon => "`:`".into(),
            Tok::DoubleColon => "`::`".into(),
            Tok::Equals => "`=`".into(),
            Tok::Comma => "`,`".into(),
            Tok::Dot => "`.`".into(),
            Tok::DotDot => "`..`".into(),
            Tok::Arrow => "`->`".into(),
            Tok::LParen => "`(`".into(),
            Tok::RParen => "`)`".into(),
            Tok::LBrace => "`{`".into(),
            Tok::RBrace => "`}`".into(),
            Tok::LBracket => "`[`".into(),
            Tok::RBracket => "`]`".into(),
            Tok::Tilde => "`~`".into(),
            Tok::VBar => "`|`".into(),
            Tok::And => "`&`".into(),
            Tok::Op(op) => format!("`{}`", *op as char),
            Tok::Rule { name, .. } => format!("rule name `{name}`"),
            Tok::Terminal(name) => format!("terminal name `{name}`"),
            Tok::Underscore => "`_`".into(),
            Tok::Number(n) => format!("number `{n}`"),
            Tok::Str { value, .. } => format!("string {value:?}"),
            Tok::Regex { pattern, .. } => format!("regex `/{pattern}/`"),
            Tok::SpecialToken(t) => format!("special token `<{t}>`"),
            Tok::GrammarRef(g) => format!("grammar reference `@{g}`"),
            Tok::Directive(d) => format!(
                "`%{}`",
                match d {
                    Directive::Ignore => "ignore",
                    Directive::Import => "import",
                    Directive::Override => "override",
                    Directive::Declare => "declare",
                    Directive::Lark => "lark",
                    Directive::If => "if",
                }
            ),
            Tok::JsonDirective { directive, .. } => format!("`{}`", directive.spelling()),
        }
    }
}

/// A token and where it starts and ends (byte offsets into the source).
#[derive(Debug, Clone)]
pub(crate) struct Token {
    pub tok: Tok,
    pub at: usize,
    pub end: usize,
}

/// Cuts `src` into tokens; the list ends with a [`Tok::Newline`] (the text's end
/// ends the last line).
pub(crate) fn tokenize(src: &str, map: &SourceMap) -> Result<Vec<Token>, FrontendError> {
    let mut lexer = Lexer {
        src,
        bytes: src.as_bytes(),
        pos: 0,
        map,
        tokens: Vec::new(),
    };
    lexer.run()?;
    Ok(lexer.tokens)
}

struct Lexer<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    map: &'a SourceMap<'a>,
    tokens: Vec<Token>,
}

fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

impl<'a> Lexer<'a> {
    fn error(&self, at: usize, message: impl Into<String>) -> FrontendError {
        self.map.error(at, message)
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn peek_at(&self, ahead: usize) -> Option<u8> {
        self.bytes.get(self.pos + ahead).copied()
    }

    fn push(&mut self, tok: Tok, at: usize) {
        self.tokens.push(Token {
            tok,
            at,
            end: self.pos,
        });
    }

    fn push_newline(&mut self, at: usize) {
        if !matches!(
            self.tokens.last(),
            Some(Token {
                tok: Tok::Newline,
                ..
            })
        ) {
            self.push(Tok::Newline, at);
        }
    }

    fn run(&mut self) -> Result<(), FrontendError> {
        while let Some(b) = self.peek() {
            let at = self.pos;
            match b {
                b' ' | b'\t' | b'\x0c' => self.pos += 1,
                b'\r' if self.peek_at(1) == Some(b'\n') => {
                    self.pos += 2;
                    self.push_newline(at);
                }
                b'\r' => self.pos += 1,
                b'\n' => {
                    self.pos += 1;
                    self.push_newline(at);
                }
                b'#' => self.skip_comment(),
                b'/' if self.peek_at(1) == Some(b'/') => self.skip_comment(),
                b'/' => self.regex()?,
                b'"' => self.string()?,
                b'%' => self.directive()?,
                b'<' => self.special_token()?,
                b'@' => self.grammar_ref()?,
                b'!' => {
                    self.pos += 1;
                    if !self
                        .peek()
                        .is_some_and(|b| b.is_ascii_lowercase() || b == b'_')
                    {
                        return Err(self.error(at, "`!` must be followed by a rule name"));
                    }
                    self.name(at, true)?;
                }
                b if is_name_start(b) => self.name(at, false)?,
                b'0'..=b'9' => self.number(),
                b'+' | b'-' if self.peek_at(1).is_some_and(|b| b.is_ascii_digit()) => self.number(),
                b'-' if self.peek_at(1) == Some(b'>') => {
                    self.pos += 2;
                    self.push(Tok::Arrow, at);
                }
                _ => {
                    let tok = match b {
                        b':' if self.peek_at(1) == Some(b':') => {
                            self.pos += 1;
                            Tok::DoubleColon
                        }
                        b':' => Tok::Colon,
                        b'=' => Tok::Equals,
                        b',' => Tok::Comma,
                        b'.' if self.peek_at(1) == Some(b'.') => {
                            self.pos += 1;
                            Tok::DotDot
                        }
                        b'.' => Tok::Dot,
                        b'(' => Tok::LParen,
                        b')' => Tok::RParen,
                        b'{' => Tok::LBrace,
                        b'}' => Tok::RBrace,
                        b'[' => Tok::LBracket,
                        b']' => Tok::RBracket,
                        b'~' => Tok::Tilde,
                        b'|' => Tok::VBar,
                        b'&' => Tok::And,
                        b'+' | b'*' | b'?' => Tok::Op(b),
                        _ => {
                            let c = self.src[at..].chars().next().unwrap_or('?');
                            return Err(self.error(at, format!("unexpected character {c:?}")));
                        }
                    };
                    self.pos += 1;
                    self.push(tok, at);
                }
            }
        }
        let end = self.pos;
        self.push_newline(end);
        Ok(())
    }

    fn skip_comment(&mut self) {
        while !matches!(self.peek(), None | Some(b'\n')) {
            self.pos += 1;
        }
    }

    fn name(&mut self, at: usize, pinned: bool) -> Result<(), FrontendError> {
        let start = self.pos;
        while let Some(b) = self.peek() {
            // `a->b`: the arrow is not part of the name.
            if !is_name_byte(b) || (b == b'-' && self.peek_at(1) == Some(b'>')) {
                break;
            }
            self.pos += 1;
        }
        let name = &self.src[start..self.pos];
        let lower = name.bytes().any(|b| b.is_ascii_lowercase());
        let upper = name.bytes().any(|b| b.is_ascii_uppercase());
        let tok = match (lower, upper) {
            (true, false) => Tok::Rule {
                name: name.to_string(),
                pinned,
            },
            (false, true) if !pinned => Tok::Terminal(name.to_string()),
            (false, false) if name == "_" && !pinned => Tok::Underscore,
            (false, false) => {
                return Err(self.error(
                    at,
                    format!("`{name}` is not a name: a name needs a letter"),
                ))
            }
            _ => {
                return Err(self.error(
                    at,
                    format!(
                        "name `{name}` mixes upper and lower case: rules are lower-case, terminals upper-case"
                    ),
                ))
            }
        };
        self.push(tok, at);
        Ok(())
    }

    fn number(&mut self) {
        let at = self.pos;
        if matches!(self.peek(), Some(b'+' | b'-')) {
            self.pos += 1;
        }
        if self.peek() == Some(b'0') && matches!(self.peek_at(1), Some(b'x' | b'X')) {
            self.pos += 2;
            while self.peek().is_some_and(|b| b.is_ascii_hexdigit()) {
                self.pos += 1;
            }
        } else {
            let digits = |l: &mut Self| {
                while l.peek().is_some_and(|b| b.is_ascii_digit()) {
                    l.pos += 1;
                }
            };
            digits(self);
            if self.peek() == Some(b'.') && self.peek_at(1).is_some_and(|b| b.is_ascii_digit()) {
                self.pos += 1;
                digits(self);
            }
            if matches!(self.peek(), Some(b'e' | b'E')) {
                let sign = usize::from(matches!(self.peek_at(1), Some(b'+' | b'-')));
                if self.peek_at(1 + sign).is_some_and(|b| b.is_ascii_digit()) {
                    self.pos += 1 + sign;
                    digits(self);
                }
            }
        }
        let text = self.src[at..self.pos].to_string();
        self.push(Tok::Number(text), at);
    }

    fn string(&mut self) -> Result<(), FrontendError> {
        let open = self.pos;
        self.pos += 1;
        let mut value = String::new();
        loop {
            let at = self.pos;
            let Some(c) = self.src[at..].chars().next() else {
                return Err(self.error(open, "unterminated string literal"));
            };
            match c {
                '"' => {
                    self.pos += 1;
                    break;
                }
                '\n' | '\r' => return Err(self.error(open, "unterminated string literal")),
                '\\' => {
                    self.pos += 1;
                    value.push(self.escape(at)?);
                }
                c if c < ' ' || c == '\x7f' => {
                    return Err(self.error(
                        at,
                        format!(
                            "control character {c:?} in a string literal: write it as an escape"
                        ),
                    ))
                }
                c => {
                    self.pos += c.len_utf8();
                    value.push(c);
                }
            }
        }
        let insensitive = self.peek() == Some(b'i') && !self.peek_at(1).is_some_and(is_name_byte);
        if insensitive {
            self.pos += 1;
        }
        self.push(Tok::Str { value, insensitive }, open);
        Ok(())
    }

    /// One escape after its backslash (at `at`): JSON's, plus `\xHH`.
    fn escape(&mut self, at: usize) -> Result<char, FrontendError> {
        let Some(e) = self.peek() else {
            return Err(self.error(at, "unterminated string literal"));
        };
        self.pos += 1;
        Ok(match e {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\x08',
            b'f' => '\x0c',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'x' => {
                let v = self.hex_digits(at, 2, "\\x")?;
                char::from_u32(v).unwrap_or('\0')
            }
            b'u' => {
                let v = self.hex_digits(at, 4, "\\u")?;
                match v {
                    0xD800..=0xDBFF => {
                        let low_at = self.pos;
                        if self.bytes.get(low_at..low_at + 2) != Some(b"\\u") {
                            return Err(self.error(
                                at,
                                format!("lone surrogate \\u{v:04X} in a string literal"),
                            ));
                        }
                        self.pos += 2;
                        let low = self.hex_digits(low_at, 4, "\\u")?;
                        if !(0xDC00..=0xDFFF).contains(&low) {
                            return Err(self.error(
                                at,
                                format!("lone surrogate \\u{v:04X} in a string literal"),
                            ));
                        }
                        let c = 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00);
                        char::from_u32(c).unwrap_or('\u{FFFD}')
                    }
                    0xDC00..=0xDFFF => {
                        return Err(self
                            .error(at, format!("lone surrogate \\u{v:04X} in a string literal")))
                    }
                    v => char::from_u32(v).unwrap_or('\u{FFFD}'),
                }
            }
            _ => {
                let shown = self.src[self.pos - 1..].chars().next().unwrap_or('?');
                return Err(self.error(
                    at,
                    format!(
                        "unknown escape `\\{shown}` in a string literal (JSON escapes and \\xHH)"
                    ),
                ));
            }
        })
    }

    fn hex_digits(&mut self, at: usize, n: usize, what: &str) -> Result<u32, FrontendError> {
        let digits = self.bytes.get(self.pos..self.pos + n).unwrap_or(&[]);
        if digits.len() != n || !digits.iter().all(u8::is_ascii_hexdigit) {
            return Err(self.error(at, format!("escape `{what}` needs {n} hex digits")));
        }
        self.pos += n;
        let text = std::str::from_utf8(digits).unwrap_or("0");
        Ok(u32::from_str_radix(text, 16).unwrap_or(0))
    }

    fn regex(&mut self) -> Result<(), FrontendError> {
        let open = self.pos;
        self.pos += 1;
        let start = self.pos;
        loop {
            match self.peek() {
                None | Some(b'\n') | Some(b'\r') => {
                    return Err(self.error(
                        open,
                        "unterminated regex literal (`/` without its closing `/` on the same line)",
                    ))
                }
                Some(b'\\') => {
                    self.pos += 1;
                    match self.src[self.pos..].chars().next() {
                        None | Some('\n') | Some('\r') => {
                            return Err(self.error(open, "unterminated regex literal"))
                        }
                        Some(c) => self.pos += c.len_utf8(),
                    }
                }
                Some(b'/') => break,
                Some(_) => {
                    let c = self.src[self.pos..].chars().next().unwrap_or('?');
                    self.pos += c.len_utf8();
                }
            }
        }
        let pattern = self.src[start..self.pos].to_string();
        self.pos += 1;
        let flags_at = self.pos;
        while self.peek().is_some_and(|b| b.is_ascii_alphabetic()) {
            self.pos += 1;
        }
        let flags = self.src[flags_at..self.pos].to_string();
        self.push(Tok::Regex { pattern, flags }, open);
        Ok(())
    }

    fn special_token(&mut self) -> Result<(), FrontendError> {
        let open = self.pos;
        let Some(len) = crate::frontend::tokens::token_ref_len(&self.bytes[open + 1..]) else {
            return Err(self.error(
                open,
                "bad special token: `<` must start `<name>` or `<[ids]>` (no spaces inside)",
            ));
        };
        let text = self.src[open + 1..open + 1 + len].to_string();
        self.pos = open + len + 2;
        self.push(Tok::SpecialToken(text), open);
        Ok(())
    }

    fn grammar_ref(&mut self) -> Result<(), FrontendError> {
        let at = self.pos;
        self.pos += 1;
        while self.peek().is_some_and(is_name_byte) {
            self.pos += 1;
        }
        if self.pos == at + 1 {
            return Err(self.error(at, "`@` must be followed by a grammar name"));
        }
        let name = self.src[at + 1..self.pos].to_string();
        self.push(Tok::GrammarRef(name), at);
        Ok(())
    }

    fn directive(&mut self) -> Result<(), FrontendError> {
        let at = self.pos;
        self.pos += 1;
        while self
            .peek()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            self.pos += 1;
        }
        let word = &self.src[at + 1..self.pos];
        let plain = match word {
            "ignore" => Directive::Ignore,
            "import" => Directive::Import,
            "override" => Directive::Override,
            "declare" => Directive::Declare,
            "lark" => Directive::Lark,
            "if" => Directive::If,
            "json" | "regex" | "llguidance" | "grammar_options" => {
                let directive = match word {
                    "json" => JsonDirective::Json,
                    "regex" => JsonDirective::Regex,
                    "llguidance" => JsonDirective::Llguidance,
                    _ => JsonDirective::GrammarOptions,
                };
                return self.json_value(at, directive);
            }
            "" => {
                return Err(self.error(at, "`%` must start a directive (`%ignore`, `%import`, ...)"))
            }
            other => return Err(self.error(at, format!("unknown directive `%{other}`"))),
        };
        self.push(Tok::Directive(plain), at);
        Ok(())
    }

    /// The JSON value after `%json` (and the other JSON directives).
    fn json_value(&mut self, at: usize, directive: JsonDirective) -> Result<(), FrontendError> {
        let rest = &self.src[self.pos..];
        let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<serde_json::Value>();
        let spelling = directive.spelling();
        match stream.next() {
            Some(Ok(value)) => {
                self.pos += stream.byte_offset();
                self.push(Tok::JsonDirective { directive, value }, at);
                Ok(())
            }
            Some(Err(e)) => {
                let offset = self.pos + offset_of_line_column(rest, e.line(), e.column());
                let message = e.to_string();
                let message = match message.rfind(" at line ") {
                    Some(cut) => &message[..cut],
                    None => &message,
                };
                let what = match directive {
                    JsonDirective::Llguidance | JsonDirective::GrammarOptions => {
                        format!("failed to parse {spelling} declaration")
                    }
                    _ => format!("failed to parse {spelling}"),
                };
                Err(self.error(offset, format!("{what}: {message}")))
            }
            None => Err(self.error(
                at,
                format!("failed to parse {spelling}: EOF while parsing a value (expected a JSON value after {spelling})"),
            )),
        }
    }
}

/// The byte offset in `text` of serde_json's 1-based line and column (the column
/// counts bytes; 0 means "before the line's first byte").
fn offset_of_line_column(text: &str, line: usize, column: usize) -> usize {
    let mut offset = 0;
    for _ in 1..line.max(1) {
        match text[offset..].find('\n') {
            Some(i) => offset += i + 1,
            None => return text.len(),
        }
    }
    let mut at = (offset + column.saturating_sub(1)).min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}
