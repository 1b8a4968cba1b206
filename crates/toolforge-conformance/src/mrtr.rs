//! SEP-2322 multi round-trip requests (MRTR, protocol 2026-07-28): the `test_input_required_result_*`
//! tools and prompt answer with an `InputRequiredResult` until the client's retry carries valid
//! `inputResponses` (and the `requestState` they were given).
//!
//! Every `requestState` is sealed with rmcp's [`RequestStateCodec`] (HMAC-SHA256 with a key drawn
//! at start-up, bound to the tool's name, valid for ten minutes): the fixture keeps no state
//! between rounds, and a state that was altered, forged, expired or replayed against another
//! tool is refused with `-32602`. An input response that is missing or malformed (not an
//! accepted elicitation with the asked field, not a sampling result with text, not a roots
//! list) is asked for again rather than trusted.

use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResult, ClientCapabilities, ContentBlock, GetPromptResult, InputRequest, InputRequests,
    InputRequiredResult, InputResponses, PromptMessage, RequestStateCodec, SealOptions,
};
use serde_json::{Value, json};

use crate::catalog::wire;

/// How long a sealed `requestState` stays valid.
const STATE_TTL: Duration = Duration::from_secs(600);

/// Seals and opens `requestState` values with a per-process key.
#[derive(Clone)]
pub(crate) struct StateSeal {
    codec: RequestStateCodec,
}

impl std::fmt::Debug for StateSeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateSeal")
    }
}

impl StateSeal {
    /// A seal with a fresh random 32-byte key (two v4 UUIDs: 244 random bits).
    pub(crate) fn new() -> Self {
        let mut key = Vec::with_capacity(RequestStateCodec::MIN_KEY_LENGTH);
        key.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
        key.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
        // The key has exactly the minimum length, so the checked constructor cannot fail.
        Self {
            codec: RequestStateCodec::new_unchecked(key),
        }
    }

    fn seal(&self, scope: &str, state: &Value) -> Result<String, McpError> {
        let options = SealOptions::new()
            .associated_data(scope.as_bytes())
            .ttl(STATE_TTL);
        self.codec
            .seal_json_with(state, &options)
            .map_err(|e| McpError::internal_error(format!("cannot seal requestState: {e}"), None))
    }

    /// The state the client echoed, if any; an echoed state that does not open is an error.
    fn open(&self, scope: &str, echoed: Option<&str>) -> Result<Option<Value>, McpError> {
        let Some(echoed) = echoed else {
            return Ok(None);
        };
        self.codec
            .open_json_with(echoed, scope.as_bytes())
            .map(Some)
            .map_err(|e| {
                McpError::invalid_params(
                    format!("requestState failed its integrity check: {e}"),
                    None,
                )
            })
    }
}

/// What a retry brought back: the opened state and the input responses.
struct Round<'a> {
    state: Option<Value>,
    responses: Option<&'a InputResponses>,
}

impl Round<'_> {
    fn state_kind(&self) -> Option<&str> {
        self.state.as_ref()?.get("kind")?.as_str()
    }

    fn response(&self, key: &str) -> Option<&Value> {
        self.responses?.get(key)
    }

    /// The `field` of an accepted elicitation answer to `key`.
    fn elicited(&self, key: &str, field: &str) -> Option<&Value> {
        let answer = self.response(key)?;
        if answer.get("action")?.as_str()? != "accept" {
            return None;
        }
        answer.get("content")?.get(field)
    }

    fn elicited_text(&self, key: &str, field: &str) -> Option<String> {
        self.elicited(key, field)?.as_str().map(str::to_owned)
    }

    /// The text of a sampling answer to `key`.
    fn sampled_text(&self, key: &str) -> Option<String> {
        let content = self.response(key)?.get("content")?;
        let text = match content {
            Value::Array(blocks) => blocks.iter().find_map(|b| b.get("text")),
            block => block.get("text"),
        };
        text?.as_str().map(str::to_owned)
    }

    /// The number of roots in a roots/list answer to `key`.
    fn roots(&self, key: &str) -> Option<usize> {
        Some(self.response(key)?.get("roots")?.as_array()?.len())
    }
}

fn elicit(message: &str, field: &str, kind: &str) -> Result<InputRequest, McpError> {
    wire(
        "elicitation input request",
        json!({"method": "elicitation/create", "params": {
            "mode": "form", "message": message,
            "requestedSchema": {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
        }}),
    )
}

fn sample(prompt: &str, max_tokens: u32) -> Result<InputRequest, McpError> {
    wire(
        "sampling input request",
        json!({"method": "sampling/createMessage", "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
            "maxTokens": max_tokens
        }}),
    )
}

fn list_roots() -> Result<InputRequest, McpError> {
    wire(
        "roots input request",
        json!({"method": "roots/list", "params": {}}),
    )
}

fn requests<const N: usize>(
    items: [(&str, Result<InputRequest, McpError>); N],
) -> Result<InputRequests, McpError> {
    items
        .into_iter()
        .map(|(key, request)| request.map(|r| (key.to_owned(), r)))
        .collect()
}

fn done(text: String) -> MrtrOutcome<CallToolResult> {
    Ok(Ok(CallToolResult::success(vec![ContentBlock::text(text)])))
}

/// `Ok(Ok(result))`: complete; `Ok(Err(input))`: ask the client first; `Err`: refuse.
pub(crate) type MrtrOutcome<T> = Result<Result<T, InputRequiredResult>, McpError>;

impl StateSeal {
    fn ask(
        &self,
        scope: &str,
        requests: InputRequests,
        state: Option<Value>,
    ) -> MrtrOutcome<CallToolResult> {
        let sealed = state.map(|s| self.seal(scope, &s)).transpose()?;
        Ok(Err(InputRequiredResult::new(Some(requests), sealed)))
    }

    /// Runs one round of the MRTR tool `name`, or `None` if `name` is not an MRTR tool.
    pub(crate) fn call_tool(
        &self,
        name: &str,
        responses: Option<&InputResponses>,
        echoed_state: Option<&str>,
        client: Option<&ClientCapabilities>,
    ) -> Option<MrtrOutcome<CallToolResult>> {
        let nonce = || uuid::Uuid::new_v4().to_string();
        let round = match self.open(name, echoed_state) {
            Ok(state) => Round { state, responses },
            Err(refused) => return Some(Err(refused)),
        };
        let outcome = match name {
            "test_input_required_result_elicitation" => match round
                .elicited_text("user_name", "name")
            {
                Some(user) => done(format!("Hello, {user}!")),
                None => requests([("user_name", elicit("What is your name?", "name", "string"))])
                    .and_then(|r| self.ask(name, r, None)),
            },
            "test_input_required_result_sampling" => match round.sampled_text("sample_request") {
                Some(text) => done(format!("Sampling result: {text}")),
                None => requests([(
                    "sample_request",
                    sample("What is the capital of France?", 100),
                )])
                .and_then(|r| self.ask(name, r, None)),
            },
            "test_input_required_result_list_roots" => match round.roots("roots_request") {
                Some(n) => done(format!("Found {n} root(s)")),
                None => requests([("roots_request", list_roots())])
                    .and_then(|r| self.ask(name, r, None)),
            },
            "test_input_required_result_request_state"
            | "test_input_required_result_tampered_state" => {
                let confirmed = round.elicited("confirm", "ok") == Some(&json!(true));
                if round.state_kind() == Some("confirm") && confirmed {
                    done("state-ok: requestState validated".to_owned())
                } else {
                    requests([("confirm", elicit("Please confirm", "ok", "boolean"))]).and_then(
                        |r| self.ask(name, r, Some(json!({"kind": "confirm", "nonce": nonce()}))),
                    )
                }
            }
            "test_input_required_result_multiple_inputs" => {
                let answers = (
                    round.elicited_text("user_name", "name"),
                    round.sampled_text("greeting"),
                    round.roots("client_roots"),
                );
                match answers {
                    (Some(user), Some(greeting), Some(roots))
                        if round.state_kind() == Some("multiple-inputs") =>
                    {
                        done(format!(
                            "Name: {user}; Greeting: {greeting}; Roots: {roots}"
                        ))
                    }
                    _ => requests([
                        ("user_name", elicit("What is your name?", "name", "string")),
                        ("greeting", sample("Generate a greeting", 50)),
                        ("client_roots", list_roots()),
                    ])
                    .and_then(|r| {
                        self.ask(
                            name,
                            r,
                            Some(json!({"kind": "multiple-inputs", "nonce": nonce()})),
                        )
                    }),
                }
            }
            "test_input_required_result_multi_round" => {
                let step = round
                    .state
                    .as_ref()
                    .and_then(|s| s.get("round"))
                    .and_then(Value::as_u64);
                match (
                    step,
                    round.elicited_text("step1", "name"),
                    round.elicited_text("step2", "color"),
                ) {
                    (Some(2), _, Some(color)) => {
                        let user = round
                            .state
                            .as_ref()
                            .and_then(|s| s.get("name"))
                            .and_then(Value::as_str)
                            .unwrap_or("friend");
                        done(format!("Multi-round complete for {user} who likes {color}"))
                    }
                    (Some(1), Some(user), _) => requests([(
                        "step2",
                        elicit("Step 2: What is your favorite color?", "color", "string"),
                    )])
                    .and_then(|r| {
                        self.ask(
                            name,
                            r,
                            Some(json!({"round": 2, "name": user, "nonce": nonce()})),
                        )
                    }),
                    _ => requests([(
                        "step1",
                        elicit("Step 1: What is your name?", "name", "string"),
                    )])
                    .and_then(|r| self.ask(name, r, Some(json!({"round": 1, "nonce": nonce()})))),
                }
            }
            "test_input_required_result_capabilities" => {
                let answered: Vec<&str> = ["elicit_input", "sample_input"]
                    .into_iter()
                    .filter(|k| round.response(k).is_some())
                    .collect();
                if round.state_kind() == Some("capabilities") && !answered.is_empty() {
                    return Some(done(format!(
                        "capabilities-ok: received {}",
                        answered.join(",")
                    )));
                }
                let mut asked = InputRequests::new();
                let caps = client.cloned().unwrap_or_default();
                if caps.elicitation.is_some() {
                    match elicit("Elicitation input", "value", "string") {
                        Ok(r) => asked.insert("elicit_input".to_owned(), r),
                        Err(e) => return Some(Err(e)),
                    };
                }
                if caps.sampling.is_some() {
                    match sample("Sample request", 50) {
                        Ok(r) => asked.insert("sample_input".to_owned(), r),
                        Err(e) => return Some(Err(e)),
                    };
                }
                if asked.is_empty() {
                    done("No supported capabilities declared".to_owned())
                } else {
                    self.ask(
                        name,
                        asked,
                        Some(json!({"kind": "capabilities", "nonce": nonce()})),
                    )
                }
            }
            _ => return None,
        };
        Some(outcome)
    }

    /// One round of `prompts/get` for [`crate::catalog::MRTR_PROMPT`].
    pub(crate) fn get_prompt(
        &self,
        responses: Option<&InputResponses>,
        echoed_state: Option<&str>,
    ) -> MrtrOutcome<GetPromptResult> {
        let scope = crate::catalog::MRTR_PROMPT;
        let round = Round {
            state: self.open(scope, echoed_state)?,
            responses,
        };
        match round.elicited_text("user_context", "context") {
            Some(context) => {
                let message: PromptMessage = wire(
                    "prompt message",
                    json!({"role": "user", "content": {"type": "text", "text": format!("Prompt with context: {context}")}}),
                )?;
                Ok(Ok(GetPromptResult::new(vec![message])))
            }
            None => {
                let asked = requests([(
                    "user_context",
                    elicit("What context should the prompt use?", "context", "string"),
                )])?;
                Ok(Err(InputRequiredResult::from_input_requests(asked)))
            }
        }
    }
}
