//! An rmcp client over an in-memory duplex pipe lists and calls every tool, reads every
//! resource and gets every prompt, answering sampling and elicitation like the suite does.

#![allow(deprecated)] // logging/sampling/elicitation are deprecated in rmcp for 2026-07-28 only

use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, CreateMessageRequestParams,
    CreateMessageResult, ElicitRequestParams, ElicitResult, GetPromptRequestParams,
    LoggingMessageNotificationParam, ProgressNotificationParam, ReadResourceRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::{ClientHandler, ErrorData as McpError, RoleClient, ServiceExt};
use serde_json::{Value, json};
use toolforge_conformance::Fixture;

#[derive(Clone, Default)]
struct Client {
    logs: Arc<Mutex<Vec<Value>>>,
    progress: Arc<Mutex<Vec<f64>>>,
    elicited: Arc<Mutex<Vec<Value>>>,
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        serde_json::from_value(json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"sampling": {}, "elicitation": {}},
            "clientInfo": {"name": "fixture-test", "version": "0"}
        }))
        .unwrap()
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _ctx: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, McpError> {
        let prompt = serde_json::to_value(&params).unwrap();
        let said = prompt.pointer("/messages/0/content/text").cloned().unwrap();
        Ok(serde_json::from_value(json!({
            "role": "assistant", "model": "test-model",
            "content": {"type": "text", "text": format!("echo {}", said.as_str().unwrap())}
        }))
        .unwrap())
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _ctx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        let request = serde_json::to_value(&request).unwrap();
        // The MRTR tools' forms ask for `name`; the suite's elicitation tools for a user.
        let asks = |field: &str| {
            request
                .pointer(&format!("/requestedSchema/properties/{field}"))
                .is_some()
        };
        let content = if asks("name") {
            json!({"name": "ada"})
        } else if asks("color") {
            json!({"color": "teal"})
        } else {
            json!({"username": "ada", "email": "ada@example.com"})
        };
        self.elicited.lock().unwrap().push(request);
        Ok(serde_json::from_value(json!({"action": "accept", "content": content})).unwrap())
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        self.logs
            .lock()
            .unwrap()
            .push(serde_json::to_value(&params).unwrap());
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params.progress);
    }
}

async fn connect() -> (RunningService<RoleClient, Client>, Client) {
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        if let Ok(running) = Fixture::new().serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let handler = Client::default();
    let client = handler.clone().serve(client_io).await.expect("handshake");
    (client, handler)
}

async fn call(
    client: &RunningService<RoleClient, Client>,
    name: &str,
    args: Value,
) -> CallToolResult {
    let params: CallToolRequestParams = serde_json::from_value(json!({
        "name": name, "arguments": args, "_meta": {"progressToken": "p-1"}
    }))
    .unwrap();
    client
        .call_tool(params)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn content_types(result: &CallToolResult) -> Vec<String> {
    let v = serde_json::to_value(&result.content).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn initialize_declares_every_capability_the_suite_needs() {
    let (client, _) = connect().await;
    let info = serde_json::to_value(client.peer_info().unwrap()).unwrap();
    let caps = &info["capabilities"];
    for cap in ["tools", "prompts", "logging", "completions"] {
        assert!(caps.get(cap).is_some(), "capability {cap} missing: {caps}");
    }
    assert_eq!(caps["resources"]["subscribe"], json!(true));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn every_tool_is_listed_with_a_description_and_schema() {
    let (client, _) = connect().await;
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "test_simple_text",
            "test_image_content",
            "test_audio_content",
            "test_embedded_resource",
            "test_multiple_content_types",
            "test_tool_with_logging",
            "test_tool_with_progress",
            "test_error_handling",
            "test_sampling",
            "test_elicitation",
            "test_elicitation_sep1034_defaults",
            "test_elicitation_sep1330_enums",
            "json_schema_2020_12_tool",
            "test_reconnection",
            "test_custom_header",
            "test_missing_capability",
            "test_streaming_elicitation",
            "test_logging_tool",
            "test_trigger_tool_change",
            "test_trigger_prompt_change",
            "test_input_required_result_elicitation",
            "test_input_required_result_sampling",
            "test_input_required_result_list_roots",
            "test_input_required_result_request_state",
            "test_input_required_result_multiple_inputs",
            "test_input_required_result_multi_round",
            "test_input_required_result_tampered_state",
            "test_input_required_result_capabilities",
            // The Tasks extension's (SEP-2663).
            "greet",
            "slow_compute",
            "failing_job",
            "protocol_error_job",
            "confirm_delete",
            "multi_input",
            "test_tool_with_task",
        ]
    );
    for tool in &tools {
        assert!(
            tool.description.as_deref().is_some_and(|d| !d.is_empty()),
            "{}",
            tool.name
        );
    }
    let schema = tools
        .iter()
        .find(|t| t.name == "json_schema_2020_12_tool")
        .unwrap();
    let schema = serde_json::to_value(&*schema.input_schema).unwrap();
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert_eq!(schema["additionalProperties"], json!(false));
    assert_eq!(schema["$defs"]["address"]["$anchor"], "addressDef");
    for keyword in ["allOf", "if", "then", "else"] {
        assert!(schema.get(keyword).is_some(), "{keyword} dropped: {schema}");
    }
    let header = tools
        .iter()
        .find(|t| t.name == "test_custom_header")
        .unwrap();
    assert_eq!(
        header.input_schema["properties"]["region"]["x-mcp-header"],
        "Region"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn every_tool_answers_with_the_content_types_the_suite_checks() {
    let (client, handler) = connect().await;
    let table: &[(&str, Value, &[&str], bool)] = &[
        ("test_simple_text", json!({}), &["text"], false),
        ("test_image_content", json!({}), &["image"], false),
        ("test_audio_content", json!({}), &["audio"], false),
        ("test_embedded_resource", json!({}), &["resource"], false),
        (
            "test_multiple_content_types",
            json!({}),
            &["text", "image", "resource"],
            false,
        ),
        ("test_tool_with_logging", json!({}), &["text"], false),
        ("test_tool_with_progress", json!({}), &["text"], false),
        ("test_error_handling", json!({}), &["text"], true),
        (
            "test_sampling",
            json!({"prompt": "hi there"}),
            &["text"],
            false,
        ),
        (
            "test_elicitation",
            json!({"message": "who are you?"}),
            &["text"],
            false,
        ),
        (
            "test_elicitation_sep1034_defaults",
            json!({}),
            &["text"],
            false,
        ),
        (
            "test_elicitation_sep1330_enums",
            json!({}),
            &["text"],
            false,
        ),
        (
            "json_schema_2020_12_tool",
            json!({"name": "x"}),
            &["text"],
            false,
        ),
        ("test_reconnection", json!({}), &["text"], false),
    ];
    for (name, args, types, is_error) in table {
        let result = call(&client, name, args.clone()).await;
        assert_eq!(content_types(&result), *types, "{name}");
        assert_eq!(result.is_error.unwrap_or(false), *is_error, "{name}");
    }
    let sampled = call(&client, "test_sampling", json!({"prompt": "ping"})).await;
    assert!(
        serde_json::to_string(&sampled.content)
            .unwrap()
            .contains("echo ping")
    );
    let image = serde_json::to_value(&call(&client, "test_image_content", json!({})).await.content)
        .unwrap();
    assert_eq!(image[0]["mimeType"], "image/png");
    let audio = serde_json::to_value(&call(&client, "test_audio_content", json!({})).await.content)
        .unwrap();
    assert_eq!(audio[0]["mimeType"], "audio/wav");

    // Notifications are delivered before the result they belong to.
    assert!(handler.logs.lock().unwrap().len() >= 3);
    assert_eq!(*handler.progress.lock().unwrap(), [0.0, 50.0, 100.0]);

    let elicited = handler.elicited.lock().unwrap().clone();
    assert_eq!(elicited.len(), 3);
    assert_eq!(
        elicited[0]["requestedSchema"]["required"],
        json!(["username", "email"])
    );
    let defaults = &elicited[1]["requestedSchema"]["properties"];
    assert_eq!(defaults["name"]["default"], "John Doe");
    assert_eq!(defaults["age"]["default"], 30);
    assert_eq!(defaults["score"]["default"], 95.5);
    assert_eq!(defaults["status"]["default"], "active");
    assert_eq!(defaults["verified"]["default"], true);
    let enums = &elicited[2]["requestedSchema"]["properties"];
    assert!(enums["untitledSingle"]["enum"].is_array());
    assert!(enums["titledSingle"]["oneOf"].is_array());
    assert!(enums["legacyEnum"]["enumNames"].is_array());
    assert!(enums["untitledMulti"]["items"]["enum"].is_array());
    assert!(enums["titledMulti"]["items"]["anyOf"].is_array());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn bad_calls_are_clear_errors_not_crashes() {
    let (client, _) = connect().await;
    let unknown: CallToolRequestParams =
        serde_json::from_value(json!({"name": "no_such_tool"})).unwrap();
    let err = client.call_tool(unknown).await.unwrap_err().to_string();
    assert!(err.contains("tool not found: no_such_tool"), "{err}");
    let missing: CallToolRequestParams =
        serde_json::from_value(json!({"name": "test_sampling", "arguments": {}})).unwrap();
    let err = client.call_tool(missing).await.unwrap_err().to_string();
    assert!(err.contains("missing string argument `prompt`"), "{err}");
    // The session survives both.
    assert_eq!(
        call(&client, "test_simple_text", json!({}))
            .await
            .content
            .len(),
        1
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn every_resource_and_the_template_read_back() {
    let (client, _) = connect().await;
    let listed = client.list_all_resources().await.unwrap();
    let uris: Vec<&str> = listed.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(
        uris,
        [
            "test://static-text",
            "test://static-binary",
            "test://watched-resource",
            "skill://pdf-processing/SKILL.md",
            "skill://pdf-processing/references/FORMS.md",
            "skill://toolforge/commit-messages/SKILL.md",
        ]
    );
    let templates = client.list_all_resource_templates().await.unwrap();
    assert_eq!(templates[0].uri_template, "test://template/{id}/data");

    let read = |uri: &str| {
        let params: ReadResourceRequestParams =
            serde_json::from_value(json!({"uri": uri})).unwrap();
        let client = &client;
        async move { serde_json::to_value(client.read_resource(params).await.unwrap()).unwrap() }
    };
    let text = read("test://static-text").await;
    assert_eq!(text["contents"][0]["mimeType"], "text/plain");
    assert!(text["contents"][0]["text"].is_string());
    let blob = read("test://static-binary").await;
    assert_eq!(blob["contents"][0]["mimeType"], "image/png");
    assert!(blob["contents"][0]["blob"].is_string());
    assert!(read("test://watched-resource").await["contents"][0]["text"].is_string());
    let templated = read("test://template/123/data").await;
    let body: Value =
        serde_json::from_str(templated["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        body,
        json!({"id": "123", "templateTest": true, "data": "Data for ID: 123"})
    );

    let missing: ReadResourceRequestParams =
        serde_json::from_value(json!({"uri": "test://nope"})).unwrap();
    assert!(client.read_resource(missing).await.is_err());

    let sub = serde_json::from_value(json!({"uri": "test://watched-resource"})).unwrap();
    client.subscribe(sub).await.unwrap();
    let unsub = serde_json::from_value(json!({"uri": "test://watched-resource"})).unwrap();
    client.unsubscribe(unsub).await.unwrap();
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn every_prompt_renders_and_arg1_completes() {
    let (client, _) = connect().await;
    let prompts = client.list_all_prompts().await.unwrap();
    assert_eq!(prompts.len(), 5);
    for p in &prompts {
        assert!(
            p.description.as_deref().is_some_and(|d| !d.is_empty()),
            "{}",
            p.name
        );
    }
    let table: &[(&str, Value, &[&str])] = &[
        ("test_simple_prompt", json!({}), &["text"]),
        (
            "test_prompt_with_arguments",
            json!({"arg1": "alpha", "arg2": "beta"}),
            &["text"],
        ),
        (
            "test_prompt_with_embedded_resource",
            json!({"resourceUri": "test://x"}),
            &["resource", "text"],
        ),
        ("test_prompt_with_image", json!({}), &["image", "text"]),
    ];
    for (name, args, types) in table {
        let params: GetPromptRequestParams =
            serde_json::from_value(json!({"name": name, "arguments": args})).unwrap();
        let got = serde_json::to_value(client.get_prompt(params).await.unwrap()).unwrap();
        let kinds: Vec<&str> = got["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["content"]["type"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, *types, "{name}");
        if *name == "test_prompt_with_arguments" {
            let t = got["messages"][0]["content"]["text"].as_str().unwrap();
            assert!(t.contains("alpha") && t.contains("beta"), "{t}");
        }
    }
    let missing: GetPromptRequestParams = serde_json::from_value(
        json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "a"}}),
    )
    .unwrap();
    let err = client.get_prompt(missing).await.unwrap_err().to_string();
    assert!(err.contains("arg2"), "{err}");

    let complete = serde_json::from_value(json!({
        "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
        "argument": {"name": "arg1", "value": "par"}
    }))
    .unwrap();
    let done = serde_json::to_value(client.complete(complete).await.unwrap()).unwrap();
    assert_eq!(
        done["completion"]["values"],
        json!(["paris", "park", "party"])
    );

    let level = serde_json::from_value(json!({"level": "debug"})).unwrap();
    client.set_level(level).await.unwrap();
    client.cancel().await.unwrap();
}

/// The fixture is a dual-era server: its 2026-07-28 MRTR tools, called on a handshake-era
/// session, ask the client mid-call (the way that era asks) and complete with the same result a
/// 2026-07-28 client gets from its retries.
#[tokio::test]
async fn mrtr_tools_ask_a_handshake_era_client_mid_call() {
    let (client, handler) = connect().await;
    let sampled = call(&client, "test_input_required_result_sampling", json!({})).await;
    assert_eq!(
        sampled.content[0].as_text().map(|t| t.text.as_str()),
        Some("Sampling result: echo What is the capital of France?")
    );
    let elicited = call(&client, "test_input_required_result_elicitation", json!({})).await;
    assert_eq!(
        elicited.content[0].as_text().map(|t| t.text.as_str()),
        Some("Hello, ada!")
    );
    // Two rounds, each asked mid-call.
    let before = handler.elicited.lock().unwrap().len();
    let multi = call(&client, "test_input_required_result_multi_round", json!({})).await;
    let text = multi.content[0].as_text().map(|t| t.text.clone()).unwrap();
    assert_eq!(text, "Multi-round complete for ada who likes teal");
    assert_eq!(handler.elicited.lock().unwrap().len(), before + 2);
    let _ = client.cancel().await;
}
