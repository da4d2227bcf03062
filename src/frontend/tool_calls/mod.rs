//! Tool calling: OpenAI's `tools`, `tool_choice` and `parallel_tool_calls` as the
//! structural tag of a model family's own tool-call format.
//!
//! A model calls tools in the format it was trained on (Hermes and Qwen write
//! `<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>`); forcing any
//! other shape (a bare JSON array for `tool_choice: "required"`) fights the
//! model. So each family maps the request to a structural tag over its own
//! delimiters ([`super::structural_tag`]), where the arguments follow each tool's
//! `parameters` schema (strict: declared properties only) and a trigger always
//! starts a call that parses:
//!
//! * `auto`: free text with calls (`triggered_tags`); `required`: calls only, at
//!   least one; a named function: that call only; `none`: free text holding no
//!   trigger. Free text never holds what a reader takes for the start of a call
//!   ([`ToolCallFormat::call_markers`]), so no call is written unconstrained.
//! * `parallel_tool_calls: false`: at most one call (`stop_after_first`).
//!
//! Families so far ([`ToolCallFormat`]): Hermes (`<tool_call>` JSON) and Llama
//! 3.x's bare JSON; the XML ones whose arguments are tagged parameters
//! (Qwen3-Coder's `<function=f>`, GLM's `<tool_call>f<arg_key>`, Seed-OSS,
//! MiniMax-M2 and DeepSeek's DSML `<invoke name="f">`: one `CallShape` each, one
//! reader for all, `xml.rs`); those whose JSON arguments follow the name between
//! delimiters (DeepSeek V3.1 and R1, Kimi K2: one `JsonCallShape` each,
//! `json_calls.rs`); Mistral's three `[TOOL_CALLS]` shapes; LFM2's Python list of
//! calls (`pythonic.rs`) and Gemma 4's calls in its own notation (`gemma.rs`).
//! Cohere's list of actions (`cohere.rs`); gpt-oss's harmony messages, whose
//! channels carry reasoning, answer and calls (`harmony.rs`); Kimi K3's tagged
//! blocks (`kimi_k3.rs`); a JSON list of named calls between tags (Nemotron
//! Nano 2, Apriel: `named_list.rs`); MiniCPM 5's `<function name="f">` (an XML
//! shape). Not built yet: MiniMax-M3 and others of the chat templates in the
//! test data. A
//! reasoning span before the reply ([`Reasoning`], [`with_reasoning`],
//! [`grammar_with_reasoning`]) is free text up to its close.
//!
//! Delimiters are written as text; where the vocabulary has a special token
//! with a delimiter's content, the structural tag takes that token too
//! (`StructuralTagOptions::delimiter_tokens`), and the reader sees it as its
//! content ([`crate::vocab::Vocabulary::shown_bytes`]).

mod cohere;
mod gemma;
mod harmony;
mod json_calls;
mod kimi_k3;
mod literals;
mod named_list;
mod parse;
mod progress;
mod prompt;
mod pythonic;
mod reasoning;
mod xml;

use serde_json::{json, Value};

use super::FrontendError;

pub use parse::{
    calls_region, content_prefix_len, content_so_far, final_content, parse_reply, ParsedCall,
    ParsedReply,
};
pub use progress::{calls_in_progress, CallProgress};
pub use prompt::{tool_system_prompt, ToolPrompting};
pub use reasoning::{grammar_with_reasoning, split_reasoning, with_reasoning, Reasoning};

/// A model family's tool-call format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolCallFormat {
    /// `<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>`: Hermes 2
    /// Pro and 3, Qwen2.5, Qwen3 (non-coder), IBM Granite 4, Reka.
    Hermes,
    /// `<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>`:
    /// Qwen3-Coder, Qwen3.5, NVIDIA Nemotron 3, Step 3.5 Flash. A string
    /// parameter is its raw text; any other value JSON (the JSON Schema
    /// front-end's `qwen_coder_xml` style).
    QwenXml,
    /// `<tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>`:
    /// GLM-4.5, 4.6, 4.7, inclusionAI Ling 3.0 (the `glm_xml` parameter style).
    Glm,
    /// `<seed:tool_call>\n<function=f>\n<parameter=a>1</parameter>\n</function>\n</seed:tool_call>`:
    /// ByteDance Seed-OSS (the `qwen_xml` style: no newlines around values).
    SeedOss,
    /// `<minimax:tool_call>\n<invoke name="f">\n<parameter name="a">1</parameter>\n</invoke>\n</minimax:tool_call>`:
    /// MiniMax-M2, every call of a turn in one block.
    MiniMax,
    /// `<｜DSML｜function_calls>` with `<｜DSML｜invoke name="f">` and
    /// `<｜DSML｜parameter name="a" string="false">1</｜DSML｜parameter>`:
    /// DeepSeek V3.2, every call of a turn in one block.
    DeepSeekDsml,
    /// DeepSeek V3.2's DSML calls inside `<｜DSML｜tool_calls>`: DeepSeek V4.
    DeepSeekV4,
    /// `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{...}<｜tool▁call▁end｜><｜tool▁calls▁end｜>`:
    /// DeepSeek V3 and V3.1.
    DeepSeekV3,
    /// DeepSeek R1's: `<｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{...}\n```<｜tool▁call▁end｜>`
    /// inside the same block (R1 and its Llama and Qwen distills).
    DeepSeekR1,
    /// `<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{...}<|tool_call_end|><|tool_calls_section_end|>`:
    /// Kimi K2 (the call's id is `functions.f:0`, numbered by the model).
    KimiK2,
    /// `{"name": "f", "parameters": {...}}`: Llama 3.1, 3.2, 3.3 (the whole
    /// reply is the call).
    Llama3Json,
    /// `[TOOL_CALLS][{"name": "f", "arguments": {...}, "id": "a1b2c3d4e"}]`: Mistral
    /// Nemo (one block; parallel calls are items of its array).
    MistralNemo,
    /// `[TOOL_CALLS]f[ARGS]{...}`, once per call: Devstral, Ministral 3.
    MistralArgs,
    /// `[TOOL_CALLS]f[CALL_ID]a1b2c3d4e[ARGS]{...}`, once per call: Mistral
    /// Small 3.2.
    MistralCallId,
    /// `<|tool_call_start|>[f(a=1, b="x"), g()]<|tool_call_end|>`: a Python list
    /// of calls with keyword arguments (LFM2, LFM2.5).
    Pythonic,
    /// `<|tool_call>call:f{city:<|"|>Paris<|"|>,days:3}<tool_call|>`, once per
    /// call: Gemma 4 (bare keys, strings between `<|"|>`, at every depth).
    Gemma4,
    /// `<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "f", "parameters": {...}}\n]<|END_ACTION|>`:
    /// Cohere Command R7B and Command A.
    Cohere,
    /// `<|channel|>commentary to=functions.f <|constrain|>json<|message|>{...}`
    /// after analysis messages: gpt-oss's harmony (one call per turn).
    Harmony,
    /// `TEXT<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool="f" index="1"<|sep|>`
    /// with `<|open|>argument key="a" type="number"<|sep|>1<|close|>argument<|sep|>`:
    /// Kimi K3.
    KimiK3,
    /// `<TOOLCALL>[{"name": "f", "arguments": {...}}]</TOOLCALL>`: NVIDIA Nemotron
    /// Nano 2 (parallel calls are items of the list).
    NemotronNano2,
    /// `<tool_calls>[{"name": "f", "arguments": {...}}]</tool_calls>`: Apriel 1.5
    /// and 1.6.
    Apriel,
    /// `<function name="f"><param name="a">1</param></function>`, text that
    /// may hold `<`, `&` or a newline in CDATA: MiniCPM 5.
    MiniCpm,
    /// ` functools[{"name": "f", "arguments": {...}}]`: FireFunction v2.
    FireFunction,
    /// `<|message_sep|>\n\nfunction call<|role_sep|>\n{"name": "f", "arguments": {...}}`:
    /// GigaChat 3 (one call per turn).
    GigaChat3,
    /// `<|function_call|>{"name": "f", "arguments": {...}}`: GigaChat 3.1 (one call
    /// per turn).
    GigaChat31,
}

impl ToolCallFormat {
    /// The format a chat template renders tool calls in, when it is one of
    /// these (read from the template's text).
    pub fn detect(template: &str) -> Option<ToolCallFormat> {
        if template.contains("<|channel|>commentary") && template.contains("<|call|>") {
            return Some(ToolCallFormat::Harmony);
        }
        if template.contains("<|open|>") && template.contains("open_tag('call'") {
            return Some(ToolCallFormat::KimiK3);
        }
        if template.contains("<function name=") && template.contains("<param name=") {
            return Some(ToolCallFormat::MiniCpm);
        }
        if template.contains(" functools[") {
            return Some(ToolCallFormat::FireFunction);
        }
        if template.contains("'role': 'function call'") {
            return Some(ToolCallFormat::GigaChat3);
        }
        if template.contains("function_call=\"<|function_call|>\"") {
            return Some(ToolCallFormat::GigaChat31);
        }
        if template.contains("<TOOLCALL>[") {
            return Some(ToolCallFormat::NemotronNano2);
        }
        if template.contains("<tool_calls>[") {
            return Some(ToolCallFormat::Apriel);
        }
        let hermes = template.contains("<tool_call>")
            && !template.contains("<tool_calls>")
            && template.contains("\"name\"")
            && template.contains("\"arguments\"")
            && !template.contains("<function=")
            && !template.contains("<arg_key>");
        if hermes {
            return Some(ToolCallFormat::Hermes);
        }
        let qwen_xml = template.contains("<tool_call>")
            && template.contains("<function=")
            && template.contains("<parameter=");
        if qwen_xml {
            return Some(ToolCallFormat::QwenXml);
        }
        if template.contains("<tool_call>") && template.contains("<arg_key>") {
            return Some(ToolCallFormat::Glm);
        }
        if template.contains("<seed:tool_call>") {
            return Some(ToolCallFormat::SeedOss);
        }
        if template.contains("<minimax:tool_call>") && template.contains("<invoke name=") {
            return Some(ToolCallFormat::MiniMax);
        }
        if template.contains("<|tool_call_argument_begin|>") {
            return Some(ToolCallFormat::KimiK2);
        }
        if template.contains("<｜tool▁call▁begin｜>") && !template.contains("｜DSML｜") {
            return Some(if template.contains("```json") {
                ToolCallFormat::DeepSeekR1
            } else {
                ToolCallFormat::DeepSeekV3
            });
        }
        let llama = template.contains("<|start_header_id|>")
            && template.contains("\"parameters\": ")
            && template.contains("tool_call");
        if llama {
            return Some(ToolCallFormat::Llama3Json);
        }
        if template.contains("｜DSML｜") {
            return Some(if template.contains("function_calls>") {
                ToolCallFormat::DeepSeekDsml
            } else {
                ToolCallFormat::DeepSeekV4
            });
        }
        if template.contains("[TOOL_CALLS][") {
            return Some(ToolCallFormat::MistralNemo);
        }
        if template.contains(cohere::TRIGGER) {
            return Some(ToolCallFormat::Cohere);
        }
        if template.contains(gemma::TRIGGER) {
            return Some(ToolCallFormat::Gemma4);
        }
        // LFM2's templates list the tools after this (some do not render calls).
        if template.contains(pythonic::BLOCK.0) || template.contains("\"List of tools: ") {
            return Some(ToolCallFormat::Pythonic);
        }
        if template.contains("[TOOL_CALLS]") && template.contains("[ARGS]") {
            return Some(if template.contains("[CALL_ID]") {
                ToolCallFormat::MistralCallId
            } else {
                ToolCallFormat::MistralArgs
            });
        }
        None
    }

    /// Every format, in the order of [`ToolCallFormat::NAMES`].
    pub const ALL: [ToolCallFormat; 25] = [
        ToolCallFormat::Hermes,
        ToolCallFormat::QwenXml,
        ToolCallFormat::Glm,
        ToolCallFormat::SeedOss,
        ToolCallFormat::MiniMax,
        ToolCallFormat::DeepSeekDsml,
        ToolCallFormat::DeepSeekV4,
        ToolCallFormat::DeepSeekV3,
        ToolCallFormat::DeepSeekR1,
        ToolCallFormat::KimiK2,
        ToolCallFormat::Llama3Json,
        ToolCallFormat::MistralNemo,
        ToolCallFormat::MistralArgs,
        ToolCallFormat::MistralCallId,
        ToolCallFormat::Pythonic,
        ToolCallFormat::Gemma4,
        ToolCallFormat::Cohere,
        ToolCallFormat::Harmony,
        ToolCallFormat::KimiK3,
        ToolCallFormat::NemotronNano2,
        ToolCallFormat::Apriel,
        ToolCallFormat::MiniCpm,
        ToolCallFormat::FireFunction,
        ToolCallFormat::GigaChat3,
        ToolCallFormat::GigaChat31,
    ];

    /// Each format's name, as [`ToolCallFormat::by_name`] reads it.
    pub const NAMES: [&'static str; 25] = [
        "hermes",
        "qwen-xml",
        "glm",
        "seed-oss",
        "minimax",
        "deepseek-dsml",
        "deepseek-v4",
        "deepseek-v3",
        "deepseek-r1",
        "kimi-k2",
        "llama3-json",
        "mistral-nemo",
        "mistral-args",
        "mistral-call-id",
        "pythonic",
        "gemma4",
        "cohere",
        "harmony",
        "kimi-k3",
        "nemotron-nano-v2",
        "apriel",
        "minicpm",
        "firefunction",
        "gigachat3",
        "gigachat3.1",
    ];

    /// The format by name: one of [`ToolCallFormat::NAMES`], or a model's
    /// (`qwen`, `qwen2.5`, `qwen3`: Hermes; `qwen3-coder`, `qwen3.5`; `glm-4.5`
    /// to `glm-4.7`; `minimax-m2`; `deepseek-v3.2`; `deepseek-v3.1`; `llama3`
    /// to `llama3.3`; `devstral`; `lfm2`, `lfm2.5`; `gemma-4`; `command-r7b`,
    /// `command-a`; `gpt-oss`).
    pub fn by_name(name: &str) -> Option<ToolCallFormat> {
        match name {
            "hermes" | "qwen" | "qwen2.5" | "qwen3" => Some(ToolCallFormat::Hermes),
            "qwen-xml" | "qwen3-coder" | "qwen3.5" => Some(ToolCallFormat::QwenXml),
            "glm" | "glm-4.5" | "glm-4.6" | "glm-4.7" => Some(ToolCallFormat::Glm),
            "seed-oss" => Some(ToolCallFormat::SeedOss),
            "minimax" | "minimax-m2" => Some(ToolCallFormat::MiniMax),
            "deepseek-dsml" | "deepseek-v3.2" => Some(ToolCallFormat::DeepSeekDsml),
            "deepseek-v4" => Some(ToolCallFormat::DeepSeekV4),
            "deepseek-v3" | "deepseek-v3.1" => Some(ToolCallFormat::DeepSeekV3),
            "deepseek-r1" => Some(ToolCallFormat::DeepSeekR1),
            "kimi-k2" => Some(ToolCallFormat::KimiK2),
            "llama3-json" | "llama3" | "llama3.1" | "llama3.2" | "llama3.3" => {
                Some(ToolCallFormat::Llama3Json)
            }
            "mistral-nemo" => Some(ToolCallFormat::MistralNemo),
            "mistral-args" | "devstral" => Some(ToolCallFormat::MistralArgs),
            "mistral-call-id" => Some(ToolCallFormat::MistralCallId),
            "pythonic" | "lfm2" | "lfm2.5" => Some(ToolCallFormat::Pythonic),
            "gemma4" | "gemma-4" => Some(ToolCallFormat::Gemma4),
            "cohere" | "command-r7b" | "command-a" => Some(ToolCallFormat::Cohere),
            "harmony" | "gpt-oss" => Some(ToolCallFormat::Harmony),
            "kimi-k3" => Some(ToolCallFormat::KimiK3),
            "nemotron-nano-v2" => Some(ToolCallFormat::NemotronNano2),
            "apriel" => Some(ToolCallFormat::Apriel),
            "minicpm" | "minicpm5" => Some(ToolCallFormat::MiniCpm),
            "firefunction" | "firefunction-v2" => Some(ToolCallFormat::FireFunction),
            "gigachat3" => Some(ToolCallFormat::GigaChat3),
            "gigachat3.1" => Some(ToolCallFormat::GigaChat31),
            _ => None,
        }
    }

    /// The text that opens the calls (the trigger).
    pub fn trigger(self) -> &'static str {
        if let Some(shape) = self.list_shape() {
            return shape.open;
        }
        match self {
            ToolCallFormat::Hermes | ToolCallFormat::Glm => "<tool_call>",
            ToolCallFormat::MistralNemo
            | ToolCallFormat::MistralArgs
            | ToolCallFormat::MistralCallId => "[TOOL_CALLS]",
            ToolCallFormat::Llama3Json => "{\"name\": \"",
            ToolCallFormat::Pythonic => pythonic::BLOCK.0,
            ToolCallFormat::Gemma4 => gemma::TRIGGER,
            ToolCallFormat::Cohere => cohere::TRIGGER,
            ToolCallFormat::Harmony => harmony::TRIGGER,
            ToolCallFormat::KimiK3 => kimi_k3::TRIGGER,
            ToolCallFormat::MiniCpm => xml::MINICPM.open,
            ToolCallFormat::DeepSeekV3 | ToolCallFormat::DeepSeekR1 | ToolCallFormat::KimiK2 => {
                self.json_shape().expect("a JSON format").block.0
            }
            xml => xml.xml_shape().expect("an XML format").wrapper.0,
        }
    }

    /// Every text a reader of this format takes as the start of a call (the
    /// trigger, and a call's own opening where calls sit inside a wrapper): free
    /// text holds none of them, so a call can only be written where the grammar
    /// constrains it, never slip through the text around the calls.
    pub fn call_markers(self) -> Vec<&'static str> {
        let mut markers = vec![self.trigger()];
        markers.extend(self.xml_shape().map(|shape| shape.open));
        markers.extend(self.json_shape().map(|shape| shape.call_open));
        markers.dedup();
        markers
    }

    /// How the format lists its calls, when they are one JSON list.
    pub(crate) fn list_shape(self) -> Option<&'static named_list::ListShape> {
        match self {
            ToolCallFormat::NemotronNano2 => Some(&named_list::NEMOTRON),
            ToolCallFormat::Apriel => Some(&named_list::APRIEL),
            ToolCallFormat::FireFunction => Some(&named_list::FIREFUNCTION),
            ToolCallFormat::GigaChat3 => Some(&named_list::GIGACHAT3),
            ToolCallFormat::GigaChat31 => Some(&named_list::GIGACHAT31),
            _ => None,
        }
    }

    /// How the format frames calls whose arguments are JSON after the name.
    pub(crate) fn json_shape(self) -> Option<&'static json_calls::JsonCallShape> {
        match self {
            ToolCallFormat::DeepSeekV3 => Some(&json_calls::DEEPSEEK_V3),
            ToolCallFormat::DeepSeekR1 => Some(&json_calls::DEEPSEEK_R1),
            ToolCallFormat::KimiK2 => Some(&json_calls::KIMI_K2),
            _ => None,
        }
    }

    /// How the format writes one call, when its arguments are XML parameters.
    pub(crate) fn xml_shape(self) -> Option<&'static xml::CallShape> {
        match self {
            ToolCallFormat::QwenXml => Some(&xml::QWEN),
            ToolCallFormat::Glm => Some(&xml::GLM),
            ToolCallFormat::SeedOss => Some(&xml::SEED),
            ToolCallFormat::MiniMax => Some(&xml::MINIMAX),
            ToolCallFormat::DeepSeekDsml => Some(&xml::DSML_FUNCTION_CALLS),
            ToolCallFormat::DeepSeekV4 => Some(&xml::DSML_TOOL_CALLS),
            ToolCallFormat::MiniCpm => Some(&xml::MINICPM),
            _ => None,
        }
    }
}

/// What opens a Hermes call, up to its arguments, as the templates render it
/// (`json.dumps` spacing).
fn hermes_head(name: &str) -> String {
    let quoted = serde_json::to_string(name).expect("a string");
    format!("<tool_call>\n{{\"name\": {quoted}, \"arguments\": ")
}

/// A whole call spelled as [`structural_tag`] constrains a reply of `format` to
/// write it: for earlier calls written back into a prompt, and for examples.
/// Mistral's formats take `id` (nine letters and digits), Cohere's (a number).
pub fn call_text(format: ToolCallFormat, name: &str, arguments: &Value, id: &str) -> String {
    if let Some(shape) = format.xml_shape() {
        let mut text = shape.call_begin(name);
        for (key, value) in arguments.as_object().into_iter().flatten() {
            text.push_str(&shape.parameter_text(key, value));
        }
        text.push_str(shape.ends[0]);
        return match shape.calls_share_a_block() {
            true => format!("{}{text}{}", shape.block_open(), shape.wrapper.1),
            false => text,
        };
    }
    if let Some(shape) = format.json_shape() {
        let call = shape.call_text(name, arguments, 0);
        return format!("{}{call}{}", shape.block.0, shape.block.1);
    }
    if let Some(shape) = format.list_shape() {
        return named_list::call_text(shape, name, arguments);
    }
    match format {
        ToolCallFormat::Llama3Json => {
            let quoted = serde_json::to_string(name).expect("a string");
            format!("{{\"name\": {quoted}, \"parameters\": {arguments}}}")
        }
        ToolCallFormat::MistralNemo => {
            let quoted = serde_json::to_string(name).expect("a string");
            format!("[TOOL_CALLS][{{\"name\": {quoted}, \"arguments\": {arguments}, \"id\": \"{id}\"}}]")
        }
        ToolCallFormat::MistralArgs => format!("[TOOL_CALLS]{name}[ARGS]{arguments}"),
        ToolCallFormat::Pythonic => pythonic::call_text(name, arguments),
        ToolCallFormat::Gemma4 => gemma::call_text(name, arguments),
        ToolCallFormat::Harmony => harmony::call_text(name, arguments),
        ToolCallFormat::KimiK3 => kimi_k3::call_text(name, arguments),
        ToolCallFormat::Cohere => {
            // Its ids are numbers (the templates renumber them).
            let digits = !id.is_empty() && id.len() <= 4 && id.bytes().all(|b| b.is_ascii_digit());
            cohere::call_text(name, arguments, if digits { id } else { "0" })
        }
        ToolCallFormat::MistralCallId => {
            format!("[TOOL_CALLS]{name}[CALL_ID]{id}[ARGS]{arguments}")
        }
        _ => format!("{}{arguments}}}\n</tool_call>", hermes_head(name)),
    }
}

fn seq(elements: Vec<Value>) -> Value {
    json!({"type": "sequence", "elements": elements})
}

fn text(value: &str) -> Value {
    json!({"type": "const_string", "value": value})
}

fn one_of(elements: Vec<Value>) -> Value {
    json!({"type": "or", "elements": elements})
}

/// `item`, then (parallel) more of it, each after `gap`.
fn repeated(item: Value, gap: Value, parallel: bool) -> Value {
    if parallel {
        seq(vec![
            item.clone(),
            json!({"type": "star", "content": seq(vec![gap, item])}),
        ])
    } else {
        item
    }
}

/// One callable tool: its name and its arguments' JSON Schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub name: String,
    pub parameters: Value,
}

/// OpenAI's `tool_choice`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    None,
    Auto,
    Required,
    Function(String),
}

fn error(pointer: &str, message: impl Into<String>) -> FrontendError {
    FrontendError::Document {
        pointer: pointer.into(),
        message: message.into(),
    }
}

/// Reads OpenAI's `tools` (`[{"type": "function", "function": {"name",
/// "parameters", ...}}]`; the bare `{"name", "parameters"}` form too). Errors
/// name the JSON pointer under `/tools`.
pub fn read_tools(tools: &Value) -> Result<Vec<Tool>, FrontendError> {
    let Value::Array(items) = tools else {
        return Err(error("/tools", "must be an array of tools"));
    };
    let mut out: Vec<Tool> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = format!("/tools/{i}");
        let function = match item.get("function") {
            Some(f) => {
                if item.get("type").is_some_and(|t| t != "function") {
                    return Err(error(&format!("{at}/type"), "must be \"function\""));
                }
                f
            }
            None => item,
        };
        let at_function = if item.get("function").is_some() {
            format!("{at}/function")
        } else {
            at.clone()
        };
        let Some(name) = function.get("name").and_then(Value::as_str) else {
            return Err(error(
                &format!("{at_function}/name"),
                "a tool needs a name (a string)",
            ));
        };
        if name.is_empty() || out.iter().any(|t| t.name == name) {
            return Err(error(
                &format!("{at_function}/name"),
                format!("tool names must be non-empty and distinct ({name:?})"),
            ));
        }
        let parameters = match function.get("parameters") {
            None | Some(Value::Null) => json!({"type": "object", "properties": {}}),
            Some(p @ (Value::Object(_) | Value::Bool(_))) => p.clone(),
            Some(_) => {
                return Err(error(
                    &format!("{at_function}/parameters"),
                    "must be a JSON Schema (an object)",
                ))
            }
        };
        out.push(Tool {
            name: name.to_string(),
            parameters,
        });
    }
    Ok(out)
}

/// Compiles each tool's `parameters` on its own (as the calls' arguments are:
/// `options` should be strict), so that a schema that cannot be enforced is an
/// error at its place in `definitions` (the `tools` array as sent):
/// `/tools/1/function/parameters/properties/when: unsupported keyword ...`.
pub fn check_parameters(
    definitions: &Value,
    tools: &[Tool],
    options: &super::json_schema::JsonSchemaOptions,
) -> Result<(), FrontendError> {
    for (i, tool) in tools.iter().enumerate() {
        let Err(e) = super::json_schema::compile_schema(&tool.parameters, options) else {
            continue;
        };
        let base = match definitions.pointer(&format!("/{i}/function")) {
            Some(_) => format!("/tools/{i}/function/parameters"),
            None => format!("/tools/{i}/parameters"),
        };
        let inner = e.pointer().unwrap_or_default();
        return Err(error(&format!("{base}{inner}"), e.to_string()));
    }
    Ok(())
}

/// Reads OpenAI's `tool_choice` (`"none"`, `"auto"`, `"required"`, or
/// `{"type": "function", "function": {"name": ...}}`); absent is `auto`.
pub fn read_tool_choice(
    choice: Option<&Value>,
    tools: &[Tool],
) -> Result<ToolChoice, FrontendError> {
    let choice = match choice {
        None | Some(Value::Null) => return Ok(ToolChoice::Auto),
        Some(c) => c,
    };
    match choice {
        Value::String(s) => match s.as_str() {
            "none" => Ok(ToolChoice::None),
            "auto" => Ok(ToolChoice::Auto),
            "required" => Ok(ToolChoice::Required),
            other => Err(error(
                "/tool_choice",
                format!("unknown tool_choice {other:?} (none, auto, required, or a function)"),
            )),
        },
        Value::Object(_) => {
            let Some(name) = choice
                .pointer("/function/name")
                .or_else(|| choice.get("name"))
                .and_then(Value::as_str)
            else {
                return Err(error(
                    "/tool_choice/function/name",
                    "a named tool choice needs the function's name",
                ));
            };
            if !tools.iter().any(|t| t.name == name) {
                return Err(error(
                    "/tool_choice/function/name",
                    format!("no tool named {name:?} in `tools`"),
                ));
            }
            Ok(ToolChoice::Function(name.to_string()))
        }
        _ => Err(error("/tool_choice", "must be a string or an object")),
    }
}

/// How a format lays its calls out after the trigger.
enum Layout {
    /// Each call is a tag that begins with the trigger (one per tool), `gap`
    /// between calls.
    Calls { tags: Vec<Value>, gap: Value },
    /// The trigger opens one block: `call` (one of the tools' calls), then more
    /// after `separator` when calls are parallel, then `close`. A block that
    /// `ends_reply` is the last thing in it (Mistral's).
    Block {
        open: String,
        call: Value,
        separator: Value,
        close: String,
        ends_reply: bool,
    },
}

/// The structural tag that constrains a reply of `format` to `tools` as
/// `choice` and `parallel` say.
pub fn structural_tag(
    format: ToolCallFormat,
    tools: &[Tool],
    choice: &ToolChoice,
    parallel: bool,
) -> Result<Value, FrontendError> {
    let trigger = format.trigger();
    // A format that writes one call object has one call per turn.
    let parallel = parallel && format.list_shape().is_none_or(|shape| shape.list);
    let chosen: Vec<&Tool> = match choice {
        ToolChoice::Function(name) => tools.iter().filter(|t| &t.name == name).collect(),
        _ => tools.iter().collect(),
    };
    // Formats that frame the whole reply (its text too) build their own.
    if matches!(format, ToolCallFormat::Harmony | ToolCallFormat::KimiK3) {
        if chosen.is_empty() && !matches!(choice, ToolChoice::None | ToolChoice::Auto) {
            return Err(error(
                "/tools",
                "tool_choice asks for a call, but there are no tools",
            ));
        }
        let format = match format {
            ToolCallFormat::Harmony => harmony::format(&chosen, choice),
            _ => kimi_k3::format(&chosen, choice, parallel),
        };
        return Ok(json!({"type": "structural_tag", "format": format}));
    }
    let markers = format.call_markers();
    let free = json!({"type": "any_text", "excludes": markers});
    if let ToolChoice::None = choice {
        return Ok(json!({"type": "structural_tag", "format": free}));
    }
    if chosen.is_empty() {
        return match choice {
            ToolChoice::Auto => Ok(json!({"type": "structural_tag", "format": free})),
            _ => Err(error(
                "/tools",
                "tool_choice asks for a call, but there are no tools",
            )),
        };
    }
    let lead_in = match format.xml_shape().map(|shape| shape.lead_in) {
        Some(lead) if !lead.is_empty() => json!({"type": "optional", "content": text(lead)}),
        _ => text(""),
    };
    let format_tag = match layout(format, &chosen) {
        // Free text around the calls; every trigger starts one.
        Layout::Calls { tags, .. } if *choice == ToolChoice::Auto => json!({
            "type": "triggered_tags",
            "triggers": [trigger],
            "tags": tags,
            "stop_after_first": !parallel,
            "excludes": markers,
        }),
        Layout::Calls { tags, gap } => seq(vec![lead_in, repeated(one_of(tags), gap, parallel)]),
        Layout::Block {
            open,
            call,
            separator,
            close,
            ends_reply,
        } => {
            let calls = repeated(call, separator, parallel);
            match choice {
                ToolChoice::Auto => json!({
                    "type": "triggered_tags",
                    "triggers": [trigger],
                    "tags": [{"type": "tag", "begin": open, "content": calls, "end": close}],
                    "stop_after_first": ends_reply || !parallel,
                    "excludes": markers,
                }),
                // A list's tag may be followed by one newline (Nemotron Nano 2
                // ends its turn so), never by text.
                _ => {
                    let newline = json!({"type": "optional", "content": text("\n")});
                    let after = match format.list_shape() {
                        Some(_) => newline,
                        None => text(""),
                    };
                    seq(vec![lead_in, text(&open), calls, text(&close), after])
                }
            }
        }
    };
    Ok(json!({"type": "structural_tag", "format": format_tag}))
}

/// The calls of `format` to the `chosen` tools, their arguments following each
/// tool's `parameters` (names and keys spelled as the templates render them:
/// `json.dumps`).
fn layout(format: ToolCallFormat, chosen: &[&Tool]) -> Layout {
    let arguments = |tool: &Tool| json!({"type": "json_schema", "json_schema": tool.parameters});
    if let Some(shape) = format.xml_shape() {
        let call = |tool: &Tool| {
            json!({
                "type": "tag",
                "begin": shape.call_begin(&tool.name),
                // Parameters in the order the model writes them (models
                // reorder them; each still at most once).
                "content": {"type": "json_schema", "json_schema": tool.parameters,
                            "style": shape.style.name(), "any_order": true},
                "end": shape.ends,
            })
        };
        let calls: Vec<Value> = chosen.iter().map(|t| call(t)).collect();
        if shape.calls_share_a_block() {
            return Layout::Block {
                open: shape.block_open(),
                call: one_of(calls),
                separator: text(""),
                close: shape.wrapper.1.to_string(),
                ends_reply: false,
            };
        }
        let gap = json!({"type": "optional", "content": text("\n")});
        return Layout::Calls { tags: calls, gap };
    }
    if let Some(shape) = format.json_shape() {
        let call = |t: &Tool| {
            let head = if shape.indexed {
                // Kimi numbers the calls itself.
                vec![
                    text(&format!(
                        "{}{}{}:",
                        shape.call_open, shape.name_prefix, t.name
                    )),
                    json!({"type": "regex", "pattern": "[0-9]{1,4}"}),
                    text(shape.arguments_open),
                ]
            } else {
                vec![text(&shape.head(&t.name, 0))]
            };
            let close = one_of(shape.arguments_close.iter().map(|c| text(c)).collect());
            seq([head, vec![arguments(t), close, text(shape.call_close)]].concat())
        };
        return Layout::Block {
            open: shape.block.0.to_string(),
            call: one_of(chosen.iter().map(|t| call(t)).collect()),
            separator: text(""),
            close: shape.block.1.to_string(),
            ends_reply: false,
        };
    }
    if let Some(shape) = format.list_shape() {
        let item = |t: &Tool| {
            seq(vec![
                text(&named_list::item_head(&t.name)),
                arguments(t),
                text("}"),
            ])
        };
        let (open, close) = shape.frame();
        return Layout::Block {
            open,
            call: one_of(chosen.iter().map(|t| item(t)).collect()),
            separator: text(", "),
            close,
            // One object ends the reply: the turn holds one call.
            ends_reply: !shape.list,
        };
    }
    let quoted = |tool: &Tool| serde_json::to_string(&tool.name).expect("a string");
    let id = json!({"type": "regex", "pattern": "[a-zA-Z0-9]{9}"});
    let open = format.trigger().to_string();
    match format {
        ToolCallFormat::MistralNemo => {
            let item = one_of(
                chosen
                    .iter()
                    .map(|t| {
                        seq(vec![
                            text(&format!("{{\"name\": {}, \"arguments\": ", quoted(t))),
                            arguments(t),
                            text(", \"id\": \""),
                            id.clone(),
                            text("\"}"),
                        ])
                    })
                    .collect(),
            );
            // One JSON array: parallel calls are its items.
            Layout::Block {
                open: open + "[",
                call: item,
                separator: text(", "),
                close: "]".to_string(),
                ends_reply: true,
            }
        }
        ToolCallFormat::MistralArgs | ToolCallFormat::MistralCallId => {
            let call = one_of(
                chosen
                    .iter()
                    .map(|t| {
                        let mut parts = vec![text(&t.name)];
                        if format == ToolCallFormat::MistralCallId {
                            parts.extend([text("[CALL_ID]"), id.clone()]);
                        }
                        parts.extend([text("[ARGS]"), arguments(t)]);
                        seq(parts)
                    })
                    .collect(),
            );
            Layout::Block {
                separator: text(&open),
                open,
                call,
                close: String::new(),
                ends_reply: true,
            }
        }
        ToolCallFormat::Pythonic => {
            let call = one_of(
                chosen
                    .iter()
                    .map(|t| {
                        seq(vec![
                            text(&format!("{}(", t.name)),
                            json!({"type": "json_schema", "json_schema": t.parameters,
                                   "style": "python", "any_order": true}),
                            text(")"),
                        ])
                    })
                    .collect(),
            );
            Layout::Block {
                open: format!("{}[", pythonic::BLOCK.0),
                call,
                separator: text(", "),
                close: format!("]{}", pythonic::BLOCK.1),
                ends_reply: false,
            }
        }
        ToolCallFormat::Cohere => {
            let action = one_of(
                chosen
                    .iter()
                    .map(|t| {
                        let (open, middle) = cohere::action_head(&t.name);
                        seq(vec![
                            text(open),
                            json!({"type": "regex", "pattern": "[0-9]{1,4}"}),
                            text(&middle),
                            arguments(t),
                            text("}"),
                        ])
                    })
                    .collect(),
            );
            Layout::Block {
                open: cohere::LIST.0.to_string(),
                call: action,
                separator: text(cohere::LIST.1),
                close: cohere::LIST.2.to_string(),
                ends_reply: true,
            }
        }
        ToolCallFormat::Gemma4 => Layout::Calls {
            tags: chosen
                .iter()
                .map(|t| {
                    json!({
                        "type": "tag",
                        "begin": format!("{}{}", gemma::CALL.0, t.name),
                        "content": {"type": "json_schema", "json_schema": t.parameters,
                                    "style": "gemma", "any_order": true},
                        "end": gemma::CALL.1,
                    })
                })
                .collect(),
            gap: text(""),
        },
        ToolCallFormat::Llama3Json => Layout::Calls {
            tags: chosen
                .iter()
                .map(|t| {
                    json!({
                        "type": "tag",
                        "begin": format!("{{\"name\": {}, \"parameters\": ", quoted(t)),
                        "content": arguments(t),
                        "end": "}",
                    })
                })
                .collect(),
            gap: json!({"type": "optional", "content": text("\n")}),
        },
        _ => Layout::Calls {
            tags: chosen
                .iter()
                .map(|t| {
                    json!({
                        "type": "tag",
                        "begin": hermes_head(&t.name),
                        "content": arguments(t),
                        "end": ["}\n</tool_call>", "}</tool_call>"],
                    })
                })
                .collect(),
            gap: json!({"type": "optional", "content": text("\n")}),
        },
    }
}
