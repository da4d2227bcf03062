//! Muse Glimmer's ATEM messages: a reply is a run of messages, each a
//! recipient, `<|message|>` and a body, the next opened by
//! `<|eom|><|start|>assistant` (the prompt opens the first):
//!
//! ```text
//!  to=self<|message|>The user wants the weather.<|eom|><|start|>assistant to=get_weather<|message|><atem:function_calls>
//! <atem:invoke name="get_weather">
//! <atem:parameter name="city">Paris</atem:parameter>
//! </atem:invoke>
//! </atem:function_calls>
//! ```
//!
//! The recipient says what a body is: `self` reasoning, `user` the answer, a
//! function's name a call to it, whose body is one `<atem:function_calls>`
//! block (the `atem_xml` parameter style, read as the XML call shape
//! [`super::xml::ATEM`]). Each call is a message of its own; a message to the
//! user may come before them. A block inside a message to the user is text,
//! never a call (as llama.cpp reads it).
//!
//! The grammar lets reasoning messages come first, then writes the answer (text
//! holding no message end, so no call hides in it) or the calls.

use serde_json::{json, Value};

use super::parse::{ParsedCall, ParsedReply};
use super::progress::CallProgress;
use super::xml::{function_block, ATEM};
use super::{one_of, repeated, seq, text, Tool, ToolChoice};

/// What opens a message after the first (the prompt opens the first with
/// `<|start|>assistant`).
const NEXT: &str = "<|eom|><|start|>assistant";
/// What names a message's recipient.
const TO: &str = " to=";
/// What ends a header.
const MESSAGE: &str = "<|message|>";
/// What ends a body: the message, or the turn.
const BODY_ENDS: [&str; 2] = ["<|eom|>", "<|eot|>"];

/// The reasoning span a reply opens with: a message to itself, closed where
/// the next message starts.
pub(crate) const REASONING: (&str, &str) = (" to=self<|message|>", NEXT);

/// What opens a call's arguments.
pub(crate) const TRIGGER: &str = ATEM.wrapper.0;

/// A call as the template writes it.
pub(crate) fn call_text(name: &str, arguments: &Value) -> String {
    format!("{TO}{name}{MESSAGE}{}", ATEM.call_text(name, arguments))
}

/// The reply's format: messages to itself (reasoning), then the answer or the
/// calls to `chosen`, as `choice` allows, one message each.
pub(crate) fn format(chosen: &[&Tool], choice: &ToolChoice, parallel: bool) -> Value {
    let message = |to: &str| {
        json!({"type": "tag", "begin": format!("{TO}{to}{MESSAGE}"),
               "content": {"type": "any_text"}, "end": NEXT})
    };
    let earlier = json!({"type": "star", "content": message("self")});
    let answer = seq(vec![
        text(&format!("{TO}user{MESSAGE}")),
        json!({"type": "any_text", "excludes": BODY_ENDS}),
    ]);
    let call = |tool: &Tool| {
        seq(vec![
            text(&format!("{TO}{}{MESSAGE}", tool.name)),
            json!({"type": "tag", "begin": ATEM.call_begin(&tool.name),
                   "content": {"type": "json_schema", "json_schema": tool.parameters,
                               "style": ATEM.style.name(), "any_order": true},
                   "end": ATEM.ends}),
        ])
    };
    let calls = repeated(
        one_of(chosen.iter().map(|t| call(t)).collect()),
        text(NEXT),
        parallel,
    );
    // The message's or the turn's end, where the vocabulary spells it.
    let ends = BODY_ENDS.iter().map(|end| text(end)).collect();
    let calls = seq(vec![
        calls,
        json!({"type": "optional", "content": one_of(ends)}),
    ]);
    let last = match choice {
        ToolChoice::None => answer,
        ToolChoice::Auto if chosen.is_empty() => answer,
        ToolChoice::Auto => one_of(vec![
            answer,
            seq(vec![
                json!({"type": "optional", "content": message("user")}),
                calls,
            ]),
        ]),
        ToolChoice::Required | ToolChoice::Function(_) => calls,
    };
    seq(vec![earlier, last])
}

/// One message of a reply, as read.
struct Message<'a> {
    to: &'a str,
    body: &'a str,
    /// Whether an end closes the body (else the text ends in it).
    closed: bool,
}

impl Message<'_> {
    /// Whether the message is a call (to neither itself nor the user).
    fn is_call(&self) -> bool {
        !matches!(self.to, "self" | "user")
    }
}

/// The messages of `text`, and what follows them that is none (text that is
/// not a message, kept as content).
fn messages(text: &str) -> (Vec<Message<'_>>, &str) {
    let mut out = Vec::new();
    let mut rest = text;
    loop {
        let message = rest.strip_prefix("<|start|>assistant").unwrap_or(rest);
        let Some(header) = message.strip_prefix(TO) else {
            return (out, rest);
        };
        let Some(at) = header.find(MESSAGE) else {
            return (out, rest);
        };
        let to = &header[..at];
        if to.is_empty() || to.contains(|c: char| c.is_whitespace() || c == '<') {
            return (out, rest);
        }
        let after = &header[at + MESSAGE.len()..];
        let (body, next, closed) = super::parse::message_body(after, &BODY_ENDS);
        out.push(Message { to, body, closed });
        if next.is_empty() {
            return (out, next);
        }
        rest = next;
    }
}

/// The call a message's body holds, as far as it is written: `None` when it
/// is no `<atem:function_calls>` block to the function the message names.
fn block_of<'a>(message: &Message<'a>, tools: &[Tool]) -> Option<super::xml::FunctionBlock<'a>> {
    let inside = message.body.strip_prefix(ATEM.wrapper.0)?.trim_start();
    function_block(inside, &ATEM, tools).filter(|b| b.name == message.to)
}

/// Splits a reply into its answer as content, its messages to itself as
/// reasoning, and its calls. A call that does not read whole stays content.
pub(crate) fn parse(text: &str, tools: &[Tool]) -> ParsedReply {
    let (messages, rest) = messages(text);
    let mut reply = ParsedReply::default();
    let (mut content, mut reasoning) = (Vec::new(), Vec::new());
    for m in &messages {
        match m.to {
            "self" => reasoning.push(m.body.trim()),
            "user" => content.push(m.body),
            _ => match block_of(m, tools).filter(|b| b.end.is_some()) {
                Some(block) => reply.calls.push(ParsedCall {
                    name: block.name.to_string(),
                    arguments: block.arguments().to_string(),
                    id: None,
                }),
                None => content.push(m.body),
            },
        }
    }
    content.push(rest);
    reply.content = content.concat().trim().to_string();
    reply.reasoning = reasoning.join("\n");
    reply
}

/// The answer's text so far in a reply being written: the bodies of its
/// messages to the user, less a tail that may begin a body's end. It only
/// grows as the reply does.
pub(crate) fn content_so_far(text: &str) -> String {
    let (messages, _) = messages(text);
    let bodies = messages.iter().filter(|m| m.to == "user");
    super::progress::answer_so_far(bodies.map(|m| (m.body, m.closed)), &BODY_ENDS)
}

/// Whether a call has begun in `text` (a reply so far).
pub(crate) fn in_call(text: &str) -> bool {
    messages(text).0.iter().any(Message::is_call)
}

/// The calls of a reply being written whose names are known: each call's
/// arguments so far (each parameter once it is closed).
pub(crate) fn calls_in_progress<'a>(text: &'a str, tools: &[Tool]) -> Vec<CallProgress<'a>> {
    let (messages, _) = messages(text);
    messages
        .iter()
        .filter(|m| m.is_call())
        .filter_map(|m| {
            let block = block_of(m, tools)?;
            Some(CallProgress {
                name: m.to,
                id: None,
                arguments: std::borrow::Cow::Owned(block.arguments_json()),
                complete: block.end.is_some(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CALL: &str = " to=f<|message|><atem:function_calls>\n<atem:invoke name=\"f\">\n<atem:parameter name=\"a\">1</atem:parameter>\n</atem:invoke>\n</atem:function_calls>";

    #[test]
    fn reads_reasoning_answer_and_calls() {
        let r = parse(
            " to=self<|message|>Think.<|eom|><|start|>assistant to=user<|message|>Hi!<|eot|>",
            &[],
        );
        assert_eq!(
            (r.reasoning.as_str(), r.content.as_str(), r.calls.len()),
            ("Think.", "Hi!", 0)
        );
        let r = parse(
            &format!(" to=user<|message|>On it.<|eom|><|start|>assistant{CALL}<|eom|><|start|>assistant{CALL}"),
            &[],
        );
        assert_eq!(r.content, "On it.");
        let calls: Vec<(&str, &str)> = (r.calls.iter())
            .map(|c| (c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(calls, [("f", r#"{"a":1}"#), ("f", r#"{"a":1}"#)]);
        // A block in a message to the user is text.
        let text = " to=user<|message|>Like this: <atem:function_calls>\n<atem:invoke name=\"f\">\n</atem:invoke>\n</atem:function_calls>";
        let r = parse(text, &[]);
        assert!(r.calls.is_empty() && r.content.starts_with("Like this:"));
        assert_eq!(parse("plain text", &[]).content, "plain text");
    }

    #[test]
    fn content_and_calls_grow_with_the_reply() {
        let whole = format!(" to=user<|message|>Hello <|there<|eom|><|start|>assistant{CALL}");
        let (mut seen, mut arguments) = (String::new(), String::new());
        for end in (0..=whole.len()).filter(|&n| whole.is_char_boundary(n)) {
            let now = content_so_far(&whole[..end]);
            assert!(now.starts_with(&seen), "{seen:?} then {now:?}");
            seen = now;
            if let Some(call) = calls_in_progress(&whole[..end], &[]).first() {
                assert!(call.arguments.starts_with(&arguments));
                arguments = call.arguments.to_string();
            }
        }
        assert_eq!(seen, "Hello <|there");
        assert_eq!(arguments, r#"{"a":1}"#);
        assert!(in_call(&whole) && !in_call(" to=user<|message|>Hi"));
    }
}
