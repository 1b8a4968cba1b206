//! The fixture through a real rmcp client: over `tokio::io::duplex` for the catalog, and
//! through the HTTP router in-process for the DNS-rebinding checks and for protocol 2026-07-28
//! (self-contained requests, MRTR, routing headers); the Skills extension's files against the
//! digests and sizes its entries promise; the Tasks extension's tasks.

mod catalog;
mod http;
mod modern;
mod skills;
mod tasks;
