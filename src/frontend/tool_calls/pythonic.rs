//! Calls written as a Python list of function calls, as LFM2 and LFM2.5 write
//! them: `<|tool_call_start|>[f(a=1, b="x"), g()]<|tool_call_end|>`.
//!
//! The arguments are keyword arguments whose values are Python literals: the
//! JSON Schema front-end's `python` parameter style constrains them (JSON values
//! whose `true`/`false`/`null` may be spelled `True`/`False`/`None`), and
//! [`super::literals`] reads them back; a block it cannot read stays in the
//! content, never a guessed call.

use serde_json::Value;

use super::literals::{is_function_name, read_arguments, skip_ws, Notation, ReadCall};
use super::parse::{ParsedCall, ParsedReply};
use super::progress::CallProgress;

/// What opens the block of calls (the trigger) and what closes it.
pub(crate) const BLOCK: (&str, &str) = ("<|tool_call_start|>", "<|tool_call_end|>");

/// A whole block holding one call, as the templates render it (a string in
/// double quotes: the grammar's spelling).
pub(crate) fn call_text(name: &str, arguments: &Value) -> String {
    let args: Vec<String> = arguments
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", literal(v)))
        .collect();
    format!("{}[{name}({})]{}", BLOCK.0, args.join(", "), BLOCK.1)
}

/// `v` as the `python` style writes it: JSON with Python's keywords.
fn literal(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(literal).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(map) => {
            let pairs: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", Value::String(k.clone()), literal(v)))
                .collect();
            format!("{{{}}}", pairs.join(", "))
        }
        other => other.to_string(),
    }
}

/// The calls of the block whose body (after `[`) starts `text`, as far as they
/// go; `Err` where the text is no such list.
fn read_calls(text: &str) -> Result<(Vec<ReadCall<'_>>, Option<usize>), ()> {
    let mut calls = Vec::new();
    let mut at = skip_ws(text, 0);
    if text[at..].starts_with(']') {
        return Ok((calls, Some(at + 1)));
    }
    loop {
        let open = text[at..].find('(').ok_or(())? + at;
        let name = text[at..open].trim();
        if !is_function_name(name) {
            return Err(());
        }
        let call = read_arguments(text, name, open, Notation::Python)?;
        let Some(end) = call.end else {
            calls.push(call);
            return Ok((calls, None));
        };
        calls.push(call);
        at = skip_ws(text, end);
        match text[at..].chars().next() {
            Some(',') => at = skip_ws(text, at + 1),
            Some(']') => return Ok((calls, Some(at + 1))),
            Some(_) => return Err(()),
            None => return Ok((calls, None)),
        }
        if at == text.len() {
            return Ok((calls, None));
        }
    }
}

/// Splits a reply into content and the calls of its blocks. A block that does
/// not read whole stays content.
pub(crate) fn parse(text: &str) -> ParsedReply {
    let (open, close) = BLOCK;
    let mut reply = ParsedReply::default();
    let mut rest = text;
    while let Some(start) = rest.find(open) {
        let body = &rest[start + open.len()..];
        let read = body
            .trim_start()
            .strip_prefix('[')
            .and_then(|list| {
                let skipped = body.len() - list.len();
                let (calls, end) = read_calls(list).ok()?;
                let after = &list[end?..];
                let tail = after.trim_start().strip_prefix(close).unwrap_or(after);
                Some((calls, skipped + list.len() - tail.len()))
            })
            .filter(|(calls, _)| calls.iter().all(|c| c.end.is_some()));
        match read {
            Some((calls, used)) => {
                reply.content.push_str(&rest[..start]);
                reply.calls.extend(calls.iter().map(|c| ParsedCall {
                    name: c.name.to_string(),
                    arguments: c.object().to_string(),
                    id: None,
                }));
                rest = &body[used..];
            }
            None => {
                reply.content.push_str(&rest[..start + open.len()]);
                rest = body;
            }
        }
    }
    reply.content.push_str(rest);
    reply.content = reply.content.trim().to_string();
    reply
}

/// The calls of a reply being written whose names are known.
pub(crate) fn calls_in_progress(text: &str) -> Vec<CallProgress<'_>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(BLOCK.0) {
        let body = &rest[start + BLOCK.0.len()..];
        let Some(list) = body.trim_start().strip_prefix('[') else {
            break;
        };
        let Ok((calls, end)) = read_calls(list) else {
            break;
        };
        out.extend(calls.iter().map(|c| CallProgress {
            name: c.name,
            id: None,
            arguments: c.json_so_far().into(),
            complete: c.end.is_some(),
        }));
        match end {
            Some(end) => rest = &list[end..],
            None => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_calls_with_python_literals() {
        let text = r#"Let me check.<|tool_call_start|>[f(a=1, b="x\ny", c=True, d=None), Cal.g(m={"on": true, "n": [1, 'two']}), h()]<|tool_call_end|>"#;
        let r = parse(text);
        assert_eq!(r.content, "Let me check.");
        let calls: Vec<(&str, &str)> = r
            .calls
            .iter()
            .map(|c| (c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(
            calls,
            [
                ("f", r#"{"a":1,"b":"x\ny","c":true,"d":null}"#),
                ("Cal.g", r#"{"m":{"on":true,"n":[1,"two"]}}"#),
                ("h", "{}"),
            ]
        );
    }

    #[test]
    fn a_block_that_does_not_read_stays_content() {
        for text in [
            "<|tool_call_start|>[f(a=)]<|tool_call_end|>",
            "<|tool_call_start|>[f(a=1)",
            "<|tool_call_start|>f(a=1)<|tool_call_end|>",
            "<|tool_call_start|>[f(1)]<|tool_call_end|>",
        ] {
            let r = parse(text);
            assert!(r.calls.is_empty(), "{text}");
            assert_eq!(r.content, text);
        }
    }

    #[test]
    fn written_calls_read_back() {
        let args = serde_json::json!({"s": "a\"b", "n": -1.5, "on": false, "none": null, "xs": [true], "m": {"k": null}});
        let text = call_text("f", &args);
        let r = parse(&text);
        assert_eq!(r.calls.len(), 1);
        let back: Value = serde_json::from_str(&r.calls[0].arguments).unwrap();
        assert_eq!(back, args);
    }

    #[test]
    fn progress_shows_closed_arguments() {
        let calls = calls_in_progress("<|tool_call_start|>[f(a=1, b=\"x");
        assert_eq!(calls.len(), 1);
        assert_eq!(
            (calls[0].name, calls[0].arguments.as_ref()),
            ("f", r#"{"a":1"#)
        );
        assert!(!calls[0].complete);
        let calls = calls_in_progress("<|tool_call_start|>[f(a=1), g(");
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].arguments, r#"{"a":1}"#);
        assert!(calls[0].complete && !calls[1].complete);
    }
}
