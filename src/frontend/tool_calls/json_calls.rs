//! Calls whose arguments are a JSON object after the function's name, framed
//! by a family's delimiters (DeepSeek V3.1's and R1's `<｜tool▁call▁begin｜>`,
//! Kimi K2's `<|tool_call_begin|>functions.f:0`, functionary's `<function=f>`):
//! one [`JsonCallShape`] per
//! family says how it writes a call, and one reader reads them all back, whole
//! or as they are being written.

use std::borrow::Cow;

use serde_json::Value;

use super::parse::{leading_json, ParsedCall, ParsedReply};
use super::progress::{object_prefix, CallProgress};

/// How a family writes calls with JSON arguments.
#[derive(Debug, Clone, Copy)]
pub(crate) struct JsonCallShape {
    /// What opens and closes the block that holds all the calls of a turn
    /// (empty where each call stands alone).
    pub block: (&'static str, &'static str),
    /// What opens a call; the name follows (after `name_prefix`).
    pub call_open: &'static str,
    /// Written before the name (Kimi's `functions.`).
    pub name_prefix: &'static str,
    /// Kimi numbers its calls after the name (`functions.f:0`, the whole being
    /// the call's id).
    pub indexed: bool,
    /// Between the name and the arguments.
    pub arguments_open: &'static str,
    /// After the arguments, the templates' own first (R1's closing fence).
    pub arguments_close: &'static [&'static str],
    pub call_close: &'static str,
}

/// DeepSeek V3 and V3.1: `<｜tool▁call▁begin｜>f<｜tool▁sep｜>{...}<｜tool▁call▁end｜>`.
pub(crate) const DEEPSEEK_V3: JsonCallShape = JsonCallShape {
    block: ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"),
    call_open: "<｜tool▁call▁begin｜>",
    name_prefix: "",
    indexed: false,
    arguments_open: "<｜tool▁sep｜>",
    arguments_close: &[""],
    call_close: "<｜tool▁call▁end｜>",
};

/// DeepSeek R1 (and its distills): the type first, the arguments fenced.
pub(crate) const DEEPSEEK_R1: JsonCallShape = JsonCallShape {
    block: ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"),
    call_open: "<｜tool▁call▁begin｜>function<｜tool▁sep｜>",
    name_prefix: "",
    indexed: false,
    arguments_open: "\n```json\n",
    arguments_close: &["\n```", "```"],
    call_close: "<｜tool▁call▁end｜>",
};

/// Kimi K2: `<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{...}<|tool_call_end|>`.
pub(crate) const KIMI_K2: JsonCallShape = JsonCallShape {
    block: ("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"),
    call_open: "<|tool_call_begin|>",
    name_prefix: "functions.",
    indexed: true,
    arguments_open: "<|tool_call_argument_begin|>",
    arguments_close: &[""],
    call_close: "<|tool_call_end|>",
};

/// functionary v3.1: `<function=f>{...}</function>`, no block around calls.
pub(crate) const FUNCTIONARY_V31: JsonCallShape = JsonCallShape {
    block: ("", ""),
    call_open: "<function=",
    name_prefix: "",
    indexed: false,
    arguments_open: ">",
    arguments_close: &[""],
    call_close: "</function>",
};

impl JsonCallShape {
    /// What opens a call to `name` up to its arguments (the call's index where
    /// the family numbers them).
    pub(crate) fn head(&self, name: &str, index: usize) -> String {
        let index = if self.indexed {
            format!(":{index}")
        } else {
            String::new()
        };
        format!(
            "{}{}{name}{index}{}",
            self.call_open, self.name_prefix, self.arguments_open
        )
    }

    /// The whole call, as the templates write it.
    pub(crate) fn call_text(&self, name: &str, arguments: &Value, index: usize) -> String {
        format!(
            "{}{arguments}{}{}",
            self.head(name, index),
            self.arguments_close[0],
            self.call_close
        )
    }

    /// The name (and id, for an indexed family) written between a call's
    /// opening and its arguments.
    fn name_and_id<'a>(&self, written: &'a str) -> Option<(&'a str, Option<&'a str>)> {
        let name = written.trim().strip_prefix(self.name_prefix)?;
        let name = match self.indexed {
            true => name.rsplit_once(':')?.0,
            false => name,
        };
        let ok = !name.is_empty() && !name.contains(['<', '\n']);
        ok.then_some((name, self.indexed.then_some(written.trim())))
    }

    /// The call at the start of `text` (which starts at `call_open`), as far as
    /// it is written: name, id, arguments so far, whether they are closed, and
    /// the bytes used up to the call's close once it is there.
    fn call_at<'a>(&self, text: &'a str) -> Option<CallAt<'a>> {
        let body = text.strip_prefix(self.call_open)?;
        let arguments_at = body.find(self.arguments_open)?;
        let (name, id) = self.name_and_id(&body[..arguments_at])?;
        let arguments = &body[arguments_at + self.arguments_open.len()..];
        let (written, complete) = object_prefix(arguments.trim_start());
        let mut at = CallAt {
            name,
            id,
            arguments: written,
            complete,
            end: None,
        };
        if complete {
            let (value, used) = leading_json(arguments)?;
            value.is_object().then_some(())?;
            let after = &arguments[used..];
            let after = self
                .arguments_close
                .iter()
                .find_map(|c| after.strip_prefix(c).filter(|_| !c.is_empty()))
                .unwrap_or(after);
            if let Some(rest) = after.trim_start().strip_prefix(self.call_close) {
                at.end = Some(text.len() - rest.len());
            }
        }
        Some(at)
    }
}

struct CallAt<'a> {
    name: &'a str,
    id: Option<&'a str>,
    arguments: &'a str,
    complete: bool,
    /// Bytes up to and including the call's close.
    end: Option<usize>,
}

/// The calls of `text` and the text around them (the block's delimiters taken
/// off; a call that does not parse stays text).
pub(crate) fn parse(text: &str, shape: &JsonCallShape) -> ParsedReply {
    let mut reply = ParsedReply::default();
    let mut rest = text;
    while let Some(start) = rest.find(shape.call_open) {
        let call = shape.call_at(&rest[start..]);
        match call.as_ref().and_then(|c| Some((c, c.end?))) {
            Some((call, used)) => {
                let before = &rest[..start];
                let before = before
                    .trim_end()
                    .strip_suffix(shape.block.0)
                    .unwrap_or(before);
                if reply.calls.is_empty() || !before.trim().is_empty() {
                    reply.content.push_str(before);
                }
                let arguments: Value =
                    serde_json::from_str(call.arguments).expect("checked by call_at");
                reply.calls.push(ParsedCall {
                    name: call.name.to_string(),
                    arguments: arguments.to_string(),
                    id: call.id.map(str::to_string),
                });
                let after = &rest[start + used..];
                rest = after
                    .trim_start()
                    .strip_prefix(shape.block.1)
                    .unwrap_or(after);
            }
            None => {
                reply
                    .content
                    .push_str(&rest[..start + shape.call_open.len()]);
                rest = &rest[start + shape.call_open.len()..];
            }
        }
    }
    reply.content.push_str(rest);
    reply.content = reply.content.trim().to_string();
    reply
}

/// The calls of `text` (a reply so far) whose names are known, each with its
/// arguments as written so far.
pub(crate) fn calls_in_progress<'a>(text: &'a str, shape: &JsonCallShape) -> Vec<CallProgress<'a>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(shape.call_open) {
        let Some(call) = shape.call_at(&rest[start..]) else {
            break;
        };
        out.push(CallProgress {
            name: call.name,
            id: call.id,
            arguments: Cow::Borrowed(call.arguments),
            complete: call.complete,
        });
        match call.end {
            Some(end) => rest = &rest[start + end..],
            None => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_shape_reads_back_its_calls() {
        for shape in [DEEPSEEK_V3, DEEPSEEK_R1, KIMI_K2, FUNCTIONARY_V31] {
            let text = format!(
                "Sure.{}{}{}{}",
                shape.block.0,
                shape.call_text("f", &json!({"a": "}{"}), 0),
                shape.call_text("g", &json!({}), 1),
                shape.block.1
            );
            let reply = parse(&text, &shape);
            assert_eq!(reply.content, "Sure.", "{text}");
            let calls: Vec<_> = reply
                .calls
                .iter()
                .map(|c| (c.name.as_str(), c.arguments.as_str()))
                .collect();
            assert_eq!(calls, [("f", r#"{"a":"}{"}"#), ("g", "{}")], "{text}");
            if shape.indexed {
                assert_eq!(reply.calls[1].id.as_deref(), Some("functions.g:1"));
            }
            // Streamed: each prefix shows what is written so far.
            let mut last = String::new();
            for end in (0..=text.len()).filter(|&e| text.is_char_boundary(e)) {
                let calls = calls_in_progress(&text[..end], &shape);
                if let Some(first) = calls.first() {
                    assert_eq!(first.name, "f");
                    assert!(first.arguments.starts_with(last.as_str()) || calls.len() > 1);
                    last = first.arguments.to_string();
                }
            }
            assert_eq!(calls_in_progress(&text, &shape).len(), 2);
        }
    }

    #[test]
    fn a_call_that_does_not_parse_stays_text() {
        let text =
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>[1]<｜tool▁call▁end｜>";
        let reply = parse(text, &DEEPSEEK_V3);
        assert!(reply.calls.is_empty());
        assert_eq!(reply.content, text);
    }
}
