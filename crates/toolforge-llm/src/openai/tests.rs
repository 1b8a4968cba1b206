use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::wire::*;
use super::*;
use crate::model::*;
use crate::provider_http::*;

fn config(server: &MockServer) -> OpenAiConfig {
    let _ = rustls::crypto::ring::default_provider().install_default();
    OpenAiConfig {
        api_key: Some("sk-test".into()),
        // A trailing slash must not produce `//chat/completions`.
        base_url: format!("{}/v1/", server.uri()),
        retry_base: Duration::from_millis(5),
        ..OpenAiConfig::default()
    }
}

fn model(config: OpenAiConfig) -> OpenAiModel {
    OpenAiModel::new(config).unwrap()
}

#[tokio::test]
async fn input_bound_is_counted_for_the_shipped_tokenizer_families_only() {
    let server = MockServer::start().await;
    let req = request();
    let byte_bound = InputBound::upper(&req);
    let counted = model(OpenAiConfig {
        model: "gpt-4o-mini".into(),
        ..config(&server)
    })
    .input_bound(&req)
    .await;
    assert_eq!(counted.source, crate::model::BoundSource::Counted);
    let exact = crate::openai_tokens::count("gpt-4o-mini", &req).unwrap();
    assert!(exact <= counted.tokens && counted.tokens < byte_bound.tokens);
    let other = model(OpenAiConfig {
        model: "llama-3.1-8b-instruct".into(),
        ..config(&server)
    })
    .input_bound(&req)
    .await;
    assert_eq!(other, byte_bound, "no tokenizer shipped: the byte bound");
    // Nothing was sent to count.
    assert!(server.received_requests().await.unwrap().is_empty());
}

fn weather_tool() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "Get the current weather in a given location".into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "The city and country"},
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

fn request() -> ModelRequest {
    ModelRequest {
        system: "You are a terse assistant.".into(),
        tools: vec![weather_tool(), time_tool()],
        messages: vec![Message::user("What is the weather in Paris and Tokyo?")],
        max_tokens: 1024,
        // Ignored: OpenAI caches on its own.
        cache: true,
        stable_tools: 0,
        deferred_tools: Vec::new(),
    }
}

/// A real `chat.completion` asking for two parallel tool calls, with cached prompt tokens.
fn tool_calls_answer() -> Value {
    json!({
        "id": "chatcmpl-BcQ8ko2nz9B7CRvV0uVbcowidHpQU",
        "object": "chat.completion",
        "created": 1748496646,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{
            "index": 0,
            "message": {
                "role": "assistant",
                "content": null,
                "tool_calls": [
                    {
                        "id": "call_qOfTGgDrItLORNfC6VwUbyLL",
                        "type": "function",
                        "function": {
                            "name": "get_weather",
                            "arguments": "{\"location\": \"Paris, France\", \"unit\": \"celsius\"}"
                        }
                    },
                    {
                        "id": "call_7dV3ZL2jC8bYyQk4nF1mRpXe",
                        "type": "function",
                        "function": {
                            "name": "get_weather",
                            "arguments": "{\"location\":\"Tokyo, Japan\"}"
                        }
                    }
                ],
                "refusal": null,
                "annotations": []
            },
            "logprobs": null,
            "finish_reason": "tool_calls"
        }],
        "usage": {
            "prompt_tokens": 1290,
            "completion_tokens": 52,
            "total_tokens": 1342,
            "prompt_tokens_details": {"cached_tokens": 1152, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0
            }
        },
        "service_tier": "default",
        "system_fingerprint": "fp_34a54ae93c"
    })
}

/// A real plain-text `chat.completion`; `prompt_tokens_details` is null, as vLLM sends it.
fn stop_answer(text: &str) -> Value {
    json!({
        "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "object": "chat.completion",
        "created": 1741570283,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text, "refusal": null, "annotations": []},
            "logprobs": null,
            "finish_reason": "stop"
        }],
        "usage": {
            "prompt_tokens": 310,
            "completion_tokens": 9,
            "total_tokens": 319,
            "prompt_tokens_details": null
        },
        "service_tier": "default",
        "system_fingerprint": "fp_06737a9306"
    })
}

fn rate_limit_body() -> Value {
    json!({"error": {
        "message": "Rate limit reached for gpt-4o-mini in organization org-abc on tokens per min (TPM): Limit 200000, Used 199843, Requested 1290. Please try again in 339ms.",
        "type": "tokens",
        "param": null,
        "code": "rate_limit_exceeded"
    }})
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

#[tokio::test]
async fn tool_calls_request_shape_and_parsed_answer() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", "Bearer sk-test"))
        .and(header("content-type", "application/json"))
        .respond_with(ResponseTemplate::new(200).set_body_json(tool_calls_answer()))
        .expect(1)
        .mount(&server)
        .await;
    let m = model(config(&server));
    let r = m.complete(&request()).await.unwrap();

    let body = &bodies(&server).await[0];
    let expected = json!({
        "model": "gpt-4o-mini",
        "max_tokens": 1024,
        "messages": [
            {"role": "system", "content": "You are a terse assistant."},
            {"role": "user", "content": "What is the weather in Paris and Tokyo?"}
        ],
        "tools": [
            {"type": "function", "function": {
                "name": "get_weather",
                "description": "Get the current weather in a given location",
                "parameters": weather_tool().input_schema
            }},
            {"type": "function", "function": {
                "name": "get_time",
                "description": "Get the current time in a given time zone",
                "parameters": time_tool().input_schema
            }}
        ]
    });
    // Exact: no `stream`, no cache fields, nothing else.
    assert_eq!(body, &expected);

    assert_eq!(m.provider(), "openai");
    assert_eq!(m.model(), "gpt-4o-mini");
    assert_eq!(r.model, "gpt-4o-mini-2024-07-18");
    assert_eq!(r.stop_reason, StopReason::ToolUse);
    assert_eq!(
        r.content,
        vec![
            Content::ToolUse {
                id: "call_qOfTGgDrItLORNfC6VwUbyLL".into(),
                name: "get_weather".into(),
                input: json!({"location": "Paris, France", "unit": "celsius"}),
            },
            Content::ToolUse {
                id: "call_7dV3ZL2jC8bYyQk4nF1mRpXe".into(),
                name: "get_weather".into(),
                input: json!({"location": "Tokyo, Japan"}),
            },
        ]
    );
    assert_eq!(
        r.usage,
        Usage {
            input_tokens: 138,
            output_tokens: 52,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 1152,
        }
    );
    assert!(!m.warned_no_usage.load(Ordering::Relaxed));
}

#[tokio::test]
async fn conversation_with_tool_calls_and_results_is_serialised() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(stop_answer("Paris 18°C, Tokyo 24°C.")),
        )
        .expect(1)
        .mount(&server)
        .await;
    let mut req = request();
    req.system = String::new();
    req.messages.extend([
        Message {
            role: Role::Assistant,
            content: vec![
                Content::text("Let me check both."),
                Content::ToolUse {
                    id: "call_1".into(),
                    name: "get_weather".into(),
                    input: json!({"location": "Paris, France", "unit": "celsius"}),
                },
                Content::ToolUse {
                    id: "call_2".into(),
                    name: "get_weather".into(),
                    input: json!({"location": "Tokyo, Japan"}),
                },
            ],
        },
        Message {
            role: Role::User,
            content: vec![
                Content::ToolResult {
                    tool_use_id: "call_1".into(),
                    content: "{\"temp\": 18}".into(),
                    is_error: false,
                },
                Content::ToolResult {
                    tool_use_id: "call_2".into(),
                    content: "upstream timed out".into(),
                    is_error: true,
                },
                Content::text("Use Celsius for both."),
            ],
        },
        Message {
            role: Role::Assistant,
            content: vec![Content::ToolUse {
                id: "call_3".into(),
                name: "get_weather".into(),
                input: json!({"location": "Tokyo, Japan", "unit": "celsius"}),
            }],
        },
        Message {
            role: Role::User,
            content: vec![Content::ToolResult {
                tool_use_id: "call_3".into(),
                content: "Error: already failed once".into(),
                is_error: true,
            }],
        },
    ]);
    let r = model(config(&server)).complete(&req).await.unwrap();

    let body = &bodies(&server).await[0];
    let expected = json!([
        {"role": "user", "content": "What is the weather in Paris and Tokyo?"},
        {
            "role": "assistant",
            "content": "Let me check both.",
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {
                    "name": "get_weather",
                    "arguments": "{\"location\":\"Paris, France\",\"unit\":\"celsius\"}"
                }},
                {"id": "call_2", "type": "function", "function": {
                    "name": "get_weather",
                    "arguments": "{\"location\":\"Tokyo, Japan\"}"
                }}
            ]
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 18}"},
        {"role": "tool", "tool_call_id": "call_2", "content": "Error: upstream timed out"},
        {"role": "user", "content": "Use Celsius for both."},
        {
            "role": "assistant",
            "content": null,
            "tool_calls": [{"id": "call_3", "type": "function", "function": {
                "name": "get_weather",
                "arguments": "{\"location\":\"Tokyo, Japan\",\"unit\":\"celsius\"}"
            }}]
        },
        {"role": "tool", "tool_call_id": "call_3", "content": "Error: already failed once"}
    ]);
    // No system message when the prompt is empty.
    assert_eq!(body["messages"], expected);
    // The arguments are strings holding JSON, not objects.
    let args = body.pointer("/messages/1/tool_calls/0/function/arguments");
    let parsed: Value = serde_json::from_str(args.and_then(Value::as_str).unwrap()).unwrap();
    assert_eq!(parsed["location"], "Paris, France");

    assert_eq!(r.content, vec![Content::text("Paris 18°C, Tokyo 24°C.")]);
    assert_eq!(r.stop_reason, StopReason::EndTurn);
    // `prompt_tokens_details: null` means nothing was cached.
    assert_eq!(
        r.usage,
        Usage {
            input_tokens: 310,
            output_tokens: 9,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 0,
        }
    );
}

/// A real stream: a role chunk, text deltas, two tool calls whose arguments arrive in
/// pieces, the finish chunk, the usage chunk (`choices: []`) and `[DONE]`.
const TOOL_CALLS_STREAM: &str = concat!(
    r#"data: {"id":"chatcmpl-C2cpJcw8mRi3Q4aeH3Mw9UMoCm5Eb","object":"chat.completion.chunk","created":1754668089,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_34a54ae93c","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}"#,
    "\n\n",
    r#"data: {"id":"chatcmpl-C2cpJcw8mRi3Q4aeH3Mw9UMoCm5Eb","object":"chat.completion.chunk","created":1754668089,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_34a54ae93c","choices":[{"index":0,"delta":{"content":"Checking"},"logprobs":null,"finish_reason":null}],"usage":null}"#,
    "\n\n",
    r#"data: {"id":"chatcmpl-C2cpJcw8mRi3Q4aeH3Mw9UMoCm5Eb","object":"chat.completion.chunk","created":1754668089,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_34a54ae93c","choices":[{"index":0,"delta":{"content":" both cities."},"logprobs":null,"finish_reason":null}],"usage":null}"#,
    "\n\n",
    r#"data: {"id":"chatcmpl-C2cpJcw8mRi3Q4aeH3Mw9UMoCm5Eb","object":"chat.completion.chunk","created":1754668089,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_34a54ae93c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_PieqNSej6kM9hgYbcQdbZSaC","type":"function","function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}"#,
    "\n\n",
    r#"data: {"id":"chatcmpl-C2cpJcw8mRi3Q4aeH3Mw9UMoCm5Eb","object":"chat.completion.chunk","created":1754668089,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_34a54ae93c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"lo"}}]},"logprobs":null,"finish_reason":null}],"usage":null}"#,
    "\n\n",
    r#"data: {"id":"chatcmpl-C2cpJcw8mRi3Q4aeH3Mw9UMoCm5Eb","object":"chat.completion.chunk","created":1754668089,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_34a54ae93c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"cation\": \"Par"}}]},"logprobs":null,"finish_reason":null}],"usage":null}"#,
    "\n\n",
    r#"data: {"id":"chatcmpl-C2cpJcw8mRi3Q4aeH3Mw9UMoCm5Eb","object":"chat.completion.chunk","created":1754668089,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_34a54ae93c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"is, France\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}"#,
    "\n\n",
    r#"data: {"id":"chatcmpl-C2cpJcw8mRi3Q4aeH3Mw9UMoCm5Eb","object":"chat.completion.chunk","created":1754668089,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_34a54ae93c","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_Bb8kHV3JLnsUHYlULwr2SgOe","type":"function","function":{"name":"get_time","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}"#,
    "\n\n",
    r#"data: {"id":"chatcmpl-C2cpJcw8mRi3Q4aeH3Mw9UMoCm5Eb","object":"chat.completion.chunk","created":1754668089,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_34a54ae93c","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"timezone\""}}]},"logprobs":null,"finish_reason":null}],"usage":null}"#,
    "\n\n",
    r#"data: {"id":"chatcmpl-C2cpJcw8mRi3Q4aeH3Mw9UMoCm5Eb","object":"chat.completion.chunk","created":1754668089,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_34a54ae93c","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":": \"Asia/Tokyo\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}"#,
    "\n\n",
    r#"data: {"id":"chatcmpl-C2cpJcw8mRi3Q4aeH3Mw9UMoCm5Eb","object":"chat.completion.chunk","created":1754668089,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_34a54ae93c","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}"#,
    "\n\n",
    r#"data: {"id":"chatcmpl-C2cpJcw8mRi3Q4aeH3Mw9UMoCm5Eb","object":"chat.completion.chunk","created":1754668089,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_34a54ae93c","choices":[],"usage":{"prompt_tokens":1290,"completion_tokens":61,"total_tokens":1351,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}"#,
    "\n\n",
    "data: [DONE]\n\n",
);

#[tokio::test]
async fn streaming_assembles_text_tool_call_pieces_and_usage() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", "Bearer sk-test"))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw(TOOL_CALLS_STREAM, "text/event-stream"),
        )
        .expect(1)
        .mount(&server)
        .await;
    let mut c = config(&server);
    c.stream = true;
    let r = model(c).complete(&request()).await.unwrap();

    let body = &bodies(&server).await[0];
    assert_eq!(body["stream"], json!(true));
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["model"], json!("gpt-4o-mini"));

    assert_eq!(
        r.content,
        vec![
            Content::text("Checking both cities."),
            Content::ToolUse {
                id: "call_PieqNSej6kM9hgYbcQdbZSaC".into(),
                name: "get_weather".into(),
                input: json!({"location": "Paris, France"}),
            },
            Content::ToolUse {
                id: "call_Bb8kHV3JLnsUHYlULwr2SgOe".into(),
                name: "get_time".into(),
                input: json!({"timezone": "Asia/Tokyo"}),
            },
        ]
    );
    assert_eq!(r.stop_reason, StopReason::ToolUse);
    assert_eq!(r.model, "gpt-4o-mini-2024-07-18");
    assert_eq!(
        r.usage,
        Usage {
            input_tokens: 266,
            output_tokens: 61,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 1024,
        }
    );
}

#[tokio::test]
async fn stream_cut_before_finish_is_retried_then_a_transport_error() {
    let server = MockServer::start().await;
    let cut = TOOL_CALLS_STREAM
        .split("data: {\"id\":\"chatcmpl-C2cpJcw8mRi3Q4aeH3Mw9UMoCm5Eb\",\"object\":\"chat.completion.chunk\",\"created\":1754668089,\"model\":\"gpt-4o-mini-2024-07-18\",\"service_tier\":\"default\",\"system_fingerprint\":\"fp_34a54ae93c\",\"choices\":[{\"index\":0,\"delta\":{},")
        .next()
        .unwrap()
        .to_owned();
    assert!(cut.len() < TOOL_CALLS_STREAM.len());
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(cut, "text/event-stream"))
        .mount(&server)
        .await;
    let mut c = config(&server);
    c.stream = true;
    c.max_attempts = 2;
    let err = model(c).complete(&request()).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::Transport { provider: "openai", message }
            if message.contains("[DONE]") && message.contains("after 2 attempts")),
        "{err}"
    );
    assert_eq!(bodies(&server).await.len(), 2);
}

#[tokio::test]
async fn stream_without_done_after_finish_reason_is_complete() {
    let server = MockServer::start().await;
    let no_done = TOOL_CALLS_STREAM.replace("data: [DONE]\n\n", "");
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(no_done, "text/event-stream"))
        .expect(1)
        .mount(&server)
        .await;
    let mut c = config(&server);
    c.stream = true;
    let r = model(c).complete(&request()).await.unwrap();
    assert_eq!(r.tool_uses().len(), 2);
    assert_eq!(r.usage.cache_read_input_tokens, 1024);
}

#[tokio::test]
async fn streamed_rate_limit_error_without_retry_after_is_not_retried() {
    let server = MockServer::start().await;
    let sse = concat!(
        r#"data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1754668089,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        "\n\n",
        r#"data: {"error":{"message":"Rate limit reached for gpt-4o-mini","type":"tokens","param":null,"code":"rate_limit_exceeded"}}"#,
        "\n\n",
    );
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream"))
        .mount(&server)
        .await;
    let mut c = config(&server);
    c.stream = true;
    c.max_attempts = 2;
    let err = model(c).complete(&request()).await.unwrap_err();
    match err {
        ModelError::Overloaded {
            provider,
            status,
            attempts,
            message,
        } => {
            assert_eq!((provider, status, attempts), ("openai", 429, 1));
            assert!(message.contains("Rate limit reached"), "{message}");
        }
        other => panic!("expected Overloaded, got {other}"),
    }
    assert_eq!(bodies(&server).await.len(), 1);
}

#[tokio::test]
async fn stream_asked_but_json_answered_is_parsed() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(stop_answer("Hi.")))
        .expect(1)
        .mount(&server)
        .await;
    let mut c = config(&server);
    c.stream = true;
    let r = model(c).complete(&request()).await.unwrap();
    assert_eq!(r.text(), "Hi.");
    assert_eq!(r.stop_reason, StopReason::EndTurn);
}

#[tokio::test]
async fn rate_limited_with_retry_after_then_success() {
    let server = MockServer::start().await;
    // Mocks of equal priority are tried in mount order; the first answers once.
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "0")
                .set_body_json(rate_limit_body()),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(stop_answer("Done.")))
        .mount(&server)
        .await;
    let r = model(config(&server)).complete(&request()).await.unwrap();
    assert_eq!(r.text(), "Done.");
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 2);
    // The retry sends the same body.
    assert_eq!(sent[0], sent[1]);
}

#[tokio::test]
async fn retry_after_ms_is_preferred_and_a_wait_past_the_deadline_is_not_made() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "30")
                .insert_header("retry-after-ms", "2")
                .set_body_json(rate_limit_body()),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "30"))
        .mount(&server)
        .await;
    // 2 ms fits a 10 s deadline, 30 s does not.
    let mut c = config(&server);
    c.timeout = Duration::from_secs(10);
    let err = model(c).complete(&request()).await.unwrap_err();
    assert!(
        matches!(
            err,
            ModelError::Overloaded {
                status: 429,
                attempts: 2,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(bodies(&server).await.len(), 2);
}

#[tokio::test]
async fn rate_limited_without_retry_after_is_not_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(429).set_body_json(rate_limit_body()))
        .mount(&server)
        .await;
    let mut c = config(&server);
    c.max_attempts = 3;
    let err = model(c).complete(&request()).await.unwrap_err();
    match &err {
        ModelError::Overloaded {
            provider,
            status,
            attempts,
            message,
        } => {
            assert_eq!((*provider, *status, *attempts), ("openai", 429, 1));
            assert!(message.contains("Rate limit reached"), "{message}");
        }
        other => panic!("expected Overloaded, got {other}"),
    }
    assert_eq!(bodies(&server).await.len(), 1);
}

#[tokio::test]
async fn server_errors_are_retried_and_reported() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500).set_body_json(json!({"error": {
            "message": "The server had an error while processing your request. Sorry about that!",
            "type": "server_error", "param": null, "code": null
        }})))
        .mount(&server)
        .await;
    let mut c = config(&server);
    c.max_attempts = 2;
    let err = model(c).complete(&request()).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::Http { status: 500, message, .. }
            if message.contains("had an error") && message.contains("after 2 attempts")),
        "{err}"
    );
    assert_eq!(bodies(&server).await.len(), 2);
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    // (status, body, check)
    /// Whether the error is the one expected.
    type Check = fn(&ModelError) -> bool;
    let cases: [(u16, Value, Check); 4] = [
        (
            400,
            json!({"error": {
                "message": "Invalid schema for function 'get_weather': In context=(), 'required' is required to be supplied and to be an array including every key in properties.",
                "type": "invalid_request_error",
                "param": "tools[0].function.parameters",
                "code": "invalid_function_parameters"
            }}),
            |e| {
                matches!(e, ModelError::Http { provider: "openai", status: 400, message }
                    if message.contains("Invalid schema for function 'get_weather'")
                        && message.contains("invalid_function_parameters"))
            },
        ),
        (
            401,
            json!({"error": {
                "message": "Incorrect API key provided: sk-test. You can find your API key at https://platform.openai.com/account/api-keys.",
                "type": "invalid_request_error",
                "param": null,
                "code": "invalid_api_key"
            }}),
            |e| {
                matches!(e, ModelError::Auth { provider: "openai", status: 401, message }
                    if message.contains("Incorrect API key") && message.contains("OPENAI_API_KEY"))
            },
        ),
        (
            404,
            json!({"error": {
                "message": "The model `gpt-4o-mini` does not exist or you do not have access to it.",
                "type": "invalid_request_error",
                "param": null,
                "code": "model_not_found"
            }}),
            |e| {
                matches!(e, ModelError::Http { status: 404, message, .. }
                    if message.contains("does not exist") && message.contains("base URL"))
            },
        ),
        (
            429,
            json!({"error": {
                "message": "You exceeded your current quota, please check your plan and billing details.",
                "type": "insufficient_quota",
                "param": null,
                "code": "insufficient_quota"
            }}),
            |e| {
                matches!(e, ModelError::Overloaded { status: 429, attempts: 1, message, .. }
                    if message.contains("exceeded your current quota"))
            },
        ),
    ];
    for (status, body, check) in cases {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(status).set_body_json(body))
            .expect(1)
            .mount(&server)
            .await;
        let err = model(config(&server))
            .complete(&request())
            .await
            .unwrap_err();
        assert!(check(&err), "{status}: {err}");
        server.verify().await;
    }
}

#[tokio::test]
async fn local_server_without_key_gets_no_authorization_header() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(stop_answer("Hello.")))
        .expect(2)
        .mount(&server)
        .await;
    for key in [None, Some(String::new())] {
        let mut c = config(&server);
        c.api_key = key;
        let m = model(c);
        assert_eq!(m.complete(&request()).await.unwrap().text(), "Hello.");
    }
    let reqs = server.received_requests().await.unwrap();
    assert_eq!(reqs.len(), 2);
    assert!(
        reqs.iter()
            .all(|r| !r.headers.contains_key("authorization"))
    );
}

#[test]
fn missing_key_only_for_the_official_url() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    for (base_url, key) in [
        (DEFAULT_BASE_URL, None),
        ("https://api.openai.com/v1/", Some("  ")),
        ("https://api.openai.com", Some("")),
    ] {
        let err = OpenAiModel::new(OpenAiConfig {
            base_url: base_url.into(),
            api_key: key.map(str::to_owned),
            ..OpenAiConfig::default()
        })
        .unwrap_err();
        assert!(
            matches!(
                err,
                ModelError::MissingKey {
                    provider: "openai",
                    env: "OPENAI_API_KEY"
                }
            ),
            "{base_url}: {err}"
        );
    }
    for (base_url, key) in [
        (DEFAULT_BASE_URL, Some("sk-x")),
        ("http://127.0.0.1:11434/v1", None),
        ("https://router.huggingface.co/v1", None),
    ] {
        let m = OpenAiModel::new(OpenAiConfig {
            base_url: base_url.into(),
            api_key: key.map(str::to_owned),
            ..OpenAiConfig::default()
        });
        assert!(m.is_ok(), "{base_url}");
    }
    let err = OpenAiModel::new(OpenAiConfig {
        base_url: "localhost:1234".into(),
        ..OpenAiConfig::default()
    })
    .unwrap_err();
    assert!(
        matches!(&err, ModelError::Transport { message, .. } if message.contains("OPENAI_BASE_URL")),
        "{err}"
    );
}

#[tokio::test]
async fn unparseable_arguments_are_kept_raw() {
    let server = MockServer::start().await;
    let call = |id: &str, arguments: &str| json!({"id": id, "type": "function", "function": {"name": "get_weather", "arguments": arguments}});
    let mut answer = tool_calls_answer();
    answer["choices"][0]["message"]["tool_calls"] = json!([
        call("call_a", "{'location': 'Paris'}"),
        call("call_b", "{\"location\": \"Par"),
        call("call_c", "[\"Paris\"]"),
        call("call_d", ""),
    ]);
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(answer))
        .expect(1)
        .mount(&server)
        .await;
    let r = model(config(&server)).complete(&request()).await.unwrap();
    let inputs: Vec<&Value> = r.tool_uses().into_iter().map(|(_, _, i)| i).collect();
    assert_eq!(
        inputs,
        [
            &json!({"_raw": "{'location': 'Paris'}"}),
            &json!({"_raw": "{\"location\": \"Par"}),
            &json!({"_raw": "[\"Paris\"]"}),
            &json!({}),
        ]
    );
    assert_eq!(r.stop_reason, StopReason::ToolUse);
}

#[tokio::test]
async fn local_server_quirks_are_tolerated() {
    let server = MockServer::start().await;
    // Ollama/vLLM style: no usage, `stop` next to a tool call, no call id, arguments as an
    // object, content parts instead of a string.
    let answer = json!({
        "id": "chatcmpl-417",
        "object": "chat.completion",
        "created": 1754668089,
        "model": "qwen2.5:7b",
        "system_fingerprint": "fp_ollama",
        "choices": [{
            "index": 0,
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "Looking it up."}],
                "tool_calls": [{
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": {"location": "Paris"}}
                }]
            },
            "finish_reason": "stop"
        }]
    });
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(answer))
        .expect(1)
        .mount(&server)
        .await;
    let m = model(config(&server));
    let r = m.complete(&request()).await.unwrap();
    assert_eq!(
        r.content,
        vec![
            Content::text("Looking it up."),
            Content::ToolUse {
                id: "call_0".into(),
                name: "get_weather".into(),
                input: json!({"location": "Paris"}),
            },
        ]
    );
    assert_eq!(r.stop_reason, StopReason::ToolUse);
    assert_eq!(r.usage, Usage::default());
    assert_eq!(r.model, "qwen2.5:7b");
    assert!(m.warned_no_usage.load(Ordering::Relaxed));
}

#[tokio::test]
async fn unreadable_answers_are_bad_responses() {
    for (body, content_type, quoted) in [
        ("<html>gateway</html>", "text/html", "gateway"),
        (
            r#"{"error":{"message":"context window exceeded","type":"invalid_request_error"}}"#,
            "application/json",
            "context window exceeded",
        ),
        (
            r#"{"object":"chat.completion","choices":[]}"#,
            "application/json",
            "no choices",
        ),
    ] {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_raw(body, content_type))
            .expect(1)
            .mount(&server)
            .await;
        let err = model(config(&server))
            .complete(&request())
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ModelError::BadResponse { provider: "openai", message } if message.contains(quoted)),
            "{body}: {err}"
        );
    }
}

#[tokio::test]
async fn dead_server_is_a_transport_error_after_retries() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let m = model(OpenAiConfig {
        base_url: format!("http://127.0.0.1:{port}/v1"),
        max_attempts: 2,
        retry_base: Duration::from_millis(5),
        ..OpenAiConfig::default()
    });
    let err = m.complete(&request()).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::Transport { provider: "openai", message }
            if message.contains("/v1/chat/completions") && message.contains("after 2 attempts")),
        "{err}"
    );
}

#[test]
fn defaults_and_redacted_debug() {
    let c = OpenAiConfig {
        api_key: Some("sk-secret".into()),
        ..OpenAiConfig::default()
    };
    assert_eq!(c.base_url, "https://api.openai.com/v1");
    assert_eq!(c.model, "gpt-4o-mini");
    assert!(!c.stream);
    assert_eq!(c.max_attempts, 3);
    assert_eq!(c.retry_base, Duration::from_millis(500));
    assert_eq!(c.timeout, Duration::from_secs(120));
    let debug = format!("{c:?}");
    assert!(
        !debug.contains("sk-secret") && debug.contains("<redacted>"),
        "{debug}"
    );
    assert_eq!(OpenAiConfig::default().api_key, None);
}

#[test]
fn retry_after_prefers_milliseconds() {
    let check = |pairs: &[(&'static str, &str)], expected: Option<Duration>| {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        assert_eq!(retry_after(&h), expected, "{pairs:?}");
    };
    check(&[("retry-after", "0")], Some(Duration::ZERO));
    check(&[("retry-after", "7")], Some(Duration::from_secs(7)));
    check(&[("retry-after", "1.5")], Some(Duration::from_millis(1500)));
    check(
        &[("retry-after-ms", "339")],
        Some(Duration::from_millis(339)),
    );
    check(
        &[("retry-after", "1"), ("retry-after-ms", "339")],
        Some(Duration::from_millis(339)),
    );
    check(
        &[("retry-after", "2"), ("retry-after-ms", "soon")],
        Some(Duration::from_secs(2)),
    );
    check(&[("retry-after", "-1")], None);
    check(&[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")], None);
    check(&[], None);
}

#[test]
fn stop_reasons_map() {
    let check = |s: Option<&str>, calls: bool, expected| {
        assert_eq!(stop_reason(s, calls), expected, "{s:?} {calls}");
    };
    check(Some("stop"), false, StopReason::EndTurn);
    check(Some("stop"), true, StopReason::ToolUse);
    check(Some("tool_calls"), true, StopReason::ToolUse);
    check(Some("function_call"), true, StopReason::ToolUse);
    check(Some("length"), false, StopReason::MaxTokens);
    check(Some("length"), true, StopReason::MaxTokens);
    check(Some("content_filter"), false, StopReason::Other);
    check(None, false, StopReason::Other);
}

#[test]
fn error_bodies_of_compatible_servers_are_read() {
    let check = |body: &str, message: &str, status: u16| {
        let e = ErrorBody::parse(body);
        assert_eq!(e.describe(), message, "{body}");
        assert_eq!(e.status_hint(), status, "{body}");
    };
    check(
        r#"{"error":{"message":"Bad key","type":"invalid_request_error","code":"invalid_api_key"}}"#,
        "Bad key (code: invalid_api_key)",
        401,
    );
    // vLLM: flat, numeric code.
    check(
        r#"{"object":"error","message":"max_tokens is too large","type":"BadRequestError","param":null,"code":400}"#,
        "max_tokens is too large",
        400,
    );
    // Ollama's native shape and FastAPI's.
    check(
        r#"{"error":"model \"llama9\" not found"}"#,
        "model \"llama9\" not found",
        500,
    );
    check(r#"{"detail":"Not Found"}"#, "Not Found", 500);
    check("Bad Gateway", "Bad Gateway", 500);
    check("", "(empty body)", 500);
    // Long messages are cut.
    let long = format!(r#"{{"error":{{"message":"{}"}}}}"#, "x".repeat(1000));
    assert_eq!(ErrorBody::parse(&long).describe().len(), MAX_QUOTED);
}

// ---- the hosted tool search (Responses API) ----

/// A Responses API answer of the hosted search: `tool_search_call` (server-executed),
/// `tool_search_output` with the loaded definition, then the `function_call`, the shapes of the
/// official SDK's `ResponseToolSearchCall`, `ResponseToolSearchOutputItem` and
/// `ResponseFunctionToolCall`.
fn searched_responses_answer() -> Value {
    json!({
        "id": "resp_68af4030592c81938ec0a5fbab4a3e9f05438e46b5f69a3b",
        "object": "response",
        "created_at": 1756315696,
        "status": "completed",
        "error": null,
        "incomplete_details": null,
        "instructions": "You are a terse assistant.",
        "max_output_tokens": 1024,
        "model": "gpt-5.4-2026-03-05",
        "output": [
            {
                "id": "rs_68af4030baa48193b0b43b4c2a176a1a05438e46b5f69a3b",
                "type": "reasoning",
                "summary": []
            },
            {
                "id": "tsc_68af40313b8c8193a3a0f3c5b0c3a87505438e46b5f69a3b",
                "type": "tool_search_call",
                "call_id": null,
                "execution": "server",
                "arguments": {"paths": ["get_weather"]},
                "status": "completed"
            },
            {
                "id": "tso_68af4031a5d08193b7e6e5e0a4a2b6b305438e46b5f69a3b",
                "type": "tool_search_output",
                "call_id": null,
                "execution": "server",
                "status": "completed",
                "tools": [{
                    "type": "function",
                    "name": "get_weather",
                    "description": "Get the current weather in a given location",
                    "parameters": weather_tool().input_schema,
                    "strict": null,
                    "defer_loading": true
                }]
            },
            {
                "id": "fc_68af4032cd0c8193a5d5b2b6a1e3c9d205438e46b5f69a3b",
                "type": "function_call",
                "status": "completed",
                "arguments": "{\"location\":\"Paris, France\"}",
                "call_id": "call_Yf3q2Yc4zmnCrSbvGKQ7K9nM",
                "name": "get_weather"
            }
        ],
        "parallel_tool_calls": true,
        "store": true,
        "tools": [],
        "usage": {
            "input_tokens": 512,
            "input_tokens_details": {"cached_tokens": 256},
            "output_tokens": 64,
            "output_tokens_details": {"reasoning_tokens": 32},
            "total_tokens": 576
        }
    })
}

/// The weather tool left out of the offer, for the hosted search to find.
fn deferred_request() -> ModelRequest {
    ModelRequest {
        tools: vec![time_tool()],
        deferred_tools: vec![weather_tool()],
        stable_tools: 1,
        ..request()
    }
}

#[tokio::test]
async fn the_hosted_tool_search_goes_to_the_responses_api_and_its_items_round_trip() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .and(header("authorization", "Bearer sk-test"))
        .respond_with(ResponseTemplate::new(200).set_body_json(searched_responses_answer()))
        .mount(&server)
        .await;
    let m = model(OpenAiConfig {
        tool_search: true,
        // Ignored: the hosted search is asked for unstreamed.
        stream: true,
        ..config(&server)
    });
    assert_eq!(m.tool_search(), Some(ProviderToolSearch::Hosted));
    let r = m.complete(&deferred_request()).await.unwrap();
    let body = &bodies(&server).await[0];
    assert_eq!(
        body,
        &json!({
            "model": "gpt-4o-mini",
            "instructions": "You are a terse assistant.",
            "input": [{"role": "user", "content": "What is the weather in Paris and Tokyo?"}],
            "tools": [
                {"type": "tool_search"},
                {
                    "type": "function",
                    "name": "get_time",
                    "description": "Get the current time in a given time zone",
                    "parameters": time_tool().input_schema
                },
                {
                    "type": "function",
                    "name": "get_weather",
                    "description": "Get the current weather in a given location",
                    "parameters": weather_tool().input_schema,
                    "defer_loading": true
                }
            ],
            "max_output_tokens": 1024
        })
    );
    let search_id = "tsc_68af40313b8c8193a3a0f3c5b0c3a87505438e46b5f69a3b";
    assert_eq!(
        r.content,
        vec![
            Content::ProviderSearch {
                id: search_id.into(),
                name: "tool_search".into(),
                input: json!({"paths": ["get_weather"]}),
            },
            Content::ProviderSearchResult {
                tool_use_id: search_id.into(),
                tool_names: vec!["get_weather".into()],
                error: None,
            },
            Content::ToolUse {
                id: "call_Yf3q2Yc4zmnCrSbvGKQ7K9nM".into(),
                name: "get_weather".into(),
                input: json!({"location": "Paris, France"}),
            },
        ]
    );
    assert_eq!(r.stop_reason, StopReason::ToolUse);
    assert_eq!(r.model, "gpt-5.4-2026-03-05");
    // Cached input is billed apart.
    assert_eq!(
        (r.usage.input_tokens, r.usage.cache_read_input_tokens),
        (256, 256)
    );
    assert_eq!(r.usage.output_tokens, 64);

    // The next request sends the search, what it loaded (the whole definition, deferred, as
    // it came) and the call back, in order, then the tool's output.
    let mut next = deferred_request();
    next.messages.push(Message {
        role: Role::Assistant,
        content: r.content.clone(),
    });
    next.messages.push(Message {
        role: Role::User,
        content: vec![Content::ToolResult {
            tool_use_id: "call_Yf3q2Yc4zmnCrSbvGKQ7K9nM".into(),
            content: "18°C, sunny".into(),
            is_error: false,
        }],
    });
    let sent =
        serde_json::to_value(super::responses::responses_request("gpt-4o-mini", &next)).unwrap();
    let answered = &searched_responses_answer()["output"];
    let input = sent["input"].as_array().unwrap();
    assert_eq!(input.len(), 5);
    assert_eq!(
        input[1],
        json!({
            "type": "tool_search_call",
            "id": search_id,
            "execution": "server",
            "arguments": {"paths": ["get_weather"]},
            "status": "completed"
        })
    );
    assert_eq!(input[2]["type"], "tool_search_output");
    assert_eq!(input[2]["execution"], "server");
    let loaded = &input[2]["tools"][0];
    for key in ["type", "name", "description", "parameters", "defer_loading"] {
        assert_eq!(loaded[key], answered[2]["tools"][0][key], "{key}");
    }
    assert_eq!(
        input[3],
        json!({
            "type": "function_call",
            "call_id": "call_Yf3q2Yc4zmnCrSbvGKQ7K9nM",
            "name": "get_weather",
            "arguments": "{\"location\":\"Paris, France\"}"
        })
    );
    assert_eq!(
        input[4],
        json!({
            "type": "function_call_output",
            "call_id": "call_Yf3q2Yc4zmnCrSbvGKQ7K9nM",
            "output": "18°C, sunny"
        })
    );
    // Tools stay where they were: the loaded one comes back in the conversation, not in
    // `tools`, so the prefix the first call sent is unchanged.
    assert_eq!(sent["tools"], body["tools"]);
}

#[test]
fn responses_answers_read_text_cuts_failures_and_searches_by_call_id() {
    let text = json!({
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": [{
            "id": "msg_1", "type": "message", "role": "assistant", "status": "incomplete",
            "content": [{"type": "output_text", "text": "Partly", "annotations": []}]
        }],
        "usage": {"input_tokens": 10, "output_tokens": 5}
    });
    let a = super::responses::parse_responses(&text.to_string(), "gpt-4o-mini").unwrap();
    assert_eq!(a.response.content, vec![Content::text("Partly")]);
    assert_eq!(a.response.stop_reason, StopReason::MaxTokens);
    assert!(a.has_usage);
    let failed = json!({
        "status": "failed",
        "error": {"code": "server_error", "message": "The model failed."},
        "output": []
    });
    let Err(e) = super::responses::parse_responses(&failed.to_string(), "m") else {
        panic!("a failed response is an error");
    };
    assert!(e.to_string().contains("The model failed."), "{e}");
    // Two searches in one answer: each output answers the call with its call_id.
    let two = json!({
        "status": "completed",
        "output": [
            {"id": "tsc_a", "type": "tool_search_call", "call_id": "c_a", "execution": "server",
             "arguments": {"paths": ["x"]}, "status": "completed"},
            {"id": "tsc_b", "type": "tool_search_call", "call_id": "c_b", "execution": "server",
             "arguments": {"paths": ["y"]}, "status": "completed"},
            {"id": "tso_a", "type": "tool_search_output", "call_id": "c_a", "execution": "server",
             "status": "completed", "tools": [{"type": "function", "name": "x"}]},
            {"id": "tso_b", "type": "tool_search_output", "call_id": "c_b", "execution": "server",
             "status": "incomplete", "tools": []}
        ]
    });
    let a = super::responses::parse_responses(&two.to_string(), "m").unwrap();
    assert!(!a.has_usage);
    assert_eq!(a.response.stop_reason, StopReason::EndTurn);
    assert_eq!(
        a.response.content[2..],
        [
            Content::ProviderSearchResult {
                tool_use_id: "tsc_a".into(),
                tool_names: vec!["x".into()],
                error: None,
            },
            Content::ProviderSearchResult {
                tool_use_id: "tsc_b".into(),
                tool_names: vec![],
                error: Some("the search did not complete".into()),
            },
        ]
    );
}

#[test]
fn without_deferred_tools_the_responses_request_has_no_search_tool() {
    let sent = serde_json::to_value(super::responses::responses_request("m", &request())).unwrap();
    let tools = sent["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 2);
    assert!(tools.iter().all(|t| t["type"] == "function"));
    // A deferred tool's name and description are counted as in the prompt.
    let with = crate::openai_tokens::count("gpt-4o-mini", &deferred_request()).unwrap();
    let without = crate::openai_tokens::count(
        "gpt-4o-mini",
        &ModelRequest {
            deferred_tools: Vec::new(),
            ..deferred_request()
        },
    )
    .unwrap();
    assert!(with > without);
}
