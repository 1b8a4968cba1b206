//! The Skills extension (SEP-2640, `io.modelcontextprotocol/skills`) passed through: the skills
//! of every backend that declares the extension, and their directories. A skill's files are
//! resources, listed and read as any other (`resources`); here are `skills/list`, `skills/get`
//! and `resources/directory/read`.
//!
//! URIs are not rewritten: a skill URI two backends serve stays with the first in
//! configuration order (as a resource URI does). Visibility and the policy apply to a skill as
//! to the resource at its `SKILL.md` URI, and to a directory as to the resource at its URI.

use std::collections::HashSet;

use rmcp::model::{
    GetSkillRequestParams, GetSkillResult, ListSkillsResult, PaginatedRequestParams,
    ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult, Skill,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::json;

use super::{Gateway, START_GRACE, Shared};

/// Pages of a backend's `skills/list` the gateway follows before it stops (a loop guard).
const MAX_PAGES: usize = 64;

fn unknown_skill(uri: &str) -> McpError {
    McpError::invalid_params(format!("no skill at {uri}"), Some(json!({"uri": uri})))
}

impl Shared {
    /// The backends that declared the skills extension, in configuration order.
    fn skill_servers(&self, directory_read: bool) -> Vec<String> {
        self.pool
            .capabilities()
            .into_iter()
            .filter(|(_, c)| {
                if directory_read {
                    c.supports_directory_read()
                } else {
                    c.supports_skills()
                }
            })
            .map(|(server, _)| server)
            .collect()
    }

    /// Every skill of `server`, all pages.
    async fn all_skills(&self, server: &str) -> Result<Vec<Skill>, McpError> {
        let mut skills = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = cursor
                .take()
                .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
            let page = self
                .pool
                .list_skills(server, params)
                .await
                .map_err(|e| e.to_mcp())?;
            skills.extend(page.skills);
            match page.next_cursor {
                Some(next) if !next.is_empty() => cursor = Some(next),
                _ => break,
            }
        }
        Ok(skills)
    }
}

impl Gateway {
    /// Whether this request may read `uri` of `server` (visibility and policy, as a resource).
    fn may_read(&self, ctx: &RequestContext<RoleServer>, server: &str, uri: &str) -> bool {
        let channels = crate::visible::session_channels(&self.session_query, ctx);
        let config = &self.shared.visibility;
        if config.is_open() && channels.is_empty() {
            return true;
        }
        let tags = self.shared.server_tags();
        let server_tags = tags.get(server).map_or(&[][..], Vec::as_slice);
        let item = json!({"uri": uri});
        let component = crate::visible::component(server, vec![uri.to_owned()], &item, server_tags);
        config.shows(&component, &channels)
            && config.permits(
                &channels,
                toolforge_policy::Action::Read,
                toolforge_policy::Target::Resource { server, uri },
            )
    }

    pub(super) async fn serve_list_skills(
        &self,
        _req: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, McpError> {
        self.shared.pool.settled(START_GRACE).await;
        let mut seen = HashSet::new();
        let mut items = Vec::new();
        for server in self.shared.skill_servers(false) {
            // A backend that fails to list is left out, as a stopped one is.
            let Ok(skills) = self.shared.all_skills(&server).await else {
                continue;
            };
            items.extend(
                skills
                    .into_iter()
                    .filter(|s| self.may_read(&ctx, &server, &s.uri))
                    .filter(|s| seen.insert(s.uri.clone())),
            );
        }
        let hints = self.cache_hints(&crate::visible::session_channels(&self.session_query, &ctx));
        Ok(hints.apply(ListSkillsResult::with_all_items(items)))
    }

    pub(super) async fn serve_get_skill(
        &self,
        req: GetSkillRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, McpError> {
        self.shared.pool.settled(START_GRACE).await;
        for server in self.shared.skill_servers(false) {
            if !self.may_read(&ctx, &server, &req.uri) {
                continue;
            }
            if let Ok(result) = self.shared.pool.get_skill(&server, req.clone()).await {
                return Ok(result);
            }
        }
        Err(unknown_skill(&req.uri))
    }

    pub(super) async fn serve_read_resource_directory(
        &self,
        req: ReadResourceDirectoryRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, McpError> {
        self.shared.pool.settled(START_GRACE).await;
        let servers = self.shared.skill_servers(true);
        // The backend that lists a resource below the directory, else the only one that reads
        // directories at all.
        let below = format!("{}/", req.uri.trim_end_matches('/'));
        let server = self
            .shared
            .pool
            .resources()
            .into_iter()
            .find(|(s, r)| servers.contains(s) && r.uri.starts_with(&below))
            .map(|(s, _)| s)
            .or_else(|| (servers.len() == 1).then(|| servers[0].clone()))
            .filter(|s| self.may_read(&ctx, s, &req.uri))
            .ok_or_else(|| {
                McpError::invalid_params(
                    format!("not a directory: {}", req.uri),
                    Some(json!({"uri": req.uri})),
                )
            })?;
        self.shared
            .pool
            .read_resource_directory(&server, req)
            .await
            .map_err(|e| e.to_mcp())
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::ServerCapabilities;
    use serde_json::json;

    use super::super::skills_extension as extension;

    fn caps(v: serde_json::Value) -> ServerCapabilities {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_extension_is_declared_as_its_backends_declare_it() {
        let plain = ("a".to_owned(), caps(json!({"resources": {}})));
        let skills = (
            "b".to_owned(),
            caps(json!({"resources": {}, "extensions": {"io.modelcontextprotocol/skills": {}}})),
        );
        let directories = (
            "c".to_owned(),
            caps(json!({"resources": {},
                "extensions": {"io.modelcontextprotocol/skills": {"directoryRead": true}}})),
        );
        assert_eq!(extension(std::slice::from_ref(&plain)), None);
        assert_eq!(extension(&[plain.clone(), skills.clone()]), Some(json!({})));
        assert_eq!(
            extension(&[plain, skills, directories]),
            Some(json!({"directoryRead": true}))
        );
    }
}
