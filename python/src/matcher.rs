//! `stencil.Matcher`: one request's state over a compiled grammar
//! ([`TokenMatcher`]), and the batch fill.
//!
//! The state sits behind a mutex in a frozen class, so a batch can reach every
//! matcher with the GIL released and fill rows on the calling thread and, when
//! the rows left are long enough to pay for waking it, the thread pool (rayon),
//! each row a disjoint `&mut` of the caller's array. A matcher whose state panicked
//! mid-call is poisoned: later calls raise `RuntimeError` until `reset()`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use stencil::matcher::{StopPolicy, TokenMatcher};
use stencil::tables::TokenTables;

use crate::bitmask::with_mask;
use crate::compiler::Grammar;
use crate::guard;
use crate::tokenizer::TokenizerParts;

/// Token-level matching state for one request.
#[pyclass(frozen, module = "stencil._stencil")]
pub struct Matcher {
    state: Mutex<TokenMatcher>,
    tables: Arc<TokenTables>,
    tokenizer: Arc<TokenizerParts>,
    policy: StopPolicy,
}

fn stop_policy(name: &str) -> PyResult<StopPolicy> {
    match name.replace('_', "-").as_str() {
        "stop" => Ok(StopPolicy::Stop),
        "allow-continue" => Ok(StopPolicy::AllowContinue),
        "trailing-whitespace-then-eos" => Ok(StopPolicy::TrailingWhitespaceThenEos),
        _ => Err(PyValueError::new_err(format!(
            "stop_policy must be \"stop\", \"allow-continue\" or \
             \"trailing-whitespace-then-eos\", not {name:?}"
        ))),
    }
}

fn policy_name(policy: StopPolicy) -> &'static str {
    match policy {
        StopPolicy::Stop => "stop",
        StopPolicy::AllowContinue => "allow-continue",
        StopPolicy::TrailingWhitespaceThenEos => "trailing-whitespace-then-eos",
    }
}

impl Matcher {
    fn state(&self) -> PyResult<MutexGuard<'_, TokenMatcher>> {
        self.state.lock().map_err(|_| {
            PyRuntimeError::new_err(
                "this matcher is unusable: an earlier call failed inside stencil \
                 (call reset() to start it over)",
            )
        })
    }

    /// Fills `row` (checked to hold the vocabulary) for this matcher.
    fn fill_row(&self, row: &mut [u32]) -> PyResult<()> {
        self.state()?.fill_next_token_bitmask(row);
        Ok(())
    }

    fn words_needed(&self) -> usize {
        self.tables.vocab().len().div_ceil(32)
    }

    fn check_words(&self, words: usize) -> PyResult<()> {
        let need = self.words_needed();
        if words < need {
            return Err(PyValueError::new_err(format!(
                "bitmask rows have {words} words; the vocabulary of {} tokens needs {need}",
                self.tables.vocab().len()
            )));
        }
        Ok(())
    }
}

#[pymethods]
impl Matcher {
    /// A matcher at the start of `grammar`. `stop_policy`: "stop" (once the grammar
    /// accepts, only EOS or an allowed continuation), "allow-continue" (after
    /// acceptance anything may follow) or "trailing-whitespace-then-eos".
    #[new]
    #[pyo3(signature = (grammar, stop_policy = "stop"))]
    fn new(grammar: &Grammar, stop_policy: &str) -> PyResult<Matcher> {
        guard(|| {
            let policy = self::stop_policy(stop_policy)?;
            Ok(Matcher {
                state: Mutex::new(TokenMatcher::with_policy(
                    Arc::clone(&grammar.tables),
                    policy,
                )),
                tables: Arc::clone(&grammar.tables),
                tokenizer: Arc::clone(&grammar.tokenizer),
                policy,
            })
        })
    }

    /// Writes the allowed next tokens into row `index` of `bitmask` (words past the
    /// vocabulary come out 0). Returns nothing.
    #[pyo3(signature = (bitmask, index = 0))]
    fn fill_next_token_bitmask(
        &self,
        py: Python<'_>,
        bitmask: &Bound<'_, PyAny>,
        index: usize,
    ) -> PyResult<()> {
        guard(|| {
            with_mask(bitmask, |words, rows, width| {
                if index >= rows {
                    return Err(PyValueError::new_err(format!(
                        "row {index} is outside a bitmask of {rows} rows"
                    )));
                }
                self.check_words(width)?;
                let row = &mut words[index * width..(index + 1) * width];
                py.detach(|| self.fill_row(row))
            })
        })
    }

    /// Consumes `token` if it is allowed; `False` (state unchanged) if not, or if
    /// it is outside the vocabulary, or the matcher has terminated.
    fn accept_token(&self, token: u32) -> PyResult<bool> {
        guard(|| Ok(self.state()?.consume_token(token).is_ok()))
    }

    /// Consumes `tokens` in order up to the first refused one; returns how many
    /// were consumed (they stay consumed).
    fn accept_tokens(&self, tokens: Vec<u32>) -> PyResult<usize> {
        guard(|| {
            let mut state = self.state()?;
            Ok(tokens
                .iter()
                .take_while(|&&t| state.consume_token(t).is_ok())
                .count())
        })
    }

    /// How many leading tokens of `tokens` would be accepted; the state is
    /// unchanged (speculative decoding's draft check).
    fn validate_tokens(&self, tokens: Vec<u32>) -> PyResult<usize> {
        guard(|| Ok(self.state()?.validate_tokens(&tokens)))
    }

    /// Undoes the last `n` consumed tokens (EOS included); fewer if fewer were
    /// consumed.
    fn rollback(&self, n: usize) -> PyResult<()> {
        guard(|| {
            self.state()?.rollback(n);
            Ok(())
        })
    }

    /// Back to the start of the grammar (also recovers a poisoned matcher).
    fn reset(&self) -> PyResult<()> {
        guard(|| {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            *state = TokenMatcher::with_policy(Arc::clone(&self.tables), self.policy);
            drop(state);
            self.state.clear_poison();
            Ok(())
        })
    }

    /// An independent copy of this matcher's state.
    fn fork(&self) -> PyResult<Matcher> {
        guard(|| {
            let state = self.state()?.clone();
            Ok(Matcher {
                state: Mutex::new(state),
                tables: Arc::clone(&self.tables),
                tokenizer: Arc::clone(&self.tokenizer),
                policy: self.policy,
            })
        })
    }

    /// The grammar accepts what was consumed so far (EOS would be allowed).
    fn is_accepting(&self) -> PyResult<bool> {
        guard(|| Ok(self.state()?.is_accepting()))
    }

    /// EOS was consumed; the matcher allows only EOS and accepts nothing else.
    fn is_terminated(&self) -> PyResult<bool> {
        guard(|| Ok(self.state()?.is_terminated()))
    }

    /// Tokens consumed so far (EOS included): the most `rollback` can undo.
    #[getter]
    fn tokens_consumed(&self) -> PyResult<usize> {
        guard(|| Ok(self.state()?.tokens_consumed()))
    }

    #[getter]
    fn stop_policy(&self) -> &'static str {
        policy_name(self.policy)
    }

    /// Jump-forward: the canonical tokens of the bytes the grammar forces next, as
    /// the decode loop commits them: the forced bytes' longest valid UTF-8 prefix
    /// encoded by the tokenizer, without the last token (it could merge with what
    /// follows), cut where the grammar would refuse one; where no byte may come,
    /// the one special token the grammar allows, if it allows one. Not consumed.
    fn forced_tokens(&self, py: Python<'_>) -> PyResult<Vec<u32>> {
        guard(|| {
            py.detach(|| {
                let mut state = self.state()?;
                let bytes = state.forced_bytes();
                if bytes.is_empty() {
                    // No byte forced: perhaps one special token, alone allowed.
                    return Ok(state.forced_token().into_iter().collect());
                }
                let valid = match std::str::from_utf8(&bytes) {
                    Ok(s) => s,
                    Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default(),
                };
                let mut tokens = self.tokenizer.encode(valid);
                tokens.pop();
                let accepted = state.validate_tokens(&tokens);
                tokens.truncate(accepted);
                Ok(tokens)
            })
        })
    }

    fn __repr__(&self) -> PyResult<String> {
        guard(|| {
            let state = self.state()?;
            Ok(format!(
                "Matcher(tokens_consumed={}, accepting={}, terminated={}, stop_policy={:?})",
                state.tokens_consumed(),
                state.is_accepting(),
                state.is_terminated(),
                policy_name(self.policy)
            ))
        })
    }
}

/// Fills row `indices[i]` (row `i` without `indices`) of `bitmask` for
/// `matchers[i]`, all rows in parallel on stencil's thread pool with the GIL
/// released. Rows must be distinct.
#[pyfunction]
#[pyo3(signature = (matchers, bitmask, indices = None))]
pub(crate) fn fill_next_token_bitmask_batch(
    py: Python<'_>,
    matchers: Vec<Py<Matcher>>,
    bitmask: &Bound<'_, PyAny>,
    indices: Option<Vec<usize>>,
) -> PyResult<()> {
    guard(|| {
        let indices = indices.unwrap_or_else(|| (0..matchers.len()).collect());
        if indices.len() != matchers.len() {
            return Err(PyValueError::new_err(format!(
                "{} matchers but {} indices",
                matchers.len(),
                indices.len()
            )));
        }
        with_mask(bitmask, |words, rows, width| {
            let mut free: Vec<Option<&mut [u32]>> = if width == 0 {
                (0..rows).map(|_| Some(&mut [][..])).collect()
            } else {
                words.chunks_mut(width).map(Some).collect()
            };
            let mut jobs: Vec<RowJob<'_>> = Vec::with_capacity(matchers.len());
            for (matcher, &index) in matchers.iter().zip(&indices) {
                let matcher = matcher.get();
                matcher.check_words(width)?;
                let row = free
                    .get_mut(index)
                    .ok_or_else(|| {
                        PyValueError::new_err(format!(
                            "row {index} is outside a bitmask of {rows} rows"
                        ))
                    })?
                    .take()
                    .ok_or_else(|| {
                        PyValueError::new_err(format!("row {index} is given twice in indices"))
                    })?;
                jobs.push((matcher, row));
            }
            py.detach(|| fill_rows(jobs))
        })
    })
}

/// One row of a batch: the matcher and the bitmask row it fills.
type RowJob<'a> = (&'a Matcher, &'a mut [u32]);

/// A sleeping pool worker takes about 10-30 us to wake on the 2-core VMs measured,
/// and the caller as long again if it then waits for the worker: helpers are worth
/// waking only while more than this much work is left.
const HELP_WHEN_LEFT: Duration = Duration::from_micros(50);

/// Fills every job's row, the calling thread first on its own, then with the pool
/// once the rows left look long enough to pay for waking it.
///
/// Rows come off one shared counter. A batch of cached masks is a few tens of
/// microseconds in all, about what waking a worker (and later the caller) costs,
/// so handing every batch to the pool made such batches no faster than a serial
/// loop; a new position's mask can take milliseconds, and then the pool pays. The
/// caller estimates what is left from the rows it has filled and wakes the pool's
/// other threads when that passes [`HELP_WHEN_LEFT`]; from then on every thread
/// takes rows until none is left.
fn fill_rows(jobs: Vec<RowJob<'_>>) -> PyResult<()> {
    // Each job is taken once, by whichever thread draws its index.
    let jobs: Vec<Mutex<Option<RowJob<'_>>>> =
        jobs.into_iter().map(|job| Mutex::new(Some(job))).collect();
    let next = AtomicUsize::new(0);
    let first_error: Mutex<Option<PyErr>> = Mutex::new(None);
    // Fills one row off the counter; false once none is left.
    let fill_next = || {
        let Some(slot) = jobs.get(next.fetch_add(1, Ordering::Relaxed)) else {
            return false;
        };
        let job = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some((matcher, row)) = job {
            if let Err(error) = matcher.fill_row(row) {
                first_error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get_or_insert(error);
            }
        }
        true
    };
    let helpers = rayon::current_num_threads().saturating_sub(1);
    let started = Instant::now();
    let mut help = false;
    while fill_next() {
        let filled = next.load(Ordering::Relaxed).min(jobs.len());
        let left = jobs.len() - filled;
        if helpers > 0
            && left > 1
            && started.elapsed() * left as u32 / filled as u32 > HELP_WHEN_LEFT
        {
            help = true;
            break;
        }
    }
    if help {
        rayon::in_place_scope(|scope| {
            for _ in 0..helpers {
                scope.spawn(|_| while fill_next() {});
            }
            while fill_next() {}
        });
    }
    match first_error
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner)
    {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

/// For `benches/overhead.py`: the Rust call alone, `repeats` times on row 0 of
/// `bitmask`, each timed in nanoseconds (what a fill from Python is compared with).
#[pyfunction]
pub(crate) fn _time_rust_fill_ns(
    matcher: &Matcher,
    bitmask: &Bound<'_, PyAny>,
    repeats: usize,
) -> PyResult<Vec<u64>> {
    guard(|| {
        with_mask(bitmask, |words, _, width| {
            matcher.check_words(width)?;
            let row = &mut words[..width];
            let mut state = matcher.state()?;
            Ok((0..repeats)
                .map(|_| {
                    let start = std::time::Instant::now();
                    state.fill_next_token_bitmask(row);
                    start.elapsed().as_nanos() as u64
                })
                .collect())
        })
    })
}
