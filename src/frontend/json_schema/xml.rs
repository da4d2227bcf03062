//! Parameter styles: the arguments of a tool call written as tagged parameters
//! instead of a JSON object, as Qwen3-Coder, MiniMax, DeepSeek (DSML) and GLM
//! write them, as Python keyword arguments (LFM2), or in Gemma 4's JSON-like
//! notation:
//!
//! ```text
//! <parameter=city>Paris</parameter><parameter=days>3</parameter>        qwen_xml
//! <parameter name="city">Paris</parameter>                              minimax_xml
//! <｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>  deepseek_xml
//! <arg_key>city</arg_key><arg_value>Paris</arg_value>                   glm_xml
//! <parameter=city>\nParis\n</parameter>                                qwen_coder_xml
//! city="Paris", days=3, tags=["a"], on=True                            python
//! {city:<|"|>Paris<|"|>,days:3,tags:[<|"|>a<|"|>],m:{k:true}}             gemma
//! <|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>  kimi_k3_xml
//! <param name="city">Paris</param>, <param name="t"><![CDATA[a<b]]></param>      minicpm_xml
//! NS<city>Paris NS</city>NS<tags>NS<item>a NS</item>NS</tags>                  minimax_m3_xml
//! <atem:parameter name="city">Paris</atem:parameter>                    atem_xml
//! <cofl:value name="city" type="raw">Paris</cofl:value>                 cohere_xml
//! ```
//!
//! The first four and `cohere_xml` are XGrammar's styles of those names; `atem_xml` is
//! `minimax_xml` under Muse Glimmer's tag names. `python` writes every
//! value as JSON (a JSON string is a Python string) whose `true`, `false` and
//! `null` may also be spelled `True`, `False`, `None`, at any depth: Python's
//! spelling, and the JSON one LFM2's template renders inside dicts. `gemma`
//! too reaches into the values: every object's keys are bare names, every string
//! its raw text between `<|"|>` delimiters (never holding one). `qwen_coder_xml` is
//! Qwen's as its chat templates render it (Qwen3-Coder, Qwen3.5, Nemotron 3,
//! Step 3.5): a raw value sits between two newlines that belong to the tags, and
//! a parser takes them off, so the text parses back to exactly the value the
//! grammar checked (with `qwen_xml`, a parser that strips them would turn the
//! valid `"\nab"` into the too-short `"ab"`).
//!
//! `minicpm_xml` also takes a string with no length or pattern as a CDATA
//! section (`<![CDATA[...]]>`: any text without `]]>`), as MiniCPM 5's template
//! writes text holding `<`, `&` or a newline.
//!
//! `minimax_m3_xml` is MiniMax-M3's, where `NS` is its tag opener
//! `]<]minimax[>[` (written without the space above): every value at every
//! depth is tagged, an object's properties by their names, an array's items as
//! `item`; a string is its raw text (never holding `NS`), a number or boolean
//! its JSON, `null` not written at all (the template leaves such a property
//! out). A closing tag repeats its name, which no grammar can say of names it
//! does not know, so objects take their declared properties only.
//!
//! `cohere_xml` is Cohere Command A's, every value at every depth a
//! `<cofl:value>` tag naming its type: `raw` text, `json` for a number, boolean
//! or null, `dict` for an object (its properties tagged inside), `list` for an
//! array (its items tagged without a name). A node allowing several types has a
//! tag per type, each with that type's values; `enum`/`const` objects and arrays,
//! and the values of undeclared names without a schema, are JSON (`json`), as
//! XGrammar writes them.
//!
//! `kimi_k3_xml` names each value's JSON type in its tag (`string` for raw text,
//! `number` for any number, as Kimi K3's template writes them), so a parser
//! reads the type back from the tag.
//!
//! In the other styles only the root object changes shape; inside a value
//! everything is JSON again. The root keeps every object keyword (`required`,
//! `additionalProperties`, `propertyNames`, `minProperties`/`maxProperties`, either
//! property order): it is the JSON object emitter's, with [`Syntax::Parameters`]
//! for keys, pairs and separators (whitespace). A value is its raw text (no quotes,
//! no escapes) when the schema makes it a string, and JSON with whitespace around
//! it otherwise; an undeclared name is an XML identifier.
//!
//! XGrammar's `json_schema` styles of the same names are the reference. Two
//! deliberate differences, both so that the text parses back into the values
//! the schema asks for:
//!
//! * DeepSeek's `string="true"` is written exactly when the value is raw text
//!   (XGrammar accepts either), so a parser reading the attribute gets the type
//!   back;
//! * raw text never contains the closing tag (the parser would end the value
//!   there). Unbounded text is free text up to the tag; text with a `maxLength`
//!   takes no `<` at all, and the first `minLength` characters of any text no
//!   `<` (the closing tag starts with one): an over-constraint, never a wrong
//!   acceptance.

use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir};
use serde_json::Value;

use super::node::{Node, TypeSet};
use super::shape::Syntax;
use super::string::StringBody;
use super::{alt, nothing, seq, JsonSchemaError, Result, SchemaCompiler, Subschema};
use crate::grammar::{Excluding, Expr, FreeText, Intersection};

/// How the parameters of a tool call are written; see the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParameterStyle {
    /// `<parameter=NAME>VALUE</parameter>` (Qwen3-Coder, Qwen3.5).
    Qwen,
    /// `<parameter name="NAME">VALUE</parameter>` (MiniMax-M2).
    MiniMax,
    /// `<｜DSML｜parameter name="NAME" string="true|false">VALUE</｜DSML｜parameter>`
    /// (DeepSeek V3.2).
    DeepSeek,
    /// `<arg_key>NAME</arg_key><arg_value>VALUE</arg_value>` (GLM-4.5 and later).
    Glm,
    /// `<parameter=NAME>\nVALUE\n</parameter>`: Qwen as its templates render it,
    /// the newlines around a raw value part of the tags.
    QwenCoder,
    /// `NAME=VALUE, NAME=VALUE`: Python keyword arguments (LFM2).
    Python,
    /// `{NAME:VALUE,NAME:VALUE}`, strings as `<|"|>TEXT<|"|>`, at every depth
    /// (Gemma 4).
    Gemma,
    /// `<|open|>argument key="NAME" type="TYPE"<|sep|>VALUE<|close|>argument<|sep|>`,
    /// the value's JSON type in the tag (Kimi K3).
    KimiK3,
    /// `<param name="NAME">VALUE</param>`, free text in `<![CDATA[...]]>` when it
    /// may hold `<`, `&` or a newline (MiniCPM 5).
    MiniCpm,
    /// `NS<NAME>VALUE NS</NAME>` at every depth, an array's items as
    /// `NS<item>VALUE NS</item>`, where `NS` is [`MINIMAX_M3_TAG`] (MiniMax-M3).
    MiniMaxM3,
    /// `<atem:parameter name="NAME">VALUE</atem:parameter>` (Muse Glimmer).
    Atem,
    /// `<cofl:value name="NAME" type="TYPE">VALUE</cofl:value>` at every depth,
    /// an array's items without a name (Cohere Command A).
    Cohere,
}

/// What opens every tag of MiniMax-M3's calls and arguments.
pub const MINIMAX_M3_TAG: &str = "]<]minimax[>[";

impl ParameterStyle {
    /// Every style, in the order of [`ParameterStyle::name`]'s list.
    pub const ALL: [ParameterStyle; 12] = [
        ParameterStyle::Qwen,
        ParameterStyle::MiniMax,
        ParameterStyle::DeepSeek,
        ParameterStyle::Glm,
        ParameterStyle::QwenCoder,
        ParameterStyle::Python,
        ParameterStyle::Gemma,
        ParameterStyle::KimiK3,
        ParameterStyle::MiniCpm,
        ParameterStyle::MiniMaxM3,
        ParameterStyle::Atem,
        ParameterStyle::Cohere,
    ];

    /// The style XGrammar's structural tags name `name` (`qwen_xml`, ...).
    pub fn from_name(name: &str) -> Option<ParameterStyle> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The name structural tags use for this style.
    pub fn name(self) -> &'static str {
        match self {
            ParameterStyle::Qwen => "qwen_xml",
            ParameterStyle::MiniMax => "minimax_xml",
            ParameterStyle::DeepSeek => "deepseek_xml",
            ParameterStyle::Glm => "glm_xml",
            ParameterStyle::QwenCoder => "qwen_coder_xml",
            ParameterStyle::Python => "python",
            ParameterStyle::Gemma => "gemma",
            ParameterStyle::KimiK3 => "kimi_k3_xml",
            ParameterStyle::MiniCpm => "minicpm_xml",
            ParameterStyle::MiniMaxM3 => "minimax_m3_xml",
            ParameterStyle::Atem => "atem_xml",
            ParameterStyle::Cohere => "cohere_xml",
        }
    }

    /// What opens a parameter, before its name.
    pub fn key_prefix(self) -> &'static str {
        match self {
            ParameterStyle::Qwen | ParameterStyle::QwenCoder => "<parameter=",
            ParameterStyle::MiniMax => "<parameter name=\"",
            ParameterStyle::DeepSeek => "<｜DSML｜parameter name=\"",
            ParameterStyle::Glm => "<arg_key>",
            ParameterStyle::KimiK3 => "<|open|>argument key=\"",
            ParameterStyle::MiniCpm => "<param name=\"",
            ParameterStyle::MiniMaxM3 => "]<]minimax[>[<",
            ParameterStyle::Atem => "<atem:parameter name=\"",
            ParameterStyle::Cohere => "<cofl:value name=\"",
            ParameterStyle::Python | ParameterStyle::Gemma => "",
        }
    }

    /// A declared parameter's name as its key is written: Kimi K3's is an
    /// attribute, `&` and `"` escaped as its template does.
    pub fn key_text(self, name: &str) -> std::borrow::Cow<'_, str> {
        match self {
            ParameterStyle::KimiK3 if name.contains(['&', '"']) => {
                name.replace('&', "&amp;").replace('"', "&quot;").into()
            }
            ParameterStyle::Cohere if name.contains(['&', '"', '<', '>']) => name
                .replace('&', "&amp;")
                .replace('"', "&quot;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
                .into(),
            _ => name.into(),
        }
    }

    /// What closes a parameter, after its value (MiniMax-M3's: what opens the
    /// closing tag, the name and `>` following).
    pub fn end(self) -> &'static str {
        match self {
            ParameterStyle::Qwen | ParameterStyle::MiniMax | ParameterStyle::QwenCoder => {
                "</parameter>"
            }
            ParameterStyle::DeepSeek => "</｜DSML｜parameter>",
            ParameterStyle::Glm => "</arg_value>",
            ParameterStyle::KimiK3 => "<|close|>argument<|sep|>",
            ParameterStyle::MiniCpm => "</param>",
            ParameterStyle::MiniMaxM3 => "]<]minimax[>[</",
            ParameterStyle::Atem => "</atem:parameter>",
            ParameterStyle::Cohere => "</cofl:value>",
            ParameterStyle::Python => "",
            // What closes a string (which opens with it too).
            ParameterStyle::Gemma => "<|\"|>",
        }
    }

    /// Whether the style spells values too, not only the root's parameters.
    fn reaches_into_values(self) -> bool {
        matches!(
            self,
            ParameterStyle::Python
                | ParameterStyle::Gemma
                | ParameterStyle::MiniMaxM3
                | ParameterStyle::Cohere
        )
    }

    /// What stands between the opening tag and a raw value, and between the
    /// value and the closing tag (a parser takes it off both sides).
    pub fn raw_margin(self) -> &'static str {
        match self {
            ParameterStyle::QwenCoder => "\n",
            _ => "",
        }
    }
}

/// What opens and closes an XML CDATA section: raw text that may hold `<`.
pub(crate) const CDATA: (&str, &str) = ("<![CDATA[", "]]>");

/// The JSON types a tag may name (Kimi K3's `type="..."`), and the values of
/// each; a string is raw text, named apart.
const TYPE_NAMES: [(&str, TypeSet); 5] = [
    ("number", TypeSet::NUMBER),
    ("boolean", TypeSet::BOOLEAN),
    ("null", TypeSet::NULL),
    ("object", TypeSet::OBJECT),
    ("array", TypeSet::ARRAY),
];

/// The name of `value`'s JSON type, as [`TYPE_NAMES`] has it.
fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A letter or `_`, then letters, digits and `_`: a name that needs no escaping
/// in any of the styles.
pub(crate) fn identifier() -> Hir {
    let class = |ranges: &[(char, char)]| {
        Hir::class(Class::Unicode(ClassUnicode::new(
            ranges.iter().map(|&(a, b)| ClassUnicodeRange::new(a, b)),
        )))
    };
    let start = [('A', 'Z'), ('_', '_'), ('a', 'z')];
    let rest = [('0', '9'), ('A', 'Z'), ('_', '_'), ('a', 'z')];
    Hir::concat(vec![
        class(&start),
        Hir::repetition(regex_syntax::hir::Repetition {
            min: 0,
            max: None,
            greedy: true,
            sub: Box::new(class(&rest)),
        }),
    ])
}

/// Any text, newlines included.
fn any_text() -> Hir {
    Hir::repetition(regex_syntax::hir::Repetition {
        min: 0,
        max: None,
        greedy: true,
        sub: Box::new(Hir::class(Class::Unicode(ClassUnicode::new([
            ClassUnicodeRange::new('\0', char::MAX),
        ])))),
    })
}

/// Any character but `<`.
fn not_open_angle() -> Hir {
    Hir::class(Class::Unicode(ClassUnicode::new([
        ClassUnicodeRange::new('\0', ';'),
        ClassUnicodeRange::new('=', char::MAX),
    ])))
}

/// Raw text matching every one of `regexes` and none of `negated`, of
/// `min..=max` characters, none of them `<` (see the module docs).
fn bounded_raw_text(regexes: &[Hir], negated: &[Hir], (min, max): (u64, Option<u64>)) -> Expr {
    StringBody::intersection(regexes, negated, (min, max), not_open_angle(), |h| {
        Some(h.clone())
    })
}

/// An undeclared parameter name: an identifier other than the declared `names`.
pub(crate) fn undeclared_name(names: &[String]) -> Expr {
    if names.is_empty() {
        return Expr::Regex(identifier());
    }
    Expr::Excluding(Box::new(Excluding {
        regex: identifier(),
        excluded: names.iter().map(|n| n.as_bytes().to_vec()).collect(),
    }))
}

impl<'a> SchemaCompiler<'a> {
    /// The root of a tool call's arguments: the object alternatives of the
    /// schema, written as parameters. A schema that allows no object is refused.
    pub(crate) fn parameters(
        &mut self,
        root: Subschema<'a>,
        style: ParameterStyle,
    ) -> Result<Expr> {
        self.value_style = style.reaches_into_values().then_some(style);
        let nodes = self.normalize(std::slice::from_ref(&root))?;
        let mut alts = Vec::new();
        for mut node in nodes {
            if !node.types.intersects(TypeSet::OBJECT) {
                continue;
            }
            if !node.enums.is_empty() {
                return Err(JsonSchemaError::Unsupported {
                    keyword: "enum".into(),
                    pointer: root.ptr.to_string(),
                    reason: format!(
                        "an enum or const of whole objects cannot be written in the `{}` style",
                        style.name()
                    ),
                });
            }
            node.types = TypeSet::OBJECT;
            alts.push(self.emit_object_as(&node, Syntax::Parameters(style))?);
        }
        if alts.is_empty() {
            return Err(JsonSchemaError::Unsupported {
                keyword: "type".into(),
                pointer: root.ptr.to_string(),
                reason: format!(
                    "the `{}` style writes the properties of an object, and this schema allows no object",
                    style.name()
                ),
            });
        }
        Ok(alt(alts))
    }

    /// Everything of a parameter after its name: the rest of the opening tag, the
    /// value valid against `conj`, the closing tag. One rule per conjunction.
    pub(crate) fn parameter_value_rule(
        &mut self,
        conj: &[Subschema<'a>],
        style: ParameterStyle,
    ) -> Result<Expr> {
        self.memo_rule(conj, style.name(), |c, conj| c.parameter_value(conj, style))
    }

    fn parameter_value(&mut self, conj: &[Subschema<'a>], style: ParameterStyle) -> Result<Expr> {
        match style {
            ParameterStyle::Python => {
                return Ok(seq(vec![Expr::literal(b"="), self.value_rule(conj)?]))
            }
            ParameterStyle::Gemma => {
                return Ok(seq(vec![self.punct(b":"), self.value_rule(conj)?]))
            }
            // The closing tag repeats the name: the pair writes it.
            ParameterStyle::MiniMaxM3 => {
                return Ok(seq(vec![Expr::literal(b">"), self.value_rule(conj)?]))
            }
            // The value's tag names its type (`cohere_value`); an undeclared
            // name without a schema takes any JSON value, as `json`.
            ParameterStyle::Cohere if conj.is_empty() => {
                let json = self.plain_json_value(conj)?;
                return Ok(seq(vec![
                    Expr::literal(b"\""),
                    self.cohere_tagged("json", json),
                ]));
            }
            ParameterStyle::Cohere => {
                return Ok(seq(vec![Expr::literal(b"\""), self.value_rule(conj)?]))
            }
            _ => {}
        }
        let end = style.end();
        let mut raw = Vec::new();
        // JSON values, each with the type the style names in its tag (Kimi K3's).
        let mut json: Vec<(&str, Expr)> = Vec::new();
        for node in self.normalize(conj)? {
            if node.types.is_empty() {
                continue;
            }
            if !node.enums.is_empty() {
                for v in self.enum_values(&node)? {
                    match v {
                        Value::String(s) => raw.push(Expr::literal(
                            format!("{s}{}{end}", style.raw_margin()).as_bytes(),
                        )),
                        v => json.push((json_type_name(v), self.literal(v)?)),
                    }
                }
                continue;
            }
            if node.types.intersects(TypeSet::STRING) {
                raw.push(self.raw_text(&node, style)?);
            }
            let mut rest = node.clone();
            rest.types &= !TypeSet::STRING;
            if rest.types.is_empty() {
                continue;
            }
            if style != ParameterStyle::KimiK3 {
                json.push(("", self.emit_node(&rest)?));
                continue;
            }
            for (name, types) in TYPE_NAMES {
                let mut part = rest.clone();
                part.types &= types;
                if !part.types.is_empty() {
                    json.push((name, self.emit_node(&part)?));
                }
            }
        }
        let mut alts = Vec::new();
        if !raw.is_empty() {
            alts.push(seq(vec![self.before_value(style, true), alt(raw)]));
        }
        let mut types: Vec<&str> = json.iter().map(|(t, _)| *t).collect();
        types.sort_unstable();
        types.dedup();
        for name in types {
            let values = json
                .iter()
                .filter(|(t, _)| *t == name)
                .map(|(_, e)| e.clone());
            let open = match style {
                ParameterStyle::KimiK3 => {
                    Expr::literal(format!("\" type=\"{name}\"<|sep|>").as_bytes())
                }
                _ => self.before_value(style, false),
            };
            alts.push(seq(vec![
                open,
                self.ws(),
                alt(values.collect()),
                self.ws(),
                Expr::literal(end.as_bytes()),
            ]));
        }
        Ok(alt(alts))
    }

    /// What follows a parameter's name up to its value, for a raw (string) value
    /// or a JSON one.
    fn before_value(&self, style: ParameterStyle, raw: bool) -> Expr {
        let text = |s: &str| Expr::literal(s.as_bytes());
        match style {
            ParameterStyle::Qwen => text(">"),
            ParameterStyle::QwenCoder if raw => text(">\n"),
            ParameterStyle::QwenCoder => text(">"),
            ParameterStyle::MiniMax | ParameterStyle::MiniCpm | ParameterStyle::Atem => text("\">"),
            ParameterStyle::DeepSeek if raw => text("\" string=\"true\">"),
            ParameterStyle::DeepSeek => text("\" string=\"false\">"),
            ParameterStyle::Glm => seq(vec![text("</arg_key>"), self.ws(), text("<arg_value>")]),
            ParameterStyle::Python => text("="),
            ParameterStyle::Gemma => text(":"),
            ParameterStyle::MiniMaxM3 => text(">"),
            ParameterStyle::Cohere if raw => text("\" type=\"raw\">"),
            ParameterStyle::Cohere => text("\" type=\"json\">"),
            ParameterStyle::KimiK3 if raw => text("\" type=\"string\"<|sep|>"),
            // A JSON value's type is its own (`parameter_value`).
            ParameterStyle::KimiK3 => text("\" type=\"number\"<|sep|>"),
        }
    }

    /// A value in Cohere's style, after its name: the rest of its tag naming
    /// its type (`raw` text, `json` for a number, boolean or null, `dict`,
    /// `list`), the value, the closing tag. An `enum`/`const` object or array is
    /// written as JSON (`json`), as XGrammar does.
    pub(crate) fn cohere_value(&mut self, node: &Node<'a>) -> Result<Expr> {
        let style = ParameterStyle::Cohere;
        if !node.enums.is_empty() {
            let mut alts = Vec::new();
            for v in self.enum_values(node)? {
                match v {
                    Value::String(s) if s.contains(style.end()) => {}
                    Value::String(s) => alts.push(Expr::literal(
                        format!(" type=\"raw\">{s}{}", style.end()).as_bytes(),
                    )),
                    v => {
                        let saved = self.value_style.take();
                        let json = self.literal(v);
                        self.value_style = saved;
                        alts.push(self.cohere_tagged("json", json?));
                    }
                }
            }
            return Ok(alt(alts));
        }
        let mut alts = Vec::new();
        let scalars = TypeSet::NULL | TypeSet::BOOLEAN | TypeSet::NUMBER;
        if node.types.intersects(scalars) {
            let mut part = node.clone();
            part.types &= scalars;
            let saved = self.value_style.take();
            let json = self.emit_node(&part);
            self.value_style = saved;
            alts.push(self.cohere_tagged("json", json?));
        }
        if node.types.intersects(TypeSet::STRING) {
            let raw = self.raw_text(node, style)?;
            alts.push(seq(vec![Expr::literal(b" type=\"raw\">"), raw]));
        }
        if node.types.intersects(TypeSet::ARRAY) {
            let list = self.emit_array(node)?;
            alts.push(self.cohere_tagged("list", list));
        }
        if node.types.intersects(TypeSet::OBJECT) {
            let dict = self.emit_object_as(node, Syntax::Parameters(style))?;
            alts.push(self.cohere_tagged("dict", dict));
        }
        Ok(alt(alts))
    }

    /// The rest of a Cohere tag naming `kind`, then `value` between blanks and
    /// the closing tag.
    fn cohere_tagged(&self, kind: &str, value: Expr) -> Expr {
        seq(vec![
            Expr::literal(format!(" type=\"{kind}\">").as_bytes()),
            self.ws(),
            value,
            self.ws(),
            Expr::literal(ParameterStyle::Cohere.end().as_bytes()),
        ])
    }

    /// A value valid against `conj` as plain JSON, inside a style that
    /// otherwise writes values its own way.
    fn plain_json_value(&mut self, conj: &[Subschema<'a>]) -> Result<Expr> {
        let saved = self.value_style.take();
        let json = self.value_rule(conj);
        self.value_style = saved;
        json
    }

    /// A string value as raw text, then the style's margin and closing tag.
    pub(crate) fn raw_text(&mut self, node: &Node<'a>, style: ParameterStyle) -> Result<Expr> {
        let end = style.end();
        let close = format!("{}{end}", style.raw_margin());
        let close_expr = Expr::literal(close.as_bytes());
        let limit = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        Ok(match self.string_body(node)? {
            None => nothing(),
            Some(StringBody::Regex(h)) => seq(vec![Expr::Regex(h), close_expr]),
            Some(StringBody::Both {
                regexes,
                negated,
                min,
                max,
            }) => seq(vec![
                bounded_raw_text(&regexes, &negated, (min, max)),
                close_expr,
            ]),
            Some(StringBody::Chars { min, max: None }) => {
                let plain = seq(vec![
                    Expr::Repeat {
                        expr: Box::new(Expr::Regex(not_open_angle())),
                        min: limit(min),
                        max: Some(limit(min)),
                    },
                    // Up to the margin and closing tag, never holding the tag
                    // (nor, where a CDATA section may stand, its opening).
                    Expr::Text(Box::new(FreeText {
                        excludes: match style {
                            ParameterStyle::MiniCpm => {
                                vec![end.as_bytes().to_vec(), CDATA.0.as_bytes().to_vec()]
                            }
                            _ => vec![end.as_bytes().to_vec()],
                        },
                        stops: vec![close.clone().into_bytes()],
                    })),
                ]);
                match style {
                    // Any text at all inside CDATA (its end cannot be in it).
                    ParameterStyle::MiniCpm if min == 0 => alt(vec![
                        plain,
                        seq(vec![
                            Expr::literal(CDATA.0.as_bytes()),
                            Expr::Text(Box::new(FreeText::excluding(vec![CDATA
                                .1
                                .as_bytes()
                                .to_vec()]))),
                            Expr::literal(format!("{}{close}", CDATA.1).as_bytes()),
                        ]),
                    ]),
                    _ => plain,
                }
            }
            Some(StringBody::Chars {
                min,
                max: Some(max),
            }) => seq(vec![
                Expr::Repeat {
                    expr: Box::new(Expr::Regex(not_open_angle())),
                    min: limit(min),
                    max: Some(limit(max)),
                },
                close_expr,
            ]),
        })
    }

    /// A string in MiniMax-M3's style: its raw text, never holding the tag
    /// opener (a reader would take a tag there). Unbounded text is any text
    /// without it; bounded text takes no `<` (as the other styles' raw text).
    pub(crate) fn minimax_m3_text(&mut self, node: &Node<'a>) -> Result<Expr> {
        let tag = MINIMAX_M3_TAG.as_bytes().to_vec();
        let limit = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        Ok(match self.string_body(node)? {
            None => nothing(),
            Some(StringBody::Regex(h)) => Expr::Intersection(Box::new(Intersection {
                regexes: vec![h],
                negated: vec![Hir::concat(vec![
                    any_text(),
                    Hir::literal(tag.clone()),
                    any_text(),
                ])],
            })),
            Some(StringBody::Both {
                regexes,
                negated,
                min,
                max,
            }) => bounded_raw_text(&regexes, &negated, (min, max)),
            Some(StringBody::Chars { min, max: None }) => seq(vec![
                Expr::Repeat {
                    expr: Box::new(Expr::Regex(not_open_angle())),
                    min: limit(min),
                    max: Some(limit(min)),
                },
                Expr::Text(Box::new(FreeText::excluding(vec![tag]))),
            ]),
            Some(StringBody::Chars {
                min,
                max: Some(max),
            }) => Expr::Repeat {
                expr: Box::new(Expr::Regex(not_open_angle())),
                min: limit(min),
                max: Some(limit(max)),
            },
        })
    }

    /// A parameter name allowed by a `propertyNames` node, raw.
    pub(crate) fn parameter_name(&mut self, node: &Node<'a>) -> Result<Expr> {
        if !node.enums.is_empty() {
            let names = self.enum_values(node)?;
            return Ok(alt(names
                .into_iter()
                .filter_map(|v| v.as_str())
                .map(|s| Expr::literal(s.as_bytes()))
                .collect()));
        }
        Ok(match self.string_body(node)? {
            None => nothing(),
            Some(StringBody::Regex(h)) => Expr::Regex(h),
            Some(StringBody::Both {
                regexes,
                negated,
                min,
                max,
            }) => bounded_raw_text(&regexes, &negated, (min, max)),
            Some(StringBody::Chars { min, max }) => {
                // Identifiers of min..=max characters.
                let h = super::string::restrict_length(&identifier(), min, max)
                    .unwrap_or_else(Hir::fail);
                Expr::Regex(h)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::super::{compile_parameters_with, JsonSchemaOptions, PatternCache, Whitespace};
    use super::ParameterStyle;
    use crate::{CompileOptions, CompiledGrammar, Matcher};

    /// Whether `text` is a complete parameter list for `schema` in `style`.
    fn accepts(schema: serde_json::Value, style: ParameterStyle) -> impl Fn(&str) -> bool {
        let options = JsonSchemaOptions {
            whitespace: Whitespace::Bounded { indent: 20 },
            ..JsonSchemaOptions::default()
        };
        let (grammar, _) =
            compile_parameters_with(&schema, style, &options, &PatternCache::default()).unwrap();
        let compiled =
            Arc::new(CompiledGrammar::compile(&grammar, &CompileOptions::default()).unwrap());
        move |text| {
            let mut m = Matcher::new(Arc::clone(&compiled));
            m.consume_bytes(text.as_bytes()).is_ok() && m.is_accepting()
        }
    }

    #[test]
    fn strings_are_raw_text_and_other_values_json() {
        let schema = json!({"type": "object", "properties": {
            "city": {"type": "string"}, "days": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}}},
            "required": ["city"], "additionalProperties": false});
        let ok = accepts(schema, ParameterStyle::Qwen);
        assert!(ok("<parameter=city>\nSan \"Fran\" <b>\n</parameter>"));
        assert!(ok(
            "<parameter=city>Paris</parameter>\n<parameter=days>\n3\n</parameter>"
        ));
        assert!(ok(
            "<parameter=city>x</parameter><parameter=tags>[\"a\", \"b\"]</parameter>"
        ));
        assert!(!ok("<parameter=days>3</parameter>"), "city is required");
        assert!(!ok(
            "<parameter=city>x</parameter><parameter=days>three</parameter>"
        ));
        assert!(!ok(
            "<parameter=city>x</parameter><parameter=tags>[a]</parameter>"
        ));
        assert!(!ok(
            "<parameter=city>x</parameter><parameter=other>1</parameter>"
        ));
        assert!(!ok("{\"city\": \"x\"}"));
    }

    #[test]
    fn raw_text_never_holds_the_closing_tag() {
        let ok = accepts(
            json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string", "minLength": 2}}}),
            ParameterStyle::Qwen,
        );
        assert!(!ok("<parameter=a>x</parameter>y</parameter>"));
        assert!(ok("<parameter=b>xy<z</parameter>"));
        // The first `minLength` characters take no `<` (documented over-constraint).
        assert!(!ok("<parameter=b></parameter></parameter>"));
        assert!(!ok("<parameter=b>x</parameter>"));
    }

    #[test]
    fn deepseek_marks_raw_values_with_string_true() {
        let ok = accepts(
            json!({"type": "object", "properties": {"s": {"type": "string"}, "n": {"type": "boolean"}}}),
            ParameterStyle::DeepSeek,
        );
        let p = |name: &str, string: bool, value: &str| {
            format!("<｜DSML｜parameter name=\"{name}\" string=\"{string}\">{value}</｜DSML｜parameter>")
        };
        assert!(ok(&(p("s", true, "hi") + &p("n", false, "true"))));
        assert!(!ok(&p("n", true, "true")));
        assert!(!ok(&p("s", false, "\"hi\"")));
    }

    #[test]
    fn undeclared_names_are_identifiers_other_than_the_declared_ones() {
        let ok = accepts(
            json!({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}}),
            ParameterStyle::Glm,
        );
        assert!(ok("<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n<arg_key>b_2</arg_key><arg_value>x</arg_value>"));
        // `a` is declared: its value must be an integer, not take the extra schema.
        assert!(!ok("<arg_key>a</arg_key><arg_value>x</arg_value>"));
        assert!(!ok("<arg_key>2b</arg_key><arg_value>x</arg_value>"));
    }

    #[test]
    fn pattern_properties_beside_other_undeclared_names_pin_their_schemas() {
        let ok = accepts(
            json!({"type": "object", "properties": {"a": {"type": "integer"}},
                   "patternProperties": {"^n_": {"type": "integer"}, "^s_": {"type": "string"}},
                   "additionalProperties": {"type": "boolean"}}),
            ParameterStyle::Glm,
        );
        let pair = |k: &str, v: &str| format!("<arg_key>{k}</arg_key><arg_value>{v}</arg_value>");
        assert!(ok(&format!(
            "{}{}{}{}",
            pair("a", "1"),
            pair("n_x", "2"),
            pair("s_y", "hi"),
            pair("on", "true")
        )));
        // Each name's schema comes from the patterns it matches, or from
        // `additionalProperties` when none does.
        assert!(!ok(&format!("{}{}", pair("a", "1"), pair("n_x", "hi"))));
        assert!(!ok(&format!("{}{}", pair("a", "1"), pair("on", "2"))));
        assert!(!ok(&format!("{}{}", pair("a", "x"), pair("on", "true"))));
    }

    #[test]
    fn a_root_that_allows_no_object_is_refused_with_its_place() {
        let e = compile_parameters_with(
            &json!({"type": "array"}),
            ParameterStyle::MiniMax,
            &JsonSchemaOptions::default(),
            &PatternCache::default(),
        )
        .unwrap_err();
        assert_eq!(e.pointer(), Some(""));
        assert!(e.to_string().contains("minimax_xml"), "{e}");
    }

    #[test]
    fn python_keyword_arguments_take_python_and_json_keywords() {
        let schema = json!({"type": "object", "properties": {
            "city": {"type": "string"}, "on": {"type": "boolean"},
            "note": {"type": ["string", "null"]},
            "m": {"type": "object", "properties": {"k": {"type": "boolean"}}}},
            "required": ["city"], "additionalProperties": false});
        let ok = accepts(schema, ParameterStyle::Python);
        assert!(ok(r#"city="Paris""#));
        assert!(ok(r#"city="Pa\"ris", on=True, note=None, m={"k": False}"#));
        assert!(ok(r#"city="x", on=false, note="n", m={"k": true}"#));
        assert!(!ok(r#"on=True"#), "city is required");
        assert!(!ok(r#"city=Paris"#), "a string is quoted");
        assert!(
            !ok(r#"city="x" on=True"#),
            "arguments are separated by commas"
        );
        assert!(!ok(r#"city="x", on=TRUE"#));
        assert!(!ok(r#"city="x", other=1"#));
        assert!(!ok(r#"city="x", m={k: True}"#), "dict keys are strings");
    }

    #[test]
    fn gemma_spells_strings_and_keys_its_way_at_every_depth() {
        let schema = json!({"type": "object", "properties": {
            "city": {"type": "string", "maxLength": 12},
            "todos": {"type": "array", "items": {"type": "string"}},
            "unit": {"enum": ["c", "f"]},
            "config": {"type": "object", "properties": {"theme": {"type": "string"},
                "count": {"type": "integer"}}, "required": ["theme"]}},
            "required": ["city"], "additionalProperties": false});
        let ok = accepts(schema, ParameterStyle::Gemma);
        assert!(ok(r#"{city:<|"|>San "Fran"<|"|>}"#));
        assert!(ok(
            r#"{city:<|"|>x<|"|>,todos:[<|"|>a b<|"|>,<|"|><|"|>],unit:<|"|>f<|"|>,config:{theme:<|"|>dark<|"|>,count:3}}"#
        ));
        assert!(ok(
            r#"{city:<|"|>x<|"|>,todos:[],config:{theme:<|"|><|"|>}}"#
        ));
        assert!(!ok(r#"{"city":"x"}"#), "JSON is not Gemma's notation");
        assert!(!ok(r#"{city:<|"|>x<|"|>,config:{"theme":<|"|>d<|"|>}}"#));
        assert!(
            !ok(r#"{city:<|"|>x<|"|>,config:{count:3}}"#),
            "theme is required"
        );
        assert!(!ok(r#"{city:<|"|>x<|"|>,unit:<|"|>k<|"|>}"#));
        assert!(!ok(r#"{city:<|"|>more than twelve<|"|>}"#));
    }

    #[test]
    fn qwen_coder_frames_raw_values_with_newlines() {
        let ok = accepts(
            json!({"type": "object", "properties": {"code": {"type": "string", "minLength": 3}, "n": {"type": "integer"}}}),
            ParameterStyle::QwenCoder,
        );
        assert!(ok(
            "<parameter=code>\nabc\n\n</parameter>\n<parameter=n>\n4\n</parameter>\n"
        ));
        assert!(!ok("<parameter=code>\na</parameter>bc\n</parameter>"));
        // The margins are not the value: "\nab" framed is "ab", too short.
        assert!(!ok("<parameter=code>\nab\n</parameter>"));
        assert!(!ok("<parameter=code>abc</parameter>"));
    }

    #[test]
    fn kimi_tags_name_each_value_type() {
        let ok = accepts(
            json!({"type": "object", "properties": {
                "city": {"type": "string"}, "days": {"type": "integer"},
                "mode": {"enum": ["fast", 2, null]}, "on": {"type": ["boolean", "array"]}}}),
            ParameterStyle::KimiK3,
        );
        let arg = |key: &str, kind: &str, value: &str| {
            format!("<|open|>argument key=\"{key}\" type=\"{kind}\"<|sep|>{value}<|close|>argument<|sep|>")
        };
        assert!(ok(&[
            arg("city", "string", "S<F"),
            arg("days", "number", "3")
        ]
        .concat()));
        assert!(
            !ok(&arg("days", "integer", "3")),
            "Kimi names every number `number`"
        );
        assert!(!ok(&arg("days", "string", "3")));
        assert!(!ok(&arg("city", "number", "3")));
        assert!(ok(&arg("mode", "string", "fast")) && ok(&arg("mode", "number", "2")));
        assert!(ok(&arg("mode", "null", "null")) && !ok(&arg("mode", "string", "2")));
        assert!(ok(&arg("on", "boolean", "true")) && ok(&arg("on", "array", "[1]")));
        assert!(!ok(&arg("on", "array", "true")));
    }

    #[test]
    fn minicpm_takes_free_text_in_cdata() {
        let ok = accepts(
            json!({"type": "object", "properties": {
                "code": {"type": "string"}, "id": {"type": "string", "maxLength": 3}}}),
            ParameterStyle::MiniCpm,
        );
        assert!(ok(r#"<param name="code">print(1)</param>"#));
        assert!(ok(
            r#"<param name="code"><![CDATA[a</param> & <b>]]></param>"#
        ));
        assert!(!ok(r#"<param name="code"><![CDATA[a]]> b]]></param>"#));
        // Bounded text has no CDATA form (its length is the text's).
        assert!(!ok(r#"<param name="id"><![CDATA[ab]]></param>"#));
        assert!(ok(r#"<param name="id">ab</param>"#));
    }

    #[test]
    fn minimax_m3_tags_values_at_every_depth() {
        let ok = accepts(
            json!({"type": "object", "properties": {
                "city": {"type": "string"}, "n": {"type": ["integer", "null"]},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                "id": {"type": "string", "maxLength": 3},
                "at": {"type": "object", "properties": {"x": {"type": "number"}, "on": {"type": "boolean"}},
                       "required": ["x"]}},
                "required": ["city"]}),
            ParameterStyle::MiniMaxM3,
        );
        let m3 = |text: &str| ok(&text.replace("NS", super::MINIMAX_M3_TAG));
        assert!(m3("NS<city>San <b>Fran</b>NS</city>"));
        assert!(m3("NS<city>ParisNS</city>NS<n>-3NS</n>"));
        assert!(m3(
            "NS<city>xNS</city>NS<tags>NS<item>aNS</item>NS<item>NS</item>NS</tags>"
        ));
        assert!(m3("NS<city>xNS</city>NS<tags>NS</tags>"), "an empty array");
        assert!(m3(
            "NS<city>xNS</city>NS<at>NS<x>1.5NS</x>NS<on>trueNS</on>NS</at>"
        ));
        assert!(
            !m3("NS<city>xNS</city>NS<at>NS<on>trueNS</on>NS</at>"),
            "x is required"
        );
        assert!(!m3("NS<city>xNS</city>NS<n>nullNS</n>"), "null is left out");
        assert!(
            !m3("NS<city>xNS</city>NS<n>1NS</city>"),
            "the closing tag names the key"
        );
        assert!(
            !m3("NS<city>aNSbNS</city>"),
            "text never holds the tag opener"
        );
        assert!(
            !m3("NS<city>xNS</city>NS<other>1NS</other>"),
            "declared names only"
        );
        assert!(!m3(
            "NS<city>xNS</city>NS<tags>NS<item>aNS</item>NS<item>bNS</item>NS<item>cNS</item>NS</tags>"
        ));
        assert!(m3("NS<city>xNS</city>NS<id>a]bNS</id>"));
        assert!(!m3("NS<city>xNS</city>NS<id>abcdNS</id>"));
        assert!(!m3("{\"city\": \"x\"}"));
    }

    #[test]
    fn cohere_tags_name_each_value_type_at_every_depth() {
        let ok = accepts(
            json!({"type": "object", "properties": {
                "q": {"type": "string"}, "n": {"type": ["integer", "null"]},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                "at": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]},
                "mode": {"enum": ["fast", 2, {"k": 1}]}, "a&b": {"type": "boolean"}},
                "required": ["q"], "additionalProperties": false}),
            ParameterStyle::Cohere,
        );
        let v = |name: &str, kind: &str, body: &str| {
            format!("<cofl:value name=\"{name}\" type=\"{kind}\">{body}</cofl:value>")
        };
        let item =
            |kind: &str, body: &str| format!("<cofl:value type=\"{kind}\">{body}</cofl:value>");
        assert!(ok(&v("q", "raw", "a <b> \"c\"")));
        assert!(ok(&[
            v("q", "raw", "x"),
            v("n", "json", " 3 "),
            v("n", "json", "null")
        ][..2]
            .concat()));
        assert!(ok(&[
            v("q", "raw", "x"),
            v(
                "tags",
                "list",
                &[item("raw", "a"), item("raw", "b")].concat()
            )
        ]
        .concat()));
        assert!(ok(&[
            v("q", "raw", "x"),
            v("at", "dict", &v("x", "json", "1.5"))
        ]
        .concat()));
        assert!(ok(&[v("q", "raw", "x"), v("mode", "raw", "fast")].concat()));
        assert!(ok(&[v("q", "raw", "x"), v("mode", "json", "2")].concat()));
        assert!(ok(
            &[v("q", "raw", "x"), v("mode", "json", "{\"k\": 1}")].concat()
        ));
        assert!(ok(
            &[v("q", "raw", "x"), v("a&amp;b", "json", "true")].concat()
        ));
        assert!(!ok(&v("q", "json", "\"x\"")), "a string is raw");
        assert!(!ok(&[v("q", "raw", "x"), v("n", "raw", "3")].concat()));
        assert!(!ok(
            &[v("q", "raw", "x"), v("mode", "json", "\"fast\"")].concat()
        ));
        assert!(
            !ok(&[v("q", "raw", "x"), v("at", "dict", "")].concat()),
            "x is required"
        );
        assert!(!ok(
            &[v("q", "raw", "x"), v("at", "json", "{\"x\": 1}")].concat()
        ));
        assert!(
            !ok(&[
                v("q", "raw", "x"),
                v(
                    "tags",
                    "list",
                    &[item("raw", "a"), item("raw", "b"), item("raw", "c")].concat()
                )
            ]
            .concat()),
            "maxItems"
        );
        assert!(
            !ok(&v("q", "raw", "a</cofl:value>b")),
            "text never holds the closing tag"
        );
        assert!(
            !ok(&[v("q", "raw", "x"), v("a&b", "json", "true")].concat()),
            "names are escaped"
        );
    }

    #[test]
    fn style_names_round_trip() {
        for style in ParameterStyle::ALL {
            assert_eq!(ParameterStyle::from_name(style.name()), Some(style));
        }
        assert_eq!(ParameterStyle::from_name("json"), None);
    }
}
