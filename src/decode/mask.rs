//! Writing the grammar mask into a logits row where the row lives.
//!
//! On the CPU the row is copied out and disallowed entries are overwritten with
//! `-inf` in place. On a GPU the packed mask (one u32 word per 32 tokens, the layout
//! engines already use) is uploaded once per step and expanded and applied there
//! with candle ops, so only the masked row crosses back to the host.

use candle_core::{DType, Device, Tensor};

use super::DecodeError;

fn forward_error(e: candle_core::Error) -> DecodeError {
    DecodeError::Forward(super::model::candle_message(&e))
}

/// The masked row on the host. Ids past the mask's width are disallowed.
pub fn apply(logits: &Tensor, mask: Option<&[u32]>) -> Result<Vec<f32>, DecodeError> {
    let Some(mask) = mask else {
        return logits.to_vec1::<f32>().map_err(forward_error);
    };
    if logits.device().is_cpu() {
        let mut row = logits.to_vec1::<f32>().map_err(forward_error)?;
        apply_in_place(&mut row, mask);
        Ok(row)
    } else {
        apply_on_device(logits, mask)?
            .to_vec1::<f32>()
            .map_err(forward_error)
    }
}

/// The direct masked write.
pub fn apply_in_place(row: &mut [f32], mask: &[u32]) {
    for (chunk, &word) in row
        .chunks_mut(32)
        .zip(mask.iter().chain(std::iter::repeat(&0)))
    {
        if word == u32::MAX {
            continue;
        }
        for (bit, value) in chunk.iter_mut().enumerate() {
            if word & (1 << bit) == 0 {
                *value = f32::NEG_INFINITY;
            }
        }
    }
}

/// The mask applied with tensor ops on the logits' own device: word `w` bit `b` is
/// `floor(w / 2^b) mod 2`, exact in f64 for 32-bit words.
pub fn apply_on_device(logits: &Tensor, mask: &[u32]) -> Result<Tensor, DecodeError> {
    let device: &Device = logits.device();
    let width = logits.dims1().map_err(forward_error)?;
    let words = crate::sampling::constraint::mask_words(width);
    let mut packed = mask[..mask.len().min(words)].to_vec();
    packed.resize(words, 0);
    let bits = (|| {
        let packed = Tensor::new(packed.as_slice(), device)?
            .to_dtype(DType::F64)?
            .reshape((words, 1))?;
        let powers: Vec<f64> = (0..32).map(|b| f64::from(1u32 << b)).collect();
        let powers = Tensor::new(powers.as_slice(), device)?.reshape((1, 32))?;
        let shifted = packed.broadcast_div(&powers)?.floor()?;
        let halves = (&shifted / 2.0)?.floor()?;
        let bits = (shifted - (halves * 2.0)?)?;
        bits.flatten_all()?.narrow(0, 0, width)?.ge(0.5)
    })()
    .map_err(forward_error)?;
    let blocked = Tensor::full(f32::NEG_INFINITY, width, device).map_err(forward_error)?;
    bits.where_cond(logits, &blocked).map_err(forward_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_ops_match_the_direct_write() {
        let width = 70;
        let row: Vec<f32> = (0..width).map(|i| i as f32 * 0.5 - 3.0).collect();
        let mask = [0x8000_0001u32, u32::MAX, 0b101];
        let mut expected = row.clone();
        apply_in_place(&mut expected, &mask);
        assert_eq!(expected[0], -3.0);
        assert_eq!(expected[1], f32::NEG_INFINITY);
        assert_eq!(expected[31], 12.5);
        assert_eq!(expected[65], f32::NEG_INFINITY);
        assert_eq!(expected[66], 30.0);
        assert_eq!(expected[64], 29.0);
        let logits = Tensor::new(row.as_slice(), &Device::Cpu).unwrap();
        let got = apply_on_device(&logits, &mask)
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        assert_eq!(got, expected);
        // A short mask disallows the ids it does not cover.
        let mut short = row.clone();
        apply_in_place(&mut short, &[u32::MAX]);
        assert!(short[32..].iter().all(|v| *v == f32::NEG_INFINITY));
    }
}
