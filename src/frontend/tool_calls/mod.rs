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
//! The request is read in `request.rs` (errors at their JSON pointer), the tag
//! written in `tag.rs`, a reply read back in `parse.rs` (whole) and
//! `progress.rs` (streamed); a family's own reader and writer has a file of its
//! own.
//!
//! Families so far ([`ToolCallFormat`]): Hermes (`<tool_call>` JSON) and Llama
//! 3.x's bare JSON; the XML ones whose arguments are tagged parameters
//! (Qwen3-Coder's `<function=f>`, GLM's `<tool_call>f<arg_key>`, Seed-OSS,
//! MiniMax-M2 and DeepSeek's DSML `<invoke name="f">`: one `CallShape` each, one
//! reader for all, `xml.rs`; MiniMax-M3's values tagged at every depth,
//! `minimax_m3.rs`); those whose JSON arguments follow the name between
//! delimiters (DeepSeek V3.1 and R1, Kimi K2, functionary v3.1: one `JsonCallShape` each,
//! `json_calls.rs`); Mistral's three `[TOOL_CALLS]` shapes; LFM2's Python list of
//! calls (`pythonic.rs`) and Gemma 4's calls in its own notation (`gemma.rs`).
//! Cohere's list of actions (`cohere.rs`); gpt-oss's harmony messages, whose
//! channels carry reasoning, answer and calls (`harmony.rs`); Kimi K3's tagged
//! blocks (`kimi_k3.rs`); a JSON list of named calls between tags (Nemotron
//! Nano 2, Apriel, Apertus, Command R+'s fenced list after `Action:`:
//! `named_list.rs`); MiniCPM 5's `<function name="f">` (an XML shape);
//! functionary v3.2's messages to a recipient (`functionary.rs`); Muse
//! Glimmer's messages, a call an `<atem:function_calls>` block (`muse.rs`). A
//! reasoning span before the reply ([`Reasoning`], [`with_reasoning`],
//! [`grammar_with_reasoning`]) is free text up to its close.
//!
//! Delimiters are written as text; where the vocabulary has a special token
//! with a delimiter's content, the structural tag takes that token too
//! (`StructuralTagOptions::delimiter_tokens`), and the reader sees it as its
//! content ([`crate::vocab::Vocabulary::shown_bytes`]).

mod cohere;
mod functionary;
mod gemma;
mod harmony;
mod json_calls;
mod kimi_k3;
mod literals;
mod minimax_m3;
mod muse;
mod named_list;
mod parse;
mod progress;
mod prompt;
mod pythonic;
mod reasoning;
mod request;
mod tag;
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
pub use request::{check_parameters, read_tool_choice, read_tools, Tool, ToolChoice};
pub use tag::{call_text, structural_tag};

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
    /// `]<]minimax[>[<tool_call>\n]<]minimax[>[<invoke name="f">]<]minimax[>[<a>1]<]minimax[>[</a>]<]minimax[>[</invoke>\n]<]minimax[>[</tool_call>`:
    /// MiniMax-M3, every value tagged at every depth (`minimax_m3_xml`).
    MiniMaxM3,
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
    /// `<function=f>{...}</function>`, once per call: functionary v3.1.
    FunctionaryV31,
    /// `<|tools_prefix|>[{"f": {...}}]<|tools_suffix|>`: Apertus (the name is each
    /// call's key).
    Apertus,
    /// `all\nTEXT>>>f\n{...}`: functionary v3.2's messages, each to a recipient
    /// (`all` the user, else a function).
    FunctionaryV32,
    /// ``Action:\n```json\n[{"tool_name": "f", "parameters": {...}}]\n``` ``: Command R+.
    CommandRPlus,
    /// ` to=f<|message|><atem:function_calls>\n<atem:invoke name="f">\n<atem:parameter name="a">1</atem:parameter>\n</atem:invoke>\n</atem:function_calls>`:
    /// Muse Glimmer's messages, `to=self` the reasoning, `to=user` the answer.
    MuseGlimmer,
}

impl ToolCallFormat {
    /// The format a chat template renders tool calls in, when it is one of
    /// these (read from the template's text).
    pub fn detect(template: &str) -> Option<ToolCallFormat> {
        if template.contains(crate::frontend::json_schema::MINIMAX_M3_TAG) {
            return Some(ToolCallFormat::MiniMaxM3);
        }
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
        // Its prompt spells the format out; it is a Llama 3.1 template too.
        if template.contains("start_tag => `<function`") {
            return Some(ToolCallFormat::FunctionaryV31);
        }
        if template.contains(">>>${recipient}") {
            return Some(ToolCallFormat::FunctionaryV32);
        }
        if template.contains("<atem:function_calls>") {
            return Some(ToolCallFormat::MuseGlimmer);
        }
        if template.contains("directly-answer") && template.contains("Action:") {
            return Some(ToolCallFormat::CommandRPlus);
        }
        if template.contains("<|tools_prefix|>") {
            return Some(ToolCallFormat::Apertus);
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
    pub const ALL: [ToolCallFormat; 31] = [
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
        ToolCallFormat::FunctionaryV31,
        ToolCallFormat::Apertus,
        ToolCallFormat::FunctionaryV32,
        ToolCallFormat::MiniMaxM3,
        ToolCallFormat::CommandRPlus,
        ToolCallFormat::MuseGlimmer,
    ];

    /// Each format's name, as [`ToolCallFormat::by_name`] reads it.
    pub const NAMES: [&'static str; 31] = [
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
        "functionary-v3.1",
        "apertus",
        "functionary-v3.2",
        "minimax-m3",
        "command-r-plus",
        "muse-glimmer",
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
            "functionary-v3.1" => Some(ToolCallFormat::FunctionaryV31),
            "apertus" => Some(ToolCallFormat::Apertus),
            "functionary-v3.2" => Some(ToolCallFormat::FunctionaryV32),
            "minimax-m3" => Some(ToolCallFormat::MiniMaxM3),
            "command-r-plus" | "command-r" => Some(ToolCallFormat::CommandRPlus),
            "muse-glimmer" => Some(ToolCallFormat::MuseGlimmer),
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
            ToolCallFormat::FunctionaryV32 => functionary::TRIGGER,
            ToolCallFormat::MuseGlimmer => muse::TRIGGER,
            ToolCallFormat::MiniCpm => xml::MINICPM.open,
            ToolCallFormat::DeepSeekV3 | ToolCallFormat::DeepSeekR1 | ToolCallFormat::KimiK2 => {
                self.json_shape().expect("a JSON format").block.0
            }
            ToolCallFormat::FunctionaryV31 => json_calls::FUNCTIONARY_V31.call_open,
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
            ToolCallFormat::Apertus => Some(&named_list::APERTUS),
            ToolCallFormat::CommandRPlus => Some(&named_list::COMMAND_R_PLUS),
            _ => None,
        }
    }

    /// How the format frames calls whose arguments are JSON after the name.
    pub(crate) fn json_shape(self) -> Option<&'static json_calls::JsonCallShape> {
        match self {
            ToolCallFormat::DeepSeekV3 => Some(&json_calls::DEEPSEEK_V3),
            ToolCallFormat::DeepSeekR1 => Some(&json_calls::DEEPSEEK_R1),
            ToolCallFormat::KimiK2 => Some(&json_calls::KIMI_K2),
            ToolCallFormat::FunctionaryV31 => Some(&json_calls::FUNCTIONARY_V31),
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
            ToolCallFormat::MiniMaxM3 => Some(&xml::MINIMAX_M3),
            ToolCallFormat::DeepSeekDsml => Some(&xml::DSML_FUNCTION_CALLS),
            ToolCallFormat::DeepSeekV4 => Some(&xml::DSML_TOOL_CALLS),
            ToolCallFormat::MiniCpm => Some(&xml::MINICPM),
            _ => None,
        }
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

fn error(pointer: &str, message: impl Into<String>) -> FrontendError {
    FrontendError::Document {
        pointer: pointer.into(),
        message: message.into(),
    }
}
