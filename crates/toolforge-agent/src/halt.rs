//! Why a run stopped before the model's final answer: one closed set, serialised in snake case
//! (`"cost_ceiling"`) in the `/chat` response, the answer and the trace.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Why a run stopped before the model's final answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HaltReason {
    /// The caller went away (the HTTP client disconnected); in-flight tool calls were cancelled
    /// with it.
    Cancelled,
    /// The remaining budget could not pay another useful model call, or the guard clamped
    /// `max_tokens` and the model's answer was cut there.
    CostCeiling,
    /// The model was still calling tools after `max_steps` turns.
    MaxSteps,
    /// The model's answer was cut at the configured `max_tokens`.
    MaxTokens,
    /// The provider failed (after its own retries); the run's `error` says why.
    ModelError,
    /// Every server hosting the request's tools is down, or nothing can be offered while some
    /// server is down (HTTP 503).
    ServersUnavailable,
    /// With `trace_fail_closed`, the trace file cannot be written (a full disk): the run
    /// refuses to start, or stops before its next model call.
    TraceUnavailable,
}

impl HaltReason {
    /// Every reason, in alphabetical order of its name.
    pub const ALL: [Self; 7] = [
        Self::Cancelled,
        Self::CostCeiling,
        Self::MaxSteps,
        Self::MaxTokens,
        Self::ModelError,
        Self::ServersUnavailable,
        Self::TraceUnavailable,
    ];

    /// The name on the wire (`"cost_ceiling"`).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Cancelled => "cancelled",
            Self::CostCeiling => "cost_ceiling",
            Self::MaxSteps => "max_steps",
            Self::MaxTokens => "max_tokens",
            Self::ModelError => "model_error",
            Self::ServersUnavailable => "servers_unavailable",
            Self::TraceUnavailable => "trace_unavailable",
        }
    }

    /// The run failed, rather than stopped at a limit or by its caller.
    #[must_use]
    pub const fn is_failure(self) -> bool {
        matches!(
            self,
            Self::ModelError | Self::ServersUnavailable | Self::TraceUnavailable
        )
    }
}

impl fmt::Display for HaltReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::HaltReason;

    #[test]
    fn the_wire_names_are_the_serde_names() {
        for reason in HaltReason::ALL {
            let wire = serde_json::to_value(reason).unwrap();
            assert_eq!(wire, reason.as_str(), "{reason:?}");
            let back: HaltReason = serde_json::from_value(wire).unwrap();
            assert_eq!(back, reason);
        }
    }
}
