#[cfg(feature = "transport-streamable-http-client")]
mod streamable_http_client;
