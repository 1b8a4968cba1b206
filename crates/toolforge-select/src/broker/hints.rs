//! Per-tool hints and the markdown "## Tool Overrides" block built from them (seed 004's
//! enrichment pipeline).
//!
//! Hints shape how the model uses a tool without touching its schema. Their storage belongs to
//! the consumer: this module ships the [`Hints`] type and its JSON codec, the one-method
//! [`Enricher`] lookup, the no-op default [`NopEnricher`], map-backed enrichers, and the
//! composition. Rule files carry no hints: rules decide *which* tools a request sees, hints say
//! *how* to use them, and the two change at different paces.
//!
//! The override block also lists the tools a `summarize` rule brought in, so the model knows to
//! ask `request_tools` for their full definitions (see [`super::selected::ToolSummary`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::selected::SelectedTool;

/// Heading of the override block.
pub const OVERRIDE_HEADING: &str = "## Tool Overrides";

/// Per-tool usage hints. All fields are optional; a value with every field empty is "no hints".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hints {
    /// What must hold before calling the tool ("the path exists").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preconditions: Vec<String>,
    /// Uses to avoid ("do not read binary files with it").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub anti_patterns: Vec<String>,
    /// Tool names usually called before or after this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chains_with: Vec<String>,
    /// What the result looks like ("JSON array of {path, size}").
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub output_shape: String,
}

impl Hints {
    /// True when no field says anything (blank strings count as nothing).
    pub fn is_empty(&self) -> bool {
        let blank = |v: &[String]| v.iter().all(|s| s.trim().is_empty());
        blank(&self.preconditions)
            && blank(&self.anti_patterns)
            && blank(&self.chains_with)
            && self.output_shape.trim().is_empty()
    }

    /// The seed's `MarshalHints`: compact JSON, empty fields left out.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("hints serialize")
    }

    /// The seed's `UnmarshalHints`: parses what [`Hints::to_json`] wrote. Unknown fields are
    /// errors, so a misspelt field in a consumer's table fails instead of vanishing.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// A hints lookup failed (the consumer's storage could not answer).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("hints lookup for tool {tool:?} failed: {reason}")]
pub struct EnrichError {
    /// The tool whose hints were asked for.
    pub tool: String,
    /// What the storage said.
    pub reason: String,
}

/// Where hints come from: one method, keyed by tool name (the seed's `LookupByToolName`).
/// `Ok(None)` means "no hints for this tool"; an error aborts the override block (selection
/// itself still succeeds, see [`super::SelectResult::override_error`]).
pub trait Enricher: Send + Sync {
    /// The hints for the tool named `name`, if any.
    fn lookup_by_tool_name(&self, name: &str) -> Result<Option<Hints>, EnrichError>;
}

/// The safe default: never has hints.
#[derive(Debug, Clone, Copy, Default)]
pub struct NopEnricher;

impl Enricher for NopEnricher {
    fn lookup_by_tool_name(&self, _name: &str) -> Result<Option<Hints>, EnrichError> {
        Ok(None)
    }
}

/// An in-memory table, tool name to hints.
impl<S: std::hash::BuildHasher + Send + Sync> Enricher for HashMap<String, Hints, S> {
    fn lookup_by_tool_name(&self, name: &str) -> Result<Option<Hints>, EnrichError> {
        Ok(self.get(name).cloned())
    }
}

/// An in-memory table, tool name to hints.
impl Enricher for BTreeMap<String, Hints> {
    fn lookup_by_tool_name(&self, name: &str) -> Result<Option<Hints>, EnrichError> {
        Ok(self.get(name).cloned())
    }
}

/// The seed's `ComposeOverrideBlock`: the override block for the named tools, hints only.
/// Tools without hints are left out; empty string when none has any. Names repeat at most once.
pub fn compose_override_block(
    tool_names: &[&str],
    enricher: &dyn Enricher,
) -> Result<String, EnrichError> {
    compose(tool_names.iter().map(|n| (*n, false)), enricher)
}

/// The override block for a selection: the hints of the selected tools (in selection order)
/// and a closing line naming the summarized ones. Empty when there is nothing to say.
pub fn override_block(
    selected: &[SelectedTool],
    enricher: &dyn Enricher,
) -> Result<String, EnrichError> {
    compose(
        selected
            .iter()
            .map(|s| (s.tool.name.as_str(), s.summarized)),
        enricher,
    )
}

/// Renders the block. Format (each list item on one line; whitespace inside hints collapsed):
///
/// ```text
/// ## Tool Overrides
///
/// - `read_file`
///   - Preconditions: the path exists; call `list_directory` first when unsure
///   - Anti-patterns: reading binary files
///   - Chains with: `list_directory`, `write_file`
///   - Output shape: the file's text
/// - Summarized (sent without their input schemas): `sql_query`, `rest_get`. Call
///   `request_tools` with their names to get the full definitions before calling them.
/// ```
///
/// (the last item is a single line). Empty hint fields are skipped.
fn compose<'a>(
    tools: impl IntoIterator<Item = (&'a str, bool)>,
    enricher: &dyn Enricher,
) -> Result<String, EnrichError> {
    let tools = tools.into_iter();
    let mut seen: HashSet<&str, BuildFnv> =
        HashSet::with_capacity_and_hasher(tools.size_hint().0, BuildFnv);
    let mut entries = String::new();
    let mut summarized: Vec<&str> = Vec::new();
    for (name, is_summarized) in tools {
        if !seen.insert(name) {
            continue;
        }
        if is_summarized {
            summarized.push(name);
        }
        let Some(hints) = enricher.lookup_by_tool_name(name)? else {
            continue;
        };
        if hints.is_empty() {
            continue;
        }
        let _ = writeln!(entries, "- `{name}`");
        let quoted: Vec<String> = hints
            .chains_with
            .iter()
            .map(|s| one_line(s))
            .filter(|s| !s.is_empty())
            .map(|s| format!("`{s}`"))
            .collect();
        push_line(&mut entries, "Preconditions", &hints.preconditions, "; ");
        push_line(&mut entries, "Anti-patterns", &hints.anti_patterns, "; ");
        push_line(&mut entries, "Chains with", &quoted, ", ");
        push_line(&mut entries, "Output shape", &[&hints.output_shape], "");
    }
    if entries.is_empty() && summarized.is_empty() {
        return Ok(String::new());
    }
    let mut out = format!("{OVERRIDE_HEADING}\n\n{entries}");
    if !summarized.is_empty() {
        out.reserve(summarized.iter().map(|n| n.len() + 4).sum::<usize>() + 160);
        out.push_str("- Summarized (sent without their input schemas): ");
        for (k, name) in summarized.iter().enumerate() {
            if k > 0 {
                out.push_str(", ");
            }
            out.push('`');
            out.push_str(name);
            out.push('`');
        }
        out.push_str(
            ". Call `request_tools` with their names to get the full definitions before \
             calling them.\n",
        );
    }
    Ok(out)
}

/// FNV-1a for the de-duplication set: selection composes a block over thousands of short
/// names per call, where the default SipHash (DoS-resistant, unneeded for tool names the
/// registry already holds) was most of the cost.
#[derive(Clone, Copy, Default)]
struct BuildFnv;

struct Fnv(u64);

impl std::hash::BuildHasher for BuildFnv {
    type Hasher = Fnv;
    fn build_hasher(&self) -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Appends `  - {label}: {items joined by sep}`, items made one-line; nothing if all are blank.
fn push_line(out: &mut String, label: &str, items: &[impl AsRef<str>], sep: &str) {
    let items: Vec<String> = items
        .iter()
        .map(|s| one_line(s.as_ref()))
        .filter(|s| !s.is_empty())
        .collect();
    if !items.is_empty() {
        let _ = writeln!(out, "  - {label}: {}", items.join(sep));
    }
}

/// Collapses every run of whitespace (newlines included) to one space, so a hint can never
/// break the list structure of the block.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
