//! [`Filtered`]: any rmcp server handler with visibility (the built-in toolkit, evals and stdio
//! conformance servers); `serve.rs` serves one.

// The wrapper passes the legacy logging and subscription methods through unchanged.
#![allow(deprecated)]

use std::sync::Arc;

use parking_lot::Mutex;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult,
    GetPromptRequestParams, GetPromptResponse, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ServerConfig, SetLevelRequestParams, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use toolforge_select::visibility::Visible;
use toolforge_select::{Catalog, ServerEntry, Tool, ToolId};

use super::{RequestChannels, SessionScope, VisibilityConfig, component, session_channels};

/// Any rmcp server handler, with visibility: hidden tools are not listed and a call to one
/// answers "unknown tool", exactly as a tool that does not exist. The query string of the
/// connection's first request fixes the session's scope; headers count per request. A clone
/// is a new session (the HTTP transport clones the handler once per session).
pub struct Filtered<H> {
    inner: H,
    /// The server's name in catalogs (`server/tool` names in visibility lists).
    server: String,
    config: Arc<VisibilityConfig>,
    session_query: SessionScope,
}

impl<H: Clone> Clone for Filtered<H> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            server: self.server.clone(),
            config: self.config.clone(),
            session_query: Arc::new(Mutex::new(None)),
        }
    }
}

impl<H> Filtered<H> {
    /// The server's name in catalogs.
    #[must_use]
    pub fn server(&self) -> &str {
        &self.server
    }

    /// Wraps `inner`, known as `server` in visibility lists.
    pub fn new(inner: H, server: impl Into<String>, config: Arc<VisibilityConfig>) -> Self {
        Self {
            inner,
            server: server.into(),
            config,
            session_query: Arc::new(Mutex::new(None)),
        }
    }

    fn channels(&self, ctx: &RequestContext<RoleServer>) -> RequestChannels {
        session_channels(&self.session_query, ctx)
    }

    /// Keeps the items of `listed` that a request with `channels` may see; `names` gives the
    /// names an item is known by in visibility lists.
    fn retain_visible<T: serde::Serialize>(
        &self,
        listed: &mut Vec<T>,
        channels: &RequestChannels,
        names: impl Fn(&T) -> Vec<String>,
    ) {
        let components: Vec<_> = listed
            .iter()
            .map(|item| component(&self.server, names(item), item, &[]))
            .collect();
        let mut shown = self.config.components(&components, channels).into_iter();
        listed.retain(|_| shown.next().unwrap_or(false));
    }

    /// Nothing restricts this request: every call passes straight through.
    fn unrestricted(&self, ctx: &RequestContext<RoleServer>) -> bool {
        self.config.is_open() && self.channels(ctx).is_empty()
    }
}

impl<H: ServerHandler + Clone> Filtered<H> {
    /// "unknown resource" unless this request may see `uri`: as the listed resource with that
    /// URI, else as a template it matches, else by the URI alone.
    async fn check_resource(
        &self,
        uri: &str,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        crate::resource_uri::bounded_uri(uri)?;
        if self.unrestricted(ctx) {
            return Ok(());
        }
        let channels = self.channels(ctx);
        let mut names = vec![uri.to_owned()];
        let mut item = serde_json::Value::Null;
        if let Ok(listed) = self.inner.list_resources(None, ctx.clone()).await
            && let Some(r) = listed
                .resources
                .iter()
                .find(|r| crate::resource_uri::same_uri(&r.uri, uri))
        {
            names.push(r.name.clone());
            item = serde_json::to_value(r).unwrap_or_default();
        } else if let Ok(listed) = self.inner.list_resource_templates(None, ctx.clone()).await
            && let Some(t) = listed.resource_templates.iter().find(|t| {
                t.uri_template == uri || crate::uri_template::template_matches(&t.uri_template, uri)
            })
        {
            names.extend([t.uri_template.clone(), t.name.clone()]);
            item = serde_json::to_value(t).unwrap_or_default();
        }
        if self
            .config
            .shows(&component(&self.server, names, &item, &[]), &channels)
        {
            Ok(())
        } else {
            Err(crate::error::not_found("resource", uri))
        }
    }

    /// "unknown prompt" unless this request may see the prompt `name`.
    async fn check_prompt(
        &self,
        name: &str,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if self.unrestricted(ctx) {
            return Ok(());
        }
        let channels = self.channels(ctx);
        let item = match self.inner.list_prompts(None, ctx.clone()).await {
            Ok(listed) => listed
                .prompts
                .iter()
                .find(|p| p.name == name)
                .map(|p| serde_json::to_value(p).unwrap_or_default())
                .unwrap_or_default(),
            Err(_) => serde_json::Value::Null,
        };
        let prompt = component(&self.server, vec![name.to_owned()], &item, &[]);
        if self.config.shows(&prompt, &channels) {
            Ok(())
        } else {
            Err(crate::error::not_found("prompt", name))
        }
    }

    async fn visible(&self, ctx: &RequestContext<RoleServer>) -> Result<Visible, McpError> {
        let listed = self.inner.list_tools(None, ctx.clone()).await?;
        let tools = listed
            .tools
            .iter()
            .filter_map(|t| match serde_json::to_value(t) {
                Ok(serde_json::Value::Object(def)) => Tool::from_mcp(&self.server, def, &[]).ok(),
                _ => None,
            })
            .collect();
        let catalog = Catalog::new(
            vec![ServerEntry {
                name: self.server.clone(),
                tags: Vec::new(),
                aliases: Vec::new(),
                tools,
            }],
            Vec::new(),
        )
        .unwrap_or_default();
        Ok(self.config.resolve(&catalog, &self.channels(ctx)))
    }
}

impl<H: ServerHandler + Clone> ServerHandler for Filtered<H> {
    fn get_info(&self) -> ServerConfig {
        self.inner.get_info()
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        if self.unrestricted(&ctx) {
            return self.inner.list_tools(request, ctx).await;
        }
        let visible = self.visible(&ctx).await?;
        let mut listed = self.inner.list_tools(request, ctx).await?;
        listed
            .tools
            .retain(|t| visible.allows(&ToolId::new(&self.server, t.name.as_ref())));
        if visible.query_matched == Some(false) {
            // The search matched nothing, so the whole visible set is listed: say so, as the
            // gateway does.
            listed.meta.get_or_insert_with(Default::default).insert(
                crate::mcp::QUERY_MATCHED_META_KEY.to_owned(),
                serde_json::Value::Bool(false),
            );
        }
        Ok(listed)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if self.unrestricted(&ctx) {
            return self.inner.call_tool(request, ctx).await;
        }
        let visible = self.visible(&ctx).await?;
        if !visible.allows(&ToolId::new(&self.server, request.name.as_ref())) {
            return Err(McpError::invalid_params(
                format!("unknown tool: {}", request.name),
                None,
            ));
        }
        self.inner.call_tool(request, ctx).await
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let channels = self.channels(&ctx);
        let mut listed = self.inner.list_resources(request, ctx).await?;
        self.retain_visible(&mut listed.resources, &channels, |r| {
            vec![r.uri.clone(), r.name.clone()]
        });
        Ok(listed)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let channels = self.channels(&ctx);
        let mut listed = self.inner.list_resource_templates(request, ctx).await?;
        self.retain_visible(&mut listed.resource_templates, &channels, |t| {
            vec![t.uri_template.clone(), t.name.clone()]
        });
        Ok(listed)
    }

    async fn read_resource(
        &self,
        mut request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        request.uri = crate::resource_uri::normalised_uri(&request.uri)?;
        self.check_resource(&request.uri, &ctx).await?;
        self.inner.read_resource(request, ctx).await
    }

    async fn subscribe(
        &self,
        mut request: SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        request.uri = crate::resource_uri::normalised_uri(&request.uri)?;
        self.check_resource(&request.uri, &ctx).await?;
        self.inner.subscribe(request, ctx).await
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.inner.unsubscribe(request, ctx).await
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let channels = self.channels(&ctx);
        let mut listed = self.inner.list_prompts(request, ctx).await?;
        self.retain_visible(&mut listed.prompts, &channels, |p| vec![p.name.clone()]);
        Ok(listed)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        self.check_prompt(&request.name, &ctx).await?;
        self.inner.get_prompt(request, ctx).await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let reference = serde_json::to_value(&request.r#ref).unwrap_or_default();
        if let Some(name) = reference.get("name").and_then(serde_json::Value::as_str) {
            self.check_prompt(name, &ctx).await?;
        } else if let Some(uri) = reference.get("uri").and_then(serde_json::Value::as_str) {
            self.check_resource(uri, &ctx).await?;
        }
        self.inner.complete(request, ctx).await
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.inner.set_level(request, ctx).await
    }

    async fn on_initialized(&self, ctx: NotificationContext<RoleServer>) {
        self.inner.on_initialized(ctx).await;
    }

    async fn on_cancelled(
        &self,
        notification: rmcp::model::CancelledNotificationParam,
        ctx: NotificationContext<RoleServer>,
    ) {
        self.inner.on_cancelled(notification, ctx).await;
    }

    async fn on_roots_list_changed(&self, ctx: NotificationContext<RoleServer>) {
        self.inner.on_roots_list_changed(ctx).await;
    }
}
