//! Resources: routed by URI, shown by visibility, read with MRTR rounds, and subscribed to.

use std::collections::HashSet;

use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ResultType, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::Value;

use crate::subscriptions::TooMany;

use super::calls::NextRound;
use crate::uri_template::template_matches;

use super::{Gateway, START_GRACE, START_WAIT_FOR_CALL, Shared};
use crate::error::not_found;

impl Shared {
    pub(super) fn resource_server(&self, uri: &str) -> Option<String> {
        if let Some((server, _)) = self
            .pool
            .resources()
            .into_iter()
            .find(|(_, r)| crate::resource_uri::same_uri(&r.uri, uri))
        {
            return Some(server);
        }
        if let Some((server, _)) = self
            .pool
            .resource_templates()
            .into_iter()
            .find(|(_, t)| template_matches(&t.uri_template, uri))
        {
            return Some(server);
        }
        // One server offers resources at all: it is the only place the URI can live.
        let with_resources: Vec<String> = self
            .pool
            .capabilities()
            .into_iter()
            .filter(|(_, c)| c.resources.is_some())
            .map(|(s, _)| s)
            .collect();
        (with_resources.len() == 1).then(|| with_resources[0].clone())
    }
}

impl Gateway {
    /// Whether the policy lets this request's principal read the resource (or template) `uri`
    /// of `server`.
    fn permits_read(&self, ctx: &RequestContext<RoleServer>, server: &str, uri: &str) -> bool {
        let channels = crate::visible::session_channels(&self.session_query, ctx);
        self.shared.visibility.permits(
            &channels,
            toolforge_policy::Action::Read,
            toolforge_policy::Target::Resource { server, uri },
        )
    }

    /// The server holding `uri` (a resource's URI, or a template's URI template), if this
    /// request may see it: as the listed resource with that URI, else as a template it is or
    /// matches, else by the URI alone on the one server that can hold it.
    pub(super) fn visible_resource_server(
        &self,
        ctx: &RequestContext<RoleServer>,
        uri: &str,
    ) -> Result<String, McpError> {
        crate::resource_uri::bounded_uri(uri)?;
        // A completion names a template by its URI template.
        let server = self
            .shared
            .pool
            .resource_templates()
            .into_iter()
            .find(|(_, t)| t.uri_template == uri)
            .map(|(server, _)| server)
            .or_else(|| self.shared.resource_server(uri))
            .ok_or_else(|| not_found("resource", uri))?;
        let channels = crate::visible::session_channels(&self.session_query, ctx);
        let config = &self.shared.visibility;
        if config.is_open() && channels.is_empty() {
            return Ok(server);
        }
        let mut names = vec![uri.to_owned()];
        let mut item = Value::Null;
        if let Some((_, r)) = self
            .shared
            .pool
            .resources()
            .into_iter()
            .find(|(s, r)| *s == server && crate::resource_uri::same_uri(&r.uri, uri))
        {
            names.push(r.name.clone());
            item = serde_json::to_value(&r).unwrap_or_default();
        } else if let Some((_, t)) =
            self.shared
                .pool
                .resource_templates()
                .into_iter()
                .find(|(s, t)| {
                    *s == server
                        && (t.uri_template == uri || template_matches(&t.uri_template, uri))
                })
        {
            names.extend([t.uri_template.clone(), t.name.clone()]);
            item = serde_json::to_value(&t).unwrap_or_default();
        }
        let tags = self.shared.server_tags();
        let server_tags = tags.get(&server).map_or(&[][..], Vec::as_slice);
        let resource = crate::visible::component(&server, names, &item, server_tags);
        let target = toolforge_policy::Target::Resource {
            server: &server,
            uri,
        };
        if config.shows(&resource, &channels)
            && config.permits(&channels, toolforge_policy::Action::Read, target)
        {
            Ok(server)
        } else {
            Err(not_found("resource", uri))
        }
    }

    pub(super) async fn serve_list_resources(
        &self,
        _req: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        self.shared.pool.settled(START_GRACE).await;
        let mut seen = HashSet::new();
        let listed = self.shared.pool.resources();
        let items = self
            .shown_components(&ctx, listed, |r| vec![r.uri.clone(), r.name.clone()])
            .into_iter()
            .filter(|(server, r)| self.permits_read(&ctx, server, &r.uri))
            .filter(|(_, r)| seen.insert(r.uri.clone()))
            .map(|(_, r)| r)
            .collect();
        let hints = self.cache_hints(&crate::visible::session_channels(&self.session_query, &ctx));
        Ok(hints.apply(ListResourcesResult::with_all_items(items)))
    }

    pub(super) async fn serve_list_resource_templates(
        &self,
        _req: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        self.shared.pool.settled(START_GRACE).await;
        let listed = self.shared.pool.resource_templates();
        let items = self
            .shown_components(&ctx, listed, |t| {
                vec![t.uri_template.clone(), t.name.clone()]
            })
            .into_iter()
            .filter(|(server, t)| self.permits_read(&ctx, server, &t.uri_template))
            .map(|(_, t)| t)
            .collect();
        let hints = self.cache_hints(&crate::visible::session_channels(&self.session_query, &ctx));
        Ok(hints.apply(ListResourceTemplatesResult::with_all_items(items)))
    }

    pub(super) async fn serve_read_resource(
        &self,
        mut req: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        req.uri = crate::resource_uri::normalised_uri(&req.uri)?;
        let server = match self.visible_resource_server(&ctx, &req.uri) {
            Err(_) if self.shared.pool.starting() => {
                self.shared.pool.settled(START_WAIT_FOR_CALL).await;
                self.visible_resource_server(&ctx, &req.uri)?
            }
            found => found?,
        };
        let key = format!("resources/read:{}", req.uri);
        if let Some(sealed) = req.request_state.take() {
            req.request_state = self.reopened(&ctx, &key, &sealed, &server).await?;
        }
        let mut rounds = 0;
        loop {
            match self
                .shared
                .pool
                .read_resource(&server, req.clone(), Some(&self.caller(&ctx)))
                .await
            {
                Ok(mut r) => {
                    r.result_type.get_or_insert(ResultType::COMPLETE);
                    return Ok(ReadResourceResponse::Complete(r));
                }
                Err(toolforge_mcp::CallError::InputRequired { result, .. }) => {
                    match self
                        .input_required(&ctx, &key, (&server, &req.uri), *result, &mut rounds)
                        .await?
                    {
                        NextRound::Relay(r) => return Ok(ReadResourceResponse::InputRequired(r)),
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

    pub(super) async fn serve_subscribe(
        &self,
        mut req: SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        req.uri = crate::resource_uri::normalised_uri(&req.uri)?;
        let server = self.visible_resource_server(&ctx, &req.uri)?;
        // Only what the backend offers: a listed resource, or a URI one of its templates
        // matches (the server a bare URI would fall back to does not count).
        let offered = self
            .shared
            .pool
            .resources()
            .iter()
            .any(|(s, r)| *s == server && crate::resource_uri::same_uri(&r.uri, &req.uri))
            || self
                .shared
                .pool
                .resource_templates()
                .iter()
                .any(|(s, t)| *s == server && template_matches(&t.uri_template, &req.uri));
        if !offered {
            return Err(not_found("resource", &req.uri));
        }
        let added = self
            .shared
            .subscriptions
            .lock()
            .subscribe(&req.uri, self.session, ctx.peer.clone())
            .map_err(|refused: TooMany| McpError::invalid_params(refused.to_string(), None))?;
        if let Err(e) = self.shared.pool.subscribe(&server, &req.uri).await {
            if added {
                self.shared
                    .subscriptions
                    .lock()
                    .unsubscribe(&req.uri, self.session);
            }
            return Err(e.to_mcp());
        }
        Ok(())
    }

    pub(super) async fn serve_unsubscribe(
        &self,
        mut req: UnsubscribeRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        req.uri = crate::resource_uri::normalised_uri(&req.uri)?;
        // Nothing is kept for a URI this session was not subscribed to.
        let last = self
            .shared
            .subscriptions
            .lock()
            .unsubscribe(&req.uri, self.session);
        if last == Some(true)
            && let Some(server) = self.shared.resource_server(&req.uri)
        {
            self.shared
                .pool
                .unsubscribe(&server, &req.uri)
                .await
                .map_err(|e| e.to_mcp())?;
        }
        Ok(())
    }
}
