//! The Skills extension (SEP-2640) on the pool's side: `skills/list`, `skills/get` and
//! `resources/directory/read` on one server, each skill judged against its pin
//! (`crate::pins`'s `skills`): a held skill is left out of its list, and its entry, its
//! directory and its files are refused (`CallError::Quarantined`, naming how to approve it).

use rmcp::model::{
    GetSkillRequestParams, GetSkillResult, ListSkillsResult, PaginatedRequestParams,
    ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult,
};

use super::Pool;
use crate::call::{self, CallError};
use crate::pins::SKILL_PREFIX;

impl Pool {
    /// `skills/list` on `server`: one page, without the skills held in quarantine.
    ///
    /// # Errors
    /// As [`Pool::read_resource`]; `-32601` when `server` did not declare the extension.
    pub async fn list_skills(
        &self,
        server: &str,
        params: Option<PaginatedRequestParams>,
    ) -> Result<ListSkillsResult, CallError> {
        let up = self.known(server)?;
        let mut page = call::once(&up, None, |p| async move { p.list_skills(params).await })
            .await
            .map_err(|e| self.guarded_error(server, e))?;
        let key = crate::cache::key(&up.cfg);
        let (offered, _held) = self
            .pinning
            .admit_skills(&key, std::mem::take(&mut page.skills));
        page.skills = offered;
        Ok(page)
    }

    /// `skills/get` on `server`, refused when the skill is held.
    ///
    /// # Errors
    /// As [`Pool::list_skills`]; `-32602` (the server's) when it serves no skill at the URI;
    /// the skill is quarantined.
    pub async fn get_skill(
        &self,
        server: &str,
        params: GetSkillRequestParams,
    ) -> Result<GetSkillResult, CallError> {
        let up = self.known(server)?;
        let mut got = call::once(&up, None, |p| async move { p.get_skill(params).await })
            .await
            .map_err(|e| self.guarded_error(server, e))?;
        let key = crate::cache::key(&up.cfg);
        let (mut offered, held) = self.pinning.admit_skills(&key, vec![got.skill.clone()]);
        if let Some(held) = held.into_iter().next() {
            return Err(quarantined(server, held));
        }
        if let Some(skill) = offered.pop() {
            got.skill = skill;
        }
        Ok(got)
    }

    /// `resources/directory/read` on `server`, refused below a held skill.
    ///
    /// # Errors
    /// As [`Pool::list_skills`]; `-32601` when `server` did not declare `directoryRead`; the
    /// directory is a held skill's.
    pub async fn read_resource_directory(
        &self,
        server: &str,
        params: ReadResourceDirectoryRequestParams,
    ) -> Result<ReadResourceDirectoryResult, CallError> {
        let up = self.known(server)?;
        self.skill_allows(&up, &params.uri)?;
        call::once(&up, None, |p| async move {
            p.read_resource_directory(params).await
        })
        .await
        .map_err(|e| self.guarded_error(server, e))
    }

    /// Refuses `uri` of `up`'s server when it is a held skill's `SKILL.md` or lies below its
    /// directory.
    pub(crate) fn skill_allows(
        &self,
        up: &crate::upstream::Upstream,
        uri: &str,
    ) -> Result<(), CallError> {
        let key = crate::cache::key(&up.cfg);
        match self.pinning.skill_hold(&key, uri) {
            Some(held) => Err(quarantined(&up.cfg.name, held)),
            None => Ok(()),
        }
    }
}

fn quarantined(server: &str, held: crate::pins::HeldSkill) -> CallError {
    CallError::Quarantined {
        server: server.to_owned(),
        tool: format!("{SKILL_PREFIX}{}", held.uri),
        reason: held.reason,
    }
}
