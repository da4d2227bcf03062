//! MiniMax-M3's arguments: every value tagged at every depth, read back and
//! written as its chat template's `to_xml` macro does.
//!
//! ```text
//! ]<]minimax[>[<city>Paris]<]minimax[>[</city>]<]minimax[>[<tags>]<]minimax[>[<item>a]<]minimax[>[</item>]<]minimax[>[</tags>
//! ```
//!
//! An object's properties are elements named by their keys, an array's items
//! elements named `item`, a string its raw text, a number or boolean its JSON,
//! and `null` nothing at all (the template leaves such a property out). The
//! text carries no types: `5` may be a number or a string, an element with
//! `item` children an array or an object with a property `item`. The tool's
//! schema decides, as for the other XML formats ([`super::xml`]): children
//! named `item` are an array where the schema allows one, text is a string
//! where the schema admits only strings, else the JSON it spells.
//!
//! The call around the arguments is an XML [`super::xml::CallShape`]
//! (`]<]minimax[>[<invoke name="f">`); its reader comes here for each
//! parameter's value.

use serde_json::{Map, Value};

use super::xml::{typed_value, Typing};
use crate::frontend::json_schema::MINIMAX_M3_TAG as TAG;

/// The text of `value` as the template's `to_xml` writes it.
pub(crate) fn value_text(value: &Value) -> String {
    match value {
        Value::Object(map) => map
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| format!("{TAG}<{k}>{}{TAG}</{k}>", value_text(v)))
            .collect(),
        Value::Array(items) => items
            .iter()
            .map(|v| format!("{TAG}<item>{}{TAG}</item>", value_text(v)))
            .collect(),
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The value of the element `name` whose content starts `text`, typed by
/// `schema`, and the text after its closing tag. `None` when the text ends
/// first (a call cut short) or the element is not well formed.
pub(crate) fn element<'t>(
    text: &'t str,
    name: &str,
    schema: Option<&Value>,
    typing: Typing<'_>,
) -> Option<(Value, &'t str)> {
    let (value, rest) = content(text, schema, typing)?;
    let rest = rest
        .strip_prefix(TAG)?
        .strip_prefix("</")?
        .strip_prefix(name)?
        .strip_prefix('>')?;
    Some((value, rest))
}

/// An element's content: child elements, text, or nothing, up to the tag that
/// closes it (left in the rest).
fn content<'t>(
    text: &'t str,
    schema: Option<&Value>,
    typing: Typing<'_>,
) -> Option<(Value, &'t str)> {
    let child = |rest: &'t str| {
        let after = rest.strip_prefix(TAG)?.strip_prefix('<')?;
        (!after.starts_with('/')).then_some(after)
    };
    if child(text).is_none() {
        let end = text.find(TAG)?;
        let raw = &text[..end];
        let value = match (raw.is_empty(), schema) {
            (true, Some(s)) if !typing.allows(s, "string") && typing.allows(s, "array") => {
                Value::Array(Vec::new())
            }
            (true, Some(s)) if !typing.allows(s, "string") && typing.allows(s, "object") => {
                Value::Object(Map::new())
            }
            _ => typed_value(raw, schema, None),
        };
        return Some((value, &text[end..]));
    }
    let as_array = schema.is_none_or(|s| typing.allows(s, "array"));
    let mut children: Vec<(&str, Value)> = Vec::new();
    let mut rest = text;
    while let Some(after) = child(rest) {
        let end = after.find('>')?;
        let name = &after[..end];
        let item = as_array && name == "item";
        let sub = schema.and_then(|s| match item {
            true => typing.items(s),
            false => typing.property(s, name),
        });
        let (value, next) = element(&after[end + 1..], name, sub, typing)?;
        children.push((name, value));
        rest = next;
    }
    let value = match as_array && children.iter().all(|(n, _)| *n == "item") {
        true => Value::Array(children.into_iter().map(|(_, v)| v).collect()),
        false => Value::Object(
            children
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        ),
    };
    Some((value, rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(text: &str, schema: &Value) -> Option<Value> {
        let typing = Typing { root: schema };
        let (value, rest) = element(text, "x", Some(schema), typing)?;
        rest.is_empty().then_some(value)
    }

    #[test]
    fn values_read_back_as_written() {
        let schema = json!({"type": "object", "properties": {
            "tags": {"type": "array", "items": {"type": "string"}},
            "entries": {"type": "array", "items": {"$ref": "#/$defs/entry"}},
            "zip": {"type": "string"}, "n": {"type": "number"}, "on": {"type": "boolean"}},
            "$defs": {"entry": {"type": "object", "properties": {"id": {"type": "integer"}, "label": {"type": "string"}}}}});
        let value = json!({"tags": ["a", "b"], "entries": [{"id": 1, "label": "one"}],
                           "zip": "01234", "n": -2.5, "on": true});
        let text = format!("{}{TAG}</x>", value_text(&value));
        assert_eq!(read(&text, &schema), Some(value));
        let empty = json!({"tags": [], "zip": ""});
        let text = format!("{}{TAG}</x>", value_text(&empty));
        assert_eq!(read(&text, &schema), Some(empty));
    }

    #[test]
    fn the_schema_tells_an_array_from_an_object_with_an_item() {
        let object = json!({"type": "object", "properties": {"item": {"type": "integer"}}});
        let text = format!("{TAG}<item>3{TAG}</item>{TAG}</x>");
        assert_eq!(read(&text, &object), Some(json!({"item": 3})));
        let array = json!({"type": "array", "items": {"type": "integer"}});
        assert_eq!(read(&text, &array), Some(json!([3])));
        // A union: the structure written says which branch.
        let union = json!({"oneOf": [{"type": "integer"}, {"type": "object",
            "properties": {"max": {"type": "integer"}}}]});
        assert_eq!(read(&format!("5{TAG}</x>"), &union), Some(json!(5)));
        let text = format!("{TAG}<max>10{TAG}</max>{TAG}</x>");
        assert_eq!(read(&text, &union), Some(json!({"max": 10})));
    }

    #[test]
    fn elements_cut_short_or_misclosed_are_not_read() {
        let schema = json!({"type": "object"});
        assert_eq!(read(&format!("{TAG}<a>1{TAG}</a>"), &schema), None);
        assert_eq!(read(&format!("{TAG}<a>1{TAG}</b>{TAG}</x>"), &schema), None);
        assert_eq!(read("1", &schema), None);
    }
}
