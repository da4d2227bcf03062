//! `stencil serve`: an OpenAI-compatible HTTP server whose every structured
//! output is valid by construction.
//!
//! The pieces, in the order a request meets them: `params` reads the body's
//! fields (typed, named errors), `constraint` compiles `response_format`,
//! `grammar` or `tools` with the server's one [`Compiler`], `prompt` renders
//! the messages through the model's chat template, `run` checks the budget and
//! queues one job per choice on the `scheduler` (continuous batching on one
//! decode thread), and the endpoint (`chat`, `completions`, `responses`)
//! answers whole or as server-sent events (`stream`). Errors take OpenAI's
//! shape ([`error`]) so the `openai` SDK raises the class a client expects.
//! `check` answers "where does this text leave the grammar", and `/` serves a
//! page (`page.html`, plain HTML and JS) that chats under a constraint and checks.
//!
//! axum + tokio serve HTTP; the model runs on its own thread, never on the async
//! runtime, so a slow step cannot stall accepting or streaming.

mod chat;
mod check;
mod completions;
mod constraint;
pub mod error;
mod metrics;
mod params;
mod prompt;
mod responses;
mod run;
mod scheduler;
mod stream;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;

use crate::decode::Generator;
use crate::frontend::tool_calls::{ToolCallFormat, ToolPrompting};
use crate::Compiler;
use error::ApiError;
use metrics::Metrics;
use scheduler::Scheduler;

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub host: String,
    pub port: u16,
    /// Requests decoded at once.
    pub max_batch: usize,
    /// Requests waiting beyond the batch before new ones get 429.
    pub max_queue: usize,
    /// Bearer token every `/v1` request must carry.
    pub api_key: Option<String>,
    /// Tokens of prompt plus output a request may use.
    pub ctx: usize,
    /// The name `/v1/models` lists and answers carry.
    pub model_name: String,
    /// Largest request body, in bytes.
    pub body_limit: usize,
    /// The tool-call format to use instead of the chat template's.
    pub tool_format: Option<ToolCallFormat>,
    /// Most prompt tokens a request feeds per step: a long prompt joins the
    /// running batch in chunks instead of stalling it.
    pub prefill_chunk: usize,
    /// Bytes of recent prompts' key/value rows kept for prompts that begin
    /// alike ([`crate::decode::PrefixCache`]); 0 keeps none.
    pub prompt_cache_bytes: usize,
}

/// What every handler shares.
pub struct AppState {
    generator: Arc<Generator>,
    compiler: Compiler,
    scheduler: Scheduler,
    metrics: Arc<Metrics>,
    options: ServeOptions,
    tool_prompting: ToolPrompting,
}

impl AppState {
    /// The error response, counted.
    fn refuse(&self, e: ApiError) -> Response {
        self.metrics.count(&e.status.as_u16().to_string());
        e.into_response()
    }
}

/// The router over `generator` (also what tests drive without a socket).
pub fn router(generator: Generator, options: ServeOptions) -> Router {
    let generator = Arc::new(
        generator
            .with_prefill_chunk(options.prefill_chunk)
            .with_prefix_cache(options.prompt_cache_bytes),
    );
    let metrics = Arc::new(Metrics::default());
    let scheduler = Scheduler::start(
        Arc::clone(&generator),
        options.max_batch,
        options.max_queue,
        Arc::clone(&metrics),
    );
    let tool_prompting =
        ToolPrompting::for_template(generator.tokenizer().chat_template(), options.tool_format);
    let state = Arc::new(AppState {
        compiler: Compiler::new(Arc::clone(generator.tokenizer().vocab())),
        generator,
        scheduler,
        metrics,
        tool_prompting,
        options: options.clone(),
    });
    let api = Router::new()
        .route("/v1/chat/completions", post(chat::handle))
        .route("/v1/completions", post(completions::handle))
        .route("/v1/responses", post(responses::handle))
        .route("/v1/models", get(models))
        .route("/v1/check", post(check::handle))
        .route("/metrics", get(metrics_text))
        .route_layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            authorize,
        ));
    Router::new()
        .merge(api)
        .route("/health", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/", get(|| async { Html(include_str!("page.html")) }))
        .fallback(|| async {
            ApiError {
                status: StatusCode::NOT_FOUND,
                message: "no such endpoint".into(),
                param: None,
                code: None,
                retry_after: None,
            }
        })
        .layer(axum::extract::DefaultBodyLimit::max(options.body_limit))
        .with_state(state)
}

async fn authorize(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    if let Some(key) = &state.options.api_key {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if given != Some(key.as_str()) {
            return state.refuse(ApiError::unauthorized());
        }
    }
    next.run(request).await
}

async fn models(State(state): State<Arc<AppState>>) -> Json<serde_json::Value> {
    Json(json!({
        "object": "list",
        "data": [{
            "id": state.options.model_name,
            "object": "model",
            "created": 0,
            "owned_by": "stencil",
        }],
    }))
}

async fn metrics_text(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
}

/// Serves until SIGTERM or Ctrl-C, then lets requests in flight finish.
pub fn serve(generator: Generator, options: ServeOptions) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async move {
        let address = format!("{}:{}", options.host, options.port);
        let listener = tokio::net::TcpListener::bind(&address)
            .await
            .map_err(|e| format!("cannot listen on {address}: {e}"))?;
        let app = router(generator, options);
        eprintln!("stencil serve: listening on http://{address}");
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown_signal())
            .await
            .map_err(|e| format!("server error: {e}"))
    })
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = terminate => {},
    }
    eprintln!("stencil serve: draining requests in flight, then exiting");
}
