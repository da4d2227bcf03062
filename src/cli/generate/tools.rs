//! `generate --tools` and `--reasoning`: the tools file read and checked before
//! the model loads (errors name the file and the JSON pointer, or the flag),
//! the tool-call structural tag in the model's own format, the prompt that
//! offers the tools (through the chat template when it renders them, else in a
//! system message), the reasoning span in front of whatever grammar constrains
//! the reply, and the reply read back into content, reasoning and calls.

use serde_json::{json, Value};

use stencil::decode::{render_chat_json, Generator};
use stencil::frontend::structural_tag::{self, StructuralTagOptions};
use stencil::frontend::tool_calls::{
    self, grammar_with_reasoning, split_reasoning, Reasoning, Tool, ToolCallFormat, ToolChoice,
    ToolPrompting,
};
use stencil::grammar::Grammar;

use super::request::GenerateArgs;

/// The tools of a `generate` request, read.
pub(super) struct ToolRequest {
    origin: String,
    /// As the file has them (what the chat template renders).
    definitions: Value,
    tools: Vec<Tool>,
    choice: ToolChoice,
    parallel: bool,
    /// `--tool-format`, when given.
    forced: Option<ToolCallFormat>,
}

/// `--tools FILE` with `--tool-choice`, `--no-parallel-tool-calls` and
/// `--tool-format`, checked; `None` without `--tools`.
pub(super) fn read(args: &GenerateArgs) -> Result<Option<ToolRequest>, String> {
    let Some(path) = &args.tools else {
        return Ok(None);
    };
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {origin}: {e}"))?;
    let definitions: Value = serde_json::from_str(&text)
        .map_err(|e| format!("{origin}:{}:{}: not JSON: {e}", e.line(), e.column()))?;
    let tools = tool_calls::read_tools(&definitions).map_err(|e| format!("{origin}: {e}"))?;
    let choice = match args.tool_choice.as_str() {
        c @ ("auto" | "required" | "none") => json!(c),
        name => json!({"type": "function", "function": {"name": name}}),
    };
    let choice = tool_calls::read_tool_choice(Some(&choice), &tools)
        .map_err(|e| format!("--tool-choice: {e}"))?;
    let forced = match &args.tool_format {
        Some(name) => Some(ToolCallFormat::by_name(name).ok_or_else(|| {
            format!(
                "--tool-format: unknown format {name:?} (one of: {})",
                ToolCallFormat::NAMES.join(", ")
            )
        })?),
        None => None,
    };
    Ok(Some(ToolRequest {
        origin,
        definitions,
        tools,
        choice,
        parallel: !args.no_parallel_tool_calls,
        forced,
    }))
}

impl ToolRequest {
    /// How the model takes the tools: its template's format, or `--tool-format`.
    pub(super) fn prompting(&self, template: Option<&str>) -> ToolPrompting {
        ToolPrompting::for_template(template, self.forced)
    }

    /// The format a reply is constrained to before the model (and its
    /// template) is known: to check the tools' schemas early.
    pub(super) fn provisional_format(&self) -> ToolCallFormat {
        self.forced.unwrap_or(ToolCallFormat::Hermes)
    }

    /// The calls in `format` as a grammar; a schema that does not compile is
    /// an error naming the file and the JSON pointer of the schema's place.
    pub(super) fn grammar(
        &self,
        format: ToolCallFormat,
        options: &StructuralTagOptions,
    ) -> Result<Grammar, String> {
        let tag = tool_calls::structural_tag(format, &self.tools, &self.choice, self.parallel)
            .map_err(|e| format!("{}: {e}", self.origin))?;
        structural_tag::parse(&tag, options, &Default::default()).map_err(|e| {
            // A schema that does not compile: named at its place in the file.
            match tool_calls::check_parameters(&self.definitions, &self.tools, &options.json) {
                Err(located) => format!("{}: {located}", self.origin),
                Ok(()) => format!("{}: the {format:?} calls: {e}", self.origin),
            }
        })
    }

    /// The rendered prompt that offers the tools with the user's `text`.
    pub(super) fn prompt(
        &self,
        generator: &Generator,
        text: &str,
        prompting: ToolPrompting,
    ) -> Result<String, String> {
        let tokenizer = generator.tokenizer();
        let Some(template) = tokenizer.chat_template() else {
            let offer = tool_calls::tool_system_prompt(prompting.format, &self.definitions);
            return Ok(format!("{offer}\n{text}"));
        };
        let mut messages = vec![json!({"role": "user", "content": text})];
        let tools = if prompting.native {
            Some(&self.definitions)
        } else {
            let offer = tool_calls::tool_system_prompt(prompting.format, &self.definitions);
            messages.insert(0, json!({"role": "system", "content": offer}));
            None
        };
        render_chat_json(
            template,
            &Value::Array(messages),
            tools,
            tokenizer.bos().map(|b| b.1.as_str()),
            tokenizer.eos().map(|e| e.1.as_str()),
        )
        .map_err(|e| e.to_string())
    }

    pub(super) fn tools(&self) -> &[Tool] {
        &self.tools
    }
}

/// The reasoning span for `--reasoning`: the template's own, opened by the
/// model unless the rendered `prompt` already opened it.
pub(super) fn reasoning_span(generator: &Generator, prompt: &str) -> Reasoning {
    Reasoning::for_template(generator.tokenizer().chat_template(), prompt)
}

/// `grammar` with the reasoning span in front, when there is one.
pub(super) fn with_span(
    grammar: Grammar,
    span: Option<&Reasoning>,
    delimiter_tokens: &[(u32, String)],
) -> Grammar {
    match span {
        Some(span) => grammar_with_reasoning(grammar, span, delimiter_tokens),
        None => grammar,
    }
}

/// What `--output-json` adds for a reply with tools or reasoning: `content`,
/// `reasoning`, `tool_calls` (ids `call_0`, ... unless the model wrote them)
/// and the finish reason (`tool_calls` when the reply stopped with calls).
pub(super) fn reply_fields(
    text: &str,
    span: Option<&Reasoning>,
    tools: Option<(&ToolRequest, ToolCallFormat)>,
    stopped: bool,
) -> Value {
    let (reasoning, reply) = match span {
        Some(span) => split_reasoning(text, span),
        None => (None, text),
    };
    let mut fields = json!({"reasoning": reasoning});
    match tools {
        Some((request, format)) => {
            let parsed = tool_calls::parse_reply(format, reply, request.tools());
            let calls: Vec<Value> = parsed
                .calls
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    json!({"id": c.id.clone().unwrap_or_else(|| format!("call_{i}")),
                           "name": c.name, "arguments": c.arguments})
                })
                .collect();
            if stopped && !calls.is_empty() {
                fields["finish_reason"] = json!("tool_calls");
            }
            fields["content"] = json!(parsed.content);
            fields["tool_calls"] = Value::Array(calls);
            if !parsed.reasoning.is_empty() {
                // The format's own reasoning messages (harmony's analysis).
                let joined: Vec<&str> = reasoning
                    .into_iter()
                    .chain([parsed.reasoning.as_str()])
                    .collect();
                fields["reasoning"] = json!(joined.join("\n"));
            }
        }
        None => fields["content"] = json!(reply.trim()),
    }
    fields
}
