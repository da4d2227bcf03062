//! Gemma 4's calls: `<|tool_call>call:f{city:<|"|>Paris<|"|>,days:3}<tool_call|>`,
//! one block per call, parallel calls side by side.
//!
//! The arguments are Gemma's own notation at every depth (bare keys, strings as
//! raw text between `<|"|>`): the JSON Schema front-end's `gemma` parameter
//! style constrains them and [`super::literals`] reads them back; a block it
//! cannot read stays in the content, never a guessed call.

use serde_json::Value;

use super::literals::{is_function_name, read_arguments, Notation, ReadCall, GEMMA_QUOTE};
use super::parse::{ParsedCall, ParsedReply};
use super::progress::CallProgress;

/// What opens a call (the trigger), up to its name, and what closes it.
pub(crate) const CALL: (&str, &str) = ("<|tool_call>call:", "<tool_call|>");

/// The trigger: what opens every call.
pub(crate) const TRIGGER: &str = "<|tool_call>";

/// A whole call as the template renders it.
pub(crate) fn call_text(name: &str, arguments: &Value) -> String {
    format!("{}{name}{}{}", CALL.0, value_text(arguments), CALL.1)
}

/// `v` in Gemma's notation.
pub(crate) fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{GEMMA_QUOTE}{s}{GEMMA_QUOTE}"),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(value_text).collect();
            format!("[{}]", items.join(","))
        }
        Value::Object(map) => {
            let pairs: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{k}:{}", value_text(v)))
                .collect();
            format!("{{{}}}", pairs.join(","))
        }
        other => other.to_string(),
    }
}

/// The call at the start of `text` (on its opener) as far as it goes, and the
/// bytes up to its close once it is whole.
fn read_call(text: &str) -> Result<(ReadCall<'_>, Option<usize>), ()> {
    let body_at = CALL.0.len();
    let body = text.get(body_at..).ok_or(())?;
    let open = body.find('{').ok_or(())?;
    let name = &body[..open];
    if !is_function_name(name) {
        return Err(());
    }
    let call = read_arguments(text, name, body_at + open, Notation::Gemma)?;
    let used = call.end.and_then(|end| {
        let after = &text[end..];
        after
            .strip_prefix(CALL.1)
            .map(|_| end + CALL.1.len())
            .or(after.is_empty().then_some(end))
    });
    Ok((call, used))
}

/// Splits a reply into content and calls. A block that does not read whole
/// stays content.
pub(crate) fn parse(text: &str) -> ParsedReply {
    let mut reply = ParsedReply::default();
    let mut rest = text;
    while let Some(start) = rest.find(CALL.0) {
        match read_call(&rest[start..]) {
            Ok((call, Some(used))) => {
                reply.content.push_str(&rest[..start]);
                reply.calls.push(ParsedCall {
                    name: call.name.to_string(),
                    arguments: call.object().to_string(),
                    id: None,
                });
                rest = &rest[start + used..];
            }
            _ => {
                reply.content.push_str(&rest[..start + CALL.0.len()]);
                rest = &rest[start + CALL.0.len()..];
            }
        }
    }
    reply.content.push_str(rest);
    reply.content = without_empty_channels(&reply.content).trim().to_string();
    reply
}

/// What opens and closes a channel (Gemma 4's thought: `<|channel>thought...`).
const CHANNEL: (&str, &str) = ("<|channel>", "<channel|>");

/// `content` without the empty thought channels and stray channel tags Gemma 4
/// writes around its answer (`<|channel>thought\n<channel|>`): they are no text
/// of the reply.
fn without_empty_channels(content: &str) -> String {
    let mut out = String::with_capacity(content.len());
    let mut rest = content;
    while let Some(at) = rest
        .find(CHANNEL.0)
        .into_iter()
        .chain(rest.find(CHANNEL.1))
        .min()
    {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        if let Some(after) = rest.strip_prefix(CHANNEL.1) {
            rest = after;
            continue;
        }
        let inside = &rest[CHANNEL.0.len()..];
        let inside = inside.strip_prefix("thought").unwrap_or(inside);
        let blank = inside.trim_start();
        rest = match blank.strip_prefix(CHANNEL.1) {
            Some(after) => after,
            // An opened channel with text in it, or none after: the tag alone goes.
            None if blank.starts_with(CHANNEL.0) || blank.is_empty() => blank,
            None => {
                out.push_str(CHANNEL.0);
                &rest[CHANNEL.0.len()..]
            }
        };
    }
    out.push_str(rest);
    out
}

/// The calls of a reply being written whose names are known.
pub(crate) fn calls_in_progress(text: &str) -> Vec<CallProgress<'_>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(CALL.0) {
        let Ok((call, used)) = read_call(&rest[start..]) else {
            break;
        };
        out.push(CallProgress {
            name: call.name,
            id: None,
            arguments: call.json_so_far().into(),
            complete: call.end.is_some(),
        });
        match used {
            Some(used) => rest = &rest[start + used..],
            None => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_calls_in_gemma_notation() {
        let text = r#"Sure.<|tool_call>call:f{city:<|"|>San "Fran"<|"|>,n:-1.5,on:true,x:null}<tool_call|><|tool_call>call:g{m:{k:[<|"|>a<|"|>,2]},e:{}}<tool_call|>"#;
        let r = parse(text);
        assert_eq!(r.content, "Sure.");
        let calls: Vec<(&str, &str)> = r
            .calls
            .iter()
            .map(|c| (c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(
            calls,
            [
                (
                    "f",
                    r#"{"city":"San \"Fran\"","n":-1.5,"on":true,"x":null}"#
                ),
                ("g", r#"{"m":{"k":["a",2]},"e":{}}"#),
            ]
        );
    }

    #[test]
    fn empty_thought_channels_are_not_content() {
        for text in [
            "Hi<channel|>",
            "Hi<|channel>thought\n<channel|>",
            "Hi<|channel>thought\n<channel|><channel|>",
            "<|channel><|channel>thought\n<channel|>Hi",
        ] {
            assert_eq!(parse(text).content, "Hi", "{text:?}");
        }
        assert_eq!(parse("<|channel>x").content, "<|channel>x");
    }

    #[test]
    fn a_call_that_does_not_read_stays_content() {
        for text in [
            "<|tool_call>call:f{a:}<tool_call|>",
            "<|tool_call>call:f{a:1",
            "<|tool_call>call:f(a=1)<tool_call|>",
            "<|tool_call>call:{a:1}<tool_call|>",
        ] {
            let r = parse(text);
            assert!(r.calls.is_empty(), "{text}");
            assert_eq!(r.content, text);
        }
    }

    #[test]
    fn written_calls_read_back() {
        let args = serde_json::json!({"s": "a\"b\\n", "n": 2, "on": false, "xs": [true, null], "m": {"k": "v"}});
        let r = parse(&call_text("f", &args));
        let back: Value = serde_json::from_str(&r.calls[0].arguments).unwrap();
        assert_eq!(back, args);
    }

    #[test]
    fn progress_shows_closed_arguments() {
        let calls = calls_in_progress(r#"<|tool_call>call:f{a:1,b:<|"|>Par"#);
        assert_eq!(calls.len(), 1);
        assert_eq!(
            (calls[0].name, calls[0].arguments.as_ref()),
            ("f", r#"{"a":1"#)
        );
        assert!(!calls[0].complete);
    }
}
