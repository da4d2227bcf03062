//! Free text: what a model writes between structures, up to a delimiter.
//!
//! Tool calling is mostly free text with islands of structure: `<think>...`
//! up to `</think>`, prose up to a `<tool_call>` trigger. As a regex, "text not
//! containing `</think>`, then `</think>`" is a large complement; as grammar
//! rules it is a byte-by-byte parse. [`FreeText`] says it directly, and the
//! automaton stage builds it as one lexer terminal: the product of a UTF-8
//! automaton with an Aho-Corasick automaton of the delimiters, so its token
//! masks are table lookups like any other terminal's.

/// Any UTF-8 text that contains none of `excludes`. With `stops`, the text runs
/// up to and including the first occurrence of one of them, and ends there
/// (XGrammar's `any_text` inside a `tag`, llguidance's lazy `TEXT "</end>"`);
/// without, it may end anywhere (the empty string included).
///
/// A stop is checked before the excludes at each byte: the text ends where a
/// stop completes even if an exclude completes there too.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FreeText {
    pub excludes: Vec<Vec<u8>>,
    pub stops: Vec<Vec<u8>>,
}

impl FreeText {
    /// Text that ends anywhere, holding none of `excludes`.
    pub fn excluding(excludes: Vec<Vec<u8>>) -> FreeText {
        FreeText {
            excludes,
            stops: Vec::new(),
        }
    }

    /// Text up to and including the first of `stops`.
    pub fn until(stops: Vec<Vec<u8>>) -> FreeText {
        FreeText {
            excludes: Vec::new(),
            stops,
        }
    }

    /// Whether some text matches: with stops, one that completes before an
    /// exclude does, and none is empty (an empty stop would end the text before
    /// it starts).
    pub fn is_productive(&self) -> bool {
        if self.stops.is_empty() {
            return !self.excludes.iter().any(|e| e.is_empty());
        }
        // An exclude inside a stop ends the text first, unless it ends where the
        // stop does (the stop is checked first there).
        self.stops.iter().any(|stop| {
            !stop.is_empty()
                && !self
                    .excludes
                    .iter()
                    .any(|e| !e.is_empty() && contains(&stop[..stop.len() - 1], e))
                && !self.excludes.iter().any(|e| e.is_empty())
        })
    }

    /// The delimiters for messages: `text except ["a"] until ["</end>"]`.
    pub fn describe(&self) -> String {
        let list = |items: &[Vec<u8>]| {
            items
                .iter()
                .map(|s| format!("{:?}", String::from_utf8_lossy(s)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut out = "text".to_string();
        if !self.excludes.is_empty() {
            out.push_str(&format!(" except [{}]", list(&self.excludes)));
        }
        if !self.stops.is_empty() {
            out.push_str(&format!(" until [{}]", list(&self.stops)));
        }
        out
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}
