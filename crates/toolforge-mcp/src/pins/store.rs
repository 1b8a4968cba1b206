//! Where pins are kept: a table of the catalog cache's SQLite file (`pins`: one row per server
//! (its cache key: name and how it is reached) and tool), or memory when the cache is not
//! SQLite. A row holds the definition approved last with the poisoning markers the operator
//! accepted with it and the tool's twins (`toolforge_guard::pin::Verdict::Replaced`), and,
//! while the tool is quarantined, the pending definition, its markers and why it is held.
//!
//! An approval names the fingerprint of the pending definition that was reviewed, and is
//! refused when the pending definition is another one by then: a backend that changes a held
//! tool between the review and the approval gets nothing approved. In SQLite the check and the
//! write are one immediate transaction, so another process (a running gateway holding a new
//! definition) cannot slip between them.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;
use toolforge_guard::fingerprint;

use crate::cache_error::CacheError;

/// One row of the pin store.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PinRow {
    /// The server's catalog-cache key: its name and a fingerprint of how it is reached
    /// (`crate::cache::key`), so same-named servers of different configurations never share
    /// pins, while a server that changes what it lists behind the same command is caught.
    pub server: String,
    pub tool: String,
    /// The definition approved last (its pinned fields); none for a tool held since first seen.
    pub approved: Option<Value>,
    /// The poisoning markers (as shown to the operator) accepted with `approved`: a listing of
    /// that definition is held only for markers not among them. Empty for a pin taken on first
    /// use.
    pub accepted: Vec<String>,
    /// The pinned tools listed with the same schemas when this one first appeared.
    pub twins: Vec<String>,
    /// The definition waiting for approval (quarantined), its poisoning markers, and why it is
    /// held.
    pub pending: Option<Value>,
    pub pending_markers: Vec<String>,
    pub reason: Option<String>,
}

impl PinRow {
    /// The server's name (its key without the fingerprint).
    #[must_use]
    pub fn server_name(&self) -> &str {
        self.server
            .rsplit_once(':')
            .map_or(self.server.as_str(), |(name, _)| name)
    }

    /// The fingerprint of the pending definition: what an approval must name.
    #[must_use]
    pub fn pending_fingerprint(&self) -> Option<String> {
        self.pending.as_ref().map(fingerprint)
    }
}

/// What an approval came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// The pending definition named is the pin now.
    Approved,
    /// Nothing is pending for the tool.
    NothingPending,
    /// Another definition is pending than the one named (the server changed it since the
    /// review): nothing was approved. `pending` is the fingerprint pending now.
    Differs { pending: String },
}

fn err(e: impl std::fmt::Display) -> CacheError {
    CacheError {
        backend: "sqlite",
        message: format!("pins: {e}"),
    }
}

enum Backend {
    Memory(parking_lot::Mutex<HashMap<(String, String), PinRow>>),
    Sqlite(Arc<parking_lot::Mutex<rusqlite::Connection>>),
}

/// Where pins are kept.
pub struct PinStore {
    backend: Backend,
}

impl std::fmt::Debug for PinStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.backend {
            Backend::Memory(_) => "PinStore(memory)",
            Backend::Sqlite(_) => "PinStore(sqlite)",
        })
    }
}

/// The `pins` table (created with the catalog table; [`migrate`] brings an older file's table
/// up to it).
pub(crate) const PINS_TABLE: &str = "CREATE TABLE IF NOT EXISTS pins (
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    approved TEXT,
    pending TEXT,
    reason TEXT,
    accepted TEXT,
    twins TEXT,
    pending_markers TEXT,
    PRIMARY KEY (server, tool)
);";

/// The columns added to `pins` since its first version, each a JSON array of strings.
const ADDED_COLUMNS: &[&str] = &["accepted", "twins", "pending_markers"];

/// Adds the columns an older file's `pins` table lacks (its rows read as accepting no
/// markers and having no twins).
pub(crate) fn migrate(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare("SELECT name FROM pragma_table_info('pins')")?;
    let present: Vec<String> = stmt
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    for column in ADDED_COLUMNS {
        if !present.iter().any(|c| c == column) {
            conn.execute_batch(&format!("ALTER TABLE pins ADD COLUMN {column} TEXT"))?;
        }
    }
    Ok(())
}

/// Which fields of a kept row a write replaces.
#[derive(Clone, Copy)]
enum Write {
    /// Every field ([`PinStore::put`]).
    Whole,
    /// The pending definition, its markers and the reason ([`PinStore::hold`]).
    Pending,
}

/// Inserts a row; `?1`..`?8` are server, tool, approved, pending, reason, accepted, twins,
/// pending markers.
macro_rules! upsert {
    ($set:literal) => {
        concat!(
            "INSERT INTO pins (server, tool, approved, pending, reason, accepted, twins, ",
            "pending_markers) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ",
            "ON CONFLICT(server, tool) DO UPDATE SET ",
            $set
        )
    };
}

const PUT_SQL: &str = upsert!(
    "approved = ?3, pending = ?4, reason = ?5, accepted = ?6, twins = ?7, pending_markers = ?8"
);
const HOLD_SQL: &str = upsert!("pending = ?4, reason = ?5, pending_markers = ?8");

fn parse(text: Option<String>) -> Option<Value> {
    text.and_then(|t| serde_json::from_str(&t).ok())
}

fn parse_list(text: Option<String>) -> Vec<String> {
    text.and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

fn json_text(v: Option<&Value>) -> Option<String> {
    v.map(Value::to_string)
}

fn list_text(v: &[String]) -> Option<String> {
    (!v.is_empty()).then(|| serde_json::to_string(v).unwrap_or_default())
}

const SELECT: &str = "SELECT server, tool, approved, pending, reason, accepted, twins,
    pending_markers FROM pins";

fn read_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<PinRow> {
    Ok(PinRow {
        server: r.get(0)?,
        tool: r.get(1)?,
        approved: parse(r.get(2)?),
        pending: parse(r.get(3)?),
        reason: r.get(4)?,
        accepted: parse_list(r.get(5)?),
        twins: parse_list(r.get(6)?),
        pending_markers: parse_list(r.get(7)?),
    })
}

impl PinStore {
    /// Pins kept in this process only.
    #[must_use]
    pub fn memory() -> Self {
        Self {
            backend: Backend::Memory(parking_lot::Mutex::default()),
        }
    }

    pub(crate) fn sqlite(conn: Arc<parking_lot::Mutex<rusqlite::Connection>>) -> Self {
        Self {
            backend: Backend::Sqlite(conn),
        }
    }

    /// Every row, or those of `server` (a cache key), ordered by server and tool.
    ///
    /// # Errors
    /// The SQLite file cannot be read.
    pub fn rows(&self, server: Option<&str>) -> Result<Vec<PinRow>, CacheError> {
        let mut rows = match &self.backend {
            Backend::Memory(m) => m
                .lock()
                .values()
                .filter(|r| server.is_none_or(|s| r.server == s))
                .cloned()
                .collect(),
            Backend::Sqlite(conn) => {
                let conn = conn.lock();
                let mut stmt = conn
                    .prepare(&format!("{SELECT} WHERE ?1 IS NULL OR server = ?1"))
                    .map_err(err)?;
                stmt.query_map([server], read_row)
                    .map_err(err)?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(err)?
            }
        };
        rows.sort_by(|a, b| (&a.server, &a.tool).cmp(&(&b.server, &b.tool)));
        Ok(rows)
    }

    /// Writes `row` whole: a tool offered, its pin as it is now and nothing pending.
    pub(crate) fn put(&self, row: &PinRow) -> Result<(), CacheError> {
        self.write(row, Write::Whole)
    }

    /// Records `row`'s pending definition, its markers and reason. The approved definition,
    /// its accepted markers and the twins of a row already kept are left as they are (an
    /// approval another process made meanwhile stands); a new row is written whole.
    pub(crate) fn hold(&self, row: &PinRow) -> Result<(), CacheError> {
        self.write(row, Write::Pending)
    }

    /// Inserts `row`, or updates the kept row's fields that `what` names.
    fn write(&self, row: &PinRow, what: Write) -> Result<(), CacheError> {
        match &self.backend {
            Backend::Memory(m) => {
                let mut m = m.lock();
                let key = (row.server.clone(), row.tool.clone());
                match what {
                    Write::Whole => {
                        m.insert(key, row.clone());
                    }
                    Write::Pending => {
                        let kept = m.entry(key).or_insert_with(|| row.clone());
                        kept.pending.clone_from(&row.pending);
                        kept.pending_markers.clone_from(&row.pending_markers);
                        kept.reason.clone_from(&row.reason);
                    }
                }
                Ok(())
            }
            Backend::Sqlite(conn) => conn
                .lock()
                .execute(
                    match what {
                        Write::Whole => PUT_SQL,
                        Write::Pending => HOLD_SQL,
                    },
                    rusqlite::params![
                        row.server,
                        row.tool,
                        json_text(row.approved.as_ref()),
                        json_text(row.pending.as_ref()),
                        row.reason,
                        list_text(&row.accepted),
                        list_text(&row.twins),
                        list_text(&row.pending_markers),
                    ],
                )
                .map(|_| ())
                .map_err(err),
        }
    }

    /// Accepts the pending definition of `server` (a cache key) / `tool` if it is the one
    /// whose fingerprint is `reviewed`: it becomes the pin, its markers accepted with it, its
    /// twins forgotten.
    ///
    /// # Errors
    /// The store cannot be read or written.
    pub fn approve(
        &self,
        server: &str,
        tool: &str,
        reviewed: &str,
    ) -> Result<Approval, CacheError> {
        let decide = |row: &mut PinRow| -> Approval {
            let Some(pending) = row.pending_fingerprint() else {
                return Approval::NothingPending;
            };
            if !pending.eq_ignore_ascii_case(reviewed) {
                return Approval::Differs { pending };
            }
            row.approved = row.pending.take();
            row.accepted = std::mem::take(&mut row.pending_markers);
            row.twins.clear();
            row.reason = None;
            Approval::Approved
        };
        match &self.backend {
            Backend::Memory(m) => Ok(m
                .lock()
                .get_mut(&(server.to_owned(), tool.to_owned()))
                .map_or(Approval::NothingPending, decide)),
            Backend::Sqlite(conn) => {
                let mut conn = conn.lock();
                let tx = conn
                    .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                    .map_err(err)?;
                let row = {
                    let mut stmt = tx
                        .prepare(&format!("{SELECT} WHERE server = ?1 AND tool = ?2"))
                        .map_err(err)?;
                    let mut rows = stmt.query_map([server, tool], read_row).map_err(err)?;
                    rows.next().transpose().map_err(err)?
                };
                let Some(mut row) = row else {
                    return Ok(Approval::NothingPending);
                };
                let approval = decide(&mut row);
                if approval == Approval::Approved {
                    tx.execute(
                        "UPDATE pins SET approved = ?3, accepted = ?4, twins = NULL,
                             pending = NULL, pending_markers = NULL, reason = NULL
                         WHERE server = ?1 AND tool = ?2",
                        rusqlite::params![
                            server,
                            tool,
                            json_text(row.approved.as_ref()),
                            list_text(&row.accepted),
                        ],
                    )
                    .map_err(err)?;
                    tx.commit().map_err(err)?;
                }
                Ok(approval)
            }
        }
    }

    /// Approves `tool` of every configuration of the server named `server` that holds the
    /// definition `reviewed` in quarantine ([`PinStore::approve`]).
    ///
    /// # Errors
    /// The store cannot be read or written.
    pub fn approve_by_name(
        &self,
        server: &str,
        tool: &str,
        reviewed: &str,
    ) -> Result<Approval, CacheError> {
        let keys: Vec<String> = self
            .rows(None)?
            .into_iter()
            .filter(|r| r.server_name() == server && r.tool == tool && r.pending.is_some())
            .map(|r| r.server)
            .collect();
        let mut outcome = Approval::NothingPending;
        for key in &keys {
            match self.approve(key, tool, reviewed)? {
                Approval::Approved => outcome = Approval::Approved,
                differs @ Approval::Differs { .. } if outcome == Approval::NothingPending => {
                    outcome = differs;
                }
                _ => {}
            }
        }
        Ok(outcome)
    }

    /// The tools in quarantine (optionally of one server name, or one tool of it), each with
    /// the fingerprint an approval must name and what changed field by field since its last
    /// approval: `[{"server", "tool", "reason", "fingerprint", "first_seen", "changes":
    /// [{"field", "before", "after"}]}]`. What `toolforge tools diff` prints and the console
    /// shows.
    ///
    /// # Errors
    /// The store cannot be read.
    pub fn quarantine_report(
        &self,
        server: Option<&str>,
        tool: Option<&str>,
    ) -> Result<Vec<Value>, CacheError> {
        let empty = serde_json::json!({});
        Ok(self
            .rows(None)?
            .iter()
            .filter(|r| {
                r.pending.is_some()
                    && server.is_none_or(|s| r.server_name() == s)
                    && tool.is_none_or(|t| r.tool == t)
            })
            .map(|r| {
                let before = r.approved.as_ref().unwrap_or(&empty);
                let after = r.pending.as_ref().unwrap_or(&empty);
                let changes: Vec<Value> = toolforge_guard::diff(before, after)
                    .into_iter()
                    .map(|c| serde_json::json!({"field": c.path, "before": c.before, "after": c.after}))
                    .collect();
                serde_json::json!({
                    "server": r.server_name(),
                    "tool": r.tool,
                    "reason": r.reason,
                    "fingerprint": r.pending_fingerprint(),
                    "first_seen": r.approved.is_none(),
                    "changes": changes,
                })
            })
            .collect())
    }
}
