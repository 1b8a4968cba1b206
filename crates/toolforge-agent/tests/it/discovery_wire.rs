//! Discovery through the real Anthropic client against a wire-exact fake of the Messages API
//! on loopback: the model searches, then calls what it found; the request bodies show the found
//! tool appended after the first offer with its cache breakpoints intact, or, with Anthropic's
//! own tool search, the left-out tools deferred and what the search loaded run.

use std::collections::VecDeque;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use parking_lot::Mutex;
use serde_json::{Value, json};
use toolforge_agent::trace::Searcher;
use toolforge_agent::{RecordKind, Visibility};
use toolforge_llm::ProviderToolSearch;
use toolforge_llm::anthropic::{AnthropicConfig, AnthropicModel};
use toolforge_select::Catalog;

use super::discovery::{config, request, run};

/// The fake's script (one answer a call; then an end_turn answer) and every body it was sent.
#[derive(Default)]
struct Fake {
    answers: Mutex<VecDeque<Value>>,
    bodies: Mutex<Vec<Value>>,
}

async fn messages(
    State(fake): State<Arc<Fake>>,
    axum::Json(body): axum::Json<Value>,
) -> axum::Json<Value> {
    fake.bodies.lock().push(body);
    let content = fake.answers.lock().pop_front();
    let (content, stop) = match content {
        Some(c) => (c, "tool_use"),
        None => (
            json!([{"type": "text", "text": "{\"answer\": \"done\", \"key_facts\": {}}"}]),
            "end_turn",
        ),
    };
    axum::Json(json!({
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": null,
        "usage": {
            "input_tokens": 420,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 40,
            "service_tier": "standard"
        }
    }))
}

/// Serves `answers` on loopback; the model speaking to it, and the fake.
async fn fake(
    answers: Vec<Value>,
    search: Option<ProviderToolSearch>,
) -> (Arc<AnthropicModel>, Arc<Fake>) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = Arc::new(Fake {
        answers: Mutex::new(answers.into()),
        bodies: Mutex::new(Vec::new()),
    });
    let app = Router::new()
        .route("/v1/messages", post(messages))
        .with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let model = AnthropicModel::new(AnthropicConfig {
        api_key: "sk-ant-test".into(),
        base_url: format!("http://{addr}"),
        model: "claude-sonnet-4-6".into(),
        max_attempts: 1,
        tool_search: search,
        ..AnthropicConfig::default()
    })
    .unwrap();
    (Arc::new(model), fake)
}

fn names(body: &Value) -> Vec<&str> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect()
}

fn hide_vault() -> Visibility {
    Arc::new(|c: &Catalog| c.narrowed(|_, tool| tool.server != "vault", |_| true))
}

#[tokio::test]
async fn the_agent_searches_then_calls_what_it_found_over_the_messages_api() {
    let (model, fake) = fake(
        vec![
            json!([
                {"type": "text", "text": "I need a tool for commits."},
                {"type": "tool_use", "id": "toolu_01A", "name": "search_tools",
                 "input": {"query": "list commits", "limit": 1}}
            ]),
            json!([
                {"type": "tool_use", "id": "toolu_01B", "name": "list_commits",
                 "input": {"owner": "o", "repo": "r"}}
            ]),
        ],
        None,
    )
    .await;
    let mut req = request("history of o/r, and the vault's secret");
    req.visibility = Some(hide_vault());
    let (r, t, backend) = run(model, config(), req, None).await;
    assert!(!r.halted, "{r:?}");
    let bodies = fake.bodies.lock();
    assert_eq!(bodies.len(), 3);
    assert_eq!(names(&bodies[0]), ["read_file", "search_tools"]);
    assert_eq!(
        names(&bodies[1]),
        ["read_file", "search_tools", "list_commits"]
    );
    // Appended: the first offer's definitions are sent again byte for byte, its breakpoint
    // included, and the found tool carries the last one; the system prompt keeps its own.
    assert_eq!(
        bodies[1]["tools"].as_array().unwrap()[..2],
        bodies[0]["tools"].as_array().unwrap()[..]
    );
    assert_eq!(
        bodies[0]["tools"][1]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert_eq!(
        bodies[1]["tools"][2]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert!(bodies[1]["tools"][0].get("cache_control").is_none());
    assert_eq!(bodies[2]["tools"], bodies[1]["tools"]);
    assert_eq!(
        bodies[1]["system"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    // The search's answer, as the model read it, named the tool and nothing hidden.
    let result = &bodies[1]["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "toolu_01A");
    let text = result["content"].as_str().unwrap();
    assert!(
        text.contains("list_commits") && !text.contains("secret"),
        "{text}"
    );
    drop(bodies);
    assert_eq!(*backend.calls.lock(), ["github/list_commits"]);
    let kinds: Vec<RecordKind> = t.iter().map(|x| x.kind).collect();
    assert_eq!(
        kinds,
        [
            RecordKind::ToolSearch,
            RecordKind::ToolCall,
            RecordKind::ModelCall
        ]
    );
    assert_eq!(t[0].search.as_ref().unwrap().added, ["github/list_commits"]);
    assert!(t[1].executed && t[1].tool == "list_commits");
}

#[tokio::test]
async fn with_anthropics_tool_search_the_left_out_tools_go_deferred_and_what_it_loads_runs() {
    let (model, fake) = fake(
        vec![json!([
            {"type": "server_tool_use", "id": "srvtoolu_01", "name": "tool_search_tool_bm25",
             "input": {"query": "commits"}},
            {"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_01",
             "content": {"type": "tool_search_tool_search_result",
                         "tool_references": [{"type": "tool_reference", "tool_name": "list_commits"}]}},
            {"type": "tool_use", "id": "toolu_01C", "name": "list_commits",
             "input": {"owner": "o", "repo": "r"}}
        ])],
        Some(ProviderToolSearch::Bm25),
    )
    .await;
    let mut req = request("history of o/r");
    req.visibility = Some(hide_vault());
    let (r, t, backend) = run(model, config(), req, None).await;
    assert!(!r.halted, "{r:?}");
    let bodies = fake.bodies.lock();
    assert_eq!(bodies.len(), 2);
    let tools = bodies[0]["tools"].as_array().unwrap();
    assert_eq!(
        tools[0],
        json!({"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"})
    );
    assert_eq!(tools[1]["name"], "read_file");
    assert_eq!(tools[1]["cache_control"], json!({"type": "ephemeral"}));
    // The agent's own search is not offered; every other visible tool is deferred, the hidden
    // vault is not sent at all.
    let deferred: Vec<&str> = tools[2..]
        .iter()
        .inspect(|t| assert_eq!(t["defer_loading"], true))
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(deferred.contains(&"list_commits"), "{deferred:?}");
    assert!(!names(&bodies[0]).contains(&"search_tools"));
    assert!(!names(&bodies[0]).iter().any(|n| n.contains("secret")));
    // The tool list never changes; the search goes back as it came.
    assert_eq!(bodies[1]["tools"], bodies[0]["tools"]);
    let turn = &bodies[1]["messages"][1]["content"];
    assert_eq!(turn[0]["type"], "server_tool_use");
    assert_eq!(
        turn[1]["content"]["tool_references"][0]["tool_name"],
        "list_commits"
    );
    drop(bodies);
    assert_eq!(*backend.calls.lock(), ["github/list_commits"]);
    assert_eq!(r.searches.len(), 1);
    assert_eq!(
        (r.searches[0].by, r.searches[0].query.as_str()),
        (Searcher::Provider, "commits")
    );
    assert_eq!(r.searches[0].added, ["list_commits"]);
    let kinds: Vec<RecordKind> = t.iter().map(|x| x.kind).collect();
    assert_eq!(
        kinds,
        [
            RecordKind::ToolSearch,
            RecordKind::ToolCall,
            RecordKind::ModelCall
        ]
    );
    assert_eq!(t[0].tool, "tool_search_tool_bm25");
    // The turn's cost is split over the provider's search and the call; every dollar traced.
    let traced: f64 = t.iter().map(|x| x.cost_usd).sum();
    assert!(
        (traced - r.cost_usd).abs() < 1e-8,
        "{traced} vs {}",
        r.cost_usd
    );
}
