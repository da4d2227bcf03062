//! Attention of one sequence on the CPU: rotary embedding, its keys and values
//! kept as plain rows ([`HostKv`]), causal softmax attention with grouped-query
//! heads.
//!
//! Why not candle's ops: a decode step of one sequence is a few dozen tiny ops per
//! layer, each an allocation and a dispatch, and a cache grown with `Tensor::cat`
//! copies all of its rows at every step (quadratic in the sequence's length). Here
//! a step appends one row per layer and reads the cache in place. Each query's
//! arithmetic depends only on its own sequence, in one fixed order, so a
//! sequence's result never depends on its batch or on how its prompt was chunked.

/// One layer's keys and values of one sequence: a row per position, each
/// `kv_heads * head_dim` values (after the rotary embedding, for keys).
#[derive(Clone, Default)]
pub struct HostKv {
    keys: Vec<f32>,
    values: Vec<f32>,
}

/// The attention's shape, shared by every layer.
#[derive(Clone, Copy, Debug)]
pub struct Heads {
    pub query: usize,
    pub kv: usize,
    pub dim: usize,
}

impl Heads {
    fn kv_width(&self) -> usize {
        self.kv * self.dim
    }

    fn query_width(&self) -> usize {
        self.query * self.dim
    }
}

/// Rotates each head's pairs `(x[2i], x[2i + 1])` of every row by the angles of its
/// position (`cos` / `sin`: a row of `dim / 2` per position): candle's `rope_i`.
pub fn rotate(rows: &mut [f32], heads: usize, dim: usize, first: usize, cos: &[f32], sin: &[f32]) {
    let half = dim / 2;
    for (t, row) in rows.chunks_exact_mut(heads * dim).enumerate() {
        let at = (first + t) * half;
        let (cos, sin) = (&cos[at..at + half], &sin[at..at + half]);
        for head in row.chunks_exact_mut(dim) {
            for (i, pair) in head.chunks_exact_mut(2).enumerate() {
                let (x0, x1) = (pair[0], pair[1]);
                pair[0] = x0 * cos[i] - x1 * sin[i];
                pair[1] = x0 * sin[i] + x1 * cos[i];
            }
        }
    }
}

impl HostKv {
    /// Appends the rows of new positions (keys already rotated).
    pub fn append(&mut self, keys: &[f32], values: &[f32]) {
        self.keys.extend_from_slice(keys);
        self.values.extend_from_slice(values);
    }

    /// A copy of the first `positions` of the `held` positions this layer holds.
    pub fn prefix(&self, positions: usize, held: usize) -> HostKv {
        let width = self.keys.len().checked_div(held).unwrap_or(0);
        HostKv {
            keys: self.keys[..positions * width].to_vec(),
            values: self.values[..positions * width].to_vec(),
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        (self.keys.len() + self.values.len()) * std::mem::size_of::<f32>()
    }
}

/// Writes into `out` (a row of `heads.dim` per query, its stride `stride`) query
/// head `head`'s attention for each of `queries` (rows of `heads.query *
/// heads.dim`), over the positions up to its own; the queries are the cache's last
/// positions. Heads are independent, so callers spread them over threads.
pub fn attend_head(
    cache: &HostKv,
    heads: Heads,
    head: usize,
    queries: &[f32],
    out: &mut [f32],
    stride: usize,
) {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") {
        // Safety: the CPU has AVX2.
        return unsafe { attend_head_avx2(cache, heads, head, queries, out, stride) };
    }
    attend_head_here(cache, heads, head, queries, out, stride)
}

/// [`attend_head`] compiled for AVX2: the same operations in wider registers
/// (no fused multiply-adds: Rust never contracts), so the same bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn attend_head_avx2(
    cache: &HostKv,
    heads: Heads,
    head: usize,
    queries: &[f32],
    out: &mut [f32],
    stride: usize,
) {
    attend_head_here(cache, heads, head, queries, out, stride)
}

#[inline(always)]
fn attend_head_here(
    cache: &HostKv,
    heads: Heads,
    head: usize,
    queries: &[f32],
    out: &mut [f32],
    stride: usize,
) {
    let positions = cache.keys.len() / heads.kv_width();
    let new = queries.len() / heads.query_width();
    let kv = (head / (heads.query / heads.kv)) * heads.dim;
    let scale = 1.0 / (heads.dim as f32).sqrt();
    let mut weights = vec![0f32; positions];
    for t in 0..new {
        let q = &queries[t * heads.query_width() + head * heads.dim..][..heads.dim];
        let out = &mut out[t * stride..][..heads.dim];
        let weights = &mut weights[..positions - new + t + 1];
        let mut max = f32::NEG_INFINITY;
        for (j, w) in weights.iter_mut().enumerate() {
            let k = &cache.keys[j * heads.kv_width() + kv..][..heads.dim];
            *w = dot(q, k) * scale;
            max = max.max(*w);
        }
        let mut sum = 0f32;
        for w in weights.iter_mut() {
            *w = (*w - max).exp();
            sum += *w;
        }
        out.fill(0.0);
        for (j, w) in weights.iter().enumerate() {
            let v = &cache.values[j * heads.kv_width() + kv..][..heads.dim];
            let w = w / sum;
            for (o, v) in out.iter_mut().zip(v) {
                *o += w * v;
            }
        }
    }
}

/// A dot product in eight running sums (so it vectorizes), added up in a fixed order.
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a8
        .remainder()
        .iter()
        .zip(b8.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (a, b) in a8.zip(b8) {
        for i in 0..8 {
            lanes[i] += a[i] * b[i];
        }
    }
    ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5]))
        + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]))
        + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Appends `keys` and `values`, then writes every head's attention of
    /// `queries` into `out` (rows of `heads.query * heads.dim`), on one thread.
    fn attend(
        cache: &mut HostKv,
        heads: Heads,
        queries: &[f32],
        keys: &[f32],
        values: &[f32],
        out: &mut [f32],
    ) {
        cache.append(keys, values);
        for head in 0..heads.query {
            let out = &mut out[head * heads.dim..];
            attend_head(cache, heads, head, queries, out, heads.query_width());
        }
    }

    /// Attention written out the slow way: every score, a softmax, a weighted sum.
    fn reference(keys: &[Vec<f32>], values: &[Vec<f32>], q: &[f32]) -> Vec<f32> {
        let scores: Vec<f64> = keys
            .iter()
            .map(|k| {
                k.iter().zip(q).map(|(a, b)| (a * b) as f64).sum::<f64>() / (q.len() as f64).sqrt()
            })
            .collect();
        let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let exp: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
        let sum: f64 = exp.iter().sum();
        (0..q.len())
            .map(|d| {
                (exp.iter()
                    .zip(values)
                    .map(|(e, v)| e * v[d] as f64)
                    .sum::<f64>()
                    / sum) as f32
            })
            .collect()
    }

    #[test]
    fn attention_matches_the_formula_with_grouped_heads_and_chunks() {
        // 4 query heads over 2 key/value heads of 8 values; 5 positions fed as 3 + 2.
        let heads = Heads {
            query: 4,
            kv: 2,
            dim: 8,
        };
        let value = |i: usize| ((i * 37 % 23) as f32 - 11.0) / 7.0;
        let rows = |n: usize, width: usize, salt: usize| -> Vec<f32> {
            (0..n * width).map(|i| value(i + salt)).collect()
        };
        let (q, k, v) = (rows(5, 32, 1), rows(5, 16, 2), rows(5, 16, 3));
        let mut cache = HostKv::default();
        let mut out = vec![0f32; 5 * 32];
        attend(
            &mut cache,
            heads,
            &q[..3 * 32],
            &k[..3 * 16],
            &v[..3 * 16],
            &mut out[..3 * 32],
        );
        attend(
            &mut cache,
            heads,
            &q[3 * 32..],
            &k[3 * 16..],
            &v[3 * 16..],
            &mut out[3 * 32..],
        );
        for t in 0..5 {
            for h in 0..4 {
                let kv = h / 2;
                let keys: Vec<Vec<f32>> = (0..=t)
                    .map(|j| k[j * 16 + kv * 8..][..8].to_vec())
                    .collect();
                let values: Vec<Vec<f32>> = (0..=t)
                    .map(|j| v[j * 16 + kv * 8..][..8].to_vec())
                    .collect();
                let expected = reference(&keys, &values, &q[t * 32 + h * 8..][..8]);
                let got = &out[t * 32 + h * 8..][..8];
                for (g, e) in got.iter().zip(&expected) {
                    assert!((g - e).abs() < 1e-5, "position {t} head {h}: {g} vs {e}");
                }
            }
        }
        // Fed all at once: the same bits.
        let mut whole = HostKv::default();
        let mut once = vec![0f32; 5 * 32];
        attend(&mut whole, heads, &q, &k, &v, &mut once);
        assert_eq!(
            once.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            out.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn every_build_of_a_head_gives_the_same_bits() {
        let heads = Heads {
            query: 2,
            kv: 1,
            dim: 64,
        };
        let value = |i: usize| ((i * 7919 % 1013) as f32 - 506.0) / 97.0;
        let mut cache = HostKv::default();
        let keys: Vec<f32> = (0..40 * 64).map(|i| value(i + 3)).collect();
        let values: Vec<f32> = (0..40 * 64).map(|i| value(i + 5)).collect();
        cache.append(&keys, &values);
        let queries: Vec<f32> = (0..3 * 128).map(value).collect();
        for head in 0..2 {
            let (mut dispatched, mut plain) = (vec![0f32; 3 * 64], vec![0f32; 3 * 64]);
            attend_head(&cache, heads, head, &queries, &mut dispatched, 64);
            attend_head_here(&cache, heads, head, &queries, &mut plain, 64);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&dispatched), bits(&plain));
        }
    }

    #[test]
    fn rotation_turns_pairs_by_their_position() {
        let (cos, sin) = ([1.0, 1.0, 0.0, 0.5], [0.0, 0.0, 1.0, -0.5]);
        // Two heads of 4 at position 1: pair 0 by 90 degrees, pair 1 by cos 0.5, sin -0.5.
        let mut row = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
        rotate(&mut row, 2, 4, 1, &cos, &sin);
        assert_eq!(row, [-2.0, 1.0, 3.5, 0.5, -6.0, 5.0, 7.5, 0.5]);
    }
}
