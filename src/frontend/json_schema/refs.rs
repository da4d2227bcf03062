//! `$ref` resolution inside one document: JSON pointers, `$id` base URIs, `$anchor`
//! (and draft 6/7 `$id: "#name"`).
//!
//! The document is indexed once: every subschema with an `$id` is registered under
//! its resolved URI, every anchor under `uri#name`, and every visited pointer
//! remembers its base URI so a resolved target keeps resolving its own relative
//! references correctly. Remote documents are never fetched: the documents the
//! user passed ([`SchemaDocuments`]) are indexed the same way, their pointers
//! written `uri#/pointer` so they never collide with the root's (`/pointer`); a
//! `$ref` to any other document is reported as unsupported. Resolution only finds
//! the target; recursion is handled by the compiler's rule memo, so it needs no
//! depth cap here.

use rustc_hash::FxHashMap as HashMap;
use std::rc::Rc;

use serde_json::Value;

use super::{Draft, SchemaDocuments, Subschema};

/// Base URI of a document without `$id`.
const DEFAULT_BASE: &str = "stencil:///schema.json";

pub(crate) struct Index<'a> {
    pub root_base: Rc<str>,
    root: &'a Value,
    documents: &'a SchemaDocuments,
    /// Resolved `$id` (no fragment) -> pointer.
    ids: HashMap<String, String>,
    /// `uri#anchor` -> pointer.
    anchors: HashMap<String, String>,
    /// Pointer -> base URI in effect there.
    bases: HashMap<String, Rc<str>>,
}

impl<'a> Index<'a> {
    pub fn build(root: &'a Value, draft: Draft, documents: &'a SchemaDocuments) -> Index<'a> {
        let mut index = Index {
            root_base: Rc::from(DEFAULT_BASE),
            root,
            documents,
            ids: HashMap::default(),
            anchors: HashMap::default(),
            bases: HashMap::default(),
        };
        let base: Rc<str> = Rc::from(DEFAULT_BASE);
        index.walk(root, String::new(), base, draft, 0);
        index.root_base = index
            .bases
            .get("")
            .cloned()
            .unwrap_or_else(|| Rc::from(DEFAULT_BASE));
        for (uri, document) in documents.iter() {
            let ptr = format!("{uri}#");
            index
                .ids
                .entry(uri.to_string())
                .or_insert_with(|| ptr.clone());
            let draft = Draft::of(document).unwrap_or(draft);
            index.walk(document, ptr, Rc::from(uri), draft, 0);
        }
        index
    }

    fn walk(&mut self, v: &'a Value, ptr: String, base: Rc<str>, draft: Draft, depth: usize) {
        if depth > 256 {
            return;
        }
        if let Value::Object(map) = v {
            let mut base = base;
            let id_key = if draft == Draft::Draft4 { "id" } else { "$id" };
            // Before 2019-09 a `$ref` makes its siblings, `$id` included, ignored.
            let ignored = draft <= Draft::Draft7 && map.contains_key("$ref");
            if let Some(id) = map.get(id_key).and_then(Value::as_str).filter(|_| !ignored) {
                if let Some(anchor) = id.strip_prefix('#') {
                    self.anchors
                        .insert(format!("{}#{anchor}", strip_fragment(&base)), ptr.clone());
                } else {
                    let resolved = resolve_uri(&base, id);
                    let (no_frag, frag) = split_fragment(&resolved);
                    base = Rc::from(no_frag);
                    self.ids
                        .entry(no_frag.to_string())
                        .or_insert_with(|| ptr.clone());
                    if !frag.is_empty() && !frag.starts_with('/') {
                        self.anchors
                            .insert(format!("{no_frag}#{frag}"), ptr.clone());
                    }
                }
            }
            for key in ["$anchor", "$dynamicAnchor"] {
                if let Some(a) = map.get(key).and_then(Value::as_str) {
                    self.anchors
                        .insert(format!("{}#{a}", strip_fragment(&base)), ptr.clone());
                }
            }
            self.bases.insert(ptr.clone(), base.clone());
            for (k, child) in map {
                let p = format!("{ptr}/{}", escape(k));
                match k.as_str() {
                    "properties" | "patternProperties" | "$defs" | "definitions"
                    | "dependentSchemas" | "dependencies" => {
                        if let Value::Object(m) = child {
                            for (name, sub) in m {
                                self.walk(
                                    sub,
                                    format!("{p}/{}", escape(name)),
                                    base.clone(),
                                    draft,
                                    depth + 1,
                                );
                            }
                        }
                    }
                    "allOf"
                    | "anyOf"
                    | "oneOf"
                    | "prefixItems"
                    | "items"
                    | "additionalItems"
                    | "additionalProperties"
                    | "contains"
                    | "propertyNames"
                    | "if"
                    | "then"
                    | "else"
                    | "not"
                    | "unevaluatedItems"
                    | "unevaluatedProperties"
                    | "contentSchema" => match child {
                        Value::Array(items) => {
                            for (i, sub) in items.iter().enumerate() {
                                self.walk(sub, format!("{p}/{i}"), base.clone(), draft, depth + 1);
                            }
                        }
                        _ => self.walk(child, p, base.clone(), draft, depth + 1),
                    },
                    _ => {}
                }
            }
        }
    }

    /// The base URI in effect at `ptr`, when the walk saw it.
    pub fn base_of(&self, ptr: &str) -> Option<Rc<str>> {
        self.bases.get(ptr).cloned()
    }

    /// The subschema `reference` points to, seen from base URI `base`.
    pub fn resolve(&self, base: &str, reference: &str) -> Option<Subschema<'a>> {
        let resolved = resolve_uri(base, reference);
        let (doc, frag) = split_fragment(&resolved);
        let doc_ptr = if doc == &*self.root_base || doc == DEFAULT_BASE {
            String::new()
        } else {
            self.ids.get(doc)?.clone()
        };
        let frag = percent_decode(frag);
        let ptr = if frag.is_empty() {
            doc_ptr
        } else if frag.starts_with('/') {
            format!("{doc_ptr}{frag}")
        } else {
            self.anchors.get(&format!("{doc}#{frag}"))?.clone()
        };
        let v = self.lookup(&ptr)?;
        let base = self
            .bases
            .get(&ptr)
            .cloned()
            .unwrap_or_else(|| Rc::from(doc));
        Some(Subschema {
            v,
            ptr: Rc::from(ptr.as_str()),
            base,
            negated: false,
            scopes: Default::default(),
        })
    }
}

fn escape(k: &str) -> String {
    k.replace('~', "~0").replace('/', "~1")
}

impl<'a> Index<'a> {
    /// The value at `ptr`: a pointer into the root (`""`, `/...`) or into a
    /// passed document (`uri#/...`).
    fn lookup(&self, ptr: &str) -> Option<&'a Value> {
        let (document, ptr) = if ptr.is_empty() || ptr.starts_with('/') {
            (self.root, ptr)
        } else {
            let (uri, ptr) = split_fragment(ptr);
            (self.documents.get(uri)?, ptr)
        };
        if ptr.is_empty() {
            return Some(document);
        }
        document.pointer(ptr)
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
            if let Some(x) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(x);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn split_fragment(uri: &str) -> (&str, &str) {
    match uri.find('#') {
        Some(i) => (&uri[..i], &uri[i + 1..]),
        None => (uri, ""),
    }
}

fn strip_fragment(uri: &str) -> &str {
    split_fragment(uri).0
}

fn has_scheme(s: &str) -> bool {
    let Some(colon) = s.find(':') else {
        return false;
    };
    let scheme = &s[..colon];
    !scheme.is_empty()
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
}

/// RFC 3986 reference resolution (enough of it for `$id`/`$ref`).
pub(crate) fn resolve_uri(base: &str, r: &str) -> String {
    if has_scheme(r) {
        return remove_dots(r);
    }
    let base = strip_fragment(base);
    if r.is_empty() {
        return base.to_string();
    }
    if r.starts_with('#') {
        return format!("{base}{r}");
    }
    let scheme_end = base.find(':').map(|i| i + 1).unwrap_or(0);
    if r.starts_with("//") {
        return format!("{}{r}", &base[..scheme_end]);
    }
    let after_scheme = &base[scheme_end..];
    let authority_end = if let Some(rest) = after_scheme.strip_prefix("//") {
        scheme_end + 2 + rest.find('/').unwrap_or(rest.len())
    } else {
        scheme_end
    };
    let base_no_query = base.split('?').next().unwrap_or(base);
    if r.starts_with('/') {
        return remove_dots(&format!("{}{r}", &base[..authority_end]));
    }
    if r.starts_with('?') {
        return format!("{base_no_query}{r}");
    }
    // Merge with the base path's directory.
    let dir_end = base_no_query
        .rfind('/')
        .map(|i| i + 1)
        .filter(|&i| i > authority_end);
    let merged = match dir_end {
        Some(i) => format!("{}{r}", &base_no_query[..i]),
        None if authority_end > scheme_end => format!("{}/{r}", &base_no_query[..authority_end]),
        None => format!("{}{r}", &base_no_query[..scheme_end]),
    };
    remove_dots(&merged)
}

fn remove_dots(uri: &str) -> String {
    let (main, frag) = match uri.find('#') {
        Some(i) => (&uri[..i], &uri[i..]),
        None => (uri, ""),
    };
    if !main.contains("/.") {
        return uri.to_string();
    }
    let scheme_end = main.find(':').map(|i| i + 1).unwrap_or(0);
    let start = if main[scheme_end..].starts_with("//") {
        scheme_end
            + 2
            + main[scheme_end + 2..]
                .find('/')
                .unwrap_or(main.len() - scheme_end - 2)
    } else {
        scheme_end
    };
    let (prefix, path) = main.split_at(start);
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').collect();
    for (i, seg) in segments.iter().enumerate() {
        match *seg {
            "." => {
                if i == segments.len() - 1 {
                    out.push("");
                }
            }
            ".." => {
                if out.len() > 1 {
                    out.pop();
                }
                if i == segments.len() - 1 {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    format!("{prefix}{}{frag}", out.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_resolution() {
        assert_eq!(
            resolve_uri("http://a/b/c.json", "d.json"),
            "http://a/b/d.json"
        );
        assert_eq!(
            resolve_uri("http://a/b/c.json", "/d.json"),
            "http://a/d.json"
        );
        assert_eq!(
            resolve_uri("http://a/b/c.json", "#/x"),
            "http://a/b/c.json#/x"
        );
        assert_eq!(
            resolve_uri("http://a/b/c.json", "../d.json"),
            "http://a/d.json"
        );
        assert_eq!(resolve_uri("urn:x:y", "#foo"), "urn:x:y#foo");
        assert_eq!(resolve_uri("http://a", "b.json"), "http://a/b.json");
    }
}
