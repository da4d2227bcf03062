//! Reading back arguments written in a notation other than JSON: Python
//! literals (LFM2's `f(a=1, b="x", c=True)`) and Gemma 4's (`{a:1,b:<|"|>x<|"|>}`).
//!
//! One reader for both, since they differ only in how a string and a key are
//! spelled and what opens the arguments. It reads what the `python` and `gemma`
//! parameter styles of the JSON Schema front-end write, and a little more (a
//! string in single quotes, a tuple), since a reply written freely may hold it;
//! it reads as far as the text goes, so a streamed call shows the arguments
//! closed so far.

use serde_json::{Map, Number, Value};

use super::parse::arguments_object;
use super::progress::arguments_so_far;

/// How the arguments of a call are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Notation {
    /// `(a=1, b="x", c=True)`: keyword arguments, Python literals.
    Python,
    /// `{a:1,b:<|"|>x<|"|>}`: bare keys, strings between `<|"|>`.
    Gemma,
}

/// What opens and closes a string in Gemma's notation.
pub(crate) const GEMMA_QUOTE: &str = "<|\"|>";

impl Notation {
    /// What opens and closes the arguments, and what stands between a name and
    /// its value.
    fn arguments(self) -> (char, char, char) {
        match self {
            Notation::Python => ('(', ')', '='),
            Notation::Gemma => ('{', '}', ':'),
        }
    }
}

/// One call read as far as the text goes.
pub(crate) struct ReadCall<'a> {
    pub name: &'a str,
    /// Arguments closed so far, in order.
    pub arguments: Vec<(&'a str, Value)>,
    /// Bytes up to and including the arguments' close, once it is there.
    pub end: Option<usize>,
}

impl ReadCall<'_> {
    /// The arguments as an object (a name written twice keeps its last value).
    pub fn object(&self) -> Value {
        arguments_object(&self.arguments)
    }

    /// The arguments' compact JSON so far, closed once the call is.
    pub fn json_so_far(&self) -> String {
        arguments_so_far(&self.arguments, self.end.is_some())
    }
}

/// Whether `name` can name a function: letters, digits, `_`, `.`, `-`.
pub(crate) fn is_function_name(name: &str) -> bool {
    let ok = |c: char| c.is_alphanumeric() || c == '_' || c == '.' || c == '-';
    !name.is_empty() && name.chars().all(ok)
}

/// The call to `name` whose arguments open at byte `open` of `text` (on `(` or
/// `{`), its end relative to `text`; `Err` where the text is no such call.
pub(crate) fn read_arguments<'a>(
    text: &'a str,
    name: &'a str,
    open: usize,
    notation: Notation,
) -> Result<ReadCall<'a>, ()> {
    let (opener, closer, separator) = notation.arguments();
    if !text[open..].starts_with(opener) {
        return Err(());
    }
    let mut call = ReadCall {
        name,
        arguments: Vec::new(),
        end: None,
    };
    let mut i = skip_ws(text, open + 1);
    if text[i..].starts_with(closer) {
        call.end = Some(i + 1);
        return Ok(call);
    }
    loop {
        let Some(sep) = text[i..].find(separator).map(|e| e + i) else {
            return Ok(call);
        };
        let key = text[i..sep].trim();
        if key.is_empty() || !key.chars().all(|c| c.is_alphanumeric() || c == '_') {
            return Err(());
        }
        let mut reader = Reader {
            text,
            at: skip_ws(text, sep + 1),
            notation,
        };
        match reader.value() {
            Ok(value) => call.arguments.push((key, value)),
            Err(Cut) if reader.at >= text.len() => return Ok(call),
            Err(Cut) => return Err(()),
        }
        i = skip_ws(text, reader.at);
        match text[i..].chars().next() {
            Some(',') => i = skip_ws(text, i + 1),
            Some(c) if c == closer => {
                call.end = Some(i + 1);
                return Ok(call);
            }
            Some(_) => return Err(()),
            None => return Ok(call),
        }
    }
}

pub(crate) fn skip_ws(text: &str, at: usize) -> usize {
    at + text[at..].len() - text[at..].trim_start().len()
}

/// A value that does not read (or is cut short: the reader stands at the end).
struct Cut;

/// A value reader over `text`, from byte `at`.
struct Reader<'a> {
    text: &'a str,
    at: usize,
    notation: Notation,
}

impl Reader<'_> {
    fn rest(&self) -> &str {
        &self.text[self.at..]
    }

    fn value(&mut self) -> Result<Value, Cut> {
        self.at = skip_ws(self.text, self.at);
        let rest = self.rest();
        for (word, value) in [
            ("true", Value::Bool(true)),
            ("false", Value::Bool(false)),
            ("null", Value::Null),
            ("True", Value::Bool(true)),
            ("False", Value::Bool(false)),
            ("None", Value::Null),
        ] {
            if rest.starts_with(word) {
                self.at += word.len();
                return Ok(value);
            }
        }
        if self.notation == Notation::Gemma && rest.starts_with(GEMMA_QUOTE) {
            return self.gemma_string().map(Value::String);
        }
        match rest.chars().next() {
            Some(q @ ('"' | '\'')) if self.notation == Notation::Python => {
                self.string(q).map(Value::String)
            }
            Some('[') => self.sequence(']'),
            Some('(') if self.notation == Notation::Python => self.sequence(')'),
            Some('{') => self.dict(),
            Some(c) if c == '-' || c.is_ascii_digit() => self.number(),
            _ => {
                // Cut short inside a keyword or a delimiter reads as the end.
                let words = [
                    "true",
                    "false",
                    "null",
                    "True",
                    "False",
                    "None",
                    GEMMA_QUOTE,
                ];
                if !rest.is_empty() && words.iter().any(|w| w.starts_with(rest)) {
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
        let digits = &rest[..len];
        self.at += len;
        if self.at == self.text.len() {
            return Err(Cut);
        }
        if let Ok(i) = digits.parse::<i64>() {
            return Ok(Value::Number(i.into()));
        }
        match serde_json::from_str::<Value>(digits) {
            Ok(n @ Value::Number(_)) => Ok(n),
            _ => digits
                .parse::<f64>()
                .ok()
                .and_then(Number::from_f64)
                .map(Value::Number)
                .ok_or(Cut),
        }
    }

    /// Gemma's raw text between two `<|"|>`.
    fn gemma_string(&mut self) -> Result<String, Cut> {
        let body = &self.rest()[GEMMA_QUOTE.len()..];
        match body.find(GEMMA_QUOTE) {
            Some(end) => {
                let text = body[..end].to_string();
                self.at += GEMMA_QUOTE.len() * 2 + end;
                Ok(text)
            }
            None => {
                self.at = self.text.len();
                Err(Cut)
            }
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

    /// A list (or Python tuple) up to `close`.
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
                _ => return Err(Cut),
            }
        }
    }

    /// A key: a string (Python), a bare name or a string (Gemma).
    fn key(&mut self) -> Result<String, Cut> {
        if self.notation == Notation::Gemma && !self.rest().starts_with(GEMMA_QUOTE) {
            let rest = self.rest();
            let Some(len) = rest.find(':') else {
                self.at = self.text.len();
                return Err(Cut);
            };
            let key = rest[..len].trim().to_string();
            self.at += len;
            return Ok(key);
        }
        match self.value()? {
            Value::String(key) => Ok(key),
            _ => Err(Cut),
        }
    }

    /// A dict (Python) or an object (Gemma).
    fn dict(&mut self) -> Result<Value, Cut> {
        self.at += 1;
        let mut map = Map::new();
        loop {
            self.at = skip_ws(self.text, self.at);
            if self.rest().starts_with('}') {
                self.at += 1;
                return Ok(Value::Object(map));
            }
            let key = self.key()?;
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
