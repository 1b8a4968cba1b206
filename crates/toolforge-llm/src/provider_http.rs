//! What the HTTP providers (`anthropic`, `openai`) share about a failed attempt: how it maps to
//! the retry policy of `toolforge-retry`, the one loop that retries it ([`with_retries`]), and
//! how the final error reads once attempts are used up.

use std::future::Future;
use std::time::{Duration, Instant};

use toolforge_retry::{Attempted, Decision, Failure as RetryFailure, RetryPolicy, SystemJitter};

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

/// Runs `attempt` until it succeeds or the policy gives up: `max_attempts` in all, full-jitter
/// waits from `base`, every attempt and wait within `timeout` of the call's start (each attempt
/// is handed the time left). A completion has no effect beyond its answer, so it counts as
/// idempotent; whether a failure is worth another attempt is the policy's call on its kind.
pub async fn with_retries<T, F, Fut>(
    provider: &'static str,
    max_attempts: u32,
    base: Duration,
    timeout: Duration,
    mut attempt: F,
) -> Result<T, ModelError>
where
    F: FnMut(Duration) -> Fut,
    Fut: Future<Output = Result<T, Failure>>,
{
    let policy = RetryPolicy { max_attempts, base };
    let deadline = Instant::now() + timeout;
    let mut attempts = 1;
    loop {
        let limit = deadline.saturating_duration_since(Instant::now());
        let Failure { error, kind } = match attempt(limit).await {
            Ok(answer) => return Ok(answer),
            Err(failure) => failure,
        };
        let call = Attempted {
            attempts,
            idempotent: true,
            now: Instant::now(),
            deadline,
        };
        let wait = match policy.decide(kind, call, &mut SystemJitter) {
            Decision::Retry { after } => after,
            Decision::GiveUp(why) => {
                tracing::debug!(provider, attempt = attempts, "not retried: {why}");
                return Err(gave_up(error, attempts));
            }
        };
        tracing::warn!(
            provider,
            attempt = attempts,
            max_attempts = policy.max_attempts,
            wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            error = %error,
            "Model call failed; retrying."
        );
        tokio::time::sleep(wait).await;
        attempts += 1;
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
