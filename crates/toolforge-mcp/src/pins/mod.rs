//! Pinned tools and quarantine: each tool's definition is pinned (its canonical fingerprint,
//! `toolforge_guard::pin`) when first seen; a later listing that changes it, a new name with
//! the schemas of a vanished pinned tool (a rename, in one listing or two), or a definition
//! with poisoning markers, puts the tool in quarantine: the pool neither lists nor calls it
//! until `toolforge tools approve` accepts that very definition (by its fingerprint). Enforced
//! where a server's lists are set (`Upstream::set_lists`), so every surface that reads the
//! pool (the gateway's `/mcp` and stdio, search mode, groups, the agent) inherits it.
//!
//! Every listing is scanned for poisoning, pinned tools too: a pin taken on first use accepts
//! no marker, so markers a newer scanner finds in it hold it; an operator's approval accepts
//! the markers shown with the definition approved, and only those. Scans are kept per listed
//! tool while its definition and the other servers' tool names stay the same, so re-judging
//! a large unchanged listing does not read it again.
//!
//! The store is in [`store`]; skills are pinned by their manifests in [`skills`].

mod skills;
mod store;

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher as _, Hash as _, Hasher};

use rmcp::model::Tool as McpTool;
use serde_json::Value;
use toolforge_guard::pin::{Admitter, PinRef, Verdict, fingerprint, pinned_view};
use toolforge_guard::{GuardSettings, PoisonAction, scan_tool};

use crate::listed_tool::ListedTool;
pub use skills::{HeldSkill, SKILL_PREFIX};
pub use store::{Approval, PinRow, PinStore};
pub(crate) use store::{PINS_TABLE, migrate};

/// A tool held back from the pool's lists until approved.
#[derive(Debug, Clone)]
pub struct Quarantined {
    pub tool: McpTool,
    pub reason: String,
}

/// One tool's last poisoning scan: what it read (a keyed hash of the definition and of the
/// other servers' names) and what it found.
#[derive(Debug, Clone)]
struct Scan {
    input: u64,
    /// Not kept from an earlier listing (its findings are logged).
    fresh: bool,
    markers: Vec<String>,
}

/// The pool's pinning: the store, whether pins are checked, and the poisoning guard.
#[derive(Debug)]
pub struct Pinning {
    store: PinStore,
    /// Check definitions against their pins (`"toolforge": {"pinning": false}` turns it off).
    pins: bool,
    guards: GuardSettings,
    /// Each server's tool names as last listed, for the "other tools' names" marker.
    names: parking_lot::RwLock<HashMap<String, Vec<String>>>,
    /// Each server's tools' last scans (only the tools it listed last).
    scans: parking_lot::Mutex<HashMap<String, HashMap<String, Scan>>>,
    /// The skills held in quarantine (`skills`).
    skills: skills::SkillPins,
    /// Keys the scans' hashes: a backend cannot choose a definition whose hash matches another.
    hasher: RandomState,
}

/// Feeds `value` to `state`, kinds and lengths included (so no two values feed the same).
fn hash_value(value: &Value, state: &mut impl Hasher) {
    match value {
        Value::Null => state.write_u8(0),
        Value::Bool(b) => {
            state.write_u8(1);
            b.hash(state);
        }
        Value::Number(n) => {
            state.write_u8(2);
            n.to_string().hash(state);
        }
        Value::String(s) => {
            state.write_u8(3);
            s.hash(state);
        }
        Value::Array(items) => {
            state.write_u8(4);
            state.write_usize(items.len());
            items.iter().for_each(|v| hash_value(v, state));
        }
        Value::Object(map) => {
            state.write_u8(5);
            state.write_usize(map.len());
            for (k, v) in map {
                k.hash(state);
                hash_value(v, state);
            }
        }
    }
}

impl Pinning {
    /// The pool's pinning from the `"toolforge"` settings: `"pinning"` (default on) and
    /// `"guards"`; pins live in `store` (the catalog cache's SQLite file), else in memory.
    pub(crate) fn from_settings(
        settings: &serde_json::Map<String, serde_json::Value>,
        store: Option<PinStore>,
    ) -> Self {
        let pins = settings
            .get("pinning")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(true);
        // `config::parse` already refused a malformed value.
        let guards =
            toolforge_guard::GuardSettings::from_value(settings.get("guards")).unwrap_or_default();
        let store = store.unwrap_or_else(PinStore::memory);
        Self::new(store, pins, guards)
    }

    #[must_use]
    pub fn new(store: PinStore, pins: bool, guards: GuardSettings) -> Self {
        Self {
            store,
            pins,
            guards,
            names: parking_lot::RwLock::default(),
            scans: parking_lot::Mutex::default(),
            skills: skills::SkillPins::default(),
            hasher: RandomState::new(),
        }
    }

    #[must_use]
    pub fn store(&self) -> &PinStore {
        &self.store
    }

    #[must_use]
    pub fn guards(&self) -> GuardSettings {
        self.guards
    }

    /// Other servers' tool names that `server` does not have itself.
    fn other_names(&self, server: &str, own: &[String]) -> Vec<String> {
        let mut names: Vec<String> = self
            .names
            .read()
            .iter()
            .filter(|(s, _)| s.as_str() != server)
            .flat_map(|(_, names)| names.iter())
            .filter(|n| !own.contains(n))
            .cloned()
            .collect();
        // In one order whatever the map's, so their hash only changes with the names.
        names.sort_unstable();
        names.dedup();
        names
    }

    /// Splits `server`'s freshly listed `tools` into those the pool may offer and those held in
    /// quarantine, pinning new tools and recording held ones as pending. A store that fails is
    /// logged; tools are then judged against the pins it could read (none: all new).
    pub fn admit<T: Into<ListedTool>>(
        &self,
        server: &str,
        tools: Vec<T>,
    ) -> (Vec<ListedTool>, Vec<Quarantined>) {
        let tools: Vec<ListedTool> = tools.into_iter().map(Into::into).collect();
        let own: Vec<String> = tools.iter().map(|t| t.name().to_owned()).collect();
        let others = self.other_names(server, &own);
        self.names.write().insert(server.to_owned(), own);
        let rows = self.store.rows(Some(server)).unwrap_or_else(|e| {
            tracing::warn!(server, "{e}; judging its tools without pins");
            Vec::new()
        });
        let by_tool: HashMap<&str, &PinRow> = rows.iter().map(|r| (r.tool.as_str(), r)).collect();
        // One tool at a time as JSON: a server may list thousands.
        let admitter = {
            let listed: HashSet<&str> = tools.iter().map(ListedTool::name).collect();
            Admitter::new(
                // Skills' pins are not tools': they take no part in a tool's rename check.
                rows.iter()
                    .filter(|r| !r.tool.starts_with(SKILL_PREFIX))
                    .filter_map(|r| {
                        r.approved.as_ref().map(|definition| PinRef {
                            name: &r.tool,
                            definition,
                            twins: &r.twins,
                        })
                    }),
                &listed,
            )
        };
        let others_hash = self.hasher.hash_one(&others);
        let others: Vec<&str> = others.iter().map(String::as_str).collect();
        let mut last_scans = self.scans.lock().remove(server).unwrap_or_default();
        let mut scans = HashMap::with_capacity(tools.len());
        let mut offered = Vec::new();
        let mut held = Vec::new();
        for tool in tools {
            let value = serde_json::to_value(tool.definition()).unwrap_or(Value::Null);
            let verdict = admitter.verdict(&value);
            let name = tool.name().to_owned();
            let row = by_tool.get(name.as_str()).copied();
            let mut fresh = false;
            let markers = if self.guards.poisoning == PoisonAction::Off {
                Vec::new()
            } else {
                let input = {
                    let mut h = self.hasher.build_hasher();
                    hash_value(&value, &mut h);
                    h.write_u64(others_hash);
                    h.finish()
                };
                let scan = match last_scans.remove(&name) {
                    Some(scan) if scan.input == input => scan,
                    _ => Scan {
                        fresh: true,
                        input,
                        markers: scan_tool(&value, &others)
                            .iter()
                            .map(ToString::to_string)
                            .collect(),
                    },
                };
                let markers = scan.markers.clone();
                fresh = scan.fresh;
                scans.insert(
                    name.clone(),
                    Scan {
                        fresh: false,
                        ..scan
                    },
                );
                markers
            };
            let hold = self.hold_reason(server, &name, &verdict, row, &markers, fresh);
            let twins = match &verdict {
                Verdict::New { twins } => twins.clone(),
                _ => row.map(|r| r.twins.clone()).unwrap_or_default(),
            };
            match hold {
                None => {
                    let approved = pinned_view(&value);
                    let same = row
                        .and_then(|r| r.approved.as_ref())
                        .is_some_and(|a| fingerprint(a) == fingerprint(&approved));
                    let settled = same && row.is_some_and(|r| r.pending.is_none());
                    if self.pins && !settled {
                        self.save(
                            &PinRow {
                                server: server.to_owned(),
                                tool: name,
                                approved: Some(approved),
                                accepted: if same {
                                    row.map(|r| r.accepted.clone()).unwrap_or_default()
                                } else {
                                    Vec::new()
                                },
                                twins,
                                ..PinRow::default()
                            },
                            false,
                        );
                    }
                    offered.push(tool);
                }
                Some(reason) => {
                    tracing::warn!(server, tool = %name, "quarantined: {reason}");
                    self.save(
                        &PinRow {
                            server: server.to_owned(),
                            tool: name,
                            approved: row.and_then(|r| r.approved.clone()),
                            accepted: row.map(|r| r.accepted.clone()).unwrap_or_default(),
                            twins,
                            pending: Some(pinned_view(&value)),
                            pending_markers: markers,
                            reason: Some(reason.clone()),
                        },
                        true,
                    );
                    held.push(Quarantined {
                        tool: tool.definition(),
                        reason,
                    });
                }
            }
        }
        self.scans.lock().insert(server.to_owned(), scans);
        (offered, held)
    }

    /// Why a listed tool is held back (none: it is offered). `markers` are its poisoning
    /// markers (`fresh`: found by this listing's scan, not kept from an earlier one); those its
    /// operator accepted with this very definition do not count.
    fn hold_reason(
        &self,
        server: &str,
        name: &str,
        verdict: &Verdict,
        row: Option<&PinRow>,
        markers: &[String],
        fresh: bool,
    ) -> Option<String> {
        let accepted: &[String] = match (verdict, row) {
            (Verdict::Unchanged | Verdict::Replaced { .. }, Some(row)) => &row.accepted,
            _ => &[],
        };
        let unaccepted: Vec<&str> = markers
            .iter()
            .filter(|m| !accepted.contains(m))
            .map(String::as_str)
            .collect();
        let poisoned = (!unaccepted.is_empty()).then(|| {
            let shown: Vec<&str> = unaccepted.iter().take(3).copied().collect();
            format!("its definition has poisoning markers: {}", shown.join("; "))
        });
        let poisoned = match poisoned {
            Some(reason) if self.guards.poisoning == PoisonAction::Warn => {
                if fresh {
                    tracing::warn!(server, tool = name, "{reason} (warn only)");
                }
                None
            }
            other => other,
        };
        let changed = match verdict {
            _ if !self.pins => None,
            Verdict::Changed { .. } => {
                Some("its definition changed since it was pinned".to_owned())
            }
            Verdict::Renamed { from, .. } => Some(format!(
                "it is new, with the schemas of the pinned tool \"{from}\", which is gone (a renamed tool)"
            )),
            Verdict::Replaced { from, .. } => Some(format!(
                "it appeared beside the pinned tool \"{from}\" with the same schemas, and \"{from}\" is gone now (a tool renamed in two steps)"
            )),
            Verdict::Unchanged | Verdict::New { .. } => None,
        };
        match (changed, poisoned) {
            (Some(changed), Some(poisoned)) => Some(format!("{changed}; and {poisoned}")),
            (changed, poisoned) => changed.or(poisoned),
        }
    }

    /// Writes `row`: held (only its pending fields, when the row is kept already) or whole.
    /// Splits `server`'s listed `skills` (`server` is its catalog-cache key) into those the
    /// pool may offer and those held in quarantine (`skills`). With pinning off, none is held.
    pub fn admit_skills(
        &self,
        server: &str,
        skills: Vec<rmcp::model::Skill>,
    ) -> (Vec<rmcp::model::Skill>, Vec<HeldSkill>) {
        if !self.pins {
            return (skills, Vec::new());
        }
        self.skills.admit(&self.store, server, skills)
    }

    /// Why `uri` of `server` may not be read: it belongs to a skill held in quarantine.
    pub fn skill_hold(&self, server: &str, uri: &str) -> Option<HeldSkill> {
        self.skills.hold(&self.store, server, uri)
    }

    fn save(&self, row: &PinRow, held: bool) {
        let saved = if held {
            self.store.hold(row)
        } else {
            self.store.put(row)
        };
        if let Err(e) = saved {
            tracing::warn!(server = %row.server, tool = %row.tool, "{e}");
        }
    }
}

#[cfg(test)]
mod tests;
