//! Trace records, schema "1" (DESIGN §5): one JSON object per line per tool call, written by one
//! writer task so concurrent requests never interleave or split a line.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot};

/// The trace schema version.
pub const SCHEMA_VERSION: &str = "1";

/// One tool call, as traced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceRecord {
    pub schema_version: String,
    /// UTC, millisecond precision, `Z` suffix.
    pub timestamp: String,
    pub session_id: String,
    pub step: u32,
    pub server: Option<String>,
    pub tool: String,
    pub arguments_hash: String,
    /// Only with `TRACE_VERBOSE`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub arguments: Option<Value>,
    pub latency_ms: f64,
    pub success: bool,
    pub executed: bool,
    pub dry_run: bool,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub cost_usd: f64,
    pub selection_rule: Option<String>,
    pub alternatives: Vec<String>,
    pub attempt: u32,
    pub retries: u32,
    pub retry_reason: Option<String>,
    pub error: Option<String>,
    pub corrective_retry: bool,
}

/// The current time as `2026-05-14T09:15:04.382Z`.
#[must_use]
pub fn timestamp_now() -> String {
    let now = time::OffsetDateTime::now_utc();
    let fmt = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    now.format(&fmt).unwrap_or_default()
}

/// `value` as canonical JSON: object keys sorted at every level, no whitespace.
#[must_use]
pub fn canonical_json(value: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&m[k])))
                        .collect(),
                )
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

/// First 16 hex digits of SHA-256 over the canonical JSON of `arguments`.
#[must_use]
pub fn arguments_hash(arguments: &Value) -> String {
    let digest = Sha256::digest(canonical_json(arguments).as_bytes());
    hex::encode(&digest[..8])
}

enum Command {
    Record(Box<TraceRecord>),
    Flush(oneshot::Sender<()>),
}

/// A handle to the trace writer; cheap to clone.
#[derive(Clone, Debug)]
pub struct TraceSink {
    tx: Option<mpsc::UnboundedSender<Command>>,
    path: Option<PathBuf>,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Command")
    }
}

impl TraceSink {
    /// A sink that drops every record.
    #[must_use]
    pub fn disabled() -> Self {
        Self {
            tx: None,
            path: None,
        }
    }

    /// Appends to `path` (parent directories are created). Must be called inside a Tokio
    /// runtime: it spawns the writer task.
    ///
    /// # Errors
    /// The file cannot be opened for appending.
    pub async fn open(path: &Path) -> std::io::Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            tokio::fs::create_dir_all(dir).await?;
        }
        let mut file = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .await?;
        let (tx, mut rx) = mpsc::unbounded_channel::<Command>();
        let shown = path.display().to_string();
        tokio::spawn(async move {
            while let Some(cmd) = rx.recv().await {
                match cmd {
                    Command::Record(record) => {
                        let mut line = match serde_json::to_vec(&record) {
                            Ok(l) => l,
                            Err(e) => {
                                tracing::error!(error = %e, "trace record not serialisable");
                                continue;
                            }
                        };
                        line.push(b'\n');
                        // One write_all per record, then flush: a reader never sees half a line
                        // from this writer, and nothing else writes the file.
                        if let Err(e) = async {
                            file.write_all(&line).await?;
                            file.flush().await
                        }
                        .await
                        {
                            tracing::error!(path = %shown, error = %e, "trace write failed");
                        }
                    }
                    Command::Flush(done) => {
                        let _ = file.flush().await;
                        let _ = done.send(());
                    }
                }
            }
        });
        Ok(Self {
            tx: Some(tx),
            path: Some(path.to_owned()),
        })
    }

    /// The file written, if any.
    #[must_use]
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Queues one record.
    pub fn emit(&self, record: TraceRecord) {
        if let Some(tx) = &self.tx
            && tx.send(Command::Record(Box::new(record))).is_err()
        {
            tracing::error!("trace writer has stopped; record dropped");
        }
    }

    /// Waits until every record queued so far is written.
    pub async fn flush(&self) {
        if let Some(tx) = &self.tx {
            let (done, wait) = oneshot::channel();
            if tx.send(Command::Flush(done)).is_ok() {
                let _ = wait.await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hash_ignores_key_order_and_is_16_hex() {
        let a = arguments_hash(&json!({"b": 1, "a": {"y": [1, 2], "x": null}}));
        let b = arguments_hash(&json!({"a": {"x": null, "y": [1, 2]}, "b": 1}));
        assert_eq!(a, b);
        assert_eq!(a.len(), 16);
        assert_ne!(a, arguments_hash(&json!({"b": 2})));
    }

    #[test]
    fn timestamp_has_millis_and_z() {
        let t = timestamp_now();
        assert_eq!(t.len(), 24, "{t}");
        assert!(t.ends_with('Z') && t.as_bytes()[19] == b'.');
    }
}
