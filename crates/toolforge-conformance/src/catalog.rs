//! The suite's fixed catalog, written as the JSON the wire carries.
//!
//! The scenarios check names, content types and a few exact payloads; keeping the catalog as
//! literal JSON makes it easy to compare with the suite's scenario descriptions line by line.
//! [`wire`] reads such JSON as an rmcp model value.

use rmcp::ErrorData as McpError;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Builds an rmcp model value from its wire JSON. The JSON is static, so a failure is a bug in
/// the catalog; it still becomes an `internal_error`, never a panic.
pub(crate) fn wire<T: DeserializeOwned>(what: &str, v: Value) -> Result<T, McpError> {
    serde_json::from_value(v)
        .map_err(|e| McpError::internal_error(format!("fixture bug: bad {what}: {e}"), None))
}

/// A 1x1 red PNG.
pub const PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A valid, empty 16-bit mono 44.1 kHz WAV file.
pub const WAV_BASE64: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQAAAAA=";

pub const STATIC_TEXT_URI: &str = "test://static-text";
pub const STATIC_BINARY_URI: &str = "test://static-binary";
pub const WATCHED_URI: &str = "test://watched-resource";
pub const TEMPLATE_URI: &str = "test://template/{id}/data";

fn no_args() -> Value {
    json!({"type": "object", "properties": {}})
}

/// Every tool, in listing order.
pub fn tools() -> Value {
    json!([
        {"name": "test_simple_text", "description": "Tests simple text content response", "inputSchema": no_args()},
        {"name": "test_image_content", "description": "Tests image content response", "inputSchema": no_args()},
        {"name": "test_audio_content", "description": "Tests audio content response", "inputSchema": no_args()},
        {"name": "test_embedded_resource", "description": "Tests embedded resource content response", "inputSchema": no_args()},
        {"name": "test_multiple_content_types", "description": "Tests response with multiple content types (text, image, resource)", "inputSchema": no_args()},
        {"name": "test_tool_with_logging", "description": "Tests tool that emits log messages during execution", "inputSchema": no_args()},
        {"name": "test_tool_with_progress", "description": "Tests tool that reports progress notifications", "inputSchema": no_args()},
        {"name": "test_error_handling", "description": "Tests error response handling", "inputSchema": no_args()},
        {"name": "test_sampling", "description": "Tests server-initiated sampling (LLM completion request)",
         "inputSchema": {"type": "object", "properties": {"prompt": {"type": "string", "description": "The prompt to send to the LLM"}}, "required": ["prompt"]}},
        {"name": "test_elicitation", "description": "Tests server-initiated elicitation (user input request)",
         "inputSchema": {"type": "object", "properties": {"message": {"type": "string", "description": "The message to show the user"}}, "required": ["message"]}},
        {"name": "test_elicitation_sep1034_defaults", "description": "Tests elicitation with default values per SEP-1034", "inputSchema": no_args()},
        {"name": "test_elicitation_sep1330_enums", "description": "Tests elicitation with enum schema improvements per SEP-1330", "inputSchema": no_args()},
        {"name": "json_schema_2020_12_tool", "description": "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
         "inputSchema": json_schema_2020_12()},
        {"name": "test_reconnection", "description": "Tests SSE stream disconnection and client reconnection (SEP-1699). The server closes the stream mid-call and sends the result after the client reconnects.", "inputSchema": no_args()},
        {"name": TEST_CUSTOM_HEADER, "description": "Tests SEP-2243 custom headers: its `region` argument travels in the Mcp-Param-Region header too",
         "inputSchema": {"type": "object",
            "properties": {"region": {"type": "string", "description": "A region name, mirrored in the Mcp-Param-Region header", "x-mcp-header": "Region"}},
            "required": ["region"]}},
        {"name": "test_missing_capability", "description": "Requires the client's sampling capability: without it the call fails with MissingRequiredClientCapability (-32021)", "inputSchema": no_args()},
        {"name": "test_streaming_elicitation", "description": "Streams one progress notification, then its result, on the request's own response stream", "inputSchema": no_args()},
        {"name": "test_logging_tool", "description": "Logs one message only when the request's _meta sets a log level", "inputSchema": no_args()},
        {"name": "test_trigger_tool_change", "description": "Sends notifications/tools/list_changed to every subscriptions/listen stream that asked for it", "inputSchema": no_args()},
        {"name": "test_trigger_prompt_change", "description": "Sends notifications/prompts/list_changed to every subscriptions/listen stream that asked for it", "inputSchema": no_args()},
        {"name": "test_input_required_result_elicitation", "description": "MRTR: returns InputRequiredResult with an elicitation request", "inputSchema": no_args()},
        {"name": "test_input_required_result_sampling", "description": "MRTR: returns InputRequiredResult with a sampling request", "inputSchema": no_args()},
        {"name": "test_input_required_result_list_roots", "description": "MRTR: returns InputRequiredResult with a roots/list request", "inputSchema": no_args()},
        {"name": "test_input_required_result_request_state", "description": "MRTR: returns InputRequiredResult with requestState", "inputSchema": no_args()},
        {"name": "test_input_required_result_multiple_inputs", "description": "MRTR: returns InputRequiredResult with elicitation, sampling and roots requests at once", "inputSchema": no_args()},
        {"name": "test_input_required_result_multi_round", "description": "MRTR: two rounds of input before the result", "inputSchema": no_args()},
        {"name": "test_input_required_result_tampered_state", "description": "MRTR: requestState is sealed (HMAC); a tampered one is refused", "inputSchema": no_args()},
        {"name": "test_input_required_result_capabilities", "description": "MRTR: asks only for the input kinds the client declared", "inputSchema": no_args()},
    ])
}

/// The tool whose `region` argument is annotated with `x-mcp-header` (SEP-2243).
pub const TEST_CUSTOM_HEADER: &str = "test_custom_header";

/// The SEP-1613 / SEP-2106 input schema: `$schema`, `$defs` with `$anchor`, `$ref`,
/// composition (`allOf`/`anyOf`), conditionals (`if`/`then`/`else`), `additionalProperties`.
fn json_schema_2020_12() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"address": {"$anchor": "addressDef", "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"}
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false
    })
}

pub fn resources() -> Value {
    json!([
        {"uri": STATIC_TEXT_URI, "name": "Static Text Resource", "description": "A static text resource for testing", "mimeType": "text/plain"},
        {"uri": STATIC_BINARY_URI, "name": "Static Binary Resource", "description": "A static binary resource (image) for testing", "mimeType": "image/png"},
        {"uri": WATCHED_URI, "name": "Watched Resource", "description": "A resource that can be subscribed to for updates", "mimeType": "text/plain"},
    ])
}

pub fn resource_templates() -> Value {
    json!([
        {"uriTemplate": TEMPLATE_URI, "name": "Resource Template", "description": "A resource template with parameter substitution", "mimeType": "application/json"},
    ])
}

pub fn prompts() -> Value {
    json!([
        {"name": "test_simple_prompt", "description": "A simple prompt without arguments"},
        {"name": "test_prompt_with_arguments", "description": "A prompt with required arguments",
         "arguments": [{"name": "arg1", "description": "First test argument", "required": true},
                       {"name": "arg2", "description": "Second test argument", "required": true}]},
        {"name": "test_prompt_with_embedded_resource", "description": "A prompt that includes an embedded resource",
         "arguments": [{"name": "resourceUri", "description": "URI of the resource to embed", "required": true}]},
        {"name": "test_prompt_with_image", "description": "A prompt that includes image content"},
        {"name": MRTR_PROMPT, "description": "MRTR: a prompt that asks the client for context (elicitation) before it answers"},
    ])
}

/// The prompt that answers `prompts/get` with an InputRequiredResult first (SEP-2322).
pub const MRTR_PROMPT: &str = "test_input_required_result_prompt";

/// Values offered for `test_prompt_with_arguments`.`arg1`, filtered by prefix.
pub const ARG1_COMPLETIONS: &[&str] = &["paris", "park", "party", "value1", "value2"];

/// The SEP-1034 elicitation schema: every field carries a default.
pub fn sep1034_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "description": "Verification status", "default": true}
        }
    })
}

/// The SEP-1330 elicitation schema: the five enum forms.
pub fn sep1330_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "description": "Choose an option", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "description": "Choose a titled option",
                "oneOf": [{"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"}, {"const": "value3", "title": "Third Option"}]},
            "legacyEnum": {"type": "string", "description": "Choose a legacy option", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "description": "Choose multiple options", "minItems": 1, "maxItems": 3,
                "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "description": "Choose multiple titled options", "minItems": 1, "maxItems": 3,
                "items": {"anyOf": [{"const": "value1", "title": "First Choice"}, {"const": "value2", "title": "Second Choice"}, {"const": "value3", "title": "Third Choice"}]}}
        },
        "required": []
    })
}

/// The simple elicitation schema of `test_elicitation`.
pub fn user_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"}
        },
        "required": ["username", "email"]
    })
}
