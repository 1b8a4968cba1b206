//! Pinned skills (the Skills extension, SEP-2640): a skill's pin is what its `skills/list`
//! entry promises: its URI, its frontmatter, and every file of its manifest with the file's
//! digest and size. It is pinned when first seen; an entry that promises anything else later
//! (a file changed, added or dropped, or the frontmatter rewritten) puts the skill in
//! quarantine: the pool leaves it out of `skills/list`, and refuses `skills/get` of it and the
//! reading of any file below its directory, until `toolforge tools approve SERVER/skill:URI
//! FINGERPRINT` accepts that very entry. Skills live in the pin store beside the tools, each
//! under the name `skill:` and its `SKILL.md` URI, so the quarantine report, `tools diff` and
//! `tools approve` show and take them as they do tools. With pinning off nothing is held.

use rmcp::model::Skill;
use serde_json::{Value, json};
use toolforge_guard::fingerprint;

use super::{PinRow, Pinning};

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

impl Pinning {
    /// Splits `server`'s listed `skills` (`server` is its catalog-cache key) into those the
    /// pool may offer and those held in quarantine, pinning new ones and recording a changed
    /// one as pending.
    pub fn admit_skills(&self, server: &str, skills: Vec<Skill>) -> (Vec<Skill>, Vec<HeldSkill>) {
        if !self.pins {
            return (skills, Vec::new());
        }
        let rows = self.store.rows(Some(server)).unwrap_or_else(|e| {
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
                    self.save(&self.skill_row(server, &name, Some(view), None), false);
                    offered.push(skill);
                }
                (Some(row), _) if same => {
                    if row.pending.is_some() {
                        // Back to what was approved: nothing is pending any more.
                        self.save(&self.skill_row(server, &name, Some(view), None), false);
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
                        let mut pending = self.skill_row(server, &name, approved.cloned(), None);
                        pending.pending = Some(view);
                        pending.reason = Some(reason.clone());
                        self.save(&pending, true);
                    }
                    held.push(HeldSkill {
                        uri: skill.uri.clone(),
                        reason,
                    });
                }
            }
        }
        {
            let mut known = self.held_skills.write();
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
    /// `SKILL.md` or a file below its directory, and the skill is still pending approval.
    pub fn skill_hold(&self, server: &str, uri: &str) -> Option<HeldSkill> {
        let found = self
            .held_skills
            .read()
            .get(server)?
            .iter()
            .find(|h| uri == h.uri || uri.starts_with(directory_of(&h.uri)))
            .cloned()?;
        // Approved since it was held: released at once, before the next listing.
        let name = format!("{SKILL_PREFIX}{}", found.uri);
        let pending = self
            .store
            .rows(Some(server))
            .map(|rows| rows.iter().any(|r| r.tool == name && r.pending.is_some()))
            .unwrap_or(true);
        if pending {
            return Some(found);
        }
        if let Some(held) = self.held_skills.write().get_mut(server) {
            held.retain(|h| h.uri != found.uri);
        }
        None
    }

    fn skill_row(
        &self,
        server: &str,
        name: &str,
        approved: Option<Value>,
        reason: Option<String>,
    ) -> PinRow {
        PinRow {
            server: server.to_owned(),
            tool: name.to_owned(),
            approved,
            reason,
            ..PinRow::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pins::PinStore;
    use toolforge_guard::GuardSettings;

    fn skill(digest: &str) -> Skill {
        serde_json::from_value(json!({
            "uri": "skill://pdf/SKILL.md",
            "frontmatter": {"name": "pdf", "description": "Fill PDF forms."},
            "resources": [
                {"uri": "skill://pdf/SKILL.md", "digest": "sha256:aa", "size": 10},
                {"uri": "skill://pdf/references/FORMS.md", "digest": digest, "size": 20}
            ]
        }))
        .unwrap()
    }

    #[test]
    fn a_skill_whose_manifest_changes_is_held_with_its_files_until_approved() {
        let pins = Pinning::new(PinStore::memory(), true, GuardSettings::default());
        let store = pins.store();
        let (ok, held) = pins.admit_skills("s", vec![skill("sha256:bb")]);
        assert_eq!((ok.len(), held.len()), (1, 0));

        // One file's digest changes: the skill and every file below it are held.
        let (ok, held) = pins.admit_skills("s", vec![skill("sha256:cc")]);
        assert!(ok.is_empty());
        assert!(held[0].reason.contains("manifest changed"), "{held:?}");
        for uri in ["skill://pdf/SKILL.md", "skill://pdf/references/FORMS.md"] {
            assert!(pins.skill_hold("s", uri).is_some(), "{uri}");
        }
        assert!(pins.skill_hold("s", "skill://other/SKILL.md").is_none());
        assert!(pins.skill_hold("t", "skill://pdf/SKILL.md").is_none());

        // Approved by the fingerprint of what is pending: offered again, files readable.
        let name = "skill:skill://pdf/SKILL.md";
        let row = store
            .rows(Some("s"))
            .unwrap()
            .into_iter()
            .find(|r| r.tool == name)
            .unwrap();
        let reviewed = row.pending_fingerprint().unwrap();
        assert!(matches!(
            store.approve("s", name, "0000").unwrap(),
            crate::pins::Approval::Differs { .. }
        ));
        assert!(matches!(
            store.approve("s", name, &reviewed).unwrap(),
            crate::pins::Approval::Approved
        ));
        assert!(
            pins.skill_hold("s", "skill://pdf/references/FORMS.md")
                .is_none()
        );
        let (ok, held) = pins.admit_skills("s", vec![skill("sha256:cc")]);
        assert_eq!((ok.len(), held.len()), (1, 0));
    }

    #[test]
    fn with_pinning_off_nothing_is_held() {
        let pins = Pinning::new(PinStore::memory(), false, GuardSettings::default());
        let _ = pins.admit_skills("s", vec![skill("sha256:bb")]);
        let (ok, held) = pins.admit_skills("s", vec![skill("sha256:cc")]);
        assert_eq!((ok.len(), held.len()), (1, 0));
    }
}
