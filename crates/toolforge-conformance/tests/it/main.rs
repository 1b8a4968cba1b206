//! The fixture through a real rmcp client: over `tokio::io::duplex` for the catalog, and
//! through the HTTP router in-process for the DNS-rebinding checks.

mod catalog;
mod http;
