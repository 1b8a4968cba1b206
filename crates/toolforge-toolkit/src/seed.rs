//! The bundled sample database (customers, products, orders).
//!
//! Deterministic: the same rows every time, so evaluation answers are reproducible. Alice
//! Nguyen has exactly the seed's three completed orders (59.50 + 178.50 + 96.00 = 334.00).

use std::path::Path;

use rusqlite::Connection;

const SCHEMA: &str = "
CREATE TABLE customers (
    customer_id INTEGER PRIMARY KEY,
    name        TEXT NOT NULL,
    email       TEXT NOT NULL UNIQUE,
    country     TEXT NOT NULL,
    created_at  TEXT NOT NULL
);
CREATE TABLE products (
    product_id INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    category   TEXT NOT NULL,
    unit_price REAL NOT NULL
);
CREATE TABLE orders (
    order_id    INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(customer_id),
    product_id  INTEGER NOT NULL REFERENCES products(product_id),
    quantity    INTEGER NOT NULL CHECK (quantity > 0),
    status      TEXT NOT NULL CHECK (status IN ('completed','pending','shipped','cancelled','refunded')),
    order_date  TEXT NOT NULL
);
CREATE INDEX orders_customer ON orders(customer_id);
";

const CUSTOMERS: &[(&str, &str, &str)] = &[
    ("Alice Nguyen", "alice.nguyen@example.com", "US"),
    ("Bob Martinez", "bob.martinez@example.com", "MX"),
    ("Chloé Dubois", "chloe.dubois@example.com", "FR"),
    ("Daniel Okafor", "daniel.okafor@example.com", "NG"),
    ("Emma Schmidt", "emma.schmidt@example.com", "DE"),
    ("Farhan Rahman", "farhan.rahman@example.com", "BD"),
    ("Grace Kim", "grace.kim@example.com", "KR"),
    ("Hiroshi Tanaka", "hiroshi.tanaka@example.com", "JP"),
    ("Isabella Rossi", "isabella.rossi@example.com", "IT"),
    ("Jack O'Brien", "jack.obrien@example.com", "IE"),
    ("Kavya Iyer", "kavya.iyer@example.com", "IN"),
    ("Liam Johnson", "liam.johnson@example.com", "CA"),
];

const PRODUCTS: &[(&str, &str, f64)] = &[
    ("Ergonomic Mouse", "peripherals", 59.5),
    ("Mechanical Keyboard", "peripherals", 89.25),
    ("USB-C Hub", "accessories", 32.0),
    ("27-inch Monitor", "displays", 279.99),
    ("Laptop Stand", "accessories", 45.0),
    ("Noise-Cancelling Headphones", "audio", 199.0),
    ("Webcam 1080p", "peripherals", 64.9),
    ("Desk Lamp", "office", 38.75),
    ("Portable SSD 1TB", "storage", 119.0),
    ("Cable Organizer", "office", 12.5),
];

const STATUSES: &[&str] = &["completed", "shipped", "pending", "cancelled", "refunded"];

/// Create the sample database at `path`. Fails if the file already exists.
///
/// # Errors
/// The file exists, or SQLite fails.
pub fn create(path: &Path) -> Result<(), rusqlite::Error> {
    if path.exists() {
        return Err(rusqlite::Error::InvalidPath(path.to_path_buf()));
    }
    let tmp = path.with_extension("seeding");
    let _ = std::fs::remove_file(&tmp);
    let mut conn = Connection::open(&tmp)?;
    conn.execute_batch(SCHEMA)?;
    let tx = conn.transaction()?;
    for (i, (name, email, country)) in (1_i64..).zip(CUSTOMERS.iter()) {
        tx.execute(
            "INSERT INTO customers VALUES (?1, ?2, ?3, ?4, ?5)",
            rusqlite::params![
                i,
                name,
                email,
                country,
                format!("2025-{:02}-{:02}", (i - 1) % 12 + 1, (i - 1) % 27 + 1)
            ],
        )?;
    }
    for (i, (name, category, price)) in (1_i64..).zip(PRODUCTS.iter()) {
        tx.execute(
            "INSERT INTO products VALUES (?1, ?2, ?3, ?4)",
            rusqlite::params![i, name, category, price],
        )?;
    }
    // Alice's three completed orders (the seed's reference answer).
    let mut orders: Vec<(u32, u32, u32, &str)> = vec![
        (1, 1, 1, "completed"),
        (1, 2, 2, "completed"),
        (1, 3, 3, "completed"),
    ];
    // Everyone else: a deterministic spread over products, quantities and statuses.
    let mut x: u32 = 7;
    for customer in 2..=u32::try_from(CUSTOMERS.len()).unwrap_or(12) {
        for _ in 0..(customer % 5 + 2) {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345) % 2_147_483_648;
            let product = x % 10 + 1;
            let quantity = (x / 10) % 4 + 1;
            let status = STATUSES[((x / 40) % 5) as usize];
            orders.push((customer, product, quantity, status));
        }
    }
    for (i, (customer, product, quantity, status)) in (1_i64..).zip(orders.iter()) {
        tx.execute(
            "INSERT INTO orders VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            rusqlite::params![
                i,
                customer,
                product,
                quantity,
                status,
                format!("2026-{:02}-{:02}", (i - 1) % 12 + 1, (i - 1) % 28 + 1)
            ],
        )?;
    }
    tx.commit()?;
    drop(conn);
    std::fs::rename(&tmp, path).map_err(|_| rusqlite::Error::InvalidPath(path.to_path_buf()))?;
    Ok(())
}

/// Create the database at `path` unless a file is already there.
///
/// # Errors
/// SQLite fails while creating it.
pub fn ensure(path: &Path) -> Result<bool, rusqlite::Error> {
    if path.exists() {
        return Ok(false);
    }
    create(path).map(|()| true)
}
