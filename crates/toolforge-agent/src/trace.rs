//! Trace records, schema "2" (DESIGN §5): one JSON object per line, written by one writer
//! thread so concurrent requests never interleave or split a line. Schema "2" is "1" with one
//! kind more (`tool_search`) and its `search` object; this build reads both.
//!
//! Every model call's cost is in the stream: a call that asked for tools is split over its
//! `tool_call` records; any other (the final answer, an answer cut at `max_tokens`) has one
//! `model_call` record. Records are appended in batches, each whole or not at all: a failed
//! write (a full disk) cuts the file back to its length before the write, and the batch's
//! records are counted as lost.
//!
//! Every emitted record is also broadcast to live subscribers ([`TraceSink::subscribe`], the
//! console's live trace): a bounded channel where a subscriber that falls behind skips the
//! oldest records (and is told how many), so emitting never waits on one. The last
//! [`RECENT_CAPACITY`] records are kept for subscribers that arrive later
//! ([`TraceSink::subscribe_with_recent`]; `trace_live`).

pub mod decision;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::trace_live::Live;
pub use crate::trace_live::{LIVE_CAPACITY, RECENT_CAPACITY};

/// The trace schema version this build writes.
pub const SCHEMA_VERSION: &str = "2";

/// The schema versions this build reads: "1" is "2" without `tool_search` records.
pub const READ_SCHEMA_VERSIONS: &[&str] = &["1", "2"];

/// True when this build reads records of `version`.
#[must_use]
pub fn reads_schema(version: &str) -> bool {
    READ_SCHEMA_VERSIONS.contains(&version)
}

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
    /// A search for tools beyond the first offer (schema "2"): `tool` is the search tool's name,
    /// `server` is null, `executed` is false (no MCP server is asked), `search` says what it
    /// looked for and what joined the offer; its share of the model call's cost as a tool
    /// call's.
    ToolSearch,
}

/// Who ran a search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Searcher {
    /// The agent answered the model's `search_tools` call.
    Agent,
    /// The provider's own tool search (Anthropic's), over the deferred tools the agent sent.
    Provider,
}

/// What a `tool_search` record found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchRecord {
    pub by: Searcher,
    /// The query (secrets redacted, at most 256 characters), or the provider's pattern.
    pub query: String,
    /// Results asked for (0 when the provider decides).
    pub limit: usize,
    /// What matched, best first, as `server/tool` (an overlap group by its first member).
    pub found: Vec<String>,
    /// Of those, what joined the offer (the rest were offered already, or past the run's bound).
    pub added: Vec<String>,
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
    /// Only with `TRACE_VERBOSE`, every secret in them redacted (`[REDACTED:<kind>]`).
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
    /// Who asked: the caller's principal, `anonymous` without identity. Records written
    /// before it existed read as `anonymous`.
    #[serde(default = "anonymous")]
    pub principal: String,
    /// The ids of the policies that decided this call (`default-deny` when none permitted
    /// it), when a policy is configured.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub policy: Option<String>,
    /// What the gateway decided about the call before running it: `allow`, or why it did not
    /// run (`quarantined`, `blocked: <reason>`, `deny: <policy>`); null when nothing decided.
    #[serde(default)]
    pub decision: Option<String>,
    /// SHA-256 (hex) of the previous line's bytes in the file, [`GENESIS_HASH`] for the first
    /// line: set by the writer, so a changed, removed or reordered record breaks the chain
    /// (`toolforge trace verify`). Null only in records written before the chain existed.
    #[serde(default)]
    pub prev_hash: Option<String>,
    /// Only on `tool_search` records.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub search: Option<SearchRecord>,
}

impl TraceRecord {
    /// A record of `kind` for `session_id`'s `step`, written now in the current schema, with
    /// nothing else known yet: no server, tool or cost, not executed, not successful, the
    /// first attempt, principal `anonymous`. Callers fill in what they know with struct update
    /// syntax (`TraceRecord { tool, ..TraceRecord::new(kind, session, step) }`).
    #[must_use]
    pub fn new(kind: RecordKind, session_id: impl Into<String>, step: u32) -> Self {
        Self {
            schema_version: SCHEMA_VERSION.to_owned(),
            kind,
            timestamp: timestamp_now(),
            session_id: session_id.into(),
            step,
            server: None,
            tool: String::new(),
            arguments_hash: String::new(),
            arguments: None,
            latency_ms: 0.0,
            success: false,
            executed: false,
            dry_run: false,
            tokens_in: 0,
            tokens_out: 0,
            cost_usd: 0.0,
            selection_rule: None,
            alternatives: Vec::new(),
            attempt: 1,
            retries: 0,
            retry_reason: None,
            error: None,
            corrective_retry: false,
            principal: anonymous(),
            policy: None,
            decision: None,
            prev_hash: None,
            search: None,
        }
    }
}

/// The principal of a caller without identity.
pub use toolforge_policy::ANONYMOUS;

fn anonymous() -> String {
    ANONYMOUS.to_owned()
}

/// The `prev_hash` of a file's first record.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The chain hash of one line: SHA-256 (hex) of its bytes, without the line break.
#[must_use]
pub fn line_hash(line: &[u8]) -> String {
    lower_hex(&Sha256::digest(without_break(line)))
}

fn without_break(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// How a keyed record's `prev_hash` starts: `hmac-sha256:<hex>`.
pub const KEYED_PREFIX: &str = "hmac-sha256:";

/// An operator's key for the trace chain (`TRACE_CHAIN_KEY`). With it, each record's
/// `prev_hash` is the HMAC-SHA256 of the line before it, under the key, as
/// `hmac-sha256:<hex>`: whoever can rewrite the file but does not hold the key cannot re-chain
/// the records after a change (an unkeyed SHA-256 chain anyone can recompute).
#[derive(Clone)]
pub struct ChainKey(Arc<[u8]>);

impl std::fmt::Debug for ChainKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChainKey(..)")
    }
}

/// A chain key shorter than [`ChainKey::MIN_BYTES`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the trace chain key must be at least {} bytes", ChainKey::MIN_BYTES)]
pub struct ChainKeyTooShort;

impl ChainKey {
    /// The shortest key accepted (256 bits).
    pub const MIN_BYTES: usize = 32;

    /// A key of `bytes`.
    ///
    /// # Errors
    /// Shorter than [`ChainKey::MIN_BYTES`].
    pub fn new(bytes: &[u8]) -> Result<Self, ChainKeyTooShort> {
        if bytes.len() < Self::MIN_BYTES {
            return Err(ChainKeyTooShort);
        }
        Ok(Self(bytes.into()))
    }

    /// The keyed link to `line`: `hmac-sha256:` and the HMAC (hex) of its bytes without the
    /// line break.
    #[must_use]
    pub fn link(&self, line: &[u8]) -> String {
        use hmac::Mac as _;
        let mut mac = hmac::Hmac::<Sha256>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        mac.update(without_break(line));
        format!("{KEYED_PREFIX}{}", lower_hex(&mac.finalize().into_bytes()))
    }

    /// The `prev_hash` of a file's first record, keyed.
    #[must_use]
    pub fn genesis() -> String {
        format!("{KEYED_PREFIX}{GENESIS_HASH}")
    }
}

/// The link a record after `line` carries: its SHA-256, or with `key` its HMAC.
#[must_use]
pub fn link(key: Option<&ChainKey>, line: &[u8]) -> String {
    match key {
        Some(key) => key.link(line),
        None => line_hash(line),
    }
}

/// The current time as `2026-05-14T09:15:04.382Z`.
#[must_use]
pub fn timestamp_now() -> String {
    timestamp(time::OffsetDateTime::now_utc())
}

/// `at` (in UTC) as `2026-05-14T09:15:04.382Z`. Every call's trace record has one, so the
/// digits are written directly: `time`'s general formatter, which reads its description item by
/// item, was 0.5 % of the gateway's CPU under `tools/call` load.
fn timestamp(at: time::OffsetDateTime) -> String {
    let at = at.to_offset(time::UtcOffset::UTC);
    let year = at.year();
    let Ok(year) = u16::try_from(year) else {
        // Before year 0: a sign and more digits, left to `time`.
        return at
            .format(time::macros::format_description!(
                "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
            ))
            .unwrap_or_default();
    };
    let mut text = String::with_capacity(24);
    let mut digits = |value: u32, width: u32, after: char| {
        for place in (0..width).rev() {
            let digit = (value / 10_u32.pow(place)) % 10;
            text.push(char::from(b'0' + digit as u8));
        }
        text.push(after);
    };
    // `time` keeps years within ±9999: four digits.
    digits(u32::from(year), 4, '-');
    digits(u32::from(u8::from(at.month())), 2, '-');
    digits(u32::from(at.day()), 2, 'T');
    digits(u32::from(at.hour()), 2, ':');
    digits(u32::from(at.minute()), 2, ':');
    digits(u32::from(at.second()), 2, '.');
    digits(u32::from(at.millisecond()), 3, 'Z');
    text
}

/// `value` as canonical JSON (object keys sorted at every level, no whitespace): the same
/// form tool pins are hashed in.
pub use toolforge_guard::canonical_json;

/// First 16 hex digits of SHA-256 over the canonical JSON of `arguments`.
#[must_use]
pub fn arguments_hash(arguments: &Value) -> String {
    short_hash(&canonical_json(arguments))
}

/// [`arguments_hash`] of a call's arguments object as MCP carries it (`None`: no arguments,
/// hashed as `{}`), without copying it into a `Value`.
#[must_use]
pub fn object_arguments_hash(arguments: Option<&serde_json::Map<String, Value>>) -> String {
    match arguments {
        Some(object) => short_hash(&toolforge_guard::canonical_object_json(object)),
        None => short_hash("{}"),
    }
}

fn short_hash(canonical: &str) -> String {
    lower_hex(&Sha256::digest(canonical.as_bytes())[..8])
}

/// `bytes` (a hash) in lower-case hex. Each call's trace record takes two: `hex::encode`
/// collects one `char` at a time into the `String`, about 2,200 instructions for a 32-byte
/// hash; this writes the digits into a buffer and copies them once.
fn lower_hex(bytes: &[u8]) -> String {
    let mut buffer = [0_u8; 64];
    let Some(digits) = buffer.get_mut(..bytes.len() * 2) else {
        return hex::encode(bytes);
    };
    match hex::encode_to_slice(bytes, digits).map(|()| std::str::from_utf8(digits)) {
        Ok(Ok(text)) => text.to_owned(),
        _ => hex::encode(bytes),
    }
}

enum Command {
    Record(Arc<TraceRecord>, Option<oneshot::Sender<bool>>),
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

/// A file the writer appends whole lines to.
trait Target {
    /// Bytes in the file now.
    fn len(&mut self) -> std::io::Result<u64>;
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()>;
    /// Cuts the file back to `len` bytes.
    fn truncate(&mut self, len: u64) -> std::io::Result<()>;
}

/// The longest last line read to continue the chain (a verbose record with large arguments
/// still fits; a longer one starts a new chain from its hash anyway, see [`last_line`]).
const LAST_LINE_MAX: u64 = 64 * 1024 * 1024;

/// The last non-blank line of `file` (without its line break), read backwards from the end.
///
/// # Errors
/// The file cannot be read, or its last line is longer than 64 MiB.
pub fn last_line(
    file: &mut (impl std::io::Read + std::io::Seek),
) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::SeekFrom;
    let len = file.seek(SeekFrom::End(0))?;
    let mut tail: Vec<u8> = Vec::new();
    let mut pos = len;
    let mut chunk = 8 * 1024u64;
    loop {
        let trimmed_len = tail
            .iter()
            .rposition(|b| !matches!(b, b'\n' | b'\r'))
            .map_or(0, |i| i + 1);
        if let Some(start) = tail[..trimmed_len].iter().rposition(|b| *b == b'\n') {
            return Ok(Some(tail[start + 1..trimmed_len].to_vec()));
        }
        if pos == 0 {
            return Ok((trimmed_len > 0).then(|| tail[..trimmed_len].to_vec()));
        }
        if len - pos > LAST_LINE_MAX {
            return Err(std::io::Error::other(
                "the trace file's last line is longer than 64 MiB",
            ));
        }
        let step = chunk.min(pos);
        pos -= step;
        file.seek(SeekFrom::Start(pos))?;
        let mut buf = vec![0u8; usize::try_from(step).unwrap_or(usize::MAX)];
        file.read_exact(&mut buf)?;
        buf.extend_from_slice(&tail);
        tail = buf;
        chunk = chunk.saturating_mul(2);
    }
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
    /// Emitted records, for live subscribers, and the most recent ones.
    live: Arc<Live<TraceRecord>>,
}

impl TraceSink {
    /// A sink that writes no file (live subscribers still see every record).
    #[must_use]
    pub fn disabled() -> Self {
        Self {
            tx: None,
            path: None,
            health: Arc::default(),
            live: Arc::default(),
        }
    }

    /// Appends to `path` (parent directories are created). The writer runs on its own thread.
    ///
    /// # Errors
    /// The file cannot be opened for appending.
    pub async fn open(path: &Path) -> std::io::Result<Self> {
        Self::open_keyed(path, None).await
    }

    /// Like [`TraceSink::open`], the chain keyed with `key` when given ([`ChainKey`]). A file
    /// chained without a key goes on with keyed records from here.
    ///
    /// # Errors
    /// The file cannot be opened for appending.
    pub async fn open_keyed(path: &Path, key: Option<ChainKey>) -> std::io::Result<Self> {
        let owned = path.to_owned();
        let chain_key = key.clone();
        let file = tokio::task::spawn_blocking(move || {
            if let Some(dir) = owned.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)?;
            }
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .read(true)
                .append(true)
                .open(&owned)?;
            // Continue the chain of what the file holds (across restarts).
            let chain = match last_line(&mut file)? {
                Some(line) => link(chain_key.as_ref(), &line),
                None if chain_key.is_some() => ChainKey::genesis(),
                None => GENESIS_HASH.to_owned(),
            };
            Ok::<_, std::io::Error>((file, chain))
        })
        .await
        .map_err(std::io::Error::other)??;
        Ok(Self::start(file.0, path, file.1, key))
    }

    fn start(
        file: impl Target + Send + 'static,
        path: &Path,
        chain: String,
        key: Option<ChainKey>,
    ) -> Self {
        let (tx, rx) = mpsc::channel::<Command>(QUEUE_CAPACITY);
        let health = Arc::new(Health::default());
        let shared = health.clone();
        let shown = path.display().to_string();
        let spawned = std::thread::Builder::new()
            .name("trace-writer".into())
            .spawn(move || write_commands(rx, file, chain, key, &shared, &shown));
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the trace writer; traces are off");
            return Self::disabled();
        }
        Self {
            tx: Some(tx),
            path: Some(path.to_owned()),
            health,
            live: Arc::default(),
        }
    }
}

/// How long the writer waits after a record nobody waits for before it writes, so that the
/// records of the calls that follow go into the same write. A gateway emits a record per call:
/// written one by one, a call woke the writer thread, which stat'ed the file and wrote once
/// (up to four of the gateway's ten system calls per call; benchmarks/proxy/README.md).
/// A record someone waits for ([`TraceSink::emit_confirmed`]), a probe and a flush are
/// served at once.
const LINGER: std::time::Duration = std::time::Duration::from_millis(10);
/// Most commands the writer takes in one batch.
const BATCH_COMMANDS: usize = 256;
/// A batch whose lines reach this many bytes is written before more are added.
const BATCH_BYTES: usize = 1024 * 1024;

/// The writer thread: takes what is queued in batches and writes each batch's records with
/// one write, in queue order, until every sink is dropped.
fn write_commands(
    mut rx: mpsc::Receiver<Command>,
    mut file: impl Target,
    mut chain: String,
    key: Option<ChainKey>,
    health: &Health,
    shown: &str,
) {
    let mut commands = Vec::with_capacity(BATCH_COMMANDS);
    let mut batch = Batch {
        key,
        ..Batch::default()
    };
    while let Some(first) = rx.blocking_recv() {
        commands.push(first);
        take_queued(&mut rx, &mut commands);
        // Wait for more only when nobody waits and the batch has room: under a load that fills
        // batches the writer never sleeps, so the queue cannot grow behind the wait.
        let someone_waits = commands
            .iter()
            .any(|c| !matches!(c, Command::Record(_, None)));
        if !someone_waits && commands.len() < BATCH_COMMANDS {
            std::thread::sleep(LINGER);
            take_queued(&mut rx, &mut commands);
        }
        for cmd in commands.drain(..) {
            match cmd {
                Command::Record(record, done) => {
                    batch.add(&record, done, &chain, health);
                    if batch.lines.len() >= BATCH_BYTES {
                        batch.write(&mut file, &mut chain, health, shown);
                    }
                }
                Command::Probe(done) => {
                    batch.write(&mut file, &mut chain, health, shown);
                    // A blank line: readers skip it, and a full disk refuses it.
                    let ok = append_whole(&mut file, b"\n").is_ok();
                    health.failing.store(!ok, Ordering::Relaxed);
                    let _ = done.send(ok);
                }
                Command::Flush(done) => {
                    batch.write(&mut file, &mut chain, health, shown);
                    let _ = done.send(());
                }
            }
        }
        batch.write(&mut file, &mut chain, health, shown);
    }
}

/// Moves queued commands into `commands` until it holds [`BATCH_COMMANDS`] or the queue is
/// empty.
fn take_queued(rx: &mut mpsc::Receiver<Command>, commands: &mut Vec<Command>) {
    while commands.len() < BATCH_COMMANDS {
        match rx.try_recv() {
            Ok(cmd) => commands.push(cmd),
            Err(_) => break,
        }
    }
}

/// The line `record` is written as, its `prev_hash` set to `prev`. The record itself stays as
/// it was emitted (the live trace's kept records share it): `prev_hash` is its last field, so
/// an unchained record's line ends in `"prev_hash":null}`, and the chained line is that line
/// with the hash in place of the `null`, byte for byte what serialising the chained record
/// writes. A record that already carries a hash is serialised as a chained copy.
fn chained_line(record: &TraceRecord, prev: &str) -> serde_json::Result<Vec<u8>> {
    const UNCHAINED_END: &[u8] = br#""prev_hash":null}"#;
    if record.prev_hash.is_none() {
        let mut line = serde_json::to_vec(record)?;
        if line.ends_with(UNCHAINED_END) {
            line.truncate(line.len() - b"null}".len());
            serde_json::to_writer(&mut line, prev)?;
            line.push(b'}');
            return Ok(line);
        }
    }
    let mut chained = record.clone();
    chained.prev_hash = Some(prev.to_owned());
    serde_json::to_vec(&chained)
}

/// Records serialised and chained, waiting to be appended with one write.
#[derive(Default)]
struct Batch {
    /// Their lines, each ending in a line break.
    lines: Vec<u8>,
    /// Who waits for each record's outcome.
    waiting: Vec<Option<oneshot::Sender<bool>>>,
    /// The hash of the last line in `lines` (the chain once they are written).
    last_hash: Option<String>,
    /// The operator's chain key, if any.
    key: Option<ChainKey>,
}

impl Batch {
    /// Chains `record` to the batch's last line (or to `chain` in the file) and adds its line.
    fn add(
        &mut self,
        record: &TraceRecord,
        done: Option<oneshot::Sender<bool>>,
        chain: &str,
        health: &Health,
    ) {
        match chained_line(record, self.last_hash.as_deref().unwrap_or(chain)) {
            Ok(line) => {
                self.last_hash = Some(link(self.key.as_ref(), &line));
                self.lines.extend_from_slice(&line);
                self.lines.push(b'\n');
                self.waiting.push(done);
            }
            Err(e) => {
                tracing::error!(error = %e, "trace record not serialisable");
                health.lost.fetch_add(1, Ordering::Relaxed);
                if let Some(done) = done {
                    let _ = done.send(false);
                }
            }
        }
    }

    /// Appends the batch whole or not at all (a failed write loses all of its records), moves
    /// the chain on when it is in the file, and tells whoever waits.
    fn write(&mut self, file: &mut impl Target, chain: &mut String, health: &Health, shown: &str) {
        if self.waiting.is_empty() {
            return;
        }
        let ok = match append_whole(file, &self.lines) {
            Ok(()) => {
                if let Some(hash) = self.last_hash.take() {
                    *chain = hash;
                }
                health.failing.store(false, Ordering::Relaxed);
                true
            }
            Err(e) => {
                let lost = self.waiting.len();
                health.lost.fetch_add(lost as u64, Ordering::Relaxed);
                health.failing.store(true, Ordering::Relaxed);
                tracing::error!(
                    path = %shown,
                    error = %e,
                    records = lost,
                    "trace write failed; records lost"
                );
                false
            }
        };
        for done in self.waiting.drain(..).flatten() {
            let _ = done.send(ok);
        }
        self.last_hash = None;
        self.lines.clear();
        if self.lines.capacity() > BATCH_BYTES {
            self.lines.shrink_to(BATCH_BYTES / 16);
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
        let record = Arc::new(record);
        self.live.publish(&record);
        if let Some(tx) = &self.tx
            && let Err(e) = tx.try_send(Command::Record(record, None))
        {
            self.health.lost.fetch_add(1, Ordering::Relaxed);
            tracing::error!("trace record dropped: {}", queue_error(&e));
        }
    }

    /// Writes one record and waits for the outcome: `true` once it is in the file (always
    /// `true` for a disabled sink).
    pub async fn emit_confirmed(&self, record: TraceRecord) -> bool {
        let record = Arc::new(record);
        self.live.publish(&record);
        let Some(tx) = &self.tx else { return true };
        let (done, wait) = oneshot::channel();
        if tx.send(Command::Record(record, Some(done))).await.is_err() {
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

    /// The last [`RECENT_CAPACITY`] records emitted (oldest first), and every record emitted
    /// after them, as [`TraceSink::subscribe`] gives them: each record is in exactly one of
    /// the two.
    #[must_use]
    pub fn subscribe_with_recent(
        &self,
    ) -> (Vec<Arc<TraceRecord>>, broadcast::Receiver<Arc<TraceRecord>>) {
        self.live.subscribe_with_recent()
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
mod tests;
