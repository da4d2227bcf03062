//! Chat templates: the model's own Jinja template (GGUF `tokenizer.chat_template` or
//! `tokenizer_config.json`), rendered with `minijinja` as other Rust inference
//! servers do. Python string methods used by real templates (`.strip()`,
//! `.startswith()`...) come from `minijinja-contrib`'s pycompat layer.

use minijinja::value::Serde;
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
    let mut env = Environment::new();
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function(
        "raise_exception",
        |message: String| -> Result<String, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, message))
        },
    );
    let to_error = |e: Error| DecodeError::Template(format!("{e:#}"));
    env.add_template("chat", template).map_err(to_error)?;
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
}
