//! `sql_query`: read-only SQL with negotiated pagination.
//!
//! Read-only is enforced in layers, never by string matching alone: the connection is opened
//! `SQLITE_OPEN_READ_ONLY`, `PRAGMA query_only` is on, an authorizer allows only reads
//! (`SELECT`, column reads, recursive CTEs, and functions other than `load_extension`), the
//! statement must be exactly one statement and `sqlite3_stmt_readonly`, a progress handler
//! enforces a time limit, and a row cap and byte cap bound the work and the answer.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use serde::Serialize;
use serde_json::{Map, Value};

/// Smallest page a caller can get.
pub const MIN_PAGE_SIZE: i64 = 1;
/// Largest page a caller can get, whatever it asks for (S2-13).
pub const MAX_PAGE_SIZE: i64 = 25;
/// Page size used when the caller does not ask for one.
pub const DEFAULT_PAGE_SIZE: i64 = 10;

/// Limits of one query.
#[derive(Debug, Clone)]
pub struct SqlLimits {
    /// Wall-clock limit for preparing and stepping the statement.
    pub time_limit: Duration,
    /// Rows the statement may produce in total (counted for `total_rows_matched`).
    pub max_rows_scanned: u64,
    /// Bytes of text/blob data a page may carry.
    pub max_page_bytes: usize,
    /// Characters of SQL accepted.
    pub max_sql_len: usize,
}

impl Default for SqlLimits {
    fn default() -> Self {
        Self {
            time_limit: Duration::from_secs(2),
            max_rows_scanned: 100_000,
            max_page_bytes: 256 * 1024,
            max_sql_len: 16 * 1024,
        }
    }
}

/// Why a query was refused or failed. The message is what the caller sees.
#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    #[error("the database could not be opened read-only at {path}: {source}")]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("sql is empty")]
    Empty,
    #[error("sql is {len} characters long; the limit is {limit}")]
    TooLong { len: usize, limit: usize },
    #[error("exactly one statement is allowed; remove everything after the first statement")]
    MultipleStatements,
    #[error("only one read-only SELECT statement is allowed: {0}")]
    NotReadOnly(String),
    #[error("offset must be >= 0, got {0}")]
    NegativeOffset(i64),
    #[error("query exceeded the time limit of {0:?} and was stopped")]
    TimeLimit(Duration),
    #[error("query matched more than {0} rows; narrow it with WHERE or LIMIT")]
    TooManyRows(u64),
    #[error("the page is larger than {0} bytes; ask for fewer rows or columns")]
    TooManyBytes(usize),
    #[error("sql error: {0}")]
    Sqlite(String),
}

/// One page of a query's answer (S2-16..S2-25; field names are the contract).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema, PartialEq)]
pub struct SqlPage {
    pub columns: Vec<String>,
    pub rows: Vec<Map<String, Value>>,
    pub row_count_returned: u64,
    pub total_rows_matched: u64,
    pub offset: u64,
    pub requested_page_size: Option<i64>,
    pub effective_page_size: i64,
    pub has_more: bool,
    pub next_offset: Option<u64>,
}

/// Clamp a requested page size to `[1, 25]` (absent: the default).
#[must_use]
pub fn effective_page_size(requested: Option<i64>) -> i64 {
    requested
        .unwrap_or(DEFAULT_PAGE_SIZE)
        .clamp(MIN_PAGE_SIZE, MAX_PAGE_SIZE)
}

fn authorize(ctx: AuthContext<'_>) -> Authorization {
    match ctx.action {
        AuthAction::Select | AuthAction::Read { .. } | AuthAction::Recursive => {
            Authorization::Allow
        }
        AuthAction::Function { function_name }
            if !function_name.eq_ignore_ascii_case("load_extension") =>
        {
            Authorization::Allow
        }
        _ => Authorization::Deny,
    }
}

/// Open `path` for reading only, with every guard installed.
fn open_guarded(path: &Path, limits: &SqlLimits) -> Result<Connection, SqlError> {
    let open_err = |source| SqlError::Open {
        path: path.to_path_buf(),
        source,
    };
    if !path.is_file() {
        return Err(open_err(rusqlite::Error::InvalidPath(path.to_path_buf())));
    }
    let mut conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(open_err)?;
    conn.execute_batch("PRAGMA query_only = ON; PRAGMA trusted_schema = OFF;")
        .map_err(open_err)?;
    // Extensions stay off (the default; `load_extension` is also denied by the authorizer).
    conn.set_limit(rusqlite::limits::Limit::SQLITE_LIMIT_ATTACHED, 0)
        .map_err(open_err)?;
    conn.set_limit(rusqlite::limits::Limit::SQLITE_LIMIT_LENGTH, 1_000_000)
        .map_err(open_err)?;
    conn.authorizer(Some(authorize)).map_err(open_err)?;
    let deadline = Instant::now() + limits.time_limit;
    conn.progress_handler(1_000, Some(move || Instant::now() > deadline))
        .map_err(open_err)?;
    Ok(conn)
}

fn to_json(v: ValueRef<'_>) -> (Value, usize) {
    match v {
        ValueRef::Null => (Value::Null, 0),
        ValueRef::Integer(i) => (Value::from(i), 8),
        ValueRef::Real(f) => (
            serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
            8,
        ),
        ValueRef::Text(t) => {
            let s = String::from_utf8_lossy(t).into_owned();
            let n = s.len();
            (Value::String(s), n)
        }
        ValueRef::Blob(b) => (Value::String(format!("<blob: {} bytes>", b.len())), b.len()),
    }
}

/// Run one read-only query against the database at `path` and return one page.
///
/// # Errors
/// Any refusal or failure, with a message meant for the caller.
pub fn query(
    path: &Path,
    sql: &str,
    page_size: Option<i64>,
    offset: Option<i64>,
    limits: &SqlLimits,
) -> Result<SqlPage, SqlError> {
    let trimmed = sql.trim();
    if trimmed.is_empty() {
        return Err(SqlError::Empty);
    }
    if sql.len() > limits.max_sql_len {
        return Err(SqlError::TooLong {
            len: sql.len(),
            limit: limits.max_sql_len,
        });
    }
    let offset = offset.unwrap_or(0);
    if offset < 0 {
        return Err(SqlError::NegativeOffset(offset));
    }
    let offset = offset.unsigned_abs();
    let effective = effective_page_size(page_size);
    let conn = open_guarded(path, limits)?;
    let mut stmt = conn.prepare(sql).map_err(|e| classify(&e, limits))?;
    if !stmt.readonly() {
        return Err(SqlError::NotReadOnly("the statement would write".into()));
    }
    let columns: Vec<String> = stmt.column_names().map(str::to_owned).collect();
    if columns.is_empty() {
        return Err(SqlError::NotReadOnly(
            "the statement returns no columns".into(),
        ));
    }
    let mut rows_out = Vec::new();
    let mut bytes = 0usize;
    let mut total: u64 = 0;
    let page_end = offset.saturating_add(effective.unsigned_abs());
    let mut rows = stmt.query([]).map_err(|e| classify(&e, limits))?;
    while let Some(row) = rows.next().map_err(|e| classify(&e, limits))? {
        if total >= offset && total < page_end {
            let mut obj = Map::new();
            for (i, name) in columns.iter().enumerate() {
                let (v, n) = to_json(row.get_ref(i).map_err(|e| classify(&e, limits))?);
                bytes = bytes.saturating_add(n + name.len());
                obj.insert(name.clone(), v);
            }
            if bytes > limits.max_page_bytes {
                return Err(SqlError::TooManyBytes(limits.max_page_bytes));
            }
            rows_out.push(obj);
        }
        total += 1;
        if total > limits.max_rows_scanned {
            return Err(SqlError::TooManyRows(limits.max_rows_scanned));
        }
    }
    let has_more = total > page_end;
    Ok(SqlPage {
        columns,
        row_count_returned: rows_out.len() as u64,
        rows: rows_out,
        total_rows_matched: total,
        offset,
        requested_page_size: page_size,
        effective_page_size: effective,
        has_more,
        next_offset: has_more.then_some(page_end),
    })
}

fn classify(e: &rusqlite::Error, limits: &SqlLimits) -> SqlError {
    match e {
        rusqlite::Error::MultipleStatement => SqlError::MultipleStatements,
        rusqlite::Error::SqliteFailure(f, msg) => match f.code {
            rusqlite::ErrorCode::OperationInterrupted => SqlError::TimeLimit(limits.time_limit),
            rusqlite::ErrorCode::AuthorizationForStatementDenied => SqlError::NotReadOnly(
                msg.clone()
                    .unwrap_or_else(|| "the statement is not authorized".into()),
            ),
            rusqlite::ErrorCode::ReadOnly => {
                SqlError::NotReadOnly("the database is read-only".into())
            }
            _ => match msg {
                Some(m) if m.contains("not authorized") => SqlError::NotReadOnly(m.clone()),
                Some(m) => SqlError::Sqlite(m.clone()),
                None => SqlError::Sqlite(e.to_string()),
            },
        },
        other => {
            let m = other.to_string();
            if m.contains("not authorized") {
                SqlError::NotReadOnly(m)
            } else {
                SqlError::Sqlite(m)
            }
        }
    }
}
