//! Protocol 2026-07-28 through the HTTP router in-process: self-contained requests (no
//! `initialize`, no session) with `_meta` and the SEP-2243 routing headers, as the conformance
//! suite sends them. Covers the MRTR rounds and their sealed `requestState`, `resultType` on
//! every result, client-capability checks and the `x-mcp-header` tool.

use http::{Request, StatusCode};
use serde_json::{Value, json};
use toolforge_conformance::{HttpOptions, router};
use tower::ServiceExt as _;

const VERSION: &str = "2026-07-28";

fn meta(caps: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": "fixture-test", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": caps
    })
}

/// One fixture (one `requestState` key) for a whole test.
pub(crate) fn server() -> axum::Router {
    router(HttpOptions::default())
}

/// Sends one request; returns the HTTP status and the JSON-RPC response (from JSON or SSE).
pub(crate) async fn rpc_with(
    server: &axum::Router,
    method: &str,
    mut params: Value,
    caps: Value,
    extra: &[(&str, &str)],
) -> (StatusCode, Value) {
    params["_meta"] = meta(caps);
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let mut req = Request::post("/mcp")
        .header("host", "127.0.0.1:9000")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", VERSION)
        .header("mcp-method", method);
    if let Some(name) = (params.get("name"))
        .or_else(|| params.get("uri"))
        .or_else(|| params.get("taskId"))
    {
        req = req.header("mcp-name", name.as_str().unwrap());
    }
    for (k, v) in extra {
        req = req.header(*k, *v);
    }
    let resp = server
        .clone()
        .oneshot(req.body(axum::body::Body::from(body.to_string())).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .unwrap();
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    let message = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:").map(str::trim).or(Some(l)))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|m| m.get("id") == Some(&json!(7)))
        .unwrap_or_else(|| panic!("no response to {method} in {text:?}"));
    (status, message)
}

async fn rpc(server: &axum::Router, method: &str, params: Value) -> Value {
    let caps = json!({"elicitation": {}, "sampling": {}, "roots": {}});
    rpc_with(server, method, params, caps, &[]).await.1
}

fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

fn text(response: &Value) -> &str {
    response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text result: {response}"))
}

#[tokio::test]
async fn results_are_marked_complete_with_cache_hints() {
    let s = server();
    for (method, params) in [
        ("tools/list", json!({})),
        ("prompts/list", json!({})),
        ("resources/list", json!({})),
        ("resources/templates/list", json!({})),
        ("resources/read", json!({"uri": "test://static-text"})),
        ("prompts/get", json!({"name": "test_simple_prompt"})),
        (
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
                   "argument": {"name": "arg1", "value": "pa"}}),
        ),
        (
            "tools/call",
            json!({"name": "test_simple_text", "arguments": {}}),
        ),
        ("skills/list", json!({})),
        (
            "skills/get",
            json!({"uri": "skill://pdf-processing/SKILL.md"}),
        ),
        (
            "resources/directory/read",
            json!({"uri": "skill://pdf-processing"}),
        ),
    ] {
        let got = rpc(&s, method, params).await;
        assert_eq!(got["result"]["resultType"], "complete", "{method}: {got}");
        if method.ends_with("/list") || method == "resources/read" || method == "skills/get" {
            assert!(got["result"]["ttlMs"].is_u64(), "{method}: {got}");
            assert!(got["result"]["cacheScope"].is_string(), "{method}: {got}");
        }
    }
}

#[tokio::test]
async fn an_elicitation_round_trip_completes_and_a_malformed_answer_is_asked_again() {
    let s = server();
    let name = "test_input_required_result_elicitation";
    let first = rpc(&s, "tools/call", json!({"name": name, "arguments": {}})).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let asked = &first["result"]["inputRequests"]["user_name"];
    assert_eq!(asked["method"], "elicitation/create", "{first}");

    let answered = json!({"name": name, "arguments": {},
        "inputResponses": {"user_name": accept(json!({"name": "Ada"})), "extra": {"x": 1}}});
    assert_eq!(text(&rpc(&s, "tools/call", answered).await), "Hello, Ada!");

    for bad in [json!(12345), json!({"action": "decline"}), json!(null)] {
        let retry = json!({"name": name, "arguments": {}, "inputResponses": {"user_name": bad}});
        let got = rpc(&s, "tools/call", retry).await;
        assert_eq!(
            got["result"]["resultType"], "input_required",
            "{bad}: {got}"
        );
    }
}

#[tokio::test]
async fn multi_round_carries_its_state_through_three_rounds() {
    let s = server();
    let name = "test_input_required_result_multi_round";
    let r1 = rpc(&s, "tools/call", json!({"name": name, "arguments": {}})).await;
    let s1 = r1["result"]["requestState"].as_str().unwrap().to_owned();
    assert!(r1["result"]["inputRequests"]["step1"].is_object(), "{r1}");

    let r2 = rpc(
        &s,
        "tools/call",
        json!({"name": name, "arguments": {}, "requestState": s1,
               "inputResponses": {"step1": accept(json!({"name": "Ada"}))}}),
    )
    .await;
    let s2 = r2["result"]["requestState"].as_str().unwrap().to_owned();
    assert_ne!(s1, s2);
    assert!(r2["result"]["inputRequests"]["step2"].is_object(), "{r2}");

    let r3 = rpc(
        &s,
        "tools/call",
        json!({"name": name, "arguments": {}, "requestState": s2,
               "inputResponses": {"step2": accept(json!({"color": "blue"}))}}),
    )
    .await;
    assert_eq!(text(&r3), "Multi-round complete for Ada who likes blue");
}

#[tokio::test]
async fn a_tampered_forged_or_replayed_request_state_is_refused() {
    let s = server();
    let name = "test_input_required_result_tampered_state";
    let first = rpc(&s, "tools/call", json!({"name": name, "arguments": {}})).await;
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    let confirm = json!({"confirm": accept(json!({"ok": true}))});

    let good =
        json!({"name": name, "arguments": {}, "requestState": state, "inputResponses": confirm});
    assert_eq!(
        text(&rpc(&s, "tools/call", good).await),
        "state-ok: requestState validated"
    );

    let other = "test_input_required_result_request_state";
    for (tool, echoed) in [
        (name, format!("{state}-TAMPERED")),
        (name, "{\"kind\":\"confirm\"}".to_owned()),
        (other, state.clone()),
    ] {
        let retry = json!({"name": tool, "arguments": {}, "requestState": echoed, "inputResponses": confirm});
        let got = rpc(&s, "tools/call", retry).await;
        assert_eq!(got["error"]["code"], -32602, "{tool} {echoed}: {got}");
    }
}

#[tokio::test]
async fn input_requests_follow_the_declared_client_capabilities() {
    let s = server();
    let call = json!({"name": "test_input_required_result_capabilities", "arguments": {}});
    let (_, only_sampling) =
        rpc_with(&s, "tools/call", call.clone(), json!({"sampling": {}}), &[]).await;
    let asked = only_sampling["result"]["inputRequests"]
        .as_object()
        .unwrap();
    assert_eq!(asked.keys().collect::<Vec<_>>(), ["sample_input"]);

    let (_, none) = rpc_with(&s, "tools/call", call, json!({}), &[]).await;
    assert_eq!(text(&none), "No supported capabilities declared");

    let missing = json!({"name": "test_missing_capability", "arguments": {}});
    let (status, refused) = rpc_with(&s, "tools/call", missing.clone(), json!({}), &[]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    assert!(refused["error"]["data"]["requiredCapabilities"]["sampling"].is_object());
    let (_, served) = rpc_with(&s, "tools/call", missing, json!({"sampling": {}}), &[]).await;
    assert_eq!(text(&served), "Success");
}

#[tokio::test]
async fn the_prompt_asks_for_context_before_it_answers() {
    let s = server();
    let name = "test_input_required_result_prompt";
    let first = rpc(&s, "prompts/get", json!({"name": name})).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let retry = json!({"name": name,
        "inputResponses": {"user_context": accept(json!({"context": "tests"}))}});
    let got = rpc(&s, "prompts/get", retry).await;
    assert_eq!(
        got["result"]["messages"][0]["content"]["text"],
        "Prompt with context: tests"
    );
}

#[tokio::test]
async fn the_custom_header_must_match_the_argument() {
    let s = server();
    let call = json!({"name": "test_custom_header", "arguments": {"region": "Hello"}});
    let caps = json!({});
    let (status, ok) = rpc_with(
        &s,
        "tools/call",
        call.clone(),
        caps.clone(),
        &[("mcp-param-region", "=?base64?SGVsbG8=?=")],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{ok}");
    assert_eq!(text(&ok), "Region: Hello");
    for header in [None, Some("Goodbye"), Some("=?base64?SGVsbG8?=")] {
        let extra: Vec<(&str, &str)> = header
            .map(|h| ("mcp-param-region", h))
            .into_iter()
            .collect();
        let (status, refused) =
            rpc_with(&s, "tools/call", call.clone(), caps.clone(), &extra).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{header:?}: {refused}");
        assert_eq!(refused["error"]["code"], -32020, "{header:?}: {refused}");
    }
}

/// On 2026-07-28 the handshake-era input tools cannot ask mid-call: they answer
/// `input_required` with the one request they need and complete from the retry; a client that
/// did not declare the capability is refused with -32021.
#[tokio::test]
async fn handshake_era_input_tools_ask_with_input_required() {
    let server = server();
    let first = rpc(
        &server,
        "tools/call",
        json!({"name": "test_sampling", "arguments": {"prompt": "Say hi"}}),
    )
    .await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let request = &first["result"]["inputRequests"]["sampling"];
    assert_eq!(request["method"], "sampling/createMessage", "{first}");
    assert_eq!(
        request["params"]["messages"][0]["content"]["text"], "Say hi",
        "{first}"
    );
    let done = rpc(
        &server,
        "tools/call",
        json!({"name": "test_sampling", "arguments": {"prompt": "Say hi"},
               "inputResponses": {"sampling": {"role": "assistant", "model": "m",
                   "content": {"type": "text", "text": "hi"}}}}),
    )
    .await;
    assert_eq!(text(&done), "LLM response: hi", "{done}");
    let form = rpc(
        &server,
        "tools/call",
        json!({"name": "test_elicitation_sep1330_enums", "arguments": {}}),
    )
    .await;
    let asked = &form["result"]["inputRequests"]["elicitation"];
    assert_eq!(asked["method"], "elicitation/create", "{form}");
    assert!(
        asked["params"]["requestedSchema"]["properties"].is_object(),
        "{form}"
    );
    let answered = rpc(
        &server,
        "tools/call",
        json!({"name": "test_elicitation", "arguments": {"message": "Who?"},
               "inputResponses": {"elicitation": accept(json!({"username": "ada"}))}}),
    )
    .await;
    assert!(
        text(&answered).starts_with("Elicitation completed: action=accept"),
        "{answered}"
    );
    let (status, refused) = rpc_with(
        &server,
        "tools/call",
        json!({"name": "test_sampling", "arguments": {"prompt": "Say hi"}}),
        json!({}),
        &[],
    )
    .await;
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        refused["error"]["data"]["requiredCapabilities"]["sampling"].is_object(),
        "{refused}"
    );
}
