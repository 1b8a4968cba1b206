//! What `toolforge client` answers when the server asks it something: it has no user to ask
//! and no model to sample, so it answers only what it can answer honestly.
//!
//! - Elicitation (declared): accepted with the defaults the requested schema declares, and
//!   nothing the schema does not give (SEP-1034).
//! - Roots (declared): an empty list; the client exposes no directories.
//! - Sampling: not declared, and refused if a server asks anyway.

use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    Implementation,
};
use rmcp::service::RequestContext;
use rmcp::{ClientHandler, ErrorData as McpError, RoleClient};
use serde_json::{Map, Value};

/// The client side of `toolforge client`.
#[derive(Debug, Clone, Default)]
pub struct Answers;

/// The `default` of every property of an elicitation's requested schema.
pub fn schema_defaults(params: &ElicitRequestParams) -> Map<String, Value> {
    let Ok(params) = serde_json::to_value(params) else {
        return Map::new();
    };
    params
        .pointer("/requestedSchema/properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .filter_map(|(name, prop)| Some((name.clone(), prop.get("default")?.clone())))
                .collect()
        })
        .unwrap_or_default()
}

impl ClientHandler for Answers {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = serde_json::from_value(serde_json::json!({"form": {}})).ok();
        capabilities.roots = serde_json::from_value(serde_json::json!({})).ok();
        ClientConfig::new(
            capabilities,
            Implementation::new("toolforge-client", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        _ctx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        Ok(ElicitResult::new(ElicitationAction::Accept)
            .with_content(Value::Object(schema_defaults(&params))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_declared_defaults_are_filled() {
        let params: ElicitRequestParams = serde_json::from_value(json!({
            "mode": "form", "message": "m",
            "requestedSchema": {"type": "object", "properties": {
                "name": {"type": "string", "default": "John Doe"},
                "age": {"type": "integer", "default": 30},
                "email": {"type": "string"}
            }}
        }))
        .unwrap();
        assert_eq!(
            Value::Object(schema_defaults(&params)),
            json!({"name": "John Doe", "age": 30})
        );
    }
}
