//! A GGUF Llama whose forward pass takes many sequences at once: the batch's new
//! tokens go through every linear layer as one matrix (one product per weight,
//! whatever the batch), while attention runs per sequence over its own KV cache
//! at its own position. This is what lets a server decode 16 requests for little
//! more than the weight traffic of one.
//!
//! The arithmetic per row never depends on the other rows (Q8_0 products in
//! [`super::q8_matmul`], whose every output has one fixed order of operations;
//! attention in [`super::attention`], per sequence; candle's RMS norm is per row),
//! so a sequence's logits are bit for bit the same alone or in any batch. The model
//! is candle's `quantized_llama` up to the rounding of that product;
//! `tests/decode.rs` checks both. On a GPU, candle's product and attention ops run
//! instead (other quantizations too go through candle's product).

use super::attention::{self, Heads, HostKv};
use super::q8_matmul::{PackedQ8_0, QuantizedRows};
use candle_core::quantized::{gguf_file, GgmlDType, QMatMul, QTensor};
use candle_core::{DType, Device, Module, Result, Tensor};
use candle_nn::Embedding;
use candle_transformers::quantized_nn::RmsNorm;

struct Layer {
    attention_norm: RmsNorm,
    wq: Linear,
    wk: Linear,
    wv: Linear,
    wo: Linear,
    ffn_norm: RmsNorm,
    /// The gate (`ffn_gate`), down (`ffn_down`) and up (`ffn_up`) projections.
    w1: Linear,
    w2: Linear,
    w3: Linear,
}

/// A weight matrix: Q8_0 on the CPU through stencil's batch-invariant product,
/// anything else (other quantizations, a GPU) through candle's.
enum Linear {
    Packed(PackedQ8_0),
    Candle(QMatMul),
}

impl Linear {
    fn new(weights: QTensor) -> Result<Linear> {
        if weights.dtype() == GgmlDType::Q8_0 && weights.device().is_cpu() {
            if let Ok((columns, k)) = weights.shape().dims2() {
                let packed = PackedQ8_0::from_blocks(&weights.data()?, columns, k)
                    .map_err(candle_core::Error::Msg)?;
                return Ok(Linear::Packed(packed));
            }
        }
        Ok(Linear::Candle(QMatMul::from_qtensor(weights)?))
    }

    /// `x` is `[rows, k]`; returns `[rows, columns]`.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let [out] = Linear::forward_all([self], x)?;
        Ok(out)
    }

    /// The product of `silu(gate) * up`: quantized as it is computed on the
    /// CPU ([`QuantizedRows::swiglu`]), candle's ops otherwise.
    fn forward_swiglu(&self, gate: &Tensor, up: &Tensor) -> Result<Tensor> {
        match self {
            Linear::Packed(m) => {
                let (rows, k) = gate.dims2()?;
                let device = gate.device().clone();
                let gate: Vec<f32> = gate.flatten_all()?.to_vec1()?;
                let up: Vec<f32> = up.flatten_all()?.to_vec1()?;
                let quantized = QuantizedRows::swiglu(&gate, &up, k);
                let mut out = vec![0f32; rows * m.columns()];
                m.matmul(&quantized, &mut out);
                Tensor::from_vec(out, (rows, m.columns()), &device)
            }
            Linear::Candle(_) => self.forward(&(candle_nn::ops::silu(gate)? * up)?),
        }
    }

    /// Several products of the same input, which is quantized once.
    fn forward_all<const N: usize>(linears: [&Linear; N], x: &Tensor) -> Result<[Tensor; N]> {
        let mut quantized: Option<QuantizedRows> = None;
        let mut outs = Vec::with_capacity(N);
        for linear in linears {
            outs.push(match linear {
                Linear::Candle(m) => m.forward(x)?,
                Linear::Packed(m) => {
                    let (rows, k) = x.dims2()?;
                    if quantized.is_none() {
                        let data: Vec<f32> = x.flatten_all()?.to_vec1()?;
                        quantized = Some(QuantizedRows::new(&data, k));
                    }
                    let mut out = vec![0f32; rows * m.columns()];
                    m.matmul(quantized.as_ref().expect("quantized above"), &mut out);
                    Tensor::from_vec(out, (rows, m.columns()), x.device())?
                }
            });
        }
        Ok(outs
            .try_into()
            .unwrap_or_else(|_| unreachable!("N products")))
    }
}

/// The weights, shared by every sequence.
pub struct BatchedLlama {
    embeddings: Embedding,
    layers: Vec<Layer>,
    norm: RmsNorm,
    output: Linear,
    n_head: usize,
    n_kv_head: usize,
    head_dim: usize,
    /// Rotary tables, one row per position.
    cos: Tensor,
    sin: Tensor,
    /// The same tables, for the CPU's attention.
    host_cos: Vec<f32>,
    host_sin: Vec<f32>,
    device: Device,
}

/// One sequence's keys and values per layer, and how many positions it holds.
#[derive(Clone, Default)]
pub struct KvCache {
    /// On the CPU: plain rows, appended to in place.
    host: Vec<HostKv>,
    /// On a GPU: candle tensors, `[1, kv_heads, positions, head_dim]`.
    device: Vec<Option<(Tensor, Tensor)>>,
    position: usize,
}

impl KvCache {
    /// Positions fed so far.
    pub fn position(&self) -> usize {
        self.position
    }

    /// A cache of this one's first `positions` positions, when its rows are on
    /// the host (a GPU's tensors are not copied out). The rows are the same bits
    /// a forward pass over those tokens alone computes: attention is causal, and
    /// no row's arithmetic depends on another sequence or on how the tokens were
    /// chunked.
    pub fn prefix(&self, positions: usize) -> Option<KvCache> {
        if positions > self.position || self.device.iter().any(Option::is_some) {
            return None;
        }
        Some(KvCache {
            host: self
                .host
                .iter()
                .map(|layer| layer.prefix(positions, self.position))
                .collect(),
            device: Vec::new(),
            position: positions,
        })
    }

    /// Bytes the host rows take.
    pub fn bytes(&self) -> usize {
        self.host.iter().map(HostKv::bytes).sum()
    }
}

/// One sequence's share of a batched forward pass.
pub struct BatchItem<'a> {
    pub cache: &'a mut KvCache,
    pub tokens: &'a [u32],
}

impl BatchedLlama {
    /// Loads the weights of a GGUF file of the `llama` architecture (dense: a
    /// mixture of experts is refused).
    pub fn from_gguf<R: std::io::Seek + std::io::Read>(
        content: &gguf_file::Content,
        reader: &mut R,
        device: &Device,
    ) -> Result<BatchedLlama> {
        let md = |key: &str| match content.metadata.get(key) {
            Some(v) => Ok(v),
            None => candle_core::bail!("GGUF metadata lacks {key}"),
        };
        if md("llama.expert_count")
            .and_then(|v| v.to_u32())
            .unwrap_or(0)
            > 1
        {
            candle_core::bail!("mixture-of-experts Llama models are not supported");
        }
        let n_head = md("llama.attention.head_count")?.to_u32()? as usize;
        let n_kv_head = md("llama.attention.head_count_kv")?.to_u32()? as usize;
        let blocks = md("llama.block_count")?.to_u32()? as usize;
        let width = md("llama.embedding_length")?.to_u32()? as usize;
        let rope_dim = md("llama.rope.dimension_count")?.to_u32()? as usize;
        let eps = md("llama.attention.layer_norm_rms_epsilon")?.to_f32()? as f64;
        let freq_base = md("llama.rope.freq_base")
            .and_then(|v| v.to_f32())
            .unwrap_or(10000.0);
        let positions = md("llama.context_length")
            .and_then(|v| v.to_u32())
            .map_or(4096, |n| n as usize);
        let mut tensor = |name: &str| content.tensor(reader, name, device);
        let embeddings = tensor("token_embd.weight")?;
        let norm = RmsNorm::from_qtensor(tensor("output_norm.weight")?, eps)?;
        let output = match tensor("output.weight") {
            Ok(t) => Linear::new(t)?,
            Err(_) => Linear::new(tensor("token_embd.weight")?)?,
        };
        let embeddings = Embedding::new(embeddings.dequantize(device)?, width);
        let mut layers = Vec::with_capacity(blocks);
        for i in 0..blocks {
            let mut q = |part: &str| Linear::new(tensor(&format!("blk.{i}.{part}.weight"))?);
            layers.push(Layer {
                wq: q("attn_q")?,
                wk: q("attn_k")?,
                wv: q("attn_v")?,
                wo: q("attn_output")?,
                w1: q("ffn_gate")?,
                w2: q("ffn_down")?,
                w3: q("ffn_up")?,
                attention_norm: RmsNorm::from_qtensor(
                    tensor(&format!("blk.{i}.attn_norm.weight"))?,
                    eps,
                )?,
                ffn_norm: RmsNorm::from_qtensor(tensor(&format!("blk.{i}.ffn_norm.weight"))?, eps)?,
            });
        }
        if rope_dim != width / n_head {
            candle_core::bail!(
                "a rotary embedding over {rope_dim} of each head's {} values is not supported",
                width / n_head
            );
        }
        let (cos, sin) = rotary_tables(rope_dim, freq_base, positions, device)?;
        let host_cos = cos.flatten_all()?.to_vec1()?;
        let host_sin = sin.flatten_all()?.to_vec1()?;
        Ok(BatchedLlama {
            embeddings,
            layers,
            norm,
            output,
            n_head,
            n_kv_head,
            head_dim: width / n_head,
            cos,
            sin,
            host_cos,
            host_sin,
            device: device.clone(),
        })
    }

    /// Positions a sequence may hold.
    pub fn max_positions(&self) -> usize {
        self.cos.dims()[0]
    }

    /// Feeds each item's tokens after what its cache holds; returns the logits
    /// after each item's last token, one row per item (`[items, vocab]`).
    pub fn forward(&self, items: &mut [BatchItem<'_>]) -> Result<Tensor> {
        let lens: Vec<usize> = items.iter().map(|i| i.tokens.len()).collect();
        if lens.contains(&0) {
            candle_core::bail!("a sequence with no tokens in the batch");
        }
        for (item, &len) in items.iter().zip(&lens) {
            if item.cache.position + len > self.max_positions() {
                candle_core::bail!(
                    "sequence of {} positions exceeds the model's {}",
                    item.cache.position + len,
                    self.max_positions()
                );
            }
        }
        let ids: Vec<u32> = items
            .iter()
            .flat_map(|i| i.tokens.iter().copied())
            .collect();
        let ids = Tensor::new(ids.as_slice(), &self.device)?;
        let mut x = self.embeddings.forward(&ids)?;
        for (l, layer) in self.layers.iter().enumerate() {
            let residual = &x;
            let h = layer.attention_norm.forward(&x)?;
            let [q, k, v] = Linear::forward_all([&layer.wq, &layer.wk, &layer.wv], &h)?;
            let attended = if self.device.is_cpu() {
                self.attend_on_host(l, items, &lens, &q, &k, &v)?
            } else {
                let mut rows = Vec::with_capacity(items.len());
                let mut start = 0;
                for (item, &len) in items.iter_mut().zip(&lens) {
                    let part = |t: &Tensor, heads: usize| {
                        t.narrow(0, start, len)?
                            .reshape((1, len, heads, self.head_dim))?
                            .transpose(1, 2)?
                            .contiguous()
                    };
                    rows.push(self.attend(
                        l,
                        item.cache,
                        part(&q, self.n_head)?,
                        part(&k, self.n_kv_head)?,
                        part(&v, self.n_kv_head)?,
                    )?);
                    start += len;
                }
                Tensor::cat(&rows, 0)?
            };
            let x1 = (layer.wo.forward(&attended)? + residual)?;
            let h = layer.ffn_norm.forward(&x1)?;
            let [gate, up] = Linear::forward_all([&layer.w1, &layer.w3], &h)?;
            let mlp = layer.w2.forward_swiglu(&gate, &up)?;
            x = (mlp + &x1)?;
        }
        let mut last = Vec::with_capacity(items.len());
        let mut end = 0u32;
        for (item, &len) in items.iter_mut().zip(&lens) {
            end += len as u32;
            last.push(end - 1);
            item.cache.position += len;
        }
        let last = Tensor::new(last.as_slice(), &self.device)?;
        let x = self.norm.forward(&x.index_select(&last, 0)?)?;
        self.output.forward(&x)
    }

    /// Every sequence's attention on the CPU ([`attention`]): `q`, `k`, `v` are
    /// the batch's rows (`[tokens, heads * head_dim]`), the result too.
    fn attend_on_host(
        &self,
        layer: usize,
        items: &mut [BatchItem<'_>],
        lens: &[usize],
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
    ) -> Result<Tensor> {
        let heads = Heads {
            query: self.n_head,
            kv: self.n_kv_head,
            dim: self.head_dim,
        };
        let mut q: Vec<f32> = q.flatten_all()?.to_vec1()?;
        let mut k: Vec<f32> = k.flatten_all()?.to_vec1()?;
        let v: Vec<f32> = v.flatten_all()?.to_vec1()?;
        let (q_width, kv_width) = (heads.query * heads.dim, heads.kv * heads.dim);
        let (cos, sin) = (&self.host_cos, &self.host_sin);
        // Rotate and append each sequence's new rows, then every (sequence, head)
        // pair's attention on the pool's threads.
        let mut spans = Vec::with_capacity(items.len());
        let mut start = 0;
        for (item, &len) in items.iter_mut().zip(lens) {
            let cache = &mut item.cache.host;
            if cache.len() <= layer {
                cache.resize(layer + 1, HostKv::default());
            }
            let position = item.cache.position;
            let qs = start * q_width..(start + len) * q_width;
            let ks = start * kv_width..(start + len) * kv_width;
            attention::rotate(
                &mut q[qs.clone()],
                heads.query,
                heads.dim,
                position,
                cos,
                sin,
            );
            attention::rotate(&mut k[ks.clone()], heads.kv, heads.dim, position, cos, sin);
            cache[layer].append(&k[ks.clone()], &v[ks]);
            spans.push(qs);
            start += len;
        }
        // Each (sequence, head) writes its rows into its own span of `by_head`
        // (sequence-major, then head, then position), put in place after.
        let mut by_head = vec![0f32; q.len()];
        let by_head_at = by_head.as_mut_ptr() as usize;
        let caches: Vec<&HostKv> = items.iter().map(|i| &i.cache.host[layer]).collect();
        let work = |range: std::ops::Range<usize>| {
            for item in range {
                let (sequence, head) = (item / heads.query, item % heads.query);
                let span = &spans[sequence];
                let rows = span.len() / q_width;
                // Safety: the spans of different items do not overlap, and the
                // pool returns when every item is done.
                let out = unsafe {
                    std::slice::from_raw_parts_mut(
                        (by_head_at as *mut f32).add(span.start + head * rows * heads.dim),
                        rows * heads.dim,
                    )
                };
                let queries = &q[span.clone()];
                attention::attend_head(caches[sequence], heads, head, queries, out, heads.dim);
            }
        };
        candle_core::utils::barrier_pool().execute_chunked(spans.len() * heads.query, work);
        let mut out = vec![0f32; q.len()];
        for span in &spans {
            let rows = span.len() / q_width;
            let block = &by_head[span.clone()];
            for (head, head_rows) in block.chunks_exact(rows * heads.dim).enumerate() {
                for (t, row) in head_rows.chunks_exact(heads.dim).enumerate() {
                    let at = span.start + t * q_width + head * heads.dim;
                    out[at..at + heads.dim].copy_from_slice(row);
                }
            }
        }
        Tensor::from_vec(out, (start, q_width), &self.device)
    }

    /// Attention of one sequence's new rows (`[1, heads, len, head_dim]`) over
    /// its cache plus themselves, with candle's ops (on a GPU); returns
    /// `[len, heads * head_dim]`.
    fn attend(
        &self,
        layer: usize,
        cache: &mut KvCache,
        q: Tensor,
        k: Tensor,
        v: Tensor,
    ) -> Result<Tensor> {
        let (_, _, len, _) = q.dims4()?;
        let position = cache.position;
        let cos = self.cos.narrow(0, position, len)?;
        let sin = self.sin.narrow(0, position, len)?;
        let q = candle_nn::rotary_emb::rope_i(&q, &cos, &sin)?;
        let k = candle_nn::rotary_emb::rope_i(&k, &cos, &sin)?;
        if cache.device.len() <= layer {
            cache.device.resize(layer + 1, None);
        }
        let (k, v) = match &cache.device[layer] {
            Some((k_cache, v_cache)) if position > 0 => (
                Tensor::cat(&[k_cache, &k], 2)?,
                Tensor::cat(&[v_cache, &v], 2)?,
            ),
            _ => (k, v),
        };
        cache.device[layer] = Some((k.clone(), v.clone()));
        let repeat = self.n_head / self.n_kv_head;
        let k = candle_transformers::utils::repeat_kv(k, repeat)?;
        let v = candle_transformers::utils::repeat_kv(v, repeat)?;
        let scores = (q.matmul(&k.t()?)? / (self.head_dim as f64).sqrt())?;
        let scores = if len > 1 {
            let mask = candle_transformers::utils::build_causal_mask(len, position, &self.device)?
                .broadcast_as(scores.shape())?;
            let neg_inf =
                Tensor::new(f32::NEG_INFINITY, &self.device)?.broadcast_as(scores.shape())?;
            mask.where_cond(&neg_inf, &scores)?
        } else {
            scores
        };
        let weights = candle_nn::ops::softmax_last_dim(&scores)?;
        let out = weights.matmul(&v.contiguous()?)?;
        out.transpose(1, 2)?
            .reshape((len, self.n_head * self.head_dim))
    }
}

fn rotary_tables(
    dim: usize,
    freq_base: f32,
    positions: usize,
    device: &Device,
) -> Result<(Tensor, Tensor)> {
    let theta: Vec<f32> = (0..dim)
        .step_by(2)
        .map(|i| 1f32 / freq_base.powf(i as f32 / dim as f32))
        .collect();
    let theta = Tensor::new(theta.as_slice(), device)?;
    let angles = Tensor::arange(0, positions as u32, device)?
        .to_dtype(DType::F32)?
        .reshape((positions, 1))?
        .matmul(&theta.reshape((1, theta.elem_count()))?)?;
    Ok((angles.cos()?, angles.sin()?))
}
