//! `POST /v1/check` (stencil's own): does `text` match a constraint given as
//! the chat endpoint takes it (`response_format`, `grammar` or `tools`), and if
//! not, where does it leave it: the `stencil check` answer, with line and column.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::constraint;
use super::error::ApiError;
use super::params::Body;
use super::AppState;
use crate::check::{check, line_column};
use crate::matcher::MatcherOptions;

pub async fn handle(State(state): State<Arc<AppState>>, bytes: Bytes) -> Response {
    let s = Arc::clone(&state);
    let answer = tokio::task::spawn_blocking(move || {
        let body = Body::parse(&bytes)?;
        let text = body
            .str("text")?
            .ok_or_else(|| ApiError::invalid("text", "`text` is required"))?
            .to_string();
        let format = body.get("response_format").map(|f| (f, "response_format"));
        let c = constraint::read(&body, format, s.tool_prompting.format, &s.compiler, None)?;
        let tables = c.tables.ok_or_else(|| {
            ApiError::invalid(
                "grammar",
                "give a constraint: response_format, grammar or tools",
            )
        })?;
        let report = check(
            tables.grammar(),
            text.as_bytes(),
            &MatcherOptions::default(),
        );
        let mut answer = json!(report);
        if let Some(offset) = report.offset {
            let (line, column) = line_column(text.as_bytes(), offset);
            answer["line"] = json!(line);
            answer["column"] = json!(column);
        }
        Ok::<_, ApiError>(answer)
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()));
    match answer {
        Ok(Ok(answer)) => Json(answer).into_response(),
        Ok(Err(e)) | Err(e) => state.refuse(e),
    }
}
