//! Prompts and completions: the first server in configuration order wins a prompt name, the
//! others stay reachable as `server__prompt`.

use std::collections::HashSet;

use rmcp::model::{
    CompleteRequestParams, CompleteResult, GetPromptRequestParams, GetPromptResponse,
    ListPromptsResult, PaginatedRequestParams, Prompt, ResultType,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::Value;

use toolforge_select::presentation::SEP;

use super::calls::NextRound;
use super::{Gateway, START_GRACE, START_WAIT_FOR_CALL, Shared};
use crate::error::not_found;

impl Shared {
    /// Prompts as exposed: first server wins a name, the others are `server__name`.
    pub(super) fn prompt_table(&self) -> Vec<(String, String, Prompt)> {
        let mut seen = HashSet::new();
        self.pool
            .prompts()
            .into_iter()
            .map(|(server, prompt)| {
                let exposed = if seen.insert(prompt.name.clone()) {
                    prompt.name.clone()
                } else {
                    format!("{server}{SEP}{}", prompt.name)
                };
                (exposed, server, prompt)
            })
            .collect()
    }
}

impl Gateway {
    /// Whether the policy lets this request's principal get the prompt `server/name` (the
    /// server's own name).
    fn permits_prompt(&self, ctx: &RequestContext<RoleServer>, server: &str, name: &str) -> bool {
        let channels = crate::visible::session_channels(&self.session_query, ctx);
        self.shared.visibility.permits(
            &channels,
            toolforge_policy::Action::Prompt,
            toolforge_policy::Target::Prompt { server, name },
        )
    }

    /// The visible prompt exposed as `name`: its server and the prompt as that server names it.
    pub(super) fn visible_prompt(
        &self,
        ctx: &RequestContext<RoleServer>,
        name: &str,
    ) -> Result<(String, Prompt), McpError> {
        let table = self
            .shared
            .prompt_table()
            .into_iter()
            .filter(|(exposed, _, _)| exposed == name)
            .map(|(exposed, server, prompt)| (server, (exposed, prompt)))
            .collect();
        self.shown_components(ctx, table, |(exposed, prompt)| {
            vec![exposed.clone(), prompt.name.clone()]
        })
        .into_iter()
        .find(|(server, (_, p))| self.permits_prompt(ctx, server, &p.name))
        .map(|(server, (_, prompt))| (server, prompt))
        .ok_or_else(|| not_found("prompt", name))
    }

    pub(super) async fn serve_list_prompts(
        &self,
        _req: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        self.shared.pool.settled(START_GRACE).await;
        let table = self
            .shared
            .prompt_table()
            .into_iter()
            .map(|(exposed, server, prompt)| (server, (exposed, prompt)))
            .collect();
        let items = self
            .shown_components(&ctx, table, |(exposed, prompt)| {
                vec![exposed.clone(), prompt.name.clone()]
            })
            .into_iter()
            .filter(|(server, (_, p))| self.permits_prompt(&ctx, server, &p.name))
            .map(|(_, (exposed, mut p))| {
                p.name = exposed;
                p
            })
            .collect();
        let hints = self.cache_hints(&crate::visible::session_channels(&self.session_query, &ctx));
        Ok(hints.apply(ListPromptsResult::with_all_items(items)))
    }

    pub(super) async fn serve_get_prompt(
        &self,
        mut req: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let exposed = req.name.clone();
        let (server, prompt) = match self.visible_prompt(&ctx, &exposed) {
            Err(_) if self.shared.pool.starting() => {
                self.shared.pool.settled(START_WAIT_FOR_CALL).await;
                self.visible_prompt(&ctx, &exposed)?
            }
            found => found?,
        };
        let key = format!("prompts/get:{exposed}");
        if let Some(sealed) = req.request_state.take() {
            req.request_state = self.reopened(&ctx, &key, &sealed, &server).await?;
        }
        req.name = prompt.name;
        let mut rounds = 0;
        loop {
            match self
                .shared
                .pool
                .get_prompt(&server, req.clone(), Some(&self.caller(&ctx)))
                .await
            {
                Ok(mut r) => {
                    r.result_type.get_or_insert(ResultType::COMPLETE);
                    return Ok(GetPromptResponse::Complete(r));
                }
                Err(toolforge_mcp::CallError::InputRequired { result, .. }) => {
                    match self
                        .input_required(&ctx, &key, (&server, &req.name), *result, &mut rounds)
                        .await?
                    {
                        NextRound::Relay(r) => return Ok(GetPromptResponse::InputRequired(r)),
                        NextRound::Retry { responses, state } => {
                            req.input_responses = Some(responses);
                            req.request_state = state;
                        }
                    }
                }
                Err(e) => return Err(e.to_mcp()),
            }
        }
    }

    pub(super) async fn serve_complete(
        &self,
        req: CompleteRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let v = serde_json::to_value(&req).unwrap_or(Value::Null);
        let kind = v.pointer("/ref/type").and_then(Value::as_str).unwrap_or("");
        let (server, req) = match kind {
            "ref/prompt" => {
                let name = v.pointer("/ref/name").and_then(Value::as_str).unwrap_or("");
                let (server, prompt) = self.visible_prompt(&ctx, name)?;
                let mut v = v.clone();
                v["ref"]["name"] = Value::String(prompt.name);
                let req: CompleteRequestParams = serde_json::from_value(v)
                    .map_err(|e| McpError::invalid_params(e.to_string(), None))?;
                (server, req)
            }
            "ref/resource" => {
                let uri = v.pointer("/ref/uri").and_then(Value::as_str).unwrap_or("");
                (self.visible_resource_server(&ctx, uri)?, req)
            }
            other => {
                return Err(McpError::invalid_params(
                    format!("unknown completion reference type: {other}"),
                    None,
                ));
            }
        };
        self.shared
            .pool
            .complete(&server, req)
            .await
            .map(|mut r| {
                r.result_type.get_or_insert(ResultType::COMPLETE);
                r
            })
            .map_err(|e| e.to_mcp())
    }
}
