//! What the HTTP providers (`anthropic`, `openai`) share about a failed attempt: how it maps to
//! the retry policy of `toolforge-retry`, and how the final error reads once attempts are used
//! up.

use toolforge_retry::Failure as RetryFailure;

use crate::model::ModelError;

/// Longest API error text quoted in an error message.
pub const MAX_QUOTED: usize = 300;

/// What one attempt ended with, when it did not succeed: the error, and what it means to the
/// retry policy of `toolforge-retry`.
pub struct Failure {
    pub error: ModelError,
    pub kind: RetryFailure,
}

impl Failure {
    /// A failure that sending the same request again would not change.
    pub fn fatal(error: ModelError) -> Self {
        Self {
            error,
            kind: RetryFailure::Rejected,
        }
    }
}

/// A request that failed in transport: only a refused connection proves it never left.
pub fn transport_kind(e: &reqwest::Error) -> RetryFailure {
    if e.is_connect() {
        RetryFailure::NotSent
    } else if e.is_timeout() {
        RetryFailure::Timeout
    } else {
        RetryFailure::Network
    }
}

/// The error returned once the attempts are used up, saying how many there were.
pub fn gave_up(error: ModelError, attempts: u32) -> ModelError {
    match error {
        ModelError::Overloaded {
            provider,
            status,
            message,
            ..
        } => ModelError::Overloaded {
            provider,
            status,
            attempts,
            message,
        },
        ModelError::Http {
            provider,
            status,
            message,
        } if attempts > 1 => ModelError::Http {
            provider,
            status,
            message: format!("{message} (gave up after {attempts} attempts)"),
        },
        ModelError::Transport { provider, message } if attempts > 1 => ModelError::Transport {
            provider,
            message: format!("{message} (gave up after {attempts} attempts)"),
        },
        other => other,
    }
}

/// At most [`MAX_QUOTED`] characters of an API's error text.
pub fn quote(text: &str) -> String {
    text.chars().take(MAX_QUOTED).collect()
}

/// The error and its sources: reqwest's own text ("error sending request") hides the cause
/// ("connection refused") one level down.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
