//! stencil's Q8_0 product (`decode::q8_matmul`) beside candle's `QMatMul` on the
//! same Q8_0 matrices, in SmolLM2-135M's three shapes (576 -> 1536 as gate/up,
//! 1536 -> 576 as down, 576 -> 49,152 as the output layer), for 1, 4, 8 and 16
//! rows: the batch sizes of a server's decode steps. Both on candle's CPU pool.

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::hint::black_box;
use stencil::decode::q8_matmul::{PackedQ8_0, QuantizedRows};

fn values(seed: u64, n: usize) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    for (k, columns) in [(576, 1536), (1536, 576), (576, 49_152)] {
        let w = Tensor::from_vec(values(1, columns * k), (columns, k), &Device::Cpu).unwrap();
        let q = QTensor::quantize(&w, GgmlDType::Q8_0).unwrap();
        let packed = PackedQ8_0::from_blocks(&q.data().unwrap(), columns, k).unwrap();
        let candle = QMatMul::from_qtensor(q).unwrap();
        let mut group = c.benchmark_group(format!("q8_0 {k}x{columns}"));
        for rows in [1usize, 4, 8, 16] {
            let data = values(2, rows * k);
            let x = Tensor::from_vec(data.clone(), (rows, k), &Device::Cpu).unwrap();
            group.bench_with_input(BenchmarkId::new("stencil", rows), &rows, |b, _| {
                let mut out = vec![0f32; rows * columns];
                b.iter(|| {
                    packed.matmul(&QuantizedRows::new(black_box(&data), k), &mut out);
                    black_box(&out);
                })
            });
            group.bench_with_input(BenchmarkId::new("candle", rows), &rows, |b, _| {
                b.iter(|| black_box(candle.forward(black_box(&x)).unwrap()))
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
