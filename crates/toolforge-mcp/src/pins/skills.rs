//! Pinned skills (the Skills extension, SEP-2640): a skill's pin is what its `skills/list`
//! entry promises: its URI, its frontmatter, and every file of its manifest with the file's
//! digest and size. It is pinned when first seen; an entry that promises anything else later
//! (a file changed, added or dropped, or the frontmatter rewritten) puts the skill in
//! quarantine: the pool leaves it out of `skills/list`, and refuses `skills/get` of it and the
//! reading of any file below its directory, until `toolforge tools approve SERVER/skill:URI
//! FINGERPRINT` accepts that very entry. Skills live in the pin store beside the tools, each
//! under the name `skill:` and its `SKILL.md` URI, so the quarantine report, `tools diff` and
//! `tools approve` show and take them as they do tools. With pinning off nothing is held.

use std::collections::HashMap;

use rmcp::model::Skill;
use serde_json::{Value, json};
use toolforge_guard::fingerprint;

use super::store::{PinRow, PinStore};

/// The prefix of a skill's name in the pin store.
pub const SKILL_PREFIX: &str = "skill:";

/// A skill held back until approved, and why.
#[derive(Debug, Clone)]
pub struct HeldSkill {
    pub uri: String,
    pub reason: String,
}

/// What a skill's pin covers, in the fields a tool's pin keeps (`toolforge_guard::pin`'s
/// pinned fields: `name`, and `annotations` for the rest), so that the store's fingerprints,
/// `tools diff` and approvals cover all of it as they cover a tool's definition.
fn pinned_view(skill: &Skill) -> Value {
    json!({
        "name": skill.uri,
        "annotations": {"frontmatter": skill.frontmatter, "resources": skill.resources},
    })
}

/// The directory whose files belong to the skill at `uri` (its `SKILL.md`): `uri` up to and
/// including its last `/`.
fn directory_of(uri: &str) -> &str {
    uri.rfind('/').map_or(uri, |i| &uri[..=i])
}

fn save(store: &PinStore, row: &PinRow, held: bool) {
    let saved = if held {
        store.hold(row)
    } else {
        store.put(row)
    };
    if let Err(e) = saved {
        tracing::warn!(server = %row.server, skill = %row.tool, "{e}");
    }
}

fn skill_row(server: &str, name: &str, approved: Option<Value>) -> PinRow {
    PinRow {
        server: server.to_owned(),
        tool: name.to_owned(),
        approved,
        ..PinRow::default()
    }
}

/// The skills held in quarantine, per server (its catalog-cache key), as last judged.
#[derive(Debug, Default)]
pub(crate) struct SkillPins {
    held: parking_lot::RwLock<HashMap<String, Vec<HeldSkill>>>,
}

impl SkillPins {
    /// Splits `server`'s listed `skills` (`server` is its catalog-cache key) into those the
    /// pool may offer and those held in quarantine, pinning new ones in `store` and recording
    /// a changed one as pending.
    pub(crate) fn admit(
        &self,
        store: &PinStore,
        server: &str,
        skills: Vec<Skill>,
    ) -> (Vec<Skill>, Vec<HeldSkill>) {
        let rows = store.rows(Some(server)).unwrap_or_else(|e| {
            tracing::warn!(server, "{e}; judging its skills without pins");
            Vec::new()
        });
        let mut offered = Vec::with_capacity(skills.len());
        let mut held = Vec::new();
        for skill in skills {
            let name = format!("{SKILL_PREFIX}{}", skill.uri);
            let view = pinned_view(&skill);
            let row = rows.iter().find(|r| r.tool == name);
            let approved = row.and_then(|r| r.approved.as_ref());
            let same = approved.is_some_and(|a| fingerprint(a) == fingerprint(&view));
            match (row, approved) {
                // Seen first now: pinned as it is.
                (None, _) => {
                    save(store, &skill_row(server, &name, Some(view)), false);
                    offered.push(skill);
                }
                (Some(row), _) if same => {
                    if row.pending.is_some() {
                        // Back to what was approved: nothing is pending any more.
                        save(store, &skill_row(server, &name, Some(view)), false);
                    }
                    offered.push(skill);
                }
                (Some(row), approved) => {
                    let reason = if approved.is_some() {
                        "its manifest changed since it was pinned (a file's digest or size, the \
                         files it lists, or its frontmatter)"
                            .to_owned()
                    } else {
                        row.reason
                            .clone()
                            .unwrap_or_else(|| "it is held".to_owned())
                    };
                    let recorded = row
                        .pending_fingerprint()
                        .is_some_and(|p| p == fingerprint(&view));
                    if !recorded {
                        tracing::warn!(server, skill = %skill.uri, "quarantined: {reason}");
                        let mut pending = skill_row(server, &name, approved.cloned());
                        pending.pending = Some(view);
                        pending.reason = Some(reason.clone());
                        save(store, &pending, true);
                    }
                    held.push(HeldSkill {
                        uri: skill.uri.clone(),
                        reason,
                    });
                }
            }
        }
        {
            let mut known = self.held.write();
            let entry = known.entry(server.to_owned()).or_default();
            entry.retain(|h| !offered.iter().any(|s| s.uri == h.uri));
            for h in &held {
                if !entry.iter().any(|e| e.uri == h.uri) {
                    entry.push(h.clone());
                }
            }
        }
        (offered, held)
    }

    /// Why `uri` of `server` (its catalog-cache key) may not be read: it is a held skill's
    /// `SKILL.md` or a file below its directory, and the skill is still pending approval in
    /// `store`.
    pub(crate) fn hold(&self, store: &PinStore, server: &str, uri: &str) -> Option<HeldSkill> {
        let found = self
            .held
            .read()
            .get(server)?
            .iter()
            .find(|h| uri == h.uri || uri.starts_with(directory_of(&h.uri)))
            .cloned()?;
        // Approved since it was held: released at once, before the next listing.
        let name = format!("{SKILL_PREFIX}{}", found.uri);
        let pending = store
            .rows(Some(server))
            .map(|rows| rows.iter().any(|r| r.tool == name && r.pending.is_some()))
            .unwrap_or(true);
        if pending {
            return Some(found);
        }
        if let Some(held) = self.held.write().get_mut(server) {
            held.retain(|h| h.uri != found.uri);
        }
        None
    }
}
