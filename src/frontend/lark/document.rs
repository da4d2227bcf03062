//! Grammars documents: llguidance's `{"grammars": [...]}`, several grammars in one
//! request, the first the start, the others reached by `@name`.
//!
//! ```json
//! {"grammars": [
//!   {"lark_grammar": "start: \"call \" @args"},
//!   {"name": "args", "json_schema": {"type": "array", "items": {"type": "integer"}}}
//! ]}
//! ```
//!
//! Each member is lowered on its own (a Lark text with its own `%ignore`, options
//! and line numbers, or a JSON Schema through the `%json` path with its
//! `x-guidance`), so a sub-grammar keeps its lexing as llguidance's separate
//! lexers do. The members are then spliced into one IR grammar and each `@name`
//! placeholder is linked to the named member's start. A reference names a member
//! by `name`, else by its index (`@1`). Errors inside a member say which member,
//! then the place in its own text.

use serde_json::Value;

use super::json;
use super::lower::Reference;
use super::{lower_text, LarkOptions, LarkReport, LarkWarning};
use crate::frontend::json_schema::{self, PatternCache};
use crate::frontend::FrontendError;
use crate::grammar::{Expr, Grammar, Location, Rule, RuleId};

type Result<T> = std::result::Result<T, FrontendError>;

/// Parses a grammars document (JSON text) into one grammar: member 0's start.
pub(crate) fn parse(
    text: &str,
    options: &LarkOptions,
    cache: &PatternCache,
) -> Result<(Grammar, LarkReport)> {
    let document: Value = serde_json::from_str(text).map_err(|e| FrontendError::Syntax {
        location: Location {
            line: e.line() as u32,
            column: e.column() as u32,
            offset: 0,
        },
        message: format!("failed to parse the grammars document (JSON): {e}"),
    })?;
    let members = members(&document)?;

    let mut rules: Vec<Rule> = Vec::new();
    let mut roots = Vec::with_capacity(members.len());
    let mut references: Vec<(usize, Reference)> = Vec::new();
    let mut report = LarkReport::default();
    for (index, member) in members.iter().enumerate() {
        let in_member = |error: FrontendError| FrontendError::InMember {
            member: member.label(index),
            error: Box::new(error),
        };
        // Member 0 keeps its rule names; the others are prefixed with their label.
        let prefix = if index == 0 {
            String::new()
        } else {
            format!("@{}/", member.name.clone().unwrap_or(index.to_string()))
        };
        let base = rules.len() as u32;
        match &member.body {
            Body::Lark(text) => {
                let lowered = lower_text(text, options, cache).map_err(in_member)?;
                roots.push(lowered.grammar.splice_into(&prefix, None, &mut rules));
                for reference in lowered.references {
                    let rule = RuleId(reference.rule.0 + base);
                    references.push((index, Reference { rule, ..reference }));
                }
                report.warnings.extend(lowered.report.warnings);
                report
                    .annotations
                    .extend(lowered.report.annotations.into_iter().map(|mut a| {
                        a.rule = format!("{prefix}{}", a.rule);
                        a
                    }));
            }
            Body::JsonSchema(schema) => {
                let (grammar, warnings) = json::options_for(&options.json, schema)
                    .and_then(|(options, schema)| {
                        json_schema::compile_schema_with(&schema, &options, cache)
                            .map_err(|e| e.to_string())
                    })
                    .map_err(|message| FrontendError::Document {
                        pointer: format!("/grammars/{index}/json_schema"),
                        message: format!("failed to compile JSON schema: {message}"),
                    })?;
                roots.push(grammar.splice_into(&prefix, None, &mut rules));
                report
                    .warnings
                    .extend(warnings.into_iter().map(|w| LarkWarning {
                        location: Location::default(),
                        message: format!("{}: {w}", member.label(index)),
                    }));
            }
        }
    }

    for (index, reference) in references {
        let target = members
            .iter()
            .position(|m| m.name.as_deref() == Some(reference.name.as_str()))
            .or_else(|| {
                reference
                    .name
                    .parse::<usize>()
                    .ok()
                    .filter(|&i| i < members.len())
            })
            .ok_or_else(|| FrontendError::InMember {
                member: members[index].label(index),
                error: Box::new(FrontendError::Syntax {
                    location: reference.location,
                    message: format!(
                        "no grammar named `{}` in the document (names: {})",
                        reference.name,
                        names(&members)
                    ),
                }),
            })?;
        rules[reference.rule.index()].expr = Expr::Ref(roots[target]);
    }

    let mut grammar = Grammar {
        rules,
        root: roots[0],
    };
    grammar.flatten_budget_bodies();
    grammar.validate()?;
    Ok((grammar, report))
}

/// One entry of `"grammars"`.
struct Member {
    name: Option<String>,
    body: Body,
}

enum Body {
    Lark(String),
    JsonSchema(Value),
}

impl Member {
    /// How errors name it: `grammars[1] (args)`.
    fn label(&self, index: usize) -> String {
        match &self.name {
            Some(name) => format!("grammars[{index}] ({name})"),
            None => format!("grammars[{index}]"),
        }
    }
}

fn names(members: &[Member]) -> String {
    let named: Vec<String> = members
        .iter()
        .filter_map(|m| m.name.as_ref().map(|n| format!("`{n}`")))
        .collect();
    if named.is_empty() {
        "none; members are also named by index".into()
    } else {
        named.join(", ")
    }
}

/// The members, each checked for shape; an unknown key is an error, never
/// ignored.
fn members(document: &Value) -> Result<Vec<Member>> {
    let fail = |pointer: &str, message: String| FrontendError::Document {
        pointer: if pointer.is_empty() {
            "the grammars document".into()
        } else {
            pointer.into()
        },
        message,
    };
    let Value::Object(top) = document else {
        return Err(fail("", "a grammars document is a JSON object".into()));
    };
    for (key, value) in top {
        match key.as_str() {
            "grammars" => {}
            "max_tokens" if value.is_null() => {}
            "max_tokens" => {
                return Err(fail(
                    "/max_tokens",
                    "a token budget for the whole output is not supported yet: set the generation's max tokens instead".into(),
                ))
            }
            _ => {
                return Err(fail(
                    "",
                    format!("unknown key `{key}` (known: grammars, max_tokens)"),
                ))
            }
        }
    }
    let Some(Value::Array(entries)) = top.get("grammars") else {
        return Err(fail("/grammars", "must be an array of grammars".into()));
    };
    if entries.is_empty() {
        return Err(fail(
            "/grammars",
            "is empty: the first grammar is the start".into(),
        ));
    }
    let mut members = Vec::with_capacity(entries.len());
    for (index, entry) in entries.iter().enumerate() {
        let at = format!("/grammars/{index}");
        let Value::Object(entry) = entry else {
            return Err(fail(&at, "a grammar is a JSON object".into()));
        };
        let mut name = None;
        let mut body = None;
        for (key, value) in entry {
            match (key.as_str(), value) {
                ("name", Value::String(n)) => name = Some(n.clone()),
                ("name", Value::Null) => {}
                ("lark_grammar", Value::String(text)) if body.is_none() => {
                    body = Some(Body::Lark(text.clone()))
                }
                ("json_schema", schema) if body.is_none() && !schema.is_null() => {
                    body = Some(Body::JsonSchema(schema.clone()))
                }
                ("lark_grammar" | "json_schema", Value::Null) => {}
                ("lark_grammar" | "json_schema", _) if body.is_some() => {
                    return Err(fail(
                        &at,
                        "a grammar has one of `lark_grammar` and `json_schema`".into(),
                    ))
                }
                ("name" | "lark_grammar", _) => {
                    return Err(fail(&format!("{at}/{key}"), "must be a string".into()))
                }
                _ => {
                    return Err(fail(
                        &at,
                        format!("unknown key `{key}` (known: name, lark_grammar, json_schema)"),
                    ))
                }
            }
        }
        let Some(body) = body else {
            return Err(fail(
                &at,
                "a grammar needs `lark_grammar` or `json_schema`".into(),
            ));
        };
        members.push(Member { name, body });
    }
    Ok(members)
}
