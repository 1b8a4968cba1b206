//! Integration tests of the evals tools against a scripted OpenAI-compatible server on
//! loopback: the adapters and routing, every tool's output shape, errors and limits, the MCP
//! surface in process, and the seed's composition patterns.

mod adapters;
mod fake;
mod mcp;
mod patterns;
mod tools;

use std::sync::Arc;

use serde_json::{Map, Value, json};
use toolforge_evals::{EvalsConfig, Tools};

pub use fake::{Fake, Reply};

/// Installs the TLS provider reqwest is built without.
pub fn tls() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A config with `servers` as LM Studio servers and the default (hashing) embedder.
pub fn config(servers: &[&str]) -> EvalsConfig {
    tls();
    EvalsConfig {
        lm_studio_servers: servers.iter().map(|s| (*s).to_owned()).collect(),
        ..EvalsConfig::default()
    }
}

/// The toolbox over one fake LM Studio server.
pub fn tools_over(fake: &Fake) -> Arc<Tools> {
    Arc::new(Tools::new(&config(&[&fake.url])).expect("tools"))
}

/// A loopback URL nothing listens on.
pub fn dead_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    drop(l);
    url
}

/// The type skeleton of a JSON value: scalars become their type names, arrays the shape of
/// their first element, objects keep their keys (in order). Output shapes are compared as
/// skeletons, values where they are deterministic.
pub fn shape(v: &Value) -> Value {
    match v {
        Value::Null => json!("null"),
        Value::Bool(_) => json!("bool"),
        Value::Number(_) => json!("number"),
        Value::String(_) => json!("string"),
        Value::Array(a) => Value::Array(a.first().map(shape).into_iter().collect()),
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                out.insert(k.clone(), shape(v));
            }
            Value::Object(out)
        }
    }
}

/// The keys of an object, in order.
pub fn keys(v: &Value) -> Vec<String> {
    v.as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}
