//! The JSON Schema drafts this front-end tells apart, and how a document names
//! its own. Its own file because keyword collection, `$ref` indexing and the
//! public options all need it, and none of them should import another for it.

use serde_json::Value;

/// The drafts whose keyword sets differ in ways that matter here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Draft {
    Draft4,
    Draft6,
    Draft7,
    Draft201909,
    Draft202012,
}

impl Draft {
    /// The draft named by the document's `$schema`, if any.
    pub fn of(schema: &Value) -> Option<Draft> {
        let s = schema.get("$schema")?.as_str()?;
        Some(if s.contains("draft-04") {
            Draft::Draft4
        } else if s.contains("draft-06") {
            Draft::Draft6
        } else if s.contains("draft-07") {
            Draft::Draft7
        } else if s.contains("2019-09") {
            Draft::Draft201909
        } else {
            Draft::Draft202012
        })
    }
}
