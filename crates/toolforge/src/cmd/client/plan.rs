//! Which tools `toolforge client` calls, and with what arguments.
//!
//! - `--tool NAME`: that tool, with `--args` or arguments built from its input schema.
//! - Conformance mode (`MCP_CONFORMANCE_SCENARIO` set, as the official suite does):
//!   the calls the scenario hands over in `MCP_CONFORMANCE_CONTEXT` (`toolCalls`), verbatim;
//!   else the scenario's own contract where it has one (`json-schema-ref-no-deref` only lists;
//!   `json-schema-2020-12-preservation` echoes the focal tool's input schema back unchanged);
//!   else every listed tool, with arguments built from its schema.
//! - Otherwise: no call (the tools are listed).

use rmcp::model::Tool;
use serde_json::{Map, Value, json};

/// One planned `tools/call`.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub tool: String,
    pub arguments: Map<String, Value>,
}

/// What the command line and the environment ask for.
#[derive(Debug, Default)]
pub struct Request<'a> {
    pub tool: Option<&'a str>,
    pub args: Option<Map<String, Value>>,
    pub scenario: Option<&'a str>,
    /// `MCP_CONFORMANCE_CONTEXT`, parsed.
    pub context: Option<Value>,
}

/// Arguments from a JSON Schema: every required property (its `default`, else a placeholder of
/// its type) and every optional property that declares a `default`. Optional properties
/// without one are left out rather than invented.
pub fn args_from_schema(schema: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(Value::Object(props)) = schema.get("properties") {
        for (name, prop) in props {
            let value = match prop.get("default") {
                Some(default) => default.clone(),
                None if required.contains(&name.as_str()) => placeholder(prop),
                None => continue,
            };
            out.insert(name.clone(), value);
        }
    }
    out
}

fn placeholder(prop: &Value) -> Value {
    if let Some(first) = prop.get("enum").and_then(|e| e.get(0)) {
        return first.clone();
    }
    match prop.get("type").and_then(Value::as_str) {
        Some("integer" | "number") => json!(1),
        Some("boolean") => json!(true),
        Some("array") => json!([]),
        Some("object") => json!({}),
        _ => json!("test"),
    }
}

/// The calls to make against a server that listed `tools`.
pub fn calls(request: Request<'_>, tools: &[Tool]) -> Result<Vec<Call>, String> {
    let schema_of = |tool: &Tool| Value::Object((*tool.input_schema).clone());
    if let Some(name) = request.tool {
        let tool = tools
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| format!("the server lists no tool named {name}"))?;
        let arguments = request
            .args
            .unwrap_or_else(|| args_from_schema(&schema_of(tool)));
        return Ok(vec![Call {
            tool: name.to_owned(),
            arguments,
        }]);
    }
    let Some(scenario) = request.scenario else {
        return Ok(Vec::new());
    };
    if let Some(handed) = request
        .context
        .as_ref()
        .and_then(|c| c.get("toolCalls"))
        .and_then(Value::as_array)
    {
        return Ok(handed
            .iter()
            .filter_map(|call| {
                Some(Call {
                    tool: call.get("name")?.as_str()?.to_owned(),
                    arguments: call
                        .get("arguments")
                        .and_then(Value::as_object)
                        .cloned()
                        .unwrap_or_default(),
                })
            })
            .collect());
    }
    match scenario {
        "json-schema-ref-no-deref" => Ok(Vec::new()),
        "json-schema-2020-12-preservation" => {
            let focal = tools
                .iter()
                .find(|t| t.name == "json_schema_2020_12_tool")
                .ok_or("the server lists no json_schema_2020_12_tool")?;
            let mut arguments = Map::new();
            arguments.insert("schema".into(), schema_of(focal));
            Ok(vec![Call {
                tool: "json_schema_echo".into(),
                arguments,
            }])
        }
        _ => Ok(tools
            .iter()
            .map(|t| Call {
                tool: t.name.to_string(),
                arguments: args_from_schema(&schema_of(t)),
            })
            .collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, schema: Value) -> Tool {
        serde_json::from_value(json!({"name": name, "inputSchema": schema})).unwrap()
    }

    #[test]
    fn arguments_from_a_schema_fill_required_and_defaulted_properties_only() {
        let schema = json!({"type": "object", "required": ["a", "flag", "mode", "s"], "properties": {
            "a": {"type": "number"}, "name": {"type": "string", "default": "John"},
            "flag": {"type": "boolean"}, "mode": {"enum": ["x", "y"]}, "s": {"type": "string"},
            "verbose": {"type": "boolean"}
        }});
        let got = Value::Object(args_from_schema(&schema));
        assert_eq!(
            got,
            json!({"a": 1, "name": "John", "flag": true, "mode": "x", "s": "test"})
        );
        assert!(args_from_schema(&json!({"type": "object"})).is_empty());
    }

    #[test]
    fn handed_calls_are_made_verbatim_and_take_precedence() {
        let tools = [tool("t", json!({"type": "object"}))];
        let context = json!({"toolCalls": [
            {"name": "t", "arguments": {"verbose": null, "region": " padded "}},
            {"name": "u"}
        ]});
        let got = calls(
            Request {
                scenario: Some("http-custom-headers"),
                context: Some(context),
                ..Default::default()
            },
            &tools,
        )
        .unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(
            Value::Object(got[0].arguments.clone()),
            json!({"verbose": null, "region": " padded "})
        );
        assert_eq!(got[1].tool, "u");
    }

    #[test]
    fn scenario_contracts() {
        let schema = json!({"type": "object", "$defs": {"a": {"$anchor": "x"}}, "allOf": [{}]});
        let tools = [
            tool("json_schema_2020_12_tool", schema.clone()),
            tool("json_schema_echo", json!({"type": "object"})),
        ];
        let request = |scenario| Request {
            scenario: Some(scenario),
            ..Default::default()
        };
        let echo = calls(request("json-schema-2020-12-preservation"), &tools).unwrap();
        assert_eq!(echo[0].tool, "json_schema_echo");
        assert_eq!(echo[0].arguments["schema"], schema);
        assert!(
            calls(request("json-schema-ref-no-deref"), &tools)
                .unwrap()
                .is_empty()
        );
        assert_eq!(calls(request("tools_call"), &tools).unwrap().len(), 2);
        assert!(calls(Request::default(), &tools).unwrap().is_empty());
        let missing = Request {
            tool: Some("nope"),
            ..Default::default()
        };
        assert!(calls(missing, &tools).unwrap_err().contains("nope"));
    }
}
