//! The `ServerHandler`: answers each request from the literal catalog in `catalog`, and drives
//! the server-to-client traffic some scenarios need inside a tool call (log messages, progress,
//! sampling and elicitation requests). One handler serves both protocol eras: sessions opened
//! with `initialize` (2025-11-25 and earlier) and self-contained 2026-07-28 requests, whose
//! MRTR tools live in `mrtr` and whose `subscriptions/listen` streams live in `listen`.
//!
//! Results are built with rmcp's constructors (`GetPromptResult::new`, `with_all_items`, ...),
//! never deserialized whole from JSON: the constructors mark a result `resultType: "complete"`,
//! which 2026-07-28 requires and rmcp strips again for older peers.
//!
//! Written by hand rather than with the `#[tool]` macros because several tools need schemas the
//! macros cannot express (the 2020-12 tool keeps `$defs` and `additionalProperties: false`).

// Logging, sampling and elicitation are deprecated in rmcp for protocol 2026-07-28 (SEP-2577),
// but the conformance suite speaks 2025-11-25, where they are required.
#![allow(deprecated)]

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    CompleteRequestParams, CompleteResult, CompletionInfo, ContentBlock,
    CreateMessageRequestParams, ElicitRequestParams, GetPromptRequestParams, GetPromptResponse,
    GetPromptResult, GetSkillRequestParams, GetSkillResult, GetTaskParams, GetTaskResult,
    Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListSkillsResult, ListToolsResult, LoggingMessageNotificationParam, PaginatedRequestParams,
    ProgressNotificationParam, ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, SKILLS_EXTENSION_ID,
    ServerCapabilities, ServerConfig, SetLevelRequestParams, SubscribeRequestParams,
    SubscriptionFilter, TASKS_EXTENSION_ID, Tool, UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::catalog::{self, wire};
use crate::eras;
use crate::listen::{ListChange, Listeners};
use crate::mrtr::StateSeal;
use crate::skills;
use crate::tasks::Tasks;

/// The conformance fixture. Clones share the key that seals MRTR `requestState`, the open
/// `subscriptions/listen` streams and the tasks (`tasks`); nothing else is kept between
/// requests.
#[derive(Debug, Clone)]
pub struct Fixture {
    seal: StateSeal,
    listeners: Listeners,
    tasks: Tasks,
}

impl Fixture {
    /// A fixture with a fresh `requestState` key and no open streams.
    pub fn new() -> Self {
        Self {
            seal: StateSeal::new(),
            listeners: Listeners::default(),
            tasks: Tasks::default(),
        }
    }
}

impl Default for Fixture {
    fn default() -> Self {
        Self::new()
    }
}

fn peer_error(what: &str, e: impl std::fmt::Display) -> McpError {
    McpError::internal_error(format!("{what} failed: {e}"), None)
}

fn text(s: impl Into<String>) -> ContentBlock {
    ContentBlock::text(s)
}

fn string_arg(req: &CallToolRequestParams, name: &str) -> Result<String, McpError> {
    req.arguments
        .as_ref()
        .and_then(|a| a.get(name))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| McpError::invalid_params(format!("missing string argument `{name}`"), None))
}

impl Fixture {
    async fn log(
        &self,
        ctx: &RequestContext<RoleServer>,
        level: &str,
        data: Value,
    ) -> Result<(), McpError> {
        let param: LoggingMessageNotificationParam = wire(
            "log message",
            json!({"level": level, "logger": "conformance-fixture", "data": data}),
        )?;
        ctx.peer
            .notify_logging_message(param)
            .await
            .map_err(|e| peer_error("notifications/message", e))
    }

    async fn elicit(
        &self,
        ctx: &RequestContext<RoleServer>,
        message: &str,
        schema: Value,
    ) -> Result<CallToolResult, McpError> {
        let params: ElicitRequestParams = wire(
            "elicitation request",
            json!({"mode": "form", "message": message, "requestedSchema": schema}),
        )?;
        let answer = ctx
            .peer
            .create_elicitation(params)
            .await
            .map_err(|e| peer_error("elicitation/create", e))?;
        let answer = serde_json::to_value(&answer).map_err(|e| peer_error("encoding", e))?;
        Ok(eras::elicited(&answer))
    }

    async fn call(
        &self,
        req: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if let Some(answer) = self.tasks.call(&req, &ctx) {
            return answer;
        }
        let caps = ctx.client_capabilities();
        let modern = eras::is_modern(&ctx);
        if let Some(outcome) = self.seal.call_tool(
            &req.name,
            req.input_responses.as_ref(),
            req.request_state.as_deref(),
            caps.as_ref(),
        ) {
            return match outcome? {
                Ok(done) => Ok(CallToolResponse::Complete(done)),
                Err(asked) if modern => Ok(CallToolResponse::InputRequired(asked)),
                // A handshake-era client is asked mid-call, round after round.
                Err(asked) => self
                    .rounds_on_session(&req.name, &ctx, asked, caps.as_ref())
                    .await
                    .map(CallToolResponse::Complete),
            };
        }
        if modern && let Some(needs) = eras::Needs::of(&req.name, req.arguments.as_ref()) {
            return needs
                .round(req.input_responses.as_ref(), caps.as_ref())
                .map(|o| {
                    o.map_or_else(CallToolResponse::InputRequired, CallToolResponse::Complete)
                });
        }
        let complete = |r: CallToolResult| Ok(CallToolResponse::Complete(r));
        match req.name.as_ref() {
            "test_missing_capability" => {
                if caps.as_ref().is_some_and(|c| c.sampling.is_some()) {
                    complete(CallToolResult::success(vec![text("Success")]))
                } else {
                    let sampling: ClientCapabilities =
                        wire("capabilities", json!({"sampling": {}}))?;
                    Err(McpError::missing_required_client_capability(sampling))
                }
            }
            "test_streaming_elicitation" => {
                if let Some(token) = ctx.meta.get_progress_token() {
                    let param: ProgressNotificationParam = wire(
                        "progress",
                        json!({"progressToken": token, "progress": 50.0, "total": 100.0}),
                    )?;
                    ctx.peer
                        .notify_progress(param)
                        .await
                        .map_err(|e| peer_error("notifications/progress", e))?;
                }
                complete(CallToolResult::success(vec![text("Streaming complete")]))
            }
            "test_logging_tool" => {
                // 2026-07-28: a request that sets no log level gets no log messages.
                if ctx.meta.log_level().is_some() {
                    self.log(&ctx, "info", json!("Diagnostic trace logging activated"))
                        .await?;
                }
                complete(CallToolResult::success(vec![text("Logging evaluated")]))
            }
            "test_trigger_tool_change" | "test_trigger_prompt_change" => {
                let change = if req.name == "test_trigger_tool_change" {
                    ListChange::Tools
                } else {
                    ListChange::Prompts
                };
                let n = self.listeners.notify(change).await;
                complete(CallToolResult::success(vec![text(format!(
                    "Mutation triggered: {n} stream(s) notified"
                ))]))
            }
            "slow_compute" => complete(Tasks::sync_slow_compute(&req).await?),
            catalog::TEST_CUSTOM_HEADER => {
                let region = string_arg(&req, "region")?;
                complete(CallToolResult::success(vec![text(format!(
                    "Region: {region}"
                ))]))
            }
            _ => self
                .call_legacy(req, ctx)
                .await
                .map(CallToolResponse::Complete),
        }
    }

    /// Drives an MRTR tool for a handshake-era client: each round's requests asked on the
    /// call's stream, the answers fed back, until it completes.
    async fn rounds_on_session(
        &self,
        name: &str,
        ctx: &RequestContext<RoleServer>,
        mut asked: rmcp::model::InputRequiredResult,
        caps: Option<&ClientCapabilities>,
    ) -> Result<CallToolResult, McpError> {
        for _ in 0..eras::MAX_ROUNDS {
            let requests = asked.input_requests.take().unwrap_or_default();
            let responses = eras::ask_peer(ctx, requests).await?;
            let state = asked.request_state.take();
            match self
                .seal
                .call_tool(name, Some(&responses), state.as_deref(), caps)
            {
                Some(Ok(Ok(done))) => return Ok(done),
                Some(Ok(Err(again))) => asked = again,
                Some(Err(refused)) => return Err(refused),
                None => break,
            }
        }
        Err(McpError::internal_error(
            format!(
                "{name} still asked for input after {} rounds",
                eras::MAX_ROUNDS
            ),
            None,
        ))
    }

    async fn call_legacy(
        &self,
        req: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let embedded = || -> Result<ContentBlock, McpError> {
            wire(
                "embedded resource",
                json!({"type": "resource", "resource": {
                    "uri": "test://embedded-resource", "mimeType": "text/plain",
                    "text": "This is an embedded resource content."}}),
            )
        };
        match req.name.as_ref() {
            "test_simple_text" => Ok(CallToolResult::success(vec![text(
                "This is a simple text response for testing.",
            )])),
            "test_image_content" => Ok(CallToolResult::success(vec![ContentBlock::image(
                catalog::PNG_BASE64,
                "image/png",
            )])),
            "test_audio_content" => Ok(CallToolResult::success(vec![ContentBlock::audio(
                catalog::WAV_BASE64,
                "audio/wav",
            )])),
            "test_embedded_resource" => Ok(CallToolResult::success(vec![embedded()?])),
            "test_multiple_content_types" => Ok(CallToolResult::success(vec![
                text("Multiple content types test:"),
                ContentBlock::image(catalog::PNG_BASE64, "image/png"),
                wire(
                    "embedded resource",
                    json!({"type": "resource", "resource": {
                        "uri": "test://mixed-content-resource", "mimeType": "application/json",
                        "text": "{\"test\":\"data\",\"value\":123}"}}),
                )?,
            ])),
            "test_tool_with_logging" => {
                self.log(&ctx, "info", json!("Tool execution started"))
                    .await?;
                tokio::time::sleep(Duration::from_millis(50)).await;
                self.log(&ctx, "info", json!("Tool processing data"))
                    .await?;
                tokio::time::sleep(Duration::from_millis(50)).await;
                self.log(&ctx, "info", json!("Tool execution completed"))
                    .await?;
                Ok(CallToolResult::success(vec![text(
                    "Tool with logging executed successfully",
                )]))
            }
            "test_tool_with_progress" => {
                if let Some(token) = ctx.meta.get_progress_token() {
                    for (i, p) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                        if i > 0 {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        let param: ProgressNotificationParam = wire(
                            "progress",
                            json!({"progressToken": token, "progress": p, "total": 100.0,
                                   "message": format!("Completed step {p} of 100")}),
                        )?;
                        ctx.peer
                            .notify_progress(param)
                            .await
                            .map_err(|e| peer_error("notifications/progress", e))?;
                    }
                }
                Ok(CallToolResult::success(vec![text(
                    "Tool with progress executed successfully",
                )]))
            }
            "test_error_handling" => Ok(CallToolResult::error(vec![text(
                "This tool intentionally returns an error for testing",
            )])),
            "test_sampling" => {
                let prompt = string_arg(&req, "prompt")?;
                let params: CreateMessageRequestParams = wire(
                    "sampling request",
                    json!({"messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
                           "maxTokens": 100}),
                )?;
                let answer = ctx
                    .peer
                    .create_message(params)
                    .await
                    .map_err(|e| peer_error("sampling/createMessage", e))?;
                let answer =
                    serde_json::to_value(&answer).map_err(|e| peer_error("encoding", e))?;
                Ok(eras::sampled(&answer))
            }
            "test_elicitation" => {
                let message = string_arg(&req, "message")?;
                self.elicit(&ctx, &message, catalog::user_schema()).await
            }
            "test_elicitation_sep1034_defaults" => {
                self.elicit(
                    &ctx,
                    "Please review and update the form fields with defaults",
                    catalog::sep1034_schema(),
                )
                .await
            }
            "test_elicitation_sep1330_enums" => {
                self.elicit(
                    &ctx,
                    "Please select options from the enum fields",
                    catalog::sep1330_schema(),
                )
                .await
            }
            "json_schema_2020_12_tool" => Ok(CallToolResult::success(vec![text(format!(
                "JSON Schema 2020-12 tool called with: {}",
                req.arguments.map(Value::Object).unwrap_or_default()
            ))])),
            "test_reconnection" => {
                // The pending `server-sse-polling` scenario wants the POST stream closed
                // here and the result replayed on a GET reconnect; rmcp 3.9 gives a handler
                // no way to reach its own stream, so the result arrives on the POST stream.
                tokio::time::sleep(Duration::from_millis(100)).await;
                Ok(CallToolResult::success(vec![text(
                    "Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure.",
                )]))
            }
            other => Err(McpError::invalid_params(
                format!("tool not found: {other}"),
                None,
            )),
        }
    }

    fn read(&self, uri: &str) -> Result<ReadResourceResult, McpError> {
        let contents = match uri {
            catalog::STATIC_TEXT_URI => json!({"uri": uri, "mimeType": "text/plain",
                "text": "This is the content of the static text resource."}),
            catalog::STATIC_BINARY_URI => {
                json!({"uri": uri, "mimeType": "image/png", "blob": catalog::PNG_BASE64})
            }
            catalog::WATCHED_URI => json!({"uri": uri, "mimeType": "text/plain",
                "text": "Watched resource content"}),
            _ if uri.starts_with("skill://") => {
                return skills::skills()?.read(uri).ok_or_else(|| {
                    McpError::resource_not_found(
                        format!("no resource at {uri}"),
                        Some(json!({"uri": uri})),
                    )
                });
            }
            _ => {
                let id = uri
                    .strip_prefix("test://template/")
                    .and_then(|rest| rest.strip_suffix("/data"))
                    .filter(|id| !id.is_empty() && !id.contains('/'));
                let Some(id) = id else {
                    return Err(McpError::resource_not_found(
                        format!("no resource at {uri}"),
                        Some(json!({"uri": uri})),
                    ));
                };
                let body =
                    json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
                json!({"uri": uri, "mimeType": "application/json", "text": body.to_string()})
            }
        };
        Ok(ReadResourceResult::new(vec![wire(
            "resource contents",
            contents,
        )?]))
    }

    fn prompt(&self, req: &GetPromptRequestParams) -> Result<GetPromptResponse, McpError> {
        if req.name == catalog::MRTR_PROMPT {
            return self
                .seal
                .get_prompt(req.input_responses.as_ref(), req.request_state.as_deref())
                .map(|o| {
                    o.map_or_else(
                        GetPromptResponse::InputRequired,
                        GetPromptResponse::Complete,
                    )
                });
        }
        let arg = |name: &str| -> Result<String, McpError> {
            req.arguments
                .as_ref()
                .and_then(|a| a.get(name))
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| {
                    McpError::invalid_params(format!("missing prompt argument `{name}`"), None)
                })
        };
        let user = |content: Value| json!({"role": "user", "content": content});
        let value = match req.name.as_ref() {
            "test_simple_prompt" => json!({"messages": [
                user(json!({"type": "text", "text": "This is a simple prompt for testing."}))]}),
            "test_prompt_with_arguments" => {
                let (a1, a2) = (arg("arg1")?, arg("arg2")?);
                json!({"messages": [user(json!({"type": "text",
                    "text": format!("Prompt with arguments: arg1='{a1}', arg2='{a2}'")}))]})
            }
            "test_prompt_with_embedded_resource" => {
                let uri = arg("resourceUri")?;
                json!({"messages": [
                    user(json!({"type": "resource", "resource": {"uri": uri, "mimeType": "text/plain",
                        "text": "Embedded resource content for testing."}})),
                    user(json!({"type": "text", "text": "Please process the embedded resource above."}))]})
            }
            "test_prompt_with_image" => json!({"messages": [
                user(json!({"type": "image", "data": catalog::PNG_BASE64, "mimeType": "image/png"})),
                user(json!({"type": "text", "text": "Please analyze the image above."}))]}),
            other => {
                return Err(McpError::invalid_params(
                    format!("prompt not found: {other}"),
                    None,
                ));
            }
        };
        let messages = value.get("messages").cloned().unwrap_or_default();
        Ok(GetPromptResponse::Complete(GetPromptResult::new(wire(
            "prompt messages",
            messages,
        )?)))
    }
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        let caps: ServerCapabilities = serde_json::from_value(json!({
            "tools": {"listChanged": true}, "resources": {"subscribe": true},
            "prompts": {"listChanged": true},
            "logging": {}, "completions": {},
            "extensions": {
                SKILLS_EXTENSION_ID: {"directoryRead": true},
                TASKS_EXTENSION_ID: {}
            }
        }))
        .unwrap_or_default();
        ServerConfig::new(caps)
            .with_server_info(Implementation::new(
                "toolforge-conformance-fixture",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions("The fixture the MCP conformance suite's server scenarios expect.")
    }

    async fn list_tools(
        &self,
        _req: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let mut tools: Vec<Tool> = wire("tools", catalog::tools())?;
        tools.extend(wire::<Vec<Tool>>("task tools", crate::tasks::tools())?);
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        req: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.call(req, ctx).await
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        let (tools, task_tools) = (catalog::tools(), crate::tasks::tools());
        let tool = (tools.as_array()?.iter())
            .chain(task_tools.as_array()?.iter())
            .find(|t| t["name"] == name)?;
        serde_json::from_value(tool.clone()).ok()
    }

    async fn get_task(
        &self,
        req: GetTaskParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        self.tasks.get(&req)
    }

    async fn update_task(
        &self,
        req: UpdateTaskParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks.update(req)
    }

    async fn cancel_task(
        &self,
        req: CancelTaskParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks.cancel(&req)
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(crate::listen::offered())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        self.listeners.hold(context).await;
        Ok(())
    }

    async fn list_resources(
        &self,
        _req: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let mut resources: Vec<rmcp::model::Resource> = wire("resources", catalog::resources())?;
        resources.extend_from_slice(skills::skills()?.resources());
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_skills(
        &self,
        req: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, McpError> {
        skills::skills()?.list(req.as_ref().and_then(|r| r.cursor.as_deref()))
    }

    async fn get_skill(
        &self,
        req: GetSkillRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, McpError> {
        skills::skills()?.get(&req.uri)
    }

    async fn read_resource_directory(
        &self,
        req: ReadResourceDirectoryRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, McpError> {
        skills::skills()?.directory(&req.uri, req.cursor.as_deref())
    }

    async fn list_resource_templates(
        &self,
        _req: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(wire(
            "templates",
            catalog::resource_templates(),
        )?))
    }

    async fn read_resource(
        &self,
        req: ReadResourceRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        self.read(&req.uri).map(ReadResourceResponse::Complete)
    }

    async fn subscribe(
        &self,
        req: SubscribeRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.read(&req.uri).map(|_| ())
    }

    async fn unsubscribe(
        &self,
        _req: UnsubscribeRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }

    async fn list_prompts(
        &self,
        _req: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Ok(ListPromptsResult::with_all_items(wire(
            "prompts",
            catalog::prompts(),
        )?))
    }

    async fn get_prompt(
        &self,
        mut req: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let mut answer = self.prompt(&req)?;
        // A handshake-era client is asked mid-call for what the prompt needs.
        for _ in 0..eras::MAX_ROUNDS {
            let GetPromptResponse::InputRequired(asked) = answer else {
                return Ok(answer);
            };
            if eras::is_modern(&ctx) {
                return Ok(GetPromptResponse::InputRequired(asked));
            }
            let requests = asked.input_requests.unwrap_or_default();
            req.input_responses = Some(eras::ask_peer(&ctx, requests).await?);
            req.request_state = asked.request_state;
            answer = self.prompt(&req)?;
        }
        Err(McpError::internal_error(
            format!(
                "{} still asked for input after {} rounds",
                req.name,
                eras::MAX_ROUNDS
            ),
            None,
        ))
    }

    async fn complete(
        &self,
        req: CompleteRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let req = serde_json::to_value(&req).map_err(|e| peer_error("encoding", e))?;
        let is_arg1 = req.pointer("/ref/type") == Some(&json!("ref/prompt"))
            && req.pointer("/ref/name") == Some(&json!("test_prompt_with_arguments"))
            && req.pointer("/argument/name") == Some(&json!("arg1"));
        let values: Vec<&str> = if is_arg1 {
            let prefix = req
                .pointer("/argument/value")
                .and_then(Value::as_str)
                .unwrap_or("");
            catalog::ARG1_COMPLETIONS
                .iter()
                .copied()
                .filter(|v| v.starts_with(prefix))
                .collect()
        } else {
            Vec::new()
        };
        let info: CompletionInfo = wire(
            "completion",
            json!({"values": values, "total": values.len(), "hasMore": false}),
        )?;
        Ok(CompleteResult::new(info))
    }

    async fn set_level(
        &self,
        _req: SetLevelRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }
}
