//! Cohere's calls (Command R7B, Command A and its reasoning models): a JSON list
//! of actions between `<|START_ACTION|>` and `<|END_ACTION|>`,
//!
//! ```text
//! <|START_ACTION|>[
//!     {"tool_call_id": "0", "tool_name": "f", "parameters": {"city": "Paris"}},
//!     {"tool_call_id": "1", "tool_name": "g", "parameters": {}}
//! ]<|END_ACTION|>
//! ```
//!
//! spelled as the templates render it (the grammar writes exactly this layout).
//! A text reply sits between `<|START_RESPONSE|>` and `<|END_RESPONSE|>` (R7B)
//! or `<|START_TEXT|>` and `<|END_TEXT|>` (Command A): those tags are not content.

use serde_json::Value;

use super::parse::{call_objects, leading_json, ParsedReply};
use super::progress::{self, CallKeys, CallProgress};

/// What opens the list of actions (the trigger) with its first line's indent,
/// what separates two actions, and what closes the list.
pub(crate) const LIST: (&str, &str, &str) =
    ("<|START_ACTION|>[\n    ", ",\n    ", "\n]<|END_ACTION|>");

/// The trigger.
pub(crate) const TRIGGER: &str = "<|START_ACTION|>";

/// An action's fields.
const KEYS: CallKeys = CallKeys::Fields {
    id: Some("tool_call_id"),
    name: "tool_name",
    arguments: "parameters",
};

/// The tags around a text reply, which a reader drops.
const TEXT_TAGS: [&str; 4] = [
    "<|START_RESPONSE|>",
    "<|END_RESPONSE|>",
    "<|START_TEXT|>",
    "<|END_TEXT|>",
];

/// One action up to its parameters, the id left to the caller.
pub(crate) fn action_head(name: &str) -> (&'static str, String) {
    let quoted = serde_json::to_string(name).expect("a string");
    (
        "{\"tool_call_id\": \"",
        format!("\", \"tool_name\": {quoted}, \"parameters\": "),
    )
}

/// A whole list holding one action (id `id`).
pub(crate) fn call_text(name: &str, arguments: &Value, id: &str) -> String {
    let (open, middle) = action_head(name);
    format!("{}{open}{id}{middle}{arguments}}}{}", LIST.0, LIST.2)
}

fn without_text_tags(text: &str) -> String {
    TEXT_TAGS
        .iter()
        .fold(text.to_string(), |text, tag| text.replace(tag, ""))
}

/// Splits a reply into content and the calls of its list of actions. A list
/// that does not read whole stays content.
pub(crate) fn parse(text: &str) -> ParsedReply {
    let whole = |content: &str| ParsedReply {
        content: without_text_tags(content).trim().to_string(),
        calls: Vec::new(),
        ..Default::default()
    };
    let Some(start) = text.find(TRIGGER) else {
        return whole(text);
    };
    let body = &text[start + TRIGGER.len()..];
    let read = (|| {
        let (list, used) = leading_json(body)?;
        let calls = call_objects(list.as_array()?, &KEYS)?;
        let after = body[used..].trim_start();
        let tail = after.strip_prefix("<|END_ACTION|>").unwrap_or(after);
        Some((calls, tail))
    })();
    match read {
        Some((calls, tail)) => {
            let mut reply = whole(&format!("{}{tail}", &text[..start]));
            reply.calls = calls;
            reply
        }
        None => whole(text),
    }
}

/// The actions of a reply being written whose names are known.
pub(crate) fn calls_in_progress(text: &str) -> Vec<CallProgress<'_>> {
    let Some(start) = text.find(TRIGGER) else {
        return Vec::new();
    };
    match text[start + TRIGGER.len()..].trim_start().strip_prefix('[') {
        Some(rest) => progress::call_objects(rest, &KEYS, true),
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_actions_and_drops_the_text_tags() {
        let text = "<|START_RESPONSE|>On it.<|END_RESPONSE|><|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"f\", \"parameters\": {\"a\": 1}},\n    {\"tool_call_id\": \"1\", \"tool_name\": \"g\", \"parameters\": {}}\n]<|END_ACTION|>";
        let r = parse(text);
        assert_eq!(r.content, "On it.");
        let calls: Vec<(&str, &str, Option<&str>)> = r
            .calls
            .iter()
            .map(|c| (c.name.as_str(), c.arguments.as_str(), c.id.as_deref()))
            .collect();
        assert_eq!(
            calls,
            [("f", r#"{"a":1}"#, Some("0")), ("g", "{}", Some("1"))]
        );
        let progress = calls_in_progress(text);
        assert_eq!(progress.len(), 2);
        assert!(progress.iter().all(|c| c.complete));
        let cut = calls_in_progress(&text[..text.find("{}").unwrap() - 1]);
        assert_eq!(cut.iter().map(|c| c.name).collect::<Vec<_>>(), ["f", "g"]);
        assert!(!cut[1].complete);
    }

    #[test]
    fn a_list_that_does_not_read_stays_content() {
        let text = "<|START_ACTION|>[{\"tool_name\": \"f\", \"parameters\": [1]}]<|END_ACTION|>";
        let r = parse(text);
        assert!(r.calls.is_empty());
        assert_eq!(r.content, text);
    }
}
