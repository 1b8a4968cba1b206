//! The MCP surface: rmcp's `ServerHandler`, each request handed to the file of its concern.
//!
//! Each request's future is boxed here. rmcp boxes the future of its whole `handle_request`,
//! which holds the future of whichever request it is inline, so it is the size of the largest
//! (11 KB in the release build), and moving it into its box copied all of it for every request.
//! Boxed here, each request copies only its own future.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CompleteRequestParams,
    CompleteResult, DiscoverResult, GetPromptRequestParams, GetPromptResponse,
    GetSkillRequestParams, GetSkillResult, GetTaskParams, GetTaskResult, Implementation,
    InitializeRequestParams, InitializeResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListSkillsResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult, ReadResourceRequestParams,
    ReadResourceResponse, ServerConfig, SetLevelRequestParams, SubscribeRequestParams,
    SubscriptionFilter, Tool as McpTool, UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};

use super::{Gateway, Session};
use crate::mcp_sessions::DirectSlot;

impl Gateway {
    /// The gateway's info for one client: the merged capabilities, and the `instructions` of
    /// each backend this client may see (a tool of it visible to the request, or, for a backend
    /// with no tools, nothing restricting visibility), each under its server's name.
    fn info_for(&self, ctx: Option<&RequestContext<RoleServer>>) -> ServerConfig {
        let scope = ctx.map(|ctx| self.scope(ctx));
        let catalog = self.shared.pool.shared_catalog();
        let sees = |server: &str| {
            let Some(scope) = &scope else {
                return true;
            };
            let mut tools = catalog.tools().filter(|t| t.server == server).peekable();
            if tools.peek().is_none() {
                return scope.unrestricted();
            }
            tools.any(|t| scope.allows(&t.id()))
        };
        let instructions = self
            .shared
            .pool
            .instructions()
            .into_iter()
            .filter(|(server, _)| sees(server))
            .map(|(server, text)| format!("## {server}\n{}", text.trim()))
            .collect::<Vec<_>>()
            .join("\n\n");
        let mut info = ServerConfig::new(self.shared.capabilities())
            .with_server_info(Implementation::new("toolforge", env!("CARGO_PKG_VERSION")));
        if !instructions.is_empty() {
            info = info.with_instructions(instructions);
        }
        info
    }
}

impl ServerHandler for Gateway {
    fn get_info(&self) -> ServerConfig {
        self.info_for(None)
    }

    /// Answered once the backends have had [`super::START_GRACE`] to start: a client that
    /// connects with the gateway (a desktop host starting `gateway --stdio`) gets their merged
    /// capabilities and instructions, not an empty gateway's.
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        ctx.peer.set_peer_info(request.clone());
        self.shared.pool.settled(super::START_GRACE).await;
        let mut result = self.negotiate_initialize(&request)?;
        result.instructions = self.info_for(Some(&ctx)).instructions;
        Ok(result)
    }

    async fn discover(&self, ctx: RequestContext<RoleServer>) -> Result<DiscoverResult, McpError> {
        self.shared.pool.settled(super::START_GRACE).await;
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.info_for(Some(&ctx)),
        ))
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(crate::listen::offered(requested))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        self.shared.listeners.hold(context).await;
        Ok(())
    }

    /// The definition clients see for `name` (rmcp validates a call's `Mcp-Param-*` headers
    /// against its `x-mcp-header` annotations).
    fn get_tool(&self, name: &str) -> Option<McpTool> {
        self.shared.listed_tools().get(name)
    }

    async fn on_initialized(&self, ctx: NotificationContext<RoleServer>) {
        // A session over `/mcp`: its plain calls may be answered without its worker.
        if let Some(slot) = ctx.extensions.get::<DirectSlot<Gateway>>() {
            slot.register(self.clone(), ctx.peer.clone());
        }
        let mut sessions = self.shared.sessions.lock();
        // Ended sessions (closed, or expired idle) give their memory back here too.
        sessions.retain(|s| !s.peer.is_transport_closed());
        sessions.push(Session {
            peer: ctx.peer,
            listed: self.listed.clone(),
        });
    }

    async fn list_tools(
        &self,
        req: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Box::pin(self.serve_list_tools(req, ctx)).await
    }

    async fn call_tool(
        &self,
        req: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        Box::pin(self.serve_call_tool(req, ctx)).await
    }

    async fn list_resources(
        &self,
        req: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Box::pin(self.serve_list_resources(req, ctx)).await
    }

    async fn list_resource_templates(
        &self,
        req: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Box::pin(self.serve_list_resource_templates(req, ctx)).await
    }

    async fn read_resource(
        &self,
        req: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        Box::pin(self.serve_read_resource(req, ctx)).await
    }

    async fn subscribe(
        &self,
        req: SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Box::pin(self.serve_subscribe(req, ctx)).await
    }

    async fn unsubscribe(
        &self,
        req: UnsubscribeRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Box::pin(self.serve_unsubscribe(req, _ctx)).await
    }

    async fn list_skills(
        &self,
        req: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, McpError> {
        Box::pin(self.serve_list_skills(req, ctx)).await
    }

    async fn get_skill(
        &self,
        req: GetSkillRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, McpError> {
        Box::pin(self.serve_get_skill(req, ctx)).await
    }

    async fn read_resource_directory(
        &self,
        req: ReadResourceDirectoryRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, McpError> {
        Box::pin(self.serve_read_resource_directory(req, ctx)).await
    }

    async fn get_task(
        &self,
        req: GetTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        Box::pin(self.serve_get_task(req, ctx)).await
    }

    async fn update_task(
        &self,
        req: UpdateTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Box::pin(self.serve_update_task(req, ctx)).await
    }

    async fn cancel_task(
        &self,
        req: CancelTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Box::pin(self.serve_cancel_task(req, ctx)).await
    }

    async fn list_prompts(
        &self,
        req: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Box::pin(self.serve_list_prompts(req, ctx)).await
    }

    async fn get_prompt(
        &self,
        req: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        Box::pin(self.serve_get_prompt(req, ctx)).await
    }

    async fn complete(
        &self,
        req: CompleteRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        Box::pin(self.serve_complete(req, ctx)).await
    }

    async fn set_level(
        &self,
        req: SetLevelRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        // Boxed like the others: unboxed, its future (5 KB) set the size of rmcp's future for
        // every request, which is copied whole when the request's task is made.
        Box::pin(self.shared.pool.set_level(req.level)).await;
        Ok(())
    }
}
