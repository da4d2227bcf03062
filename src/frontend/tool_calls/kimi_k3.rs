//! Kimi K3's replies: tagged blocks, each opened by `<|open|>NAME ...<|sep|>`
//! and closed by `<|close|>NAME<|sep|>`. The prompt opens the thinking block
//! (or, with thinking off, the response block); the model writes the rest:
//!
//! ```text
//! REASONING<|close|>think<|sep|><|open|>response<|sep|>TEXT<|close|>response<|sep|>
//! <|open|>tools<|sep|><|open|>call tool="f" index="1"<|sep|>
//! <|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>
//! <|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>
//! ```
//!
//! (on one line). The calls follow the response block, every one in one tools
//! block, numbered by the model; each argument names its value's JSON type
//! (the `kimi_k3_xml` parameter style). The grammar starts inside the response
//! block, as the prompt leaves it; a reasoning span ([`REASONING`]) goes before.

use serde_json::{json, Value};

use super::parse::{ParsedCall, ParsedReply};
use super::xml::{function_block, KIMI_K3};
use super::{one_of, repeated, seq, text, Tool, ToolChoice};

/// What the model writes when it opens the response block itself (after its
/// reasoning); a reader takes it off.
const RESPONSE_OPEN: &str = "<|open|>response<|sep|>";
/// What closes the response block: the text before it is the content.
const RESPONSE_CLOSE: &str = "<|close|>response<|sep|>";
/// What closes the reply.
const MESSAGE_CLOSE: &str = "<|close|>message<|sep|>";

/// The thinking block: the prompt opens it, the model closes it and opens the
/// response block.
pub(crate) const REASONING: (&str, &str) = (
    "<|open|>think<|sep|>",
    "<|close|>think<|sep|><|open|>response<|sep|>",
);

/// What ends the content: calls, if any, come after it.
pub(crate) const TRIGGER: &str = RESPONSE_CLOSE;

/// A reply holding one call, as the template writes it.
pub(crate) fn call_text(name: &str, arguments: &Value) -> String {
    let mut call = format!("{}{name}\" index=\"1\"<|sep|>", KIMI_K3.open);
    for (key, value) in arguments.as_object().into_iter().flatten() {
        call.push_str(&KIMI_K3.parameter_text(key, value));
    }
    let (open, close) = KIMI_K3.wrapper;
    format!(
        "{RESPONSE_CLOSE}{open}{call}{}{close}{MESSAGE_CLOSE}",
        KIMI_K3.close
    )
}

/// The reply's format: the rest of the response block (text, or nothing when
/// a call is required), then the calls to `chosen` as `choice` and `parallel`
/// allow, then the message's close.
pub(crate) fn format(chosen: &[&Tool], choice: &ToolChoice, parallel: bool) -> Value {
    let call = |tool: &Tool| {
        seq(vec![
            text(&format!("{}{}\" index=\"", KIMI_K3.open, tool.name)),
            json!({"type": "regex", "pattern": "[1-9][0-9]{0,3}"}),
            text("\"<|sep|>"),
            json!({"type": "json_schema", "json_schema": tool.parameters,
                   "style": KIMI_K3.style.name(), "any_order": true}),
            text(KIMI_K3.close),
        ])
    };
    let (open, close) = KIMI_K3.wrapper;
    let calls = || {
        seq(vec![
            text(open),
            repeated(
                one_of(chosen.iter().map(|t| call(t)).collect()),
                text(""),
                parallel,
            ),
            text(close),
        ])
    };
    // The response's text opens no block and closes no other (the model's tags
    // are special tokens: their text would be misread).
    let response = json!({"type": "tag", "begin": "",
                          "content": {"type": "any_text",
                                      "excludes": ["<|open|>", "<|close|>think", MESSAGE_CLOSE]},
                          "end": RESPONSE_CLOSE});
    let body = match choice {
        ToolChoice::None => vec![response],
        ToolChoice::Auto if chosen.is_empty() => vec![response],
        ToolChoice::Auto => vec![response, json!({"type": "optional", "content": calls()})],
        ToolChoice::Required | ToolChoice::Function(_) => vec![text(RESPONSE_CLOSE), calls()],
    };
    seq([body, vec![text(MESSAGE_CLOSE)]].concat())
}

/// Splits a reply into the response block's text (the content) and the calls
/// of the tools block, each argument typed by its tag. A call that does not
/// read whole is left out of the calls and its text kept as content.
pub(crate) fn parse(text: &str, tools: &[Tool]) -> ParsedReply {
    let text = text.trim_start();
    let text = text.strip_prefix(RESPONSE_OPEN).unwrap_or(text);
    let Some(end) = text.find(RESPONSE_CLOSE) else {
        let content = text.strip_suffix(MESSAGE_CLOSE).unwrap_or(text);
        return ParsedReply {
            content: content.trim().to_string(),
            ..ParsedReply::default()
        };
    };
    let mut reply = ParsedReply {
        content: text[..end].trim().to_string(),
        ..ParsedReply::default()
    };
    let mut rest = text[end + RESPONSE_CLOSE.len()..].trim_start();
    rest = rest.strip_prefix(KIMI_K3.wrapper.0).unwrap_or(rest);
    while let Some(block) = function_block(rest.trim_start(), &KIMI_K3, tools) {
        let Some(used) = block.end else { break };
        reply.calls.push(ParsedCall {
            name: block.name.to_string(),
            arguments: block.arguments().to_string(),
            id: None,
        });
        rest = &rest.trim_start()[used..];
    }
    let rest = rest.trim_start();
    let rest = rest.strip_prefix(KIMI_K3.wrapper.1).unwrap_or(rest).trim();
    let rest = rest.strip_suffix(MESSAGE_CLOSE).unwrap_or(rest).trim();
    if !rest.is_empty() {
        if !reply.content.is_empty() {
            reply.content.push('\n');
        }
        reply.content.push_str(rest);
    }
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_content_and_typed_arguments() {
        let text = "On it.<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"f\" index=\"1\"<|sep|><|open|>argument key=\"n\" type=\"number\"<|sep|>1<|close|>argument<|sep|><|open|>argument key=\"s\" type=\"string\"<|sep|>42<|close|>argument<|sep|><|close|>call<|sep|><|open|>call tool=\"g\" index=\"2\"<|sep|><|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>";
        let r = parse(text, &[]);
        assert_eq!(r.content, "On it.");
        let calls: Vec<(&str, &str)> = r
            .calls
            .iter()
            .map(|c| (c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(calls, [("f", r#"{"n":1,"s":"42"}"#), ("g", "{}")]);
        let plain = parse(
            "<|open|>response<|sep|>Hi<|close|>response<|sep|><|close|>message<|sep|>",
            &[],
        );
        assert_eq!((plain.content.as_str(), plain.calls.len()), ("Hi", 0));
    }
}
