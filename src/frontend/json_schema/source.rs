//! A schema document read from text, with stencil's own nesting limit.
//!
//! `serde_json` stops at 128 nested arrays and objects with "recursion limit
//! exceeded", which reads as "the file is not JSON". A schema that deep is valid
//! JSON that reached a limit, so the limit is stencil's: a scan of the text's
//! brackets (outside strings) names where it was crossed and the limit in force,
//! before `serde_json` parses it with its own limit lifted. The scan is linear and
//! keeps no stack, so any depth is reported in bounded time and memory.

use serde::Deserialize;
use serde_json::Value;

use crate::grammar::Location;

/// The nesting depth `serde_json` allows by default: the default limit here too.
pub const DEFAULT_MAX_NESTING: usize = 128;

/// A schema text that could not be read as a JSON document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaTextError {
    /// More arrays and objects open at once than `limit`.
    #[error(
        "{line}:{column}: the schema nests arrays and objects more than {limit} deep \
         (stencil's nesting limit of {limit}; raise it with --max-nesting, or \
         `max_nesting` in the library)"
    )]
    TooDeep {
        line: usize,
        column: usize,
        limit: usize,
    },
    /// Not JSON at all.
    #[error("{line}:{column}: not JSON: {message}")]
    NotJson {
        line: usize,
        column: usize,
        message: String,
    },
}

/// Parses `text` as one JSON document whose arrays and objects nest at most
/// `max_nesting` deep. Parsing, compiling and dropping a schema recurse once per
/// level: a limit far above the default needs a thread with a stack to match
/// (the `stencil` command runs on a 1 GiB one, enough for 10,000 levels).
///
/// ```
/// use stencil::frontend::json_schema::{parse_schema_text, SchemaTextError};
/// let deep = format!("{}{}", "[".repeat(5), "]".repeat(5));
/// assert!(parse_schema_text(&deep, 5).is_ok());
/// let err = parse_schema_text(&deep, 4).unwrap_err();
/// assert!(matches!(err, SchemaTextError::TooDeep { line: 1, column: 5, limit: 4 }));
/// ```
pub fn parse_schema_text(text: &str, max_nesting: usize) -> Result<Value, SchemaTextError> {
    if let Some(offset) = first_too_deep(text.as_bytes(), max_nesting) {
        let at = Location::of_offset(text.as_bytes(), offset);
        return Err(SchemaTextError::TooDeep {
            line: at.line as usize,
            column: at.column as usize,
            limit: max_nesting,
        });
    }
    let not_json = |e: serde_json::Error| SchemaTextError::NotJson {
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    };
    let mut deserializer = serde_json::Deserializer::from_str(text);
    // The scan above bounds the depth; serde_json's own 128 must not cut it shorter.
    deserializer.disable_recursion_limit();
    let value = Value::deserialize(&mut deserializer).map_err(not_json)?;
    deserializer.end().map_err(not_json)?;
    Ok(value)
}

/// The offset of the first `[` or `{` (outside strings) that opens more than
/// `limit` levels; `None` when the text stays within it. Brackets are counted as
/// written: a malformed text is left to the parser to describe.
fn first_too_deep(text: &[u8], limit: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (offset, &byte) in text.iter().enumerate() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return Some(offset);
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brackets_inside_strings_do_not_nest() {
        let text = r#"{"pattern": "[[[[[[\"{{{{"}"#;
        assert!(parse_schema_text(text, 1).is_ok());
        let text = "{\n  \"a\": [[1]]\n}";
        assert_eq!(
            parse_schema_text(text, 2),
            Err(SchemaTextError::TooDeep {
                line: 2,
                column: 9,
                limit: 2
            })
        );
    }

    #[test]
    fn not_json_keeps_the_parser_location() {
        let err = parse_schema_text("{\"a\": tru}", 128).unwrap_err();
        assert!(
            matches!(
                err,
                SchemaTextError::NotJson {
                    line: 1,
                    column: 7..,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(
            parse_schema_text("{} {}", 128).is_err(),
            "one document only"
        );
    }

    #[test]
    fn past_serde_json_s_own_limit() {
        let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
        assert!(parse_schema_text(&deep, 300).is_ok());
        assert!(parse_schema_text(&deep, 299).is_err());
    }
}
