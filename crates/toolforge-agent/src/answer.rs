//! Seed 002's structured answer (`POST /agent/run`): `AgentAnswer` with a typed tool-call trace,
//! validated against its JSON Schema (`schemas/agent_answer.schema.json`, also served in the
//! OpenAPI document) before it is returned.

use crate::halt::HaltReason;
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::run::RunResult;

/// The JSON Schema of [`AgentAnswer`].
pub const AGENT_ANSWER_SCHEMA: &str = include_str!("../schemas/agent_answer.schema.json");

static VALIDATOR: LazyLock<Option<jsonschema::Validator>> = LazyLock::new(|| {
    serde_json::from_str::<Value>(AGENT_ANSWER_SCHEMA)
        .ok()
        .and_then(|s| jsonschema::validator_for(&s).ok())
});

/// One tool call in the answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    /// The model turn that made the call (1-based).
    pub step: u32,
    pub tool_name: String,
    pub server: Option<String>,
    pub selection_rule: Option<String>,
    pub executed: bool,
    pub arguments: Value,
    /// The result, shortened to 200 characters.
    pub result_summary: String,
    pub raw_result: Value,
}

/// The structured answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentAnswer {
    pub task: String,
    /// `completed`, `halted` or `error`.
    pub status: String,
    pub answer: String,
    pub key_facts: Value,
    pub halt_reason: Option<HaltReason>,
    pub dry_run: bool,
    pub cost_usd: f64,
    pub session_id: String,
    pub tool_calls: Vec<ToolCallRecord>,
}

/// Why an answer failed its schema.
#[derive(Debug, thiserror::Error)]
#[error("the agent's answer does not match the AgentAnswer schema: {0}")]
pub struct InvalidAnswer(pub String);

impl AgentAnswer {
    /// The answer for `task` from a finished run.
    #[must_use]
    pub fn from_run(task: &str, run: &RunResult) -> Self {
        let status = match run.halt_reason {
            None => "completed",
            Some(HaltReason::ServersUnavailable | HaltReason::ModelError)
                if run.steps.is_empty() =>
            {
                "error"
            }
            Some(_) => "halted",
        };
        Self {
            task: task.to_owned(),
            status: status.to_owned(),
            answer: run.response.clone(),
            key_facts: if run.key_facts.is_object() {
                run.key_facts.clone()
            } else {
                Value::Object(serde_json::Map::new())
            },
            halt_reason: run.halt_reason,
            dry_run: run.dry_run,
            cost_usd: run.cost_usd,
            session_id: run.session_id.clone(),
            tool_calls: run
                .steps
                .iter()
                .map(|s| ToolCallRecord {
                    step: s.step,
                    tool_name: s.tool.clone(),
                    server: s.server.clone(),
                    selection_rule: s.selection_rule.clone(),
                    executed: s.executed,
                    arguments: if s.arguments.is_object() {
                        s.arguments.clone()
                    } else {
                        Value::Object(serde_json::Map::new())
                    },
                    result_summary: s.result_summary.clone(),
                    raw_result: s.raw_result.clone(),
                })
                .collect(),
        }
    }

    /// Checks the answer against [`AGENT_ANSWER_SCHEMA`].
    ///
    /// # Errors
    /// The first schema violations, with their JSON pointers.
    pub fn validate(&self) -> Result<Value, InvalidAnswer> {
        let value = serde_json::to_value(self).map_err(|e| InvalidAnswer(e.to_string()))?;
        let Some(validator) = VALIDATOR.as_ref() else {
            return Err(InvalidAnswer("the embedded schema does not compile".into()));
        };
        let errors: Vec<String> = validator
            .iter_errors(&value)
            .take(5)
            .map(|e| format!("{}: {e}", e.instance_path()))
            .collect();
        if errors.is_empty() {
            Ok(value)
        } else {
            Err(InvalidAnswer(errors.join("; ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schema_compiles_and_rejects_a_bad_status() {
        assert!(VALIDATOR.is_some());
        let mut a = AgentAnswer {
            task: "t".into(),
            status: "completed".into(),
            answer: "a".into(),
            key_facts: json!({}),
            halt_reason: None,
            dry_run: false,
            cost_usd: 0.0,
            session_id: "s".into(),
            tool_calls: vec![],
        };
        assert!(a.validate().is_ok());
        a.status = "finished".into();
        let err = a.validate().unwrap_err().to_string();
        assert!(err.contains("/status"), "{err}");
    }
}
