//! Reading a reply back: the text a model wrote in its tool-call format, split
//! into the content a user sees and the calls an agent runs.
//!
//! The inverse of the structural tags in [`super`]: a reply generated under one
//! of them always parses here, and a reply written freely (no constraint) parses
//! as far as it follows the format. A call whose arguments are not a JSON object
//! stays in the content rather than being dropped or guessed at.

use std::borrow::Cow;

use serde_json::{Deserializer, Value};

use super::progress::CallKeys;
use super::xml::{function_block, CallShape};
use super::{Tool, ToolCallFormat};

/// One call read from a reply.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedCall {
    pub name: String,
    /// The arguments, a JSON object, as the model wrote them (re-serialized
    /// compactly: clients parse them with `json.loads`).
    pub arguments: String,
    /// The call id the model wrote (Mistral's formats), if any.
    pub id: Option<String>,
}

/// A reply: what is left as content, and the calls.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ParsedReply {
    pub content: String,
    pub calls: Vec<ParsedCall>,
    /// Reasoning the format carries in its own messages (harmony's analysis
    /// channel); a span before the reply is [`super::split_reasoning`]'s.
    pub reasoning: String,
}

/// The first JSON value at the start of `text` (after whitespace) and the bytes
/// it spans, whitespace included.
pub(crate) fn leading_json(text: &str) -> Option<(Value, usize)> {
    let mut values = Deserializer::from_str(text).into_iter::<Value>();
    let value = values.next()?.ok()?;
    Some((value, values.byte_offset()))
}

/// Calls written as JSON objects (`keys` name their fields); `None` when one
/// lacks its name or its arguments are no object.
pub(crate) fn call_objects(items: &[Value], keys: &CallKeys) -> Option<Vec<ParsedCall>> {
    items
        .iter()
        .map(|item| {
            let (id_key, name, arguments) = match keys {
                CallKeys::NameIsKey => {
                    let object = item.as_object().filter(|o| o.len() == 1)?;
                    let (name, arguments) = object.iter().next()?;
                    (None, name.as_str(), arguments)
                }
                CallKeys::Fields {
                    id,
                    name,
                    arguments,
                } => (*id, item.get(name)?.as_str()?, item.get(arguments)?),
            };
            Some(ParsedCall {
                name: name.to_string(),
                arguments: arguments.is_object().then(|| arguments.to_string())?,
                id: id_key
                    .and_then(|key| item.get(key)?.as_str())
                    .map(str::to_string),
            })
        })
        .collect()
}

/// Named arguments as an object (a name written twice keeps its last value).
pub(crate) fn arguments_object(pairs: &[(&str, Value)]) -> Value {
    let map: serde_json::Map<String, Value> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    Value::Object(map)
}

fn call(name: &str, arguments: &Value, id: Option<String>) -> Option<ParsedCall> {
    arguments.is_object().then(|| ParsedCall {
        name: name.to_string(),
        arguments: arguments.to_string(),
        id,
    })
}

/// A message's body at the start of `after`, up to the first of `ends`: the
/// body, the text after that end, and whether an end was there (else the
/// text ends inside the body). For the formats whose replies are messages.
pub(crate) fn message_body<'a>(after: &'a str, ends: &[&str]) -> (&'a str, &'a str, bool) {
    let end = ends
        .iter()
        .filter_map(|stop| after.find(stop).map(|at| (at, stop.len())))
        .min();
    match end {
        Some((at, len)) => (&after[..at], &after[at + len..], true),
        None => (after, "", false),
    }
}

/// Splits `text` into content and calls as `format` writes them. `tools` type
/// the parameters of formats whose text does not (Qwen's XML: `42` is a string
/// where the tool's schema says so).
pub fn parse_reply(format: ToolCallFormat, text: &str, tools: &[Tool]) -> ParsedReply {
    if let Some(shape) = format.xml_shape() {
        return parse_xml_calls(text, shape, tools);
    }
    if let Some(shape) = format.json_shape() {
        return super::json_calls::parse(text, shape);
    }
    if let Some(shape) = format.list_shape() {
        return super::named_list::parse(text, shape);
    }
    match format {
        ToolCallFormat::MistralNemo
        | ToolCallFormat::MistralArgs
        | ToolCallFormat::MistralCallId => parse_mistral(format, text),
        ToolCallFormat::Llama3Json => parse_llama(text),
        ToolCallFormat::Pythonic => super::pythonic::parse(text),
        ToolCallFormat::Gemma4 => super::gemma::parse(text),
        ToolCallFormat::Cohere => super::cohere::parse(text),
        ToolCallFormat::Harmony => super::harmony::parse(text),
        ToolCallFormat::KimiK3 => super::kimi_k3::parse(text, tools),
        ToolCallFormat::FunctionaryV32 => super::functionary::parse(text),
        ToolCallFormat::MuseGlimmer => super::muse::parse(text, tools),
        _ => parse_hermes(text),
    }
}

/// Calls of `shape` with their parameters, inside its wrapper if it has one
/// (Qwen's `<tool_call>` around each, MiniMax's `<minimax:tool_call>` around
/// all; either tag may be missing, as llama.cpp reads them); the text around
/// them is the content (whitespace between two calls is not).
fn parse_xml_calls(text: &str, shape: &CallShape, tools: &[Tool]) -> ParsedReply {
    let (open, close) = shape.wrapper;
    let strip = |text: &'_ str, tag: &str, at_end: bool| -> Option<usize> {
        if tag.is_empty() {
            return None;
        }
        match at_end {
            true => text.trim_end().strip_suffix(tag).map(str::len),
            false => text
                .trim_start()
                .strip_prefix(tag)
                .map(|r| text.len() - r.len()),
        }
    };
    let mut reply = ParsedReply::default();
    let mut rest = text;
    let mut after_call = false;
    while let Some(start) = rest.find(shape.open) {
        let block = function_block(&rest[start..], shape, tools);
        match block.as_ref().and_then(|b| Some((b, b.end?))) {
            Some((block, used)) => {
                let before = &rest[..start];
                let kept = strip(before, open, true).map_or(before, |n| &before[..n]);
                if !(after_call && kept.trim().is_empty()) {
                    reply.content.push_str(kept);
                }
                reply.calls.push(ParsedCall {
                    name: block.name.to_string(),
                    arguments: block.arguments().to_string(),
                    id: None,
                });
                let after = &rest[start + used..];
                rest = strip(after, close, false).map_or(after, |n| &after[n..]);
                after_call = true;
            }
            None => {
                reply.content.push_str(&rest[..start + shape.open.len()]);
                rest = &rest[start + shape.open.len()..];
                after_call = false;
            }
        }
    }
    reply.content.push_str(rest);
    reply.content = reply.content.trim().to_string();
    reply
}

/// `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks anywhere in
/// the reply; the text around them is the content.
fn parse_hermes(text: &str) -> ParsedReply {
    parse_named_objects(text, "<tool_call>", "</tool_call>", "arguments")
}

/// Llama 3.x's `{"name": ..., "parameters": {...}}` objects anywhere in the reply.
fn parse_llama(text: &str) -> ParsedReply {
    parse_named_objects(text, "", "", "parameters")
}

/// JSON objects naming a function and its arguments (under `arguments_key`),
/// each after `open` and before `close` (Hermes's tags; none for Llama, whose
/// objects are found by their `{"name"`); the text around them is the content.
fn parse_named_objects(text: &str, open: &str, close: &str, arguments_key: &str) -> ParsedReply {
    // Llama's objects are found by their trigger (what its free text excludes).
    let anchor = if open.is_empty() {
        "{\"name\": \""
    } else {
        open
    };
    let mut reply = ParsedReply::default();
    let mut rest = text;
    while let Some(start) = rest.find(anchor) {
        let body = &rest[start + open.len()..];
        let parsed = leading_json(body).and_then(|(value, used)| {
            let after = body[used..].trim_start();
            let tail = match close {
                "" => after,
                _ => after
                    .strip_prefix(close)
                    .or(after.is_empty().then_some(after))?,
            };
            let name = value.get("name")?.as_str()?;
            let arguments = value.get(arguments_key)?;
            Some((call(name, arguments, None)?, body.len() - tail.len()))
        });
        match parsed {
            Some((c, consumed)) => {
                if reply.calls.is_empty() || !rest[..start].trim().is_empty() {
                    reply.content.push_str(&rest[..start]);
                }
                reply.calls.push(c);
                rest = &body[consumed..];
            }
            None => {
                // Not a call: keep it as text and look further.
                reply.content.push_str(&rest[..start + anchor.len()]);
                rest = &rest[start + anchor.len()..];
            }
        }
    }
    reply.content.push_str(rest);
    reply.content = reply.content.trim().to_string();
    reply
}

/// `[TOOL_CALLS]` and what follows it, in one of Mistral's three shapes; the
/// text before the first `[TOOL_CALLS]` is the content.
fn parse_mistral(format: ToolCallFormat, text: &str) -> ParsedReply {
    const TRIGGER: &str = "[TOOL_CALLS]";
    let Some(start) = text.find(TRIGGER) else {
        return ParsedReply {
            content: text.trim().to_string(),
            calls: Vec::new(),
            ..Default::default()
        };
    };
    let mut reply = ParsedReply {
        content: text[..start].trim().to_string(),
        calls: Vec::new(),
        ..Default::default()
    };
    let mut rest = &text[start + TRIGGER.len()..];
    let complete = match format {
        ToolCallFormat::MistralNemo => (|| {
            let (value, used) = leading_json(rest)?;
            for item in value.as_array()? {
                let id = item.get("id").and_then(Value::as_str).map(str::to_string);
                reply.calls.push(call(
                    item.get("name")?.as_str()?,
                    item.get("arguments")?,
                    id,
                )?);
            }
            rest = &rest[used..];
            Some(())
        })(),
        _ => (|| loop {
            let args_at = rest.find("[ARGS]")?;
            let (name, id) = match rest[..args_at].split_once("[CALL_ID]") {
                Some((name, id)) => (name, Some(id.to_string())),
                None => (&rest[..args_at], None),
            };
            let body = &rest[args_at + "[ARGS]".len()..];
            let (arguments, used) = leading_json(body)?;
            reply.calls.push(call(name.trim(), &arguments, id)?);
            rest = &body[used..];
            match rest.trim_start().strip_prefix(TRIGGER) {
                Some(next) => rest = next,
                None => return Some(()),
            }
        })(),
    };
    if complete.is_none() {
        // A block that does not parse is the model's text, not a call.
        return ParsedReply {
            content: text.trim().to_string(),
            calls: Vec::new(),
            ..Default::default()
        };
    }
    let trailing = rest.trim();
    if !trailing.is_empty() {
        if !reply.content.is_empty() {
            reply.content.push('\n');
        }
        reply.content.push_str(trailing);
    }
    reply
}

/// The content of a reply being written (`text`) that may go out now, as text
/// that only grows as the reply does: the text up to where a call may begin
/// ([`content_prefix_len`]), or, where the format frames its answer (harmony),
/// the answer's text so far.
pub fn content_so_far(format: ToolCallFormat, text: &str) -> Cow<'_, str> {
    match format {
        ToolCallFormat::Harmony => Cow::Owned(super::harmony::content_so_far(text)),
        ToolCallFormat::FunctionaryV32 => Cow::Borrowed(super::functionary::content_so_far(text)),
        ToolCallFormat::MuseGlimmer => Cow::Owned(super::muse::content_so_far(text)),
        _ => Cow::Borrowed(&text[..content_prefix_len(format, text)]),
    }
}

/// The part of a reply being written that holds its calls, once one has begun
/// (what [`super::calls_in_progress`] reads).
pub fn calls_region(format: ToolCallFormat, text: &str) -> Option<&str> {
    match format {
        ToolCallFormat::Harmony => super::harmony::in_call(text).then_some(text),
        ToolCallFormat::FunctionaryV32 => super::functionary::in_call(text).then_some(text),
        ToolCallFormat::MuseGlimmer => super::muse::in_call(text).then_some(text),
        _ => {
            let end = content_prefix_len(format, text);
            text[end..]
                .starts_with(format.trigger())
                .then_some(&text[end..])
        }
    }
}

/// The content a finished reply without calls shows, to the end of a stream
/// that sent [`content_so_far`]: the text itself, or the answer the format
/// frames (harmony's `parsed` content).
pub fn final_content<'a>(
    format: ToolCallFormat,
    text: &'a str,
    parsed: &'a ParsedReply,
) -> &'a str {
    match format {
        ToolCallFormat::Harmony | ToolCallFormat::FunctionaryV32 | ToolCallFormat::MuseGlimmer => {
            &parsed.content
        }
        _ => text,
    }
}

/// Where a trigger of `format` starts in `text`, or where a prefix of one might
/// start at its end: text before it is content that can be streamed at once.
pub fn content_prefix_len(format: ToolCallFormat, text: &str) -> usize {
    let trigger = format.trigger();
    if let Some(at) = text.find(trigger) {
        return at;
    }
    (1..trigger.len())
        .rev()
        .find(|&n| text.ends_with(&trigger[..n]))
        .map_or(text.len(), |n| text.len() - n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hermes_calls_and_content() {
        let text = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"t\", \"arguments\": {}}\n</tool_call>";
        let r = parse_reply(ToolCallFormat::Hermes, text, &[]);
        assert_eq!(r.content, "Let me check.");
        assert_eq!(r.calls.len(), 2);
        assert_eq!(r.calls[0].name, "get_weather");
        assert_eq!(r.calls[0].arguments, r#"{"city":"Paris"}"#);
        assert_eq!(r.calls[1].arguments, "{}");
    }

    #[test]
    fn a_broken_block_stays_text() {
        let text = "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>";
        let r = parse_reply(ToolCallFormat::Hermes, text, &[]);
        assert!(r.calls.is_empty());
        assert_eq!(r.content, text);
    }

    #[test]
    fn mistral_shapes() {
        let nemo = r#"[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}, "id": "abcdefghi"}]"#;
        let r = parse_reply(ToolCallFormat::MistralNemo, nemo, &[]);
        assert_eq!(r.calls[0].id.as_deref(), Some("abcdefghi"));
        assert_eq!(r.calls[0].arguments, r#"{"a":1}"#);
        let args = r#"Sure[TOOL_CALLS]f[ARGS]{"a": 1}[TOOL_CALLS]g[CALL_ID]123456789[ARGS]{}"#;
        let r = parse_reply(ToolCallFormat::MistralCallId, args, &[]);
        assert_eq!(r.content, "Sure");
        assert_eq!(
            r.calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            ["f", "g"]
        );
        assert_eq!(r.calls[1].id.as_deref(), Some("123456789"));
    }

    #[test]
    fn qwen_xml_calls_with_and_without_their_wrapper() {
        let text = "Let me call it.\n<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>\n<function=g>\n</function>\n</tool_call> done";
        let r = parse_reply(ToolCallFormat::QwenXml, text, &[]);
        // The newline between the two calls is not content.
        assert_eq!(r.content, "Let me call it.\n done");
        assert_eq!(r.calls.len(), 2);
        assert_eq!(
            (r.calls[0].name.as_str(), r.calls[0].arguments.as_str()),
            ("f", r#"{"a":1}"#)
        );
        assert_eq!(
            (r.calls[1].name.as_str(), r.calls[1].arguments.as_str()),
            ("g", "{}")
        );
        // An unclosed block is text.
        let cut = "<tool_call>\n<function=f>\n<parameter=a>\n1\n";
        let r = parse_reply(ToolCallFormat::QwenXml, cut, &[]);
        assert!(r.calls.is_empty());
        assert_eq!(r.content, cut.trim());
    }

    #[test]
    fn glm_calls() {
        let text = "<tool_call>f<arg_key>a</arg_key><arg_value>x y</arg_value></tool_call>\n<tool_call>g\n</tool_call>";
        let r = parse_reply(ToolCallFormat::Glm, text, &[]);
        assert_eq!(r.content, "");
        assert_eq!(r.calls[0].arguments, r#"{"a":"x y"}"#);
        assert_eq!(
            (r.calls[1].name.as_str(), r.calls[1].arguments.as_str()),
            ("g", "{}")
        );
    }

    #[test]
    fn content_is_held_back_at_a_trigger_prefix() {
        let f = ToolCallFormat::Hermes;
        assert_eq!(content_prefix_len(f, "Hello <tool"), 6);
        assert_eq!(content_prefix_len(f, "Hello <tool_call>{"), 6);
        assert_eq!(content_prefix_len(f, "Hello"), 5);
    }
}
