//! At least 30 attempts to write, escape or exhaust: each gets a clear error and the database
//! directory stays byte-identical.

use std::time::Duration;

use toolforge_toolkit::sql::{self, SqlLimits};

use crate::{seeded_db, snapshot};

/// (sql, a fragment the error message must contain, case-insensitive)
const CORPUS: &[(&str, &str)] = &[
    ("DELETE FROM orders", "read-only"),
    ("UPDATE products SET unit_price = 0", "read-only"),
    (
        "INSERT INTO customers VALUES (99,'x','x@x','US','2026-01-01')",
        "read-only",
    ),
    ("REPLACE INTO products VALUES (1,'x','x',0)", "read-only"),
    ("DROP TABLE orders", "read-only"),
    ("CREATE TABLE evil (x)", "read-only"),
    ("CREATE TEMP TABLE evil (x)", "read-only"),
    ("CREATE TEMP VIEW v AS SELECT 1", "read-only"),
    ("CREATE INDEX evil ON orders(status)", "read-only"),
    (
        "CREATE TRIGGER t AFTER INSERT ON orders BEGIN SELECT 1; END",
        "read-only",
    ),
    ("ALTER TABLE orders ADD COLUMN evil TEXT", "read-only"),
    (
        "SELECT 1; DELETE FROM orders",
        "only one read-only select statement",
    ),
    ("SELECT 1; SELECT 2", "one statement"),
    (
        "SELECT 1;; DROP TABLE orders",
        "only one read-only select statement",
    ),
    (
        "WITH x AS (DELETE FROM orders RETURNING *) SELECT * FROM x",
        "error",
    ),
    ("WITH x AS (SELECT 1) DELETE FROM orders", "read-only"),
    (
        "WITH x AS (SELECT 1) INSERT INTO orders SELECT * FROM orders",
        "read-only",
    ),
    ("ATTACH DATABASE 'evil.db' AS evil", "read-only"),
    ("ATTACH ':memory:' AS m", "read-only"),
    ("DETACH DATABASE main", "read-only"),
    ("PRAGMA query_only = OFF", "read-only"),
    ("PRAGMA writable_schema = ON", "read-only"),
    ("PRAGMA journal_mode = DELETE", "read-only"),
    ("PRAGMA user_version = 7", "read-only"),
    ("PRAGMA table_info(orders)", "read-only"),
    ("SELECT * FROM pragma_table_info('orders')", "read-only"),
    ("VACUUM", "read-only"),
    ("VACUUM INTO 'copy.db'", "read-only"),
    ("REINDEX", "read-only"),
    ("ANALYZE", "read-only"),
    ("BEGIN", "read-only"),
    ("SAVEPOINT s", "read-only"),
    ("SELECT load_extension('/tmp/evil.so')", "read-only"),
    ("SELECT writefile('x', 'y')", "no such function"),
    (
        "SELECT * FROM sqlite_temp_master; CREATE TEMP TABLE t(x)",
        "only one read-only select statement",
    ),
    ("", "empty"),
    ("   \n\t ", "empty"),
    ("SELEC * FROM orders", "syntax"),
    ("SELECT * FROM no_such_table", "no such table"),
    (
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT n FROM r",
        "rows",
    ),
    (
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r",
        "time limit",
    ),
    (
        "SELECT count(*) FROM orders a, orders b, orders c, orders d, orders e, orders f",
        "time limit",
    ),
    ("SELECT randomblob(2000000) AS big", "error"),
    (
        "SELECT zeroblob(900000) AS a, zeroblob(900000) AS b",
        "bytes",
    ),
];

#[test]
fn hostile_corpus_is_refused_and_the_database_is_untouched() {
    assert!(CORPUS.len() >= 30);
    let (dir, db) = seeded_db();
    let before = snapshot(dir.path());
    let limits = SqlLimits {
        time_limit: Duration::from_millis(300),
        max_rows_scanned: 10_000,
        max_page_bytes: 1_000_000,
        ..SqlLimits::default()
    };
    for (q, fragment) in CORPUS {
        let err = match sql::query(&db, q, Some(25), None, &limits) {
            Ok(p) => panic!("{q:?} was accepted: {p:?}"),
            Err(e) => e.to_string(),
        };
        assert!(
            err.to_lowercase().contains(&fragment.to_lowercase()),
            "{q:?}: error {err:?} lacks {fragment:?}"
        );
        assert_eq!(
            snapshot(dir.path()),
            before,
            "{q:?} changed the database directory"
        );
    }
    // Still serving after the onslaught.
    let p = sql::query(&db, "SELECT count(*) AS n FROM orders", None, None, &limits).unwrap();
    assert_eq!(p.row_count_returned, 1);
}

#[test]
fn oversized_sql_is_refused_before_sqlite_sees_it() {
    let (_d, db) = seeded_db();
    let q = format!("SELECT '{}'", "a".repeat(20_000));
    let e = sql::query(&db, &q, None, None, &SqlLimits::default()).unwrap_err();
    assert!(e.to_string().contains("limit is"), "{e}");
}

#[test]
fn negative_offset_is_refused() {
    let (_d, db) = seeded_db();
    let e = sql::query(&db, "SELECT 1", None, Some(-1), &SqlLimits::default()).unwrap_err();
    assert!(e.to_string().contains("offset"), "{e}");
}
