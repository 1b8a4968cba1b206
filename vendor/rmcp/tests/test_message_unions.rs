//! The message unions (`ServerResult`, `ClientRequest`, ...) deserialize by trying only the
//! variants a value's keys allow (`src/model/union_variant.rs`). These tests hold them to the
//! derived untagged `Deserialize` they replaced: each union is mirrored here with serde's
//! derive, and both parse the same values, valid ones and ones with a key taken out, a foreign
//! key put in, or another shape; they must agree on the variant and on everything in it.

#![allow(deprecated)] // the unions still carry deprecated variants (roots, sampling)

use rmcp::model::*;
use serde::Deserialize;
use serde_json::{Value, json};

/// Declares a derived untagged mirror of one rmcp union, with the same variant names, so that
/// the two parse results print alike (`Debug`) when they agree.
macro_rules! mirror {
    ($name:ident { $($variant:ident($inner:ty)),* $(,)? }) => {
        #[derive(Debug, Deserialize)]
        #[serde(untagged)]
        // Read through `Debug` only; the variant names are the union's own.
        #[allow(dead_code, clippy::large_enum_variant, clippy::enum_variant_names)]
        enum $name {
            $($variant($inner)),*
        }
    };
}

mirror!(ServerResultMirror {
    DiscoverResult(DiscoverResult),
    InitializeResult(InitializeResult),
    CompleteResult(CompleteResult),
    GetPromptResult(GetPromptResult),
    ListPromptsResult(ListPromptsResult),
    ListResourcesResult(ListResourcesResult),
    ListResourceTemplatesResult(ListResourceTemplatesResult),
    ReadResourceResult(ReadResourceResult),
    SubscriptionsListenResult(SubscriptionsListenResult),
    ListToolsResult(ListToolsResult),
    ListSkillsResult(ListSkillsResult),
    GetSkillResult(GetSkillResult),
    ElicitResult(ElicitResult),
    CreateTaskResult(CreateTaskResult),
    GetTaskResult(GetTaskResult),
    CallToolResult(CallToolResult),
    InputRequiredResult(InputRequiredResult),
    TaskAckResult(TaskAckResult),
    EmptyResult(EmptyResult),
    CustomResult(CustomResult),
});

mirror!(ClientResultMirror {
    CreateMessageResult(Box<CreateMessageResult>),
    ListRootsResult(ListRootsResult),
    ElicitResult(ElicitResult),
    EmptyResult(EmptyResult),
    CustomResult(CustomResult),
});

mirror!(ClientRequestMirror {
    PingRequest(PingRequest),
    InitializeRequest(InitializeRequest),
    DiscoverRequest(DiscoverRequest),
    CompleteRequest(CompleteRequest),
    SetLevelRequest(SetLevelRequest),
    GetPromptRequest(GetPromptRequest),
    ListPromptsRequest(ListPromptsRequest),
    ListResourcesRequest(ListResourcesRequest),
    ListResourceTemplatesRequest(ListResourceTemplatesRequest),
    ReadResourceRequest(ReadResourceRequest),
    SubscriptionsListenRequest(SubscriptionsListenRequest),
    SubscribeRequest(SubscribeRequest),
    UnsubscribeRequest(UnsubscribeRequest),
    CallToolRequest(CallToolRequest),
    ListToolsRequest(ListToolsRequest),
    GetTaskRequest(GetTaskRequest),
    UpdateTaskRequest(UpdateTaskRequest),
    CancelTaskRequest(CancelTaskRequest),
    ListSkillsRequest(ListSkillsRequest),
    GetSkillRequest(GetSkillRequest),
    ReadResourceDirectoryRequest(ReadResourceDirectoryRequest),
    CustomRequest(CustomRequest),
});

mirror!(ServerRequestMirror {
    PingRequest(PingRequest),
    CreateMessageRequest(CreateMessageRequest),
    ListRootsRequest(ListRootsRequest),
    ElicitRequest(ElicitRequest),
    CustomRequest(CustomRequest),
});

mirror!(ClientNotificationMirror {
    CancelledNotification(CancelledNotification),
    ProgressNotification(ProgressNotification),
    InitializedNotification(InitializedNotification),
    RootsListChangedNotification(RootsListChangedNotification),
    CustomNotification(CustomNotification),
});

mirror!(ServerNotificationMirror {
    CancelledNotification(CancelledNotification),
    ProgressNotification(ProgressNotification),
    LoggingMessageNotification(LoggingMessageNotification),
    ResourceUpdatedNotification(ResourceUpdatedNotification),
    ResourceListChangedNotification(ResourceListChangedNotification),
    ToolListChangedNotification(ToolListChangedNotification),
    PromptListChangedNotification(PromptListChangedNotification),
    SubscriptionsAcknowledgedNotification(SubscriptionsAcknowledgedNotification),
    TaskStatusNotification(TaskStatusNotification),
    CustomNotification(CustomNotification),
});

/// Each value, then each object with one key taken out, with each key of `foreign` added, and
/// wrapped in an array.
fn variations(values: &[Value], foreign: &Value) -> Vec<Value> {
    let mut all = Vec::new();
    for value in values {
        all.push(value.clone());
        all.push(json!([value]));
        let Value::Object(object) = value else {
            continue;
        };
        for key in object.keys() {
            let mut less = object.clone();
            less.remove(key);
            all.push(Value::Object(less));
        }
        for (key, extra) in foreign.as_object().into_iter().flatten() {
            let mut more = object.clone();
            more.insert(key.clone(), extra.clone());
            all.push(Value::Object(more));
        }
    }
    all.extend([json!(null), json!("text"), json!(7), json!([]), json!({})]);
    all
}

/// Parses every value both ways, from text as the transports do; returns how many values parsed
/// to a variant (so a test can tell it checked more than errors).
fn agree<Patched, Mirror>(values: &[Value]) -> usize
where
    Patched: std::fmt::Debug + serde::de::DeserializeOwned,
    Mirror: std::fmt::Debug + serde::de::DeserializeOwned,
{
    let mut parsed = 0;
    for value in values {
        let text = value.to_string();
        let patched = serde_json::from_str::<Patched>(&text).map(|v| format!("{v:?}"));
        let mirror = serde_json::from_str::<Mirror>(&text).map(|v| format!("{v:?}"));
        match (&patched, &mirror) {
            (Ok(patched), Ok(mirror)) => {
                assert_eq!(patched, mirror, "{text}");
                parsed += 1;
            }
            (Err(_), Err(_)) => {}
            _ => panic!("{text}: the patched union gave {patched:?}, the derived one {mirror:?}"),
        }
    }
    parsed
}

fn server_results() -> Vec<Value> {
    vec![
        json!({"content": [{"type": "text", "text": "hi"}], "isError": false}),
        json!({"content": [], "resultType": "complete", "_meta": {"k": 1}}),
        json!({"structuredContent": {"a": 1}}),
        json!({"isError": true}),
        json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}}], "nextCursor": "c"}),
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}}),
        json!({"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {}, "ttlMs": 0, "cacheScope": "public"}),
        json!({"completion": {"values": ["a"]}}),
        json!({"messages": [{"role": "user", "content": {"type": "text", "text": "q"}}]}),
        json!({"prompts": []}),
        json!({"resources": []}),
        json!({"resourceTemplates": []}),
        json!({"contents": []}),
        json!({"resultType": "complete", "_meta": {}}),
        json!({"skills": []}),
        json!({"skill": {"name": "s"}}),
        json!({"action": "accept", "content": {"a": 1}}),
        json!({"resultType": "task", "taskId": "t1", "status": "working"}),
        json!({"taskId": "t1", "status": "completed", "createdAt": "2026-01-01T00:00:00Z"}),
        json!({"resultType": "input_required", "inputRequests": {}, "requestState": "s"}),
        json!({"resultType": "complete"}),
        json!({"unknown": 1}),
        json!({"content": [], "tools": []}),
    ]
}

#[test]
fn server_results_parse_as_the_derived_union_does() {
    let foreign = json!({"content": [], "tools": [], "resultType": "complete", "taskId": "t"});
    let values = variations(&server_results(), &foreign);
    let parsed = agree::<ServerResult, ServerResultMirror>(&values);
    assert!(parsed > values.len() / 2, "{parsed} of {}", values.len());
}

#[test]
fn client_results_parse_as_the_derived_union_does() {
    let results = [
        json!({"role": "assistant", "content": {"type": "text", "text": "a"}, "model": "m"}),
        json!({"roots": [{"uri": "file:///r"}]}),
        json!({"action": "decline"}),
        json!({}),
    ];
    let values = variations(
        &results,
        &json!({"model": "m", "roots": [], "action": "cancel"}),
    );
    let parsed = agree::<ClientResult, ClientResultMirror>(&values);
    assert!(parsed > values.len() / 2, "{parsed} of {}", values.len());
}

fn client_requests() -> Vec<Value> {
    let methods_without_params = ["ping", "tools/list", "prompts/list", "resources/list"];
    let mut requests: Vec<Value> = methods_without_params
        .iter()
        .map(|method| json!({"method": method}))
        .collect();
    requests.extend([
        json!({"method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}}),
        json!({"method": "tools/call", "params": {"name": "echo", "_meta": {"progressToken": 1}}}),
        json!({"method": "tools/list", "params": {"cursor": "c"}}),
        json!({"method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}),
        json!({"method": "resources/read", "params": {"uri": "file:///a"}}),
        json!({"method": "prompts/get", "params": {"name": "p"}}),
        json!({"method": "logging/setLevel", "params": {"level": "info"}}),
        json!({"method": "tasks/get", "params": {"taskId": "t"}}),
        json!({"method": "x/custom", "params": {"a": 1}}),
        json!({"method": 5}),
    ]);
    requests
}

#[test]
fn client_requests_parse_as_the_derived_union_does() {
    let values = variations(&client_requests(), &json!({"method": "ping", "params": {}}));
    let parsed = agree::<ClientRequest, ClientRequestMirror>(&values);
    assert!(parsed > values.len() / 2, "{parsed} of {}", values.len());
}

#[test]
fn server_requests_parse_as_the_derived_union_does() {
    let requests = [
        json!({"method": "ping"}),
        json!({"method": "roots/list"}),
        json!({"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 10}}),
        json!({"method": "elicitation/create", "params": {"message": "m", "requestedSchema": {"type": "object", "properties": {}}}}),
        json!({"method": "x/other"}),
    ];
    let values = variations(&requests, &json!({"method": "ping", "params": {"a": 1}}));
    let parsed = agree::<ServerRequest, ServerRequestMirror>(&values);
    assert!(parsed > values.len() / 2, "{parsed} of {}", values.len());
}

#[test]
fn notifications_parse_as_the_derived_unions_do() {
    let notifications = [
        json!({"method": "notifications/cancelled", "params": {"requestId": 1}}),
        json!({"method": "notifications/progress", "params": {"progressToken": 1, "progress": 0.5}}),
        json!({"method": "notifications/initialized"}),
        json!({"method": "notifications/roots/list_changed"}),
        json!({"method": "notifications/message", "params": {"level": "info", "data": "d"}}),
        json!({"method": "notifications/resources/updated", "params": {"uri": "file:///a"}}),
        json!({"method": "notifications/tools/list_changed"}),
        json!({"method": "notifications/x", "params": {}}),
    ];
    let foreign = json!({"method": "notifications/initialized", "params": {}});
    let values = variations(&notifications, &foreign);
    let client = agree::<ClientNotification, ClientNotificationMirror>(&values);
    let server = agree::<ServerNotification, ServerNotificationMirror>(&values);
    assert!(client > values.len() / 2 && server > values.len() / 2);
}

/// A value that matches no variant still gets the derived union's error message.
#[test]
fn a_value_no_variant_takes_is_refused_as_before() {
    let error = serde_json::from_str::<ClientRequest>(r#"{"params": {}}"#).unwrap_err();
    assert_eq!(
        error.to_string(),
        "data did not match any variant of untagged enum ClientRequest"
    );
}
