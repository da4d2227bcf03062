//! Offering tools to a model: through its chat template, which renders `tools`
//! and the earlier calls itself when it knows a format stencil builds, or in a
//! system message that lists the tools and shows the format the reply will be
//! constrained to (a template without tools, like the default model's).

use serde_json::{json, Value};

use super::{call_text, ToolCallFormat};

/// How a model takes tools: in its own format, rendered by its chat template
/// (`native`), or described in a system message ([`tool_system_prompt`]).
#[derive(Debug, Clone, Copy)]
pub struct ToolPrompting {
    pub format: ToolCallFormat,
    /// The chat template renders `tools` and tool messages itself.
    pub native: bool,
}

impl ToolPrompting {
    /// From the chat template (its own format when it has one stencil knows),
    /// or `forced` when the server was told.
    pub fn for_template(template: Option<&str>, forced: Option<ToolCallFormat>) -> ToolPrompting {
        let detected = template.and_then(ToolCallFormat::detect);
        match (forced, detected) {
            (Some(format), Some(d)) => ToolPrompting {
                format,
                native: format == d,
            },
            (Some(format), None) => ToolPrompting {
                format,
                native: false,
            },
            (None, Some(format)) => ToolPrompting {
                format,
                native: true,
            },
            (None, None) => ToolPrompting {
                format: ToolCallFormat::Hermes,
                native: false,
            },
        }
    }
}

/// The system text that offers tools to a model whose template does not.
pub fn tool_system_prompt(format: ToolCallFormat, definitions: &Value) -> String {
    let mut listed = String::new();
    if let Some(items) = definitions.as_array() {
        for t in items {
            listed.push_str(&t.to_string());
            listed.push('\n');
        }
    }
    if format != ToolCallFormat::Hermes {
        let example = call_text(
            format,
            "example_function_name",
            &json!({"example_parameter": "value"}),
            "a1b2c3d4e",
        );
        return format!(
            "You are a function calling AI model. You may call one or more functions to assist \
             with the user query. Here are the available tools:\n<tools>\n{listed}</tools>\nTo \
             call a function, write the call in this format:\n{example}"
        );
    }
    format!(
        "You are a function calling AI model. You may call one or more functions to assist with \
         the user query. Here are the available tools:\n<tools>\n{listed}</tools>\nFor each \
         function call, return a JSON object with the function name and arguments within \
         <tool_call></tool_call> XML tags:\n<tool_call>\n{{\"name\": <function-name>, \
         \"arguments\": <args-json-object>}}\n</tool_call>"
    )
}
