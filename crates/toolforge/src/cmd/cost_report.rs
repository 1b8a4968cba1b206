//! `toolforge cost-report`: the daily spend table, read from the agent's trace file (JSON Lines,
//! schema "1": one `TraceRecord` per tool call, and one per model call that asked for no tool,
//! so the costs add up to everything the provider billed). The file is streamed line by line:
//! trace files grow without bound. Damaged lines are skipped, counted and named by line number,
//! never fatal.

use std::collections::{BTreeMap, HashSet};
use std::io::BufRead as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_json::{Value, json};
use time::format_description::well_known::Rfc3339;
use time::{Date, OffsetDateTime, UtcOffset};
use toolforge_agent::trace::{READ_SCHEMA_VERSIONS, reads_schema};
use toolforge_agent::{RecordKind, TraceRecord};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Trace file to read (JSON Lines). Default: $TRACE_SINK, else logs/traces.jsonl.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Only days from this UTC date on, inclusive.
    #[arg(long, value_name = "YYYY-MM-DD", value_parser = parse_date)]
    pub since: Option<Date>,
    /// Count only calls that were executed (leaves out dry-run and rejected calls).
    #[arg(long)]
    pub executed_only: bool,
    /// Print the report as a JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(args: Args, config: &crate::config::Config) -> anyhow::Result<()> {
    let path = args.trace.unwrap_or_else(|| config.trace.file_to_read());
    let filter = Filter {
        since: args.since,
        executed_only: args.executed_only,
    };
    let report = {
        let path = path.clone();
        tokio::task::spawn_blocking(move || read_report(&path, filter))
            .await
            .context("the trace reader stopped")??
    };
    if report.skipped_lines > 0 {
        let numbers: Vec<String> = report
            .skipped_line_numbers
            .iter()
            .map(u64::to_string)
            .collect();
        let more = if report.skipped_lines > report.skipped_line_numbers.len() as u64 {
            ", …"
        } else {
            ""
        };
        eprintln!(
            "skipped {} malformed line(s) of {} (line {}{more}): not counted in the totals",
            report.skipped_lines,
            path.display(),
            numbers.join(", ")
        );
    }
    if report.unknown_schema_lines > 0 {
        eprintln!(
            "warning: skipped {} record(s) with an unknown schema_version (this build reads \
             \"{}\"; a newer toolforge may have written them)",
            report.unknown_schema_lines,
            READ_SCHEMA_VERSIONS.join("\", \"")
        );
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&render_json(&report))?);
    } else if report.days.is_empty() {
        println!("no trace records ({})", describe_selection(&path, filter));
    } else {
        print!("{}", render_table(&report));
    }
    Ok(())
}

/// The report `--json` prints, every day of the trace file at `path` (the console's "Spend
/// and cache" page). No file yet is an empty report: nothing has been billed.
///
/// # Errors
/// The file cannot be opened or read.
pub fn json_report(path: &Path) -> anyhow::Result<Value> {
    if !path.exists() {
        return Ok(render_json(&Report::default()));
    }
    read_report(path, Filter::default()).map(|report| render_json(&report))
}

/// `--since`: a calendar date, `YYYY-MM-DD`.
fn parse_date(s: &str) -> Result<Date, String> {
    let format = time::macros::format_description!("[year]-[month]-[day]");
    Date::parse(s.trim(), &format)
        .map_err(|e| format!("expected a date as YYYY-MM-DD, e.g. 2026-05-14 ({e})"))
}

/// Which records count.
#[derive(Debug, Clone, Copy, Default)]
struct Filter {
    /// Only days on or after this UTC date.
    since: Option<Date>,
    /// Only records with `executed: true`.
    executed_only: bool,
}

/// The figures of one day, or of the whole selection.
#[derive(Debug, Clone, Default, PartialEq)]
struct Figures {
    /// Distinct `session_id`s.
    sessions: u64,
    /// Tool calls.
    calls: u64,
    /// Model calls that asked for no tool (their cost is not in any tool call's).
    model_calls: u64,
    executed: u64,
    dry_run: u64,
    /// `success: false`.
    failed: u64,
    tokens_in: u64,
    tokens_out: u64,
    /// Unrounded sum; rounded only when shown.
    cost_usd: f64,
}

impl Figures {
    fn add(&mut self, r: &TraceRecord) {
        if r.kind == RecordKind::ModelCall {
            self.model_calls += 1;
        } else {
            self.calls += 1;
            self.executed += u64::from(r.executed);
            self.dry_run += u64::from(r.dry_run);
            self.failed += u64::from(!r.success);
        }
        self.tokens_in = self.tokens_in.saturating_add(r.tokens_in);
        self.tokens_out = self.tokens_out.saturating_add(r.tokens_out);
        self.cost_usd += r.cost_usd;
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Day {
    /// UTC.
    date: Date,
    figures: Figures,
}

#[derive(Debug, Clone, Default, PartialEq)]
struct Report {
    /// Ascending by date.
    days: Vec<Day>,
    /// The sum of `days`, except `sessions`: distinct over the whole selection (a session that
    /// crosses midnight counts once here and once on each of its days).
    total: Figures,
    /// Bad JSON, missing or mistyped fields, a bad timestamp, a partial last line.
    skipped_lines: u64,
    /// The first [`MAX_NAMED_LINES`] of them, 1-based.
    skipped_line_numbers: Vec<u64>,
    /// Well-formed lines whose `schema_version` this build does not read.
    unknown_schema_lines: u64,
}

/// Most skipped lines named by number.
const MAX_NAMED_LINES: usize = 10;

/// One line of the trace file.
enum Line {
    Blank,
    Record(TraceRecord, Date),
    UnknownSchema,
    Malformed,
}

fn parse_line(bytes: &[u8]) -> Line {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Line::Blank;
    }
    match serde_json::from_slice::<TraceRecord>(bytes) {
        Ok(r) if !reads_schema(&r.schema_version) => Line::UnknownSchema,
        Ok(r) => match utc_date(&r.timestamp) {
            Some(date) => Line::Record(r, date),
            None => Line::Malformed,
        },
        Err(_) => {
            // A newer schema may have renamed or dropped fields: tell it apart from damage.
            #[derive(serde::Deserialize)]
            struct Versioned {
                schema_version: String,
            }
            match serde_json::from_slice::<Versioned>(bytes) {
                Ok(v) if !reads_schema(&v.schema_version) => Line::UnknownSchema,
                _ => Line::Malformed,
            }
        }
    }
}

/// The UTC calendar date of an RFC 3339 timestamp (`2026-05-14T09:15:04.382Z`).
fn utc_date(timestamp: &str) -> Option<Date> {
    OffsetDateTime::parse(timestamp, &Rfc3339)
        .ok()
        .map(|t| t.to_offset(UtcOffset::UTC).date())
}

/// Groups trace lines (without their newline) into UTC days. Pure: no I/O.
fn aggregate<I>(lines: I, filter: Filter) -> Report
where
    I: IntoIterator,
    I::Item: AsRef<[u8]>,
{
    #[derive(Default)]
    struct Acc {
        figures: Figures,
        sessions: HashSet<String>,
    }
    let mut days: BTreeMap<Date, Acc> = BTreeMap::new();
    let mut all_sessions: HashSet<String> = HashSet::new();
    let mut report = Report::default();
    for (number, line) in (1u64..).zip(lines) {
        let (record, date) = match parse_line(line.as_ref()) {
            Line::Blank => continue,
            Line::Malformed => {
                report.skipped_lines += 1;
                if report.skipped_line_numbers.len() < MAX_NAMED_LINES {
                    report.skipped_line_numbers.push(number);
                }
                continue;
            }
            Line::UnknownSchema => {
                report.unknown_schema_lines += 1;
                continue;
            }
            Line::Record(r, date) => (r, date),
        };
        if filter.since.is_some_and(|since| date < since)
            || (filter.executed_only && !record.executed)
        {
            continue;
        }
        let acc = days.entry(date).or_default();
        acc.figures.add(&record);
        if !acc.sessions.contains(&record.session_id) {
            acc.sessions.insert(record.session_id.clone());
        }
        if !all_sessions.contains(&record.session_id) {
            all_sessions.insert(record.session_id);
        }
    }
    for (date, acc) in days {
        let mut figures = acc.figures;
        figures.sessions = acc.sessions.len() as u64;
        let t = &mut report.total;
        t.calls += figures.calls;
        t.model_calls += figures.model_calls;
        t.executed += figures.executed;
        t.dry_run += figures.dry_run;
        t.failed += figures.failed;
        t.tokens_in = t.tokens_in.saturating_add(figures.tokens_in);
        t.tokens_out = t.tokens_out.saturating_add(figures.tokens_out);
        t.cost_usd += figures.cost_usd;
        report.days.push(Day { date, figures });
    }
    report.total.sessions = all_sessions.len() as u64;
    report
}

/// Streams the trace file through [`aggregate`].
fn read_report(path: &Path, filter: Filter) -> anyhow::Result<Report> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => anyhow::bail!(
            "no trace file at {} (set TRACE_SINK or pass --trace)",
            path.display()
        ),
        Err(e) => {
            return Err(e)
                .with_context(|| format!("cannot open the trace file {}", path.display()));
        }
    };
    let mut read_error = None;
    // Bytes, not `lines()`: a line that is not UTF-8 is one malformed line, not the end.
    let lines = std::io::BufReader::new(file)
        .split(b'\n')
        .map_while(|r| r.map_err(|e| read_error = Some(e)).ok());
    let report = aggregate(lines, filter);
    if let Some(e) = read_error {
        return Err(e).with_context(|| format!("cannot read the trace file {}", path.display()));
    }
    Ok(report)
}

/// The path and the filters, for the "nothing selected" message.
fn describe_selection(path: &Path, filter: Filter) -> String {
    let mut parts = vec![path.display().to_string()];
    if let Some(since) = filter.since {
        parts.push(format!("since {since}"));
    }
    if filter.executed_only {
        parts.push("executed only".to_owned());
    }
    parts.join(", ")
}

fn format_cost(usd: f64) -> String {
    format!("${usd:.4}")
}

/// Header, one row per day (ascending), a TOTAL row; columns aligned, numbers to the right.
fn render_table(report: &Report) -> String {
    const HEADER: [&str; 10] = [
        "date",
        "sessions",
        "calls",
        "model-only",
        "executed",
        "dry-run",
        "failed",
        "tokens in",
        "tokens out",
        "cost USD",
    ];
    let cells = |label: String, f: &Figures| -> [String; 10] {
        [
            label,
            f.sessions.to_string(),
            f.calls.to_string(),
            f.model_calls.to_string(),
            f.executed.to_string(),
            f.dry_run.to_string(),
            f.failed.to_string(),
            f.tokens_in.to_string(),
            f.tokens_out.to_string(),
            format_cost(f.cost_usd),
        ]
    };
    let mut rows: Vec<[String; 10]> = vec![HEADER.map(str::to_owned)];
    rows.extend(
        report
            .days
            .iter()
            .map(|d| cells(d.date.to_string(), &d.figures)),
    );
    rows.push(cells("TOTAL".to_owned(), &report.total));
    let mut widths = [0usize; 10];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in &rows {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .enumerate()
            .map(|(i, (cell, w))| {
                if i == 0 {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        out.push_str(&line.join("  "));
        out.push('\n');
    }
    out
}

/// The trace rounds each call's cost to the micro-dollar; sums are shown at that precision so
/// float noise (`0.30000000000000004`) stays out of the JSON.
fn json_cost(usd: f64) -> f64 {
    (usd * 1e6).round() / 1e6
}

fn figures_json(f: &Figures) -> serde_json::Map<String, Value> {
    let Value::Object(map) = json!({
        "sessions": f.sessions,
        "calls": f.calls,
        "model_calls": f.model_calls,
        "executed": f.executed,
        "dry_run": f.dry_run,
        "failed": f.failed,
        "tokens_in": f.tokens_in,
        "tokens_out": f.tokens_out,
        "cost_usd": json_cost(f.cost_usd),
    }) else {
        unreachable!("json! of an object literal is an object")
    };
    map
}

fn render_json(report: &Report) -> Value {
    let days: Vec<Value> = report
        .days
        .iter()
        .map(|d| {
            let mut map = serde_json::Map::new();
            map.insert("date".to_owned(), Value::String(d.date.to_string()));
            map.extend(figures_json(&d.figures));
            Value::Object(map)
        })
        .collect();
    json!({
        "days": days,
        "total": figures_json(&report.total),
        "skipped_lines": report.skipped_lines,
        "skipped_line_numbers": report.skipped_line_numbers,
        "unknown_schema_lines": report.unknown_schema_lines,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::date;

    fn record(timestamp: &str, session: &str) -> TraceRecord {
        TraceRecord {
            timestamp: timestamp.to_owned(),
            server: Some("toolkit".to_owned()),
            tool: "echo".to_owned(),
            arguments_hash: "0123456789abcdef".to_owned(),
            latency_ms: 12.5,
            success: true,
            executed: true,
            tokens_in: 100,
            tokens_out: 10,
            cost_usd: 0.001,
            selection_rule: Some("only_candidate".to_owned()),
            ..TraceRecord::new(RecordKind::ToolCall, session, 1)
        }
    }

    fn line(r: &TraceRecord) -> String {
        serde_json::to_string(r).unwrap()
    }

    fn all() -> Filter {
        Filter::default()
    }

    /// Records written by the trace sink carry `prev_hash` (and `principal`, `decision`): the
    /// report reads them like any other, and every record's cost is counted.
    #[tokio::test]
    async fn chained_traces_are_reported_in_full() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("traces.jsonl");
        let sink = toolforge_agent::TraceSink::open(&path).await.unwrap();
        for (i, session) in ["a", "a", "b"].into_iter().enumerate() {
            let mut r = record(&format!("2026-05-14T09:0{i}:00.000Z"), session);
            r.decision = Some("allow".to_owned());
            assert!(sink.emit_confirmed(r).await);
        }
        sink.flush().await;
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.lines().all(|l| l.contains("\"prev_hash\":\"")),
            "{text}"
        );
        let report = read_report(&path, all()).unwrap();
        assert_eq!(report.skipped_lines, 0);
        assert_eq!(report.total.calls, 3);
        assert_eq!(report.total.sessions, 2);
        assert!((report.total.cost_usd - 0.003).abs() < 1e-12);
    }

    #[test]
    fn days_split_at_utc_midnight() {
        let mut offset = record("2026-05-15T01:30:00.000+02:00", "s3");
        offset.cost_usd = 0.004;
        let lines = [
            line(&record("2026-05-14T00:00:00.000Z", "s1")),
            line(&record("2026-05-14T23:59:59.999Z", "s1")),
            line(&record("2026-05-15T00:00:00.000Z", "s2")),
            // 23:30 UTC on the 14th.
            line(&offset),
        ];
        let report = aggregate(&lines, all());
        let dates: Vec<Date> = report.days.iter().map(|d| d.date).collect();
        assert_eq!(dates, [date!(2026 - 05 - 14), date!(2026 - 05 - 15)]);
        assert_eq!(report.days[0].figures.calls, 3);
        assert!((report.days[0].figures.cost_usd - 0.006).abs() < 1e-12);
        assert_eq!(report.days[1].figures.calls, 1);
    }

    #[test]
    fn days_come_out_ascending_whatever_the_file_order() {
        let lines = [
            line(&record("2026-05-16T10:00:00.000Z", "a")),
            line(&record("2026-05-14T10:00:00.000Z", "a")),
            line(&record("2026-05-15T10:00:00.000Z", "a")),
        ];
        let report = aggregate(&lines, all());
        let dates: Vec<String> = report.days.iter().map(|d| d.date.to_string()).collect();
        assert_eq!(dates, ["2026-05-14", "2026-05-15", "2026-05-16"]);
    }

    #[test]
    fn since_is_inclusive() {
        let lines = [
            line(&record("2026-05-13T23:59:59.999Z", "a")),
            line(&record("2026-05-14T00:00:00.000Z", "a")),
            line(&record("2026-05-15T08:00:00.000Z", "a")),
        ];
        let filter = Filter {
            since: Some(date!(2026 - 05 - 14)),
            executed_only: false,
        };
        let report = aggregate(&lines, filter);
        let dates: Vec<Date> = report.days.iter().map(|d| d.date).collect();
        assert_eq!(dates, [date!(2026 - 05 - 14), date!(2026 - 05 - 15)]);
        assert_eq!(report.total.calls, 2);
    }

    #[test]
    fn executed_only_leaves_out_dry_run_and_rejected_calls() {
        let executed = record("2026-05-14T09:00:00.000Z", "a");
        let mut dry = record("2026-05-14T09:01:00.000Z", "b");
        dry.executed = false;
        dry.dry_run = true;
        let mut rejected = record("2026-05-14T09:02:00.000Z", "c");
        rejected.executed = false;
        rejected.success = false;
        let mut failed_run = record("2026-05-14T09:03:00.000Z", "a");
        failed_run.success = false;
        let lines = [
            line(&executed),
            line(&dry),
            line(&rejected),
            line(&failed_run),
        ];

        let everything = aggregate(&lines, all());
        let f = &everything.days[0].figures;
        assert_eq!(
            (f.sessions, f.calls, f.executed, f.dry_run, f.failed),
            (3, 4, 2, 1, 2)
        );

        let only = aggregate(
            &lines,
            Filter {
                since: None,
                executed_only: true,
            },
        );
        let f = &only.days[0].figures;
        assert_eq!(
            (f.sessions, f.calls, f.executed, f.dry_run, f.failed),
            (1, 2, 2, 0, 1)
        );
    }

    #[test]
    fn malformed_lines_are_skipped_and_counted() {
        let good = line(&record("2026-05-14T09:00:00.000Z", "a"));
        let mut missing_field: Value = serde_json::from_str(&good).unwrap();
        missing_field.as_object_mut().unwrap().remove("cost_usd");
        let mut bad_timestamp = record("2026-05-14T09:00:00.000Z", "a");
        bad_timestamp.timestamp = "yesterday".to_owned();
        let partial = &good[..good.len() / 2];
        let lines: Vec<Vec<u8>> = vec![
            good.clone().into_bytes(),
            b"not json".to_vec(),
            missing_field.to_string().into_bytes(),
            line(&bad_timestamp).into_bytes(),
            b"[1, 2]".to_vec(),
            b"\xff\xfe{".to_vec(),
            Vec::new(),
            b"   \r".to_vec(),
            partial.as_bytes().to_vec(),
        ];
        let report = aggregate(&lines, all());
        assert_eq!(report.skipped_lines, 6, "blank lines are not counted");
        assert_eq!(report.skipped_line_numbers, [2, 3, 4, 5, 6, 9]);
        assert_eq!(report.unknown_schema_lines, 0);
        assert_eq!(report.total.calls, 1);
    }

    #[test]
    fn unknown_schema_versions_are_counted_separately() {
        let mut newer = record("2026-05-14T09:00:00.000Z", "a");
        newer.schema_version = "9".to_owned();
        let reshaped = r#"{"schema_version":"3","when":"2026-05-14T09:00:00Z"}"#;
        let broken_v1 = r#"{"schema_version":"1","when":"2026-05-14T09:00:00Z"}"#;
        let lines = [
            line(&record("2026-05-14T09:00:00.000Z", "a")),
            line(&newer),
            reshaped.to_owned(),
            broken_v1.to_owned(),
        ];
        let report = aggregate(&lines, all());
        assert_eq!(report.unknown_schema_lines, 2);
        assert_eq!(report.skipped_lines, 1);
        assert_eq!(report.total.calls, 1);
    }

    #[test]
    fn sessions_are_distinct_per_day_and_overall() {
        let lines = [
            line(&record("2026-05-14T09:00:00.000Z", "a")),
            line(&record("2026-05-14T09:01:00.000Z", "a")),
            line(&record("2026-05-14T09:02:00.000Z", "b")),
            line(&record("2026-05-14T23:59:00.000Z", "c")),
            line(&record("2026-05-15T00:01:00.000Z", "c")),
        ];
        let report = aggregate(&lines, all());
        assert_eq!(report.days[0].figures.sessions, 3);
        assert_eq!(report.days[1].figures.sessions, 1);
        // "c" crosses midnight: on both days, once in the total.
        assert_eq!(report.total.sessions, 3);
    }

    #[test]
    fn totals_are_the_sum_of_the_days() {
        let mut lines = Vec::new();
        for (i, ts) in [
            "2026-05-12T01:00:00.000Z",
            "2026-05-12T02:00:00.000Z",
            "2026-05-13T03:00:00.000Z",
            "2026-05-14T04:00:00.000Z",
            "2026-05-14T05:00:00.000Z",
            "2026-05-14T06:00:00.000Z",
        ]
        .iter()
        .enumerate()
        {
            let mut r = record(ts, &format!("s{}", i % 2));
            r.tokens_in = 100 + i as u64;
            r.tokens_out = 7 * i as u64;
            r.cost_usd = 0.000_123 * (i + 1) as f64;
            r.success = i % 3 != 0;
            r.executed = i % 2 == 0;
            r.dry_run = !r.executed;
            lines.push(line(&r));
        }
        let report = aggregate(&lines, all());
        assert_eq!(report.days.len(), 3);
        let mut sum = Figures::default();
        for d in &report.days {
            let f = &d.figures;
            sum.calls += f.calls;
            sum.model_calls += f.model_calls;
            sum.executed += f.executed;
            sum.dry_run += f.dry_run;
            sum.failed += f.failed;
            sum.tokens_in += f.tokens_in;
            sum.tokens_out += f.tokens_out;
            sum.cost_usd += f.cost_usd;
        }
        sum.sessions = 2;
        assert_eq!(report.total, sum);
        assert_eq!(report.total.calls, 6);
        assert_eq!(report.total.tokens_in, 615);
        assert_eq!(report.total.tokens_out, 105);
    }

    #[test]
    fn cost_is_rounded_only_when_shown() {
        // Each call rounds to $0.0000 on its own; the day does not.
        let lines: Vec<String> = (0..3)
            .map(|i| {
                let mut r = record(&format!("2026-05-14T09:0{i}:00.000Z"), "a");
                r.cost_usd = 0.000_04;
                line(&r)
            })
            .collect();
        let report = aggregate(&lines, all());
        assert!((report.days[0].figures.cost_usd - 0.000_12).abs() < 1e-12);
        let table = render_table(&report);
        assert!(table.contains("$0.0001"), "{table}");
        assert!(!table.contains("$0.0000"), "{table}");
        assert_eq!(render_json(&report)["days"][0]["cost_usd"], json!(0.00012));
    }

    #[test]
    fn table_has_header_days_and_total_aligned() {
        let mut big = record("2026-05-15T10:00:00.000Z", "b");
        big.tokens_in = 1_234_567;
        big.cost_usd = 12.345_67;
        let lines = [line(&record("2026-05-14T10:00:00.000Z", "a")), line(&big)];
        let table = render_table(&aggregate(&lines, all()));
        let rows: Vec<&str> = table.lines().collect();
        assert_eq!(rows.len(), 4, "{table}");
        assert!(rows[0].starts_with("date"), "{table}");
        assert!(rows[0].ends_with("cost USD"), "{table}");
        assert!(rows[1].starts_with("2026-05-14"), "{table}");
        assert!(rows[1].ends_with("$0.0010"), "{table}");
        assert!(rows[2].ends_with("$12.3457"), "{table}");
        assert!(rows[3].starts_with("TOTAL"), "{table}");
        assert!(rows[3].ends_with("$12.3467"), "{table}");
        assert!(rows.iter().all(|r| r.len() == rows[0].len()), "{table}");
        let fields: Vec<&str> = rows[3].split_whitespace().collect();
        assert_eq!(
            fields,
            [
                "TOTAL", "2", "2", "0", "2", "0", "0", "1234667", "20", "$12.3467"
            ]
        );
    }

    #[test]
    fn json_has_the_documented_shape() {
        let lines = [
            line(&record("2026-05-14T10:00:00.000Z", "a")),
            "{".to_owned(),
        ];
        let out = render_json(&aggregate(&lines, all()));
        assert_eq!(
            out,
            json!({
                "days": [{
                    "date": "2026-05-14", "sessions": 1, "calls": 1, "model_calls": 0,
                    "executed": 1, "dry_run": 0, "failed": 0, "tokens_in": 100,
                    "tokens_out": 10, "cost_usd": 0.001,
                }],
                "total": {
                    "sessions": 1, "calls": 1, "model_calls": 0, "executed": 1, "dry_run": 0,
                    "failed": 0, "tokens_in": 100, "tokens_out": 10, "cost_usd": 0.001,
                },
                "skipped_lines": 1,
                "skipped_line_numbers": [2],
                "unknown_schema_lines": 0,
            })
        );
    }

    #[test]
    fn model_calls_count_apart_from_tool_calls_and_their_cost_is_in_the_total() {
        let mut answer = record("2026-05-14T10:00:01.000Z", "a");
        answer.kind = RecordKind::ModelCall;
        answer.server = None;
        answer.tool = String::new();
        answer.executed = false;
        answer.cost_usd = 0.002;
        let lines = [
            line(&record("2026-05-14T10:00:00.000Z", "a")),
            line(&answer),
        ];
        let report = aggregate(&lines, all());
        let t = &report.total;
        assert_eq!(
            (t.calls, t.model_calls, t.executed, t.dry_run),
            (1, 1, 1, 0)
        );
        assert!((t.cost_usd - 0.003).abs() < 1e-12);
        assert_eq!(render_json(&report)["total"]["cost_usd"], json!(0.003));
    }

    #[test]
    fn since_parses_only_calendar_dates() {
        assert_eq!(parse_date("2026-05-14"), Ok(date!(2026 - 05 - 14)));
        for bad in ["2026-13-01", "14/05/2026", "2026-05-14T00:00:00Z", ""] {
            let err = parse_date(bad).unwrap_err();
            assert!(err.contains("YYYY-MM-DD"), "{bad}: {err}");
        }
    }

    #[test]
    fn empty_selection_names_path_and_filters() {
        let filter = Filter {
            since: Some(date!(2026 - 05 - 01)),
            executed_only: true,
        };
        assert_eq!(
            describe_selection(Path::new("logs/traces.jsonl"), filter),
            "logs/traces.jsonl, since 2026-05-01, executed only"
        );
        assert_eq!(describe_selection(Path::new("t.jsonl"), all()), "t.jsonl");
    }
}
