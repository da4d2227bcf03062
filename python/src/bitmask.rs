//! The token bitmask as Python hands it over: an int32 (or uint32) array of shape
//! `[batch, words]` or `[words]`, C-contiguous and writable, written in place.
//!
//! Layout (XGrammar's and llguidance's): bit `t % 32` of word `t / 32` is token
//! `t`. A numpy array is borrowed through the `numpy` crate (which also refuses a
//! read-only array and one already borrowed mutably); anything else with a
//! `.numpy()` method (a torch CPU tensor) is viewed through it, which shares the
//! tensor's memory: no copy either way.

use numpy::{PyArray2, PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::guard;

/// Runs `f` on the mask's words as `u32`s with its shape `(rows, words)` (a 1-D
/// mask is one row).
pub(crate) fn with_mask<R>(
    mask: &Bound<'_, PyAny>,
    f: impl FnOnce(&mut [u32], usize, usize) -> PyResult<R>,
) -> PyResult<R> {
    if let Ok(array) = mask.cast::<PyArrayDyn<i32>>() {
        let (rows, words) = shape(array.shape())?;
        c_contiguous(array.is_c_contiguous())?;
        let mut borrowed = array.try_readwrite().map_err(borrow_error)?;
        let slice = borrowed.as_slice_mut().map_err(contiguity_error)?;
        // SAFETY: i32 and u32 have the same size and alignment, and every bit
        // pattern is valid for both; the borrow is exclusive for the call.
        let words_u32 =
            unsafe { std::slice::from_raw_parts_mut(slice.as_mut_ptr().cast(), slice.len()) };
        return f(words_u32, rows, words);
    }
    if let Ok(array) = mask.cast::<PyArrayDyn<u32>>() {
        let (rows, words) = shape(array.shape())?;
        c_contiguous(array.is_c_contiguous())?;
        let mut borrowed = array.try_readwrite().map_err(borrow_error)?;
        let slice = borrowed.as_slice_mut().map_err(contiguity_error)?;
        return f(slice, rows, words);
    }
    if mask.is_instance_of::<numpy::PyUntypedArray>() {
        return Err(PyTypeError::new_err(
            "the bitmask must be an int32 (or uint32) array; allocate it with \
             stencil.allocate_token_bitmask",
        ));
    }
    if let Ok(view) = mask.call_method0("numpy") {
        if view.is_instance_of::<numpy::PyUntypedArray>() {
            return with_mask(&view, f);
        }
    }
    Err(PyTypeError::new_err(format!(
        "the bitmask must be a numpy array or a CPU torch tensor of int32, not {}",
        mask.get_type().name()?
    )))
}

fn shape(shape: &[usize]) -> PyResult<(usize, usize)> {
    match *shape {
        [words] => Ok((1, words)),
        [rows, words] => Ok((rows, words)),
        _ => Err(PyValueError::new_err(format!(
            "the bitmask must have shape [batch, words] or [words], not {shape:?}"
        ))),
    }
}

/// `as_slice_mut` also takes Fortran order, whose words are not rows: refused here.
fn c_contiguous(yes: bool) -> PyResult<()> {
    if yes {
        Ok(())
    } else {
        Err(contiguity_error(()))
    }
}

fn borrow_error(error: numpy::BorrowError) -> PyErr {
    PyValueError::new_err(format!(
        "the bitmask cannot be written in place ({error}): it must be writable"
    ))
}

fn contiguity_error<E>(_: E) -> PyErr {
    PyValueError::new_err("the bitmask must be C-contiguous (rows of consecutive words)")
}

/// An int32 bitmask `[batch, ceil(vocab_size / 32)]`, every bit set (all tokens
/// allowed, as llguidance's and XGrammar's allocators leave it): rows a matcher
/// does not fill constrain nothing.
#[pyfunction]
pub(crate) fn allocate_token_bitmask(
    py: Python<'_>,
    batch: usize,
    vocab_size: usize,
) -> PyResult<Bound<'_, PyArray2<i32>>> {
    guard(|| {
        let array = PyArray2::<i32>::zeros(py, [batch, vocab_size.div_ceil(32)], false);
        {
            let mut words = array.try_readwrite().map_err(borrow_error)?;
            words.as_slice_mut().map_err(contiguity_error)?.fill(-1);
        }
        Ok(array)
    })
}
