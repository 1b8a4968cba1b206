//! Grading the selector against labelled cases (DESIGN §8, "Selection cases").
//!
//! A case names the catalog tool a model's call resolved to; the selector decides among that
//! tool's overlap group (a tool in no group is its own single candidate). A case passes when
//! server, tool, rule and alternatives all match. Embeddings for `cosine-similarity` come from
//! the caller (a closure), so grading stays pure and the embedder is the caller's choice.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::broker::Rules;
use crate::catalog::{Catalog, ToolId};
use crate::selection::{Call, Limits, Selection};

/// One labelled case.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Case {
    pub id: String,
    pub prompt: String,
    pub tool_call: ToolCall,
    #[serde(default)]
    pub session: Vec<SessionCall>,
    pub expected: Expected,
}

/// The call the model made, as resolved to one catalog tool.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ToolCall {
    pub server: String,
    pub tool: String,
    #[serde(default)]
    pub arguments: Value,
}

/// An earlier executed call of the session.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct SessionCall {
    pub server: String,
    pub tool: String,
}

/// What the selector should decide.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct Expected {
    pub server: String,
    pub tool: String,
    pub selection_rule: String,
    #[serde(default)]
    pub alternatives: Vec<String>,
}

/// A bad case file: the line and the reason.
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    #[error("line {line}: {message}")]
    Line { line: usize, message: String },
}

/// Parses JSON Lines cases (blank lines and `#` comments skipped); ids must be unique and
/// every `tool_call` must name a tool of `catalog`.
///
/// # Errors
/// The first bad line, with its number.
pub fn parse_cases(text: &str, catalog: &Catalog) -> Result<Vec<Case>, CaseError> {
    let mut cases: Vec<Case> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        let err = |message: String| CaseError::Line {
            line: line_no,
            message,
        };
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let case: Case = serde_json::from_str(trimmed).map_err(|e| err(e.to_string()))?;
        if cases.iter().any(|c| c.id == case.id) {
            return Err(err(format!("duplicate case id {}", case.id)));
        }
        let id = ToolId::new(&case.tool_call.server, &case.tool_call.tool);
        if catalog.get(&id).is_none() {
            return Err(err(format!(
                "{}: tool_call {id} is not in the catalog",
                case.id
            )));
        }
        cases.push(case);
    }
    Ok(cases)
}

/// How one case went.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    pub id: String,
    pub pass: bool,
    pub expected: Expected,
    pub got: Expected,
}

/// Totals for one rule (of the expected labels).
#[derive(Debug, Clone, Default, Serialize)]
pub struct RuleTotals {
    pub total: usize,
    pub passed: usize,
}

/// The report, exactly the `--json` object of DESIGN §8.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub accuracy: f64,
    pub total: usize,
    pub passed: usize,
    pub by_rule: BTreeMap<String, RuleTotals>,
    pub cases: Vec<CaseResult>,
}

/// Grades `cases` against `catalog`: each case is one [`Selection::route`] of its call among
/// the called tool's overlap group, with `embed` as the embedder of `cosine-similarity`.
#[must_use]
pub fn grade(
    catalog: &Catalog,
    cases: &[Case],
    embed: &(dyn Fn(&str) -> Vec<f32> + Sync),
) -> Report {
    let selection = Selection::new(catalog.clone(), Rules::default(), Limits::default())
        .with_route_embedder(embed);
    let mut results = Vec::with_capacity(cases.len());
    let mut by_rule: BTreeMap<String, RuleTotals> = BTreeMap::new();
    for case in cases {
        let called = ToolId::new(&case.tool_call.server, &case.tool_call.tool);
        let session: Vec<ToolId> = case
            .session
            .iter()
            .map(|s| ToolId::new(&s.server, &s.tool))
            .collect();
        let prompt_vector = embed(&case.prompt);
        let call = Call {
            candidates: &[],
            prompt: &case.prompt,
            arguments: &case.tool_call.arguments,
            session: &session,
            prompt_vector: Some(&prompt_vector),
        };
        let got = selection.route_tool(&called, &call).map_or_else(
            || Expected {
                server: String::new(),
                tool: String::new(),
                selection_rule: "none".into(),
                alternatives: Vec::new(),
            },
            |d| Expected {
                server: d.chosen.server.clone(),
                tool: d.chosen.name.clone(),
                selection_rule: d.rule.to_owned(),
                alternatives: d.alternatives,
            },
        );
        let pass = got == case.expected;
        let totals = by_rule
            .entry(case.expected.selection_rule.clone())
            .or_default();
        totals.total += 1;
        totals.passed += usize::from(pass);
        results.push(CaseResult {
            id: case.id.clone(),
            pass,
            expected: case.expected.clone(),
            got,
        });
    }
    let passed = results.iter().filter(|r| r.pass).count();
    #[allow(clippy::cast_precision_loss)]
    let accuracy = if results.is_empty() {
        0.0
    } else {
        passed as f64 / results.len() as f64
    };
    Report {
        accuracy,
        total: results.len(),
        passed,
        by_rule,
        cases: results,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn catalog() -> Catalog {
        Catalog::from_snapshot_json(
            &json!({
                "servers": [
                    {"name": "filesystem", "aliases": ["fs"], "tools": [
                        {"name": "read_file", "description": "Read a local file", "inputSchema":
                         {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}]},
                    {"name": "github", "tools": [
                        {"name": "get_file_contents", "description": "Get a file from a GitHub repository",
                         "inputSchema": {"type": "object", "properties": {"owner": {"type": "string"},
                         "repo": {"type": "string"}, "path": {"type": "string"}},
                         "required": ["owner", "repo", "path"], "additionalProperties": false}},
                        {"name": "search_code", "description": "Search code", "inputSchema": {"type": "object"}}]}
                ],
                "overlaps": {"read_file": ["filesystem/read_file", "github/get_file_contents"]}
            })
            .to_string(),
        )
        .expect("catalog")
    }

    fn flat(_: &str) -> Vec<f32> {
        vec![1.0, 0.0]
    }

    #[test]
    fn grades_and_counts_by_expected_rule() {
        let cases = parse_cases(
            &[
                json!({"id": "a", "prompt": "Use fs to read README.md", "tool_call": {"server": "github",
                       "tool": "get_file_contents", "arguments": {"path": "README.md"}},
                       "expected": {"server": "filesystem", "tool": "read_file",
                       "selection_rule": "explicit-mention", "alternatives": ["github"]}}),
                json!({"id": "b", "prompt": "read it", "tool_call": {"server": "filesystem", "tool": "read_file",
                       "arguments": {"owner": "o", "repo": "r", "path": "p", "x": 1}},
                       "expected": {"server": "filesystem", "tool": "read_file",
                       "selection_rule": "argument-type", "alternatives": ["github"]}}),
                json!({"id": "c", "prompt": "search", "tool_call": {"server": "github", "tool": "search_code"},
                       "expected": {"server": "github", "tool": "search_code",
                       "selection_rule": "single-candidate", "alternatives": []}}),
                json!({"id": "d", "prompt": "wrong label", "tool_call": {"server": "github", "tool": "search_code"},
                       "expected": {"server": "github", "tool": "search_code",
                       "selection_rule": "priority-order", "alternatives": []}}),
            ]
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n"),
            &catalog(),
        )
        .expect("cases");
        let report = grade(&catalog(), &cases, &flat);
        let passes: Vec<bool> = report.cases.iter().map(|c| c.pass).collect();
        assert_eq!(passes, [true, true, true, false]);
        assert_eq!((report.total, report.passed), (4, 3));
        assert!((report.accuracy - 0.75).abs() < 1e-9);
        assert_eq!(report.by_rule["priority-order"].passed, 0);
        assert_eq!(report.cases[3].got.selection_rule, "single-candidate");
    }

    #[test]
    fn bad_lines_are_reported_with_their_number() {
        let cat = catalog();
        let ok = json!({"id": "a", "prompt": "p", "tool_call": {"server": "github", "tool": "search_code"},
                        "expected": {"server": "github", "tool": "search_code", "selection_rule": "single-candidate"}});
        let cases = [
            (format!("{ok}\n{{broken"), "line 2"),
            (format!("{ok}\n\n{ok}"), "duplicate case id a"),
            (
                ok.to_string().replace("search_code\"}", "nope\"}"),
                "not in the catalog",
            ),
        ];
        for (text, want) in cases {
            let err = parse_cases(&text, &cat).expect_err(want).to_string();
            assert!(err.contains(want), "{err}");
        }
    }
}
