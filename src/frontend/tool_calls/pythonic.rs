//! Calls written as a Python list of function calls, as LFM2 and LFM2.5 write
//! them: `<|tool_call_start|>[f(a=1, b="x"), g()]<|tool_call_end|>`.
//!
//! The arguments are keyword arguments whose values are Python literals: the
//! JSON Schema front-end's `python` parameter style constrains them (JSON values
//! whose `true`/`false`/`null` may be spelled `True`/`False`/`None`). The reader
//! here reads back what that style writes and a little more of Python (strings
//! in single quotes, tuples), since a reply written freely may hold them; a value
//! it cannot read leaves the block in the content, never a guessed call.

use serde_json::{Map, Number, Value};

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

/// One call read as far as the text goes.
struct Call<'a> {
    name: &'a str,
    /// Keyword arguments closed so far, in order.
    arguments: Vec<(&'a str, Value)>,
    /// Bytes up to and including the call's `)`, once it is there.
    end: Option<usize>,
}

impl Call<'_> {
    fn object(&self) -> Value {
        let map: Map<String, Value> = self
            .arguments
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        Value::Object(map)
    }

    /// The arguments' compact JSON so far, closed once the call is.
    fn json_so_far(&self) -> String {
        let mut out = String::from("{");
        for (i, (key, value)) in self.arguments.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&Value::String(key.to_string()).to_string());
            out.push(':');
            out.push_str(&value.to_string());
        }
        if self.end.is_some() {
            out.push('}');
        }
        out
    }
}

/// The calls of the block whose body (after `[`) starts `text`, as far as they
/// go; `Err` where the text is no such list.
fn read_calls(text: &str) -> Result<(Vec<Call<'_>>, Option<usize>), ()> {
    let mut calls = Vec::new();
    let mut at = skip_ws(text, 0);
    if text[at..].starts_with(']') {
        return Ok((calls, Some(at + 1)));
    }
    loop {
        let call = read_call(text, at)?;
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

/// `name(k=v, ...)` at byte `at` of `text`, its end relative to `text`.
fn read_call(text: &str, at: usize) -> Result<Call<'_>, ()> {
    let open = text[at..].find('(').ok_or(())? + at;
    let name = text[at..open].trim();
    let is_name_char = |c: char| c.is_alphanumeric() || c == '_' || c == '.' || c == '-';
    if name.is_empty() || !name.chars().all(is_name_char) {
        return Err(());
    }
    let mut call = Call {
        name,
        arguments: Vec::new(),
        end: None,
    };
    let mut i = skip_ws(text, open + 1);
    if text[i..].starts_with(')') {
        call.end = Some(i + 1);
        return Ok(call);
    }
    loop {
        let Some(eq) = text[i..].find('=').map(|e| e + i) else {
            return Ok(call);
        };
        let key = text[i..eq].trim();
        if key.is_empty() || !key.chars().all(|c| c.is_alphanumeric() || c == '_') {
            return Err(());
        }
        let mut reader = Reader {
            text,
            at: skip_ws(text, eq + 1),
        };
        match reader.value() {
            Ok(value) => call.arguments.push((key, value)),
            Err(Cut) if reader.at >= text.len() => return Ok(call),
            Err(Cut) => return Err(()),
        }
        i = skip_ws(text, reader.at);
        match text[i..].chars().next() {
            Some(',') => i = skip_ws(text, i + 1),
            Some(')') => {
                call.end = Some(i + 1);
                return Ok(call);
            }
            Some(_) => return Err(()),
            None => return Ok(call),
        }
    }
}

fn skip_ws(text: &str, at: usize) -> usize {
    at + text[at..].len() - text[at..].trim_start().len()
}

/// A value that does not parse (or is cut short: the reader stands at the end).
struct Cut;

/// A Python literal reader over `text`, from byte `at`.
struct Reader<'a> {
    text: &'a str,
    at: usize,
}

impl Reader<'_> {
    fn rest(&self) -> &str {
        &self.text[self.at..]
    }

    fn value(&mut self) -> Result<Value, Cut> {
        self.at = skip_ws(self.text, self.at);
        let rest = self.rest();
        for (word, value) in [
            ("True", Value::Bool(true)),
            ("False", Value::Bool(false)),
            ("None", Value::Null),
            ("true", Value::Bool(true)),
            ("false", Value::Bool(false)),
            ("null", Value::Null),
        ] {
            if rest.starts_with(word) {
                self.at += word.len();
                return Ok(value);
            }
        }
        match rest.chars().next() {
            Some(q @ ('"' | '\'')) => self.string(q).map(Value::String),
            Some('[') => self.sequence(']'),
            Some('(') => self.sequence(')'),
            Some('{') => self.dict(),
            Some(c) if c == '-' || c.is_ascii_digit() => self.number(),
            _ => {
                // Cut short inside a keyword reads as the end of the text.
                if !rest.is_empty()
                    && ["True", "False", "None"]
                        .iter()
                        .any(|w| w.starts_with(rest))
                {
                    self.at = self.text.len();
                }
                Err(Cut)
            }
        }
    }

    fn number(&mut self) -> Result<Value, Cut> {
        let text = self.text;
        let rest = &text[self.at..];
        let len = rest
            .find(|c: char| !(c.is_ascii_digit() || "+-.eE".contains(c)))
            .unwrap_or(rest.len());
        let text = &rest[..len];
        self.at += len;
        if self.at == self.text.len() {
            return Err(Cut);
        }
        if let Ok(i) = text.parse::<i64>() {
            return Ok(Value::Number(i.into()));
        }
        match serde_json::from_str::<Value>(text) {
            Ok(n @ Value::Number(_)) => Ok(n),
            _ => text
                .parse::<f64>()
                .ok()
                .and_then(Number::from_f64)
                .map(Value::Number)
                .ok_or(Cut),
        }
    }

    /// A string in `quote`s with Python's escapes (JSON's are among them).
    fn string(&mut self, quote: char) -> Result<String, Cut> {
        let mut out = String::new();
        let mut chars = self.rest().char_indices().skip(1);
        let start = self.at;
        while let Some((i, c)) = chars.next() {
            match c {
                c if c == quote => {
                    self.at = start + i + 1;
                    return Ok(out);
                }
                '\\' => {
                    let Some((_, e)) = chars.next() else { break };
                    match e {
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        'r' => out.push('\r'),
                        'b' => out.push('\u{8}'),
                        'f' => out.push('\u{c}'),
                        '0' => out.push('\0'),
                        'u' => {
                            let hex: String = (0..4)
                                .filter_map(|_| chars.next())
                                .map(|(_, h)| h)
                                .collect();
                            if hex.len() < 4 {
                                break;
                            }
                            let code = u32::from_str_radix(&hex, 16).map_err(|_| Cut)?;
                            out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                        }
                        '\\' | '\'' | '"' | '/' => out.push(e),
                        other => {
                            out.push('\\');
                            out.push(other);
                        }
                    }
                }
                c => out.push(c),
            }
        }
        self.at = self.text.len();
        Err(Cut)
    }

    /// A list (or tuple) up to `close`.
    fn sequence(&mut self, close: char) -> Result<Value, Cut> {
        self.at += 1;
        let mut items = Vec::new();
        loop {
            self.at = skip_ws(self.text, self.at);
            if self.rest().starts_with(close) {
                self.at += 1;
                return Ok(Value::Array(items));
            }
            items.push(self.value()?);
            self.at = skip_ws(self.text, self.at);
            match self.rest().chars().next() {
                Some(',') => self.at += 1,
                Some(c) if c == close => {}
                None => return Err(Cut),
                Some(_) => return Err(Cut),
            }
        }
    }

    /// A dict with string keys.
    fn dict(&mut self) -> Result<Value, Cut> {
        self.at += 1;
        let mut map = Map::new();
        loop {
            self.at = skip_ws(self.text, self.at);
            if self.rest().starts_with('}') {
                self.at += 1;
                return Ok(Value::Object(map));
            }
            let Value::String(key) = self.value()? else {
                return Err(Cut);
            };
            self.at = skip_ws(self.text, self.at);
            if !self.rest().starts_with(':') {
                return Err(Cut);
            }
            self.at += 1;
            let value = self.value()?;
            map.insert(key, value);
            self.at = skip_ws(self.text, self.at);
            match self.rest().chars().next() {
                Some(',') => self.at += 1,
                Some('}') => {}
                _ => return Err(Cut),
            }
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
