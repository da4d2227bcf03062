//! Continuous batching: one decode thread runs every admitted request, one step
//! each per round; new requests join between rounds and a finished, stopped or
//! abandoned one leaves at once, so a long generation never holds a short one
//! back and a slot is free the round after its client goes away.
//!
//! The HTTP side never touches the model: it submits [`Job`]s and reads
//! [`JobEvent`]s from a channel per job. Dropping that channel's receiver (the
//! client disconnected, its future was dropped) cancels the job at the next
//! round. The queue in front of the batch is bounded: past `max_queue` waiting
//! jobs, [`Scheduler::submit`] refuses (the server answers 429).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::sync::Arc;

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use super::error::ApiError;
use super::metrics::Metrics;
use crate::decode::generate::TokenLogprobs;
use crate::decode::{ActiveRequest, Event, FinishReason, Generation, Generator, Request};

/// One generation to run.
pub struct Job {
    /// Its stop strings are in its sampling settings: the decode loop cuts the
    /// output at one and holds back text that may begin one.
    pub request: Request,
    /// Which of the request's `n` choices this is (events carry it).
    pub choice: usize,
    pub events: EventSender,
}

/// What a job reports, in order: text as it is written, then the end.
#[derive(Debug)]
pub enum JobEvent {
    /// New text, and the logprobs of the tokens written since the last event
    /// (when asked for; text held back at a stop string may come later).
    Text(String, Vec<TokenLogprobs>),
    /// The finished generation; its `text` is what was streamed (cut at a stop
    /// string).
    Done(Box<Generation>),
}

/// The handle the HTTP side submits through.
#[derive(Clone)]
pub struct Scheduler {
    queue: mpsc::Sender<Job>,
    waiting: Arc<AtomicUsize>,
    max_queue: usize,
    metrics: Arc<Metrics>,
}

/// Where a request's jobs report: `(choice, event)`.
pub type EventSender = UnboundedSender<(usize, JobEvent)>;
/// What the HTTP side reads a request's events from.
pub type EventReceiver = UnboundedReceiver<(usize, JobEvent)>;

/// A channel for one request's events.
pub fn job_channel() -> (EventSender, EventReceiver) {
    tokio::sync::mpsc::unbounded_channel()
}

impl Scheduler {
    /// Starts the decode thread: at most `max_batch` requests run at once, at
    /// most `max_queue` wait.
    pub fn start(
        generator: Arc<Generator>,
        max_batch: usize,
        max_queue: usize,
        metrics: Arc<Metrics>,
    ) -> Scheduler {
        let (queue, jobs) = mpsc::channel();
        let waiting = Arc::new(AtomicUsize::new(0));
        let worker = Worker {
            generator,
            jobs,
            waiting: Arc::clone(&waiting),
            max_batch: max_batch.max(1),
            metrics: Arc::clone(&metrics),
            active: Vec::new(),
            slots: Vec::new(),
        };
        std::thread::Builder::new()
            .name("stencil-decode".into())
            .spawn(move || worker.run())
            .expect("spawning the decode thread");
        Scheduler {
            queue,
            waiting,
            max_queue,
            metrics,
        }
    }

    /// Queues `jobs` together (the `n` choices of one request), or none of them
    /// when the queue has no room for all.
    pub fn submit(&self, jobs: Vec<Job>) -> Result<(), ApiError> {
        let n = jobs.len();
        let before = self.waiting.fetch_add(n, Ordering::SeqCst);
        if before + n > self.max_queue {
            self.waiting.fetch_sub(n, Ordering::SeqCst);
            return Err(ApiError::queue_full());
        }
        self.metrics
            .queue_depth
            .store(before + n, Ordering::Relaxed);
        for job in jobs {
            if self.queue.send(job).is_err() {
                return Err(ApiError::internal("the decode thread has stopped"));
            }
        }
        Ok(())
    }
}

/// A running job, beside its [`ActiveRequest`].
struct Slot {
    /// Text released this round, sent after the round with its logprobs.
    ready: String,
    /// Logprob records already sent.
    logprobs_sent: usize,
    choice: usize,
    events: EventSender,
    cancelled: bool,
}

struct Worker {
    generator: Arc<Generator>,
    jobs: Receiver<Job>,
    waiting: Arc<AtomicUsize>,
    max_batch: usize,
    metrics: Arc<Metrics>,
    /// The running requests and, at the same index, their jobs.
    active: Vec<ActiveRequest>,
    slots: Vec<Slot>,
}

impl Worker {
    fn run(mut self) {
        loop {
            if self.active.is_empty() {
                match self.jobs.recv() {
                    Ok(job) => self.admit(job),
                    // Every handle is gone: the server has shut down.
                    Err(_) => return,
                }
            }
            while self.active.len() < self.max_batch {
                match self.jobs.try_recv() {
                    Ok(job) => self.admit(job),
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                }
            }
            self.metrics
                .batch_size
                .store(self.active.len(), Ordering::Relaxed);
            self.round();
        }
    }

    fn admit(&mut self, job: Job) {
        let left = self.waiting.fetch_sub(1, Ordering::SeqCst) - 1;
        self.metrics.queue_depth.store(left, Ordering::Relaxed);
        match self.generator.begin(job.request) {
            Ok(active) => {
                self.active.push(active);
                self.slots.push(Slot {
                    ready: String::new(),
                    logprobs_sent: 0,
                    choice: job.choice,
                    events: job.events,
                    cancelled: false,
                });
            }
            Err(e) => {
                // Requests are checked before they are queued; this is a fault.
                let generation = Generation {
                    text: String::new(),
                    finish_reason: FinishReason::Error,
                    grammar_complete: false,
                    tokens: Vec::new(),
                    timings: Default::default(),
                    error: Some(e.to_string()),
                    logprobs: Vec::new(),
                    trace: Vec::new(),
                    reasoning_tokens: None,
                    stop_string: None,
                };
                let _ = job
                    .events
                    .send((job.choice, JobEvent::Done(Box::new(generation))));
            }
        }
    }

    /// One step of every running job, then the finished ones leave.
    fn round(&mut self) {
        let Worker {
            generator,
            active,
            slots,
            metrics,
            ..
        } = self;
        for (request, slot) in active.iter_mut().zip(slots.iter_mut()) {
            if slot.events.is_closed() {
                slot.cancelled = true;
                request.stop_early(FinishReason::Stop);
            }
        }
        let running = active.iter().filter(|r| !r.is_finished()).count();
        generator.advance(active, &mut |Event::Text { request, text }| {
            slots[request].ready.push_str(text);
        });
        metrics.steps.fetch_add(running as u64, Ordering::Relaxed);
        for (request, slot) in active.iter_mut().zip(slots.iter_mut()) {
            let logprobs = request.logprobs_so_far()[slot.logprobs_sent..].to_vec();
            slot.logprobs_sent += logprobs.len();
            if !slot.ready.is_empty() || !logprobs.is_empty() {
                let text = std::mem::take(&mut slot.ready);
                let _ = slot
                    .events
                    .send((slot.choice, JobEvent::Text(text, logprobs)));
            }
        }
        let mut i = 0;
        while i < self.active.len() {
            if !self.active[i].is_finished() {
                i += 1;
                continue;
            }
            let request = self.active.swap_remove(i);
            let slot = self.slots.swap_remove(i);
            let generation = self.generator.end(request);
            self.metrics.record(&generation);
            if slot.cancelled {
                self.metrics.count("cancelled");
                continue;
            }
            let _ = slot
                .events
                .send((slot.choice, JobEvent::Done(Box::new(generation))));
        }
        self.metrics
            .batch_size
            .store(self.active.len(), Ordering::Relaxed);
    }
}
