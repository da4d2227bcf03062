//! XML calls read back: Qwen's `<function=NAME>` with its `<parameter=KEY>`
//! blocks, GLM's `<tool_call>NAME` with `<arg_key>`/`<arg_value>` pairs,
//! MiniMax's and DeepSeek's `<invoke name="NAME">`, each value typed by the
//! tool's schema. A [`CallShape`] says how a family writes one call.
//!
//! The text of a parameter carries no type: `42` may be a number or a zip code.
//! The tool's schema decides, as in llama.cpp's reader: a parameter whose schema
//! admits only strings is the text itself; any other is the JSON the text spells
//! when it parses, else the text. DeepSeek says it in the tag (`string="true"`:
//! the text; `"false"`: JSON). Qwen's values lose one newline on each side first
//! (the tags' own, as the templates render them and the `qwen_coder_xml` style
//! writes them).
//!
//! Shared by the whole-reply parser ([`super::parse`]) and the streaming one
//! ([`super::progress`]), which shows each parameter once it is closed.

use serde_json::Value;

use super::{minimax_m3, Tool};
use crate::frontend::json_schema::{ParameterStyle, CDATA};

/// How a family writes one call: what opens it (the function's name follows),
/// what ends the name, what closes the call, its parameters' style, and what
/// wraps calls (each call, or a run of them).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallShape {
    pub open: &'static str,
    /// What ends the name; `None`: a newline or the next tag does (GLM).
    pub name_close: Option<&'static str>,
    pub close: &'static str,
    pub style: ParameterStyle,
    /// What opens and closes a wrapper around calls (Qwen's `<tool_call>`
    /// around each, MiniMax's `<minimax:tool_call>` around all); empty when the
    /// call needs none. A reader takes it off the content.
    pub wrapper: (&'static str, &'static str),
    /// Whether the wrapper goes around each call (else around all of them).
    pub wraps_each_call: bool,
    /// How a writer ends a call (the closing tag, the wrapper's when it wraps
    /// each call, the newlines between), the templates' own first.
    pub ends: &'static [&'static str],
    /// What the templates write before the calls even when there is no text
    /// (DeepSeek's `\n\n`): a reply of calls alone may start with it.
    pub lead_in: &'static str,
    /// What ends the call's opening tag after the name's close, attributes
    /// between skipped (Kimi K3's ` index="1"<|sep|>`); empty when nothing does.
    pub head_close: &'static str,
    /// Whether the templates put a newline after the call's opening tag.
    pub head_newline: bool,
}

/// Qwen3-Coder's and Qwen3.5's call, each inside `<tool_call>`.
pub(crate) const QWEN: CallShape = CallShape {
    open: "<function=",
    name_close: Some(">"),
    close: "</function>",
    style: ParameterStyle::QwenCoder,
    wrapper: ("<tool_call>", "</tool_call>"),
    wraps_each_call: true,
    // Nemotron 3's template ends a call with a newline; some Qwen outputs have
    // none between the tags.
    ends: &[
        "</function>\n</tool_call>",
        "</function>\n</tool_call>\n",
        "</function></tool_call>",
    ],
    lead_in: "",
    head_close: "",
    head_newline: true,
};

/// GLM's call (`<tool_call>` is the call itself).
pub(crate) const GLM: CallShape = CallShape {
    open: "<tool_call>",
    name_close: None,
    close: "</tool_call>",
    style: ParameterStyle::Glm,
    wrapper: ("", ""),
    wraps_each_call: false,
    ends: &["</tool_call>"],
    lead_in: "",
    head_close: "",
    head_newline: true,
};

/// Seed-OSS's call: Qwen's tags without the newlines around values, each
/// inside `<seed:tool_call>`.
pub(crate) const SEED: CallShape = CallShape {
    open: "<function=",
    name_close: Some(">"),
    close: "</function>",
    style: ParameterStyle::Qwen,
    wrapper: ("<seed:tool_call>", "</seed:tool_call>"),
    wraps_each_call: true,
    ends: &["</function>\n</seed:tool_call>"],
    lead_in: "\n",
    head_close: "",
    head_newline: true,
};

/// MiniMax-M2's calls, all inside one `<minimax:tool_call>`.
pub(crate) const MINIMAX: CallShape = CallShape {
    open: "<invoke name=\"",
    name_close: Some("\">"),
    close: "</invoke>",
    style: ParameterStyle::MiniMax,
    wrapper: ("<minimax:tool_call>", "</minimax:tool_call>"),
    wraps_each_call: false,
    ends: &["</invoke>\n"],
    lead_in: "\n",
    head_close: "",
    head_newline: true,
};

/// DeepSeek V3.2's calls (DSML), all inside one `<｜DSML｜function_calls>`.
pub(crate) const DSML_FUNCTION_CALLS: CallShape = CallShape {
    open: "<｜DSML｜invoke name=\"",
    name_close: Some("\">"),
    close: "</｜DSML｜invoke>",
    style: ParameterStyle::DeepSeek,
    wrapper: ("<｜DSML｜function_calls>", "</｜DSML｜function_calls>"),
    wraps_each_call: false,
    ends: &["</｜DSML｜invoke>\n"],
    lead_in: "\n\n",
    head_close: "",
    head_newline: true,
};

/// DeepSeek V4's: V3.2's inside `<｜DSML｜tool_calls>`.
pub(crate) const DSML_TOOL_CALLS: CallShape = CallShape {
    wrapper: ("<｜DSML｜tool_calls>", "</｜DSML｜tool_calls>"),
    ..DSML_FUNCTION_CALLS
};

/// MiniCPM 5's calls, one after another with no wrapper.
pub(crate) const MINICPM: CallShape = CallShape {
    open: "<function name=\"",
    name_close: Some("\">"),
    close: "</function>",
    style: ParameterStyle::MiniCpm,
    wrapper: ("", ""),
    wraps_each_call: false,
    ends: &["</function>"],
    lead_in: "",
    head_close: "",
    head_newline: false,
};

/// Kimi K3's calls, all inside one `<|open|>tools<|sep|>`, each numbered by
/// the model (`index`).
pub(crate) const KIMI_K3: CallShape = CallShape {
    open: "<|open|>call tool=\"",
    name_close: Some("\""),
    close: "<|close|>call<|sep|>",
    style: ParameterStyle::KimiK3,
    wrapper: ("<|open|>tools<|sep|>", "<|close|>tools<|sep|>"),
    wraps_each_call: false,
    ends: &["<|close|>call<|sep|>"],
    lead_in: "",
    head_close: "<|sep|>",
    head_newline: false,
};

/// MiniMax-M3's calls, all inside one `]<]minimax[>[<tool_call>`, every tag
/// opened by `]<]minimax[>[` (its values read in [`super::minimax_m3`]).
pub(crate) const MINIMAX_M3: CallShape = CallShape {
    open: "]<]minimax[>[<invoke name=\"",
    name_close: Some("\">"),
    close: "]<]minimax[>[</invoke>",
    style: ParameterStyle::MiniMaxM3,
    wrapper: ("]<]minimax[>[<tool_call>", "]<]minimax[>[</tool_call>"),
    wraps_each_call: false,
    ends: &["]<]minimax[>[</invoke>\n"],
    lead_in: "",
    head_close: "",
    head_newline: false,
};

/// Muse Glimmer's call, in an `<atem:function_calls>` block of its own (the
/// body of a message to the function: [`super::muse`]).
pub(crate) const ATEM: CallShape = CallShape {
    open: "<atem:invoke name=\"",
    name_close: Some("\">"),
    close: "</atem:invoke>",
    style: ParameterStyle::Atem,
    wrapper: ("<atem:function_calls>", "</atem:function_calls>"),
    wraps_each_call: true,
    ends: &["</atem:invoke>\n</atem:function_calls>"],
    lead_in: "",
    head_close: "",
    head_newline: true,
};

/// A value in Cohere's style (`cohere_xml`), named or (an array's item) not:
/// its type in the tag, objects and arrays as tags nested the same way.
fn cohere_value_text(name: Option<&str>, value: &Value) -> String {
    let style = ParameterStyle::Cohere;
    let open = match name {
        Some(name) => format!("{}{}\"", style.key_prefix(), style.key_text(name)),
        None => "<cofl:value".to_string(),
    };
    let (kind, body) = match value {
        Value::String(s) => ("raw", s.clone()),
        Value::Object(map) => (
            "dict",
            map.iter()
                .map(|(k, v)| cohere_value_text(Some(k), v))
                .collect(),
        ),
        Value::Array(items) => (
            "list",
            items.iter().map(|v| cohere_value_text(None, v)).collect(),
        ),
        other => ("json", other.to_string()),
    };
    format!("{open} type=\"{kind}\">{body}{}", style.end())
}

/// A way a value's tag may open after its key, and what it says of the value:
/// raw text (`Some(true)`), JSON (`Some(false)`) or nothing (the schema decides).
type ValueOpen = (&'static str, Option<bool>);

impl CallShape {
    /// What opens a call to `name`, up to its parameters, as the templates
    /// render it: with the wrapper when there is one per call.
    pub(crate) fn call_begin(&self, name: &str) -> String {
        let newline = if self.head_newline { "\n" } else { "" };
        let head = match self.name_close {
            Some(close) => format!("{}{name}{close}{newline}", self.open),
            None => format!("{}{name}", self.open),
        };
        match self.wraps_each_call {
            true => format!("{}\n{head}", self.wrapper.0),
            false => head,
        }
    }

    /// A whole call to `name` as the templates render it, its wrapper included
    /// when there is one per call.
    pub(crate) fn call_text(&self, name: &str, arguments: &Value) -> String {
        let mut text = self.call_begin(name);
        for (key, value) in arguments.as_object().into_iter().flatten() {
            text.push_str(&self.parameter_text(key, value));
        }
        text.push_str(self.ends[0]);
        text
    }

    /// Whether one wrapper holds all the calls of a turn (MiniMax, DeepSeek's
    /// DSML).
    pub(crate) fn calls_share_a_block(&self) -> bool {
        !self.wraps_each_call && !self.wrapper.0.is_empty()
    }

    /// What opens the block that holds all the calls (the wrapper's own line).
    pub(crate) fn block_open(&self) -> String {
        format!("{}\n", self.wrapper.0)
    }

    /// One parameter as the style writes it, with what follows it.
    pub(crate) fn parameter_text(&self, key: &str, value: &Value) -> String {
        let (raw, text) = match value {
            Value::String(s) => (true, s.clone()),
            other => (false, other.to_string()),
        };
        let style = self.style;
        let (prefix, end) = (style.key_prefix(), style.end());
        match style {
            ParameterStyle::QwenCoder => format!("{prefix}{key}>\n{text}\n{end}\n"),
            ParameterStyle::Qwen => format!("{prefix}{key}>{text}{end}\n"),
            ParameterStyle::MiniMax | ParameterStyle::Atem => {
                format!("{prefix}{key}\">{text}{end}\n")
            }
            ParameterStyle::MiniCpm => {
                // As the template writes it: raw text that may be misread, in CDATA.
                let text = match raw && text.contains(['<', '&', '\n']) {
                    true => format!("{}{text}{}", CDATA.0, CDATA.1),
                    false => text,
                };
                format!("{prefix}{key}\">{text}{end}")
            }
            ParameterStyle::DeepSeek => format!("{prefix}{key}\" string=\"{raw}\">{text}{end}\n"),
            ParameterStyle::Glm => format!("{prefix}{key}</arg_key><arg_value>{text}{end}"),
            ParameterStyle::Python => format!("{key}={value}"),
            ParameterStyle::Gemma => format!("{key}:{}", super::gemma::value_text(value)),
            ParameterStyle::MiniMaxM3 => {
                format!(
                    "{prefix}{key}>{}{end}{key}>",
                    super::minimax_m3::value_text(value)
                )
            }
            ParameterStyle::Cohere => cohere_value_text(Some(key), value),
            ParameterStyle::KimiK3 => {
                let kind = match value {
                    Value::String(_) => "string",
                    Value::Number(_) => "number",
                    Value::Bool(_) => "boolean",
                    Value::Null => "null",
                    Value::Array(_) => "array",
                    Value::Object(_) => "object",
                };
                let key = style.key_text(key);
                format!("{prefix}{key}\" type=\"{kind}\"<|sep|>{text}{end}")
            }
        }
    }

    /// What ends a parameter's key, and the ways its value may open after that
    /// (after whitespace, when the opener is a tag of its own).
    fn key_close(&self) -> (&'static str, &'static [ValueOpen]) {
        match self.style {
            ParameterStyle::Glm => ("</arg_key>", &[("<arg_value>", None)]),
            ParameterStyle::MiniMax | ParameterStyle::MiniCpm | ParameterStyle::Atem => {
                ("\">", &[("", None)])
            }
            ParameterStyle::DeepSeek => (
                "\"",
                &[
                    ("string=\"true\">", Some(true)),
                    ("string=\"false\">", Some(false)),
                ],
            ),
            ParameterStyle::Qwen | ParameterStyle::QwenCoder | ParameterStyle::MiniMaxM3 => {
                (">", &[("", None)])
            }
            ParameterStyle::Python => ("=", &[("", None)]),
            ParameterStyle::Gemma => (":", &[("", None)]),
            // No call format writes it: its flat values only (a `dict` or
            // `list` is nested tags, not read here).
            ParameterStyle::Cohere => (
                "\"",
                &[
                    (" type=\"raw\">", Some(true)),
                    (" type=\"json\">", Some(false)),
                ],
            ),
            ParameterStyle::KimiK3 => (
                "\"",
                &[
                    ("type=\"string\"<|sep|>", Some(true)),
                    ("type=\"number\"<|sep|>", Some(false)),
                    ("type=\"boolean\"<|sep|>", Some(false)),
                    ("type=\"null\"<|sep|>", Some(false)),
                    ("type=\"object\"<|sep|>", Some(false)),
                    ("type=\"array\"<|sep|>", Some(false)),
                ],
            ),
        }
    }
}

/// What one `<function=...>` block at the start of `text` holds so far.
pub(crate) struct FunctionBlock<'a> {
    pub name: &'a str,
    /// The parameters closed so far, typed, in the order written.
    pub parameters: Vec<(&'a str, Value)>,
    /// Bytes of `text` up to and including `</function>`, once it is there.
    pub end: Option<usize>,
}

impl FunctionBlock<'_> {
    /// The arguments as compact JSON (`{"a":1}`), closed or not: each parameter
    /// closed adds to the end, so every reading extends the last one.
    pub fn arguments_json(&self) -> String {
        super::progress::arguments_so_far(&self.parameters, self.end.is_some())
    }

    /// The arguments as an object (a key written twice keeps its last value).
    pub fn arguments(&self) -> Value {
        super::parse::arguments_object(&self.parameters)
    }
}

/// Reads the call of `shape` at the start of `text` as far as it goes. `None`
/// when it is not one (no name, or something other than parameters inside); a
/// call cut short has `end: None`.
pub(crate) fn function_block<'a>(
    text: &'a str,
    shape: &CallShape,
    tools: &[Tool],
) -> Option<FunctionBlock<'a>> {
    let body = text.strip_prefix(shape.open)?;
    let (name, mut rest) = match shape.name_close {
        Some(close) => {
            let end = body.find(close)?;
            (&body[..end], &body[end + close.len()..])
        }
        None => {
            let end = body.find(['<', '\n'])?;
            (body[..end].trim(), &body[end..])
        }
    };
    if name.is_empty() || name.contains(['<', '\n']) {
        return None;
    }
    if !shape.head_close.is_empty() {
        let end = rest.find(shape.head_close)?;
        rest = &rest[end + shape.head_close.len()..];
    }
    let tool = tools.iter().find(|t| t.name == name);
    let mut block = FunctionBlock {
        name,
        parameters: Vec::new(),
        end: None,
    };
    let key_open = shape.style.key_prefix();
    let (key_close, value_opens) = shape.key_close();
    let value_close = shape.style.end();
    loop {
        let next = rest.trim_start();
        if let Some(after) = next.strip_prefix(shape.close) {
            block.end = Some(text.len() - after.len());
            return Some(block);
        }
        let Some(open) = next.strip_prefix(key_open) else {
            // Cut short (a prefix of a tag, or nothing yet), or not a call.
            let cut = key_open.starts_with(next) || shape.close.starts_with(next);
            return cut.then_some(block);
        };
        // A key or value not closed yet: the call so far.
        let Some(key_end) = open.find(key_close) else {
            return Some(block);
        };
        let key = &open[..key_end];
        let after_key = &open[key_end + key_close.len()..];
        let (value, raw) = match value_opens {
            [("", raw)] => (after_key, *raw),
            opens => {
                let next = after_key.trim_start();
                match opens.iter().find(|(o, _)| next.starts_with(o)) {
                    Some((o, raw)) => (&next[o.len()..], *raw),
                    // Cut short inside the value's opener, or not a call.
                    None => {
                        return opens
                            .iter()
                            .any(|(o, _)| o.starts_with(next))
                            .then_some(block)
                    }
                }
            }
        };
        let typing = Typing {
            root: tool.map_or(&NO_SCHEMA, |t| &t.parameters),
        };
        let schema = typing.property(typing.root, key);
        if shape.style == ParameterStyle::MiniMaxM3 {
            // Values tagged at every depth, the closing tag naming the key.
            let Some((value, next)) = minimax_m3::element(value, key, schema, typing) else {
                return Some(block);
            };
            block.parameters.push((key, value));
            rest = next;
            continue;
        }
        if let Some(inside) = value.strip_prefix(CDATA.0) {
            // Raw text that may hold the closing tag (MiniCPM's).
            let Some(end) = inside.find(CDATA.1) else {
                return Some(block);
            };
            let after = &inside[end + CDATA.1.len()..];
            let Some(next) = after.strip_prefix(value_close) else {
                return (value_close.starts_with(after)).then_some(block);
            };
            block
                .parameters
                .push((key, Value::String(inside[..end].to_string())));
            rest = next;
            continue;
        }
        let Some(close) = value.find(value_close) else {
            return Some(block);
        };
        let text = strip_margin(&value[..close], shape.style.raw_margin());
        block.parameters.push((key, typed_value(text, schema, raw)));
        rest = &value[close + value_close.len()..];
    }
}

/// `text` without one `margin` on each side (the style's, around raw text).
fn strip_margin<'a>(text: &'a str, margin: &str) -> &'a str {
    if margin.is_empty() {
        return text;
    }
    let text = text.strip_prefix(margin).unwrap_or(text);
    text.strip_suffix(margin).unwrap_or(text)
}

/// The value a parameter's text stands for: raw text or JSON as its tag says
/// (`raw`), else as `schema` says (see the module docs).
pub(crate) fn typed_value(text: &str, schema: Option<&Value>, raw: Option<bool>) -> Value {
    if raw == Some(true) || (raw.is_none() && schema.is_some_and(only_strings)) {
        return Value::String(text.to_string());
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

/// The parameters of a call to a function that is no tool: nothing types them.
static NO_SCHEMA: Value = Value::Null;

/// The schemas values are typed by: a tool's `parameters`, the root its local
/// `$ref`s point into. Every XML format's reader looks parameters up here.
#[derive(Clone, Copy)]
pub(crate) struct Typing<'a> {
    pub root: &'a Value,
}

impl<'a> Typing<'a> {
    /// `schema` with a local `$ref` followed (a few times, never in a loop).
    fn resolve(&self, mut schema: &'a Value) -> &'a Value {
        for _ in 0..8 {
            match schema.get("$ref").and_then(Value::as_str) {
                Some(r) if r.starts_with('#') => match self.root.pointer(&r[1..]) {
                    Some(target) => schema = target,
                    None => break,
                },
                _ => break,
            }
        }
        schema
    }

    /// `schema` and, one level down, the branches of its `anyOf`, `oneOf` and
    /// `allOf`: where a key or an item's schema is looked for.
    fn branches(&self, schema: &'a Value) -> Vec<&'a Value> {
        let schema = self.resolve(schema);
        let mut out = vec![schema];
        for k in ["anyOf", "oneOf", "allOf"] {
            for branch in schema
                .get(k)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                out.push(self.resolve(branch));
            }
        }
        out
    }

    /// The schema of property `key` (its `properties` entry, else
    /// `additionalProperties`) in the first branch that has one, local `$ref`s
    /// followed.
    pub(crate) fn property(&self, schema: &'a Value, key: &str) -> Option<&'a Value> {
        let branches = self.branches(schema);
        let declared = branches
            .iter()
            .find_map(|b| b.get("properties").and_then(|p| p.get(key)));
        declared
            .or_else(|| {
                branches
                    .iter()
                    .find_map(|b| b.get("additionalProperties").filter(|a| a.is_object()))
            })
            .map(|s| self.resolve(s))
    }

    /// The schema of an array's items, where the schema allows arrays.
    pub(crate) fn items(&self, schema: &'a Value) -> Option<&'a Value> {
        self.branches(schema)
            .into_iter()
            .find_map(|b| b.get("items").filter(|i| i.is_object()))
            .map(|s| self.resolve(s))
    }

    /// Whether `schema` names `kind` among its types (in some branch).
    pub(crate) fn allows(&self, schema: &'a Value, kind: &str) -> bool {
        self.branches(schema)
            .into_iter()
            .any(|b| match b.get("type") {
                Some(Value::String(t)) => t == kind,
                Some(Value::Array(ts)) => ts.iter().any(|t| t == kind),
                _ => match kind {
                    "array" => b.get("items").is_some() || b.get("prefixItems").is_some(),
                    "object" => b.get("properties").is_some(),
                    _ => false,
                },
            })
    }
}

/// Whether every value `schema` admits is a string (by `type`, `enum`/`const`,
/// or every branch of `anyOf`/`oneOf`).
fn only_strings(schema: &Value) -> bool {
    let strings = |values: &Value| {
        values
            .as_array()
            .is_some_and(|a| !a.is_empty() && a.iter().all(Value::is_string))
    };
    if let Some(t) = schema.get("type") {
        return t == "string"
            || t.as_array()
                .is_some_and(|a| a.len() == 1 && a[0] == "string");
    }
    if let Some(c) = schema.get("const") {
        return c.is_string();
    }
    if let Some(e) = schema.get("enum") {
        return strings(e);
    }
    ["anyOf", "oneOf"].iter().any(|k| {
        schema
            .get(*k)
            .and_then(Value::as_array)
            .is_some_and(|branches| !branches.is_empty() && branches.iter().all(only_strings))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool() -> Tool {
        Tool {
            name: "f".into(),
            parameters: json!({"type": "object", "properties": {
                "zip": {"type": "string"}, "n": {"type": "integer"},
                "mode": {"enum": ["a", "b"]}, "maybe": {"type": ["string", "null"]}}}),
        }
    }

    #[test]
    fn values_are_typed_by_the_schema() {
        let text = "<function=f>\n<parameter=zip>\n01234\n</parameter>\n<parameter=n>\n7\n</parameter>\n<parameter=maybe>\nnull\n</parameter>\n<parameter=mode>\nb\n</parameter>\n<parameter=extra>\n{\"a\": [1]}\n</parameter>\n</function>";
        let block = function_block(text, &QWEN, &[tool()]).unwrap();
        assert_eq!(block.end, Some(text.len()));
        assert_eq!(
            block.arguments(),
            json!({"zip": "01234", "n": 7, "maybe": null, "mode": "b", "extra": {"a": [1]}})
        );
    }

    #[test]
    fn one_newline_comes_off_each_side() {
        assert_eq!(strip_margin("\n\nx\n\n", "\n"), "\nx\n");
        assert_eq!(strip_margin("  x", "\n"), "  x");
        assert_eq!(strip_margin("\nx", ""), "\nx");
    }

    #[test]
    fn a_block_cut_short_shows_its_closed_parameters() {
        let whole = "<function=f>\n<parameter=n>\n1\n</parameter>\n<parameter=zip>\n9\n</parameter>\n</function>";
        let mut shown = String::new();
        for end in QWEN.open.len() + 2..=whole.len() {
            let Some(block) = function_block(&whole[..end], &QWEN, &[tool()]) else {
                panic!("{:?} should read as a block cut short", &whole[..end]);
            };
            let now = block.arguments_json();
            assert!(now.starts_with(&shown), "{shown} then {now}");
            shown = now;
        }
        assert_eq!(shown, r#"{"n":1,"zip":"9"}"#);
        assert!(function_block("<function=f>\nhello", &QWEN, &[]).is_none());
    }

    #[test]
    fn glm_names_end_at_the_first_tag_or_newline() {
        let text = "<tool_call>f\n<arg_key>zip</arg_key>\n<arg_value>0123</arg_value>\n<arg_key>n</arg_key><arg_value>[1]</arg_value></tool_call>";
        let block = function_block(text, &GLM, &[tool()]).unwrap();
        assert_eq!((block.name, block.end), ("f", Some(text.len())));
        assert_eq!(block.arguments(), json!({"zip": "0123", "n": [1]}));
        let bare = function_block("<tool_call>g</tool_call>", &GLM, &[]).unwrap();
        assert_eq!((bare.name, bare.arguments()), ("g", json!({})));
        // The name is not known before something ends it.
        assert!(function_block("<tool_call>get_wea", &GLM, &[]).is_none());
    }

    #[test]
    fn deepseek_says_in_the_tag_whether_a_value_is_text() {
        let text = "<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"n\" string=\"true\">7</｜DSML｜parameter>\n<｜DSML｜parameter name=\"zip\" string=\"false\">[1]</｜DSML｜parameter>\n</｜DSML｜invoke>";
        let block = function_block(text, &DSML_FUNCTION_CALLS, &[tool()]).unwrap();
        assert_eq!(block.end, Some(text.len()));
        // The tag wins over the schema both ways.
        assert_eq!(block.arguments(), json!({"n": "7", "zip": [1]}));
        // Cut short inside the attribute: the call so far.
        let cut = text.find(" string=\"f").unwrap() + 5;
        let block = function_block(&text[..cut], &DSML_FUNCTION_CALLS, &[tool()]).unwrap();
        assert_eq!((block.parameters.len(), block.end), (1, None));
    }
}
