use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::wire::*;
use super::*;
use crate::model::*;

fn config(server: &MockServer) -> AnthropicConfig {
    let _ = rustls::crypto::ring::default_provider().install_default();
    AnthropicConfig {
        api_key: "sk-ant-test".into(),
        // A trailing slash must not produce `//v1/messages`.
        base_url: format!("{}/", server.uri()),
        retry_base: Duration::from_millis(5),
        ..AnthropicConfig::default()
    }
}

fn model(config: AnthropicConfig) -> AnthropicModel {
    AnthropicModel::new(config).unwrap()
}

fn weather_tool() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "Get the current weather in a given location".into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "The city and state"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}
            },
            "required": ["location"]
        }),
    }
}

fn time_tool() -> ToolSpec {
    ToolSpec {
        name: "get_time".into(),
        description: "Get the current time in a given time zone".into(),
        input_schema: json!({
            "type": "object",
            "properties": {"timezone": {"type": "string"}},
            "required": ["timezone"]
        }),
    }
}

fn request(cache: bool) -> ModelRequest {
    ModelRequest {
        system: "You are a terse assistant.".into(),
        tools: vec![weather_tool(), time_tool()],
        messages: vec![Message::user("What is the weather in Paris?")],
        max_tokens: 1024,
        cache,
        stable_tools: 0,
        deferred_tools: Vec::new(),
    }
}

/// A real `POST /v1/messages` answer asking for one tool call, with cache usage.
fn tool_use_answer() -> Value {
    json!({
        "id": "msg_01Aq9w938a90dw8q",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [
            {"type": "text", "text": "I'll check the current weather in Paris."},
            {
                "type": "tool_use",
                "id": "toolu_01A09q90qw90lq917835lq9",
                "name": "get_weather",
                "input": {"location": "Paris, France", "unit": "celsius"}
            }
        ],
        "stop_reason": "tool_use",
        "stop_sequence": null,
        "usage": {
            "input_tokens": 21,
            "cache_creation_input_tokens": 1830,
            "cache_read_input_tokens": 0,
            "cache_creation": {"ephemeral_5m_input_tokens": 1830, "ephemeral_1h_input_tokens": 0},
            "output_tokens": 73,
            "service_tier": "standard"
        }
    })
}

fn end_turn_answer(text: &str) -> Value {
    json!({
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": null,
        "usage": {"input_tokens": 12, "output_tokens": 6}
    })
}

fn overloaded_body() -> Value {
    json!({
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"
    })
}

async fn bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| r.body_json::<Value>().unwrap())
        .collect()
}

/// JSON pointers of every `cache_control` key in `v`.
fn cache_controls(v: &Value, at: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                let here = format!("{at}/{k}");
                if k == "cache_control" {
                    out.push(here.clone());
                }
                cache_controls(child, &here, out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                cache_controls(child, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

#[tokio::test]
async fn tool_use_request_shape_cache_breakpoints_and_parsed_answer() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(header("x-api-key", "sk-ant-test"))
        .and(header("anthropic-version", "2023-06-01"))
        .and(header("content-type", "application/json"))
        .respond_with(ResponseTemplate::new(200).set_body_json(tool_use_answer()))
        .expect(1)
        .mount(&server)
        .await;
    let m = model(config(&server));
    let r = m.complete(&request(true)).await.unwrap();

    let body = &bodies(&server).await[0];
    let expected = json!({
        "model": "claude-sonnet-4-6",
        "max_tokens": 1024,
        "system": [{
            "type": "text",
            "text": "You are a terse assistant.",
            "cache_control": {"type": "ephemeral"}
        }],
        "tools": [
            {
                "name": "get_weather",
                "description": "Get the current weather in a given location",
                "input_schema": weather_tool().input_schema
            },
            {
                "name": "get_time",
                "description": "Get the current time in a given time zone",
                "input_schema": time_tool().input_schema,
                "cache_control": {"type": "ephemeral"}
            }
        ],
        "messages": [{
            "role": "user",
            "content": [{"type": "text", "text": "What is the weather in Paris?"}]
        }]
    });
    assert_eq!(body, &expected);
    let mut marks = Vec::new();
    cache_controls(body, "", &mut marks);
    assert_eq!(marks, ["/system/0/cache_control", "/tools/1/cache_control"]);

    assert_eq!(m.provider(), "anthropic");
    assert_eq!(m.model(), "claude-sonnet-4-6");
    assert_eq!(r.model, "claude-sonnet-4-6");
    assert_eq!(r.stop_reason, StopReason::ToolUse);
    assert_eq!(r.text(), "I'll check the current weather in Paris.");
    assert_eq!(
        r.content[1],
        Content::ToolUse {
            id: "toolu_01A09q90qw90lq917835lq9".into(),
            name: "get_weather".into(),
            input: json!({"location": "Paris, France", "unit": "celsius"}),
        }
    );
    assert_eq!(
        r.usage,
        Usage {
            input_tokens: 21,
            output_tokens: 73,
            cache_creation_input_tokens: 1830,
            cache_read_input_tokens: 0,
        }
    );
}

#[test]
fn tools_that_joined_keep_the_first_offers_breakpoint_in_place() {
    let lookup = ToolSpec {
        name: "lookup_city".into(),
        description: "Find a city's coordinates".into(),
        input_schema: json!({"type": "object", "properties": {"name": {"type": "string"}}}),
    };
    let first = request(true);
    let mut grown = request(true);
    grown.tools.push(lookup);
    grown.stable_tools = 2;
    let marks = |r: &ModelRequest| {
        let body = serde_json::to_value(wire_request("claude-sonnet-4-6", r, false)).unwrap();
        let mut out = Vec::new();
        cache_controls(&body, "", &mut out);
        (body, out)
    };
    let (first_body, first_marks) = marks(&first);
    let (grown_body, grown_marks) = marks(&grown);
    assert_eq!(
        first_marks,
        ["/system/0/cache_control", "/tools/1/cache_control"]
    );
    assert_eq!(
        grown_marks,
        [
            "/system/0/cache_control",
            "/tools/1/cache_control",
            "/tools/2/cache_control"
        ]
    );
    // The first offer is byte for byte what the first call sent, breakpoint included.
    assert_eq!(grown_body["tools"][0], first_body["tools"][0]);
    assert_eq!(grown_body["tools"][1], first_body["tools"][1]);
    // Nothing joined (or every tool stable): the one breakpoint after the tools.
    let mut all = grown.clone();
    all.stable_tools = 3;
    assert_eq!(marks(&all).1.len(), 2);
}

#[tokio::test]
async fn tool_results_round_trip_and_unknown_blocks_are_skipped() {
    let server = MockServer::start().await;
    // A real answer with a thinking block first and the cache fields null or absent.
    let answer = json!({
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6-20260101",
        "content": [
            {"type": "thinking", "thinking": "The tool says 18 °C.", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"},
            {"type": "text", "text": "It is 18 °C in Paris."}
        ],
        "stop_reason": "end_turn",
        "stop_sequence": null,
        "usage": {"input_tokens": 2095, "output_tokens": 12, "cache_creation_input_tokens": null}
    });
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(ResponseTemplate::new(200).set_body_json(answer))
        .expect(1)
        .mount(&server)
        .await;
    let mut req = request(false);
    req.messages.push(Message {
        role: Role::Assistant,
        content: vec![
            Content::text(""),
            Content::ToolUse {
                id: "toolu_01A09q90qw90lq917835lq9".into(),
                name: "get_weather".into(),
                input: json!({"location": "Paris, France"}),
            },
            Content::ToolUse {
                id: "toolu_02".into(),
                name: "get_time".into(),
                input: json!({"timezone": "Europe/Paris"}),
            },
        ],
    });
    req.messages.push(Message {
        role: Role::User,
        content: vec![
            Content::ToolResult {
                tool_use_id: "toolu_01A09q90qw90lq917835lq9".into(),
                content: "18 °C, light rain".into(),
                is_error: false,
            },
            Content::ToolResult {
                tool_use_id: "toolu_02".into(),
                content: "unknown time zone".into(),
                is_error: true,
            },
        ],
    });
    let r = model(config(&server)).complete(&req).await.unwrap();

    let body = &bodies(&server).await[0];
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "What is the weather in Paris?"}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather",
                 "input": {"location": "Paris, France"}},
                {"type": "tool_use", "id": "toolu_02", "name": "get_time",
                 "input": {"timezone": "Europe/Paris"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01A09q90qw90lq917835lq9",
                 "content": "18 °C, light rain"},
                {"type": "tool_result", "tool_use_id": "toolu_02",
                 "content": "unknown time zone", "is_error": true}
            ]}
        ])
    );
    assert_eq!(r.content, vec![Content::text("It is 18 °C in Paris.")]);
    assert_eq!(r.stop_reason, StopReason::EndTurn);
    assert_eq!(r.model, "claude-sonnet-4-6-20260101");
    assert_eq!(
        r.usage,
        Usage {
            input_tokens: 2095,
            output_tokens: 12,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 0,
        }
    );
}

/// The event sequence of Anthropic's "streaming request with tool use" example, plus a
/// second tool call whose input streams as nothing, cache usage in `message_start`, and the
/// blank lines and `ping` the API sends.
const TOOL_USE_STREAM: &str = concat!(
    "event: message_start\n",
    r#"data: {"type":"message_start","message":{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","type":"message","role":"assistant","model":"claude-sonnet-4-6","stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":0,"cache_read_input_tokens":1830,"output_tokens":2},"content":[],"stop_reason":null}}"#,
    "\n\n",
    "event: content_block_start\n",
    r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
    "\n\n",
    "event: ping\n",
    r#"data: {"type": "ping"}"#,
    "\n\n",
    "event: content_block_delta\n",
    r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Okay"}}"#,
    "\n\n",
    "event: content_block_delta\n",
    r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":","}}"#,
    "\n\n",
    "event: content_block_delta\n",
    r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" let's check the weather for San Francisco, CA:"}}"#,
    "\n\n",
    "event: content_block_stop\n",
    r#"data: {"type":"content_block_stop","index":0}"#,
    "\n\n",
    "event: content_block_start\n",
    r#"data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}"#,
    "\n\n",
    "event: content_block_delta\n",
    r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}"#,
    "\n\n",
    "event: content_block_delta\n",
    r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"location\":"}}"#,
    "\n\n",
    "event: content_block_delta\n",
    r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" \"San"}}"#,
    "\n\n",
    "event: content_block_delta\n",
    r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" Francisc"}}"#,
    "\n\n",
    "event: content_block_delta\n",
    r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"o,"}}"#,
    "\n\n",
    "event: content_block_delta\n",
    r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" CA\""}}"#,
    "\n\n",
    "event: content_block_delta\n",
    r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":", "}}"#,
    "\n\n",
    "event: content_block_delta\n",
    r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"unit\": \"fah"}}"#,
    "\n\n",
    "event: content_block_delta\n",
    r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"renheit\"}"}}"#,
    "\n\n",
    "event: content_block_stop\n",
    r#"data: {"type":"content_block_stop","index":1}"#,
    "\n\n",
    "event: content_block_start\n",
    r#"data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01NRLabsLyVHZPKxbKvkfSMn","name":"get_time","input":{}}}"#,
    "\n\n",
    "event: content_block_delta\n",
    r#"data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}"#,
    "\n\n",
    "event: content_block_stop\n",
    r#"data: {"type":"content_block_stop","index":2}"#,
    "\n\n",
    "event: message_delta\n",
    r#"data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}"#,
    "\n\n",
    "event: message_stop\n",
    r#"data: {"type":"message_stop"}"#,
    "\n\n",
);

#[tokio::test]
async fn streaming_assembles_text_tool_calls_and_usage() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(header("x-api-key", "sk-ant-test"))
        .and(header("anthropic-version", "2023-06-01"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(TOOL_USE_STREAM, "text/event-stream"))
        .expect(1)
        .mount(&server)
        .await;
    let mut c = config(&server);
    c.stream = true;
    let r = model(c).complete(&request(true)).await.unwrap();

    let body = &bodies(&server).await[0];
    assert_eq!(body["stream"], json!(true));
    assert_eq!(body["model"], json!("claude-sonnet-4-6"));

    assert_eq!(
        r.content,
        vec![
            Content::text("Okay, let's check the weather for San Francisco, CA:"),
            Content::ToolUse {
                id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
                name: "get_weather".into(),
                input: json!({"location": "San Francisco, CA", "unit": "fahrenheit"}),
            },
            Content::ToolUse {
                id: "toolu_01NRLabsLyVHZPKxbKvkfSMn".into(),
                name: "get_time".into(),
                input: json!({}),
            },
        ]
    );
    assert_eq!(r.stop_reason, StopReason::ToolUse);
    assert_eq!(r.model, "claude-sonnet-4-6");
    // output_tokens is cumulative in message_delta: 89, not 2 + 89.
    assert_eq!(
        r.usage,
        Usage {
            input_tokens: 472,
            output_tokens: 89,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 1830,
        }
    );
}

#[tokio::test]
async fn streamed_overloaded_error_is_retried_then_reported() {
    let server = MockServer::start().await;
    let sse = concat!(
        "event: message_start\n",
        r#"data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-6","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1},"content":[],"stop_reason":null}}"#,
        "\n\n",
        "event: error\n",
        r#"data: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}"#,
        "\n\n",
    );
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream"))
        .mount(&server)
        .await;
    let mut c = config(&server);
    c.stream = true;
    c.max_attempts = 2;
    let err = model(c).complete(&request(false)).await.unwrap_err();
    match err {
        ModelError::Overloaded {
            provider,
            status,
            attempts,
            message,
        } => {
            assert_eq!((provider, status, attempts), ("anthropic", 529, 2));
            assert!(message.contains("Overloaded"), "{message}");
        }
        other => panic!("expected Overloaded, got {other}"),
    }
    assert_eq!(bodies(&server).await.len(), 2);
}

#[tokio::test]
async fn stream_cut_before_message_stop_is_a_transport_error() {
    let server = MockServer::start().await;
    let cut = TOOL_USE_STREAM
        .split("event: message_delta")
        .next()
        .unwrap()
        .to_owned();
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(cut, "text/event-stream"))
        .mount(&server)
        .await;
    let mut c = config(&server);
    c.stream = true;
    c.max_attempts = 1;
    let err = model(c).complete(&request(false)).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::Transport { message, .. } if message.contains("message_stop")),
        "{err}"
    );
}

#[tokio::test]
async fn overloaded_then_rate_limited_then_success() {
    let server = MockServer::start().await;
    // Mocks of equal priority are tried in mount order; each of the first two answers once.
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(529).set_body_json(overloaded_body()))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "0")
                .set_body_json(json!({
                    "type": "error",
                    "error": {"type": "rate_limit_error", "message": "Number of request tokens has exceeded your per-minute rate limit"}
                })),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(end_turn_answer("Done.")))
        .mount(&server)
        .await;
    let r = model(config(&server))
        .complete(&request(false))
        .await
        .unwrap();
    assert_eq!(r.text(), "Done.");
    let seen = bodies(&server).await;
    assert_eq!(seen.len(), 3);
    // Every attempt sends the same body.
    assert!(seen.iter().all(|b| b == &seen[0]));
}

#[tokio::test]
async fn rate_limits_are_retried_only_when_retry_after_fits_the_deadline() {
    let server = MockServer::start().await;
    // An hour's wait does not fit a 120 s deadline; no Retry-After gives nothing to honour.
    for retry_after in [Some("3600"), None] {
        let mut answer = ResponseTemplate::new(429).set_body_json(overloaded_body());
        if let Some(wait) = retry_after {
            answer = answer.insert_header("retry-after", wait);
        }
        server.reset().await;
        Mock::given(method("POST"))
            .respond_with(answer)
            .mount(&server)
            .await;
        let err = model(config(&server))
            .complete(&request(false))
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                ModelError::Overloaded {
                    status: 429,
                    attempts: 1,
                    ..
                }
            ),
            "{retry_after:?}: {err}"
        );
        assert_eq!(bodies(&server).await.len(), 1, "{retry_after:?}");
    }
}

#[tokio::test]
async fn server_errors_are_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500).set_body_json(json!({
            "type": "error",
            "error": {"type": "api_error", "message": "Internal server error"}
        })))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(end_turn_answer("ok")))
        .mount(&server)
        .await;
    let r = model(config(&server))
        .complete(&request(false))
        .await
        .unwrap();
    assert_eq!(r.text(), "ok");
    assert_eq!(bodies(&server).await.len(), 2);
}

#[tokio::test]
async fn overloaded_forever_gives_up_after_max_attempts() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(529).set_body_json(overloaded_body()))
        .mount(&server)
        .await;
    let mut c = config(&server);
    c.max_attempts = 3;
    let err = model(c).complete(&request(false)).await.unwrap_err();
    match &err {
        ModelError::Overloaded {
            provider,
            status,
            attempts,
            message,
        } => {
            assert_eq!((*provider, *status, *attempts), ("anthropic", 529, 3));
            assert_eq!(message, "overloaded_error: Overloaded");
        }
        other => panic!("expected Overloaded, got {other}"),
    }
    assert!(err.to_string().contains("after 3 attempts"), "{err}");
    assert_eq!(bodies(&server).await.len(), 3);
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    // (status, body, check)
    type Check = fn(&ModelError) -> bool;
    let cases: [(u16, Value, Check); 3] = [
        (
            401,
            json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
            |e| {
                matches!(e, ModelError::Auth { provider: "anthropic", status: 401, message }
                    if message.contains("invalid x-api-key") && message.contains("ANTHROPIC_API_KEY"))
            },
        ),
        (
            400,
            json!({"type": "error", "error": {"type": "invalid_request_error",
                "message": "max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens for claude-sonnet-4-6"}}),
            |e| {
                matches!(e, ModelError::Http { provider: "anthropic", status: 400, message }
                    if message == "invalid_request_error: max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens for claude-sonnet-4-6")
            },
        ),
        (
            404,
            json!({"type": "error", "error": {"type": "not_found_error", "message": "model: claude-nope"}}),
            |e| {
                matches!(e, ModelError::Http { status: 404, message, .. }
                    if message.contains("model: claude-nope") && message.contains("check the model id"))
            },
        ),
    ];
    for (status, body, check) in cases {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(status).set_body_json(body))
            .mount(&server)
            .await;
        let err = model(config(&server))
            .complete(&request(false))
            .await
            .unwrap_err();
        assert!(check(&err), "{status}: {err:?}");
        assert_eq!(bodies(&server).await.len(), 1, "{status} was retried");
    }
}

#[tokio::test]
async fn no_cache_control_without_cache_and_no_stream_flag() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(end_turn_answer("ok")))
        .mount(&server)
        .await;
    model(config(&server))
        .complete(&request(false))
        .await
        .unwrap();
    let body = &bodies(&server).await[0];
    let mut marks = Vec::new();
    cache_controls(body, "", &mut marks);
    assert!(marks.is_empty(), "{marks:?}");
    assert!(body.get("stream").is_none());
    assert_eq!(
        body["system"][0]["text"],
        json!("You are a terse assistant.")
    );
    assert_eq!(body["tools"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn empty_system_and_tools_are_omitted() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(end_turn_answer("ok")))
        .mount(&server)
        .await;
    let req = ModelRequest {
        messages: vec![Message::user("hi")],
        max_tokens: 16,
        cache: true,
        ..ModelRequest::default()
    };
    model(config(&server)).complete(&req).await.unwrap();
    assert_eq!(
        bodies(&server).await[0],
        json!({
            "model": "claude-sonnet-4-6",
            "max_tokens": 16,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
        })
    );
}

#[tokio::test]
async fn unreadable_answer_is_a_bad_response() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_raw("<html>gateway</html>", "text/html"))
        .mount(&server)
        .await;
    let err = model(config(&server))
        .complete(&request(false))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ModelError::BadResponse { provider: "anthropic", message } if message.contains("gateway")),
        "{err}"
    );
    assert_eq!(bodies(&server).await.len(), 1);
}

#[tokio::test]
async fn dead_server_is_a_transport_error_after_retries() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let m = model(AnthropicConfig {
        api_key: "k".into(),
        base_url: format!("http://127.0.0.1:{port}"),
        max_attempts: 2,
        retry_base: Duration::from_millis(1),
        ..AnthropicConfig::default()
    });
    let err = m.complete(&request(false)).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::Transport { provider: "anthropic", message }
            if message.contains("/v1/messages") && message.contains("after 2 attempts")),
        "{err}"
    );
}

#[test]
fn missing_key_is_reported_with_its_variable() {
    for key in ["", "   "] {
        let err = AnthropicModel::new(AnthropicConfig {
            api_key: key.into(),
            ..AnthropicConfig::default()
        })
        .unwrap_err();
        assert!(matches!(
            err,
            ModelError::MissingKey {
                provider: "anthropic",
                env: "ANTHROPIC_API_KEY"
            }
        ));
    }
}

#[test]
fn defaults_and_redacted_debug() {
    let c = AnthropicConfig {
        api_key: "sk-ant-secret".into(),
        ..AnthropicConfig::default()
    };
    assert_eq!(c.base_url, DEFAULT_BASE_URL);
    assert_eq!(c.model, DEFAULT_MODEL);
    assert!(!c.stream);
    assert_eq!(c.max_attempts, 3);
    assert_eq!(c.retry_base, Duration::from_millis(500));
    assert_eq!(c.timeout, Duration::from_secs(120));
    assert!(!format!("{c:?}").contains("sk-ant-secret"));
}

#[test]
fn retry_after_parses_seconds_only() {
    let check = |value: &str, expected: Option<Duration>| {
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, HeaderValue::from_str(value).unwrap());
        assert_eq!(retry_after(&h), expected, "{value}");
    };
    check("0", Some(Duration::ZERO));
    check("7", Some(Duration::from_secs(7)));
    check("1.5", Some(Duration::from_millis(1500)));
    check("-1", None);
    check("Wed, 21 Oct 2015 07:28:00 GMT", None);
    assert_eq!(retry_after(&HeaderMap::new()), None);
}

#[test]
fn stop_reasons_map() {
    let check = |s: Option<&str>, expected| assert_eq!(stop_reason(s), expected, "{s:?}");
    check(Some("end_turn"), StopReason::EndTurn);
    check(Some("tool_use"), StopReason::ToolUse);
    check(Some("max_tokens"), StopReason::MaxTokens);
    check(Some("stop_sequence"), StopReason::Other);
    check(Some("refusal"), StopReason::Other);
    check(None, StopReason::Other);
}

#[tokio::test]
async fn input_bound_is_counted_by_count_tokens_else_bounded_by_bytes() {
    use crate::model::{BoundSource, InputBound, counted_bound};
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages/count_tokens"))
        .and(header("x-api-key", "sk-ant-test"))
        .and(header("anthropic-version", API_VERSION))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"input_tokens": 412})))
        .expect(1)
        .mount(&server)
        .await;
    let req = request(true);
    let bound = model(config(&server)).input_bound(&req).await;
    assert_eq!(bound, counted_bound(&req, 412));
    assert_eq!(bound.source, BoundSource::Counted);
    assert!(bound.tokens >= 412);
    let sent = &bodies(&server).await[0];
    assert_eq!(sent["model"], "claude-sonnet-4-6");
    assert!(sent.get("max_tokens").is_none(), "{sent}");
    assert!(sent.get("stream").is_none(), "{sent}");
    assert_eq!(sent["tools"].as_array().unwrap().len(), req.tools.len());
    assert_eq!(sent["messages"][0]["role"], "user");
    assert_eq!(sent["system"][0]["text"], req.system.as_str());

    // No count (the endpoint answers 404 here): every input byte a token, never an error.
    let bare = MockServer::start().await;
    let bound = model(config(&bare)).input_bound(&req).await;
    assert_eq!(bound, InputBound::upper(&req));
    assert_eq!(bound.source, BoundSource::Bytes);
}

// ---- the tool search tool (deferred tools) ----

/// The weather tool left out of the offer, for the provider's search to find.
fn deferred_request() -> ModelRequest {
    ModelRequest {
        tools: vec![time_tool()],
        deferred_tools: vec![weather_tool()],
        stable_tools: 1,
        ..request(true)
    }
}

/// An answer that searched server-side, loaded `get_weather` and calls it: the documented
/// blocks `server_tool_use` (the tool search tool's call), `tool_search_tool_result` (its
/// `tool_search_tool_search_result` of `tool_reference`s), then the `tool_use`.
fn searched_answer() -> Value {
    json!({
        "id": "msg_01D7FLMfh4bT4LFWyjvQEqYz",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [
            {"type": "text", "text": "I'll search for a weather tool."},
            {
                "type": "server_tool_use",
                "id": "srvtoolu_01ABCDEFGHIJKLMNOPQRSTUV",
                "name": "tool_search_tool_bm25",
                "input": {"query": "weather"},
                "caller": {"type": "direct"}
            },
            {
                "type": "tool_search_tool_result",
                "tool_use_id": "srvtoolu_01ABCDEFGHIJKLMNOPQRSTUV",
                "content": {
                    "type": "tool_search_tool_search_result",
                    "tool_references": [{"type": "tool_reference", "tool_name": "get_weather"}]
                }
            },
            {
                "type": "tool_use",
                "id": "toolu_01A09q90qw90lq917835lq9",
                "name": "get_weather",
                "input": {"location": "Paris, France"}
            }
        ],
        "stop_reason": "tool_use",
        "stop_sequence": null,
        "usage": {
            "input_tokens": 640,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 118,
            "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
            "service_tier": "standard"
        }
    })
}

#[tokio::test]
async fn deferred_tools_go_with_the_tool_search_tool_and_its_blocks_round_trip() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(ResponseTemplate::new(200).set_body_json(searched_answer()))
        .mount(&server)
        .await;
    let m = model(AnthropicConfig {
        tool_search: Some(ProviderToolSearch::Bm25),
        ..config(&server)
    });
    assert_eq!(m.tool_search(), Some(ProviderToolSearch::Bm25));
    let r = m.complete(&deferred_request()).await.unwrap();
    let body = &bodies(&server).await[0];
    assert_eq!(
        body["tools"],
        json!([
            {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"},
            {
                "name": "get_time",
                "description": "Get the current time in a given time zone",
                "input_schema": time_tool().input_schema,
                "cache_control": {"type": "ephemeral"}
            },
            {
                "name": "get_weather",
                "description": "Get the current weather in a given location",
                "input_schema": weather_tool().input_schema,
                "defer_loading": true
            }
        ])
    );
    assert_eq!(
        r.content,
        vec![
            Content::text("I'll search for a weather tool."),
            Content::ProviderSearch {
                id: "srvtoolu_01ABCDEFGHIJKLMNOPQRSTUV".into(),
                name: "tool_search_tool_bm25".into(),
                input: json!({"query": "weather"}),
            },
            Content::ProviderSearchResult {
                tool_use_id: "srvtoolu_01ABCDEFGHIJKLMNOPQRSTUV".into(),
                tool_names: vec!["get_weather".into()],
                error: None,
            },
            Content::ToolUse {
                id: "toolu_01A09q90qw90lq917835lq9".into(),
                name: "get_weather".into(),
                input: json!({"location": "Paris, France"}),
            },
        ]
    );
    assert_eq!(r.usage.input_tokens, 640);

    // The next request sends the search and what it loaded back as they came.
    let mut next = deferred_request();
    next.messages.push(Message {
        role: Role::Assistant,
        content: r.content.clone(),
    });
    next.messages.push(Message {
        role: Role::User,
        content: vec![Content::ToolResult {
            tool_use_id: "toolu_01A09q90qw90lq917835lq9".into(),
            content: "18°C, sunny".into(),
            is_error: false,
        }],
    });
    let wire = serde_json::to_value(wire_request_with(
        "claude-sonnet-4-6",
        &next,
        false,
        Some(ProviderToolSearch::Bm25),
    ))
    .unwrap();
    let sent = &wire["messages"][1]["content"];
    let answered = &searched_answer()["content"];
    assert_eq!(sent[1]["type"], "server_tool_use");
    assert_eq!(sent[1]["input"], answered[1]["input"]);
    assert_eq!(sent[2], answered[2], "the tool_search_tool_result, exactly");
    // Regex variant and an error result.
    let regex = serde_json::to_value(WireSearchTool::of(ProviderToolSearch::Regex)).unwrap();
    assert_eq!(
        regex,
        json!({"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"})
    );
    let (names, error) = read_search_result(
        &json!({"type": "tool_search_tool_result_error", "error_code": "invalid_tool_input"}),
    );
    assert!(names.is_empty());
    assert_eq!(error.as_deref(), Some("invalid_tool_input"));
    assert_eq!(
        search_result_content(&[], Some("unavailable")),
        json!({"type": "tool_search_tool_result_error", "error_code": "unavailable"})
    );
    // Without the search tool configured, deferred tools are never sent.
    let plain = serde_json::to_value(wire_request(
        "claude-sonnet-4-6",
        &deferred_request(),
        false,
    ))
    .unwrap();
    assert_eq!(plain["tools"].as_array().unwrap().len(), 1);
    assert_eq!(stop_reason(Some("pause_turn")), StopReason::PauseTurn);
}

/// The same answer streamed, as the API streams server tool blocks: the call's input as
/// `input_json_delta`s, the result whole in its `content_block_start`.
const SEARCHED_STREAM: &str = concat!(
    "event: message_start\n",
    r#"data: {"type":"message_start","message":{"id":"msg_01D7","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":640,"output_tokens":2}}}"#,
    "\n\n",
    "event: content_block_start\n",
    r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_01ABC","name":"tool_search_tool_bm25","input":{}}}"#,
    "\n\n",
    "event: content_block_delta\n",
    r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"query\": \"wea"}}"#,
    "\n\n",
    "event: content_block_delta\n",
    r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"ther\"}"}}"#,
    "\n\n",
    "event: content_block_stop\n",
    r#"data: {"type":"content_block_stop","index":0}"#,
    "\n\n",
    "event: content_block_start\n",
    r#"data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_search_tool_result","tool_use_id":"srvtoolu_01ABC","content":{"type":"tool_search_tool_search_result","tool_references":[{"type":"tool_reference","tool_name":"get_weather"}]}}}"#,
    "\n\n",
    "event: content_block_stop\n",
    r#"data: {"type":"content_block_stop","index":1}"#,
    "\n\n",
    "event: content_block_start\n",
    r#"data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01X","name":"get_weather","input":{}}}"#,
    "\n\n",
    "event: content_block_delta\n",
    r#"data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"location\": \"Paris\"}"}}"#,
    "\n\n",
    "event: content_block_stop\n",
    r#"data: {"type":"content_block_stop","index":2}"#,
    "\n\n",
    "event: message_delta\n",
    r#"data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":118}}"#,
    "\n\n",
    "event: message_stop\n",
    r#"data: {"type":"message_stop"}"#,
    "\n\n",
);

#[tokio::test]
async fn a_streamed_tool_search_assembles_like_the_plain_answer() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(SEARCHED_STREAM, "text/event-stream"))
        .mount(&server)
        .await;
    let m = model(AnthropicConfig {
        stream: true,
        tool_search: Some(ProviderToolSearch::Bm25),
        ..config(&server)
    });
    let r = m.complete(&deferred_request()).await.unwrap();
    assert_eq!(
        r.content,
        vec![
            Content::ProviderSearch {
                id: "srvtoolu_01ABC".into(),
                name: "tool_search_tool_bm25".into(),
                input: json!({"query": "weather"}),
            },
            Content::ProviderSearchResult {
                tool_use_id: "srvtoolu_01ABC".into(),
                tool_names: vec!["get_weather".into()],
                error: None,
            },
            Content::ToolUse {
                id: "toolu_01X".into(),
                name: "get_weather".into(),
                input: json!({"location": "Paris"}),
            },
        ]
    );
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (640, 118));
}

#[test]
fn deferred_tools_bound_a_call_as_if_a_search_loaded_them_all() {
    let without = request(true);
    let with = deferred_request();
    let weather = weather_tool();
    let weather_bytes = (weather.name.len()
        + weather.description.len()
        + weather.input_schema.to_string().len()) as u64;
    // The request without the weather tool in `tools`, plus its whole definition once more.
    let base = ModelRequest {
        tools: vec![time_tool()],
        ..request(true)
    };
    assert_eq!(
        input_token_upper_bound(&with),
        input_token_upper_bound(&base) + weather_bytes + TOOL_OVERHEAD_TOKENS
    );
    assert_eq!(deferred_load_bound(&without), 0);
    // Each reference to a loaded definition in the conversation bills it again.
    let mut later = deferred_request();
    later.messages.push(Message {
        role: Role::Assistant,
        content: vec![Content::ProviderSearchResult {
            tool_use_id: "srvtoolu_1".into(),
            tool_names: vec!["get_weather".into()],
            error: None,
        }],
    });
    assert_eq!(
        deferred_load_bound(&later),
        2 * (weather_bytes + TOOL_OVERHEAD_TOKENS)
    );
    // A count never goes below what the deferred tools may add.
    assert!(counted_bound(&with, 10).tokens >= 10 + deferred_load_bound(&with));
}
