//! A format tree to IR rules.
//!
//! Free text is [`FreeText`]: one lexer terminal per stretch, so masking prose
//! between tool calls is a table lookup. Around it, the constructs are plain
//! sequences, alternatives and repetitions:
//!
//! * `tag`: `begin content end`. Content that runs free (`any_text`,
//!   `triggered_tags`, `dispatch`, `any_tokens`, `token_triggered_tags`) stops at
//!   the tag's end: its free text may not contain an end string (its free tokens
//!   may not be an end token). `any_text` directly before string ends is one
//!   terminal with the ends as its stops.
//! * `triggered_tags`: free text up to the first trigger (text holding no other
//!   trigger and no exclude), then the rest of a tag that begins with that trigger,
//!   repeated, then free text without triggers. `at_least_one` starts with a tag
//!   (no text before it); `stop_after_first` ends after the first tag. So a
//!   trigger in the output always starts a tag: free text cannot swallow it.
//! * `dispatch`: the same, with each pattern followed by its format.
//! * token forms: sets of token ids ([`TokenSet`]), names bound to the vocabulary
//!   when the grammar is compiled.
//! * special-token delimiters ([`StructuralTagOptions::delimiter_tokens`]): a
//!   delimiter that holds a special token's content (`<tool_call>` in Qwen3's
//!   vocabulary) is that text *or* that token, since a model writes the token and
//!   no byte string tokenizes to it. Free text before such a delimiter excludes
//!   its text as usual; the token is excluded from the free tokens. Sub-grammars
//!   get the same (a parameter style's own tags, Gemma 4's string quote): their
//!   literals, and free text stopping at such a text, take the token too.

use std::collections::BTreeMap;

use super::format::{Delimiter, Format, Tag, TokenRef};
use super::{StructuralTagError, StructuralTagOptions};
use crate::frontend::json_schema::{
    self, any_char_hir, JsonSchemaOptions, ParameterStyle, PatternCache, PropertyOrder, Whitespace,
};
use crate::frontend::{gbnf, lark, regex};
use crate::grammar::{
    Expr, FreeText, Grammar, Intersection, Rule, RuleId, TokenBudget, TokenItem, TokenSet,
};

type Result<T> = std::result::Result<T, StructuralTagError>;

/// What follows the format being lowered inside its tag: free content stops there.
#[derive(Default, Clone)]
struct Ends {
    texts: Vec<Vec<u8>>,
    tokens: Vec<TokenRef>,
}

pub(crate) struct Lowering<'a> {
    options: &'a StructuralTagOptions,
    cache: &'a PatternCache,
    rules: Vec<Rule>,
    /// Sub-grammars (schemas, grammars, regexes) by pointer, spliced once.
    spliced: BTreeMap<String, RuleId>,
}

fn error(pointer: &str, message: impl Into<String>) -> StructuralTagError {
    StructuralTagError {
        pointer: pointer.to_string(),
        message: message.into(),
    }
}

fn literal(text: &str) -> Expr {
    Expr::literal(text.as_bytes())
}

fn alt(mut items: Vec<Expr>) -> Expr {
    if items.len() == 1 {
        items.pop().unwrap()
    } else {
        Expr::Alt(items)
    }
}

fn seq(items: Vec<Expr>) -> Expr {
    let mut items: Vec<Expr> = items.into_iter().filter(|e| *e != Expr::Empty).collect();
    match items.len() {
        0 => Expr::Empty,
        1 => items.pop().unwrap(),
        _ => Expr::Seq(items),
    }
}

fn star(expr: Expr) -> Expr {
    Expr::Repeat {
        expr: Box::new(expr),
        min: 0,
        max: None,
    }
}

/// `any_text` holding none of `excludes`: free text, or, with `max_chars`, the
/// strings of at most that many characters that contain no exclude (regular:
/// one intersection terminal); with `max_tokens`, one lexeme with that token
/// budget. A budget of 0 leaves only the empty text.
fn any_text(excludes: Vec<Vec<u8>>, max_tokens: Option<u32>, max_chars: Option<u32>) -> Expr {
    use regex_syntax::hir::{Hir, Repetition};
    if max_tokens == Some(0) || max_chars == Some(0) {
        return Expr::Empty;
    }
    let body = match max_chars {
        None => Expr::Text(Box::new(FreeText::excluding(excludes))),
        Some(max) => {
            let repeat = |min, max| {
                Hir::repetition(Repetition {
                    min,
                    max,
                    greedy: true,
                    sub: Box::new(any_char_hir()),
                })
            };
            let negated = excludes
                .into_iter()
                .map(|e| Hir::concat(vec![repeat(0, None), Hir::literal(e), repeat(0, None)]))
                .collect();
            Expr::Intersection(Box::new(Intersection {
                regexes: vec![repeat(0, Some(max))],
                negated,
            }))
        }
    };
    match max_tokens {
        None => body,
        Some(max_tokens) => Expr::Budget(Box::new(TokenBudget { body, max_tokens })),
    }
}

fn bytes(strings: &[String]) -> Vec<Vec<u8>> {
    strings.iter().map(|s| s.as_bytes().to_vec()).collect()
}

/// Among `tokens` (id, content), those whose content `text` begins with, the
/// longest, and its length.
fn longest_at(tokens: &[&(u32, String)], text: &str) -> Option<(Vec<u32>, usize)> {
    let len = tokens
        .iter()
        .filter(|(_, content)| !content.is_empty() && text.starts_with(content.as_str()))
        .map(|(_, content)| content.len())
        .max()?;
    let ids = tokens
        .iter()
        .filter(|(_, content)| content.len() == len && text.starts_with(content.as_str()))
        .map(|(id, _)| *id)
        .collect();
    Some((ids, len))
}

fn token_set(tokens: &[TokenRef], negated: bool) -> TokenSet {
    let mut set = TokenSet::ids(Vec::new());
    set.items = tokens
        .iter()
        .map(|t| match t {
            TokenRef::Id(id) => TokenItem::Ids(*id, *id),
            TokenRef::Name(name) => TokenItem::Named(name.clone()),
        })
        .collect();
    set.negated = negated;
    set
}

impl<'a> Lowering<'a> {
    pub fn new(options: &'a StructuralTagOptions, cache: &'a PatternCache) -> Lowering<'a> {
        Lowering {
            options,
            cache,
            rules: Vec::new(),
            spliced: BTreeMap::new(),
        }
    }

    /// The grammar of `format`, its start a rule of its own.
    pub fn finish(mut self, format: &Format) -> Result<Grammar> {
        let root = RuleId(0);
        self.rules.push(Rule {
            name: "structural_tag".into(),
            expr: Expr::Empty,
            location: None,
        });
        let expr = self.lower(format, &Ends::default())?;
        self.rules[0].expr = expr;
        Ok(Grammar {
            rules: self.rules,
            root,
        })
    }

    /// A rule named `name` for `expr` (so a construct used twice is built once).
    fn rule(&mut self, name: String, expr: Expr) -> Expr {
        let id = RuleId(self.rules.len() as u32);
        self.rules.push(Rule {
            name,
            expr,
            location: None,
        });
        Expr::Ref(id)
    }

    fn lower(&mut self, format: &Format, ends: &Ends) -> Result<Expr> {
        Ok(match format {
            Format::ConstString(value) => self.spelled(value),
            Format::JsonSchema {
                schema,
                any_order,
                style,
                max_whitespace,
                pointer,
            } => self.json_schema(schema, *any_order, *style, *max_whitespace, pointer)?,
            Format::Grammar { text, pointer } => self.grammar(text, pointer)?,
            Format::Regex { pattern, pointer } => {
                let grammar = regex::parse(pattern, &self.options.limits)
                    .map_err(|e| error(pointer, format!("invalid regex: {e}")))?;
                self.splice(pointer, grammar)
            }
            Format::AnyText {
                excludes,
                max_tokens,
                max_chars,
            } => {
                let mut excludes = bytes(excludes);
                excludes.extend(ends.texts.iter().cloned());
                excludes.sort();
                excludes.dedup();
                any_text(excludes, *max_tokens, *max_chars)
            }
            Format::Sequence(elements) => {
                let last = elements.len() - 1;
                let mut items = Vec::with_capacity(elements.len());
                for (i, element) in elements.iter().enumerate() {
                    let inner = if i == last {
                        ends.clone()
                    } else {
                        Ends::default()
                    };
                    items.push(self.lower(element, &inner)?);
                }
                seq(items)
            }
            Format::Or(elements) => alt(elements
                .iter()
                .map(|e| self.lower(e, ends))
                .collect::<Result<Vec<_>>>()?),
            Format::Repeat { content, min, max } => Expr::Repeat {
                expr: Box::new(self.lower(content, &Ends::default())?),
                min: *min,
                max: *max,
            },
            Format::Tag(tag) => self.tag(tag)?,
            Format::TriggeredTags {
                triggers,
                tags,
                excludes,
                at_least_one,
                stop_after_first,
            } => self.triggered_tags(
                triggers,
                tags,
                excludes,
                ends,
                *at_least_one,
                *stop_after_first,
            )?,
            Format::Dispatch {
                rules,
                looping,
                excludes,
            } => {
                let mut stretches = Vec::new();
                for (pattern, format) in rules {
                    let then = self.lower(format, &Ends::default())?;
                    stretches.push((pattern.clone(), then));
                }
                let patterns: Vec<String> = rules.iter().map(|(p, _)| p.clone()).collect();
                self.free_dispatch(stretches, &patterns, excludes, ends, None, false, !looping)
            }
            Format::TagsWithSeparator {
                tags,
                separator,
                at_least_one,
                stop_after_first,
            } => {
                let items = self.first_tag(tags)?.expect("at least one tag");
                let list = if *stop_after_first {
                    items
                } else {
                    let more = star(seq(vec![self.spelled(separator), items.clone()]));
                    seq(vec![items, more])
                };
                if *at_least_one {
                    list
                } else {
                    Expr::optional(list)
                }
            }
            Format::Tokens {
                tokens,
                negated,
                repeated,
                max_tokens,
            } => tokens_expr(tokens, *negated, *repeated, *max_tokens, ends),
            Format::TokenTriggeredTags {
                triggers,
                tags,
                excludes,
                at_least_one,
                stop_after_first,
            } => {
                let mut blocked = triggers.clone();
                blocked.extend(excludes.iter().cloned());
                blocked.extend(ends.tokens.iter().cloned());
                let free = star(Expr::Tokens(token_set(&blocked, true)));
                let tag = self.first_tag(tags)?.expect("at least one tag");
                self.token_dispatch(free, tag, *at_least_one, *stop_after_first)
            }
            Format::TokenDispatch {
                rules,
                looping,
                excludes,
            } => self.token_dispatch_rules(rules, *looping, excludes, ends)?,
        })
    }

    /// `triggered_tags`: free text until a trigger, then a tag that begins
    /// with it (the trigger's rest, the content, the end).
    fn triggered_tags(
        &mut self,
        triggers: &[String],
        tags: &[Tag],
        excludes: &[String],
        ends: &Ends,
        at_least_one: bool,
        stop_after_first: bool,
    ) -> Result<Expr> {
        let mut stretches = Vec::new();
        for trigger in triggers {
            let mut rests = Vec::new();
            for tag in tags {
                let Delimiter::Text(begin) = &tag.begin else {
                    unreachable!("checked when read")
                };
                if let Some(rest) = begin.strip_prefix(trigger.as_str()) {
                    let rest = self.spelled(rest);
                    rests.push(seq(vec![rest, self.content_and_end(tag)?]));
                }
            }
            if !rests.is_empty() {
                stretches.push((trigger.clone(), alt(rests)));
            }
        }
        let first = self.first_tag(tags)?;
        Ok(self.free_dispatch(
            stretches,
            triggers,
            excludes,
            ends,
            first,
            at_least_one,
            stop_after_first,
        ))
    }

    /// `token_dispatch`: tokens other than the rules' (and the excludes and
    /// ends) are free; a rule's token is followed by its format.
    fn token_dispatch_rules(
        &mut self,
        rules: &[(TokenRef, Format)],
        looping: bool,
        excludes: &[TokenRef],
        ends: &Ends,
    ) -> Result<Expr> {
        let mut blocked: Vec<TokenRef> = rules.iter().map(|(t, _)| t.clone()).collect();
        blocked.extend(excludes.iter().cloned());
        blocked.extend(ends.tokens.iter().cloned());
        let free = star(Expr::Tokens(token_set(&blocked, true)));
        let mut dispatched = Vec::new();
        for (token, format) in rules {
            let then = self.lower(format, &Ends::default())?;
            dispatched.push(seq(vec![
                Expr::Tokens(token_set(std::slice::from_ref(token), false)),
                then,
            ]));
        }
        Ok(self.token_dispatch(free, alt(dispatched), false, !looping))
    }

    /// Any one of `tags`, whole (`None` for no tags).
    fn first_tag(&mut self, tags: &[Tag]) -> Result<Option<Expr>> {
        if tags.is_empty() {
            return Ok(None);
        }
        let tags = tags
            .iter()
            .map(|t| self.tag(t))
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(self.rule("tags".into(), alt(tags))))
    }

    fn tag(&mut self, tag: &Tag) -> Result<Expr> {
        let begin = self.delimiter(&tag.begin);
        Ok(seq(vec![begin, self.content_and_end(tag)?]))
    }

    fn delimiter(&self, delimiter: &Delimiter) -> Expr {
        match delimiter {
            Delimiter::Text(text) => self.spelled(text),
            Delimiter::Token(token) => Expr::Tokens(token_set(std::slice::from_ref(token), false)),
        }
    }

    /// `text` as IR: each part of it that is the content of a special token
    /// ([`StructuralTagOptions::delimiter_tokens`]) is that text or that token.
    fn spelled(&self, text: &str) -> Expr {
        let held: Vec<&(u32, String)> = self
            .options
            .delimiter_tokens
            .iter()
            .filter(|(_, content)| !content.is_empty() && text.contains(content.as_str()))
            .collect();
        if held.is_empty() {
            return literal(text);
        }
        let (mut items, mut plain, mut at) = (Vec::new(), 0, 0);
        while at < text.len() {
            match longest_at(&held, &text[at..]) {
                Some((ids, len)) => {
                    items.push(literal(&text[plain..at]));
                    let token =
                        Expr::Tokens(TokenSet::ids(ids.iter().map(|&id| (id, id)).collect()));
                    items.push(alt(vec![literal(&text[at..at + len]), token]));
                    at += len;
                    plain = at;
                }
                None => at += text[at..].chars().next().map_or(1, char::len_utf8),
            }
        }
        items.push(literal(&text[plain..]));
        seq(items)
    }

    /// `expr` (of a sub-grammar: a schema in a parameter style writes tags of
    /// its own) with each literal [`Lowering::spelled`], and free text that
    /// stops at a special token's text also stopped by the token.
    fn respelled(&self, expr: Expr) -> Expr {
        let holds_token = |text: &str| {
            self.options
                .delimiter_tokens
                .iter()
                .any(|(_, content)| !content.is_empty() && text.contains(content.as_str()))
        };
        match expr {
            Expr::Regex(h) => match h.kind() {
                regex_syntax::hir::HirKind::Literal(lit) => match std::str::from_utf8(&lit.0) {
                    Ok(text) if holds_token(text) => self.spelled(text),
                    _ => Expr::Regex(h),
                },
                _ => Expr::Regex(h),
            },
            Expr::Text(free) => {
                let token_stops: Vec<&str> = free
                    .stops
                    .iter()
                    .filter_map(|stop| std::str::from_utf8(stop).ok())
                    .filter(|stop| holds_token(stop))
                    .collect();
                if token_stops.is_empty() {
                    return Expr::Text(free);
                }
                // Text holding no stop, then a stop spelled either way; the
                // other stops end the text as before.
                let mut inside = free.excludes.clone();
                inside.extend(free.stops.iter().cloned());
                let mut alts = vec![Expr::Text(free.clone())];
                for stop in token_stops {
                    alts.push(seq(vec![
                        Expr::Text(Box::new(FreeText::excluding(inside.clone()))),
                        self.spelled(stop),
                    ]));
                }
                alt(alts)
            }
            Expr::Seq(items) => Expr::Seq(items.into_iter().map(|e| self.respelled(e)).collect()),
            Expr::Alt(items) => Expr::Alt(items.into_iter().map(|e| self.respelled(e)).collect()),
            Expr::Repeat { expr, min, max } => Expr::Repeat {
                expr: Box::new(self.respelled(*expr)),
                min,
                max,
            },
            Expr::Permutation(mut p) => {
                p.members = std::mem::take(&mut p.members)
                    .into_iter()
                    .map(|e| self.respelled(e))
                    .collect();
                p.extra = p.extra.take().map(|e| self.respelled(e));
                p.separator = self.respelled(std::mem::replace(&mut p.separator, Expr::Empty));
                Expr::Permutation(p)
            }
            other => other,
        }
    }

    /// The special tokens `text` begins with (the longest content) and its
    /// length.
    fn leading_token(&self, text: &str) -> Option<(Vec<u32>, usize)> {
        let held: Vec<&(u32, String)> = self.options.delimiter_tokens.iter().collect();
        longest_at(&held, text)
    }

    /// A tag's content and its end; free content stops at the end.
    fn content_and_end(&mut self, tag: &Tag) -> Result<Expr> {
        let mut ends = Ends::default();
        let mut no_end = false;
        for end in &tag.ends {
            match end {
                Delimiter::Text(text) if text.is_empty() => no_end = true,
                Delimiter::Text(text) => {
                    ends.texts.push(text.as_bytes().to_vec());
                    // Free tokens stop where the end's special token would go.
                    if let Some((ids, _)) = self.leading_token(text) {
                        ends.tokens.extend(ids.into_iter().map(TokenRef::Id));
                    }
                }
                Delimiter::Token(token) => ends.tokens.push(token.clone()),
            }
        }
        // Free text right before string ends: one terminal, the ends its stops
        // (not with a budget: that counts the content's tokens, not the end's).
        if let Format::AnyText {
            excludes,
            max_tokens: None,
            max_chars: None,
        } = &*tag.content
        {
            if !no_end && ends.tokens.is_empty() {
                return Ok(Expr::Text(Box::new(FreeText {
                    excludes: bytes(excludes),
                    stops: ends.texts,
                })));
            }
        }
        let content = self.lower(&tag.content, &ends)?;
        let end = alt(tag.ends.iter().map(|e| self.delimiter(e)).collect());
        Ok(seq(vec![content, end]))
    }

    /// Free text with dispatch on patterns: `stretches` pairs each pattern with
    /// what follows it. The free text before a pattern holds no other pattern,
    /// no exclude and no end of the enclosing tag.
    #[allow(clippy::too_many_arguments)]
    fn free_dispatch(
        &mut self,
        stretches: Vec<(String, Expr)>,
        patterns: &[String],
        excludes: &[String],
        ends: &Ends,
        first_tag: Option<Expr>,
        at_least_one: bool,
        stop_after_first: bool,
    ) -> Expr {
        let mut blocked = bytes(excludes);
        blocked.extend(ends.texts.iter().cloned());
        let mut dispatched = Vec::new();
        for (pattern, then) in stretches {
            // A pattern that begins with a special token: the text before it
            // holds no pattern at all, then comes the token.
            if let Some((ids, len)) = self.leading_token(&pattern) {
                let mut excludes = blocked.clone();
                excludes.extend(bytes(patterns));
                let token = Expr::Tokens(TokenSet::ids(ids.iter().map(|&id| (id, id)).collect()));
                dispatched.push(seq(vec![
                    Expr::Text(Box::new(FreeText::excluding(excludes))),
                    token,
                    self.spelled(&pattern[len..]),
                    then.clone(),
                ]));
            }
            let mut excludes = blocked.clone();
            excludes.extend(
                patterns
                    .iter()
                    .filter(|p| **p != pattern)
                    .map(|p| p.as_bytes().to_vec()),
            );
            let until = Expr::Text(Box::new(FreeText {
                excludes,
                stops: vec![pattern.into_bytes()],
            }));
            dispatched.push(seq(vec![until, then]));
        }
        let dispatched = self.rule("dispatched".into(), alt(dispatched));
        let mut final_excludes = blocked;
        final_excludes.extend(bytes(patterns));
        let free = Expr::Text(Box::new(FreeText::excluding(final_excludes)));
        match (at_least_one, stop_after_first, first_tag) {
            (true, true, Some(first)) => first,
            (true, false, Some(first)) => seq(vec![first, star(dispatched), free]),
            (_, true, _) => alt(vec![free, dispatched]),
            (_, false, _) => seq(vec![star(dispatched), free]),
        }
    }

    /// Free tokens with dispatch on tokens (`dispatched` starts with one).
    fn token_dispatch(
        &mut self,
        free: Expr,
        dispatched: Expr,
        at_least_one: bool,
        stop_after_first: bool,
    ) -> Expr {
        let dispatched = self.rule("token dispatched".into(), dispatched);
        let free_then = seq(vec![free.clone(), dispatched.clone()]);
        match (at_least_one, stop_after_first) {
            (true, true) => dispatched,
            (true, false) => seq(vec![dispatched, star(free_then), free]),
            (false, true) => alt(vec![free.clone(), free_then]),
            (false, false) => seq(vec![star(free_then), free]),
        }
    }

    fn json_schema(
        &mut self,
        schema: &serde_json::Value,
        any_order: bool,
        style: Option<ParameterStyle>,
        max_whitespace: Option<u32>,
        pointer: &str,
    ) -> Result<Expr> {
        let options = JsonSchemaOptions {
            property_order: if any_order {
                PropertyOrder::Any
            } else {
                self.options.json.property_order
            },
            whitespace: max_whitespace.map_or(self.options.json.whitespace, |count| {
                Whitespace::AtMost { count }
            }),
            ..self.options.json.clone()
        };
        let (grammar, _) = match style {
            None => json_schema::compile_schema_with(schema, &options, self.cache),
            Some(style) => {
                json_schema::compile_parameters_with(schema, style, &options, self.cache)
            }
        }
        .map_err(|e| error(pointer, format!("failed to compile JSON schema: {e}")))?;
        Ok(self.splice(pointer, grammar))
    }

    /// XGrammar's EBNF (`root ::= ...`) is GBNF; anything else is read as Lark.
    fn grammar(&mut self, text: &str, pointer: &str) -> Result<Expr> {
        let grammar = if text.contains("::=") {
            gbnf::parse(text, &gbnf::GbnfOptions::default())
        } else {
            lark::parse(text, &lark::LarkOptions::default())
        }
        .map_err(|e| error(pointer, format!("invalid grammar: {e}")))?;
        Ok(self.splice(pointer, grammar))
    }

    fn splice(&mut self, pointer: &str, mut grammar: Grammar) -> Expr {
        if let Some(&root) = self.spliced.get(pointer) {
            return Expr::Ref(root);
        }
        if !self.options.delimiter_tokens.is_empty() {
            for rule in &mut grammar.rules {
                let expr = std::mem::replace(&mut rule.expr, Expr::Empty);
                rule.expr = self.respelled(expr);
            }
        }
        let root = grammar.splice_into(&format!("{pointer}/"), None, &mut self.rules);
        self.spliced.insert(pointer.to_string(), root);
        Expr::Ref(root)
    }
}

/// `token`, `exclude_token` or `any_tokens`: one token of a set (the ends'
/// tokens excluded too where the set is negated), or a run of them.
fn tokens_expr(
    tokens: &[TokenRef],
    negated: bool,
    repeated: bool,
    max_tokens: Option<u32>,
    ends: &Ends,
) -> Expr {
    let mut tokens = tokens.to_vec();
    if negated {
        tokens.extend(ends.tokens.iter().cloned());
    }
    let one = Expr::Tokens(token_set(&tokens, negated));
    match (repeated, max_tokens) {
        (false, _) => one,
        (true, None) => star(one),
        (true, Some(max)) => Expr::Repeat {
            expr: Box::new(one),
            min: 0,
            max: Some(max),
        },
    }
}
