//! False positives on real catalogs: the 726 tool descriptions of the retrieval sets
//! (LiveMCPBench, MetaTool) and the reference catalog of the npm and PyPI MCP servers the
//! tests run. The counts are printed (`--nocapture`) and must be zero.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use toolforge_guard::{scan_tool, scan_value};

fn repo_file(rel: &str) -> String {
    let path = format!("{}/../../{rel}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// (server, MCP tool object) of a retrieval set.
fn retrieval_set(name: &str) -> Vec<(String, Value)> {
    repo_file(&format!("evals/retrieval/{name}/tools.jsonl"))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let server = v["server"].as_str().unwrap().to_owned();
            let tool = json!({
                "name": v["name"],
                "description": v["description"],
                "inputSchema": v.get("input_schema").cloned().unwrap_or(json!({"type": "object"})),
            });
            (server, tool)
        })
        .collect()
}

fn reference_catalog() -> Vec<(String, Value)> {
    let v: Value = serde_json::from_str(&repo_file("evals/catalogs/reference.json")).unwrap();
    v["servers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| {
            let server = s["name"].as_str().unwrap().to_owned();
            s["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |t| (server.clone(), t.clone()))
        })
        .collect()
}

/// Tools flagged, each with what was found; other servers' names are those of the same set.
fn flagged(set: &[(String, Value)]) -> Vec<String> {
    let mut names: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (server, tool) in set {
        names
            .entry(server.as_str())
            .or_default()
            .push(tool["name"].as_str().unwrap());
    }
    set.iter()
        .filter_map(|(server, tool)| {
            // A name its own server has too is that server's own tool.
            let own = &names[server.as_str()];
            let others: Vec<&str> = names
                .iter()
                .filter(|(s, _)| **s != server.as_str())
                .flat_map(|(_, n)| n.iter().copied())
                .filter(|n| !own.contains(n))
                .collect();
            let found = scan_tool(tool, &others);
            (!found.is_empty()).then(|| {
                let shown: Vec<String> = found.iter().map(ToString::to_string).collect();
                format!("{server}/{}: {}", tool["name"], shown.join("; "))
            })
        })
        .collect()
}

#[test]
fn no_poisoning_marker_on_the_726_retrieval_tools_or_the_reference_catalog() {
    let live = retrieval_set("livemcpbench");
    let meta = retrieval_set("metatool");
    let reference = reference_catalog();
    assert_eq!(live.len() + meta.len(), 726);
    let mut all = Vec::new();
    for (name, set) in [
        ("livemcpbench", &live),
        ("metatool", &meta),
        ("reference", &reference),
    ] {
        let hits = flagged(set);
        println!(
            "poisoning false positives, {name}: {} of {} tools",
            hits.len(),
            set.len()
        );
        for h in &hits {
            println!("  {h}");
        }
        all.extend(hits);
    }
    assert!(all.is_empty(), "benign tools flagged: {all:#?}");
}

#[test]
fn no_secret_in_the_benign_tool_definitions() {
    let mut hits = Vec::new();
    let mut total = 0;
    for set in [
        retrieval_set("livemcpbench"),
        retrieval_set("metatool"),
        reference_catalog(),
    ] {
        for (server, tool) in set {
            total += 1;
            let kinds = scan_value(&tool);
            if !kinds.is_empty() {
                hits.push(format!("{server}/{}: {kinds:?}", tool["name"]));
            }
        }
    }
    println!(
        "secret false positives: {} of {total} tool definitions",
        hits.len()
    );
    assert!(hits.is_empty(), "{hits:#?}");
}
