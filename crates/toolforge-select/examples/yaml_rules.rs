//! Seed 004's `examples/yaml-rules`: load rules from a YAML file at run time (go-toolbroker's
//! format), then select for a few intents. Run: `cargo run -p toolforge-select --example
//! yaml-rules [-- RULES.yaml]` (default: `examples/rules.yaml` of this crate).

use std::path::PathBuf;

use toolforge_select::broker::{Broker, LocalBroker, Rules};
use toolforge_select::{Catalog, Tool};

fn main() {
    let path = std::env::args_os().nth(1).map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/rules.yaml"),
        PathBuf::from,
    );
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let rules = Rules::from_path_text(&path.to_string_lossy(), &text)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    println!("{} rule(s) from {}", rules.rules.len(), path.display());

    let broker = LocalBroker::new(rules);
    broker.register(tools());
    for intent in ["read", "write", "git", "*"] {
        let result = Broker::select(&broker, intent, u32::MAX);
        let names: Vec<&str> = result.tools.iter().map(|t| t.tool.name.as_str()).collect();
        println!("{intent:>6}: {}/{} {names:?}", result.count, result.total);
        for line in &result.rationale {
            println!("        {line}");
        }
        assert!(
            !names.iter().any(|n| n.starts_with("delete_")),
            "never-delete applies to every intent"
        );
    }
    let write = Broker::select(&broker, "write", u32::MAX);
    assert!(write.tools.iter().all(|t| t.tool.server == "files"));
}

fn tools() -> Vec<Tool> {
    let catalog = Catalog::from_snapshot_json(
        r#"{"servers": [
            {"name": "files", "tools": [
                {"name": "read_file", "description": "Read a file", "inputSchema": {"type": "object"}},
                {"name": "write_file", "description": "Write a file", "inputSchema": {"type": "object"}},
                {"name": "delete_file", "description": "Delete a file", "inputSchema": {"type": "object"}}]},
            {"name": "git", "tools": [
                {"name": "git_log", "description": "Show the commit log", "inputSchema": {"type": "object"}},
                {"name": "git_commit", "description": "Record changes", "inputSchema": {"type": "object"}}]}
        ]}"#,
    )
    .expect("the catalog is valid");
    catalog.tools().cloned().collect()
}
