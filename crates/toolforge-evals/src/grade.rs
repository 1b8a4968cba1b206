//! `grade_selection`: the selection evaluation of `toolforge eval selection` as a tool, over a
//! catalog snapshot and a JSON Lines case file given by path.
//!
//! The cases are graded with the deterministic hashing embedder, as the CLI does, so the
//! `cosine-similarity` rule decides the same way in both places.

use std::path::Path;

use serde_json::{Value, json};
use toolforge_llm::embed::HashingEmbedder;
use toolforge_select::Catalog;
use toolforge_select::grade::{grade, parse_cases};

use crate::error::EvalError;

fn read(path: &Path, what: &str) -> Result<String, EvalError> {
    std::fs::read_to_string(path)
        .map_err(|e| EvalError::Grading(format!("cannot read the {what} {}: {e}", path.display())))
}

/// Grades the cases; returns `accuracy`, `total`, `passed`, `by_rule` and the failing cases.
///
/// # Errors
/// [`EvalError::Grading`] when a file cannot be read or parsed.
pub fn grade_files(catalog: &Path, cases: &Path) -> Result<Value, EvalError> {
    let text = read(catalog, "catalog snapshot")?;
    let catalog_data = Catalog::from_snapshot_json(&text).map_err(|e| {
        EvalError::Grading(format!(
            "invalid catalog snapshot {}: {e}",
            catalog.display()
        ))
    })?;
    let text = read(cases, "cases file")?;
    let case_list = parse_cases(&text, &catalog_data)
        .map_err(|e| EvalError::Grading(format!("invalid cases file {}: {e}", cases.display())))?;
    let embedder = HashingEmbedder::default();
    let report = grade(&catalog_data, &case_list, &|t| embedder.embed_one(t));
    let failures: Vec<&toolforge_select::grade::CaseResult> =
        report.cases.iter().filter(|c| !c.pass).collect();
    Ok(json!({
        "accuracy": report.accuracy,
        "total": report.total,
        "passed": report.passed,
        "by_rule": report.by_rule,
        "failures": failures,
    }))
}
