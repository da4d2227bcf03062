//! `stencil._stencil`: the native half of the Python package.
//!
//! This file owns the module's registration and the boundary rules every entry
//! point follows: [`guard`] runs the body under `catch_unwind`, so a Rust panic
//! becomes a `RuntimeError` (never pyo3's `PanicException`, never an abort), and
//! [`value_error`] turns the library's errors into `ValueError`s whose message is
//! the library's own (it carries the location: a JSON pointer, `line:column`).
//! The classes live beside it: [`tokenizer`] (the vocabulary), [`compiler`]
//! (grammars), [`matcher`] (per-request state and the bitmask), with the pure-Python
//! package `stencil/__init__.py` on top.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

mod bitmask;
mod compiler;
mod matcher;
mod tokenizer;

/// Runs `f`, turning a panic inside it into a Python `RuntimeError` that says
/// what panicked. Every `#[pyfunction]` and `#[pymethods]` body goes through it.
pub(crate) fn guard<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_string());
            Err(PyRuntimeError::new_err(format!(
                "stencil internal error (a Rust panic, caught at the Python boundary): {message}"
            )))
        }
    }
}

/// A library error as a Python `ValueError`, with the library's message.
pub(crate) fn value_error(error: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(error.to_string())
}

/// Panics inside the guard, for the tests that check no panic reaches Python:
/// on the calling thread, or (`in_worker=True`) inside a worker of the batch fill's
/// thread pool with the GIL released.
#[pyfunction]
#[pyo3(signature = (in_worker = false))]
fn _panic_for_test(py: Python<'_>, in_worker: bool) -> PyResult<()> {
    guard(|| {
        if in_worker {
            py.detach(|| {
                rayon::scope(|s| {
                    s.spawn(|_| panic!("forced by _panic_for_test (in a worker)"));
                })
            });
            Ok(())
        } else {
            panic!("forced by _panic_for_test")
        }
    })
}

#[pymodule]
fn _stencil(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<tokenizer::Tokenizer>()?;
    m.add_class::<compiler::Compiler>()?;
    m.add_class::<compiler::Grammar>()?;
    m.add_class::<matcher::Matcher>()?;
    m.add_function(wrap_pyfunction!(bitmask::allocate_token_bitmask, m)?)?;
    m.add_function(wrap_pyfunction!(matcher::fill_next_token_bitmask_batch, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_for_test, m)?)?;
    m.add_function(wrap_pyfunction!(matcher::_time_rust_fill_ns, m)?)?;
    Ok(())
}
