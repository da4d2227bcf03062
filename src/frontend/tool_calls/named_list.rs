//! Calls as `{"name": ..., "arguments": {...}}` objects after a tag: a JSON list
//! of them (NVIDIA Nemotron Nano 2's `<TOOLCALL>[...]</TOOLCALL>`, Apriel's
//! `<tool_calls>[...]</tool_calls>`, FireFunction's ` functools[...]`; Apertus's
//! `<|tools_prefix|>[{"f": {...}}]<|tools_suffix|>` with the name as the key;
//! Command R+'s fenced list of `{"tool_name": ..., "parameters": {...}}` after
//! `Action:`) or one object, one call per turn (GigaChat's
//! `<|function_call|>{...}`),
//!
//! ```text
//! <TOOLCALL>[{"name": "f", "arguments": {"city": "Paris"}}, {"name": "g", "arguments": {}}]</TOOLCALL>
//! ```
//!
//! spelled as the templates render it (`json.dumps` spacing). Text before the
//! tag is the content.

use serde_json::Value;

use super::parse::{call_objects, leading_json, ParsedReply};
use super::progress::{self, CallKeys, CallProgress};

/// A call's fields.
const KEYS: CallKeys = CallKeys::Fields {
    id: None,
    name: "name",
    arguments: "arguments",
};

/// The tags around a family's calls, and whether they are a list.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ListShape {
    pub open: &'static str,
    pub close: &'static str,
    /// A JSON list of calls; else one call object.
    pub list: bool,
    /// A call's fields (`{"name": "f", "arguments": {...}}`, or the name as
    /// the key: `{"f": {...}}`).
    pub keys: &'static CallKeys,
}

/// Nemotron Nano 2's.
pub(crate) const NEMOTRON: ListShape = ListShape {
    open: "<TOOLCALL>",
    close: "</TOOLCALL>",
    list: true,
    keys: &KEYS,
};

/// Apriel 1.5's and 1.6's.
pub(crate) const APRIEL: ListShape = ListShape {
    open: "<tool_calls>",
    close: "</tool_calls>",
    list: true,
    keys: &KEYS,
};

/// Apertus's: the name is each call's key.
pub(crate) const APERTUS: ListShape = ListShape {
    open: "<|tools_prefix|>",
    close: "<|tools_suffix|>",
    list: true,
    keys: &CallKeys::NameIsKey,
};

/// Command R+'s: a fenced JSON list after `Action:` (as the model writes it;
/// its template indents the list).
pub(crate) const COMMAND_R_PLUS: ListShape = ListShape {
    open: "Action:\n```json\n",
    close: "\n```",
    list: true,
    keys: &CallKeys::Fields {
        id: None,
        name: "tool_name",
        arguments: "parameters",
    },
};

/// FireFunction v2's (its list right after the word).
pub(crate) const FIREFUNCTION: ListShape = ListShape {
    open: " functools",
    close: "",
    list: true,
    keys: &KEYS,
};

/// GigaChat 3's: the call is a message of the `function call` role.
pub(crate) const GIGACHAT3: ListShape = ListShape {
    open: "<|message_sep|>\n\nfunction call<|role_sep|>\n",
    close: "",
    list: false,
    keys: &KEYS,
};

/// GigaChat 3.1's.
pub(crate) const GIGACHAT31: ListShape = ListShape {
    open: "<|function_call|>",
    close: "",
    list: false,
    keys: &KEYS,
};

impl ListShape {
    /// What opens and closes the calls, brackets included.
    pub(crate) fn frame(&self) -> (String, String) {
        match self.list {
            true => (format!("{}[", self.open), format!("]{}", self.close)),
            false => (self.open.to_string(), self.close.to_string()),
        }
    }

    /// One item up to its arguments.
    pub(crate) fn item_head(&self, name: &str) -> String {
        let quoted = serde_json::to_string(name).expect("a string");
        match self.keys {
            CallKeys::NameIsKey => format!("{{{quoted}: "),
            CallKeys::Fields {
                name, arguments, ..
            } => format!("{{\"{name}\": {quoted}, \"{arguments}\": "),
        }
    }
}

/// A whole list holding one call.
pub(crate) fn call_text(shape: &ListShape, name: &str, arguments: &Value) -> String {
    let (open, close) = shape.frame();
    format!("{open}{}{arguments}}}{close}", shape.item_head(name))
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
        let (value, used) = leading_json(body)?;
        let calls = match shape.list {
            true => call_objects(value.as_array()?, shape.keys)?,
            false => call_objects(std::slice::from_ref(&value), shape.keys)?,
        };
        // (Command R+'s close starts with the newline trimmed here.)
        let after = body[used..].trim_start();
        let close = shape.close.trim_start();
        Some((calls, after.strip_prefix(close).unwrap_or(after)))
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
    let Some(start) = text.find(shape.open) else {
        return Vec::new();
    };
    let body = text[start + shape.open.len()..].trim_start();
    let rest = match shape.list {
        true => body.strip_prefix('['),
        false => Some(body),
    };
    rest.map_or_else(Vec::new, |rest| {
        progress::call_objects(rest, shape.keys, shape.list)
    })
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
        let one = "Hi<|function_call|>{\"name\": \"f\", \"arguments\": {\"a\": 1}}";
        let r = parse(one, &GIGACHAT31);
        assert_eq!((r.content.as_str(), r.calls.len()), ("Hi", 1));
        assert_eq!(
            calls_in_progress(one, &GIGACHAT31)[0].arguments,
            r#"{"a": 1}"#
        );
    }

    #[test]
    fn reads_calls_keyed_by_name() {
        let text = call_text(&APERTUS, "f", &serde_json::json!({"a": 1}));
        assert_eq!(text, r#"<|tools_prefix|>[{"f": {"a":1}}]<|tools_suffix|>"#);
        let r = parse(&format!("Sure.{text}"), &APERTUS);
        assert_eq!(r.content, "Sure.");
        assert_eq!(
            (r.calls[0].name.as_str(), r.calls[0].arguments.as_str()),
            ("f", r#"{"a":1}"#)
        );
        let cut = calls_in_progress(&text[..text.len() - 20], &APERTUS);
        assert_eq!((cut[0].name, cut[0].complete), ("f", false));
        // Two keys: not a call.
        let two = r#"<|tools_prefix|>[{"f": {}, "g": {}}]<|tools_suffix|>"#;
        assert!(parse(two, &APERTUS).calls.is_empty());
    }
}
