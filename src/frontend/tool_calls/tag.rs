//! Writing calls: the structural tag that constrains a reply of a format to the
//! request's tools, `tool_choice` and `parallel_tool_calls`, and a call's text as
//! that tag writes it (for earlier calls written back into a prompt).
//!
//! Most formats fit one of two layouts ([`Layout`]): a tag per call that begins
//! with the trigger, or a block the trigger opens holding the calls. Formats that
//! frame the whole reply (harmony, Kimi K3) build their own.

use serde_json::{json, Value};

use super::{
    cohere, error, functionary, gemma, harmony, kimi_k3, muse, named_list, one_of, pythonic,
    repeated, seq, text, FrontendError, Tool, ToolCallFormat, ToolChoice,
};

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
        let text = shape.call_text(name, arguments);
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
        ToolCallFormat::FunctionaryV32 => functionary::call_text(name, arguments),
        ToolCallFormat::MuseGlimmer => muse::call_text(name, arguments),
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
    let frames_reply = matches!(
        format,
        ToolCallFormat::Harmony
            | ToolCallFormat::KimiK3
            | ToolCallFormat::FunctionaryV32
            | ToolCallFormat::MuseGlimmer
    );
    if frames_reply {
        if chosen.is_empty() && !matches!(choice, ToolChoice::None | ToolChoice::Auto) {
            return Err(error(
                "/tools",
                "tool_choice asks for a call, but there are no tools",
            ));
        }
        let format = match format {
            ToolCallFormat::Harmony => harmony::format(&chosen, choice),
            ToolCallFormat::FunctionaryV32 => functionary::format(&chosen, choice, parallel),
            ToolCallFormat::MuseGlimmer => muse::format(&chosen, choice, parallel),
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
    if let Some(shape) = format.json_shape().filter(|s| s.block.0.is_empty()) {
        // Calls that stand alone (functionary's `<function=f>`): each a tag the
        // trigger begins.
        let call = |t: &Tool| {
            json!({"type": "tag", "begin": shape.head(&t.name, 0), "content": arguments(t),
                   "end": shape.call_close})
        };
        let gap = json!({"type": "optional", "content": text("\n")});
        return Layout::Calls {
            tags: chosen.iter().map(|t| call(t)).collect(),
            gap,
        };
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
                text(&shape.item_head(&t.name)),
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
    named_layout(format, chosen)
}

/// A tool's arguments: its parameters' schema, as JSON.
fn arguments(tool: &Tool) -> Value {
    json!({"type": "json_schema", "json_schema": tool.parameters})
}

/// The layouts of the formats no shared shape describes (Mistral's, pythonic,
/// Cohere's, Gemma 4's, Llama 3's JSON, and Hermes's `<tool_call>` otherwise).
fn named_layout(format: ToolCallFormat, chosen: &[&Tool]) -> Layout {
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
