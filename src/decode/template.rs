//! Chat templates: the model's own Jinja template (GGUF `tokenizer.chat_template` or
//! `tokenizer_config.json`), rendered with `minijinja` as other Rust inference
//! servers do. Python string methods used by real templates (`.strip()`,
//! `.startswith()`...) come from `minijinja-contrib`'s pycompat layer.

use std::sync::{Arc, Mutex};

use minijinja::value::{ArgType, Enumerator, Object, ObjectRepr, Serde, ValueKind, ValueOrKwargs};
use minijinja::{context, Environment, Error, ErrorKind};
use serde::Serialize;

use super::DecodeError;

/// One chat message.
#[derive(Debug, Clone, Serialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn new(role: &str, content: &str) -> Message {
        Message {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// Renders `messages` through `template`, ending with the assistant's turn opened.
pub fn render_chat(
    template: &str,
    messages: &[Message],
    bos_token: Option<&str>,
    eos_token: Option<&str>,
) -> Result<String, DecodeError> {
    let messages =
        serde_json::to_value(messages).map_err(|e| DecodeError::Template(e.to_string()))?;
    render_chat_json(template, &messages, None, bos_token, eos_token)
}

/// Renders OpenAI-shaped `messages` (assistant `tool_calls`, `tool` results: the
/// JSON as a client sent it) and `tools` (`None`: the template sees no `tools`)
/// through `template`, ending with the assistant's turn opened.
pub fn render_chat_json(
    template: &str,
    messages: &serde_json::Value,
    tools: Option<&serde_json::Value>,
    bos_token: Option<&str>,
    eos_token: Option<&str>,
) -> Result<String, DecodeError> {
    let render =
        |messages: &serde_json::Value| render_once(template, messages, tools, bos_token, eos_token);
    let first = render(messages);
    if first.is_ok() {
        return first;
    }
    // What llama.cpp probes templates for: some take a call's `arguments` as a
    // JSON string only (functionary), some refuse a system message (Gemma 2).
    let retries = [
        arguments_as_strings(messages),
        system_into_first_user(messages),
    ];
    for retry in retries.into_iter().flatten() {
        if let Ok(text) = render(&retry) {
            return Ok(text);
        }
    }
    first
}

fn render_once(
    template: &str,
    messages: &serde_json::Value,
    tools: Option<&serde_json::Value>,
    bos_token: Option<&str>,
    eos_token: Option<&str>,
) -> Result<String, DecodeError> {
    let mut env = Environment::new();
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function(
        "raise_exception",
        |message: String| -> Result<String, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, message))
        },
    );
    env.add_function("strftime_now", |format: String| strftime_now(&format));
    env.add_function("namespace", namespace);
    env.add_filter("tojson", tojson);
    let to_error = |e: Error| DecodeError::Template(format!("{e:#}"));
    let template = without_generation_tags(template);
    env.add_template("chat", &template).map_err(to_error)?;
    let tools = tools.map(|t| minijinja::Value::from(Serde(t)));
    env.get_template("chat")
        .and_then(|t| {
            t.render(context! {
                messages => minijinja::Value::from(Serde(messages)),
                tools => tools,
                add_generation_prompt => true,
                bos_token => bos_token.unwrap_or(""),
                eos_token => eos_token.unwrap_or(""),
            })
        })
        .map_err(to_error)
}

/// minijinja's `namespace`, with its lists mutable as Python's are: Kimi K2's
/// template queues call ids with `ns.ids.append(id)` and takes them back with
/// `ns.ids.pop(0)`.
fn namespace(defaults: Option<ValueOrKwargs>) -> Result<minijinja::Value, Error> {
    let Some(defaults) = defaults else {
        return minijinja::functions::namespace(None);
    };
    let defaults = defaults.into_value();
    let mut pairs = std::collections::BTreeMap::new();
    if let Ok(keys) = defaults.try_iter() {
        for key in keys {
            let value = defaults.get_item(&key)?;
            let value = match value.kind() {
                ValueKind::Seq => minijinja::Value::from_object(MutableList(Mutex::new(
                    value.try_iter()?.collect(),
                ))),
                _ => value,
            };
            pairs.insert(key.to_string(), value);
        }
    }
    let map = minijinja::Value::from(pairs);
    minijinja::functions::namespace(Some(ValueOrKwargs::from_value(Some(&map))?))
}

/// A list a template may change (`append`, `pop`), kept in a namespace.
#[derive(Debug)]
struct MutableList(Mutex<Vec<minijinja::Value>>);

impl MutableList {
    fn items(&self) -> std::sync::MutexGuard<'_, Vec<minijinja::Value>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Object for MutableList {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Seq
    }

    fn get_value(self: &Arc<Self>, key: &minijinja::Value) -> Option<minijinja::Value> {
        let index = usize::try_from(key.as_i64()?).ok()?;
        self.items().get(index).cloned()
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Seq(self.items().len())
    }

    fn call_method(
        self: &Arc<Self>,
        _state: &mut minijinja::State<'_, '_>,
        method: &str,
        args: &[minijinja::Value],
    ) -> Result<minijinja::Value, Error> {
        let mut items = self.items();
        match (method, args) {
            ("append", [value]) => {
                items.push(value.clone());
                Ok(minijinja::Value::from(()))
            }
            ("pop", _) if items.is_empty() => Err(Error::new(
                ErrorKind::InvalidOperation,
                "pop from an empty list",
            )),
            ("pop", []) => Ok(items.pop().expect("not empty")),
            ("pop", [index]) => {
                let len = items.len() as i64;
                let at = i64::try_from(index.clone())?;
                let at = if at < 0 { at + len } else { at };
                if !(0..len).contains(&at) {
                    return Err(Error::new(
                        ErrorKind::InvalidOperation,
                        "pop index out of range",
                    ));
                }
                Ok(items.remove(at as usize))
            }
            _ => Err(Error::from(ErrorKind::UnknownMethod)),
        }
    }
}

/// `template` without transformers' `{% generation %}` / `{% endgeneration %}`
/// markers (they mark the assistant's tokens for training; they render nothing).
fn without_generation_tags(template: &str) -> std::borrow::Cow<'_, str> {
    if !template.contains("generation") {
        return template.into();
    }
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{%") {
        let Some(len) = rest[start..].find("%}") else {
            break;
        };
        let tag = &rest[start..start + len + 2];
        let word = tag.trim_matches(|c| c == '{' || c == '}' || c == '%' || c == '-');
        out.push_str(&rest[..start]);
        if !matches!(word.trim(), "generation" | "endgeneration") {
            out.push_str(tag);
        }
        rest = &rest[start + len + 2..];
    }
    out.push_str(rest);
    out.into()
}

/// The messages with each call's `arguments` object written as a JSON string;
/// `None` when there is no such call.
fn arguments_as_strings(messages: &serde_json::Value) -> Option<serde_json::Value> {
    let mut out = messages.clone();
    let mut changed = false;
    for message in out.as_array_mut()? {
        let calls = message.get_mut("tool_calls").and_then(|c| c.as_array_mut());
        for call in calls.into_iter().flatten() {
            if let Some(arguments) = call.pointer_mut("/function/arguments") {
                if arguments.is_object() {
                    *arguments = serde_json::Value::String(arguments.to_string());
                    changed = true;
                }
            }
        }
    }
    changed.then_some(out)
}

/// The messages with a leading system message folded into the first user
/// message; `None` when they do not start with one.
fn system_into_first_user(messages: &serde_json::Value) -> Option<serde_json::Value> {
    let items = messages.as_array()?;
    let (first, rest) = items.split_first()?;
    if first.get("role")? != "system" {
        return None;
    }
    let system = first.get("content")?.as_str()?;
    let mut rest = rest.to_vec();
    let user = rest.iter_mut().find(|m| m["role"] == "user")?;
    let content = user["content"].as_str().unwrap_or_default();
    user["content"] = serde_json::Value::String(format!("{system}\n\n{content}"));
    Some(serde_json::Value::Array(rest))
}

/// transformers' `tojson`: Python's `json.dumps` (`", "` and `": "`
/// separators, `indent`, `ensure_ascii` off unless asked, `sort_keys`), so a
/// prompt shows tools as the model saw them in training (minijinja's own
/// escapes `<` and `>` for HTML).
fn tojson(value: minijinja::Value, kwargs: minijinja::value::Kwargs) -> Result<String, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let ensure_ascii: Option<bool> = kwargs.get("ensure_ascii")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    let separators: Option<Vec<String>> = kwargs.get("separators")?;
    kwargs.assert_all_used()?;
    let json = serde_json::to_value(&value)
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, e.to_string()))?;
    let (item, key) = match separators.as_deref() {
        Some([item, key]) => (item.clone(), key.clone()),
        _ if indent.is_some() => (",".to_string(), ": ".to_string()),
        _ => (", ".to_string(), ": ".to_string()),
    };
    let style = PythonJson {
        indent,
        item,
        key,
        ensure_ascii: ensure_ascii.unwrap_or(false),
        sort_keys: sort_keys.unwrap_or(false),
    };
    let mut out = String::new();
    style.write(&json, 0, &mut out);
    Ok(out)
}

/// How Python's `json.dumps` lays out a value.
struct PythonJson {
    indent: Option<usize>,
    item: String,
    key: String,
    ensure_ascii: bool,
    sort_keys: bool,
}

impl PythonJson {
    fn write(&self, value: &serde_json::Value, level: usize, out: &mut String) {
        use serde_json::Value;
        match value {
            Value::String(s) => self.string(s, out),
            Value::Array(items) if !items.is_empty() => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    self.separate(i, level + 1, out);
                    self.write(v, level + 1, out);
                }
                self.close(level, out);
                out.push(']');
            }
            Value::Object(map) if !map.is_empty() => {
                out.push('{');
                let mut entries: Vec<_> = map.iter().collect();
                if self.sort_keys {
                    entries.sort_by(|a, b| a.0.cmp(b.0));
                }
                for (i, (k, v)) in entries.into_iter().enumerate() {
                    self.separate(i, level + 1, out);
                    self.string(k, out);
                    out.push_str(&self.key);
                    self.write(v, level + 1, out);
                }
                self.close(level, out);
                out.push('}');
            }
            other => out.push_str(&other.to_string()),
        }
    }

    /// Before item `i` of a container at `level`.
    fn separate(&self, i: usize, level: usize, out: &mut String) {
        if i > 0 {
            out.push_str(&self.item);
        }
        if let Some(indent) = self.indent {
            out.push('\n');
            out.push_str(&" ".repeat(indent * level));
        }
    }

    fn close(&self, level: usize, out: &mut String) {
        if let Some(indent) = self.indent {
            out.push('\n');
            out.push_str(&" ".repeat(indent * level));
        }
    }

    fn string(&self, s: &str, out: &mut String) {
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                c if (c as u32) < 0x20 || (self.ensure_ascii && !c.is_ascii()) => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{unit:04x}"));
                    }
                }
                c => out.push(c),
            }
        }
        out.push('"');
    }
}

/// transformers' `strftime_now`: the current UTC time in a `strftime` format
/// (`%Y %m %d %H %M %S %b %B %y %j %%`; other specifiers are kept as written).
fn strftime_now(format: &str) -> String {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    strftime(format, seconds)
}

fn strftime(format: &str, unix_seconds: u64) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    let days = (unix_seconds / 86_400) as i64;
    let secs = unix_seconds % 86_400;
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let before: [i64; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let yday = before[(month - 1) as usize] + day + i64::from(leap && month > 2);
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('Y') => out.push_str(&year.to_string()),
            Some('y') => out.push_str(&format!("{:02}", year % 100)),
            Some('m') => out.push_str(&format!("{month:02}")),
            Some('d') => out.push_str(&format!("{day:02}")),
            Some('H') => out.push_str(&format!("{:02}", secs / 3600)),
            Some('M') => out.push_str(&format!("{:02}", secs / 60 % 60)),
            Some('S') => out.push_str(&format!("{:02}", secs % 60)),
            Some('j') => out.push_str(&format!("{yday:03}")),
            Some('B') => out.push_str(MONTHS[(month - 1) as usize]),
            Some('b') => out.push_str(&MONTHS[(month - 1) as usize][..3]),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SmolLM2-135M-Instruct's template, as stored in its GGUF file.
    const SMOLLM2: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    #[test]
    fn chatml_template_opens_the_assistant_turn() {
        let text = render_chat(SMOLLM2, &[Message::new("user", "Hi")], None, None).unwrap();
        assert_eq!(
            text,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging \
             Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn python_string_methods_and_raise_exception() {
        let t = "{{ bos_token }}{% for m in messages %}{% if m.role not in ['user'] %}\
                 {{ raise_exception('only user messages') }}{% endif %}\
                 [{{ m.content.strip() }}]{% endfor %}";
        let text = render_chat(t, &[Message::new("user", "  x ")], Some("<s>"), None).unwrap();
        assert_eq!(text, "<s>[x]");
        let e = render_chat(t, &[Message::new("system", "x")], None, None).unwrap_err();
        assert!(e.to_string().contains("only user messages"), "{e}");
    }

    #[test]
    fn tojson_writes_as_python_json_dumps() {
        let out = render_once(
            "{{ tools | tojson }}|{{ tools | tojson(indent=2) }}|{{ tools | tojson(ensure_ascii=True) }}",
            &serde_json::json!([]),
            Some(&serde_json::json!({"b": [1, "<é>"], "a": {}})),
            None,
            None,
        )
        .unwrap();
        assert_eq!(
            out,
            "{\"b\": [1, \"<é>\"], \"a\": {}}|{\n  \"b\": [\n    1,\n    \"<é>\"\n  ],\n  \"a\": {}\n}|{\"b\": [1, \"<\\u00e9>\"], \"a\": {}}"
        );
    }

    #[test]
    fn strftime_knows_the_calendar() {
        // 2024-02-29 13:05:09 UTC, a leap day.
        assert_eq!(
            strftime("%Y-%m-%d %H:%M:%S %b %B %j %y %%", 1_709_211_909),
            "2024-02-29 13:05:09 Feb February 060 24 %"
        );
        assert_eq!(strftime("%d %b %Y", 0), "01 Jan 1970");
    }

    #[test]
    fn generation_markers_render_nothing() {
        let text = without_generation_tags(
            "a{% generation %}b{%- endgeneration -%}c{% if x %}{% endif %}",
        );
        assert_eq!(text, "abc{% if x %}{% endif %}");
    }

    #[test]
    fn namespace_lists_take_append_and_pop() {
        let out = render_once(
            "{% set ns = namespace(ids=[], n=0) %}{% set _ = ns.ids.append('a') %}{% set _ = ns.ids.append('b') %}{% set ns.n = 2 %}{{ ns.ids | length }}{{ ns.ids.pop(0) }}{{ ns.ids[0] }}{% if ns.ids %}!{% endif %}{{ ns.n }}",
            &serde_json::json!([]),
            None,
            None,
            None,
        )
        .unwrap();
        assert_eq!(out, "2ab!2");
    }
}
