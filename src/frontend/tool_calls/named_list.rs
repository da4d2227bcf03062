//! Calls as one JSON list of `{"name": ..., "arguments": {...}}` objects
//! between two tags: NVIDIA Nemotron Nano 2's `<TOOLCALL>[...]</TOOLCALL>` and
//! Apriel's `<tool_calls>[...]</tool_calls>`,
//!
//! ```text
//! <TOOLCALL>[{"name": "f", "arguments": {"city": "Paris"}}, {"name": "g", "arguments": {}}]</TOOLCALL>
//! ```
//!
//! spelled as the templates render it (`json.dumps` spacing). Text before the
//! list is the content.

use std::borrow::Cow;

use serde_json::Value;

use super::parse::{leading_json, ParsedCall, ParsedReply};
use super::progress::{json_key, json_string, object_prefix, CallProgress};

/// The tags around a family's list.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ListShape {
    pub open: &'static str,
    pub close: &'static str,
}

/// Nemotron Nano 2's.
pub(crate) const NEMOTRON: ListShape = ListShape {
    open: "<TOOLCALL>",
    close: "</TOOLCALL>",
};

/// Apriel 1.5's and 1.6's.
pub(crate) const APRIEL: ListShape = ListShape {
    open: "<tool_calls>",
    close: "</tool_calls>",
};

/// One item up to its arguments.
pub(crate) fn item_head(name: &str) -> String {
    let quoted = serde_json::to_string(name).expect("a string");
    format!("{{\"name\": {quoted}, \"arguments\": ")
}

/// A whole list holding one call.
pub(crate) fn call_text(shape: &ListShape, name: &str, arguments: &Value) -> String {
    format!(
        "{}[{}{arguments}}}]{}",
        shape.open,
        item_head(name),
        shape.close
    )
}

/// Splits a reply into content and the calls of its list. A list that does not
/// read whole (an item without a name or with arguments that are no object)
/// stays content.
pub(crate) fn parse(text: &str, shape: &ListShape) -> ParsedReply {
    let whole = || ParsedReply {
        content: text.trim().to_string(),
        ..ParsedReply::default()
    };
    let Some(start) = text.find(shape.open) else {
        return whole();
    };
    let body = &text[start + shape.open.len()..];
    let read = (|| {
        let (list, used) = leading_json(body)?;
        let mut calls = Vec::new();
        for item in list.as_array()? {
            let arguments = item.get("arguments")?;
            calls.push(ParsedCall {
                name: item.get("name")?.as_str()?.to_string(),
                arguments: arguments.is_object().then(|| arguments.to_string())?,
                id: None,
            });
        }
        let after = body[used..].trim_start();
        Some((calls, after.strip_prefix(shape.close).unwrap_or(after)))
    })();
    match read {
        Some((calls, tail)) => ParsedReply {
            content: format!("{}{tail}", &text[..start]).trim().to_string(),
            calls,
            ..ParsedReply::default()
        },
        None => whole(),
    }
}

/// The items of a list being written whose names are known.
pub(crate) fn calls_in_progress<'a>(text: &'a str, shape: &ListShape) -> Vec<CallProgress<'a>> {
    let mut out = Vec::new();
    let Some(start) = text.find(shape.open) else {
        return out;
    };
    let Some(mut rest) = text[start + shape.open.len()..]
        .trim_start()
        .strip_prefix('[')
    else {
        return out;
    };
    while let Some(after_brace) = rest.trim_start().strip_prefix('{') {
        let Some((name, after_name)) = json_key(after_brace, "name").and_then(json_string) else {
            break;
        };
        let Some(arguments_at) = after_name
            .trim_start()
            .strip_prefix(',')
            .and_then(|t| json_key(t, "arguments"))
        else {
            break;
        };
        let (arguments, complete) = object_prefix(arguments_at);
        out.push(CallProgress {
            name,
            id: None,
            arguments: Cow::Borrowed(arguments),
            complete,
        });
        let after = &arguments_at[arguments.len()..];
        match after.trim_start().strip_prefix('}') {
            Some(next) if complete => match next.trim_start().strip_prefix(',') {
                Some(next) => rest = next,
                None => break,
            },
            _ => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_list_whole_and_streamed() {
        let text = "Sure.<TOOLCALL>[{\"name\": \"f\", \"arguments\": {\"a\": 1}}, {\"name\": \"g\", \"arguments\": {}}]</TOOLCALL>";
        let r = parse(text, &NEMOTRON);
        assert_eq!(r.content, "Sure.");
        let calls: Vec<(&str, &str)> = r
            .calls
            .iter()
            .map(|c| (c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(calls, [("f", r#"{"a":1}"#), ("g", "{}")]);
        let cut = calls_in_progress(&text[..text.find("{}").unwrap()], &NEMOTRON);
        assert_eq!(cut.iter().map(|c| c.name).collect::<Vec<_>>(), ["f", "g"]);
        assert!(cut[0].complete && !cut[1].complete);
        let broken = "<tool_calls>[{\"name\": \"f\", \"arguments\": [1]}]</tool_calls>";
        assert_eq!(parse(broken, &APRIEL).content, broken);
    }
}
