//! `%json { schema }`: an inline JSON Schema, compiled by stencil's JSON Schema
//! front-end and spliced into the Lark grammar as a nonterminal.
//!
//! The schema's top-level `"x-guidance"` object (llguidance's per-schema options)
//! is read here and taken out of the schema: `whitespace_flexible` (default
//! `true`: whitespace between JSON tokens; stencil bounds it, see
//! [`super::LarkOptions::json`]), `lenient`, and the separators and escapes at
//! their defaults. What stencil cannot do (`whitespace_pattern`, other
//! separators, restricted escapes) is an error, never ignored.
//!
//! The schema's rules keep their names under a `json@line:column/` prefix, so
//! messages about them say which `%json` they came from.

use serde_json::Value;

use crate::frontend::json_schema::{JsonSchemaOptions, Whitespace};

/// The options for one schema: `base` with its `x-guidance` applied, and the
/// schema without that key.
pub(crate) fn options_for(
    base: &JsonSchemaOptions,
    schema: &Value,
) -> Result<(JsonSchemaOptions, Value), String> {
    let mut options = base.clone();
    let Some(guidance) = schema.get("x-guidance") else {
        return Ok((options, schema.clone()));
    };
    let Value::Object(map) = guidance else {
        return Err("\"x-guidance\" must be an object".into());
    };
    let mut coerce_one_of = false;
    for (key, value) in map {
        let flag = || {
            value
                .as_bool()
                .ok_or_else(|| format!("\"x-guidance\": `{key}` must be true or false"))
        };
        let unsupported = || format!("\"x-guidance\": `{key}` = {value} is not supported yet");
        match key.as_str() {
            "whitespace_flexible" => {
                if !flag()? {
                    options.whitespace = Whitespace::Compact;
                }
            }
            "lenient" => options.lenient |= flag()?,
            "coerce_one_of" => coerce_one_of = flag()?,
            "item_separator" if value.as_str() == Some(",") => {}
            "key_separator" if value.as_str() == Some(":") => {}
            "json_allow_general_unicode_escapes" if flag()? => {}
            "whitespace_pattern"
            | "item_separator"
            | "key_separator"
            | "json_allow_general_unicode_escapes"
            | "json_allowed_escapes" => return Err(unsupported()),
            _ => return Err(format!("\"x-guidance\": unknown key `{key}`")),
        }
    }
    // `lenient` implies `coerce_one_of` (llguidance); alone, it has no
    // counterpart here.
    if coerce_one_of && !options.lenient {
        return Err(
            "\"x-guidance\": `coerce_one_of` = true is not supported yet (`lenient` = true reads an overlapping oneOf as anyOf)"
                .into(),
        );
    }
    let mut schema = schema.clone();
    if let Some(object) = schema.as_object_mut() {
        object.remove("x-guidance");
    }
    Ok((options, schema))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn x_guidance_maps_or_refuses() {
        let base = JsonSchemaOptions {
            whitespace: Whitespace::Bounded { indent: 20 },
            ..JsonSchemaOptions::default()
        };
        let (o, s) = options_for(
            &base,
            &json!({"type": "string", "x-guidance": {"whitespace_flexible": false, "lenient": true}}),
        )
        .unwrap();
        assert_eq!(o.whitespace, Whitespace::Compact);
        assert!(o.lenient);
        assert_eq!(s, json!({"type": "string"}));
        for bad in [
            json!({"x-guidance": {"whitespace_pattern": " *"}}),
            json!({"x-guidance": {"item_separator": ", "}}),
            json!({"x-guidance": {"json_allowed_escapes": "n"}}),
            json!({"x-guidance": {"coerce_one_of": true}}),
            json!({"x-guidance": {"what": 1}}),
            json!({"x-guidance": 3}),
        ] {
            assert!(options_for(&base, &bad).is_err(), "{bad}");
        }
    }
}
