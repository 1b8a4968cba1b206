//! The trace sink: batches chained and written whole, a full disk, live subscribers.

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
fn a_line_hashes_as_the_lower_hex_sha256_of_its_bytes_without_the_break() {
    let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    assert_eq!(line_hash(b"abc\n"), abc);
    assert_eq!(line_hash(b"abc\r\n"), abc);
    // Any length, as `hex` writes it (longer than a hash too).
    let bytes: Vec<u8> = (0..=255).collect();
    for len in [0, 1, 8, 31, 32, 33, 256] {
        assert_eq!(lower_hex(&bytes[..len]), hex::encode(&bytes[..len]));
    }
}

#[test]
fn an_arguments_object_hashes_as_the_same_object_in_a_value() {
    let value = json!({"b": 1, "a": {"y": [1, 2], "x": null}});
    assert_eq!(
        object_arguments_hash(value.as_object()),
        arguments_hash(&value)
    );
    assert_eq!(object_arguments_hash(None), arguments_hash(&json!({})));
    // SHA-256 of `{}` begins 44136fa3 55b3678a: lowercase hex of the first eight bytes.
    assert_eq!(object_arguments_hash(None), "44136fa355b3678a");
}

#[test]
fn timestamps_read_as_times_formatter_writes_them() {
    let general = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    let instants = [
        time::macros::datetime!(2026-05-14 09:15:04.382 UTC),
        time::macros::datetime!(2026-12-31 23:59:59.999_999 UTC),
        time::macros::datetime!(0001-01-01 00:00:00.000_999 UTC),
        time::macros::datetime!(9999-10-09 01:02:03.04 UTC),
        time::macros::datetime!(2026-05-14 09:15:04.382 +02:00),
    ];
    for at in instants {
        let utc = at.to_offset(time::UtcOffset::UTC);
        assert_eq!(timestamp(at), utc.format(general).unwrap(), "{at}");
    }
    assert_eq!(
        timestamp(time::macros::datetime!(2026-05-14 09:15:04.382 +02:00)),
        "2026-05-14T07:15:04.382Z"
    );
    // Before year 0 `time` writes the sign.
    let ancient = time::macros::datetime!(-0044-03-15 12:00:00 UTC);
    assert_eq!(timestamp(ancient), ancient.format(general).unwrap());
}

/// A disk with room for `room` bytes: a longer write stores what fits, then fails.
struct SmallDisk {
    bytes: Vec<u8>,
    room: usize,
    /// Writes asked for.
    writes: usize,
}

impl Target for SmallDisk {
    fn len(&mut self) -> std::io::Result<u64> {
        Ok(self.bytes.len() as u64)
    }
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.writes += 1;
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
        server: Some("s".into()),
        tool: "t".into(),
        arguments_hash: arguments_hash(&json!({})),
        latency_ms: 1.0,
        success: true,
        executed: true,
        tokens_in: 10,
        tokens_out: 2,
        cost_usd: 0.000_06,
        ..TraceRecord::new(RecordKind::ToolCall, session, 1)
    }
}

/// Adds `sessions` to a batch and writes it: whether it reached the file.
fn write_batch(
    disk: &mut SmallDisk,
    sessions: &[&str],
    chain: &mut String,
    health: &Health,
) -> Vec<bool> {
    let mut batch = Batch::default();
    let mut outcomes = Vec::new();
    for s in sessions {
        let (done, outcome) = oneshot::channel();
        batch.add(&record(s), Some(done), chain, health);
        outcomes.push(outcome);
    }
    batch.write(disk, chain, health, "t");
    outcomes
        .into_iter()
        .map(|mut o| o.try_recv().unwrap())
        .collect()
}

#[test]
fn a_full_disk_leaves_no_torn_line_and_counts_the_loss() {
    let mut chained = record("a");
    chained.prev_hash = Some(GENESIS_HASH.to_owned());
    let first = serde_json::to_vec(&chained).unwrap().len() + 1;
    let mut disk = SmallDisk {
        bytes: Vec::new(),
        room: first + 40,
        writes: 0,
    };
    let health = Health::default();
    let mut chain = GENESIS_HASH.to_owned();
    assert_eq!(write_batch(&mut disk, &["a"], &mut chain, &health), [true]);
    let after_a = chain.clone();
    // The next batch does not fit: 40 bytes were written, then cut away again, and every
    // record of the batch is lost.
    assert_eq!(
        write_batch(&mut disk, &["b1", "b2"], &mut chain, &health),
        [false, false]
    );
    assert_eq!(chain, after_a, "a lost batch does not move the chain");
    assert_eq!(disk.bytes.len(), first);
    assert_eq!(health.lost.load(Ordering::Relaxed), 2);
    assert!(health.failing.load(Ordering::Relaxed));
    // Room again: the next record starts on a line of its own, chained to "a".
    disk.room = usize::MAX;
    assert_eq!(write_batch(&mut disk, &["c"], &mut chain, &health), [true]);
    assert!(!health.failing.load(Ordering::Relaxed));
    let text = String::from_utf8(disk.bytes).unwrap();
    let records: Vec<TraceRecord> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let sessions: Vec<&str> = records.iter().map(|r| r.session_id.as_str()).collect();
    assert_eq!(sessions, ["a", "c"]);
    assert_eq!(records[1].prev_hash.as_deref(), Some(after_a.as_str()));
}

#[test]
fn a_batch_is_one_write_with_each_record_chained_to_the_one_before() {
    let mut disk = SmallDisk {
        bytes: Vec::new(),
        room: usize::MAX,
        writes: 0,
    };
    let health = Health::default();
    let mut chain = GENESIS_HASH.to_owned();
    let outcomes = write_batch(&mut disk, &["a", "b", "c"], &mut chain, &health);
    assert_eq!(outcomes, [true, true, true]);
    assert_eq!(disk.writes, 1);
    // Each line chained to the one before, from the genesis hash, and the chain moved to
    // the batch's last line.
    let verified = crate::trace_verify::verify(disk.bytes.as_slice(), Some(&chain), None).unwrap();
    assert_eq!((verified.records, verified.unchained), (3, 0));
}

#[tokio::test]
async fn records_emitted_together_reach_the_file_in_order_and_chained() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    let sink = TraceSink::open(&path).await.unwrap();
    for i in 0..300 {
        sink.emit(record(&format!("r{i}")));
    }
    assert!(sink.emit_confirmed(record("last")).await);
    sink.flush().await;
    let text = std::fs::read_to_string(&path).unwrap();
    let verified = crate::trace_verify::verify(text.as_bytes(), None, None).unwrap();
    assert_eq!(
        verified.unchained, 0,
        "every record chained from the genesis hash"
    );
    let sessions: Vec<String> = text
        .lines()
        .map(|l| serde_json::from_str::<TraceRecord>(l).unwrap().session_id)
        .collect();
    let wanted: Vec<String> = (0..300)
        .map(|i| format!("r{i}"))
        .chain(["last".to_owned()])
        .collect();
    assert_eq!(sessions, wanted);
    assert_eq!(sink.lost_records(), 0);
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
fn a_chained_line_is_what_serialising_the_chained_record_writes() {
    let mut verbose = record("v");
    verbose.arguments = Some(serde_json::json!({"q": "select \"x\"", "n": [1, 2]}));
    verbose.policy = Some("permit-all".to_owned());
    for r in [record("a"), verbose] {
        let mut chained = r.clone();
        chained.prev_hash = Some(GENESIS_HASH.to_owned());
        assert_eq!(
            chained_line(&r, GENESIS_HASH).unwrap(),
            serde_json::to_vec(&chained).unwrap()
        );
        // Already chained: chained again with the new hash.
        assert_eq!(
            chained_line(&chained, "ab").unwrap(),
            serde_json::to_vec(&TraceRecord {
                prev_hash: Some("ab".to_owned()),
                ..r
            })
            .unwrap()
        );
    }
}

#[tokio::test]
async fn a_late_subscriber_gets_the_recent_records_then_the_new_ones_each_once() {
    let sink = TraceSink::disabled();
    let earlier = RECENT_CAPACITY + 7;
    for i in 0..earlier {
        sink.emit(record(&format!("old{i}")));
    }
    let (recent, mut live) = sink.subscribe_with_recent();
    // The last RECENT_CAPACITY, oldest first; the 7 before them are gone.
    let names: Vec<&str> = recent.iter().map(|r| r.session_id.as_str()).collect();
    assert_eq!(names.len(), RECENT_CAPACITY);
    assert_eq!(names[0], "old7");
    assert_eq!(names[RECENT_CAPACITY - 1], format!("old{}", earlier - 1));
    sink.emit(record("new"));
    assert_eq!(live.recv().await.unwrap().session_id, "new");
    assert!(live.try_recv().is_err(), "nothing kept came again");
    // A second subscriber sees the new record among the kept ones.
    let (recent, _) = sink.subscribe_with_recent();
    assert_eq!(recent.last().unwrap().session_id, "new");
    assert_eq!(recent.len(), RECENT_CAPACITY);
}

#[tokio::test]
async fn the_written_file_holds_what_was_emitted_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    let sink = TraceSink::open(&path).await.unwrap();
    sink.emit(record("a"));
    assert!(sink.emit_confirmed(record("b")).await);
    let (recent, _) = sink.subscribe_with_recent();
    assert!(
        recent.iter().all(|r| r.prev_hash.is_none()),
        "kept as emitted"
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<TraceRecord> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0].prev_hash.as_deref(), Some(GENESIS_HASH));
    assert_eq!(
        lines[1].prev_hash.as_deref(),
        Some(line_hash(text.lines().next().unwrap().as_bytes()).as_str())
    );
    assert_eq!(
        TraceRecord {
            prev_hash: None,
            ..lines[1].clone()
        },
        *recent[1]
    );
}

#[test]
fn timestamp_has_millis_and_z() {
    let t = timestamp_now();
    assert_eq!(t.len(), 24, "{t}");
    assert!(t.ends_with('Z') && t.as_bytes()[19] == b'.');
}

#[test]
fn a_new_record_is_in_the_current_schema_and_reads_back_as_written() {
    let record = TraceRecord::new(RecordKind::ModelCall, "s", 3);
    assert_eq!(record.schema_version, SCHEMA_VERSION);
    assert_eq!((record.attempt, record.retries), (1, 0));
    assert_eq!(record.principal, ANONYMOUS);
    assert!(!record.executed && !record.success && record.decision.is_none());
    let line = serde_json::to_string(&record).unwrap();
    assert_eq!(serde_json::from_str::<TraceRecord>(&line).unwrap(), record);
}
