use serde_json::json;
use toolforge_toolkit::sql::{self, SqlLimits, effective_page_size};

use crate::{ALICE_SQL, seeded_db};

#[test]
fn alice_reference_answer_matches_the_seed() {
    let (_d, db) = seeded_db();
    let page = sql::query(&db, ALICE_SQL, Some(25), None, &SqlLimits::default()).unwrap();
    assert_eq!(
        page.columns,
        [
            "customer_name",
            "order_id",
            "quantity",
            "unit_price",
            "line_total",
            "status"
        ]
    );
    assert_eq!(
        serde_json::to_value(&page.rows[0]).unwrap(),
        json!({"customer_name": "Alice Nguyen", "order_id": 1, "quantity": 1, "unit_price": 59.5, "line_total": 59.5, "status": "completed"})
    );
    assert_eq!(page.row_count_returned, 3);
    assert_eq!(page.total_rows_matched, 3);
    assert!(page.rows.iter().all(|r| r["status"] == "completed"));
    let total: f64 = page
        .rows
        .iter()
        .map(|r| r["line_total"].as_f64().unwrap())
        .sum();
    assert!((total - 334.0).abs() < 1e-9, "total {total}");
    let v = serde_json::to_value(&page).unwrap();
    assert_eq!(v["offset"], 0);
    assert_eq!(v["requested_page_size"], 25);
    assert_eq!(v["effective_page_size"], 25);
    assert_eq!(v["has_more"], false);
    assert_eq!(v["next_offset"], serde_json::Value::Null);
}

#[test]
fn page_size_is_clamped_to_1_25() {
    for (asked, got) in [
        (None, 10),
        (Some(-5), 1),
        (Some(0), 1),
        (Some(1), 1),
        (Some(25), 25),
        (Some(26), 25),
        (Some(i64::MAX), 25),
    ] {
        assert_eq!(effective_page_size(asked), got, "asked {asked:?}");
    }
}

#[test]
fn paging_walks_every_row_exactly_once() {
    let (_d, db) = seeded_db();
    let all = sql::query(
        &db,
        "SELECT order_id FROM orders ORDER BY order_id",
        Some(25),
        None,
        &SqlLimits::default(),
    )
    .unwrap();
    let total = all.total_rows_matched;
    assert!(total > 25, "the sample must need paging, has {total}");
    let mut seen = Vec::new();
    let mut offset = Some(0_u64);
    while let Some(o) = offset {
        let p = sql::query(
            &db,
            "SELECT order_id FROM orders ORDER BY order_id",
            Some(7),
            Some(i64::try_from(o).unwrap()),
            &SqlLimits::default(),
        )
        .unwrap();
        assert_eq!(p.effective_page_size, 7);
        assert_eq!(p.total_rows_matched, total);
        assert_eq!(p.offset, o);
        assert_eq!(p.has_more, p.next_offset.is_some());
        seen.extend(p.rows.iter().map(|r| r["order_id"].as_i64().unwrap()));
        offset = p.next_offset;
    }
    let expected: Vec<i64> = (1..=i64::try_from(total).unwrap()).collect();
    assert_eq!(seen, expected);
}

#[test]
fn offset_past_the_end_is_an_empty_last_page() {
    let (_d, db) = seeded_db();
    let p = sql::query(
        &db,
        "SELECT * FROM customers",
        Some(5),
        Some(1000),
        &SqlLimits::default(),
    )
    .unwrap();
    assert_eq!(p.row_count_returned, 0);
    assert!(!p.has_more);
    assert_eq!(p.next_offset, None);
    assert_eq!(p.total_rows_matched, 12);
}

#[test]
fn seed_has_several_statuses_and_refuses_to_overwrite() {
    let (_d, db) = seeded_db();
    let p = sql::query(
        &db,
        "SELECT DISTINCT status FROM orders ORDER BY status",
        Some(25),
        None,
        &SqlLimits::default(),
    )
    .unwrap();
    assert!(p.row_count_returned >= 4, "{:?}", p.rows);
    assert!(toolforge_toolkit::seed::create(&db).is_err());
}

#[test]
fn with_cte_and_trailing_semicolon_and_comments_are_accepted() {
    let (_d, db) = seeded_db();
    for q in [
        "WITH a AS (SELECT 1 AS x) SELECT x FROM a",
        "SELECT 1 AS x;",
        "-- hello\nSELECT 1 AS x /* c */",
    ] {
        let p = sql::query(&db, q, None, None, &SqlLimits::default())
            .unwrap_or_else(|e| panic!("{q}: {e}"));
        assert_eq!(p.row_count_returned, 1, "{q}");
    }
}

#[test]
fn missing_database_is_a_clear_error_and_is_not_created() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("nope.db");
    let e = sql::query(&path, "SELECT 1", None, None, &SqlLimits::default()).unwrap_err();
    assert!(
        e.to_string().contains("could not be opened read-only"),
        "{e}"
    );
    assert!(!path.exists());
}
