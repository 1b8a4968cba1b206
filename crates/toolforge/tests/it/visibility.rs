//! Visibility on every surface, with the official Python SDK as the client: the operator's env
//! and flags, the connection URL's query and `x-mcp-*` headers on `/mcp`, the same on
//! `GET /tools`, and the built-in toolkit server wrapped by the same layer over stdio.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::{Served, bin, call, python_client};

fn toolkit() -> Value {
    json!({"mcpServers": {"toolkit": {"command": "toolforge", "args": ["server", "toolkit", "--stdio"]}}})
}

fn names(out: &Value) -> BTreeSet<String> {
    out["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {out}"))
        .iter()
        .filter_map(|t| t.as_str().map(str::to_owned))
        .collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

async fn tools_route(served: &Served, path: &str, headers: &[(&str, &str)]) -> BTreeSet<String> {
    let mut req = reqwest::Client::new().get(format!("{}{path}", served.base));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let rows: Value = req.send().await.unwrap().json().await.unwrap();
    rows.as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["exposed_name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn query_headers_and_operator_denies_on_mcp_and_tools() {
    // The operator hides run_python (env) and every tool tagged destructive (flag).
    let served = Served::start_full(
        &toolkit(),
        &[("MCP_DISABLED_TOOLS", "run_python")],
        &["--disabled-tags", "destructive"],
    )
    .await;
    served.wait_health(60, |h| h["status"] == "ok").await;
    let all = tools_route(&served, "/tools", &[]).await;
    assert!(!all.contains("run_python"), "{all:?}");
    assert!(all.contains("sql_query") && all.contains("rest_exchange_rate"));

    // The connection URL's query fixes the session's scope; the operator's deny still wins.
    let url = format!("{}?tools=sql_query,run_python,list_resources", served.mcp());
    let out = python_client(&[
        "http".into(),
        url,
        "--call".into(),
        "run_python".into(),
        json!({"code": "print(1)"}).to_string(),
        "--call".into(),
        "sql_query".into(),
        json!({"sql": "SELECT COUNT(*) AS n FROM customers"}).to_string(),
        "--call".into(),
        "rest_exchange_rate".into(),
        json!({"base": "USD", "target": "EUR"}).to_string(),
    ])
    .await;
    assert_eq!(names(&out), set(&["sql_query", "list_resources"]), "{out}");
    let hidden = call(&out, 0);
    assert!(
        hidden["error"]
            .as_str()
            .unwrap_or_default()
            .contains("unknown tool"),
        "a hidden tool is uncallable: {out}"
    );
    assert_eq!(call(&out, 1)["is_error"], false, "{out}");
    assert!(
        call(&out, 2)["error"]
            .as_str()
            .unwrap_or_default()
            .contains("unknown tool"),
        "outside the session's scope: {out}"
    );

    // Headers, read on each request.
    let out = python_client(&[
        "http".into(),
        served.mcp(),
        "--header".into(),
        "x-mcp-enabled-tools: rest_exchange_rate, sql_query".into(),
        "--header".into(),
        "x-mcp-disabled-tools: sql_query".into(),
    ])
    .await;
    assert_eq!(names(&out), set(&["rest_exchange_rate"]), "{out}");
    let out = python_client(&[
        "http".into(),
        served.mcp(),
        "--header".into(),
        "x-mcp-query: currency exchange rate".into(),
    ])
    .await;
    assert!(names(&out).contains("rest_exchange_rate"), "{out}");
    assert!(!names(&out).contains("sql_query"), "{out}");

    // GET /tools honours the same channels.
    assert_eq!(
        tools_route(&served, "/tools?tools=sql_query", &[]).await,
        set(&["sql_query"])
    );
    let narrowed = tools_route(&served, "/tools", &[("x-mcp-disabled-tools", "sql_query")]).await;
    assert!(!narrowed.contains("sql_query") && narrowed.contains("list_resources"));
    // A malformed request channel is ignored (available, never open): the denies still hold.
    let bad = tools_route(&served, "/tools?tools=%00bad", &[]).await;
    assert_eq!(bad, all);
}

#[tokio::test]
async fn an_overlap_group_is_listed_while_any_member_is_visible() {
    // Two toolkits: every tool name is shared, so each is one group of two members.
    let toolkit = json!({"command": "toolforge", "args": ["server", "toolkit", "--stdio"]});
    let served = Served::start(&json!({"mcpServers": {"a": toolkit.clone(), "b": toolkit}})).await;
    served.wait_health(60, |h| h["status"] == "ok").await;
    let listed = |query: &str| {
        let url = format!("{}?{query}", served.mcp());
        async move { names(&python_client(&["http".into(), url]).await) }
    };

    assert_eq!(
        listed("tools=a/sql_query,b/list_resources").await,
        set(&["sql_query", "list_resources"])
    );
    let one_member_hidden = listed("disabled_tools=a/sql_query").await;
    assert!(
        one_member_hidden.contains("sql_query"),
        "{one_member_hidden:?}"
    );
    let both_hidden = listed("disabled_tools=a/sql_query,b__sql_query").await;
    assert!(!both_hidden.contains("sql_query"), "{both_hidden:?}");
    assert!(both_hidden.contains("run_python"), "{both_hidden:?}");
}

#[tokio::test]
async fn requests_cannot_widen_the_operator_allow_list() {
    let served =
        Served::start_full(&toolkit(), &[], &["--tools", "sql_query,list_resources"]).await;
    served.wait_health(60, |h| h["status"] == "ok").await;
    assert_eq!(
        tools_route(&served, "/tools", &[]).await,
        set(&["sql_query", "list_resources"])
    );
    assert_eq!(
        tools_route(&served, "/tools?tools=sql_query,run_python", &[]).await,
        set(&["sql_query"]),
        "a request narrows, never widens"
    );
}

#[tokio::test]
async fn the_builtin_toolkit_server_is_wrapped_too() {
    let out = python_client(&[
        "stdio".into(),
        "--call".into(),
        "run_python".into(),
        json!({"code": "print(1)"}).to_string(),
        "--".into(),
        bin().into(),
        "server".into(),
        "toolkit".into(),
        "--stdio".into(),
        "--disabled-tools".into(),
        "run_python,rest_exchange_rate".into(),
    ])
    .await;
    let listed = names(&out);
    assert!(!listed.contains("run_python") && !listed.contains("rest_exchange_rate"));
    assert!(listed.contains("sql_query"), "{out}");
    assert!(
        call(&out, 0)["error"]
            .as_str()
            .unwrap_or_default()
            .contains("unknown tool"),
        "{out}"
    );
}

#[tokio::test]
async fn search_mode_offers_two_meta_tools_and_the_pinned_ones() {
    let served = Served::start_full(
        &toolkit(),
        &[("MCP_DISABLED_TOOLS", "run_python")],
        &["--tool-mode", "search", "--pin-tools", "sql_query"],
    )
    .await;
    served.wait_health(60, |h| h["status"] == "ok").await;
    let out = python_client(&[
        "http".into(),
        served.mcp(),
        "--call".into(),
        "search_tools".into(),
        json!({"query": "currency exchange rate", "limit": 3}).to_string(),
        "--call".into(),
        "call_tool".into(),
        json!({"name": "list_resources", "arguments": {}}).to_string(),
        "--call".into(),
        "call_tool".into(),
        json!({"name": "run_python", "arguments": {"code": "print(1)"}}).to_string(),
        "--call".into(),
        "list_resources".into(),
        json!({}).to_string(),
    ])
    .await;
    assert_eq!(
        names(&out),
        set(&["search_tools", "call_tool", "sql_query"]),
        "{out}"
    );
    let found = &call(&out, 0)["structured"]["tools"];
    assert_eq!(found[0]["name"], "rest_exchange_rate", "{out}");
    assert!(found.as_array().unwrap().len() <= 3);
    assert!(
        found
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["name"] != "run_python"),
        "search sees only visible tools"
    );
    assert_eq!(call(&out, 1)["is_error"], false, "{out}");
    assert!(
        call(&out, 2)["error"]
            .as_str()
            .unwrap_or_default()
            .contains("unknown tool"),
        "{out}"
    );
    assert!(
        call(&out, 3)["error"]
            .as_str()
            .unwrap_or_default()
            .contains("unknown tool"),
        "only the meta-tools and pinned tools are called directly: {out}"
    );
}

fn strings(out: &Value, key: &str) -> BTreeSet<String> {
    out[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {out}"))
        .iter()
        .filter_map(|t| t.as_str().map(str::to_owned))
        .collect()
}

fn error_of<'a>(out: &'a Value, key: &str, i: usize) -> &'a str {
    out[key][i]["error"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn resources_templates_and_prompts_are_filtered_like_tools() {
    let config = json!({"mcpServers": {"conf": {
        "command": bin(), "args": ["server", "conformance", "--stdio"], "tags": ["fixture"]
    }}});
    let served = Served::start(&config).await;
    served.wait_health(60, |h| h["status"] == "ok").await;

    // The session's enabled list names one tool, one prompt and one resource by URI.
    let url = format!(
        "{}?tools=test_simple_text,test_simple_prompt,test://static-text",
        served.mcp()
    );
    let out = python_client(&[
        "http".into(),
        url,
        "--read".into(),
        "test://static-text".into(),
        "--read".into(),
        "test://static-binary".into(),
        "--read".into(),
        "test://template/7/data".into(),
        "--prompt".into(),
        "test_simple_prompt".into(),
        "{}".into(),
        "--prompt".into(),
        "test_prompt_with_image".into(),
        "{}".into(),
    ])
    .await;
    assert_eq!(names(&out), set(&["test_simple_text"]), "{out}");
    assert_eq!(strings(&out, "resources"), set(&["test://static-text"]));
    assert!(strings(&out, "templates").is_empty(), "{out}");
    assert_eq!(strings(&out, "prompts"), set(&["test_simple_prompt"]));
    assert!(out["reads"][0]["text"].is_string(), "{out}");
    assert!(
        error_of(&out, "reads", 1).contains("unknown resource"),
        "{out}"
    );
    assert!(
        error_of(&out, "reads", 2).contains("unknown resource"),
        "{out}"
    );
    assert_eq!(out["got_prompts"][0]["messages"], 1, "{out}");
    assert!(
        error_of(&out, "got_prompts", 1).contains("unknown prompt"),
        "{out}"
    );

    // Headers, per request: a disabled list hides a prompt (as `server/name`) and a resource
    // (by URI); an enabled tag keeps the rest (the server's configured tag applies to
    // everything it offers).
    let out = python_client(&[
        "http".into(),
        served.mcp(),
        "--header".into(),
        "x-mcp-enabled-tags: fixture".into(),
        "--header".into(),
        "x-mcp-disabled-components: conf/test_prompt_with_image, test://watched-resource".into(),
        "--read".into(),
        "test://watched-resource".into(),
        "--read".into(),
        "test://template/7/data".into(),
    ])
    .await;
    let prompts = strings(&out, "prompts");
    assert!(!prompts.contains("test_prompt_with_image"), "{out}");
    assert!(prompts.contains("test_prompt_with_arguments"), "{out}");
    let resources = strings(&out, "resources");
    assert!(!resources.contains("test://watched-resource"), "{out}");
    assert!(resources.contains("test://static-binary"), "{out}");
    assert_eq!(strings(&out, "templates").len(), 1, "{out}");
    assert!(
        error_of(&out, "reads", 0).contains("unknown resource"),
        "{out}"
    );
    assert!(out["reads"][1]["text"].is_string(), "{out}");

    // An enabled tag the server lacks hides everything it offers.
    let out = python_client(&[
        "http".into(),
        served.mcp(),
        "--header".into(),
        "x-mcp-enabled-tags: nothing-has-this".into(),
    ])
    .await;
    assert!(names(&out).is_empty(), "{out}");
    assert!(strings(&out, "resources").is_empty(), "{out}");
    assert!(strings(&out, "prompts").is_empty(), "{out}");
}

#[tokio::test]
async fn the_wrapper_filters_resources_and_prompts_over_stdio() {
    let out = python_client(&[
        "stdio".into(),
        "--read".into(),
        "test://static-text".into(),
        "--read".into(),
        "test://static-binary".into(),
        "--prompt".into(),
        "test_prompt_with_image".into(),
        "{}".into(),
        "--".into(),
        bin().into(),
        "server".into(),
        "conformance".into(),
        "--stdio".into(),
        "--disabled-tools".into(),
        "test://static-text,test_prompt_with_image,test://template/{id}/data".into(),
    ])
    .await;
    let resources = strings(&out, "resources");
    assert!(!resources.contains("test://static-text"), "{out}");
    assert!(resources.contains("test://static-binary"), "{out}");
    assert!(strings(&out, "templates").is_empty(), "{out}");
    assert!(!strings(&out, "prompts").contains("test_prompt_with_image"));
    assert!(strings(&out, "prompts").contains("test_simple_prompt"));
    assert!(
        error_of(&out, "reads", 0).contains("unknown resource"),
        "{out}"
    );
    assert!(out["reads"][1].get("error").is_none(), "{out}");
    assert!(
        error_of(&out, "got_prompts", 0).contains("unknown prompt"),
        "{out}"
    );
}

#[tokio::test]
async fn list_changed_reaches_only_sessions_whose_tools_changed() {
    let python = crate::tool("venv/bin/python");
    let script = crate::root().join("crates/toolforge/tests/python/misbehaving_server.py");
    let config = json!({"mcpServers": {"paged": {"command": python, "args": [script]}}});
    let served = Served::start(&config).await;
    served.wait_health(60, |h| h["status"] == "ok").await;
    let client = crate::root().join("crates/toolforge/tests/python/list_changed_client.py");
    let out = tokio::process::Command::new(crate::tool("venv/bin/python"))
        .arg(client)
        .arg(format!("{}?tools=echo", served.mcp()))
        .arg(served.mcp())
        .arg("grow")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), out)
        .await
        .expect("the client finished within 60 s")
        .expect("the client ran");
    let text = String::from_utf8_lossy(&out.stdout);
    let out: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    // `grow` added extra_4: the open session sees it and was told; the one scoped to `echo`
    // lists the same tool as before and was not.
    assert!(out["open"]["notified"].as_u64() >= Some(1), "{out}");
    assert!(
        out["open"]["after"]
            .as_array()
            .unwrap()
            .contains(&json!("extra_4")),
        "{out}"
    );
    assert_eq!(out["scoped"]["before"], json!(["echo"]), "{out}");
    assert_eq!(out["scoped"]["after"], json!(["echo"]), "{out}");
    assert_eq!(out["scoped"]["notified"], 0, "{out}");
}
