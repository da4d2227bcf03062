//! The product of a Q8_0 weight matrix with a batch of f32 rows: the arithmetic of
//! every linear layer of the batched forward pass ([`super::llama`]).
//!
//! Why stencil has its own: candle's CPU product computes each (row, column) dot on
//! its own, so a batch of eight costs eight passes of arithmetic, and its packed
//! kernels pick their arithmetic by the shape of the call. Here the weights are
//! repacked once, at load, into tiles of 16 output columns whose bytes interleave
//! four at a time ([`PackedQ8_0`]), so one 512-bit `vpdpbusd` advances 16 dot
//! products by four bytes, and each weight tile is read once for all the batch's
//! rows (register-blocked, [`ROW_GROUP`] rows at a time).
//!
//! **Batch invariance.** A sequence's logits must not depend on what else is in its
//! batch (a served request writes the same text alone or among 16). So every output
//! element is computed by one fixed sequence of operations whatever the batch: the
//! activation row is quantized alone (Q8_0: a 32-value block, its f32 scale), each
//! block's dot product is an exact integer, and the float accumulation over blocks
//! is `acc = fma(w_scale * a_scale, dot as f32, acc)` in block order. The three
//! kernels (AVX-512 VNNI, AVX2, portable) differ only in how they get the exact
//! integers, so they agree bit for bit, and tests check them against each other.
//!
//! ```
//! use stencil::decode::q8_matmul::{PackedQ8_0, QuantizedRows};
//! // Two output columns over k = 32: the weights as Q8_0 blocks (f16 scale, 32 i8).
//! let mut bytes = Vec::new();
//! for column in 0..2i8 {
//!     bytes.extend_from_slice(&half_one());
//!     bytes.extend((0..32).map(|i| (if i == 0 { column + 1 } else { 0 }) as u8));
//! }
//! # fn half_one() -> [u8; 2] { 0x3c00u16.to_le_bytes() }
//! let weights = PackedQ8_0::from_blocks(&bytes, 2, 32).unwrap();
//! let rows = QuantizedRows::new(&[127.0; 32], 32);
//! let mut out = [0f32; 2];
//! weights.matmul(&rows, &mut out);
//! assert_eq!(out, [127.0, 254.0]);
//! ```

use half::f16;

/// Values per Q8_0 block.
pub const BLOCK: usize = 32;
/// Output columns per weight tile: one 512-bit register of f32.
pub const TILE: usize = 16;
/// Activation rows computed together against one weight tile.
pub const ROW_GROUP: usize = 4;
/// Bytes of one block of one tile: 16 columns x 32 weights.
const TILE_BLOCK_BYTES: usize = TILE * BLOCK;

/// A Q8_0 matrix of `columns` outputs over `k` inputs, repacked for [`Self::matmul`].
///
/// Tile `t`, block `b` holds, for each group `g` of four inputs (`4g..4g + 4` of the
/// block), the four weights of each of the tile's 16 columns in turn, each biased by
/// 128 to an unsigned byte (the form `vpdpbusd` multiplies); columns past the
/// matrix's end are zero with scale zero.
pub struct PackedQ8_0 {
    columns: usize,
    k: usize,
    /// `tiles * blocks * TILE_BLOCK_BYTES` biased weights.
    weights: Vec<u8>,
    /// `tiles * blocks * TILE` scales, in the same order.
    scales: Vec<f32>,
}

impl PackedQ8_0 {
    /// Repacks GGUF Q8_0 data (per column, `k / 32` blocks of an f16 scale and 32
    /// signed weights) of a `columns x k` matrix.
    pub fn from_blocks(data: &[u8], columns: usize, k: usize) -> Result<PackedQ8_0, String> {
        if k == 0 || !k.is_multiple_of(BLOCK) {
            return Err(format!(
                "Q8_0 rows of {k} values are not whole 32-value blocks"
            ));
        }
        let blocks = k / BLOCK;
        let block_bytes = 2 + BLOCK;
        if data.len() != columns * blocks * block_bytes {
            return Err(format!(
                "Q8_0 data of {} bytes for a {columns} x {k} matrix (expected {})",
                data.len(),
                columns * blocks * block_bytes
            ));
        }
        let tiles = columns.div_ceil(TILE);
        let mut weights = vec![0x80u8; tiles * blocks * TILE_BLOCK_BYTES];
        let mut scales = vec![0f32; tiles * blocks * TILE];
        for column in 0..columns {
            let (tile, lane) = (column / TILE, column % TILE);
            for b in 0..blocks {
                let src = &data[(column * blocks + b) * block_bytes..][..block_bytes];
                let at = tile * blocks + b;
                scales[at * TILE + lane] = f16::from_le_bytes([src[0], src[1]]).to_f32();
                let dst = &mut weights[at * TILE_BLOCK_BYTES..][..TILE_BLOCK_BYTES];
                for (g, four) in src[2..].chunks_exact(4).enumerate() {
                    for (i, &w) in four.iter().enumerate() {
                        dst[g * TILE * 4 + lane * 4 + i] = w ^ 0x80;
                    }
                }
            }
        }
        Ok(PackedQ8_0 {
            columns,
            k,
            weights,
            scales,
        })
    }

    /// Output columns.
    pub fn columns(&self) -> usize {
        self.columns
    }

    /// Inputs per row.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Writes `rows x columns` outputs (row-major) into `out`, on candle's CPU thread
    /// pool, with the fastest kernel this CPU has.
    pub fn matmul(&self, rows: &QuantizedRows, out: &mut [f32]) {
        self.matmul_with(Kernel::detect(), rows, out)
    }

    /// [`Self::matmul`] with a chosen kernel (tests compare them).
    pub fn matmul_with(&self, kernel: Kernel, rows: &QuantizedRows, out: &mut [f32]) {
        assert_eq!(rows.k, self.k, "activation rows of another width");
        assert_eq!(
            out.len(),
            rows.len() * self.columns,
            "output of another size"
        );
        let tiles = self.columns.div_ceil(TILE);
        let out_at = out.as_mut_ptr() as usize;
        let run = |range: std::ops::Range<usize>| {
            for tile in range {
                // Safety: each tile writes only its own columns of `out`, and the
                // pool returns after every range is done.
                unsafe { self.tile(kernel, tile, rows, out_at as *mut f32) }
            }
        };
        if rows.len() * self.columns * self.k < 1 << 16 {
            run(0..tiles);
        } else {
            candle_core::utils::barrier_pool().execute_chunked(tiles, run);
        }
    }

    /// One tile's columns for every row.
    ///
    /// # Safety
    /// `out` points at `rows.len() x self.columns` writable f32.
    unsafe fn tile(&self, kernel: Kernel, tile: usize, rows: &QuantizedRows, out: *mut f32) {
        let blocks = self.k / BLOCK;
        let weights =
            &self.weights[tile * blocks * TILE_BLOCK_BYTES..][..blocks * TILE_BLOCK_BYTES];
        let scales = &self.scales[tile * blocks * TILE..][..blocks * TILE];
        let width = TILE.min(self.columns - tile * TILE);
        // AVX2 has 16 registers: two rows at a time.
        let most = if kernel == Kernel::Avx2 { 2 } else { ROW_GROUP };
        let mut first = 0;
        while first < rows.len() {
            let group = most.min(rows.len() - first);
            let mut acc = [[0f32; TILE]; ROW_GROUP];
            let t = TileRows {
                weights,
                scales,
                rows,
                first,
            };
            // Safety: `kernel` came from `Kernel::detect` / `available`, which check
            // the CPU's features.
            match (kernel, group) {
                #[cfg(target_arch = "x86_64")]
                (Kernel::Avx512Vnni, 4) => unsafe { x86::avx512::<4>(&t, &mut acc) },
                #[cfg(target_arch = "x86_64")]
                (Kernel::Avx512Vnni, 3) => unsafe { x86::avx512::<3>(&t, &mut acc) },
                #[cfg(target_arch = "x86_64")]
                (Kernel::Avx512Vnni, 2) => unsafe { x86::avx512::<2>(&t, &mut acc) },
                #[cfg(target_arch = "x86_64")]
                (Kernel::Avx512Vnni, _) => unsafe { x86::avx512::<1>(&t, &mut acc) },
                #[cfg(target_arch = "x86_64")]
                (Kernel::Avx2, 2) => unsafe { x86::avx2::<2>(&t, &mut acc) },
                #[cfg(target_arch = "x86_64")]
                (Kernel::Avx2, _) => unsafe { x86::avx2::<1>(&t, &mut acc) },
                _ => portable(&t, group, &mut acc),
            }
            for (r, values) in acc.iter().enumerate().take(group) {
                let at = (first + r) * self.columns + tile * TILE;
                unsafe { std::ptr::copy_nonoverlapping(values.as_ptr(), out.add(at), width) };
            }
            first += group;
        }
    }
}

/// Activation rows quantized to Q8_0, each row on its own (so a row's values never
/// depend on its neighbours), with what the biased-weight product needs.
pub struct QuantizedRows {
    k: usize,
    /// `len x k` quantized values.
    values: Vec<i8>,
    /// `len x blocks` scales.
    scales: Vec<f32>,
    /// `len x blocks`: `-128 x` the block's sum, which removes the weights' bias.
    bias: Vec<i32>,
}

impl QuantizedRows {
    /// Quantizes the rows of `data` (`len x k`, row-major). Each 32-value block
    /// gets the scale `max |x| / 127` and values `x / scale` rounded to the
    /// nearest integer, ties to even.
    pub fn new(data: &[f32], k: usize) -> QuantizedRows {
        QuantizedRows::from_blocks(data.len(), k, |b, block| {
            block.copy_from_slice(&data[b * BLOCK..][..BLOCK])
        })
    }

    /// The rows of `silu(gate) * up` (a SwiGLU feed-forward's product, `silu(x)
    /// = x / (1 + e^-x)`), quantized as [`Self::new`] quantizes: computed block
    /// by block beside the quantization, on the pool's threads, instead of as two
    /// tensor passes on one.
    pub fn swiglu(gate: &[f32], up: &[f32], k: usize) -> QuantizedRows {
        assert_eq!(gate.len(), up.len(), "gate and up of other sizes");
        QuantizedRows::from_blocks(gate.len(), k, |b, block| {
            let (gate, up) = (&gate[b * BLOCK..][..BLOCK], &up[b * BLOCK..][..BLOCK]);
            for ((x, &g), &u) in block.iter_mut().zip(gate).zip(up) {
                *x = g / ((-g).exp() + 1.0) * u;
            }
        })
    }

    /// Quantizes `len` values (rows of `k`), block `b`'s values written by
    /// `values(b, ..)`; blocks are independent, so large inputs are spread over
    /// candle's pool.
    fn from_blocks(
        len: usize,
        k: usize,
        values: impl Fn(usize, &mut [f32; BLOCK]) + Sync,
    ) -> QuantizedRows {
        assert!(k > 0 && k.is_multiple_of(BLOCK) && len.is_multiple_of(k));
        let blocks = len / BLOCK;
        let mut rows = QuantizedRows {
            k,
            values: vec![0i8; len],
            scales: vec![0f32; blocks],
            bias: vec![0i32; blocks],
        };
        let (values_at, scales_at, bias_at) = (
            rows.values.as_mut_ptr() as usize,
            rows.scales.as_mut_ptr() as usize,
            rows.bias.as_mut_ptr() as usize,
        );
        let run = |range: std::ops::Range<usize>| {
            let mut block = [0f32; BLOCK];
            for b in range {
                values(b, &mut block);
                // Safety: block `b` writes only its own values, scale and bias,
                // and the pool returns after every range is done.
                unsafe {
                    let out = std::slice::from_raw_parts_mut(
                        (values_at as *mut i8).add(b * BLOCK),
                        BLOCK,
                    );
                    let (scale, bias) = quantize_block(&block, out);
                    *(scales_at as *mut f32).add(b) = scale;
                    *(bias_at as *mut i32).add(b) = bias;
                }
            }
        };
        // Waking the pool costs a few microseconds: one thread for one row.
        if len < 4096 {
            run(0..blocks);
        } else {
            candle_core::utils::barrier_pool().execute_chunked(blocks, run);
        }
        rows
    }

    /// Rows held.
    pub fn len(&self) -> usize {
        self.values.len() / self.k
    }

    /// Whether no rows are held.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// One block's values, its scale and its bias (`-128 x` the sum of its values).
fn quantize_block(block: &[f32; BLOCK], out: &mut [i8]) -> (f32, i32) {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") {
        // Safety: the CPU has AVX2.
        return unsafe { quantize_block_avx2(block, out) };
    }
    quantize_block_here(block, out)
}

/// [`quantize_block`] compiled for AVX2: the same operations (maxima, one
/// product, a clamp, the rounding pair, a conversion), each exact or rounded
/// once whatever the width, so the same bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn quantize_block_avx2(block: &[f32; BLOCK], out: &mut [i8]) -> (f32, i32) {
    quantize_block_here(block, out)
}

#[inline(always)]
fn quantize_block_here(block: &[f32; BLOCK], out: &mut [i8]) -> (f32, i32) {
    // Eight running maxima, so the loop vectorizes (max is exact in any order).
    let mut lanes = [0f32; 8];
    for eight in block.chunks_exact(8) {
        for (m, x) in lanes.iter_mut().zip(eight) {
            *m = m.max(x.abs());
        }
    }
    let max = lanes.iter().fold(0f32, |m, &x| m.max(x));
    let scale = max / 127.0;
    let inverse = if scale == 0.0 { 0.0 } else { 1.0 / scale };
    for (q, &x) in out.iter_mut().zip(block) {
        // Adding and taking away 1.5 x 2^23 rounds to the nearest integer
        // (ties to even) in two vector instructions; NaN becomes 0.
        const ROUND: f32 = 12_582_912.0;
        *q = (((x * inverse).clamp(-127.0, 127.0) + ROUND) - ROUND) as i8;
    }
    (scale, -128 * out.iter().map(|&q| q as i32).sum::<i32>())
}

/// Which instructions compute the integer dot products (the results are the same).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// 512-bit `vpdpbusd`: 16 columns x 4 bytes per instruction.
    Avx512Vnni,
    /// 256-bit `vpmaddubsw` with the sign trick.
    Avx2,
    /// Plain Rust.
    Portable,
}

impl Kernel {
    /// The fastest kernel this CPU runs.
    pub fn detect() -> Kernel {
        #[cfg(target_arch = "x86_64")]
        {
            use std::sync::OnceLock;
            static DETECTED: OnceLock<Kernel> = OnceLock::new();
            *DETECTED.get_or_init(|| {
                if is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx512bw")
                    && is_x86_feature_detected!("avx512vnni")
                {
                    Kernel::Avx512Vnni
                } else if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                    Kernel::Avx2
                } else {
                    Kernel::Portable
                }
            })
        }
        #[cfg(not(target_arch = "x86_64"))]
        Kernel::Portable
    }

    /// Every kernel this CPU can run, fastest first.
    pub fn available() -> Vec<Kernel> {
        let mut all = vec![Kernel::Portable];
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                all.insert(0, Kernel::Avx2);
            }
            if Kernel::detect() == Kernel::Avx512Vnni {
                all.insert(0, Kernel::Avx512Vnni);
            }
        }
        all
    }
}

/// One weight tile and the rows `first..first + R` it meets.
#[derive(Clone, Copy)]
struct TileRows<'a> {
    weights: &'a [u8],
    scales: &'a [f32],
    rows: &'a QuantizedRows,
    first: usize,
}

impl TileRows<'_> {
    fn blocks(&self) -> usize {
        self.rows.k / BLOCK
    }

    fn row_scale(&self, r: usize, b: usize) -> f32 {
        self.rows.scales[(self.first + r) * self.blocks() + b]
    }

    fn row_bias(&self, r: usize, b: usize) -> i32 {
        self.rows.bias[(self.first + r) * self.blocks() + b]
    }
}

/// The reference arithmetic, in plain Rust.
fn portable(t: &TileRows<'_>, group: usize, acc: &mut [[f32; TILE]; ROW_GROUP]) {
    for (r, acc) in acc.iter_mut().enumerate().take(group) {
        for b in 0..t.blocks() {
            let tile = &t.weights[b * TILE_BLOCK_BYTES..][..TILE_BLOCK_BYTES];
            let a = &t.rows.values[(t.first + r) * t.rows.k + b * BLOCK..][..BLOCK];
            for (lane, acc) in acc.iter_mut().enumerate() {
                let mut dot = t.row_bias(r, b);
                for g in 0..BLOCK / 4 {
                    for i in 0..4 {
                        let w = tile[g * TILE * 4 + lane * 4 + i] as i32;
                        dot += w * a[4 * g + i] as i32;
                    }
                }
                let scale = t.scales[b * TILE + lane] * t.row_scale(r, b);
                *acc = scale.mul_add(dot as f32, *acc);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{TileRows, BLOCK, ROW_GROUP, TILE, TILE_BLOCK_BYTES};
    use std::arch::x86_64::*;

    /// Where row `r`'s values, scales and biases start (the kernels read them by
    /// pointer: bounds checks in the inner loop cost a third of the time).
    struct RowPointers<const R: usize> {
        values: [*const i32; R],
        scales: [*const f32; R],
        bias: [*const i32; R],
    }

    impl<const R: usize> RowPointers<R> {
        fn new(t: &TileRows<'_>) -> Self {
            let rows = t.rows;
            let blocks = t.blocks();
            assert!(t.first + R <= rows.len());
            RowPointers {
                values: std::array::from_fn(|r| {
                    rows.values[(t.first + r) * rows.k..].as_ptr() as *const i32
                }),
                scales: std::array::from_fn(|r| rows.scales[(t.first + r) * blocks..].as_ptr()),
                bias: std::array::from_fn(|r| rows.bias[(t.first + r) * blocks..].as_ptr()),
            }
        }
    }

    /// `R` rows against one tile, 16 columns per register.
    ///
    /// # Safety
    /// The CPU has AVX-512 F, BW and VNNI.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub unsafe fn avx512<const R: usize>(t: &TileRows<'_>, out: &mut [[f32; TILE]; ROW_GROUP]) {
        let rows = RowPointers::<R>::new(t);
        let blocks = t.blocks();
        assert_eq!(t.weights.len(), blocks * TILE_BLOCK_BYTES);
        assert_eq!(t.scales.len(), blocks * TILE);
        let mut acc = [_mm512_setzero_ps(); R];
        // Safety (every read below): the asserts above bound the tile's blocks, and
        // each row holds `blocks` blocks of 32 values, scales and biases.
        unsafe {
            for b in 0..blocks {
                let tile = t.weights.as_ptr().add(b * TILE_BLOCK_BYTES);
                let mut dot: [__m512i; R] =
                    std::array::from_fn(|r| _mm512_set1_epi32(*rows.bias[r].add(b)));
                for g in 0..BLOCK / 4 {
                    let w = _mm512_loadu_si512(tile.add(g * TILE * 4) as *const _);
                    for (r, dot) in dot.iter_mut().enumerate() {
                        let a = rows.values[r].add(b * BLOCK / 4 + g).read_unaligned();
                        *dot = _mm512_dpbusd_epi32(*dot, w, _mm512_set1_epi32(a));
                    }
                }
                let w_scale = _mm512_loadu_ps(t.scales.as_ptr().add(b * TILE));
                for r in 0..R {
                    let scale = _mm512_mul_ps(w_scale, _mm512_set1_ps(*rows.scales[r].add(b)));
                    acc[r] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(dot[r]), acc[r]);
                }
            }
            for r in 0..R {
                _mm512_storeu_ps(out[r].as_mut_ptr(), acc[r]);
            }
        }
    }

    /// `R` rows (at most 2) against one tile, as two halves of 8 columns.
    ///
    /// `vpmaddubsw` would overflow on the biased weights (255 x 127, twice), so they
    /// are unbiased back to signed bytes and multiplied by the sign trick: |w| times
    /// `a` with w's sign, exact in 16 bits since |w| <= 128 and |a| <= 127. The
    /// signed sum is the integer the biased product reaches after its correction.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn avx2<const R: usize>(t: &TileRows<'_>, out: &mut [[f32; TILE]; ROW_GROUP]) {
        let rows = RowPointers::<R>::new(t);
        let blocks = t.blocks();
        assert_eq!(t.weights.len(), blocks * TILE_BLOCK_BYTES);
        assert_eq!(t.scales.len(), blocks * TILE);
        let mut acc = [[_mm256_setzero_ps(); 2]; R];
        let unbias = _mm256_set1_epi8(0x80u8 as i8);
        let ones = _mm256_set1_epi16(1);
        // Safety: as in `avx512`.
        unsafe {
            for b in 0..blocks {
                let tile = t.weights.as_ptr().add(b * TILE_BLOCK_BYTES);
                let mut dot = [[_mm256_setzero_si256(); 2]; R];
                for g in 0..BLOCK / 4 {
                    let a: [__m256i; R] = std::array::from_fn(|r| {
                        _mm256_set1_epi32(rows.values[r].add(b * BLOCK / 4 + g).read_unaligned())
                    });
                    for half in 0..2 {
                        let biased =
                            _mm256_loadu_si256(tile.add(g * TILE * 4 + half * 32) as *const _);
                        let w = _mm256_xor_si256(biased, unbias);
                        let magnitude = _mm256_sign_epi8(w, w);
                        for (dot, a) in dot.iter_mut().zip(&a) {
                            let pairs = _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(*a, w));
                            dot[half] = _mm256_add_epi32(dot[half], _mm256_madd_epi16(pairs, ones));
                        }
                    }
                }
                for r in 0..R {
                    let row_scale = _mm256_set1_ps(*rows.scales[r].add(b));
                    for half in 0..2 {
                        let w_scale = _mm256_loadu_ps(t.scales.as_ptr().add(b * TILE + half * 8));
                        let scale = _mm256_mul_ps(w_scale, row_scale);
                        let dot = _mm256_cvtepi32_ps(dot[r][half]);
                        acc[r][half] = _mm256_fmadd_ps(scale, dot, acc[r][half]);
                    }
                }
            }
            for (out, acc) in out.iter_mut().zip(&acc) {
                _mm256_storeu_ps(out.as_mut_ptr(), acc[0]);
                _mm256_storeu_ps(out.as_mut_ptr().add(8), acc[1]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
    use candle_core::{Device, Module, Tensor};

    /// Deterministic values in [-1, 1), a few of them large.
    fn values(seed: u64, n: usize) -> Vec<f32> {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|i| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let x = (state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0;
                if i % 97 == 0 {
                    x * 40.0
                } else {
                    x
                }
            })
            .collect()
    }

    fn quantized(columns: usize, k: usize) -> (QTensor, PackedQ8_0) {
        let w = Tensor::from_vec(values(7, columns * k), (columns, k), &Device::Cpu).unwrap();
        let q = QTensor::quantize(&w, GgmlDType::Q8_0).unwrap();
        let packed = PackedQ8_0::from_blocks(&q.data().unwrap(), columns, k).unwrap();
        (q, packed)
    }

    #[test]
    fn kernels_agree_bit_for_bit_and_rows_do_not_depend_on_their_batch() {
        // 40 columns: two whole tiles and a partial one.
        let (columns, k) = (40, 96);
        let (_, packed) = quantized(columns, k);
        let data = values(3, 9 * k);
        let all = QuantizedRows::new(&data, k);
        let kernels = Kernel::available();
        assert!(kernels.contains(&Kernel::Portable));
        let mut reference = vec![0f32; 9 * columns];
        packed.matmul_with(Kernel::Portable, &all, &mut reference);
        for &kernel in &kernels {
            let mut out = vec![0f32; 9 * columns];
            packed.matmul_with(kernel, &all, &mut out);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&out), bits(&reference), "{kernel:?}");
            // Any batch size, any position in it: the same bits per row.
            for len in 1..=9 {
                for first in [0, 9 - len] {
                    let rows = QuantizedRows::new(&data[first * k..(first + len) * k], k);
                    let mut part = vec![0f32; len * columns];
                    packed.matmul_with(kernel, &rows, &mut part);
                    assert_eq!(
                        bits(&part),
                        bits(&reference[first * columns..(first + len) * columns]),
                        "{kernel:?}, rows {first}..{}",
                        first + len
                    );
                }
            }
        }
    }

    #[test]
    fn the_product_is_candles_within_rounding() {
        let (columns, k) = (48, 576);
        let (q, packed) = quantized(columns, k);
        let data = values(11, 5 * k);
        // The exact product with the quantized weights.
        let w: Vec<f32> = q
            .dequantize(&Device::Cpu)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        let x = Tensor::from_vec(data.clone(), (5, k), &Device::Cpu).unwrap();
        let theirs: Vec<f32> = QMatMul::from_qtensor(q)
            .unwrap()
            .forward(&x)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        let mut ours = vec![0f32; 5 * columns];
        packed.matmul(&QuantizedRows::new(&data, k), &mut ours);
        let dense: Vec<f32> = (0..5 * columns)
            .map(|i| {
                let (r, c) = (i / columns, i % columns);
                (0..k).map(|j| data[r * k + j] * w[c * k + j]).sum()
            })
            .collect();
        // Both quantize the activations to 8 bits; measured against the exact
        // product, ours is no farther off than candle's.
        let error = |v: &[f32]| -> f32 {
            v.iter()
                .zip(&dense)
                .map(|(a, b)| (a - b).abs())
                .sum::<f32>()
                / v.len() as f32
        };
        let scale = dense.iter().map(|x| x.abs()).sum::<f32>() / dense.len() as f32;
        assert!(error(&ours) < 0.05 * scale, "{} of {scale}", error(&ours));
        assert!(
            error(&ours) <= error(&theirs) * 1.1,
            "{} vs candle's {}",
            error(&ours),
            error(&theirs)
        );
    }

    #[test]
    fn rows_quantize_to_the_nearest_step_ties_to_even() {
        let mut row = [0f32; 32];
        row[..7].copy_from_slice(&[127.0, 0.5, 1.5, -2.5, -126.7, f32::NAN, 3.2]);
        let q = QuantizedRows::new(&row, 32);
        assert_eq!(q.scales, [1.0]);
        assert_eq!(&q.values[..7], &[127, 0, 2, -2, -127, 0, 3]);
        assert_eq!(q.bias, [-128 * 3]);
        let zero = QuantizedRows::new(&[0.0; 32], 32);
        assert_eq!((zero.scales[0], zero.values[0]), (0.0, 0));
    }

    /// Each block quantized alone, the slow way (as `rows_quantize...` pins).
    fn reference(data: &[f32], k: usize) -> (Vec<i8>, Vec<f32>, Vec<i32>) {
        let mut values = vec![0i8; data.len()];
        let (mut scales, mut bias) = (Vec::new(), Vec::new());
        for (block, out) in data.chunks_exact(BLOCK).zip(values.chunks_exact_mut(BLOCK)) {
            let (scale, b) = quantize_block_here(block.try_into().unwrap(), out);
            scales.push(scale);
            bias.push(b);
        }
        assert!(data.len().is_multiple_of(k));
        (values, scales, bias)
    }

    /// Large inputs are quantized on the pool's threads, SwiGLU's product
    /// beside it: the same bits as one block after another over candle's
    /// `silu(gate) * up`.
    #[test]
    fn pooled_and_fused_quantization_is_blockwise() {
        for rows in [1, 3, 9] {
            let k = 1536;
            let gate = values(rows as u64, rows * k);
            let up = values(rows as u64 + 50, rows * k);
            let q = QuantizedRows::new(&gate, k);
            assert_eq!((q.values, q.scales, q.bias), reference(&gate, k));
            let t = |v: &[f32]| Tensor::from_vec(v.to_vec(), (rows, k), &Device::Cpu).unwrap();
            let product: Vec<f32> = (candle_nn::ops::silu(&t(&gate)).unwrap() * t(&up))
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap();
            let fused = QuantizedRows::swiglu(&gate, &up, k);
            assert_eq!(
                (fused.values, fused.scales, fused.bias),
                reference(&product, k)
            );
        }
    }

    #[test]
    fn bad_shapes_are_refused() {
        assert!(PackedQ8_0::from_blocks(&[0; 34], 1, 16).is_err());
        assert!(PackedQ8_0::from_blocks(&[0; 33], 1, 32).is_err());
        assert!(PackedQ8_0::from_blocks(&[0; 34], 1, 32).is_ok());
    }
}
