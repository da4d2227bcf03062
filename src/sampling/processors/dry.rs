//! DRY, "Don't Repeat Yourself" (p-e-w's sampler for text-generation-webui, ported to
//! koboldcpp and from there to llama.cpp as `llama_sampler_dry`, whose semantics this
//! follows): a token that would extend a repeat of an earlier stretch of the history is
//! penalised by `multiplier · base^(length - allowed_length)`, where `length` is the
//! longest suffix of the history that also ends earlier followed by that token, and no
//! repeat is counted across a sequence breaker.
//!
//! Shape, and why:
//! - It acts on token ids only: the sampling module has no vocabulary. Breakers are
//!   [`SequenceBreakers`], token-id sequences keyed by their first token, exactly
//!   llama.cpp's `dry_processed_breakers`. [`derive_breakers`] builds them from breaker
//!   strings and the vocabulary the way llama.cpp's `get_overlapping_token_sequences`
//!   does; callers without a vocabulary give the sequences directly.
//! - History: llama.cpp's DRY sees every token accepted into its sampler, and its server
//!   and CLI accept the prompt before generating, so the history here is the prompt
//!   followed by the output ([`StateField::Prompt`] and [`StateField::Output`]). The
//!   window `last_n` counts back from the newest token across that boundary.
//! - Per step it is linear in the window: one reverse Z-function gives, for every earlier
//!   position, how long a suffix of the window also ends there (llama.cpp's step 2).

use super::{need, Processor, StageNotes};
use crate::sampling::error::Result;
use crate::sampling::logits::Candidates;
use crate::sampling::state::{StateField, StateView};
use std::collections::BTreeMap;

/// llama.cpp's default `dry_base`.
pub const DEFAULT_BASE: f32 = 1.75;
/// llama.cpp's default `dry_allowed_length`.
pub const DEFAULT_ALLOWED_LENGTH: usize = 2;
/// llama.cpp's default `dry_sequence_breakers`.
pub const DEFAULT_SEQUENCE_BREAKERS: [&str; 4] = ["\n", ":", "\"", "*"];
/// llama.cpp truncates a breaker string to this many bytes (`MAX_CHAR_LEN`); the config
/// refuses longer ones instead.
pub const MAX_BREAKER_BYTES: usize = 40;
/// llama.cpp keeps at most this many tokens after a breaker's first token
/// (`MAX_SEQ_LEN`), so finding the last breaker stays linear in the window.
pub const MAX_TAIL_TOKENS: usize = 20;
/// `ln(f32::MAX)`, llama.cpp's `FLOAT_MAX_LOG`, which bounds the exponent.
const FLOAT_MAX_LOG: f32 = 88.722_84;

/// Sequence breakers as token ids: each first ("head") token maps to the token sequences
/// ("tails") that must follow it for the breaker to be complete. An empty tail makes the
/// head a breaker on its own; such tokens are also never penalised.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SequenceBreakers {
    heads: BTreeMap<u32, Vec<Vec<u32>>>,
}

impl SequenceBreakers {
    /// From whole token sequences (head first), as llama.cpp's
    /// `llama_sampler_init_dry_testing` takes them; empty sequences are skipped.
    pub fn from_sequences<S: AsRef<[u32]>>(seqs: impl IntoIterator<Item = S>) -> Self {
        let mut b = Self::default();
        for s in seqs {
            if let Some((&head, tail)) = s.as_ref().split_first() {
                b.insert(head, tail.to_vec());
            }
        }
        b
    }

    /// Adds `head` followed by `tail`; a repeated pair is kept once.
    pub fn insert(&mut self, head: u32, tail: Vec<u32>) {
        let tails = self.heads.entry(head).or_default();
        if !tails.contains(&tail) {
            tails.push(tail);
        }
    }

    pub fn extend(&mut self, other: &SequenceBreakers) {
        for (head, tail) in other.iter() {
            self.insert(head, tail.to_vec());
        }
    }

    /// The tails that complete a breaker starting with `head`.
    pub fn tails(&self, head: u32) -> &[Vec<u32>] {
        self.heads.get(&head).map_or(&[], Vec::as_slice)
    }

    /// Whether `id` is a breaker by itself.
    pub fn is_single_token(&self, id: u32) -> bool {
        self.tails(id).iter().any(Vec::is_empty)
    }

    /// Every `(head, tail)` pair, ascending head.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &[u32])> {
        self.heads
            .iter()
            .flat_map(|(&h, tails)| tails.iter().map(move |t| (h, t.as_slice())))
    }

    /// Number of breaker sequences.
    pub fn len(&self) -> usize {
        self.heads.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.heads.is_empty()
    }
}

/// llama.cpp's `get_overlapping_token_sequences` over every breaker string: for each
/// token id in `0..width`,
/// - a token whose bytes contain the breaker is a breaker on its own;
/// - otherwise, for each position where the token's bytes end with a proper prefix of
///   the breaker, the token is the head of a breaker whose tail is `tokenize` of the
///   rest of the breaker, cut to [`MAX_TAIL_TOKENS`] tokens.
///
/// `token_bytes` is the token's text (llama.cpp detokenizes with special tokens
/// rendered; a lookup that gives special tokens no bytes leaves them out). `tokenize`
/// gives the canonical tokens of a byte string without special tokens (llama.cpp:
/// `tokenize(rest, add_special = false, parse_special = false)`). Breaker strings are
/// cut to [`MAX_BREAKER_BYTES`] and empty ones skipped, as llama.cpp does; an empty
/// tokenization is skipped too (it would turn the head into a whole breaker).
///
/// The decode loop calls this once per request with the model's vocabulary and passes
/// the result to [`Sampler::from_config_with_breakers`](crate::sampling::Sampler::from_config_with_breakers).
pub fn derive_breakers<'v, S: AsRef<[u8]>>(
    breakers: &[S],
    width: usize,
    token_bytes: impl Fn(u32) -> &'v [u8],
    mut tokenize: impl FnMut(&[u8]) -> Vec<u32>,
) -> SequenceBreakers {
    let mut out = SequenceBreakers::default();
    for b in breakers {
        let b = b.as_ref();
        let b = &b[..b.len().min(MAX_BREAKER_BYTES)];
        if b.is_empty() {
            continue;
        }
        for id in 0..width {
            let id = id as u32;
            let word = token_bytes(id);
            if contains(word, b) {
                out.insert(id, Vec::new());
                continue;
            }
            // `word` does not contain `b`, so a suffix of `word` that is a prefix of `b`
            // is a proper prefix, and the rest of `b` is not empty.
            for pos in 0..word.len() {
                let suffix = &word[pos..];
                if b.starts_with(suffix) {
                    let mut tail = tokenize(&b[suffix.len()..]);
                    tail.truncate(MAX_TAIL_TOKENS);
                    if !tail.is_empty() {
                        out.insert(id, tail);
                    }
                }
            }
        }
    }
    out
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The processor: llama.cpp's `llama_sampler_dry_apply` over prompt + output.
#[derive(Debug, Clone)]
pub struct Dry {
    /// 0 turns DRY off.
    pub multiplier: f32,
    /// At least 1 (validated).
    pub base: f32,
    pub allowed_length: usize,
    /// The newest tokens considered: `None` is the whole history (llama.cpp's -1,
    /// "the context size"), `Some(0)` turns DRY off.
    pub last_n: Option<usize>,
    pub breakers: SequenceBreakers,
}

impl Dry {
    /// The exponent cap: llama.cpp clamps `length - allowed_length` to
    /// `⌊FLOAT_MAX_LOG / ln base⌋` so `base^exponent` stays below `f32::MAX`; a base
    /// within 1e-6 of 1 has no cap (its powers barely grow).
    fn max_exponent(&self) -> Option<usize> {
        (self.base > 1.000_001).then(|| (FLOAT_MAX_LOG / self.base.ln()) as usize)
    }

    /// The penalty for a token extending a repeat of `length` tokens
    /// (`length >= allowed_length`). The power is taken in f64 and rounded once to
    /// f32, as C++'s `std::pow(float, int)` promotes to double.
    pub fn penalty(&self, length: usize) -> f32 {
        let mut exp = length.saturating_sub(self.allowed_length);
        if let Some(cap) = self.max_exponent().filter(|&c| c > 0) {
            exp = exp.min(cap);
        }
        (f64::from(self.multiplier) * f64::from(self.base).powf(exp as f64)) as f32
    }

    /// The newest `last_n` tokens of prompt + output, oldest first.
    fn window(&self, prompt: &[u32], output: &[u32]) -> Vec<u32> {
        let total = prompt.len() + output.len();
        let n = self.last_n.map_or(total, |k| k.min(total));
        prompt
            .iter()
            .chain(output)
            .skip(total - n)
            .copied()
            .collect()
    }

    /// For every token that would extend a repeat of at least `allowed_length` tokens,
    /// the longest such repeat (llama.cpp's steps 1 to 3 over `window`).
    pub fn repeat_lengths(&self, window: &[u32]) -> BTreeMap<u32, usize> {
        let n = window.len();
        let mut out = BTreeMap::new();
        if n <= self.allowed_length {
            return out;
        }
        let limit = self.repeat_limit(window);
        if limit < self.allowed_length {
            return out;
        }
        let z = reverse_z(window);
        // Position j < n - 1 ends a repeat of min(z[n-1-j], limit) tokens; the token
        // after it would extend that repeat.
        for j in 0..n - 1 {
            let len = z[n - 1 - j].min(limit);
            if len >= self.allowed_length {
                let e = out.entry(window[j + 1]).or_insert(0);
                *e = (*e).max(len);
            }
        }
        out
    }

    /// Step 1: how many of the newest tokens come after the last complete breaker (the
    /// whole window if none). Scanning back from the newest token, the first token that
    /// heads a breaker whose tail follows it in full decides; among its tails the
    /// longest match counts. Like llama.cpp, a shorter breaker found first wins over a
    /// longer one ending later that contains it (rare, and kept for equal results).
    fn repeat_limit(&self, window: &[u32]) -> usize {
        let n = window.len();
        let back = |i: usize| window[n - 1 - i];
        for i in 0..n {
            let longest = self
                .breakers
                .tails(back(i))
                .iter()
                .filter(|t| {
                    t.len() <= i && t.iter().enumerate().all(|(o, &x)| x == back(i - o - 1))
                })
                .map(Vec::len)
                .max();
            if let Some(len) = longest {
                return i - len;
            }
        }
        n
    }
}

/// `z[k]`: the length of the longest common suffix of `w[..n-k]` and `w` (the
/// Z-function of `w` reversed; `z[0] = 0` unused). Linear: the box `[l, r)` is the
/// rightmost stretch known to equal a prefix of the reversed string.
fn reverse_z(w: &[u32]) -> Vec<usize> {
    let n = w.len();
    let rev = |i: usize| w[n - 1 - i];
    let mut z = vec![0; n];
    let (mut l, mut r) = (0, 0);
    for k in 1..n {
        let mut len = if k < r { z[k - l].min(r - k) } else { 0 };
        while k + len < n && rev(len) == rev(k + len) {
            len += 1;
        }
        z[k] = len;
        if k + len > r {
            (l, r) = (k, k + len);
        }
    }
    z
}

impl Processor for Dry {
    fn name(&self) -> &'static str {
        "dry"
    }
    fn params(&self) -> serde_json::Value {
        serde_json::json!({
            "multiplier": self.multiplier,
            "base": self.base,
            "allowed_length": self.allowed_length,
            "penalty_last_n": self.last_n,
            "sequence_breakers": self.breakers.len(),
        })
    }
    fn reads(&self) -> &'static [StateField] {
        &[StateField::Prompt, StateField::Output]
    }
    fn apply(&self, c: &mut Candidates, v: &StateView<'_>, _: &mut StageNotes) -> Result<()> {
        let prompt = need(v.prompt, self.name())?;
        let output = need(v.output, self.name())?;
        if self.multiplier == 0.0 || self.last_n == Some(0) {
            return Ok(());
        }
        let window = self.window(prompt, output);
        let mut overflowed = false;
        for (id, len) in self.repeat_lengths(&window) {
            if self.breakers.is_single_token(id) {
                continue;
            }
            if let Some(i) = c.position(id) {
                c.logits[i] -= self.penalty(len);
                overflowed |= !c.logits[i].is_finite();
            }
        }
        // A penalty past f32::MAX (multiplier > 1 at the exponent cap) leaves -inf in
        // llama.cpp, probability 0: here the token leaves the support.
        if overflowed {
            let keep: Vec<bool> = c.logits.iter().map(|z| z.is_finite()).collect();
            c.retain_by_index(|i| keep[i]);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampling::logits::RawLogits;
    use proptest::prelude::*;

    fn dry(allowed_length: usize, last_n: Option<usize>, breakers: &[&[u32]]) -> Dry {
        Dry {
            multiplier: 0.8,
            base: 1.75,
            allowed_length,
            last_n,
            breakers: SequenceBreakers::from_sequences(breakers.iter().copied()),
        }
    }

    /// The processed logits of a zero row of `width` after DRY, prompt + output history.
    fn run(d: &Dry, prompt: &[u32], output: &[u32], width: usize) -> Vec<(u32, f32)> {
        let c = applied(d, &vec![0.0f32; width], prompt, output);
        c.ids()
            .iter()
            .copied()
            .zip(c.logits().iter().copied())
            .collect()
    }

    /// The candidates of `row` after DRY, with prompt + output history.
    fn applied(d: &Dry, row: &[f32], prompt: &[u32], output: &[u32]) -> Candidates {
        let mut c = Candidates::from_raw(&RawLogits::new(row).unwrap());
        let view = StateView {
            step: 1,
            prompt: Some(prompt),
            output: Some(output),
            counts: None,
            sequence: None,
            grammar_mask: None,
            rng: None,
            processor_state: None,
        };
        d.apply(&mut c, &view, &mut StageNotes::default()).unwrap();
        c
    }

    /// Only the listed tokens moved, by the listed amounts.
    fn assert_penalised(got: &[(u32, f32)], want: &[(u32, f32)]) {
        for &(id, z) in got {
            let w = want.iter().find(|p| p.0 == id).map_or(0.0, |p| -p.1);
            assert!((z - w).abs() < 1e-6, "token {id}: {z}, want {w} ({got:?})");
        }
    }

    const A: u32 = 0;
    const B: u32 = 1;
    const C: u32 = 2;
    const D: u32 = 3;
    const X: u32 = 4;
    const COLON: u32 = 9;

    #[test]
    fn a_repeat_of_three_penalises_the_token_that_followed_it() {
        // a b c d a b c: the suffix "a b c" ended at index 2, followed by d; no other
        // earlier position ends a common suffix (their tokens differ from c).
        let got = run(&dry(2, None, &[]), &[], &[A, B, C, D, A, B, C], 10);
        // 0.8 · 1.75^(3 - 2) = 1.4
        assert_penalised(&got, &[(D, 1.4)]);
    }

    #[test]
    fn a_breaker_inside_the_repeat_cuts_it() {
        // a b : c d x a b : c d: without breakers the suffix "a b : c d" (5) repeats
        // and x gets 0.8 · 1.75^3 = 4.2875.
        let h = [A, B, COLON, C, D, X, A, B, COLON, C, D];
        assert_penalised(&run(&dry(2, None, &[]), &[], &h, 10), &[(X, 4.2875)]);
        // With ":" a breaker only "c d" (2) counts: 0.8 · 1.75^0.
        assert_penalised(&run(&dry(2, None, &[&[COLON]]), &[], &h, 10), &[(X, 0.8)]);
        // After "c" alone (1 < 2) nothing is penalised.
        let h = [A, B, COLON, C, D, X, A, B, COLON, C];
        assert_penalised(&run(&dry(2, None, &[&[COLON]]), &[], &h, 10), &[]);
    }

    #[test]
    fn a_multi_token_breaker_cuts_only_when_complete() {
        // a b x c d a b x c d with breaker "x c": the suffix after it is "d" (1 < 2).
        let h = [A, B, X, C, D, A, B, X, C, D];
        assert_penalised(&run(&dry(2, None, &[&[X, C]]), &[], &h, 10), &[]);
        // Breaker "x d" never completes: the repeat of 5 before a stays, 0.8 · 1.75^3.
        assert_penalised(&run(&dry(2, None, &[&[X, D]]), &[], &h, 10), &[(A, 4.2875)]);
    }

    #[test]
    fn a_single_token_breaker_is_never_penalised() {
        // a b : a b: ":" follows the repeated "a b" but is a breaker itself.
        let h = [A, B, COLON, A, B];
        assert_penalised(&run(&dry(2, None, &[]), &[], &h, 10), &[(COLON, 0.8)]);
        assert_penalised(&run(&dry(2, None, &[&[COLON]]), &[], &h, 10), &[]);
    }

    #[test]
    fn allowed_length_is_the_longest_free_repeat() {
        let h = [A, B, X, A, B];
        // Repeat of 2 with allowed_length 2: penalised at base^0.
        assert_penalised(&run(&dry(2, None, &[]), &[], &h, 10), &[(X, 0.8)]);
        // allowed_length 3: a repeat of 2 is free.
        assert_penalised(&run(&dry(3, None, &[]), &[], &h, 10), &[]);
        // allowed_length 1: 0.8 · 1.75^(2 - 1). The second "a" ends no repeat: the
        // history ends with "b".
        assert_penalised(&run(&dry(1, None, &[]), &[], &h, 10), &[(X, 1.4)]);
        // a x a: a repeat of 1 is below 2.
        assert_penalised(&run(&dry(2, None, &[]), &[], &[A, X, A], 10), &[]);
    }

    #[test]
    fn the_window_must_hold_the_earlier_occurrence() {
        // a b c x a b: c follows the earlier "a b".
        let h = [A, B, C, X, A, B];
        assert_penalised(&run(&dry(2, Some(6), &[]), &[], &h, 10), &[(C, 0.8)]);
        // The newest 5 are "b c x a b": the earlier "b" matches 1 token only.
        assert_penalised(&run(&dry(2, Some(5), &[]), &[], &h, 10), &[]);
        assert_penalised(&run(&dry(2, Some(3), &[]), &[], &h, 10), &[]);
        // 0 turns DRY off; None is the whole history.
        assert_penalised(&run(&dry(2, Some(0), &[]), &[], &h, 10), &[]);
        assert_penalised(&run(&dry(2, None, &[]), &[], &h, 10), &[(C, 0.8)]);
    }

    #[test]
    fn the_history_is_prompt_then_output() {
        let d = dry(2, None, &[]);
        assert_penalised(&run(&d, &[A, B, C], &[X, A, B], 10), &[(C, 0.8)]);
        assert_penalised(&run(&d, &[A, B, C, X, A, B], &[], 10), &[(C, 0.8)]);
        // The window counts back across the boundary.
        let d = dry(2, Some(5), &[]);
        assert_penalised(&run(&d, &[A, B, C], &[X, A, B], 10), &[]);
        assert_eq!(d.reads(), [StateField::Prompt, StateField::Output]);
    }

    #[test]
    fn several_earlier_occurrences_take_the_longest() {
        // a b c d | x b c y | a b c: d follows "a b c" (3), y follows "b c" (2).
        let y = 5;
        let h = [A, B, C, D, X, B, C, y, A, B, C];
        assert_penalised(&run(&dry(2, None, &[]), &[], &h, 10), &[(D, 1.4), (y, 0.8)]);
        // The same token after both: the longer repeat counts, once.
        let h = [A, B, C, D, X, B, C, D, A, B, C];
        assert_penalised(&run(&dry(2, None, &[]), &[], &h, 10), &[(D, 1.4)]);
    }

    #[test]
    fn the_exponent_is_capped_and_an_overflow_leaves_the_support() {
        let mut d = dry(2, None, &[]);
        d.multiplier = 1.0;
        // ⌊88.72284 / ln 1.75⌋ = 158.
        assert_eq!(d.max_exponent(), Some(158));
        let cap = 1.75f64.powf(158.0) as f32;
        assert!(cap.is_finite());
        assert_eq!(d.penalty(160), cap);
        assert_eq!(d.penalty(1000), cap);
        // 200 zeros: token 0 extends a repeat of 199; the penalty is the capped one.
        let h = vec![A; 200];
        assert_penalised(&run(&d, &[], &h, 3), &[(A, cap)]);
        // Twice that is past f32::MAX: token 0 leaves the support.
        d.multiplier = 2.0;
        let got = run(&d, &[], &h, 3);
        assert_eq!(got, [(1, 0.0), (2, 0.0)]);
        // Base 1 has no cap and no growth: the multiplier itself.
        d.base = 1.0;
        assert_eq!(d.max_exponent(), None);
        assert_eq!(d.penalty(1000), 2.0);
    }

    /// llama.cpp's own DRY cases (tests/test-sampling.cpp, `test_dry`): probabilities in,
    /// history, probabilities after DRY and a softmax, multiplier, base, allowed length,
    /// last n, breakers.
    #[test]
    fn llama_cpp_test_sampling_cases() {
        type Case<'a> = (
            &'a [f32],
            &'a [u32],
            &'a [f32],
            f32,
            f32,
            usize,
            usize,
            &'a [&'a [u32]],
        );
        let cases: [Case; 5] = [
            (&[0.25; 4], &[0, 1], &[0.25; 4], 1.0, 1.1, 2, 4, &[]),
            (
                &[0.25; 4],
                &[0, 1, 2, 0, 1],
                &[0.296923, 0.296923, 0.109232, 0.296923],
                1.0,
                1.1,
                2,
                5,
                &[],
            ),
            (
                &[0.2; 5],
                &[0, 1, 3, 4, 0, 1],
                &[0.2; 5],
                1.0,
                1.1,
                2,
                6,
                &[&[3]],
            ),
            (
                &[0.2; 5],
                &[0, 1, 2, 0, 1],
                &[0.241818, 0.241818, 0.032727, 0.241818, 0.241818],
                2.0,
                1.1,
                2,
                5,
                &[],
            ),
            (
                &[0.2; 5],
                &[0, 1, 2, 3, 4, 0, 1],
                &[0.2; 5],
                1.0,
                1.1,
                4,
                7,
                &[],
            ),
        ];
        for (probs, hist, want, multiplier, base, allowed_length, last_n, breakers) in cases {
            let d = Dry {
                multiplier,
                base,
                allowed_length,
                last_n: Some(last_n),
                breakers: SequenceBreakers::from_sequences(breakers.iter().copied()),
            };
            let row: Vec<f32> = probs.iter().map(|p| p.ln()).collect();
            let c = applied(&d, &row, &[], hist);
            for (p, w) in c.softmax().iter().zip(want) {
                assert!((p - f64::from(*w)).abs() < 1e-6, "{hist:?}: {p} vs {w}");
            }
        }
    }

    /// A toy vocabulary and a greedy longest-match tokenizer over it.
    const VOCAB: [&str; 9] = ["xab", "a", "zabcz", "c", "bc", "b", "q", "aba", "\n\n"];

    fn bytes(id: u32) -> &'static [u8] {
        VOCAB.get(id as usize).map_or(&[], |s| s.as_bytes())
    }

    fn greedy(mut s: &[u8]) -> Vec<u32> {
        let mut out = Vec::new();
        while !s.is_empty() {
            let (id, len) = (0..VOCAB.len() as u32)
                .map(|i| (i, bytes(i)))
                .filter(|(_, b)| !b.is_empty() && s.starts_with(b))
                .map(|(i, b)| (i, b.len()))
                .max_by_key(|&(i, l)| (l, std::cmp::Reverse(i)))
                .expect("toy vocabulary covers the input");
            out.push(id);
            s = &s[len..];
        }
        out
    }

    #[test]
    fn breakers_derive_from_strings_as_llama_cpp_does() {
        let b = derive_breakers(&["abc"], VOCAB.len() + 2, bytes, greedy);
        let got: Vec<(u32, Vec<u32>)> = b.iter().map(|(h, t)| (h, t.to_vec())).collect();
        assert_eq!(
            got,
            [
                // "xab" ends with "ab": the rest "c" follows.
                (0, vec![3]),
                // "a" ends with "a": the rest "bc".
                (1, vec![4]),
                // "zabcz" contains "abc": a breaker by itself.
                (2, vec![]),
                // "aba" ends with "a" (its first "ab" is followed by "a", not "c").
                (7, vec![4]),
            ]
        );
        assert!(b.is_single_token(2) && !b.is_single_token(0));
        // A single-byte breaker: exactly the tokens containing it.
        let nl = derive_breakers(&["\n"], VOCAB.len(), bytes, greedy);
        assert_eq!(nl.iter().collect::<Vec<_>>(), [(8, &[][..])]);
        // Empty strings are skipped; strings are cut to 40 bytes, tails to 20 tokens.
        assert!(derive_breakers(&[""], VOCAB.len(), bytes, greedy).is_empty());
        let long = format!("b{}", "q".repeat(60));
        let cut = derive_breakers(&[long.as_str()], VOCAB.len(), bytes, greedy);
        // Only tokens ending with a prefix of "bqq…" head it: "xab" (0) and "b" (5).
        let heads: Vec<u32> = cut.iter().map(|(h, _)| h).collect();
        assert_eq!(heads, [0, 5]);
        assert!(cut.iter().all(|(_, t)| t == [6; MAX_TAIL_TOKENS]));
        // An empty tokenization never makes a head a whole breaker: only "zabcz" is one.
        let none = derive_breakers(&["abc"], VOCAB.len(), bytes, |_| Vec::new());
        assert_eq!(none.iter().collect::<Vec<_>>(), [(2, &[][..])]);
    }

    /// The definition, by brute force: position j ends a repeat of the longest L with
    /// `w[j+1-L..=j] == w[n-L..]`, at most `limit`.
    fn naive_lengths(w: &[u32], limit: usize) -> Vec<usize> {
        let n = w.len();
        (0..n.saturating_sub(1))
            .map(|j| {
                (0..=(j + 1).min(limit))
                    .rev()
                    .find(|&l| w[j + 1 - l..=j] == w[n - l..])
                    .unwrap_or(0)
            })
            .collect()
    }

    proptest! {
        #[test]
        fn the_z_function_equals_the_definition(
            w in prop::collection::vec(0u32..3, 0..40),
            limit in 0usize..12,
            allowed in 0usize..4,
        ) {
            let n = w.len();
            let z = reverse_z(&w);
            let fast: Vec<usize> = (0..n.saturating_sub(1)).map(|j| z[n - 1 - j].min(limit)).collect();
            prop_assert_eq!(&fast, &naive_lengths(&w, limit));
            // And the per-token maxima from them, with no breakers (limit = n).
            let d = Dry { multiplier: 1.0, base: 1.75, allowed_length: allowed, last_n: None,
                breakers: SequenceBreakers::default() };
            let mut want = BTreeMap::new();
            if n > allowed {
                for (j, &l) in naive_lengths(&w, n).iter().enumerate() {
                    if l >= allowed {
                        let e = want.entry(w[j + 1]).or_insert(0);
                        *e = std::cmp::max(*e, l);
                    }
                }
            }
            prop_assert_eq!(d.repeat_lengths(&w), want);
        }
    }
}
