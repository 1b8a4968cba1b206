//! Trace records, schema "1" (DESIGN §5): one JSON object per line, written by one writer
//! thread so concurrent requests never interleave or split a line.
//!
//! Every model call's cost is in the stream: a call that asked for tools is split over its
//! `tool_call` records; any other (the final answer, an answer cut at `max_tokens`) has one
//! `model_call` record. A record is appended whole or not at all: a failed write (a full disk)
//! cuts the file back to its length before the write, and the record is counted as lost.
//!
//! Every emitted record is also broadcast to live subscribers ([`TraceSink::subscribe`], the
//! console's live trace): a bounded channel where a subscriber that falls behind skips the
//! oldest records (and is told how many), so emitting never waits on one.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::{broadcast, mpsc, oneshot};

/// The trace schema version.
pub const SCHEMA_VERSION: &str = "1";

/// What a record stands for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordKind {
    /// One tool call (executed, planned by a dry run, or rejected), with its share of the model
    /// call that asked for it. Records written before `kind` existed are tool calls.
    #[default]
    ToolCall,
    /// A model call that asked for no tool (an answer, or an answer cut at `max_tokens`):
    /// `server` is null, `tool` and `arguments_hash` are empty, `executed` is false.
    ModelCall,
}

/// One tool call or one model call without tool calls, as traced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceRecord {
    pub schema_version: String,
    #[serde(default)]
    pub kind: RecordKind,
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
    Record(Box<TraceRecord>, Option<oneshot::Sender<bool>>),
    Probe(oneshot::Sender<bool>),
    Flush(oneshot::Sender<()>),
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Command")
    }
}

/// Records a full queue may hold before new ones are dropped (and counted as lost).
pub const QUEUE_CAPACITY: usize = 65_536;

/// Records the live broadcast keeps for its slowest subscriber; one further behind skips the
/// oldest.
pub const LIVE_CAPACITY: usize = 1024;

/// A file the writer appends whole lines to.
trait Target {
    /// Bytes in the file now.
    fn len(&mut self) -> std::io::Result<u64>;
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()>;
    /// Cuts the file back to `len` bytes.
    fn truncate(&mut self, len: u64) -> std::io::Result<()>;
}

impl Target for std::fs::File {
    fn len(&mut self) -> std::io::Result<u64> {
        Ok(self.metadata()?.len())
    }
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        std::io::Write::write_all(self, bytes)?;
        std::io::Write::flush(self)
    }
    fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        self.set_len(len)
    }
}

/// Appends `line` whole or not at all: on a failed write (a full disk) the file is cut back to
/// its length before the write, so no torn line is left for the next record to be glued onto.
fn append_whole(target: &mut impl Target, line: &[u8]) -> std::io::Result<()> {
    let before = target.len()?;
    if let Err(e) = target.write_all(line) {
        if let Err(cut) = target.truncate(before) {
            tracing::error!(error = %cut, "cannot remove a partly written trace line");
        }
        return Err(e);
    }
    Ok(())
}

/// What the writer shares with its handles.
#[derive(Debug, Default)]
struct Health {
    /// Records that never reached the file (write failed, queue full, writer gone).
    lost: AtomicU64,
    /// The last write failed (cleared by the next one that succeeds).
    failing: AtomicBool,
}

/// A handle to the trace writer; cheap to clone.
#[derive(Clone, Debug)]
pub struct TraceSink {
    tx: Option<mpsc::Sender<Command>>,
    path: Option<PathBuf>,
    health: Arc<Health>,
    /// Emitted records, for live subscribers.
    live: broadcast::Sender<Arc<TraceRecord>>,
}

impl TraceSink {
    /// A sink that writes no file (live subscribers still see every record).
    #[must_use]
    pub fn disabled() -> Self {
        Self {
            tx: None,
            path: None,
            health: Arc::default(),
            live: broadcast::channel(LIVE_CAPACITY).0,
        }
    }

    /// Appends to `path` (parent directories are created). The writer runs on its own thread.
    ///
    /// # Errors
    /// The file cannot be opened for appending.
    pub async fn open(path: &Path) -> std::io::Result<Self> {
        let owned = path.to_owned();
        let file = tokio::task::spawn_blocking(move || {
            if let Some(dir) = owned.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&owned)
        })
        .await
        .map_err(std::io::Error::other)??;
        Ok(Self::start(file, path))
    }

    fn start(mut file: impl Target + Send + 'static, path: &Path) -> Self {
        let (tx, mut rx) = mpsc::channel::<Command>(QUEUE_CAPACITY);
        let health = Arc::new(Health::default());
        let shared = health.clone();
        let shown = path.display().to_string();
        let spawned = std::thread::Builder::new()
            .name("trace-writer".into())
            .spawn(move || {
                while let Some(cmd) = rx.blocking_recv() {
                    match cmd {
                        Command::Record(record, done) => {
                            let ok = write_record(&mut file, &record, &shared, &shown);
                            if let Some(done) = done {
                                let _ = done.send(ok);
                            }
                        }
                        Command::Probe(done) => {
                            // A blank line: readers skip it, and a full disk refuses it.
                            let ok = append_whole(&mut file, b"\n").is_ok();
                            shared.failing.store(!ok, Ordering::Relaxed);
                            let _ = done.send(ok);
                        }
                        Command::Flush(done) => {
                            let _ = done.send(());
                        }
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the trace writer; traces are off");
            return Self::disabled();
        }
        Self {
            tx: Some(tx),
            path: Some(path.to_owned()),
            health,
            live: broadcast::channel(LIVE_CAPACITY).0,
        }
    }
}

fn write_record(
    file: &mut impl Target,
    record: &TraceRecord,
    health: &Health,
    shown: &str,
) -> bool {
    let mut line = match serde_json::to_vec(record) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "trace record not serialisable");
            health.lost.fetch_add(1, Ordering::Relaxed);
            return false;
        }
    };
    line.push(b'\n');
    match append_whole(file, &line) {
        Ok(()) => {
            health.failing.store(false, Ordering::Relaxed);
            true
        }
        Err(e) => {
            health.lost.fetch_add(1, Ordering::Relaxed);
            health.failing.store(true, Ordering::Relaxed);
            tracing::error!(path = %shown, error = %e, "trace write failed; record lost");
            false
        }
    }
}

impl TraceSink {
    /// The file written, if any.
    #[must_use]
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Queues one record. A record that cannot be queued (the writer is gone or a full queue
    /// of `QUEUE_CAPACITY` records waits) is dropped and counted as lost.
    pub fn emit(&self, record: TraceRecord) {
        self.publish(&record);
        if let Some(tx) = &self.tx
            && let Err(e) = tx.try_send(Command::Record(Box::new(record), None))
        {
            self.health.lost.fetch_add(1, Ordering::Relaxed);
            tracing::error!("trace record dropped: {}", queue_error(&e));
        }
    }

    /// Writes one record and waits for the outcome: `true` once it is in the file (always
    /// `true` for a disabled sink).
    pub async fn emit_confirmed(&self, record: TraceRecord) -> bool {
        self.publish(&record);
        let Some(tx) = &self.tx else { return true };
        let (done, wait) = oneshot::channel();
        if tx
            .send(Command::Record(Box::new(record), Some(done)))
            .await
            .is_err()
        {
            self.health.lost.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        wait.await.unwrap_or(false)
    }

    /// Every record emitted from now on, as it is emitted. A subscriber more than
    /// [`LIVE_CAPACITY`] records behind gets `Lagged` and skips the oldest; emitting never
    /// waits for one.
    #[must_use]
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<TraceRecord>> {
        self.live.subscribe()
    }

    /// Sends `record` to the live subscribers, if any (a copy only when someone listens).
    fn publish(&self, record: &TraceRecord) {
        if self.live.receiver_count() > 0 {
            let _ = self.live.send(Arc::new(record.clone()));
        }
    }

    /// Whether the file takes writes now: `true` unless the last write failed and a probe (a
    /// blank line) fails too. Always `true` for a disabled sink.
    pub async fn writable(&self) -> bool {
        let Some(tx) = &self.tx else { return true };
        if !self.health.failing.load(Ordering::Relaxed) {
            return true;
        }
        let (done, wait) = oneshot::channel();
        if tx.send(Command::Probe(done)).await.is_err() {
            return false;
        }
        wait.await.unwrap_or(false)
    }

    /// Records lost so far (failed writes, a full queue, a stopped writer).
    #[must_use]
    pub fn lost_records(&self) -> u64 {
        self.health.lost.load(Ordering::Relaxed)
    }

    /// The figures `/health` shows: `{"enabled", "lost_records", "failing"}`.
    #[must_use]
    pub fn status(&self) -> Value {
        serde_json::json!({
            "enabled": self.tx.is_some(),
            "lost_records": self.lost_records(),
            "failing": self.health.failing.load(Ordering::Relaxed),
        })
    }

    /// Waits until every record queued so far is written.
    pub async fn flush(&self) {
        if let Some(tx) = &self.tx {
            let (done, wait) = oneshot::channel();
            if tx.send(Command::Flush(done)).await.is_ok() {
                let _ = wait.await;
            }
        }
    }
}

fn queue_error(e: &mpsc::error::TrySendError<Command>) -> &'static str {
    match e {
        mpsc::error::TrySendError::Full(_) => "the trace queue is full",
        mpsc::error::TrySendError::Closed(_) => "the trace writer has stopped",
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

    /// A disk with room for `room` bytes: a longer write stores what fits, then fails.
    struct SmallDisk {
        bytes: Vec<u8>,
        room: usize,
    }

    impl Target for SmallDisk {
        fn len(&mut self) -> std::io::Result<u64> {
            Ok(self.bytes.len() as u64)
        }
        fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
            let fits = bytes.len().min(self.room - self.bytes.len());
            self.bytes.extend_from_slice(&bytes[..fits]);
            if fits < bytes.len() {
                return Err(std::io::Error::from(std::io::ErrorKind::StorageFull));
            }
            Ok(())
        }
        fn truncate(&mut self, len: u64) -> std::io::Result<()> {
            self.bytes.truncate(len as usize);
            Ok(())
        }
    }

    fn record(session: &str) -> TraceRecord {
        TraceRecord {
            schema_version: SCHEMA_VERSION.to_owned(),
            kind: RecordKind::ToolCall,
            timestamp: timestamp_now(),
            session_id: session.to_owned(),
            step: 1,
            server: Some("s".into()),
            tool: "t".into(),
            arguments_hash: arguments_hash(&json!({})),
            arguments: None,
            latency_ms: 1.0,
            success: true,
            executed: true,
            dry_run: false,
            tokens_in: 10,
            tokens_out: 2,
            cost_usd: 0.000_06,
            selection_rule: None,
            alternatives: Vec::new(),
            attempt: 1,
            retries: 0,
            retry_reason: None,
            error: None,
            corrective_retry: false,
        }
    }

    #[test]
    fn a_full_disk_leaves_no_torn_line_and_counts_the_loss() {
        let first = serde_json::to_vec(&record("a")).unwrap().len() + 1;
        let mut disk = SmallDisk {
            bytes: Vec::new(),
            room: first + 40,
        };
        let health = Health::default();
        assert!(write_record(&mut disk, &record("a"), &health, "t"));
        // The second record does not fit: 40 bytes were written, then cut away again.
        assert!(!write_record(&mut disk, &record("b"), &health, "t"));
        assert_eq!(disk.bytes.len(), first);
        assert_eq!(health.lost.load(Ordering::Relaxed), 1);
        assert!(health.failing.load(Ordering::Relaxed));
        // Room again: the next record starts on a line of its own.
        disk.room = usize::MAX;
        assert!(write_record(&mut disk, &record("c"), &health, "t"));
        assert!(!health.failing.load(Ordering::Relaxed));
        let text = String::from_utf8(disk.bytes).unwrap();
        let sessions: Vec<String> = text
            .lines()
            .map(|l| serde_json::from_str::<TraceRecord>(l).unwrap().session_id)
            .collect();
        assert_eq!(sessions, ["a", "c"]);
    }

    #[test]
    fn records_without_kind_are_tool_calls() {
        let mut v = serde_json::to_value(record("a")).unwrap();
        assert_eq!(v["kind"], "tool_call");
        v.as_object_mut().unwrap().remove("kind");
        let back: TraceRecord = serde_json::from_value(v).unwrap();
        assert_eq!(back.kind, RecordKind::ToolCall);
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_device_that_is_always_full_loses_records_and_is_not_writable() {
        let sink = TraceSink::open(Path::new("/dev/full")).await.unwrap();
        assert!(sink.writable().await, "nothing failed yet");
        sink.emit(record("a"));
        assert!(!sink.emit_confirmed(record("b")).await);
        assert_eq!(sink.lost_records(), 2);
        assert!(!sink.writable().await, "the probe fails too");
        assert_eq!(sink.status()["lost_records"], 2);
        assert_eq!(sink.status()["failing"], true);
    }

    #[tokio::test]
    async fn live_subscribers_see_records_and_a_slow_one_skips_the_oldest() {
        let sink = TraceSink::disabled();
        sink.emit(record("before"));
        let mut live = sink.subscribe();
        sink.emit(record("a"));
        assert!(sink.emit_confirmed(record("b")).await);
        assert_eq!(live.recv().await.unwrap().session_id, "a");
        assert_eq!(live.recv().await.unwrap().session_id, "b");
        // Nobody reads: emitting more than the channel holds neither blocks nor fails.
        for i in 0..LIVE_CAPACITY + 5 {
            sink.emit(record(&format!("r{i}")));
        }
        assert!(matches!(
            live.recv().await,
            Err(broadcast::error::RecvError::Lagged(5))
        ));
        assert_eq!(live.recv().await.unwrap().session_id, "r5");
        assert_eq!(sink.lost_records(), 0, "the file side is untouched");
    }

    #[test]
    fn timestamp_has_millis_and_z() {
        let t = timestamp_now();
        assert_eq!(t.len(), 24, "{t}");
        assert!(t.ends_with('Z') && t.as_bytes()[19] == b'.');
    }
}
