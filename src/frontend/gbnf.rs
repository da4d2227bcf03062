//! GBNF, the llama.cpp grammar dialect, parsed into the grammar IR.
//!
//! The dialect is character-based: literals and classes denote Unicode code points,
//! which become their UTF-8 bytes in the IR. What is accepted, following llama.cpp's
//! parser and its `grammars/README.md`:
//!
//! * `name ::= alternatives`, one rule per line; a rule continues on the next line
//!   after a trailing `|`, inside parentheses, or when the next line starts with `|`;
//! * `# comments` to the end of a line;
//! * literals `"..."` with escapes `\x` (2 hex digits), `\u` (4), `\U` (8), `\t`
//!   `\r` `\n` `\\` `\"` `\[` `\]` (all escapes name code points, as in llama.cpp);
//! * classes `[a-z]`, `[^...]`, with ranges, escapes, and `-` as a plain character at
//!   either end; `.` for any character;
//! * grouping `( )`, alternation `|`, postfix `*` `+` `?` `{m}` `{m,}` `{m,n}` `{,n}`;
//! * whole tokens: `<[id]>`, `<name>` (the token whose text is `name`, special
//!   tokens included), `!<[id]>` (any one token but that), and llguidance's id
//!   lists `<[1,5-9]>`, `<[^11]>`, `<[*]>` (see [`crate::frontend::tokens`]); a
//!   grammar with names is bound to its vocabulary when it is compiled;
//! * `root` is the start rule (another can be chosen with [`GbnfOptions::root`]).
//!
//! Left recursion is accepted (llama.cpp rejects it; the Earley parser downstream
//! does not need to). Defining a rule twice is an error rather than llama.cpp's
//! silent overwrite. Every error names line and column.

use rustc_hash::FxHashMap as HashMap;

use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir};

use super::tokens::{parse_token_ref, token_ref_len};
use super::{FrontendError, Limits};
use crate::grammar::{Expr, Grammar, Location, Rule, RuleId};

/// Options for [`parse`].
#[derive(Debug, Clone)]
pub struct GbnfOptions {
    /// Name of the start rule.
    pub root: String,
    pub limits: Limits,
}

impl Default for GbnfOptions {
    fn default() -> Self {
        GbnfOptions {
            root: "root".into(),
            limits: Limits::default(),
        }
    }
}

/// Parses a GBNF grammar text into the IR and validates it.
pub fn parse(source: &str, options: &GbnfOptions) -> Result<Grammar, FrontendError> {
    if source.len() > options.limits.max_source_bytes {
        return Err(FrontendError::TooLarge {
            what: "grammar text",
            size: source.len(),
            limit: options.limits.max_source_bytes,
        });
    }
    let mut parser = Parser {
        src: source.as_bytes(),
        pos: 0,
        depth: 0,
        limits: &options.limits,
        names: HashMap::default(),
        rules: Vec::new(),
        first_use: Vec::new(),
    };
    parser.parse_grammar()?;
    parser.finish(&options.root)
}

struct Parser<'a> {
    src: &'a [u8],
    pos: usize,
    depth: usize,
    limits: &'a Limits,
    names: HashMap<String, RuleId>,
    /// Indexed by rule id: the body and where it was defined, once it has been.
    rules: Vec<Option<(Expr, Location)>>,
    /// Indexed by rule id: where the name first appeared.
    first_use: Vec<(String, Location)>,
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

impl<'a> Parser<'a> {
    fn location_at(&self, offset: usize) -> Location {
        Location::of_offset(self.src, offset)
    }

    fn error(&self, offset: usize, message: impl Into<String>) -> FrontendError {
        FrontendError::Syntax {
            location: self.location_at(offset),
            message: message.into(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    fn peek_at(&self, ahead: usize) -> Option<u8> {
        self.src.get(self.pos + ahead).copied()
    }

    /// Skips blanks and comments; newlines too when `newlines` is set.
    fn skip_space(&mut self, newlines: bool) {
        while let Some(b) = self.peek() {
            match b {
                b' ' | b'\t' => self.pos += 1,
                b'#' => {
                    while !matches!(self.peek(), None | Some(b'\n') | Some(b'\r')) {
                        self.pos += 1;
                    }
                }
                b'\r' | b'\n' if newlines => self.pos += 1,
                _ => break,
            }
        }
    }

    /// At a newline outside parentheses: does the rule go on with a `|` on a later line?
    fn continues_with_bar(&self) -> bool {
        let mut probe = Parser {
            src: self.src,
            pos: self.pos,
            depth: 0,
            limits: self.limits,
            names: HashMap::default(),
            rules: Vec::new(),
            first_use: Vec::new(),
        };
        probe.skip_space(true);
        probe.peek() == Some(b'|')
    }

    fn rule_id(&mut self, name: &str, at: usize) -> RuleId {
        if let Some(&id) = self.names.get(name) {
            return id;
        }
        let id = RuleId(self.rules.len() as u32);
        self.names.insert(name.to_string(), id);
        self.rules.push(None);
        let location = self.location_at(at);
        self.first_use.push((name.to_string(), location));
        id
    }

    fn parse_name(&mut self) -> Result<String, FrontendError> {
        let start = self.pos;
        while self.peek().is_some_and(is_word_byte) {
            self.pos += 1;
        }
        if self.pos == start {
            return Err(self.error(start, self.describe_unexpected("a rule name")));
        }
        Ok(String::from_utf8_lossy(&self.src[start..self.pos]).into_owned())
    }

    fn describe_unexpected(&self, wanted: &str) -> String {
        match self.char_at(self.pos) {
            None => format!("expected {wanted}, found the end of the grammar"),
            Some((c, _)) => format!("expected {wanted}, found {c:?}"),
        }
    }

    fn char_at(&self, offset: usize) -> Option<(char, usize)> {
        let rest = self.src.get(offset..)?;
        let end = rest.len().min(4);
        let text = match std::str::from_utf8(&rest[..end]) {
            Ok(s) => s,
            Err(e) => std::str::from_utf8(&rest[..e.valid_up_to()]).unwrap_or(""),
        };
        text.chars().next().map(|c| (c, c.len_utf8()))
    }

    fn parse_grammar(&mut self) -> Result<(), FrontendError> {
        loop {
            self.skip_space(true);
            if self.peek().is_none() {
                return Ok(());
            }
            self.parse_rule()?;
        }
    }

    fn parse_rule(&mut self) -> Result<(), FrontendError> {
        let name_at = self.pos;
        let name = self.parse_name()?;
        self.skip_space(false);
        if !self.src[self.pos..].starts_with(b"::=") {
            return Err(self.error(self.pos, self.describe_unexpected("`::=`")));
        }
        self.pos += 3;
        self.skip_space(true);
        let body = self.parse_alternatives(false)?;
        match self.peek() {
            None | Some(b'\n') | Some(b'\r') => {}
            Some(b')') => return Err(self.error(self.pos, "unmatched `)`")),
            Some(_) => {
                return Err(self.error(
                    self.pos,
                    self.describe_unexpected("a newline or the end of the rule"),
                ))
            }
        }
        let id = self.rule_id(&name, name_at);
        let location = self.location_at(name_at);
        if let Some((_, first)) = &self.rules[id.index()] {
            return Err(FrontendError::Syntax {
                location,
                message: format!("rule `{name}` is already defined at {first}"),
            });
        }
        self.rules[id.index()] = Some((body, location));
        Ok(())
    }

    fn parse_alternatives(&mut self, nested: bool) -> Result<Expr, FrontendError> {
        let mut alternatives = vec![self.parse_sequence(nested)?];
        loop {
            if !nested
                && matches!(self.peek(), Some(b'\n') | Some(b'\r'))
                && self.continues_with_bar()
            {
                self.skip_space(true);
            }
            if self.peek() != Some(b'|') {
                break;
            }
            self.pos += 1;
            self.skip_space(true);
            alternatives.push(self.parse_sequence(nested)?);
        }
        Ok(if alternatives.len() == 1 {
            alternatives.pop().unwrap_or(Expr::Empty)
        } else {
            Expr::Alt(alternatives)
        })
    }

    fn parse_sequence(&mut self, nested: bool) -> Result<Expr, FrontendError> {
        let mut items: Vec<Expr> = Vec::new();
        while let Some(b) = self.peek() {
            let item = match b {
                b'|' | b')' | b'\n' | b'\r' => break,
                b'"' => self.parse_literal()?,
                b'[' => self.parse_class()?,
                b'.' => {
                    self.pos += 1;
                    Expr::Regex(any_char())
                }
                b'(' => {
                    let open = self.pos;
                    self.pos += 1;
                    self.depth += 1;
                    if self.depth > self.limits.max_nesting {
                        return Err(self.error(
                            open,
                            format!("parentheses nested deeper than {}", self.limits.max_nesting),
                        ));
                    }
                    self.skip_space(true);
                    let inner = self.parse_alternatives(true)?;
                    if self.peek() != Some(b')') {
                        return Err(self.error(open, "unclosed `(`"));
                    }
                    self.pos += 1;
                    self.depth -= 1;
                    inner
                }
                b'<' => self.parse_token(false)?,
                b'!' if self.peek_at(1) == Some(b'<') => {
                    self.pos += 1;
                    self.parse_token(true)?
                }
                b'*' | b'+' | b'?' | b'{' => {
                    return Err(self.error(
                        self.pos,
                        format!("`{}` must follow an item to repeat", b as char),
                    ))
                }
                b if is_word_byte(b) => {
                    let at = self.pos;
                    let name = self.parse_name()?;
                    // `name ::=` here means the previous rule ended without a newline.
                    let mut probe = self.pos;
                    while matches!(self.src.get(probe), Some(b' ') | Some(b'\t')) {
                        probe += 1;
                    }
                    if self.src[probe..].starts_with(b"::=") {
                        return Err(self.error(
                            at,
                            format!("rule `{name}` starts before the previous rule ended: put it on a new line"),
                        ));
                    }
                    Expr::Ref(self.rule_id(&name, at))
                }
                _ => return Err(self.error(self.pos, self.describe_unexpected("an item"))),
            };
            self.skip_space(nested);
            let item = self.parse_postfix(item, nested)?;
            items.push(item);
        }
        Ok(match items.len() {
            0 => Expr::Empty,
            1 => items.pop().unwrap_or(Expr::Empty),
            _ => Expr::Seq(items),
        })
    }

    /// `<[id]>`, `<name>` (with llguidance's id lists too: `<[1,5-9]>`,
    /// `<[^11]>`, `<[*]>`), or after `!` every token but those.
    fn parse_token(&mut self, negated: bool) -> Result<Expr, FrontendError> {
        let open = self.pos;
        let at = if negated { open - 1 } else { open };
        let rest = &self.src[open + 1..];
        let Some(len) = token_ref_len(rest) else {
            return Err(self.error(
                open,
                "bad token reference: `<` must start `<[id]>` or `<name>` (no spaces inside)",
            ));
        };
        let inner = String::from_utf8_lossy(&rest[..len]).into_owned();
        self.pos = open + len + 2;
        let set = parse_token_ref(&inner).map_err(|message| self.error(open, message))?;
        let set = if negated { set.negated() } else { set };
        if set.is_empty() {
            return Err(self.error(at, "`!<[*]>` matches no token"));
        }
        Ok(Expr::Tokens(set.at(self.location_at(at))))
    }

    fn parse_postfix(&mut self, mut item: Expr, nested: bool) -> Result<Expr, FrontendError> {
        loop {
            let (min, max) = match self.peek() {
                Some(b'*') => {
                    self.pos += 1;
                    (0, None)
                }
                Some(b'+') => {
                    self.pos += 1;
                    (1, None)
                }
                Some(b'?') => {
                    self.pos += 1;
                    (0, Some(1))
                }
                Some(b'{') => self.parse_braces()?,
                _ => return Ok(item),
            };
            item = Expr::Repeat {
                expr: Box::new(item),
                min,
                max,
            };
            self.skip_space(nested);
        }
    }

    fn parse_braces(&mut self) -> Result<(u32, Option<u32>), FrontendError> {
        let open = self.pos;
        self.pos += 1;
        self.skip_space(false);
        let min = self.parse_count()?;
        self.skip_space(false);
        let (min, max) = if self.peek() == Some(b',') {
            self.pos += 1;
            self.skip_space(false);
            let max = self.parse_count()?;
            self.skip_space(false);
            (min.unwrap_or(0), max)
        } else {
            let Some(n) = min else {
                return Err(self.error(self.pos, self.describe_unexpected("a repetition count")));
            };
            (n, Some(n))
        };
        if self.peek() != Some(b'}') {
            return Err(self.error(self.pos, self.describe_unexpected("`}`")));
        }
        self.pos += 1;
        if let Some(max) = max {
            if min > max {
                return Err(self.error(
                    open,
                    format!("repetition {{{min},{max}}} has its minimum above its maximum"),
                ));
            }
        }
        Ok((min, max))
    }

    fn parse_count(&mut self) -> Result<Option<u32>, FrontendError> {
        let start = self.pos;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
        if start == self.pos {
            return Ok(None);
        }
        let digits = std::str::from_utf8(&self.src[start..self.pos]).unwrap_or("");
        let limit = self.limits.max_repetition;
        match digits.parse::<u64>() {
            Ok(n) if n <= u64::from(limit) => Ok(Some(n as u32)),
            _ => Err(self.error(
                start,
                format!("repetition count {digits} is above the limit of {limit}"),
            )),
        }
    }

    /// One code point of a literal or class, escapes resolved.
    fn parse_char(&mut self) -> Result<char, FrontendError> {
        let at = self.pos;
        let Some((c, len)) = self.char_at(at) else {
            return Err(match self.peek() {
                None => self.error(at, "unexpected end of the grammar"),
                Some(_) => self.error(at, "the grammar text is not valid UTF-8"),
            });
        };
        self.pos += len;
        if c != '\\' {
            return Ok(c);
        }
        let Some(e) = self.peek() else {
            return Err(self.error(at, "unfinished escape at the end of the grammar"));
        };
        self.pos += 1;
        let digits = match e {
            b'x' => 2,
            b'u' => 4,
            b'U' => 8,
            b't' => return Ok('\t'),
            b'r' => return Ok('\r'),
            b'n' => return Ok('\n'),
            b'\\' | b'"' | b'[' | b']' | b'-' | b'^' | b'/' | b'\'' => return Ok(e as char),
            _ => {
                let shown = self.char_at(self.pos - 1).map_or('?', |(c, _)| c);
                return Err(self.error(at, format!("unknown escape `\\{shown}`")));
            }
        };
        let hex_start = self.pos;
        let hex = self.src.get(hex_start..hex_start + digits).unwrap_or(&[]);
        if hex.len() != digits || !hex.iter().all(u8::is_ascii_hexdigit) {
            return Err(self.error(
                at,
                format!("escape `\\{}` needs {digits} hex digits", e as char),
            ));
        }
        self.pos += digits;
        let value =
            u32::from_str_radix(std::str::from_utf8(hex).unwrap_or("0"), 16).unwrap_or(u32::MAX);
        char::from_u32(value).ok_or_else(|| {
            self.error(
                at,
                format!("U+{value:X} is not a Unicode scalar value (surrogate or above U+10FFFF)"),
            )
        })
    }

    fn parse_literal(&mut self) -> Result<Expr, FrontendError> {
        let open = self.pos;
        self.pos += 1;
        let mut text = String::new();
        loop {
            match self.peek() {
                None | Some(b'\n') | Some(b'\r') => {
                    return Err(self.error(open, "unterminated string literal"))
                }
                Some(b'"') => {
                    self.pos += 1;
                    break;
                }
                Some(_) => text.push(self.parse_char()?),
            }
        }
        Ok(Expr::literal(text.as_bytes()))
    }

    fn parse_class(&mut self) -> Result<Expr, FrontendError> {
        let open = self.pos;
        self.pos += 1;
        let negated = self.peek() == Some(b'^');
        if negated {
            self.pos += 1;
        }
        let mut ranges = Vec::new();
        loop {
            match self.peek() {
                None | Some(b'\n') | Some(b'\r') => {
                    return Err(self.error(open, "unterminated character class"))
                }
                Some(b']') => {
                    self.pos += 1;
                    break;
                }
                Some(_) => {
                    let at = self.pos;
                    let low = self.parse_char()?;
                    let high = if self.peek() == Some(b'-') && self.peek_at(1) != Some(b']') {
                        self.pos += 1;
                        if matches!(self.peek(), None | Some(b'\n') | Some(b'\r')) {
                            return Err(self.error(open, "unterminated character class"));
                        }
                        self.parse_char()?
                    } else {
                        low
                    };
                    if high < low {
                        return Err(
                            self.error(at, format!("class range {low:?}-{high:?} is reversed"))
                        );
                    }
                    ranges.push(ClassUnicodeRange::new(low, high));
                }
            }
        }
        let mut class = ClassUnicode::new(ranges);
        if negated {
            class.negate();
        }
        Ok(Expr::Regex(Hir::class(Class::Unicode(class))))
    }

    fn finish(self, root: &str) -> Result<Grammar, FrontendError> {
        let mut rules = Vec::with_capacity(self.rules.len());
        for (i, body) in self.rules.into_iter().enumerate() {
            let (name, first_use) = &self.first_use[i];
            let Some((expr, location)) = body else {
                return Err(FrontendError::Syntax {
                    location: *first_use,
                    message: format!("rule `{name}` is used but never defined"),
                });
            };
            rules.push(Rule {
                name: name.clone(),
                expr,
                location: Some(location),
            });
        }
        let Some(&root_id) = self.names.get(root) else {
            return Err(FrontendError::MissingRoot { root: root.into() });
        };
        let grammar = Grammar {
            rules,
            root: root_id,
        };
        grammar.validate()?;
        Ok(grammar)
    }
}

/// `.`: any Unicode scalar value, as UTF-8.
fn any_char() -> Hir {
    Hir::class(Class::Unicode(ClassUnicode::new([ClassUnicodeRange::new(
        '\0',
        char::MAX,
    )])))
}
