//! The documents a schema's `$ref`s may reach outside itself, by URI.
//!
//! stencil never fetches a reference from the network: a compile must be
//! reproducible and bounded, and must not reach out from inside an inference
//! server. The user passes the documents instead: a map from URI to document in
//! the library ([`SchemaDocuments::insert`]), or a folder of `.json` files
//! ([`SchemaDocuments::load_dir`], the command line's `--ref-dir`). A `$ref` whose
//! document (the URI without its fragment) is in the map resolves into it, with
//! the document's own `$id`s, anchors and relative references working as they
//! would in the root document.
//!
//! The map is shared behind an `Arc`, so options that carry it clone cheaply.
//!
//! ```
//! use serde_json::json;
//! use stencil::frontend::json_schema::{compile_schema, JsonSchemaOptions, SchemaDocuments};
//!
//! let mut documents = SchemaDocuments::default();
//! documents.insert("https://example.com/city.json", json!({"type": "string", "maxLength": 20}));
//! let options = JsonSchemaOptions { documents, ..JsonSchemaOptions::default() };
//! let schema = json!({"properties": {"city": {"$ref": "https://example.com/city.json"}}});
//! assert!(compile_schema(&schema, &options).is_ok());
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::source::parse_schema_text;

/// Base URI of the files of a folder loaded without one: the root document's own
/// default base (`stencil:///schema.json`), so that a schema without `$id`
/// reaches a file beside it in the folder by its relative path (`"address.json"`).
pub const DEFAULT_DOCUMENTS_BASE: &str = "stencil:///";

/// Documents by URI (no fragment), for `$ref`s that leave the schema.
#[derive(Debug, Clone, Default)]
pub struct SchemaDocuments {
    by_uri: Arc<BTreeMap<String, Value>>,
}

/// A folder of documents that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DocumentsError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{message}")]
    NotJson { path: PathBuf, message: String },
}

impl SchemaDocuments {
    /// Registers `document` under `uri` (a fragment, if any, is dropped). A later
    /// document under the same URI replaces the earlier one.
    pub fn insert(&mut self, uri: &str, document: Value) {
        let uri = uri.split('#').next().unwrap_or(uri).to_string();
        Arc::make_mut(&mut self.by_uri).insert(uri, document);
    }

    /// The document registered under `uri` (without fragment).
    pub fn get(&self, uri: &str) -> Option<&Value> {
        self.by_uri.get(uri)
    }

    /// Every registered document, by URI.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.by_uri.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn len(&self) -> usize {
        self.by_uri.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_uri.is_empty()
    }

    /// Registers every `.json` file under `dir` (recursively, in path order) as
    /// `base` + its path relative to `dir` (`/` separated), and also under its
    /// own absolute `$id` where it has one, so a schema that names a document by
    /// its published URI finds the local copy. Each file is parsed with the
    /// nesting limit `max_nesting`.
    pub fn load_dir(
        &mut self,
        dir: &Path,
        base: &str,
        max_nesting: usize,
    ) -> Result<usize, DocumentsError> {
        let mut files = Vec::new();
        collect_json_files(dir, &mut files)?;
        files.sort();
        let base = if base.ends_with('/') {
            base.to_string()
        } else {
            format!("{base}/")
        };
        for path in &files {
            let text = std::fs::read_to_string(path).map_err(|source| DocumentsError::Io {
                path: path.clone(),
                source,
            })?;
            let document =
                parse_schema_text(&text, max_nesting).map_err(|e| DocumentsError::NotJson {
                    path: path.clone(),
                    message: e.to_string(),
                })?;
            let relative = path.strip_prefix(dir).unwrap_or(path);
            let relative: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if let Some(id) = document
                .get("$id")
                .and_then(Value::as_str)
                .filter(|id| id.contains(':'))
            {
                self.insert(id, document.clone());
            }
            self.insert(&format!("{base}{}", relative.join("/")), document);
        }
        Ok(files.len())
    }
}

fn collect_json_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), DocumentsError> {
    let io = |source| DocumentsError::Io {
        path: dir.to_path_buf(),
        source,
    };
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        if path.is_dir() {
            collect_json_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
    Ok(())
}
