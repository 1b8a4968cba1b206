//! Seed 004's `examples/enrichment`: an [`Enricher`] backed by the consumer's own storage (here
//! a map filled from stored JSON), so each selection carries a "## Tool Overrides" block with
//! the selected tools' hints, ready to append to the turn's system prompt.
//! Run: `cargo run -p toolforge-select --example enrichment`.

use std::collections::BTreeMap;
use std::sync::Arc;

use toolforge_select::broker::{Broker, Hints, LocalBroker, OVERRIDE_HEADING, Rules};
use toolforge_select::{Catalog, Tool};

fn main() {
    // Hints as a consumer would store them: one JSON record per tool (the seed's MarshalHints).
    let stored = [
        (
            "read_file",
            r#"{"preconditions":["the path exists"],"output_shape":"the file's text"}"#,
        ),
        (
            "write_file",
            r#"{"anti_patterns":["do not overwrite without reading first"],"chains_with":["read_file"]}"#,
        ),
    ];
    let mut table: BTreeMap<String, Hints> = BTreeMap::new();
    for (tool, json) in stored {
        table.insert(
            tool.to_owned(),
            Hints::from_json(json).expect("stored hints parse"),
        );
    }

    let broker = LocalBroker::new(Rules::default()).with_enricher(Arc::new(table));
    broker.register(tools());
    let result = Broker::select(&broker, "*", u32::MAX);
    println!("{}", result.override_block);
    assert!(result.override_block.starts_with(OVERRIDE_HEADING));
    assert!(result.override_block.contains("the path exists"));
    assert!(
        !result.override_block.contains("list_dir"),
        "tools without hints are skipped"
    );
}

fn tools() -> Vec<Tool> {
    let catalog = Catalog::from_snapshot_json(
        r#"{"servers": [{"name": "files", "tools": [
            {"name": "read_file", "description": "Read a file", "inputSchema": {"type": "object"}},
            {"name": "write_file", "description": "Write a file", "inputSchema": {"type": "object"}},
            {"name": "list_dir", "description": "List a folder", "inputSchema": {"type": "object"}}]}]}"#,
    )
    .expect("the catalog is valid");
    catalog.tools().cloned().collect()
}
