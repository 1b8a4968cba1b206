//! The transports parse each JSON-RPC message with `JsonRpcMessage::from_json_slice`: the
//! envelope's keys first, then the one shape they allow straight from the text. These tests
//! hold it to the derived
//! `Deserialize` every other caller uses: both parse the same texts, whole messages of each shape
//! and ones with a key taken out, a key of another shape put in, a key repeated or escaped, or
//! trailing text; they must give the same message, or the same error.

use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use serde_json::{Value, json};

/// Each message, then each with one key taken out, with each key of `foreign` added, and
/// wrapped in an array.
fn variations(messages: &[Value], foreign: &Value) -> Vec<String> {
    let mut all = Vec::new();
    for message in messages {
        all.push(message.to_string());
        all.push(json!([message]).to_string());
        let Value::Object(object) = message else {
            continue;
        };
        for key in object.keys() {
            let mut less = object.clone();
            less.remove(key);
            all.push(Value::Object(less).to_string());
        }
        for (key, extra) in foreign.as_object().into_iter().flatten() {
            let mut more = object.clone();
            more.insert(key.clone(), extra.clone());
            all.push(Value::Object(more).to_string());
        }
    }
    all.extend(["null", "7", "[]", "{}", "", "{", "not json"].map(str::to_owned));
    all
}

/// Texts a JSON value cannot print: a key twice, a key spelled with an escape, text after the
/// message, a byte that is not UTF-8.
fn hand_written() -> Vec<String> {
    [
        r#"{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{},"result":{"content":[]}}"#,
        r#"{"jsonrpc":"2.0","id":1,"met\u0068od":"ping"}"#,
        r#"{"jsonrpc":"2.0","\u0069d":1,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"ping"} trailing"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"ping"}{"jsonrpc":"2.0"}"#,
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\u{e9}\"}",
        r#"  {"jsonrpc":"2.0","method":"notifications/initialized"}  "#,
        // Repeated keys inside: a variant read from the text refuses them, the derived way
        // keeps the last; the derived way must decide.
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":1,"x":2}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{},"params":{"name":"b"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a","text":"b"}]}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"content":[{"type":"text","text":"b"}]}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","resultType":"complete","content":[]}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"isError":true,"isError":"no"}}"#,
        // Keys the variants look at, escaped or of another type.
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":false}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":7,"content":[]}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"},"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":[]}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":"text"}"#,
    ]
    .map(str::to_owned)
    .into_iter()
    .chain([
        String::from_utf8_lossy(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}").into_owned(),
    ])
    .collect()
}

/// Parses every text both ways; returns how many parsed to a message (so a test can tell it
/// checked more than errors).
fn agree<M>(texts: &[String], fast: impl Fn(&[u8]) -> serde_json::Result<M>) -> usize
where
    M: std::fmt::Debug + serde::de::DeserializeOwned,
{
    let mut parsed = 0;
    for text in texts {
        let fast = fast(text.as_bytes()).map(|m| format!("{m:?}"));
        let derived = serde_json::from_slice::<M>(text.as_bytes()).map(|m| format!("{m:?}"));
        match (&fast, &derived) {
            (Ok(fast), Ok(derived)) => {
                assert_eq!(fast, derived, "{text}");
                parsed += 1;
            }
            (Err(fast), Err(derived)) => {
                assert_eq!(fast.to_string(), derived.to_string(), "{text}")
            }
            _ => panic!("{text}: from_json_slice gave {fast:?}, the derived parse {derived:?}"),
        }
    }
    parsed
}

fn client_messages() -> Vec<Value> {
    vec![
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}}),
        json!({"jsonrpc": "2.0", "id": "a", "method": "tools/call", "params": {"name": "echo", "_meta": {"progressToken": 1}}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "x/custom", "params": {"a": 1}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
        json!({"jsonrpc": "2.0", "id": 5, "result": {}}),
        json!({"jsonrpc": "2.0", "id": 6, "result": {"roots": [{"uri": "file:///r"}]}}),
        json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32601, "message": "no"}}),
        json!({"jsonrpc": "2.0", "error": {"code": -32700, "message": "parse"}}),
        json!({"jsonrpc": "1.0", "id": 8, "method": "ping"}),
        json!({"jsonrpc": "2.0", "id": null, "method": "ping"}),
        json!({"jsonrpc": "2.0", "id": 9, "method": 5}),
    ]
}

fn server_messages() -> Vec<Value> {
    vec![
        json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "hi"}], "isError": false}}),
        json!({"jsonrpc": "2.0", "id": 2, "result": {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}}),
        json!({"jsonrpc": "2.0", "id": 3, "result": {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "id": 4, "result": {"resultType": "input_required", "inputRequests": {}, "requestState": "s"}}),
        json!({"jsonrpc": "2.0", "id": 5, "result": {}}),
        json!({"jsonrpc": "2.0", "id": 6, "error": {"code": -32602, "message": "bad", "data": {"k": 1}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "d"}}),
        json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 0.5}}),
        json!({"jsonrpc": "2.0", "id": 7, "method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 10}}),
        json!({"jsonrpc": "2.0", "id": 8, "method": "roots/list"}),
        json!({"jsonrpc": "2.0", "id": 9, "result": 5}),
    ]
}

/// Keys of every other shape, each put into every message.
fn foreign() -> Value {
    json!({"id": 10, "method": "ping", "result": {}, "error": {"code": 1, "message": "m"}, "params": {}, "jsonrpc": "2.0"})
}

/// Every variation of `messages`, and the hand-written texts, parsed both ways; most of them
/// must parse.
fn agree_on<M>(messages: &[Value], fast: impl Fn(&[u8]) -> serde_json::Result<M>)
where
    M: std::fmt::Debug + serde::de::DeserializeOwned,
{
    let mut texts = variations(messages, &foreign());
    texts.extend(hand_written());
    let parsed = agree(&texts, fast);
    assert!(parsed > texts.len() / 3, "{parsed} of {}", texts.len());
}

#[test]
fn client_messages_parse_as_the_derived_deserialize_does() {
    agree_on(&client_messages(), ClientJsonRpcMessage::from_json_slice);
}

#[test]
fn server_messages_parse_as_the_derived_deserialize_does() {
    agree_on(&server_messages(), ServerJsonRpcMessage::from_json_slice);
}

/// A request's `params` are read in one pass (`src/model/params_with_meta.rs`): its
/// `_meta` goes to the request's extensions, every other field to the parameters, as the
/// derived parse (`_meta` beside a flattened field) did.
#[test]
fn call_parameters_keep_meta_apart_from_the_arguments() {
    use rmcp::model::{CallToolRequest, ClientRequest, RequestMetaObject};

    let text = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "echo",
        "_meta": {"progressToken": 7, "k": "v"},
        "arguments": {"_meta": "an argument", "a": [1, {"b": null}], "z": 1},
    }})
    .to_string();
    let message = ClientJsonRpcMessage::from_json_slice(text.as_bytes()).expect("a request");
    let Some((ClientRequest::CallToolRequest(call), _)) = message.into_request() else {
        panic!("not a tools/call");
    };
    assert_eq!(call.params.name, "echo");
    // The arguments whole, their own `_meta` key too; the request's is apart. (Their keys
    // are in sorted order, so the text is the same whether serde_json keeps insertion order.)
    assert_eq!(
        serde_json::to_string(&call.params.arguments).unwrap(),
        r#"{"_meta":"an argument","a":[1,{"b":null}],"z":1}"#
    );
    assert_eq!(call.params.meta, None);
    let meta = call
        .extensions
        .get::<RequestMetaObject>()
        .expect("_meta kept");
    assert_eq!(
        serde_json::to_value(meta).unwrap(),
        json!({"progressToken": 7, "k": "v"})
    );

    let typed = |params: Value| {
        serde_json::from_value::<CallToolRequest>(json!({"method": "tools/call", "params": params}))
    };
    let no_meta = typed(json!({"name": "echo", "_meta": null})).expect("null _meta");
    assert!(no_meta.extensions.get::<RequestMetaObject>().is_none());
    // What the derived parse refused, refused: `_meta` not a map, params not a map (a derived
    // struct alone would read an array by position), a field of the wrong type.
    let refused = [
        json!({"name": "echo", "_meta": "m"}),
        json!(["echo", {}]),
        json!("echo"),
        json!({"name": 5}),
        json!({"arguments": {}}),
    ];
    for params in refused {
        assert!(typed(params.clone()).is_err(), "{params}");
    }
    // `_meta` twice in the text, as the derived parse said.
    let twice = r#"{"method":"tools/call","params":{"name":"e","_meta":{},"_meta":{}}}"#;
    let error = serde_json::from_str::<CallToolRequest>(twice).unwrap_err();
    assert!(
        error.to_string().contains("duplicate field `_meta`"),
        "{error}"
    );
}

/// A notification's `params` the same way: `_meta` to its extensions, absent `params` read as
/// an empty map.
#[test]
fn notification_parameters_keep_meta_apart() {
    use rmcp::model::{NotificationMetaObject, ServerNotification};

    let text = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
        "progressToken": "t", "progress": 0.5, "_meta": {"k": 1},
    }})
    .to_string();
    let message = ServerJsonRpcMessage::from_json_slice(text.as_bytes()).expect("a notification");
    let Some(ServerNotification::ProgressNotification(progress)) = message.into_notification()
    else {
        panic!("not a progress notification");
    };
    assert_eq!(progress.params.progress, 0.5);
    let meta = progress
        .extensions
        .get::<NotificationMetaObject>()
        .expect("_meta kept");
    assert_eq!(serde_json::to_value(meta).unwrap(), json!({"k": 1}));

    let bare = r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;
    assert!(ServerJsonRpcMessage::from_json_slice(bare.as_bytes()).is_ok());
}

/// A request's `params` are written as one map, the message's `_meta` first and then the
/// parameters' fields (`src/model/params_fields.rs`), as rmcp wrote them through a
/// `Value`: the same keys in the same order; parameters with a `_meta` of their own are merged
/// as before, the message's keys winning.
#[test]
fn params_are_written_as_one_map_meta_first() {
    use rmcp::model::{
        CallToolRequest, CallToolRequestParams, ListToolsRequest, RequestMetaObject,
    };

    let object = |value: Value| value.as_object().cloned().unwrap_or_default();
    let arguments = object(json!({"_meta": "an argument", "a": [1, {"b": null}], "z": 1}));
    let mut call =
        CallToolRequest::new(CallToolRequestParams::new("echo").with_arguments(arguments.clone()));
    assert_eq!(
        serde_json::to_string(&call).unwrap(),
        r#"{"method":"tools/call","params":{"name":"echo","arguments":{"_meta":"an argument","a":[1,{"b":null}],"z":1}}}"#
    );
    call.extensions
        .insert(RequestMetaObject::from(object(json!({"progressToken": 7}))));
    assert_eq!(
        serde_json::to_string(&call).unwrap(),
        r#"{"method":"tools/call","params":{"_meta":{"progressToken":7},"name":"echo","arguments":{"_meta":"an argument","a":[1,{"b":null}],"z":1}}}"#
    );

    // The parameters' own `_meta` merged under the message's (the message's `k` wins).
    let mut params = CallToolRequestParams::new("echo");
    params.meta = Some(RequestMetaObject::from(object(
        json!({"k": "params", "p": 1}),
    )));
    let mut call = CallToolRequest::new(params);
    call.extensions
        .insert(RequestMetaObject::from(object(json!({"k": "message"}))));
    let written: Value = serde_json::to_value(&call).unwrap();
    assert_eq!(
        written,
        json!({"method": "tools/call", "params": {"_meta": {"k": "message", "p": 1}, "name": "echo"}})
    );

    // Absent optional parameters: only the message's `_meta`, or an empty map.
    let mut list = ListToolsRequest::default();
    assert_eq!(
        serde_json::to_string(&list).unwrap(),
        r#"{"method":"tools/list","params":{}}"#
    );
    list.extensions.insert(RequestMetaObject::from(object(
        json!({"progressToken": "t"}),
    )));
    assert_eq!(
        serde_json::to_string(&list).unwrap(),
        r#"{"method":"tools/list","params":{"_meta":{"progressToken":"t"}}}"#
    );
}
