//! Checking a trace file's hash chain: each record's `prev_hash` is the SHA-256 of the line
//! before it (blank lines skipped), the first one's is [`GENESIS_HASH`]. A record changed,
//! removed or reordered breaks the chain at the line after it; the first such line is named.
//!
//! Records written before the chain existed (no `prev_hash`) are allowed only as a prefix of
//! the file; a file with no chained record at all cannot be verified and fails. The chain
//! cannot see an edit of the very last line or a cut tail on its own: compare the `head` (the
//! last line's hash) with one kept elsewhere (`--head`).
//!
//! An unkeyed chain is SHA-256, which anyone can recompute: rewriting a record and re-chaining
//! everything after it passes. With an operator key ([`ChainKey`], `TRACE_CHAIN_KEY`), records
//! are linked by HMAC-SHA256 (`prev_hash` `hmac-sha256:<hex>`), and verifying with the key
//! catches that too: every record from the first keyed one on must be keyed and link under the
//! key, and a file with no keyed record fails (it was re-chained without the key).

use std::io::BufRead;

use serde_json::Value;

use crate::trace::{ChainKey, GENESIS_HASH, KEYED_PREFIX, link};

/// A chain that holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// Records checked (non-blank lines).
    pub records: u64,
    /// Leading records written before the chain existed.
    pub unchained: u64,
    /// The hash of the last record: what the next record's `prev_hash` will be.
    pub head: String,
}

/// Why a trace file fails verification.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("line {line}: {reason}")]
    BadLine { line: u64, reason: String },
    #[error(
        "no record carries prev_hash: the file was written before the hash chain existed, or every record was stripped of it"
    )]
    Unchained,
    #[error(
        "the chain ends at {actual}, not at the expected head {expected}: the last record was changed or records were cut from the end"
    )]
    HeadMismatch { expected: String, actual: String },
    #[error("cannot read the trace: {0}")]
    Read(String),
    #[error(
        "no record is linked with the chain key: the file was written without TRACE_CHAIN_KEY, or re-chained by someone without it"
    )]
    NotKeyed,
}

/// Verifies the chain of the trace in `reader`; with `head`, also that it ends there; with
/// `key`, also that the records are linked under it from the first keyed one on.
///
/// # Errors
/// The first line that breaks the chain, a file without a chained record (or, with a key,
/// without a keyed one), a different head, or a read failure.
pub fn verify(
    mut reader: impl BufRead,
    head: Option<&str>,
    key: Option<&ChainKey>,
) -> Result<Verified, VerifyError> {
    let mut line_no = 0u64;
    // The previous line: its number, its unkeyed link, and its keyed one (with a key).
    let mut prev: Option<(u64, String, Option<String>)> = None;
    let mut keyed = false;
    let mut records = 0u64;
    let mut unchained = 0u64;
    let mut chained = false;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| VerifyError::Read(e.to_string()))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        records += 1;
        let bad = |reason: String| VerifyError::BadLine {
            line: line_no,
            reason,
        };
        let value: Value =
            serde_json::from_slice(&buf).map_err(|_| bad("not a JSON trace record".to_owned()))?;
        match value.get("prev_hash") {
            None | Some(Value::Null) if !chained => unchained += 1,
            None | Some(Value::Null) => {
                return Err(bad(
                    "has no prev_hash, after chained records: it was changed or inserted"
                        .to_owned(),
                ));
            }
            Some(Value::String(claimed)) => {
                chained = true;
                let is_keyed = claimed.starts_with(KEYED_PREFIX);
                if is_keyed && key.is_none() {
                    return Err(bad(
                        "is linked with a chain key: verify with the key (TRACE_CHAIN_KEY or --key-file)"
                            .to_owned(),
                    ));
                }
                if !is_keyed && keyed {
                    return Err(bad(
                        "is not linked with the chain key, after keyed records: it was changed or inserted"
                            .to_owned(),
                    ));
                }
                keyed |= is_keyed;
                let genesis = if is_keyed {
                    ChainKey::genesis()
                } else {
                    GENESIS_HASH.to_owned()
                };
                let expected = match &prev {
                    None => genesis,
                    Some((_, unkeyed, keyed_link)) if is_keyed => {
                        keyed_link.clone().unwrap_or_else(|| unkeyed.clone())
                    }
                    Some((_, unkeyed, _)) => unkeyed.clone(),
                };
                if *claimed != expected {
                    let reason = match &prev {
                        None => "prev_hash is not the genesis hash of a first record: records before it were removed".to_owned(),
                        Some((at, _, _)) => format!(
                            "prev_hash does not match line {at}: a record was changed, removed or reordered at or before line {at}"
                        ),
                    };
                    return Err(bad(reason));
                }
            }
            Some(_) => return Err(bad("prev_hash is not a string".to_owned())),
        }
        prev = Some((line_no, link(None, &buf), key.map(|k| k.link(&buf))));
    }
    if !chained {
        return Err(VerifyError::Unchained);
    }
    if key.is_some() && !keyed {
        return Err(VerifyError::NotKeyed);
    }
    let actual = prev
        .map(|(_, unkeyed, keyed_link)| {
            if keyed {
                keyed_link.unwrap_or(unkeyed)
            } else {
                unkeyed
            }
        })
        .unwrap_or_default();
    if let Some(expected) = head
        && !expected.eq_ignore_ascii_case(&actual)
    {
        return Err(VerifyError::HeadMismatch {
            expected: expected.to_owned(),
            actual,
        });
    }
    Ok(Verified {
        records,
        unchained,
        head: actual,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{RecordKind, TraceRecord, TraceSink, line_hash};

    fn record(step: u32) -> TraceRecord {
        TraceRecord {
            timestamp: "2026-05-14T09:15:04.382Z".to_owned(),
            server: Some("srv".into()),
            tool: "t".into(),
            arguments_hash: "00".into(),
            latency_ms: 1.0,
            success: true,
            executed: true,
            cost_usd: 0.25,
            decision: Some("allow".into()),
            ..TraceRecord::new(RecordKind::ToolCall, "s", step)
        }
    }

    /// Writes `steps` records through a sink opened on `path` (appending), then closes it.
    async fn write(path: &std::path::Path, steps: std::ops::Range<u32>) {
        let sink = TraceSink::open(path).await.unwrap();
        for step in steps {
            assert!(sink.emit_confirmed(record(step)).await);
        }
        sink.flush().await;
    }

    fn check(text: &str, head: Option<&str>) -> Result<Verified, VerifyError> {
        verify(text.as_bytes(), head, None)
    }

    fn bad_line(text: &str) -> u64 {
        match check(text, None) {
            Err(VerifyError::BadLine { line, .. }) => line,
            other => panic!("expected a bad line, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn the_chain_continues_across_restarts_and_every_edit_is_caught() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        write(&path, 1..4).await;
        write(&path, 4..6).await; // a restart: the chain goes on from the last line
        let text = std::fs::read_to_string(&path).unwrap();
        let good = check(&text, None).unwrap();
        assert_eq!(good.records, 5);
        assert_eq!(good.unchained, 0);
        assert_eq!(check(&text, Some(&good.head)).unwrap(), good);
        let lines: Vec<&str> = text.lines().collect();
        let join = |ls: &[&str]| ls.join("\n") + "\n";

        // A changed value in record 2: line 3 names the break.
        let mut changed = lines.clone();
        let edited = lines[1].replace("\"cost_usd\":0.25", "\"cost_usd\":0.01");
        assert_ne!(edited, lines[1]);
        changed[1] = &edited;
        assert_eq!(bad_line(&join(&changed)), 3);
        // A removed record.
        let removed = [lines[0], lines[2], lines[3], lines[4]];
        assert_eq!(bad_line(&join(&removed)), 2);
        // Two records swapped.
        let swapped = [lines[0], lines[2], lines[1], lines[3], lines[4]];
        assert_eq!(bad_line(&join(&swapped)), 2);
        // The first record removed: the new first one does not start at the genesis hash.
        assert_eq!(bad_line(&join(&lines[1..])), 1);
        // A record inserted.
        let inserted = [lines[0], lines[1], lines[1], lines[2], lines[3], lines[4]];
        assert_eq!(bad_line(&join(&inserted)), 3);
        // prev_hash stripped from a record in the middle.
        let mut v: Value = serde_json::from_str(lines[2]).unwrap();
        v.as_object_mut().unwrap().remove("prev_hash");
        let stripped_line = v.to_string();
        let stripped = [lines[0], lines[1], &stripped_line, lines[3], lines[4]];
        assert_eq!(bad_line(&join(&stripped)), 3);
        // The last record changed: only the head shows it.
        let last = lines[4].replace("\"step\":5", "\"step\":9");
        let tail_edit = [lines[0], lines[1], lines[2], lines[3], &last];
        assert!(check(&join(&tail_edit), None).is_ok());
        assert!(matches!(
            check(&join(&tail_edit), Some(&good.head)),
            Err(VerifyError::HeadMismatch { .. })
        ));
        // Records cut from the end: the head shows it too.
        assert!(matches!(
            check(&join(&lines[..4]), Some(&good.head)),
            Err(VerifyError::HeadMismatch { .. })
        ));
        // Not JSON.
        let garbage = [lines[0], "{oops", lines[1]];
        assert_eq!(bad_line(&join(&garbage)), 2);
    }

    #[test]
    fn blank_lines_are_skipped_and_an_unchained_prefix_is_allowed() {
        let mut legacy = serde_json::to_value(record(1)).unwrap();
        legacy.as_object_mut().unwrap().remove("prev_hash");
        let legacy = legacy.to_string();
        let mut next = record(2);
        next.prev_hash = Some(line_hash(legacy.as_bytes()));
        let next = serde_json::to_string(&next).unwrap();
        let text = format!("{legacy}\n\n{next}\n\n");
        let v = check(&text, None).unwrap();
        assert_eq!((v.records, v.unchained), (2, 1));
        assert_eq!(v.head, line_hash(next.as_bytes()));
        // A file with no chained record at all cannot be verified.
        assert_eq!(
            check(&format!("{legacy}\n"), None),
            Err(VerifyError::Unchained)
        );
        assert_eq!(check("", None), Err(VerifyError::Unchained));
    }

    /// Re-chains `lines` from `from` on, as someone without a key can: each `prev_hash` set to
    /// the SHA-256 of the line before.
    fn rechain(lines: &mut [String], from: usize) {
        for i in from..lines.len() {
            let prev = if i == 0 {
                GENESIS_HASH.to_owned()
            } else {
                link(None, lines[i - 1].as_bytes())
            };
            let mut v: Value = serde_json::from_str(&lines[i]).unwrap();
            v["prev_hash"] = Value::String(prev);
            lines[i] = serde_json::to_string(&v).unwrap();
        }
    }

    /// The regression: the chain was unkeyed, so rewriting a record and re-chaining everything
    /// after it passed `trace verify` (without `--head`). With a chain key, it fails: the
    /// re-chained records are not keyed, and a wholly re-chained file has no keyed record.
    #[tokio::test]
    async fn a_keyed_chain_catches_a_rewrite_that_re_chains_the_rest() {
        let key = ChainKey::new(&[9u8; 32]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        // Two unkeyed records, then the operator sets a key: the chain goes on keyed.
        write(&path, 1..3).await;
        let sink = TraceSink::open_keyed(&path, Some(key.clone()))
            .await
            .unwrap();
        for step in 3..6 {
            assert!(sink.emit_confirmed(record(step)).await);
        }
        sink.flush().await;
        drop(sink);
        let text = std::fs::read_to_string(&path).unwrap();
        let good = verify(text.as_bytes(), None, Some(&key)).unwrap();
        assert_eq!(good.records, 5);
        assert!(good.head.starts_with(KEYED_PREFIX), "{}", good.head);
        // Without the key, keyed records cannot be checked: said so.
        assert!(verify(text.as_bytes(), None, None).is_err());
        // Another key does not verify.
        let other = ChainKey::new(&[1u8; 32]).unwrap();
        assert!(verify(text.as_bytes(), None, Some(&other)).is_err());

        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        // Record 4 rewritten, the rest re-chained without the key.
        let mut rewritten = lines.clone();
        rewritten[3] = rewritten[3].replace("\"cost_usd\":0.25", "\"cost_usd\":0.01");
        rechain(&mut rewritten, 3);
        let rewritten = rewritten.join("\n") + "\n";
        assert!(
            check(&rewritten, None).is_err(),
            "the keyed prefix still breaks"
        );
        assert!(matches!(
            verify(rewritten.as_bytes(), None, Some(&key)),
            Err(VerifyError::BadLine { line: 4, .. })
        ));
        // The whole file re-chained without the key: unkeyed it holds, with the key it does not.
        let mut all = lines.clone();
        all[3] = all[3].replace("\"cost_usd\":0.25", "\"cost_usd\":0.01");
        rechain(&mut all, 0);
        let all = all.join("\n") + "\n";
        assert!(check(&all, None).is_ok());
        assert_eq!(
            verify(all.as_bytes(), None, Some(&key)),
            Err(VerifyError::NotKeyed)
        );
        assert_eq!(
            ChainKey::new(&[0u8; 31]).unwrap_err(),
            crate::trace::ChainKeyTooShort
        );
    }
}
