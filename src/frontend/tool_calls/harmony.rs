//! gpt-oss's harmony format: a reply is a run of messages, each a header, then
//! `<|message|>`, then its body, the next opened by `<|start|>assistant`:
//!
//! ```text
//! <|channel|>analysis<|message|>The user wants the weather.<|end|>
//! <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>
//! ```
//!
//! (on one line; the prompt ends with `<|start|>assistant`). The channel says
//! what a body is: `analysis` is reasoning, `final` the answer, `commentary`
//! a preamble to calls; a recipient (` to=functions.f`, before or after the
//! channel) makes the body that function's arguments. A call ends the turn
//! (`<|call|>`, an end-of-sequence token), so a turn holds one call whatever
//! `parallel_tool_calls` says.
//!
//! The grammar lets analysis and commentary messages come first (free text up
//! to `<|end|>`), then writes the answer or the call; it takes each header
//! spelling gpt-oss is seen writing (recipient before or after the channel,
//! ` <|constrain|>json`, ` json` or nothing before `<|message|>`).

use serde_json::{json, Value};

use super::parse::{leading_json, ParsedCall, ParsedReply};
use super::{one_of, seq, text, Tool, ToolChoice};

/// What opens a message after the first (the prompt opens the first).
pub(crate) const NEXT: &str = "<|start|>assistant";
/// What opens a message's header (the channel name follows).
const CHANNEL: &str = "<|channel|>";
/// What ends a header.
const MESSAGE: &str = "<|message|>";
/// What ends a message that does not end the turn.
const END: &str = "<|end|>";
/// What ends a body: `<|end|>`, or the turn's end after a call or the answer.
const BODY_ENDS: [&str; 3] = [END, "<|call|>", "<|return|>"];
/// The recipient of a function's arguments, before its name.
const TO_FUNCTION: &str = " to=functions.";

/// The reasoning span a harmony reply opens with: an analysis message, closed
/// where the next message starts.
pub(crate) const REASONING: (&str, &str) = (
    "<|channel|>analysis<|message|>",
    "<|end|><|start|>assistant",
);

/// The text that makes a message a call (after its channel, or before it).
pub(crate) const TRIGGER: &str = TO_FUNCTION;

/// A call as stencil writes it (the form OpenAI documents).
pub(crate) fn call_text(name: &str, arguments: &Value) -> String {
    format!("{CHANNEL}commentary{TO_FUNCTION}{name} <|constrain|>json{MESSAGE}{arguments}")
}

/// The headers of a call to `name` that gpt-oss writes.
fn call_headers(name: &str) -> Value {
    let mut heads = Vec::new();
    for channel in ["commentary", "analysis"] {
        heads.push(text(&format!("{CHANNEL}{channel}{TO_FUNCTION}{name}")));
        heads.push(text(&format!("{TO_FUNCTION}{name}{CHANNEL}{channel}")));
    }
    let kind = one_of(vec![
        text(" <|constrain|>json"),
        text("<|constrain|>json"),
        text(" json"),
        text(""),
    ]);
    seq(vec![one_of(heads), kind, text(MESSAGE)])
}

/// The reply's format: messages of free text (reasoning, preambles), then the
/// answer (`final`) or a call to one of `chosen`, as `choice` allows.
pub(crate) fn format(chosen: &[&Tool], choice: &ToolChoice) -> Value {
    let message = |channel: &str| {
        json!({"type": "tag", "begin": format!("{CHANNEL}{channel}{MESSAGE}"),
               "content": {"type": "any_text"}, "end": format!("{END}{NEXT}")})
    };
    let earlier = json!({"type": "star", "content": one_of(vec![message("analysis"), message("commentary")])});
    let answer = seq(vec![
        text(&format!("{CHANNEL}final{MESSAGE}")),
        json!({"type": "any_text"}),
    ]);
    let call = |tool: &Tool| {
        seq(vec![
            call_headers(&tool.name),
            json!({"type": "json_schema", "json_schema": tool.parameters}),
            // End-of-sequence where the vocabulary says so; else its text.
            json!({"type": "optional", "content": text("<|call|>")}),
        ])
    };
    let calls = || one_of(chosen.iter().map(|t| call(t)).collect());
    let last = match choice {
        ToolChoice::None => answer,
        ToolChoice::Auto if chosen.is_empty() => answer,
        ToolChoice::Auto => one_of(vec![answer, calls()]),
        ToolChoice::Required | ToolChoice::Function(_) => calls(),
    };
    seq(vec![earlier, last])
}

/// One message of a reply, as read.
struct Message<'a> {
    recipient: Option<&'a str>,
    channel: &'a str,
    body: &'a str,
    /// Whether a stop ends the body (else the text ends in it).
    closed: bool,
}

/// The header's fields: ` to=R` anywhere, the last `<|channel|>`'s name. `None`
/// when it is no harmony header (no channel).
fn read_header(header: &str) -> Option<(Option<&str>, &str)> {
    let word = |text: &'_ str| -> usize {
        text.find(|c: char| c.is_whitespace() || c == '<')
            .unwrap_or(text.len())
    };
    let at = header.rfind(CHANNEL)?;
    let after = &header[at + CHANNEL.len()..];
    let channel = &after[..word(after)];
    let recipient = header.find(" to=").map(|at| {
        let name = &header[at + " to=".len()..];
        &name[..word(name)]
    });
    Some((recipient, channel))
}

/// The messages of `text` and what follows them that is none (text that is not
/// harmony, kept as content).
fn messages(text: &str) -> (Vec<Message<'_>>, &str) {
    let mut out = Vec::new();
    let mut rest = text;
    loop {
        let message = rest.strip_prefix("<|start|>").unwrap_or(rest);
        let Some(header_end) = message.find(MESSAGE) else {
            return (out, rest);
        };
        let Some((recipient, channel)) = read_header(&message[..header_end]) else {
            return (out, rest);
        };
        let after = &message[header_end + MESSAGE.len()..];
        let (body, next, closed) = super::parse::message_body(after, &BODY_ENDS);
        out.push(Message {
            recipient,
            channel,
            body,
            closed,
        });
        if next.is_empty() {
            return (out, next);
        }
        rest = next;
    }
}

/// Splits a reply into its answer (and commentary) as content, its analysis
/// as reasoning, and its calls to functions. Messages to gpt-oss's built-in
/// tools (`to=python`, `to=browser.search`, `to=container.exec`) are not calls
/// of the request's tools and are left out; arguments that are not a JSON
/// object stay content.
pub(crate) fn parse(text: &str) -> ParsedReply {
    let (messages, rest) = messages(text);
    let mut reply = ParsedReply::default();
    let mut content = Vec::new();
    let mut reasoning = Vec::new();
    for m in &messages {
        match m.recipient {
            Some(to) if to.starts_with("functions.") => {
                let name = &to["functions.".len()..];
                match leading_json(m.body) {
                    Some((arguments, used))
                        if arguments.is_object() && m.body[used..].trim().is_empty() =>
                    {
                        reply.calls.push(ParsedCall {
                            name: name.to_string(),
                            arguments: arguments.to_string(),
                            id: None,
                        })
                    }
                    _ => content.push(m.body),
                }
            }
            Some(to) if to != "assistant" => {}
            _ if m.channel == "analysis" => reasoning.push(m.body.trim()),
            _ => content.push(m.body),
        }
    }
    content.push(rest);
    reply.content = content.concat().trim().to_string();
    reply.reasoning = reasoning.join("\n");
    reply
}

/// The answer's text so far in a reply being written: the bodies of its
/// `final` and plain `commentary` messages, less a tail that may begin a body's
/// end. It only grows as the reply does.
pub(crate) fn content_so_far(text: &str) -> String {
    let (messages, _) = messages(text);
    let bodies = messages
        .iter()
        .filter(|m| m.recipient.is_none() && m.channel != "analysis");
    super::progress::answer_so_far(bodies.map(|m| (m.body, m.closed)), &BODY_ENDS)
}

/// Whether a call has begun in `text` (a reply so far).
pub(crate) fn in_call(text: &str) -> bool {
    text.contains(TO_FUNCTION)
}

/// The calls of a reply being written whose names are known: each call's
/// arguments so far.
pub(crate) fn calls_in_progress(text: &str) -> Vec<super::CallProgress<'_>> {
    let (messages, _) = messages(text);
    messages
        .iter()
        .filter_map(|m| {
            let name = m.recipient?.strip_prefix("functions.")?;
            let (arguments, complete) = super::progress::object_prefix(m.body);
            Some(super::CallProgress {
                name,
                id: None,
                arguments: std::borrow::Cow::Borrowed(arguments),
                complete,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_reasoning_answer_and_calls() {
        let r = parse("<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Hi!");
        assert_eq!(
            (r.reasoning.as_str(), r.content.as_str()),
            ("Think.", "Hi!")
        );
        assert!(r.calls.is_empty());
        let r = parse(" to=functions.f<|channel|>commentary json<|message|>{\"a\": 1}<|call|>");
        assert_eq!(r.calls.len(), 1);
        assert_eq!(
            (r.calls[0].name.as_str(), r.calls[0].arguments.as_str()),
            ("f", r#"{"a":1}"#)
        );
        let builtin = parse("<|channel|>commentary to=python <|constrain|>code<|message|>print(1)");
        assert!(builtin.calls.is_empty() && builtin.content.is_empty());
        let broken = parse("<|channel|>commentary to=functions.f<|message|>[1]");
        assert!(broken.calls.is_empty());
        assert_eq!(broken.content, "[1]");
        assert_eq!(parse("plain text").content, "plain text");
    }

    #[test]
    fn content_grows_with_the_reply() {
        let whole = "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>final<|message|>Hello <|there";
        let mut seen = String::new();
        for end in (0..=whole.len()).filter(|&n| whole.is_char_boundary(n)) {
            let now = content_so_far(&whole[..end]);
            assert!(now.starts_with(&seen), "{seen:?} then {now:?}");
            seen = now;
        }
        assert_eq!(seen, "Hello <|there");
        assert_eq!(content_so_far("<|channel|>final<|message|>Hi<|en"), "Hi");
    }
}
