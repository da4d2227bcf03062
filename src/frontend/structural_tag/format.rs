//! The format tree: a structural tag's JSON read into types, every field checked.
//!
//! Reading is separate from lowering so that a request's shape errors (a missing
//! `content`, `max: -2`, an unknown key) are reported by JSON pointer before any
//! grammar is built, and so lowering matches on types, not on JSON.

use serde_json::{Map, Value};

use super::StructuralTagError;
use crate::frontend::json_schema::ParameterStyle;

type Result<T> = std::result::Result<T, StructuralTagError>;

/// One format object.
#[derive(Debug, Clone)]
pub(crate) enum Format {
    ConstString(String),
    JsonSchema {
        schema: Value,
        any_order: bool,
        /// `None`: JSON; else the tool-call parameter style of the root object.
        style: Option<ParameterStyle>,
        /// At most this many whitespace characters per gap (`max_whitespace_cnt`);
        /// `None`: the options' whitespace.
        max_whitespace: Option<u32>,
        pointer: String,
    },
    /// GBNF (XGrammar's EBNF, `root ::= ...`) or Lark.
    Grammar {
        text: String,
        pointer: String,
    },
    Regex {
        pattern: String,
        pointer: String,
    },
    /// Free text; with budgets, it ends once it has spent `max_tokens` tokens
    /// or holds `max_chars` characters, and what follows comes next.
    AnyText {
        excludes: Vec<String>,
        max_tokens: Option<u32>,
        max_chars: Option<u32>,
    },
    Sequence(Vec<Format>),
    Or(Vec<Format>),
    Repeat {
        content: Box<Format>,
        min: u32,
        max: Option<u32>,
    },
    Tag(Tag),
    TriggeredTags {
        triggers: Vec<String>,
        tags: Vec<Tag>,
        excludes: Vec<String>,
        at_least_one: bool,
        stop_after_first: bool,
    },
    TagsWithSeparator {
        tags: Vec<Tag>,
        separator: String,
        at_least_one: bool,
        stop_after_first: bool,
    },
    /// Free text; where a pattern appears, its format follows.
    Dispatch {
        rules: Vec<(String, Format)>,
        looping: bool,
        excludes: Vec<String>,
    },
    /// One token from a set (`token`, `exclude_token`), or any number of them
    /// (`any_tokens`).
    Tokens {
        tokens: Vec<TokenRef>,
        negated: bool,
        repeated: bool,
        /// At most this many repetitions (`any_tokens`' `max_tokens`).
        max_tokens: Option<u32>,
    },
    TokenTriggeredTags {
        triggers: Vec<TokenRef>,
        tags: Vec<Tag>,
        excludes: Vec<TokenRef>,
        at_least_one: bool,
        stop_after_first: bool,
    },
    TokenDispatch {
        rules: Vec<(TokenRef, Format)>,
        looping: bool,
        excludes: Vec<TokenRef>,
    },
}

/// `begin content end`.
#[derive(Debug, Clone)]
pub(crate) struct Tag {
    pub begin: Delimiter,
    pub content: Box<Format>,
    /// One or more ends (`end: ["</a>", "</b>"]`); `""` is no end.
    pub ends: Vec<Delimiter>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Delimiter {
    Text(String),
    Token(TokenRef),
}

/// A token by id or by its text in the vocabulary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TokenRef {
    Id(u32),
    Name(String),
}

fn error(pointer: &str, message: impl Into<String>) -> StructuralTagError {
    StructuralTagError {
        pointer: pointer.to_string(),
        message: message.into(),
    }
}

/// A JSON object's fields, read once each; what is left unread is an error.
struct Fields<'a> {
    object: &'a Map<String, Value>,
    pointer: &'a str,
    read: Vec<&'static str>,
}

impl<'a> Fields<'a> {
    fn new(value: &'a Value, pointer: &'a str, what: &str) -> Result<Fields<'a>> {
        match value {
            Value::Object(object) => Ok(Fields {
                object,
                pointer,
                read: vec!["type"],
            }),
            _ => Err(error(pointer, format!("{what} must be a JSON object"))),
        }
    }

    fn at(&self, key: &str) -> String {
        format!("{}/{key}", self.pointer)
    }

    fn get(&mut self, key: &'static str) -> Option<&'a Value> {
        self.read.push(key);
        self.object.get(key).filter(|v| !v.is_null())
    }

    fn required(&mut self, key: &'static str) -> Result<&'a Value> {
        let pointer = self.at(key);
        self.get(key)
            .ok_or_else(|| error(&pointer, format!("`{key}` is required")))
    }

    fn string(&mut self, key: &'static str) -> Result<String> {
        let pointer = self.at(key);
        match self.required(key)? {
            Value::String(s) => Ok(s.clone()),
            _ => Err(error(&pointer, "must be a string")),
        }
    }

    fn flag(&mut self, key: &'static str) -> Result<bool> {
        let pointer = self.at(key);
        match self.get(key) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(error(&pointer, "must be true or false")),
        }
    }

    fn strings(&mut self, key: &'static str) -> Result<Vec<String>> {
        let pointer = self.at(key);
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| match v {
                    Value::String(s) => Ok(s.clone()),
                    _ => Err(error(&format!("{pointer}/{i}"), "must be a string")),
                })
                .collect(),
            Some(_) => Err(error(&pointer, "must be an array of strings")),
        }
    }

    fn tokens(&mut self, key: &'static str) -> Result<Vec<TokenRef>> {
        let pointer = self.at(key);
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| token_ref(v, &format!("{pointer}/{i}")))
                .collect(),
            Some(_) => Err(error(&pointer, "must be an array of token ids or strings")),
        }
    }

    /// Refuses keys nobody read.
    fn finish(self) -> Result<()> {
        for key in self.object.keys() {
            if !self.read.contains(&key.as_str()) {
                return Err(error(
                    &format!("{}/{key}", self.pointer),
                    format!(
                        "unknown field `{key}` (known: {})",
                        self.read[1..].join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }
}

fn token_ref(value: &Value, pointer: &str) -> Result<TokenRef> {
    match value {
        Value::String(s) => Ok(TokenRef::Name(s.clone())),
        Value::Number(n) => n
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .map(TokenRef::Id)
            .ok_or_else(|| error(pointer, "a token id must be a non-negative integer")),
        _ => Err(error(
            pointer,
            "a token is an id (integer) or its text (string)",
        )),
    }
}

/// Reads the format at `pointer`.
pub(crate) fn read(value: &Value, pointer: &str) -> Result<Format> {
    let Some(kind) = value.get("type") else {
        return Err(error(pointer, "a format needs a `type`"));
    };
    let Some(kind) = kind.as_str() else {
        return Err(error(&format!("{pointer}/type"), "must be a string"));
    };
    if kind == "tag" {
        return Ok(Format::Tag(read_tag(value, pointer)?));
    }
    let mut f = Fields::new(value, pointer, "a format")?;
    let format = match kind {
        "const_string" => Format::ConstString(f.string("value")?),
        "json_schema" | "qwen_xml_parameter" => read_json_schema(&mut f, kind)?,
        "grammar" => Format::Grammar {
            text: f.string("grammar")?,
            pointer: f.at("grammar"),
        },
        "regex" => Format::Regex {
            pattern: f.string("pattern")?,
            pointer: f.at("pattern"),
        },
        "any_text" => read_any_text(&mut f)?,
        "sequence" | "or" => read_elements(&mut f, kind)?,
        "optional" | "plus" | "star" | "repeat" => read_repeat(&mut f, kind)?,
        "triggered_tags" => read_triggered_tags(&mut f)?,
        "tags_with_separator" => Format::TagsWithSeparator {
            tags: tags(&mut f)?,
            separator: f.string("separator")?,
            at_least_one: f.flag("at_least_one")?,
            stop_after_first: f.flag("stop_after_first")?,
        },
        "dispatch" | "token_dispatch" => read_dispatch(&mut f, kind)?,
        "token" => Format::Tokens {
            tokens: vec![token_ref(f.required("token")?, &f.at("token"))?],
            negated: false,
            repeated: false,
            max_tokens: None,
        },
        "exclude_token" => Format::Tokens {
            tokens: f.tokens("exclude_tokens")?,
            negated: true,
            repeated: false,
            max_tokens: None,
        },
        "any_tokens" => Format::Tokens {
            tokens: f.tokens("exclude_tokens")?,
            negated: true,
            repeated: true,
            max_tokens: length_budget(&mut f, "max_tokens")?,
        },
        "token_triggered_tags" => read_token_triggered_tags(&mut f)?,
        other => {
            return Err(error(
                &format!("{pointer}/type"),
                format!("unknown format type `{other}` (known: const_string, json_schema, grammar, regex, any_text, sequence, or, optional, plus, star, repeat, tag, triggered_tags, tags_with_separator, dispatch, token, exclude_token, any_tokens, token_triggered_tags, token_dispatch)"),
            ))
        }
    };
    f.finish()?;
    Ok(format)
}

/// `json_schema` (with its `style`), or XGrammar's older `qwen_xml_parameter`
/// (the `qwen_xml` style).
fn read_json_schema(f: &mut Fields<'_>, kind: &str) -> Result<Format> {
    let schema = f.required("json_schema")?.clone();
    if !schema.is_object() && !schema.is_boolean() {
        return Err(error(
            &f.at("json_schema"),
            "must be a JSON Schema (an object or a boolean)",
        ));
    }
    let mut style = (kind == "qwen_xml_parameter").then_some(ParameterStyle::Qwen);
    let style_field = if kind == "json_schema" {
        f.get("style")
    } else {
        None
    };
    if let Some(value) = style_field {
        style = match value.as_str() {
            Some("json") => None,
            Some(name) => match ParameterStyle::from_name(name) {
                Some(style) => Some(style),
                None => {
                    let known: Vec<&str> = ParameterStyle::ALL.iter().map(|s| s.name()).collect();
                    return Err(error(
                        &f.at("style"),
                        format!("unknown style (known: json, {})", known.join(", ")),
                    ));
                }
            },
            None => return Err(error(&f.at("style"), "must be a string")),
        };
    }
    let max_whitespace = match f.get("max_whitespace_cnt") {
        Some(value) => count(value, &f.at("max_whitespace_cnt"), false)?,
        None => None,
    };
    Ok(Format::JsonSchema {
        schema,
        any_order: f.flag("any_order")?,
        style,
        max_whitespace,
        pointer: f.at("json_schema"),
    })
}

fn read_any_text(f: &mut Fields<'_>) -> Result<Format> {
    let max_chars = length_budget(f, "max_chars")?;
    if max_chars.is_some_and(|n| n > MAX_CHARS) {
        return Err(error(
            &f.at("max_chars"),
            format!("above {MAX_CHARS} is not supported"),
        ));
    }
    Ok(Format::AnyText {
        excludes: f.strings("excludes")?,
        max_tokens: length_budget(f, "max_tokens")?,
        max_chars,
    })
}

/// `sequence` or `or`: a non-empty list of formats.
fn read_elements(f: &mut Fields<'_>, kind: &str) -> Result<Format> {
    let at = f.at("elements");
    let elements = match f.required("elements")? {
        Value::Array(items) if !items.is_empty() => items
            .iter()
            .enumerate()
            .map(|(i, v)| read(v, &format!("{at}/{i}")))
            .collect::<Result<Vec<_>>>()?,
        Value::Array(_) => return Err(error(&at, "must not be empty")),
        _ => return Err(error(&at, "must be an array of formats")),
    };
    Ok(match kind {
        "sequence" => Format::Sequence(elements),
        _ => Format::Or(elements),
    })
}

/// `optional`, `plus`, `star`, or `repeat` with its `min` and `max`.
fn read_repeat(f: &mut Fields<'_>, kind: &str) -> Result<Format> {
    let at = f.at("content");
    let content = Box::new(read(f.required("content")?, &at)?);
    let (min, max) = match kind {
        "optional" => (0, Some(1)),
        "plus" => (1, None),
        "star" => (0, None),
        _ => {
            let min = count(f.required("min")?, &f.at("min"), false)?
                .ok_or_else(|| error(&f.at("min"), "must be a count (>= 0)"))?;
            let max = count(f.required("max")?, &f.at("max"), true)?;
            if max.is_some_and(|max| max < min) {
                return Err(error(
                    &f.at("max"),
                    format!("must be at least `min` ({min}), or -1 for no bound"),
                ));
            }
            (min, max)
        }
    };
    Ok(Format::Repeat { content, min, max })
}

/// `triggered_tags`: each tag's begin starts with exactly one trigger.
fn read_triggered_tags(f: &mut Fields<'_>) -> Result<Format> {
    let triggers = f.strings("triggers")?;
    if triggers.is_empty() || triggers.iter().any(String::is_empty) {
        return Err(error(
            &f.at("triggers"),
            "needs at least one trigger, none empty",
        ));
    }
    let tags = tags(f)?;
    for (i, tag) in tags.iter().enumerate() {
        let at = format!("{}/{i}/begin", f.at("tags"));
        let Delimiter::Text(begin) = &tag.begin else {
            return Err(error(&at, "a tag of `triggered_tags` begins with a string"));
        };
        let starting = triggers
            .iter()
            .filter(|t| begin.starts_with(t.as_str()))
            .count();
        if starting != 1 {
            return Err(error(
                &at,
                format!("the begin {begin:?} must start with exactly one trigger (it starts with {starting})"),
            ));
        }
    }
    Ok(Format::TriggeredTags {
        triggers,
        tags,
        excludes: f.strings("excludes")?,
        at_least_one: f.flag("at_least_one")?,
        stop_after_first: f.flag("stop_after_first")?,
    })
}

/// `dispatch` ([pattern, format] rules) or `token_dispatch` ([token, format]).
fn read_dispatch(f: &mut Fields<'_>, kind: &str) -> Result<Format> {
    let at = f.at("rules");
    let Value::Array(items) = f.required("rules")? else {
        return Err(error(&at, "must be an array of [pattern, format] pairs"));
    };
    let looping = match f.get("loop") {
        None => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(error(&f.at("loop"), "must be true or false")),
    };
    let pairs = items.iter().enumerate().map(|(i, item)| {
        let at = format!("{at}/{i}");
        (item.as_array().map(Vec::as_slice), at)
    });
    if kind == "dispatch" {
        let mut rules = Vec::new();
        for (pair, at) in pairs {
            match pair {
                Some([Value::String(p), format]) if !p.is_empty() => {
                    rules.push((p.clone(), read(format, &format!("{at}/1"))?))
                }
                _ => {
                    return Err(error(
                        &at,
                        "must be a pair [pattern (a non-empty string), format]",
                    ))
                }
            }
        }
        return Ok(Format::Dispatch {
            rules,
            looping,
            excludes: f.strings("excludes")?,
        });
    }
    let mut rules = Vec::new();
    for (pair, at) in pairs {
        match pair {
            Some([token, format]) => rules.push((
                token_ref(token, &format!("{at}/0"))?,
                read(format, &format!("{at}/1"))?,
            )),
            _ => return Err(error(&at, "must be a pair [token, format]")),
        }
    }
    Ok(Format::TokenDispatch {
        rules,
        looping,
        excludes: f.tokens("exclude_tokens")?,
    })
}

/// `token_triggered_tags`: each tag begins with one of the trigger tokens.
fn read_token_triggered_tags(f: &mut Fields<'_>) -> Result<Format> {
    let triggers = f.tokens("trigger_tokens")?;
    if triggers.is_empty() {
        return Err(error(
            &f.at("trigger_tokens"),
            "needs at least one trigger token",
        ));
    }
    let tags = tags(f)?;
    for (i, tag) in tags.iter().enumerate() {
        if !matches!(&tag.begin, Delimiter::Token(t) if triggers.contains(t)) {
            return Err(error(
                &format!("{}/{i}/begin", f.at("tags")),
                "a tag of `token_triggered_tags` begins with one of the trigger tokens",
            ));
        }
    }
    Ok(Format::TokenTriggeredTags {
        triggers,
        tags,
        excludes: f.tokens("exclude_tokens")?,
        at_least_one: f.flag("at_least_one")?,
        stop_after_first: f.flag("stop_after_first")?,
    })
}

/// Largest `any_text.max_chars` built: the count is computed (a counter whose
/// positions carry the excludes' automaton), so this bounds the state numbers,
/// not memory.
const MAX_CHARS: u32 = 1 << 20;

/// `max_tokens` / `max_chars`: absent (or null), or 0 to 2^31 - 1 (XGrammar's
/// range).
fn length_budget(f: &mut Fields<'_>, key: &'static str) -> Result<Option<u32>> {
    match f.get(key) {
        None => Ok(None),
        Some(value) => match value.as_u64() {
            Some(n) if n <= i32::MAX as u64 => Ok(Some(n as u32)),
            _ => Err(error(&f.at(key), "must be a non-negative 32-bit integer")),
        },
    }
}

/// `min`/`max` of `repeat`: a count, or `-1` for no bound where `unbounded`.
fn count(value: &Value, pointer: &str, unbounded: bool) -> Result<Option<u32>> {
    match value.as_i64() {
        Some(-1) if unbounded => Ok(None),
        Some(n) if n >= 0 => u32::try_from(n)
            .map(Some)
            .map_err(|_| error(pointer, "is too large")),
        _ => Err(error(
            pointer,
            if unbounded {
                "must be a count (>= 0) or -1 (no bound)"
            } else {
                "must be a count (>= 0)"
            },
        )),
    }
}

fn tags(f: &mut Fields<'_>) -> Result<Vec<Tag>> {
    let at = f.at("tags");
    match f.required("tags")? {
        Value::Array(items) if !items.is_empty() => items
            .iter()
            .enumerate()
            .map(|(i, v)| read_tag(v, &format!("{at}/{i}")))
            .collect(),
        Value::Array(_) => Err(error(&at, "needs at least one tag")),
        _ => Err(error(&at, "must be an array of tags")),
    }
}

/// A `tag` (its `type` may be left out inside a list of tags).
fn read_tag(value: &Value, pointer: &str) -> Result<Tag> {
    let mut f = Fields::new(value, pointer, "a tag")?;
    if let Some(kind) = value.get("type") {
        if kind != "tag" {
            return Err(error(&format!("{pointer}/type"), "must be `tag` here"));
        }
    }
    let begin = delimiter(f.required("begin")?, &f.at("begin"))?;
    let content = Box::new(read(f.required("content")?, &f.at("content"))?);
    let at = f.at("end");
    let ends = match f.required("end")? {
        Value::Array(items) if !items.is_empty() => items
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(s) => Ok(Delimiter::Text(s.clone())),
                _ => Err(error(&format!("{at}/{i}"), "must be a string")),
            })
            .collect::<Result<Vec<_>>>()?,
        Value::Array(_) => return Err(error(&at, "needs at least one end")),
        other => vec![delimiter(other, &at)?],
    };
    f.finish()?;
    // Content that runs free needs an end to stop at (XGrammar refuses this
    // too): with only empty ends it would swallow whatever follows.
    let no_end = ends.iter().all(|e| *e == Delimiter::Text(String::new()));
    let runs_free = match &*content {
        Format::AnyText { excludes, .. } => excludes.is_empty(),
        Format::Tokens {
            tokens, repeated, ..
        } => *repeated && tokens.is_empty(),
        Format::TriggeredTags { .. }
        | Format::TagsWithSeparator { .. }
        | Format::Dispatch { .. }
        | Format::TokenTriggeredTags { .. }
        | Format::TokenDispatch { .. } => true,
        _ => false,
    };
    if no_end && runs_free {
        return Err(error(
            &at,
            "the content runs free (text, tags or tokens of any length), so the tag needs a non-empty end",
        ));
    }
    Ok(Tag {
        begin,
        content,
        ends,
    })
}

/// A tag's `begin` or `end`: a string, or a `token` format.
fn delimiter(value: &Value, pointer: &str) -> Result<Delimiter> {
    match value {
        Value::String(s) => Ok(Delimiter::Text(s.clone())),
        Value::Object(_) => match read(value, pointer)? {
            Format::Tokens {
                tokens,
                negated: false,
                repeated: false,
                ..
            } => Ok(Delimiter::Token(tokens[0].clone())),
            _ => Err(error(
                pointer,
                "a delimiter is a string or a `token` format",
            )),
        },
        _ => Err(error(
            pointer,
            "a delimiter is a string or a `token` format",
        )),
    }
}
