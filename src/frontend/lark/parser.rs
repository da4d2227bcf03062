//! Tokens to the syntax tree ([`super::ast`]): recursive descent over Lark's
//! grammar of Lark, with llguidance's extensions.
//!
//! ```text
//! items       := (item NEWLINE)*
//! item        := rule | terminal | statement
//! rule        := ["?" | "!"] RULE [ "[" attributes "]" ] ":" expansions
//! terminal    := TERMINAL ":" expansions
//! statement   := "%ignore" expansions | "%import" path ["->" NAME | "(" NAME,* ")"]
//!              | "%llguidance" JSON
//! expansions  := alias ((NEWLINE? "|") alias)*
//! alias       := expansion ("&" expansion)* ["->" RULE]
//! expansion   := expr*
//! expr        := atom [OP | "~" NUMBER [".." NUMBER] | "{" [NUMBER] ["," [NUMBER]] "}"]
//! atom        := "~" atom | "(" expansions ")" | "[" expansions "]" | value
//! value       := STRING [".." STRING] | REGEX | NAME | "%json" JSON | "%regex" JSON
//!              | "%lark" "{" items "}" | "<...>" | "@name"
//! ```
//!
//! What the syntax allows but the front-end does not do (templates, priorities,
//! `%override`, `%declare`, parametric rules) is refused here with its location;
//! attributes, `&`, `~`, special tokens and the like are parsed and left to the
//! lowering to accept or refuse.

use super::ast::*;
use super::lexer::{Directive, JsonDirective, Tok, Token};
use super::source::SourceMap;
use crate::frontend::{FrontendError, Limits};

/// Parses a whole grammar.
pub(crate) fn parse_items(tokens: &[Token], map: &SourceMap, limits: &Limits) -> Result<Items> {
    let mut parser = Parser {
        tokens,
        pos: 0,
        map,
        limits,
        depth: 0,
    };
    let items = parser.items(false)?;
    Ok(items)
}

struct Parser<'a> {
    tokens: &'a [Token],
    pos: usize,
    map: &'a SourceMap<'a>,
    limits: &'a Limits,
    depth: usize,
}

type Result<T> = std::result::Result<T, FrontendError>;

const PARAMETRIC: &str = "parametric rules (`name::param` and `%if`)";

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<&'a Tok> {
        self.tokens.get(self.pos).map(|t| &t.tok)
    }

    fn peek_at(&self, ahead: usize) -> Option<&'a Tok> {
        self.tokens.get(self.pos + ahead).map(|t| &t.tok)
    }

    /// Byte offset of the current token (the text's end when there is none).
    fn here(&self) -> usize {
        self.tokens
            .get(self.pos)
            .or(self.tokens.last())
            .map_or(0, |t| t.at)
    }

    fn bump(&mut self) -> Option<&'a Token> {
        let t = self.tokens.get(self.pos);
        self.pos += 1;
        t
    }

    fn eat(&mut self, tok: &Tok) -> bool {
        if self.peek() == Some(tok) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn found(&self) -> String {
        match self.peek() {
            None => "the end of the grammar".into(),
            Some(t) => t.describe(),
        }
    }

    fn expected(&self, what: &str) -> FrontendError {
        self.map.error(
            self.here(),
            format!("expected {what}, found {}", self.found()),
        )
    }

    fn expect(&mut self, tok: &Tok, what: &str) -> Result<()> {
        if self.eat(tok) {
            Ok(())
        } else {
            Err(self.expected(what))
        }
    }

    fn nest(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > self.limits.max_nesting {
            return Err(self.map.error(
                self.here(),
                format!(
                    "the grammar is nested deeper than {}",
                    self.limits.max_nesting
                ),
            ));
        }
        Ok(())
    }

    /// Items up to the end of the text, or up to the `}` closing a `%lark` block.
    fn items(&mut self, nested: bool) -> Result<Items> {
        let mut items = Vec::new();
        loop {
            while self.eat(&Tok::Newline) {}
            match self.peek() {
                None if !nested => return Ok(Items { items }),
                None => return Err(self.expected("`}` closing `%lark {`")),
                Some(Tok::RBrace) if nested => return Ok(Items { items }),
                Some(_) => {}
            }
            items.push(self.item()?);
            match self.peek() {
                Some(Tok::Newline) => {}
                Some(Tok::RBrace) if nested => {}
                None if !nested => {}
                _ => return Err(self.expected("the end of the line")),
            }
        }
    }

    fn item(&mut self) -> Result<Item> {
        let at = self.here();
        match self.peek() {
            Some(Tok::Rule { .. }) => Ok(Item::Rule(Box::new(self.rule()?))),
            // `?rule:` (inlined when it has one child, in Lark's trees).
            Some(Tok::Op(b'?'))
                if matches!(self.peek_at(1), Some(Tok::Rule { .. }))
                    && self.tokens[self.pos].end == self.tokens[self.pos + 1].at =>
            {
                self.pos += 1;
                Ok(Item::Rule(Box::new(self.rule()?)))
            }
            Some(Tok::Terminal(_)) => Ok(Item::Terminal(self.terminal()?)),
            Some(Tok::Directive(Directive::Ignore)) => {
                self.pos += 1;
                let body = self.expansions()?;
                Ok(Item::Ignore { at, body })
            }
            Some(Tok::Directive(Directive::Import)) => {
                self.pos += 1;
                self.import(at)
            }
            Some(Tok::Directive(Directive::Override)) => {
                Err(self.map.unsupported(at, "`%override`"))
            }
            Some(Tok::Directive(Directive::Declare)) => Err(self.map.unsupported(at, "`%declare`")),
            Some(Tok::JsonDirective {
                directive: directive @ (JsonDirective::Llguidance | JsonDirective::GrammarOptions),
                value,
            }) => {
                self.pos += 1;
                Ok(Item::Options {
                    at,
                    spelling: directive.spelling(),
                    value: value.clone(),
                })
            }
            _ => Err(self.expected("a rule, a terminal or a statement")),
        }
    }

    /// The name, then what may sit between it and the `:` that no feature here
    /// supports (templates, priorities, parameters).
    fn definition_head(&mut self) -> Result<(String, usize)> {
        let token = self.bump().ok_or_else(|| self.expected("a name"))?;
        let name = match &token.tok {
            Tok::Rule { name, .. } | Tok::Terminal(name) => name.clone(),
            _ => unreachable!("definition_head is called on a name"),
        };
        match self.peek() {
            Some(Tok::DoubleColon) => return Err(self.map.unsupported(self.here(), PARAMETRIC)),
            Some(Tok::LBrace) => {
                return Err(self
                    .map
                    .unsupported(self.here(), "templates (`name{param}: ...`)"))
            }
            Some(Tok::Dot) => {
                return Err(self
                    .map
                    .unsupported(self.here(), "priorities (`name.2: ...`)"))
            }
            _ => {}
        }
        Ok((name, token.at))
    }

    fn rule(&mut self) -> Result<RuleDef> {
        let (name, at) = self.definition_head()?;
        let attributes = if self.peek() == Some(&Tok::LBracket) {
            self.attributes(&name)?
        } else {
            Attributes::default()
        };
        self.expect(&Tok::Colon, "`:` after the rule name")?;
        let body = self.expansions()?;
        Ok(RuleDef {
            name,
            at,
            attributes,
            body,
        })
    }

    fn terminal(&mut self) -> Result<TerminalDef> {
        let (name, at) = self.definition_head()?;
        if self.peek() == Some(&Tok::LBracket) {
            return Err(self.map.error(
                self.here(),
                "attributes (`[...]`) are for rules, not terminals: write `rule[lazy]: TERMINAL`",
            ));
        }
        self.expect(&Tok::Colon, "`:` after the terminal name")?;
        let body = self.expansions()?;
        Ok(TerminalDef { name, at, body })
    }

    fn attributes(&mut self, rule: &str) -> Result<Attributes> {
        self.expect(&Tok::LBracket, "`[`")?;
        let mut attributes = Attributes::default();
        while self.peek() != Some(&Tok::RBracket) {
            let at = self.here();
            let key = match self.peek() {
                Some(Tok::Rule { name, .. }) => name.clone(),
                _ => return Err(self.expected("an attribute name")),
            };
            self.pos += 1;
            match key.as_str() {
                "lazy" => {
                    attributes.lazy = Some(at);
                }
                "capture" => {
                    let name = if self.eat(&Tok::Equals) {
                        self.plain_string("a capture name")?
                    } else {
                        rule.to_string()
                    };
                    attributes.capture = Some((at, name));
                }
                "stop" | "suffix" => {
                    self.expect(&Tok::Equals, "`=`")?;
                    let value = self.value()?;
                    if attributes.stop.is_some() || attributes.suffix.is_some() {
                        return Err(self.map.error(
                            at,
                            "Cannot have multiple stop/suffix conditions",
                        ));
                    }
                    if key == "stop" {
                        attributes.stop = Some((at, value));
                    } else {
                        attributes.suffix = Some((at, value));
                    }
                }
                "stop_capture" => {
                    self.expect(&Tok::Equals, "`=`")?;
                    let name = self.plain_string("a capture name")?;
                    if attributes.stop_capture.is_some() {
                        return Err(self
                            .map
                            .error(at, "Cannot have multiple stop_capture names"));
                    }
                    attributes.stop_capture = Some((at, name));
                }
                "max_tokens" => {
                    self.expect(&Tok::Equals, "`=`")?;
                    let n = self.integer("a token count")?;
                    if n < 0 {
                        return Err(self.map.error(at, "max_tokens must be >= 0"));
                    }
                    attributes.max_tokens = Some((at, n as u64));
                }
                "temperature" => {
                    self.expect(&Tok::Equals, "`=`")?;
                    let t = match self.peek() {
                        Some(Tok::Number(n)) => n.parse::<f64>().ok(),
                        _ => None,
                    };
                    let Some(t) = t else {
                        return Err(self.expected("a number (the temperature)"));
                    };
                    self.pos += 1;
                    attributes.temperature = Some((at, t));
                }
                _ => {
                    return Err(self.map.error(
                        at,
                        format!(
                            "Unknown attribute: {key} (known: lazy, capture, stop, suffix, stop_capture, max_tokens, temperature)"
                        ),
                    ))
                }
            }
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        self.expect(&Tok::RBracket, "`,` or `]` in the attribute list")?;
        Ok(attributes)
    }

    /// A string without the `i` flag.
    fn plain_string(&mut self, what: &str) -> Result<String> {
        match self.peek() {
            Some(Tok::Str {
                value,
                insensitive: false,
            }) => {
                self.pos += 1;
                Ok(value.clone())
            }
            Some(Tok::Str { .. }) => Err(self
                .map
                .error(self.here(), "flags are not allowed on this string")),
            _ => Err(self.expected(&format!("a string ({what})"))),
        }
    }

    /// A decimal integer (sign allowed), as i64.
    fn integer(&mut self, what: &str) -> Result<i64> {
        let at = self.here();
        let text = match self.peek() {
            Some(Tok::Number(n)) => n.clone(),
            _ => return Err(self.expected(&format!("a number ({what})"))),
        };
        self.pos += 1;
        text.parse::<i64>().map_err(|_| {
            self.map
                .error(at, format!("`{text}` is not an integer ({what})"))
        })
    }

    fn import(&mut self, at: usize) -> Result<Item> {
        let mut module = Vec::new();
        if self.peek() == Some(&Tok::Dot) {
            return Err(self
                .map
                .unsupported(self.here(), "relative imports (`%import .file`)"));
        }
        loop {
            match self.peek() {
                Some(Tok::Rule {
                    name,
                    pinned: false,
                })
                | Some(Tok::Terminal(name)) => {
                    module.push(name.clone());
                    self.pos += 1;
                }
                _ => return Err(self.expected("a module path (`common.NAME`)")),
            }
            if !self.eat(&Tok::Dot) {
                break;
            }
        }
        let mut names = Vec::new();
        if self.eat(&Tok::LParen) {
            loop {
                let name = self.name("a name to import")?;
                names.push((name.clone(), name));
                if !self.eat(&Tok::Comma) {
                    break;
                }
            }
            self.expect(&Tok::RParen, "`)` or `,` in the import list")?;
        } else {
            if module.len() < 2 {
                return Err(self
                    .map
                    .error(at, "`%import` needs `module.NAME` or `module (NAME, ...)`"));
            }
            let name = module.pop().unwrap_or_default();
            let local = if self.eat(&Tok::Arrow) {
                self.name("the local name after `->`")?
            } else {
                name.clone()
            };
            names.push((name, local));
        }
        Ok(Item::Import { at, module, names })
    }

    fn name(&mut self, what: &str) -> Result<String> {
        match self.peek() {
            Some(Tok::Rule {
                name,
                pinned: false,
            })
            | Some(Tok::Terminal(name)) => {
                self.pos += 1;
                Ok(name.clone())
            }
            _ => Err(self.expected(what)),
        }
    }

    fn expansions(&mut self) -> Result<Expansions> {
        self.nest()?;
        let mut alternatives = vec![self.alias()?];
        loop {
            let newline_bar =
                self.peek() == Some(&Tok::Newline) && self.peek_at(1) == Some(&Tok::VBar);
            if newline_bar {
                self.pos += 1;
            }
            if !self.eat(&Tok::VBar) {
                break;
            }
            alternatives.push(self.alias()?);
        }
        self.depth -= 1;
        Ok(Expansions { alternatives })
    }

    fn alias(&mut self) -> Result<Alias> {
        let at = self.here();
        let mut conjuncts = vec![self.sequence()?];
        while self.eat(&Tok::And) {
            conjuncts.push(self.sequence()?);
        }
        if self.eat(&Tok::Arrow) {
            match self.peek() {
                Some(Tok::Rule { .. }) => self.pos += 1,
                _ => return Err(self.expected("a rule name after `->`")),
            }
        }
        if self.peek() == Some(&Tok::Directive(Directive::If)) {
            return Err(self.map.unsupported(self.here(), PARAMETRIC));
        }
        Ok(Alias { at, conjuncts })
    }

    fn sequence(&mut self) -> Result<Sequence> {
        let mut items = Vec::new();
        loop {
            match self.peek() {
                None
                | Some(
                    Tok::Newline
                    | Tok::VBar
                    | Tok::Arrow
                    | Tok::RParen
                    | Tok::RBracket
                    | Tok::RBrace
                    | Tok::And
                    | Tok::Directive(Directive::If),
                ) => break,
                _ => items.push(self.expr()?),
            }
        }
        Ok(Sequence { items })
    }

    fn expr(&mut self) -> Result<ExprNode> {
        let at = self.here();
        let atom = self.atom()?;
        let repeat = match self.peek() {
            Some(Tok::Op(op)) => {
                self.pos += 1;
                Some(match op {
                    b'*' => (0, None),
                    b'+' => (1, None),
                    _ => (0, Some(1)),
                })
            }
            Some(Tok::Tilde) if matches!(self.peek_at(1), Some(Tok::Number(_))) => {
                self.pos += 1;
                let min = self.integer("a repetition count")?;
                let max = if self.eat(&Tok::DotDot) {
                    self.integer("a repetition count")?
                } else {
                    min
                };
                Some(self.bounds(at, min, Some(max))?)
            }
            Some(Tok::LBrace) => {
                self.pos += 1;
                let min = if self.peek() == Some(&Tok::Comma) {
                    0
                } else {
                    self.integer("a repetition count")?
                };
                let max = if self.eat(&Tok::Comma) {
                    if self.peek() == Some(&Tok::RBrace) {
                        None
                    } else {
                        Some(self.integer("a repetition count")?)
                    }
                } else {
                    Some(min)
                };
                self.expect(&Tok::RBrace, "`}` closing the repetition")?;
                Some(self.bounds(at, min, max)?)
            }
            _ => None,
        };
        Ok(ExprNode { at, atom, repeat })
    }

    /// Checks repetition bounds as written.
    fn bounds(&self, at: usize, min: i64, max: Option<i64>) -> Result<(u32, Option<u32>)> {
        if min < 0 {
            return Err(self
                .map
                .error(at, format!("range start must be >= 0, got {min}")));
        }
        if let Some(max) = max {
            if max < min {
                return Err(self.map.error(
                    at,
                    format!("range end must be >= start, got {{{min},{max}}}"),
                ));
            }
        }
        let limit = i64::from(self.limits.max_repetition);
        for n in std::iter::once(min).chain(max) {
            if n > limit {
                return Err(self.map.error(
                    at,
                    format!("repetition count {n} is above the limit of {limit}"),
                ));
            }
        }
        Ok((min as u32, max.map(|m| m as u32)))
    }

    fn atom(&mut self) -> Result<Atom> {
        if self.eat(&Tok::Tilde) {
            self.nest()?;
            let inner = self.atom()?;
            self.depth -= 1;
            return Ok(Atom::Not(Box::new(inner)));
        }
        if self.eat(&Tok::LParen) {
            let body = self.expansions()?;
            self.expect(&Tok::RParen, "`)`")?;
            return Ok(Atom::Group(body));
        }
        if self.eat(&Tok::LBracket) {
            let body = self.expansions()?;
            self.expect(&Tok::RBracket, "`]`")?;
            return Ok(Atom::Maybe(body));
        }
        Ok(Atom::Value(self.value()?))
    }

    fn value(&mut self) -> Result<Value> {
        let at = self.here();
        let Some(tok) = self.peek() else {
            return Err(self.expected("a value"));
        };
        let value = match tok {
            Tok::Str { value, insensitive } => {
                self.pos += 1;
                if self.eat(&Tok::DotDot) {
                    let to = self.plain_string("the end of the range")?;
                    if *insensitive {
                        return Err(self.map.error(at, "flags are not allowed on a range"));
                    }
                    Value::Range {
                        at,
                        from: value.clone(),
                        to,
                    }
                } else {
                    Value::Literal {
                        at,
                        text: value.clone(),
                        insensitive: *insensitive,
                    }
                }
            }
            Tok::Regex { pattern, flags } => {
                self.pos += 1;
                Value::Regex {
                    at,
                    pattern: pattern.clone(),
                    flags: flags.clone(),
                }
            }
            Tok::Rule {
                name,
                pinned: false,
            }
            | Tok::Terminal(name) => {
                self.pos += 1;
                match (self.peek(), self.peek_at(1)) {
                    (Some(Tok::DoubleColon), _) => {
                        return Err(self.map.unsupported(self.here(), PARAMETRIC))
                    }
                    // `{3}`, `{,3}` repeat; any other `{` is a template use.
                    (Some(Tok::LBrace), Some(Tok::Number(_) | Tok::Comma)) => {}
                    (Some(Tok::LBrace), _) => {
                        return Err(self
                            .map
                            .unsupported(self.here(), "templates (`name{value}`)"))
                    }
                    _ => {}
                }
                Value::Name {
                    at,
                    name: name.clone(),
                }
            }
            Tok::JsonDirective {
                directive: JsonDirective::Json,
                value,
            } => {
                self.pos += 1;
                Value::Json {
                    at,
                    schema: value.clone(),
                }
            }
            Tok::JsonDirective {
                directive: JsonDirective::Regex,
                value,
            } => {
                self.pos += 1;
                Value::RegexExt {
                    at,
                    spec: value.clone(),
                }
            }
            Tok::Directive(Directive::Lark) => {
                self.pos += 1;
                self.expect(&Tok::LBrace, "`{` after `%lark`")?;
                self.nest()?;
                let items = self.items(true)?;
                self.depth -= 1;
                self.expect(&Tok::RBrace, "`}` closing `%lark {`")?;
                Value::NestedLark { at, items }
            }
            Tok::SpecialToken(text) => {
                self.pos += 1;
                Value::SpecialToken {
                    at,
                    token: self.token_ref(at, text)?,
                }
            }
            Tok::GrammarRef(name) => {
                self.pos += 1;
                Value::GrammarRef {
                    at,
                    name: name.clone(),
                }
            }
            _ => return Err(self.expected("a value (string, regex, name, `(`, `[` ...)")),
        };
        Ok(value)
    }

    /// The inside of `<...>`: `[ids]` or a token's text.
    fn token_ref(&self, at: usize, text: &str) -> Result<TokenSet> {
        let set = crate::frontend::tokens::parse_token_ref(text)
            .map_err(|message| self.map.error(at, message))?;
        Ok(set.at(self.map.location(at)))
    }
}
