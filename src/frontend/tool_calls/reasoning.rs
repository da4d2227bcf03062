//! A reasoning span before the reply: `<think>...</think>`, `[THINK]...[/THINK]`,
//! Gemma 4's `<|channel>thought...<channel|>`,
//! `<seed:think>...</seed:think>`. Its text is free (a model may think about a
//! call without making it, or write the grammar's delimiters while it thinks);
//! the constrained part starts after its close and any whitespace. So a
//! constraint never reaches into the reasoning.
//!
//! The span goes in front of a structural tag ([`with_reasoning`]) or of any
//! grammar ([`grammar_with_reasoning`]); [`split_reasoning`] reads it back off
//! a reply. Its token budget is the decode loop's (`decode::reasoning`): the
//! grammar accepts the close anywhere in the span, so forcing it is always
//! allowed.

use serde_json::{json, Value};

use crate::frontend::json_schema::PatternCache;
use crate::frontend::structural_tag::{self, StructuralTagOptions};
use crate::grammar::{Expr, Grammar, Rule, RuleId};

/// A reasoning span and who opens it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reasoning {
    /// What opens the span, when the model writes it; `None` when the prompt
    /// already opened it (DeepSeek R1's template ends with `<think>\n`).
    pub open: Option<String>,
    pub close: String,
    /// The model may skip the span (only where it writes `open` itself).
    pub optional: bool,
    /// The model may skip its reasoning by writing `close` alone (MiniMax-M3's
    /// adaptive thinking: `</mm:think>` then the reply); only where it writes
    /// `open` itself.
    pub close_alone: bool,
}

impl Reasoning {
    /// The span a chat template's model writes (`[THINK]` for Mistral's
    /// reasoning models, `<seed:think>` for Seed-OSS, `<mm:think>` for
    /// MiniMax-M3, `<|inner_prefix|>` for Apertus, `<|channel>thought` up to
    /// `<channel|>` for Gemma 4, `<|START_THINKING|>` for Cohere, an analysis
    /// message for gpt-oss, the thinking block for Kimi K3, up to `[BEGIN FINAL
    /// RESPONSE]` for Apriel 1.6, else
    /// `<think>`), opened by
    /// the model unless `prompt` (the rendered prompt) already ends with it.
    pub fn for_template(template: Option<&str>, prompt: &str) -> Reasoning {
        let template = template.unwrap_or_default();
        let (open, close) = if template.contains("[THINK]") {
            ("[THINK]", "[/THINK]")
        } else if template.contains("<seed:think>") {
            ("<seed:think>", "</seed:think>")
        } else if template.contains("<mm:think>") {
            ("<mm:think>", "</mm:think>")
        } else if template.contains("<|inner_prefix|>") {
            // Apertus's inner monologue.
            ("<|inner_prefix|>", "<|inner_suffix|>")
        } else if template.contains("<|START_THINKING|>") {
            ("<|START_THINKING|>", "<|END_THINKING|>")
        } else if template.contains("<|open|>") && template.contains("open_tag('think')") {
            // Kimi K3's thinking block, closed where the response block opens.
            super::kimi_k3::REASONING
        } else if template.contains("[BEGIN FINAL RESPONSE]") {
            // Apriel 1.6's prompt opens its reasoning with this line.
            ("Here are my reasoning steps:", "[BEGIN FINAL RESPONSE]")
        } else if template.contains("to=self") && template.contains("<atem:") {
            // Muse Glimmer's message to itself, up to the next message.
            super::muse::REASONING
        } else if template.contains("<|channel|>analysis") {
            // gpt-oss's analysis message, up to the next message.
            super::harmony::REASONING
        } else if template.contains("<|channel>") {
            // Gemma 4's thought channel.
            ("<|channel>thought", "<channel|>")
        } else {
            ("<think>", "</think>")
        };
        let opened = prompt.trim_end().ends_with(open);
        Reasoning {
            open: (!opened).then(|| open.to_string()),
            close: close.to_string(),
            optional: false,
            // MiniMax-M3's template, thinking adaptive (its default), opens
            // nothing: the model thinks, or closes at once.
            close_alone: close == "</mm:think>",
        }
    }
}

/// `tag` (a structural tag) with `reasoning` before its format.
pub fn with_reasoning(tag: &Value, reasoning: &Reasoning) -> Value {
    let span = json!({
        "type": "tag",
        "begin": reasoning.open.clone().unwrap_or_default(),
        "content": {"type": "any_text"},
        "end": reasoning.close,
    });
    let span = if reasoning.close_alone && reasoning.open.is_some() {
        json!({"type": "or", "elements": [span,
            {"type": "const_string", "value": reasoning.close}]})
    } else {
        span
    };
    let span = if reasoning.optional && reasoning.open.is_some() {
        json!({"type": "optional", "content": span})
    } else {
        span
    };
    let gap = json!({"type": "regex", "pattern": "[ \\t\\r\\n]*"});
    json!({"type": "structural_tag", "format": {"type": "sequence",
        "elements": [span, gap, tag["format"].clone()]}})
}

/// `answer` (any grammar) with `reasoning` before it.
pub fn grammar_with_reasoning(
    answer: Grammar,
    reasoning: &Reasoning,
    delimiter_tokens: &[(u32, String)],
) -> Grammar {
    let head = with_reasoning(
        &json!({"format": {"type": "const_string", "value": ""}}),
        reasoning,
    );
    let options = StructuralTagOptions {
        delimiter_tokens: delimiter_tokens.to_vec(),
        ..StructuralTagOptions::default()
    };
    let head = structural_tag::parse(&head, &options, &PatternCache::default())
        .expect("a reasoning span is a valid structural tag");
    let mut rules = vec![Rule {
        name: "reasoning_then_answer".into(),
        expr: Expr::Empty,
        location: None,
    }];
    let head = head.splice_into("reasoning/", None, &mut rules);
    let answer = answer.splice_into("", None, &mut rules);
    rules[0].expr = Expr::Seq(vec![Expr::Ref(head), Expr::Ref(answer)]);
    Grammar {
        rules,
        root: RuleId(0),
    }
}

/// The reasoning at the start of `text` and the reply after it (whitespace
/// trimmed off both). A span cut short is all reasoning; text that does not
/// open the span (when the model opens it) has none.
pub fn split_reasoning<'a>(text: &'a str, reasoning: &Reasoning) -> (Option<&'a str>, &'a str) {
    let inside = match &reasoning.open {
        Some(open) => match text.trim_start().strip_prefix(open.as_str()) {
            Some(inside) => inside,
            None => {
                // The close alone: no reasoning, the reply after it.
                let skipped = text.trim_start().strip_prefix(reasoning.close.as_str());
                return match skipped.filter(|_| reasoning.close_alone) {
                    Some(reply) => (None, reply.trim_start()),
                    None => (None, text),
                };
            }
        },
        None => text,
    };
    match inside.find(&reasoning.close) {
        Some(end) => (
            Some(inside[..end].trim()),
            inside[end + reasoning.close.len()..].trim_start(),
        ),
        None => (Some(inside.trim()), ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::automaton::{CompileOptions, CompiledGrammar};
    use crate::matcher::Matcher;
    use std::sync::Arc;

    fn accepts(grammar: &Grammar, text: &str) -> bool {
        let compiled = CompiledGrammar::compile(grammar, &CompileOptions::default()).unwrap();
        let mut m = Matcher::new(Arc::new(compiled));
        m.consume_bytes(text.as_bytes()).is_ok() && m.is_accepting()
    }

    #[test]
    fn any_grammar_takes_a_span_first() {
        let answer = crate::frontend::regex::parse("[0-9]+", &Default::default()).unwrap();
        let span = Reasoning {
            open: Some("<think>".into()),
            close: "</think>".into(),
            optional: false,
            close_alone: false,
        };
        let grammar = grammar_with_reasoning(answer, &span, &[]);
        assert!(accepts(&grammar, "<think>1 + 1 is not [0-9]</think>\n\n2"));
        assert!(!accepts(&grammar, "2"), "the span is not optional here");
        assert!(!accepts(&grammar, "<think>x</think> two"));
    }

    #[test]
    fn spans_read_back() {
        let model_opens =
            Reasoning::for_template(Some("{{ '<think>' }}"), "<|im_start|>assistant\n");
        assert_eq!(model_opens.open.as_deref(), Some("<think>"));
        assert_eq!(
            split_reasoning("<think> a\n</think>\n\nanswer", &model_opens),
            (Some("a"), "answer")
        );
        assert_eq!(split_reasoning("answer", &model_opens), (None, "answer"));
        let prompt_opens = Reasoning::for_template(None, "assistant\n<think>\n");
        assert_eq!(prompt_opens.open, None);
        assert_eq!(
            split_reasoning("cut sh", &prompt_opens),
            (Some("cut sh"), "")
        );
        let mistral = Reasoning::for_template(Some("[THINK]"), "");
        assert_eq!(mistral.close, "[/THINK]");
        assert!(!mistral.close_alone);
        let apertus = Reasoning::for_template(
            Some("{%- set inner_token = '<|inner_prefix|>' -%}"),
            "<|assistant_start|>",
        );
        assert_eq!(
            split_reasoning("<|inner_prefix|>hm<|inner_suffix|>Hi", &apertus),
            (Some("hm"), "Hi")
        );
    }

    #[test]
    fn minimax_m3_may_close_at_once() {
        let template = "{%- set think_begin_token = '<mm:think>' -%}";
        let span = Reasoning::for_template(Some(template), "<]~b]ai\n");
        assert!(span.close_alone);
        let answer = crate::frontend::regex::parse("[0-9]+", &Default::default()).unwrap();
        let grammar = grammar_with_reasoning(answer, &span, &[]);
        assert!(accepts(&grammar, "<mm:think>x</mm:think>\n2"));
        assert!(accepts(&grammar, "</mm:think>2"));
        assert!(!accepts(&grammar, "2"), "the span or its close comes first");
        assert!(!accepts(&grammar, "</mm:think>x</mm:think>2"));
        assert_eq!(split_reasoning("</mm:think>\n2", &span), (None, "2"));
        assert_eq!(
            split_reasoning("<mm:think>x</mm:think>2", &span),
            (Some("x"), "2")
        );
    }
}
