//! The OpenAPI 3.1 document of every HTTP route (`GET /openapi.json`). The paths and the shapes
//! built by hand (`/health`, `/tools`, errors) are in `openapi.json`; the request and response
//! bodies are generated from the types that (de)serialise them, so the document cannot drift
//! from the wire: `ChatRequest`, `Turn` and `AgentRunRequest` (this crate), `ChatResponse` (the
//! agent's `RunResult`) with its `Step`, `Usage` and `HaltReason`, and `AgentAnswer` (seed 002's
//! JSON Schema, shipped by the agent).

use axum::Json;
use axum::routing::get;
use schemars::generate::{Contract, SchemaSettings};
use serde_json::{Value, json};
use toolforge_agent::RunResult;
use toolforge_agent::answer::AGENT_ANSWER_SCHEMA;

use crate::chat::{AgentRunRequest, ChatRequest};

const HAND_WRITTEN: &str = include_str!("../openapi.json");

/// The whole document.
#[must_use]
pub fn document() -> Value {
    let mut doc: Value = serde_json::from_str(HAND_WRITTEN).unwrap_or_else(|_| json!({}));
    doc["info"]["version"] = json!(env!("CARGO_PKG_VERSION"));
    let generated = generated_schemas();
    if let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        schemas.extend(generated);
    }
    doc
}

/// `GET /openapi.json`, served with or without the agent.
pub fn routes() -> axum::Router {
    axum::Router::new().route("/openapi.json", get(|| async { Json(document()) }))
}

/// The schemas generated from the types, each under the name its `$ref`s use.
fn generated_schemas() -> serde_json::Map<String, Value> {
    // Requests as they are read (optional fields may be left out), responses as they are
    // written (every field is always there).
    let generator = |contract: Contract| {
        SchemaSettings::draft2020_12()
            .with(|s| {
                s.definitions_path = "#/components/schemas".into();
                s.contract = contract;
            })
            .into_generator()
    };
    let mut requests = generator(Contract::Deserialize);
    requests.subschema_for::<ChatRequest>();
    requests.subschema_for::<AgentRunRequest>();
    let mut responses = generator(Contract::Serialize);
    responses.subschema_for::<RunResult>();
    let mut schemas = requests.take_definitions(true);
    schemas.extend(responses.take_definitions(true));
    if let Ok(mut answer) = serde_json::from_str::<Value>(AGENT_ANSWER_SCHEMA) {
        if let Some(o) = answer.as_object_mut() {
            o.remove("$schema");
            o.remove("$id");
        }
        schemas.insert("AgentAnswer".into(), answer);
    }
    schemas
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `$ref` in `value`.
    fn refs(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(o) => {
                if let Some(Value::String(r)) = o.get("$ref") {
                    out.push(r.clone());
                }
                o.values().for_each(|v| refs(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }

    #[test]
    fn every_reference_resolves_and_the_bodies_come_from_the_types() {
        let doc = document();
        let mut found = Vec::new();
        refs(&doc, &mut found);
        assert!(found.len() > 5, "{found:?}");
        for r in found {
            let pointer = r.trim_start_matches('#');
            assert!(doc.pointer(pointer).is_some(), "{r} does not resolve");
        }
        let schemas = &doc["components"]["schemas"];
        for name in [
            "ChatRequest",
            "Turn",
            "AgentRunRequest",
            "ChatResponse",
            "Step",
            "Usage",
            "HaltReason",
            "AgentAnswer",
        ] {
            assert!(schemas.get(name).is_some(), "{name} missing");
        }
        // A field added to the response type shows up without touching the document.
        assert!(
            schemas["ChatResponse"]["properties"]
                .get("broker_rationale")
                .is_some()
        );
        assert_eq!(schemas["ChatRequest"]["additionalProperties"], false);
        assert_eq!(
            schemas["ChatRequest"]["properties"]["message"]["minLength"],
            1
        );
        assert_eq!(
            schemas["HaltReason"]["oneOf"].as_array().map(Vec::len),
            Some(7),
            "{}",
            schemas["HaltReason"]
        );
    }
}
