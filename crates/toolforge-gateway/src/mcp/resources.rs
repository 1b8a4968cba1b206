//! Resources: routed by URI, shown by visibility, read with MRTR rounds, and subscribed to. A
//! `ui://` URI (MCP Apps) goes where `apps` says: a rewritten URI to its server's own copy.

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
    /// Where a client's `ui://` URI lives (`apps`): the server, and the URI that server reads.
    pub(super) fn app_target(&self, uri: &str) -> Option<(String, String)> {
        if !toolforge_select::apps::is_ui_uri(uri) {
            return None;
        }
        self.app_uris()
            .target(uri)
            .map(|(server, original)| (server.to_owned(), original.to_owned()))
    }

    /// The URI a client sees for `server`'s `uri` (a `ui://` URI another server holds first
    /// is rewritten, `apps`).
    pub(super) fn exposed_uri(&self, server: &str, uri: &str) -> String {
        if !toolforge_select::apps::is_ui_uri(uri) {
            return uri.to_owned();
        }
        self.app_uris()
            .exposed(server, uri)
            .map_or_else(|| uri.to_owned(), str::to_owned)
    }

    pub(super) fn resource_server(&self, uri: &str) -> Option<String> {
        if let Some((server, _)) = self.app_target(uri) {
            return Some(server);
        }
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

/// Contents read at `backend` as the client named them (`exposed`).
fn answered_as(contents: &mut rmcp::model::ResourceContents, backend: &str, exposed: &str) {
    use rmcp::model::ResourceContents as C;
    let uri = match contents {
        C::TextResourceContents { uri, .. } | C::BlobResourceContents { uri, .. } => uri,
        _ => return,
    };
    if crate::resource_uri::same_uri(
        uri,
        &crate::resource_uri::normalise(backend).unwrap_or_default(),
    ) || uri == backend
    {
        exposed.clone_into(uri);
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
        let app = self.shared.app_target(uri);
        // A completion names a template by its URI template.
        let server = match &app {
            Some((server, _)) => Some(server.clone()),
            None => self
                .shared
                .pool
                .resource_templates()
                .into_iter()
                .find(|(_, t)| t.uri_template == uri)
                .map(|(server, _)| server)
                .or_else(|| self.shared.resource_server(uri)),
        }
        .ok_or_else(|| not_found("resource", uri))?;
        // What the backend reads (a rewritten app URI's original): what policy decides on.
        let backend = app.map_or_else(|| uri.to_owned(), |(_, original)| original);
        let channels = crate::visible::session_channels(&self.session_query, ctx);
        let config = &self.shared.visibility;
        if config.is_open() && channels.is_empty() {
            return Ok(server);
        }
        let mut names = vec![uri.to_owned()];
        if backend != uri {
            names.push(backend.clone());
        }
        let mut item = Value::Null;
        if let Some((_, r)) = self
            .shared
            .pool
            .resources()
            .into_iter()
            .find(|(s, r)| *s == server && crate::resource_uri::same_uri(&r.uri, &backend))
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
            uri: &backend,
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
        let apps = self.shared.app_uris();
        let items = self
            .shown_components(&ctx, listed, |r| vec![r.uri.clone(), r.name.clone()])
            .into_iter()
            .filter(|(server, r)| self.permits_read(&ctx, server, &r.uri))
            .map(|(server, mut r)| {
                // Another server holds this `ui://` URI first: this copy under its own.
                if let Some(exposed) = apps.exposed(&server, &r.uri) {
                    r.uri = exposed.to_owned();
                }
                r
            })
            .filter(|r| seen.insert(r.uri.clone()))
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
        // A rewritten app URI is read as its server spells it, and answered as the client does.
        let exposed = req.uri.clone();
        if let Some((_, original)) = self.shared.app_target(&req.uri) {
            req.uri = original;
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
                    if exposed != req.uri {
                        for contents in &mut r.contents {
                            answered_as(contents, &req.uri, &exposed);
                        }
                    }
                    return Ok(ReadResourceResponse::Complete(r));
                }
                Err(toolforge_mcp::CallError::InputRequired { result, .. }) => {
                    match self
                        .input_required(&ctx, &key, (&server, &exposed), *result, &mut rounds)
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
        let offered = self.shared.app_target(&req.uri).is_some()
            || self
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
        let backend = self
            .shared
            .app_target(&req.uri)
            .map_or_else(|| req.uri.clone(), |(_, original)| original);
        if let Err(e) = self.shared.pool.subscribe(&server, &backend).await {
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
            let backend = self
                .shared
                .app_target(&req.uri)
                .map_or_else(|| req.uri.clone(), |(_, original)| original);
            self.shared
                .pool
                .unsubscribe(&server, &backend)
                .await
                .map_err(|e| e.to_mcp())?;
        }
        Ok(())
    }
}
