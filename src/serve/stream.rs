//! Server-sent events for `stream: true`: the job events of a request's choices
//! turned into JSON chunks as they arrive, then `data: [DONE]`.
//!
//! The stream owns the job channel's receiver, so when a client goes away and
//! the response is dropped, the receiver goes with it and the scheduler cancels
//! the request's jobs at its next round.

use std::collections::VecDeque;
use std::convert::Infallible;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use serde_json::Value;

use super::scheduler::{EventReceiver, JobEvent};
use crate::decode::Generation;

/// What an endpoint makes of its events.
pub trait Chunks: Send + 'static {
    /// Chunks for one event of `choice` (`Done` is the choice's last).
    fn on_event(&mut self, choice: usize, event: JobEvent) -> Vec<Value>;
    /// Chunks after every choice finished (usage), given the generations.
    fn at_end(&mut self, generations: &[Generation]) -> Vec<Value>;
    /// Whether each event is named by its chunk's `type` and the stream ends
    /// without `[DONE]` (the Responses API's shape) rather than unnamed chunks
    /// ending in `data: [DONE]` (the Chat Completions API's).
    fn typed_events(&self) -> bool {
        false
    }
}

struct State<C> {
    events: EventReceiver,
    chunks: C,
    ready: VecDeque<Event>,
    left: usize,
    finished: Vec<Generation>,
    closed: bool,
}

fn data(value: &Value) -> Event {
    Event::default().data(value.to_string())
}

fn typed(value: &Value) -> Event {
    match value.get("type").and_then(Value::as_str) {
        Some(kind) => Event::default().event(kind).data(value.to_string()),
        None => data(value),
    }
}

/// The SSE response for `n` choices.
pub fn respond<C: Chunks>(events: EventReceiver, n: usize, chunks: C) -> Response {
    let state = State {
        events,
        chunks,
        ready: VecDeque::new(),
        left: n,
        finished: Vec::new(),
        closed: false,
    };
    let body = stream::unfold(state, |mut s| async move {
        let event_of = if s.chunks.typed_events() { typed } else { data };
        loop {
            if let Some(event) = s.ready.pop_front() {
                return Some((Ok::<_, Infallible>(event), s));
            }
            if s.closed {
                return None;
            }
            if s.left == 0 {
                let end = s.chunks.at_end(&s.finished);
                s.ready.extend(end.iter().map(event_of));
                if !s.chunks.typed_events() {
                    s.ready.push_back(Event::default().data("[DONE]"));
                }
                s.closed = true;
                continue;
            }
            match s.events.recv().await {
                Some((choice, event)) => {
                    if let JobEvent::Done(g) = &event {
                        s.left -= 1;
                        s.finished.push((**g).clone());
                    }
                    let out = s.chunks.on_event(choice, event);
                    s.ready.extend(out.iter().map(event_of));
                }
                None => {
                    // The decode thread went away: end the stream with an error.
                    let e = super::error::ApiError::internal("the decode thread stopped");
                    s.ready.push_back(data(&e.body()));
                    s.closed = true;
                }
            }
        }
    });
    Sse::new(body)
        .keep_alive(KeepAlive::default())
        .into_response()
}
