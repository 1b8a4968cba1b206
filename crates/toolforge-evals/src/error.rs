//! What can go wrong in a tool, named after the exception kinds of the seed's contract.
//!
//! Every message starts with the Python-style kind the contract names (`RuntimeError`,
//! `ImportError`, `ValueError`, `httpx.TimeoutException`, `httpx.HTTPStatusError`) so callers
//! written against the Python server, which match on those strings, keep working. The server
//! sends them back as tool results with `isError: true`; JSON-RPC errors are left to protocol
//! failures (unknown tool, malformed request). Also the text a failed HTTP exchange is reported
//! with (`describe`, `quote`).

/// A tool failure; its `Display` is the text the MCP client receives.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// No backend is configured at all.
    #[error(
        "RuntimeError: no adapter registered (set LM_STUDIO_SERVERS, TOGETHER_API_KEY or HF_TOKEN)"
    )]
    NoAdapter,
    /// No reachable server lists the model.
    #[error("RuntimeError: no server available for model {model:?}{hint}")]
    ModelUnavailable { model: String, hint: String },
    /// The server could not be reached, or the connection broke mid-answer.
    #[error("RuntimeError: {url}: {message}")]
    Transport { url: String, message: String },
    /// The server answered 4xx or 5xx.
    #[error("httpx.HTTPStatusError: HTTP {status} from {url}: {message}")]
    HttpStatus {
        status: u16,
        url: String,
        message: String,
    },
    /// The server's answer could not be read.
    #[error("RuntimeError: {url} sent an unreadable answer: {message}")]
    BadResponse { url: String, message: String },
    /// A tool with a `timeout_seconds` parameter ran past it.
    #[error("httpx.TimeoutException: {tool} exceeded timeout_seconds={seconds}")]
    RequestTimeout { tool: &'static str, seconds: u64 },
    /// A tool without such a parameter ran past its server-side limit.
    #[error("TimeoutError: {tool} did not finish within its {seconds} s limit")]
    ToolTimeout { tool: &'static str, seconds: f64 },
    /// No embedding backend is configured.
    #[error("ImportError: {0}")]
    EmbeddingUnavailable(String),
    /// The embedding backend failed.
    #[error("RuntimeError: embedding backend failed: {0}")]
    Embedding(String),
    /// An argument is out of its domain (empty baseline, unknown dimension, ...).
    #[error("ValueError: {0}")]
    InvalidArgument(String),
    /// A model's answer could not be interpreted (judge verdict, variants).
    #[error("ValueError: {0}")]
    Unparseable(String),
    /// The analysis refused its input (too few sentences, mismatched vectors, ...).
    #[error("ValueError: {0}")]
    Analysis(String),
    /// A selection catalog or case file could not be read or parsed.
    #[error("ValueError: {0}")]
    Grading(String),
}

/// Longest server text quoted in an error.
const MAX_QUOTED: usize = 300;

/// The error and its sources: reqwest's own text hides the cause ("connection refused").
pub(crate) fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

/// The server's error text: `{"error": {"message"}}`, `{"error": "..."}`, `{"detail"}`,
/// `{"message"}`, or the body itself, shortened.
pub(crate) fn quote(body: &str) -> String {
    let parsed = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.get("error"))
                .or_else(|| v.get("detail"))
                .or_else(|| v.get("message"))
                .and_then(|m| m.as_str().map(str::to_owned))
        });
    let text = parsed.unwrap_or_else(|| body.trim().to_owned());
    let mut out: String = text.chars().take(MAX_QUOTED).collect();
    if text.chars().count() > MAX_QUOTED {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_provider_error_shapes() {
        assert_eq!(quote(r#"{"error": {"message": "boom"}}"#), "boom");
        assert_eq!(quote(r#"{"error": "flat"}"#), "flat");
        assert_eq!(quote(r#"{"detail": "fastapi"}"#), "fastapi");
        assert_eq!(quote("  plain  "), "plain");
        assert_eq!(quote(&"x".repeat(400)).chars().count(), MAX_QUOTED + 1);
    }
}
