//! `rest_exchange_rate` and the bundled mock exchange-rate API (`toolforge mock-rest`).
//!
//! The tool has no special case for the mock: it calls `GET {base_url}/rates/{BASE}` and reads
//! `{"base", "date", "rates": {CODE: number}}`; any API with that shape works unchanged.

use std::time::Duration;

use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The rates the mock serves (fixed, so answers are deterministic), per 1 USD.
const USD_RATES: &[(&str, f64)] = &[
    ("USD", 1.0),
    ("EUR", 0.92),
    ("GBP", 0.79),
    ("JPY", 151.2),
    ("CAD", 1.36),
    ("AUD", 1.52),
    ("CHF", 0.88),
    ("INR", 83.1),
    ("MXN", 17.05),
];
/// The date the mock reports.
pub const MOCK_DATE: &str = "2026-01-15";

fn usd(code: &str) -> Option<f64> {
    USD_RATES.iter().find(|(c, _)| *c == code).map(|(_, r)| *r)
}

fn valid_code(code: &str) -> bool {
    code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase())
}

async fn rates(Path(base): Path<String>) -> Response {
    let base = base.to_ascii_uppercase();
    let Some(b) = usd(&base).filter(|_| valid_code(&base)) else {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"error": format!("unknown currency {base}")})),
        )
            .into_response();
    };
    let rates: serde_json::Map<String, serde_json::Value> = USD_RATES
        .iter()
        .map(|(c, r)| ((*c).to_owned(), json!(((r / b) * 1e6).round() / 1e6)))
        .collect();
    axum::Json(json!({"base": base, "date": MOCK_DATE, "rates": rates})).into_response()
}

/// The mock API's router: `GET /rates/{BASE}` and `GET /health`.
pub fn mock_router() -> axum::Router {
    axum::Router::new()
        .route("/rates/{base}", axum::routing::get(rates))
        .route("/health", axum::routing::get(|| async { "ok" }))
}

/// One exchange rate as the tool returns it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema, PartialEq)]
pub struct ExchangeRate {
    pub base: String,
    pub target: String,
    pub rate: f64,
    pub date: Option<String>,
    pub amount: Option<f64>,
    pub converted: Option<f64>,
    pub source: String,
}

#[derive(Debug, Deserialize)]
struct Wire {
    #[serde(default)]
    date: Option<String>,
    rates: std::collections::HashMap<String, f64>,
}

/// Why a rate could not be fetched; the message is what the caller sees.
#[derive(Debug, thiserror::Error)]
pub enum RestError {
    #[error("currency codes are three letters (like USD, EUR); got {0:?}")]
    BadCode(String),
    #[error("the exchange-rate API at {0} did not answer within {1:?}")]
    Timeout(String, Duration),
    #[error(
        "could not connect to the exchange-rate API at {0} (is `toolforge mock-rest` running?): {1}"
    )]
    Connect(String, String),
    #[error("the exchange-rate API answered HTTP {0}: {1}")]
    Status(u16, String),
    #[error("the exchange-rate API answered something that is not a rates document: {0}")]
    Garbage(String),
    #[error("the exchange-rate API has no rate from {0} to {1}")]
    NoRate(String, String),
}

/// Fetch the rate `base` → `target` from `base_url` (no trailing slash needed).
///
/// # Errors
/// Bad codes, a dead or slow API, or an answer of the wrong shape.
pub async fn fetch_rate(
    client: &reqwest::Client,
    base_url: &str,
    base: &str,
    target: &str,
    amount: Option<f64>,
    timeout: Duration,
) -> Result<ExchangeRate, RestError> {
    let base = base.trim().to_ascii_uppercase();
    let target = target.trim().to_ascii_uppercase();
    for c in [&base, &target] {
        if !valid_code(c) {
            return Err(RestError::BadCode(c.clone()));
        }
    }
    let url = format!("{}/rates/{base}", base_url.trim_end_matches('/'));
    let resp = client
        .get(&url)
        .timeout(timeout)
        .send()
        .await
        .map_err(|e| {
            if e.is_timeout() {
                RestError::Timeout(url.clone(), timeout)
            } else {
                RestError::Connect(url.clone(), e.to_string())
            }
        })?;
    let status = resp.status();
    let body = resp.bytes().await.map_err(|e| {
        if e.is_timeout() {
            RestError::Timeout(url.clone(), timeout)
        } else {
            RestError::Connect(url.clone(), e.to_string())
        }
    })?;
    if body.len() > 1024 * 1024 {
        return Err(RestError::Garbage(format!(
            "{} bytes is too large",
            body.len()
        )));
    }
    if !status.is_success() {
        let text = String::from_utf8_lossy(&body).chars().take(200).collect();
        return Err(RestError::Status(status.as_u16(), text));
    }
    let wire: Wire =
        serde_json::from_slice(&body).map_err(|e| RestError::Garbage(e.to_string()))?;
    let rate = *wire
        .rates
        .get(&target)
        .filter(|r| r.is_finite() && **r > 0.0)
        .ok_or_else(|| RestError::NoRate(base.clone(), target.clone()))?;
    Ok(ExchangeRate {
        base,
        target,
        rate,
        date: wire.date,
        amount,
        converted: amount.map(|a| (a * rate * 100.0).round() / 100.0),
        source: url,
    })
}

/// Serve the mock API on `listener` until `shutdown` completes.
///
/// # Errors
/// The HTTP server fails.
pub async fn serve_mock(
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(
        // Replies go out in small writes (headers, then SSE events): without TCP_NODELAY the
        // kernel holds each later write ~40 ms for the client's delayed ACK.
        axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        }),
        mock_router(),
    )
    .with_graceful_shutdown(shutdown)
    .await
}
