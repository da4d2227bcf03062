//! Calls as they are being written: for a streamed reply, each call's name once
//! it is whole, and as much of its arguments as the model has written, so a
//! server can send argument fragments as they come (the `openai` SDK's stream
//! helpers concatenate them).
//!
//! [`super::parse_reply`] stays the judge of the finished reply: this only reads
//! ahead. Under a tool-call structural tag the two agree (the arguments a prefix
//! shows are a prefix of the ones the reply parses to); a format whose name or id
//! comes after the arguments (Mistral Nemo's array) shows nothing until the end.

use std::borrow::Cow;

use super::xml::{function_block, CallShape};
use super::{Tool, ToolCallFormat};

/// One call of a reply being written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallProgress<'a> {
    pub name: &'a str,
    /// The id the model wrote (Mistral's `[CALL_ID]`), if any.
    pub id: Option<&'a str>,
    /// The arguments' text so far: as written (whitespace included), or, for a
    /// format whose arguments are not JSON (Qwen's XML), their compact JSON, each
    /// closed parameter added at the end.
    pub arguments: Cow<'a, str>,
    /// Whether the arguments' object is closed.
    pub complete: bool,
}

/// The calls of `text` (a reply so far) whose names are known, in order.
/// `tools` type the parameters of Qwen's XML (see [`super::parse_reply`]).
pub fn calls_in_progress<'a>(
    format: ToolCallFormat,
    text: &'a str,
    tools: &[Tool],
) -> Vec<CallProgress<'a>> {
    if let Some(shape) = format.xml_shape() {
        return xml_calls(text, shape, tools);
    }
    if let Some(shape) = format.json_shape() {
        return super::json_calls::calls_in_progress(text, shape);
    }
    if let Some(shape) = format.list_shape() {
        return super::named_list::calls_in_progress(text, shape);
    }
    match format {
        ToolCallFormat::MistralArgs | ToolCallFormat::MistralCallId => mistral(text),
        ToolCallFormat::MistralNemo => Vec::new(),
        ToolCallFormat::Llama3Json => named_objects(text, "", "parameters"),
        ToolCallFormat::Pythonic => super::pythonic::calls_in_progress(text),
        ToolCallFormat::Gemma4 => super::gemma::calls_in_progress(text),
        ToolCallFormat::Cohere => super::cohere::calls_in_progress(text),
        ToolCallFormat::Harmony => super::harmony::calls_in_progress(text),
        ToolCallFormat::KimiK3 => xml_calls(text, &super::xml::KIMI_K3, tools),
        ToolCallFormat::FunctionaryV32 => super::functionary::calls_in_progress(text),
        ToolCallFormat::MuseGlimmer => super::muse::calls_in_progress(text, tools),
        _ => named_objects(text, "<tool_call>", "arguments"),
    }
}

/// How a call written as one JSON object names its parts.
#[derive(Debug)]
pub(crate) enum CallKeys {
    /// Fields, in the order it writes them: its id (where it has one), its
    /// name, its arguments (`{"name": "f", "arguments": {...}}`).
    Fields {
        id: Option<&'static str>,
        name: &'static str,
        arguments: &'static str,
    },
    /// The name is the object's one key, the arguments its value
    /// (`{"f": {...}}`: Apertus).
    NameIsKey,
}

/// The call objects at the start of `rest` whose names are known (`rest`
/// follows a list's `[` when `list`, else it is one object).
pub(crate) fn call_objects<'a>(
    mut rest: &'a str,
    keys: &CallKeys,
    list: bool,
) -> Vec<CallProgress<'a>> {
    let mut out = Vec::new();
    while let Some(inside) = rest.trim_start().strip_prefix('{') {
        let Some((id, name, arguments_at)) = call_head(inside, keys) else {
            break;
        };
        let (arguments, complete) = object_prefix(arguments_at);
        out.push(CallProgress {
            name,
            id,
            arguments: Cow::Borrowed(arguments),
            complete,
        });
        let after = &arguments_at[arguments.len()..];
        match after.trim_start().strip_prefix('}') {
            Some(next) if complete && list => match next.trim_start().strip_prefix(',') {
                Some(next) => rest = next,
                None => break,
            },
            _ => break,
        }
    }
    out
}

/// A call object's id, name and where its arguments start (`inside` follows
/// its `{`), once written that far.
fn call_head<'a>(
    mut inside: &'a str,
    keys: &CallKeys,
) -> Option<(Option<&'a str>, &'a str, &'a str)> {
    let (id_key, name_key, arguments_key) = match keys {
        CallKeys::NameIsKey => {
            let (name, after) = json_string(inside.trim_start())?;
            let arguments_at = after.trim_start().strip_prefix(':')?.trim_start();
            return Some((None, name, arguments_at));
        }
        CallKeys::Fields {
            id,
            name,
            arguments,
        } => (id, name, arguments),
    };
    let mut id = None;
    if let Some(key) = id_key {
        let (value, after) = json_key(inside, key).and_then(json_string)?;
        (id, inside) = (Some(value), after.trim_start().strip_prefix(',')?);
    }
    let (name, after_name) = json_key(inside, name_key).and_then(json_string)?;
    let arguments_at = json_key(after_name.trim_start().strip_prefix(',')?, arguments_key)?;
    Some((id, name, arguments_at))
}

/// Named arguments closed so far as compact JSON, the object closed once
/// `closed` (for formats whose arguments are not written as JSON).
pub(crate) fn arguments_so_far(pairs: &[(&str, serde_json::Value)], closed: bool) -> String {
    let mut out = String::from("{");
    for (i, (key, value)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&serde_json::Value::String(key.to_string()).to_string());
        out.push(':');
        out.push_str(&value.to_string());
    }
    if closed {
        out.push('}');
    }
    out
}

/// `<tool_call>` `{"name": "f", "arguments": {...}}` (Hermes; Llama's objects
/// have no `open` and name their arguments `parameters`): the name must come
/// first.
fn named_objects<'a>(text: &'a str, open: &str, arguments_key: &str) -> Vec<CallProgress<'a>> {
    let anchor = if open.is_empty() {
        "{\"name\": \""
    } else {
        open
    };
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(anchor) {
        let body = rest[start + open.len()..].trim_start();
        let Some(after_brace) = body.strip_prefix('{') else {
            break;
        };
        let Some((name, after_name)) = json_key(after_brace, "name").and_then(json_string) else {
            break;
        };
        let Some(after_comma) = after_name.trim_start().strip_prefix(',') else {
            break;
        };
        let Some(arguments_at) = json_key(after_comma, arguments_key) else {
            break;
        };
        let (arguments, complete) = object_prefix(arguments_at);
        out.push(CallProgress {
            name,
            id: None,
            arguments: Cow::Borrowed(arguments),
            complete,
        });
        if !complete {
            break;
        }
        rest = &arguments_at[arguments.len()..];
    }
    out
}

/// XML calls (Qwen's `<function=f>`, GLM's `<tool_call>f`, MiniMax's and
/// DeepSeek's `<invoke name="f">`) and their parameters: the name once it is
/// ended, a parameter once its value is closed.
fn xml_calls<'a>(text: &'a str, shape: &CallShape, tools: &[Tool]) -> Vec<CallProgress<'a>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(shape.open) {
        let Some(block) = function_block(&rest[start..], shape, tools) else {
            break;
        };
        out.push(CallProgress {
            name: block.name,
            id: None,
            arguments: Cow::Owned(block.arguments_json()),
            complete: block.end.is_some(),
        });
        match block.end {
            Some(end) => rest = &rest[start + end..],
            None => break,
        }
    }
    out
}

/// `[TOOL_CALLS]f[ARGS]{...}` or `[TOOL_CALLS]f[CALL_ID]id[ARGS]{...}`, repeated.
fn mistral(text: &str) -> Vec<CallProgress<'_>> {
    const TRIGGER: &str = "[TOOL_CALLS]";
    const ARGS: &str = "[ARGS]";
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(TRIGGER) {
        let body = &rest[start + TRIGGER.len()..];
        let Some(args_at) = body.find(ARGS) else {
            break;
        };
        let (name, id) = match body[..args_at].split_once("[CALL_ID]") {
            Some((name, id)) => (name.trim(), Some(id)),
            None => (body[..args_at].trim(), None),
        };
        let after = &body[args_at + ARGS.len()..];
        let (arguments, complete) = object_prefix(after);
        out.push(CallProgress {
            name,
            id,
            arguments: Cow::Borrowed(arguments),
            complete,
        });
        if !complete {
            break;
        }
        rest = &after[arguments.len()..];
    }
    out
}

/// After `"key"` and its colon at the start of `text` (whitespace allowed): the
/// rest, from the value on.
pub(crate) fn json_key<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let text = text.trim_start().strip_prefix('"')?.strip_prefix(name)?;
    let text = text.strip_prefix('"')?.trim_start().strip_prefix(':')?;
    Some(text.trim_start())
}

/// A JSON string without escapes at the start of `text`, and what follows it.
pub(crate) fn json_string(text: &str) -> Option<(&str, &str)> {
    let text = text.strip_prefix('"')?;
    let end = text.find('"')?;
    let value = &text[..end];
    (!value.contains('\\')).then(|| (value, &text[end + 1..]))
}

/// `body` (a message's body still being written) without a tail that may be
/// the start of one of `ends`: text that can go out now.
pub(crate) fn without_partial_end<'a>(body: &'a str, ends: &[&str]) -> &'a str {
    let held = ends
        .iter()
        .flat_map(|stop| (1..stop.len()).map(move |n| &stop[..n]))
        .filter(|prefix| body.ends_with(prefix))
        .map(|prefix| prefix.len())
        .max()
        .unwrap_or(0);
    &body[..body.len() - held]
}

/// The answer so far from the bodies of the messages that carry it, in order,
/// each with whether it is closed: an open one less a tail that may begin one
/// of `ends`. Trimmed at the start, as the readers trim the answer.
pub(crate) fn answer_so_far<'a>(
    bodies: impl IntoIterator<Item = (&'a str, bool)>,
    ends: &[&str],
) -> String {
    let mut out = String::new();
    for (body, closed) in bodies {
        out.push_str(match closed {
            true => body,
            false => without_partial_end(body, ends),
        });
    }
    out.trim_start().to_string()
}

/// The JSON object at the start of `text` as far as it is written: up to its
/// closing brace (then complete) or all of `text`. Empty when `text` does not
/// start with `{`.
pub(crate) fn object_prefix(text: &str) -> (&str, bool) {
    if !text.starts_with('{') {
        return ("", false);
    }
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (i, b) in text.bytes().enumerate() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return (&text[..=i], true);
                }
            }
            _ => {}
        }
    }
    (text, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hermes_arguments_grow_then_close() {
        let whole = "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa}ris\", \"n\": [1]}}\n</tool_call>\n<tool_call>\n{\"name\": \"t\", \"arguments\": {}}\n</tool_call>";
        let mut last: Vec<CallProgress> = Vec::new();
        for end in 0..=whole.len() {
            let calls = calls_in_progress(ToolCallFormat::Hermes, &whole[..end], &[]);
            // Each step only extends what the last one showed.
            for (old, new) in last.iter().zip(&calls) {
                let old: &CallProgress = old;
                assert_eq!(old.name, new.name);
                assert!(new.arguments.starts_with(&*old.arguments));
            }
            assert!(calls.len() >= last.len());
            last = calls;
        }
        let calls = calls_in_progress(ToolCallFormat::Hermes, whole, &[]);
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].name, "get_weather");
        assert_eq!(calls[0].arguments, "{\"city\": \"Pa}ris\", \"n\": [1]}");
        assert!(calls[0].complete);
        assert_eq!((calls[1].name, &*calls[1].arguments), ("t", "{}"));
        // The name is shown only once it is whole.
        let cut = whole.find("weather").unwrap();
        assert!(calls_in_progress(ToolCallFormat::Hermes, &whole[..cut], &[]).is_empty());
    }

    #[test]
    fn mistral_names_ids_and_arguments() {
        let text =
            "[TOOL_CALLS]f[CALL_ID]123456789[ARGS]{\"a\": \"x\\\"}\"}[TOOL_CALLS]g[ARGS]{\"b\"";
        let calls = calls_in_progress(ToolCallFormat::MistralCallId, text, &[]);
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].id, Some("123456789"));
        assert_eq!(calls[0].arguments, "{\"a\": \"x\\\"}\"}");
        assert!(calls[0].complete);
        assert_eq!(
            (calls[1].name, &*calls[1].arguments, calls[1].complete),
            ("g", "{\"b\"", false)
        );
        let nemo = "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}";
        assert!(calls_in_progress(ToolCallFormat::MistralNemo, nemo, &[]).is_empty());
    }

    #[test]
    fn qwen_xml_shows_each_closed_parameter() {
        let tools = [Tool {
            name: "f".into(),
            parameters: serde_json::json!({"properties": {"zip": {"type": "string"}}}),
        }];
        let whole = "Sure.\n<tool_call>\n<function=f>\n<parameter=zip>\n0123\n</parameter>\n<parameter=n>\n5\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=g>\n</function>\n</tool_call>";
        let mut last: Vec<(String, String)> = Vec::new();
        for end in 0..=whole.len() {
            let calls = calls_in_progress(ToolCallFormat::QwenXml, &whole[..end], &tools);
            for ((name, arguments), new) in last.iter().zip(&calls) {
                assert_eq!(name, new.name);
                assert!(new.arguments.starts_with(arguments.as_str()));
            }
            assert!(calls.len() >= last.len());
            last = calls
                .iter()
                .map(|c| (c.name.to_string(), c.arguments.to_string()))
                .collect();
        }
        let calls = calls_in_progress(ToolCallFormat::QwenXml, whole, &tools);
        assert_eq!(calls[0].arguments, r#"{"zip":"0123","n":5}"#);
        assert!(calls[0].complete && calls[1].complete);
        assert_eq!((calls[1].name, &*calls[1].arguments), ("g", "{}"));
    }
}
