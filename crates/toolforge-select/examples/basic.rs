//! Seed 004's `examples/basic`: hand-written rules, a few tools, one selection for the intent
//! detected in a message. Run: `cargo run -p toolforge-select --example basic`.

use toolforge_select::broker::{Broker, LocalBroker, Rules, estimate_tools_tokens, intent};
use toolforge_select::{Catalog, Tool};

fn main() {
    // 1. A tiny rule set in go-toolbroker's own format (JSON, keys as Go writes them).
    let rules = Rules::from_json_str(
        r#"{"Rules": [
            {"Name": "hide-noisy-build-tools", "Intent": "*", "Priority": 10,
             "Match": {"Patterns": ["build_*"]}, "Action": {"Type": "exclude"}},
            {"Name": "show-build-tools-on-build-intent", "Intent": "run_build", "Priority": 20,
             "Match": {"Patterns": ["build_*"]}, "Action": {"Type": "include"}}
        ]}"#,
    )
    .expect("the rules are valid");

    // 2. A broker with the discovered tools.
    let broker = LocalBroker::new(rules);
    broker.register(tools());

    // 3. The intent of the user's message, then the relevant tools.
    let message = "create a new task for the backend";
    let intent = intent::detect(message)
        .first()
        .map_or("*", |(name, _)| *name)
        .to_owned();
    let result = Broker::select(&broker, &intent, u32::MAX);
    let names: Vec<&str> = result.tools.iter().map(|t| t.tool.name.as_str()).collect();
    println!(
        "intent {intent:?}: selected {}/{} tools: {names:?}; {}",
        result.count,
        result.total,
        result.rationale.join("; ")
    );
    assert_eq!(
        names,
        ["tasks_list", "tasks_create"],
        "build tools are hidden"
    );

    // 4. Prune further to a token budget.
    let tokens = estimate_tools_tokens(result.tools.iter().map(|t| &*t.tool));
    let pruned = Broker::select(&broker, &intent, 20);
    println!(
        "{tokens} estimated tokens; within a budget of 20: {} tool(s)",
        pruned.count
    );
    assert!(pruned.count < result.count);

    // Under "run_build" both rules apply and the exclusion wins (deny always wins, as the
    // seed's algorithm says): the include rule then keeps only tools it matches, and none is left.
    let build = Broker::select(&broker, "run_build", u32::MAX);
    println!("intent \"run_build\": {}", build.rationale.join("; "));
    assert_eq!(build.count, 0);
}

fn tools() -> Vec<Tool> {
    let catalog = Catalog::from_snapshot_json(
        r#"{"servers": [
            {"name": "tasks", "tools": [
                {"name": "tasks_list", "description": "List tasks", "inputSchema": {"type": "object"}},
                {"name": "tasks_create", "description": "Create a task", "inputSchema": {"type": "object"}}]},
            {"name": "ci", "tools": [
                {"name": "build_go_project", "description": "Build a Go project", "inputSchema": {"type": "object"}}]}
        ]}"#,
    )
    .expect("the catalog is valid");
    catalog.tools().cloned().collect()
}
