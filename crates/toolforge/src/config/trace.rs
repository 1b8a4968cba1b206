//! The trace file: `TRACE_SINK` (a file path; `off` or `none` disables tracing; default
//! `logs/traces.jsonl`), and the key its hash chain is keyed with: the file
//! `TRACE_CHAIN_KEY_FILE` names, else the text of `TRACE_CHAIN_KEY` (none: plain SHA-256).

use std::path::PathBuf;

use super::source::Source;

/// Where traces go unless `TRACE_SINK` says otherwise.
pub const DEFAULT_TRACE_SINK: &str = "logs/traces.jsonl";

#[derive(Debug, Clone)]
pub struct TraceFileSettings {
    /// The trace file; `None` when `TRACE_SINK` is `off` or `none`.
    pub sink: Option<PathBuf>,
    pub chain_key: Option<ChainKeySource>,
}

/// Where the trace chain key is read from.
#[derive(Debug, Clone)]
pub enum ChainKeySource {
    File(PathBuf),
    Text(String),
}

impl TraceFileSettings {
    pub(super) fn read(env: &Source) -> Self {
        let target = env
            .text("TRACE_SINK")
            .unwrap_or_else(|| DEFAULT_TRACE_SINK.to_owned());
        let sink = (!matches!(target.as_str(), "off" | "none")).then(|| PathBuf::from(target));
        let chain_key = env
            .path("TRACE_CHAIN_KEY_FILE")
            .map(ChainKeySource::File)
            .or_else(|| env.text("TRACE_CHAIN_KEY").map(ChainKeySource::Text));
        Self { sink, chain_key }
    }

    /// The trace file a reader of traces (`cost-report`, `trace verify`) opens: `TRACE_SINK`,
    /// else the default, also when tracing is off.
    pub fn file_to_read(&self) -> PathBuf {
        self.sink
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_TRACE_SINK))
    }
}
