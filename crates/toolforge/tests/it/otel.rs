//! OpenTelemetry traces end to end: `toolforge serve` with `OTEL_TRACES_EXPORTER=otlp` sends
//! its spans to a collector on loopback (OTLP/HTTP, protobuf, decoded with the OTel protocol
//! types), and a backend reports the `_meta` its `tools/call` carried. One trace runs from the
//! client's `traceparent` through the request, the selection and the backend call into the
//! backend, and a `/chat` run adds its model call to the client's trace.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::{Served, root, server_state, tool};

/// Spans received by the collector, and a wake-up for each export.
#[derive(Default)]
struct Received {
    spans: Mutex<Vec<Span>>,
    arrived: Notify,
}

/// A collector on loopback accepting `POST /v1/traces`; its URL and what it received.
async fn collector() -> (String, Arc<Received>) {
    use axum::body::Bytes;
    let received = Arc::new(Received::default());
    let store = received.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: Bytes| {
            let store = store.clone();
            async move {
                let Ok(export) = ExportTraceServiceRequest::decode(body) else {
                    return (axum::http::StatusCode::BAD_REQUEST, Vec::new());
                };
                let spans = export
                    .resource_spans
                    .into_iter()
                    .flat_map(|r| r.scope_spans)
                    .flat_map(|s| s.spans);
                store.spans.lock().unwrap().extend(spans);
                store.arrived.notify_waiters();
                // An empty ExportTraceServiceResponse is zero bytes of protobuf.
                (axum::http::StatusCode::OK, Vec::new())
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, received)
}

impl Received {
    /// Waits (at most 60 s) until the spans of trace `trace_id` satisfy `done`; those spans.
    async fn wait_for(&self, trace_id: &str, done: impl Fn(&[Span]) -> bool) -> Vec<Span> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let arrived = self.arrived.notified();
            let spans: Vec<Span> = self
                .spans
                .lock()
                .unwrap()
                .iter()
                .filter(|s| hex(&s.trace_id) == trace_id)
                .cloned()
                .collect();
            if done(&spans) {
                return spans;
            }
            let all: Vec<String> = self.spans.lock().unwrap().iter().map(describe).collect();
            assert!(
                tokio::time::timeout_at(deadline, arrived).await.is_ok(),
                "the spans of trace {trace_id} did not arrive within 60 s; received: {all:#?}"
            );
        }
    }
}

impl Received {
    /// Waits (at most 20 s) for a span `pick` accepts; a copy of it.
    async fn wait_for_any(&self, pick: impl Fn(&Span) -> bool) -> Span {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let arrived = self.arrived.notified();
            if let Some(span) = self.spans.lock().unwrap().iter().find(|s| pick(s)) {
                return span.clone();
            }
            let all: Vec<String> = self.spans.lock().unwrap().iter().map(describe).collect();
            assert!(
                tokio::time::timeout_at(deadline, arrived).await.is_ok(),
                "the span did not arrive within 20 s; received: {all:#?}"
            );
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attr<'a>(span: &'a Span, key: &str) -> Option<&'a Any> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
}

fn text_attr<'a>(span: &'a Span, key: &str) -> Option<&'a str> {
    match attr(span, key)? {
        Any::StringValue(s) => Some(s),
        _ => None,
    }
}

fn describe(span: &Span) -> String {
    format!(
        "{} trace={} span={} parent={}",
        span.name,
        hex(&span.trace_id),
        hex(&span.span_id),
        hex(&span.parent_span_id)
    )
}

fn named<'a>(spans: &'a [Span], name: &str) -> Vec<&'a Span> {
    spans.iter().filter(|s| s.name == name).collect()
}

/// The servers configuration with the `_meta`-reporting backend, `meta`.
fn config() -> Value {
    let python = tool("venv/bin/python");
    let script = root().join("crates/toolforge/tests/python/meta_server.py");
    json!({"mcpServers": {"meta": {
        "command": python.to_string_lossy(),
        "args": [script.to_string_lossy()]
    }}})
}

/// The environment that exports to `url`, batching for `delay_ms`.
fn exporting<'a>(url: &'a str, delay_ms: &'a str) -> [(&'static str, &'a str); 4] {
    [
        ("OTEL_TRACES_EXPORTER", "otlp"),
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url),
        ("OTEL_BSP_SCHEDULE_DELAY", delay_ms),
        ("OTEL_SERVICE_NAME", "toolforge-test"),
    ]
}

/// `toolforge serve --stateless` over the `_meta`-reporting backend, exporting to `url`.
async fn served(url: &str) -> Served {
    served_with(url, "50", &[]).await
}

async fn served_with(url: &str, delay_ms: &str, args: &[&str]) -> Served {
    let mut all = vec!["--stateless"];
    all.extend_from_slice(args);
    let served = Served::start_full(&config(), &exporting(url, delay_ms), &all).await;
    let health = served
        .wait_health(60, |h| server_state(h, "meta")["state"] == "ready")
        .await;
    assert_eq!(server_state(&health, "meta")["state"], "ready", "{health}");
    served
}

/// A `tools/call` of `request_meta` with `_meta`, and a `traceparent` header when given; the
/// `_meta` the backend received.
async fn call(served: &Served, header: Option<&str>, meta: Value) -> Value {
    let mut req = reqwest::Client::new()
        .post(served.mcp())
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18");
    if let Some(tp) = header {
        req = req
            .header("traceparent", tp)
            .header("tracestate", "vendor=opaque");
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "request_meta", "arguments": {}, "_meta": meta}});
    let r = req.json(&body).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let text = r.text().await.unwrap();
    let data = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .find(|d| !d.trim().is_empty())
        .unwrap_or(&text);
    let answer: Value = serde_json::from_str(data.trim()).unwrap();
    let reported = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("the backend answered: {answer}"));
    serde_json::from_str(reported).unwrap()
}

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";
const META_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const META_SPAN: &str = "b7ad6b7169203331";

#[tokio::test]
async fn one_trace_runs_from_the_http_request_into_the_backend() {
    let (url, received) = collector().await;
    let served = served(&url).await;

    // The client's `traceparent` header starts the trace.
    let meta = call(
        &served,
        Some(&format!("00-{TRACE}-{CLIENT_SPAN}-01")),
        json!({}),
    )
    .await;
    let spans = received
        .wait_for(TRACE, |s| {
            ["request", "tools/call", "selection", "backend call"]
                .iter()
                .all(|n| !named(s, n).is_empty())
        })
        .await;
    let request = named(&spans, "request")[0];
    assert_eq!(
        hex(&request.parent_span_id),
        CLIENT_SPAN,
        "{}",
        describe(request)
    );
    assert_eq!(text_attr(request, "http.route"), Some("/mcp"));
    assert!(matches!(
        attr(request, "http.response.status_code"),
        Some(Any::IntValue(200))
    ));
    let mcp = named(&spans, "tools/call")[0];
    assert_eq!(mcp.parent_span_id, request.span_id);
    assert_eq!(text_attr(mcp, "mcp.tool.name"), Some("request_meta"));
    let selection = named(&spans, "selection")[0];
    assert_eq!(selection.parent_span_id, mcp.span_id);
    assert_eq!(text_attr(selection, "toolforge.server"), Some("meta"));
    assert_eq!(
        text_attr(selection, "toolforge.selection.rule"),
        Some("single-candidate")
    );
    let backend = named(&spans, "backend call")[0];
    assert_eq!(backend.parent_span_id, mcp.span_id);
    assert_eq!(text_attr(backend, "toolforge.server"), Some("meta"));
    assert_eq!(text_attr(backend, "mcp.tool.name"), Some("request_meta"));
    assert_eq!(text_attr(backend, "toolforge.outcome"), Some("ok"));
    assert!(matches!(
        attr(backend, "toolforge.attempt"),
        Some(Any::IntValue(1))
    ));
    // The backend's parent is the backend call, in the client's trace.
    let want = format!("00-{TRACE}-{}-01", hex(&backend.span_id));
    assert_eq!(meta["traceparent"], want.as_str(), "{meta}");
    assert_eq!(meta["tracestate"], "vendor=opaque", "{meta}");
    // Bounded attributes: names, routes, rules, outcomes; no argument or free text.
    for span in &spans {
        for kv in &span.attributes {
            assert!(
                ["http.", "mcp.", "toolforge.", "gen_ai."]
                    .iter()
                    .any(|p| kv.key.starts_with(p)),
                "{}: unexpected attribute {}",
                span.name,
                kv.key
            );
        }
    }

    // A client that puts its context in `_meta` (SEP-414) instead: the call continues that
    // trace, and the backend gets our backend call's `traceparent` in place of the client's.
    let client = format!("00-{META_TRACE}-{META_SPAN}-01");
    let meta = call(&served, None, json!({"traceparent": client})).await;
    let spans = received
        .wait_for(META_TRACE, |s| !named(s, "backend call").is_empty())
        .await;
    let mcp = named(&spans, "tools/call")[0];
    assert_eq!(hex(&mcp.parent_span_id), META_SPAN, "{}", describe(mcp));
    let backend = named(&spans, "backend call")[0];
    assert_eq!(backend.parent_span_id, mcp.span_id);
    let want = format!("00-{META_TRACE}-{}-01", hex(&backend.span_id));
    assert_eq!(meta["traceparent"], want.as_str(), "{meta}");
    assert!(meta.get("tracestate").is_none(), "{meta}");
}

#[tokio::test]
async fn a_chat_run_puts_its_model_call_in_the_clients_trace() {
    let (url, received) = collector().await;
    let served = served(&url).await;
    let r = reqwest::Client::new()
        .post(format!("{}/chat", served.base))
        .header("traceparent", format!("00-{TRACE}-{CLIENT_SPAN}-01"))
        .json(&json!({"message": "report the request metadata this server received"}))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let body: Value = r.json().await.unwrap();
    assert_eq!(status, 200, "{body}");
    let spans = received
        .wait_for(TRACE, |s| {
            ["request", "agent run", "model call", "backend call"]
                .iter()
                .all(|n| !named(s, n).is_empty())
        })
        .await;
    let request = named(&spans, "request")[0];
    assert_eq!(text_attr(request, "http.route"), Some("/chat"));
    let run = named(&spans, "agent run")[0];
    assert_eq!(run.parent_span_id, request.span_id);
    let model = named(&spans, "model call")[0];
    assert_eq!(model.parent_span_id, run.span_id);
    assert_eq!(text_attr(model, "gen_ai.system"), Some("mock"));
    assert_eq!(text_attr(model, "gen_ai.request.model"), Some("mock"));
    assert!(
        matches!(attr(model, "gen_ai.usage.input_tokens"), Some(Any::IntValue(n)) if *n > 0),
        "{model:?}"
    );
    assert!(matches!(
        attr(model, "toolforge.cost_usd"),
        Some(Any::DoubleValue(_))
    ));
    let offers: Vec<_> = named(&spans, "selection")
        .into_iter()
        .filter(|s| text_attr(s, "toolforge.selection.operation") == Some("offer"))
        .collect();
    assert_eq!(offers.len(), 1, "one offer per run");
    // The tool call the model asked for reached the backend in the same trace.
    let backend = named(&spans, "backend call")[0];
    assert_eq!(text_attr(backend, "mcp.tool.name"), Some("request_meta"));
    let steps = body["steps"].as_array().expect("steps");
    let reported = steps
        .iter()
        .find_map(|s| s["raw_result"]["content"][0]["text"].as_str())
        .or_else(|| steps.iter().find_map(|s| s["result_summary"].as_str()))
        .unwrap_or_else(|| panic!("no tool result in {body}"));
    assert!(
        reported.contains(&format!("00-{TRACE}-{}-01", hex(&backend.span_id))),
        "{reported}"
    );
}

/// Ten minutes: spans that arrive sooner were sent by the flush at exit.
const NEVER_MS: &str = "600000";

#[tokio::test]
async fn queued_spans_are_sent_when_serve_drains_on_sigterm() {
    let (url, received) = collector().await;
    let mut served = served_with(&url, NEVER_MS, &["--drain-grace", "0"]).await;
    call(
        &served,
        Some(&format!("00-{TRACE}-{CLIENT_SPAN}-01")),
        json!({}),
    )
    .await;
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &served.pid().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let code = served.wait_exit(Duration::from_secs(30)).await;
    assert_eq!(code, Some(0), "a drained replica exits 0");
    let spans = received
        .wait_for(TRACE, |s| !named(s, "backend call").is_empty())
        .await;
    assert!(!named(&spans, "request").is_empty());
}

#[tokio::test]
async fn chat_sends_its_run_as_one_trace_before_it_exits() {
    let (url, received) = collector().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("mcp.servers.json");
    std::fs::write(&cfg, config().to_string()).unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(crate::bin())
            .args(["chat", "--config"])
            .arg(&cfg)
            .arg("report the request metadata this server received")
            .current_dir(dir.path())
            .env_remove("TRACE_SINK")
            .env_remove("LLM_PROVIDER")
            .env_remove("REDIS_URL")
            .env_remove("CATALOG_CACHE_BACKEND")
            .env("XDG_CACHE_HOME", dir.path().join(".cache"))
            .envs(exporting(&url, NEVER_MS))
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("toolforge chat finished within 120 s")
    .expect("toolforge chat ran");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The run is the root: find its trace, then everything in it.
    let trace = {
        let runs = received.wait_for_any(|s| s.name == "agent run").await;
        hex(&runs.trace_id)
    };
    let spans = received
        .wait_for(&trace, |s| {
            ["agent run", "selection", "model call", "backend call"]
                .iter()
                .all(|n| !named(s, n).is_empty())
        })
        .await;
    let run = named(&spans, "agent run")[0];
    assert!(run.parent_span_id.is_empty(), "{}", describe(run));
    for name in ["model call", "backend call"] {
        assert!(
            named(&spans, name)
                .iter()
                .all(|s| s.parent_span_id == run.span_id),
            "{name} under the run"
        );
    }
}

#[tokio::test]
async fn a_streamable_http_backend_on_2026_07_28_continues_the_trace() {
    // The backend is another toolforge (exporting too) fronting the `_meta` reporter; the front
    // reaches it over Streamable HTTP in the 2026-07-28 era.
    let (url, received) = collector().await;
    let back = served(&url).await;
    let front_config = json!({"mcpServers": {"back": {
        "url": back.mcp(),
        "protocol": "2026-07-28"
    }}});
    let front = Served::start_full(&front_config, &exporting(&url, "50"), &["--stateless"]).await;
    let health = front
        .wait_health(60, |h| server_state(h, "back")["state"] == "ready")
        .await;
    assert_eq!(server_state(&health, "back")["state"], "ready", "{health}");

    let meta = call(
        &front,
        Some(&format!("00-{TRACE}-{CLIENT_SPAN}-01")),
        json!({}),
    )
    .await;
    // Front: request › tools/call › backend call; back: tools/call (from `_meta`) › backend call.
    let spans = received
        .wait_for(TRACE, |s| named(s, "backend call").len() >= 2)
        .await;
    let front_call = named(&spans, "backend call")
        .into_iter()
        .find(|s| text_attr(s, "toolforge.server") == Some("back"))
        .expect("the front's backend call");
    let back_mcp = named(&spans, "tools/call")
        .into_iter()
        .find(|s| s.parent_span_id == front_call.span_id)
        .unwrap_or_else(|| {
            panic!("the back's tools/call under the front's backend call: {spans:#?}")
        });
    let back_call = named(&spans, "backend call")
        .into_iter()
        .find(|s| text_attr(s, "toolforge.server") == Some("meta"))
        .expect("the back's backend call");
    assert_eq!(back_call.parent_span_id, back_mcp.span_id);
    let want = format!("00-{TRACE}-{}-01", hex(&back_call.span_id));
    assert_eq!(meta["traceparent"], want.as_str(), "{meta}");
}
