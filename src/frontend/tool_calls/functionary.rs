//! functionary v3.2's replies: messages addressed to a recipient. The prompt
//! ends with `>>>`; the model names the recipient, a newline, then the
//! message: `all` is the user (text), a function's name a call (its JSON
//! arguments). Each further message follows another `>>>`:
//!
//! ```text
//! all
//! Let me look.>>>get_weather
//! {"city": "Paris"}
//! ```
//!
//! The grammar starts after the prompt's `>>>`, as the model does.

use std::borrow::Cow;

use serde_json::{json, Value};

use super::parse::{leading_json, ParsedCall, ParsedReply};
use super::progress::{object_prefix, CallProgress};
use super::{one_of, seq, text, Tool, ToolChoice};

/// What opens every message after the first.
pub(crate) const TRIGGER: &str = ">>>";
/// The recipient of text for the user.
const TO_USER: &str = "all\n";

/// A reply holding one call, as the template writes it.
pub(crate) fn call_text(name: &str, arguments: &Value) -> String {
    format!("{name}\n{arguments}")
}

/// The reply's format: text for the user, calls to `chosen`, or (with `auto`)
/// text then calls, as `choice` and `parallel` allow.
pub(crate) fn format(chosen: &[&Tool], choice: &ToolChoice, parallel: bool) -> Value {
    let call = one_of(
        chosen
            .iter()
            .map(|t| {
                seq(vec![
                    text(&format!("{}\n", t.name)),
                    json!({"type": "json_schema", "json_schema": t.parameters}),
                ])
            })
            .collect(),
    );
    // Text holds no `>>>`: a reader would take what follows for a message.
    let words = seq(vec![
        text(TO_USER),
        json!({"type": "any_text", "excludes": [TRIGGER]}),
    ]);
    let more_calls = || match parallel {
        true => json!({"type": "star", "content": seq(vec![text(TRIGGER), call.clone()])}),
        false => text(""),
    };
    match choice {
        ToolChoice::Auto if chosen.is_empty() => words,
        ToolChoice::None => words,
        ToolChoice::Auto => one_of(vec![
            seq(vec![
                words,
                json!({"type": "optional", "content": seq(vec![text(TRIGGER), call.clone()])}),
                more_calls(),
            ]),
            seq(vec![call.clone(), more_calls()]),
        ]),
        // A call is the reply, as in the other formats: no text first.
        ToolChoice::Required | ToolChoice::Function(_) => seq(vec![call.clone(), more_calls()]),
    }
}

/// The reply's messages: recipient and body (the last one as far as written;
/// a recipient without its newline yet is `None`).
fn messages(text: &str) -> Vec<(Option<&str>, &str)> {
    text.split(TRIGGER)
        .map(|m| match m.split_once('\n') {
            Some((to, body)) => (Some(to.trim()), body),
            None => (None, m),
        })
        .collect()
}

/// Splits a reply into content (the messages to `all`) and calls. A message
/// to a function whose arguments do not read whole stays content.
pub(crate) fn parse(text: &str) -> ParsedReply {
    let mut reply = ParsedReply::default();
    let mut content: Vec<&str> = Vec::new();
    for (to, body) in messages(text) {
        match to {
            Some("all") | None => content.push(body),
            Some(name) => match leading_json(body).filter(|(v, _)| v.is_object()) {
                Some((arguments, _)) => reply.calls.push(ParsedCall {
                    name: name.to_string(),
                    arguments: arguments.to_string(),
                    id: None,
                }),
                None => content.push(body),
            },
        }
    }
    reply.content = content.join("\n").trim().to_string();
    reply
}

/// The content of a reply being written: its messages to `all` so far, held
/// back while a recipient or a `>>>` is still being written.
pub(crate) fn content_so_far(text: &str) -> &str {
    let Some(body) = text.strip_prefix(TO_USER) else {
        return "";
    };
    let end = body.find(TRIGGER).unwrap_or_else(|| {
        // A `>` or `>>` at the end may be the start of the next message.
        body.len()
            - (1..TRIGGER.len())
                .rev()
                .find(|&k| body.ends_with(&TRIGGER[..k]))
                .unwrap_or(0)
    });
    &body[..end]
}

/// Whether the reply being written has begun a call.
pub(crate) fn in_call(text: &str) -> bool {
    messages(text)
        .iter()
        .any(|(to, _)| to.is_some_and(|to| to != "all"))
}

/// The calls of a reply being written whose names are known.
pub(crate) fn calls_in_progress(text: &str) -> Vec<CallProgress<'_>> {
    messages(text)
        .into_iter()
        .filter_map(|(to, body)| {
            let name = to.filter(|&to| to != "all")?;
            let (arguments, complete) = object_prefix(body.trim_start());
            Some(CallProgress {
                name,
                id: None,
                arguments: Cow::Borrowed(arguments),
                complete,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_text_and_calls_whole_and_streamed() {
        let text = "all\nLet me look.>>>f\n{\"a\": 1}>>>g\n{}";
        let r = parse(text);
        assert_eq!(r.content, "Let me look.");
        let calls: Vec<(&str, &str)> = r
            .calls
            .iter()
            .map(|c| (c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(calls, [("f", r#"{"a":1}"#), ("g", "{}")]);
        assert_eq!(content_so_far("all\nLet me look.>>"), "Let me look.");
        assert_eq!(content_so_far("al"), "");
        assert!(!in_call("all\nLet me look.>>>"));
        assert!(in_call("all\nLet me look.>>>f\n{"));
        let cut = calls_in_progress("f\n{\"a\": 1}>>>g\n{");
        assert_eq!(cut.iter().map(|c| c.name).collect::<Vec<_>>(), ["f", "g"]);
        assert!(cut[0].complete && !cut[1].complete);
        assert_eq!(parse("f\n{\"a\": 1}").calls[0].name, "f");
        assert_eq!(parse("all\nHi").content, "Hi");
    }
}
