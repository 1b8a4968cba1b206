#[cfg(feature = "transport-streamable-http-client-reqwest")]
mod streamable_http_client;
