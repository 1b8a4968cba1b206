//! `mcp.servers.json`: the shape every MCP client knows, plus toolforge's own keys.
//!
//! Parsed by hand from JSON values (not derived) so every error names the server and the key,
//! and so unknown keys can be reported instead of silently ignored. Variables are expanded from
//! a lookup the binary passes in: this crate never reads the environment.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value};
use toolforge_select::ToolId;

/// Default per-call timeout.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Default start-up (connect + initialize + first listing) timeout per server.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(30);
/// Default wait for the answer to `"auto"`'s `server/discover` probe before falling back to
/// `initialize`. A handshake-era server that answers the unknown method with an error falls back
/// at once; this bounds the wait on one that drops it unanswered, on every (re)connection until
/// its era is known. rmcp's own default is 10 s.
pub const DEFAULT_DISCOVER_TIMEOUT: Duration = Duration::from_secs(3);

/// The whole pool's configuration.
#[derive(Debug, Clone, Default)]
pub struct PoolConfig {
    /// Servers in file order (the priority order).
    pub servers: Vec<ServerConfig>,
    /// Declared overlap groups (`"toolforge": {"overlaps": {...}}`).
    pub overlaps: Vec<(String, Vec<ToolId>)>,
    /// The `"toolforge"` keys other crates read (`prices`, for the agent), as given.
    pub settings: serde_json::Map<String, Value>,
    /// Keys that were present but not understood (reported as warnings by the caller).
    pub warnings: Vec<String>,
}

/// Keys of the top-level `"toolforge"` object.
pub const TOOLFORGE_KEYS: &[&str] = &[
    "broker", "guards", "identity", "limits", "overlaps", "pinning", "pins", "prices",
];

/// One server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub name: String,
    pub transport: Transport,
    pub tags: Vec<String>,
    pub aliases: Vec<String>,
    pub disabled: bool,
    /// Per-call timeout (`timeout`, seconds).
    pub call_timeout: Duration,
    /// Start-up timeout (`startTimeout`, seconds).
    pub start_timeout: Duration,
    /// Which protocol era to speak to it (`protocol`).
    pub protocol: Protocol,
    /// How long `"auto"` waits for the `server/discover` probe's answer (`discoverTimeout`,
    /// seconds).
    pub discover_timeout: Duration,
    /// One connection for every client, or one per client session (`isolation`).
    pub isolation: Isolation,
    /// Every tool of the server may be sent again after a failure that may have reached it
    /// (`retryable`); the operator vouches that its calls are idempotent.
    pub retryable: bool,
    /// The same for these tools only (`retryableTools`).
    pub retryable_tools: Vec<String>,
    /// Why the entry cannot be used (it is then disabled, and `/health` shows this).
    pub disabled_reason: Option<String>,
    /// How its tokens are obtained (`auth`; HTTP servers only).
    pub auth: Option<crate::auth::config::UpstreamAuth>,
}

/// How many connections the pool opens to a server (`"isolation"` in `mcp.servers.json`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Isolation {
    /// `"shared"` (the default): one connection serves every client.
    #[default]
    Shared,
    /// `"session"`: a connection (a process, for stdio) per client session, for stateful
    /// servers and per-user credentials; capped and reaped when idle.
    Session,
}

/// The protocol era the pool speaks to a server (`"protocol"` in `mcp.servers.json`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Protocol {
    /// `"2025-11-25"`: the `initialize` handshake and a session; a server may ask the caller
    /// mid-call (sampling, elicitation, roots), and those requests are relayed to the calling
    /// client (as `input_required` to a 2026-07-28 client).
    Handshake,
    /// `"2026-07-28"`: `server/discover` and self-contained requests; a server that needs input
    /// answers `input_required`, which the gateway relays to its client (as requests on its
    /// call's stream to a handshake-era client).
    Modern,
    /// `"auto"` (the default): 2026-07-28 when the server answers `server/discover`, else the
    /// handshake; the era found is remembered for the server's restarts and shown in
    /// `/health` (`protocol`).
    #[default]
    Auto,
}

/// How to reach a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking MCP on stdin/stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP.
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
    /// The legacy HTTP+SSE transport of 2024-11-05 (`"type": "sse"`): `url` is the event
    /// stream, which names where messages are posted.
    Sse {
        url: String,
        headers: Vec<(String, String)>,
    },
}

/// A configuration error, naming where it is.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("the configuration is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("the configuration must be an object with an \"mcpServers\" object")]
    NoServers,
    #[error("server \"{server}\": {message}")]
    Server { server: String, message: String },
    #[error("\"toolforge\": {0}")]
    Toolforge(String),
}

fn server_err(server: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Server {
        server: server.to_owned(),
        message: message.into(),
    }
}

/// Expands `${VAR}` and `${VAR:-default}` in `text`. A missing variable without a default is
/// an error naming it. `$$` is a literal `$`.
///
/// # Errors
/// A missing variable or an unterminated `${`.
pub fn expand(text: &str, vars: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(stripped) = after.strip_prefix('$') {
            out.push('$');
            rest = stripped;
        } else if let Some(body) = after.strip_prefix('{') {
            let end = body
                .find('}')
                .ok_or_else(|| format!("unterminated \"${{\" in {text:?}"))?;
            let inner = &body[..end];
            let (name, default) = match inner.split_once(":-") {
                Some((n, d)) => (n, Some(d)),
                None => (inner, None),
            };
            let valid = !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit());
            if !valid {
                return Err(format!("\"${{{inner}}}\" is not a variable name"));
            }
            match (vars(name), default) {
                (Some(v), _) => out.push_str(&v),
                (None, Some(d)) => out.push_str(d),
                (None, None) => {
                    return Err(format!(
                        "environment variable {name} is not set (used as ${{{name}}}; \
                         set it or write ${{{name}:-default}})"
                    ));
                }
            }
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

fn string_list(server: &str, key: &str, v: &Value) -> Result<Vec<String>, ConfigError> {
    match v {
        Value::Array(items) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(|s| s.trim().to_owned())
                    .ok_or_else(|| server_err(server, format!("\"{key}\" must list strings")))
            })
            .filter(|r| r.as_ref().map_or(true, |s| !s.is_empty()))
            .collect(),
        Value::String(s) => Ok(s
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()),
        _ => Err(server_err(
            server,
            format!("\"{key}\" must be a list of strings"),
        )),
    }
}

fn string_map(
    server: &str,
    key: &str,
    v: &Value,
    vars: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>, ConfigError> {
    let Value::Object(map) = v else {
        return Err(server_err(server, format!("\"{key}\" must be an object")));
    };
    map.iter()
        .map(|(k, v)| {
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                _ => {
                    return Err(server_err(
                        server,
                        format!("\"{key}.{k}\" must be a string"),
                    ));
                }
            };
            let text =
                expand(&text, vars).map_err(|m| server_err(server, format!("{key}.{k}: {m}")))?;
            Ok((k.clone(), text))
        })
        .collect()
}

fn seconds(server: &str, key: &str, v: &Value) -> Result<Duration, ConfigError> {
    v.as_f64()
        .filter(|s| s.is_finite() && *s > 0.0 && *s <= 86_400.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| {
            server_err(
                server,
                format!("\"{key}\" must be a number of seconds in (0, 86400]"),
            )
        })
}

const SERVER_KEYS: &[&str] = &[
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "type",
    "transport",
    "tags",
    "aliases",
    "disabled",
    "timeout",
    "startTimeout",
    "description",
    "protocol",
    "discoverTimeout",
    "isolation",
    "retryable",
    "retryableTools",
    "auth",
];

fn parse_server(
    name: &str,
    v: &Value,
    vars: &dyn Fn(&str) -> Option<String>,
    warnings: &mut Vec<String>,
) -> Result<ServerConfig, ConfigError> {
    let Value::Object(obj) = v else {
        return Err(server_err(name, "must be an object"));
    };
    if name.is_empty() || name.contains('/') || name.contains("__") || name.len() > 64 {
        return Err(server_err(
            name,
            "server names must be 1-64 characters without \"/\" or \"__\"",
        ));
    }
    for key in obj.keys() {
        if !SERVER_KEYS.contains(&key.as_str()) {
            warnings.push(format!("server \"{name}\": unknown key \"{key}\" ignored"));
        }
    }
    let ex = |s: &str| expand(s, vars).map_err(|m| server_err(name, m));
    let kind = obj
        .get("type")
        .or_else(|| obj.get("transport"))
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase);
    let transport = match (obj.get("command"), obj.get("url")) {
        (Some(_), Some(_)) => {
            return Err(server_err(
                name,
                "give either \"command\" or \"url\", not both",
            ));
        }
        (Some(cmd), None) => {
            let command = cmd
                .as_str()
                .filter(|s| !s.trim().is_empty())
                .ok_or_else(|| server_err(name, "\"command\" must be a non-empty string"))?;
            let args = match obj.get("args") {
                None => Vec::new(),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|a| {
                        a.as_str()
                            .ok_or_else(|| server_err(name, "\"args\" must list strings"))
                            .and_then(ex)
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err(server_err(name, "\"args\" must be a list of strings")),
            };
            let env = match obj.get("env") {
                None => Vec::new(),
                Some(e) => string_map(name, "env", e, vars)?,
            };
            let cwd = match obj.get("cwd") {
                None => None,
                Some(Value::String(s)) => Some(PathBuf::from(ex(s)?)),
                Some(_) => return Err(server_err(name, "\"cwd\" must be a string")),
            };
            Transport::Stdio {
                command: ex(command)?,
                args,
                env,
                cwd,
            }
        }
        (None, Some(url)) => {
            let url = ex(url
                .as_str()
                .ok_or_else(|| server_err(name, "\"url\" must be a string"))?)?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(server_err(name, format!("\"url\" must be http(s): {url}")));
            }
            let headers = match obj.get("headers") {
                None => Vec::new(),
                Some(h) => string_map(name, "headers", h, vars)?,
            };
            match kind.as_deref() {
                Some("sse") => Transport::Sse { url, headers },
                None | Some("http" | "streamable-http" | "streamablehttp" | "streamable_http") => {
                    Transport::Http { url, headers }
                }
                Some(other) => {
                    return Err(server_err(
                        name,
                        format!(
                            "\"type\" {other:?} is not a transport of a \"url\": give \"sse\" \
                             (the legacy HTTP+SSE transport) or leave it out (Streamable HTTP)"
                        ),
                    ));
                }
            }
        }
        (None, None) => {
            return Err(server_err(
                name,
                "needs \"command\" (stdio) or \"url\" (Streamable HTTP; with \"type\": \"sse\", the legacy HTTP+SSE transport)",
            ));
        }
    };
    let list = |key: &str| -> Result<Vec<String>, ConfigError> {
        obj.get(key)
            .map_or(Ok(Vec::new()), |v| string_list(name, key, v))
    };
    if matches!(transport, Transport::Stdio { .. }) && kind.as_deref().is_some_and(|k| k != "stdio")
    {
        return Err(server_err(
            name,
            "a \"command\" is a stdio server: its \"type\" can only be \"stdio\"",
        ));
    }
    let auth = match (obj.get("auth"), &transport) {
        (None, _) => None,
        (Some(v), Transport::Http { url, headers }) => {
            if headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
            {
                return Err(server_err(
                    name,
                    "give either \"auth\" or an Authorization header, not both",
                ));
            }
            let mut notes = Vec::new();
            let auth = crate::auth::config::parse(v, url, &ex_text(name, vars), &mut notes)
                .map_err(|m| server_err(name, m))?;
            warnings.extend(notes.into_iter().map(|n| format!("server \"{name}\": {n}")));
            Some(auth)
        }
        (Some(_), Transport::Sse { .. }) => {
            return Err(server_err(
                name,
                "\"auth\" is for Streamable HTTP servers; a legacy HTTP+SSE server (\"type\": \"sse\") takes an Authorization header in \"headers\"",
            ));
        }
        (Some(_), Transport::Stdio { .. }) => {
            return Err(server_err(
                name,
                "\"auth\" is for Streamable HTTP servers (\"url\"); a stdio server takes \"env\"",
            ));
        }
    };
    let legacy_sse = matches!(transport, Transport::Sse { .. });
    Ok(ServerConfig {
        name: name.to_owned(),
        transport,
        tags: list("tags")?,
        aliases: list("aliases")?,
        disabled: match obj.get("disabled") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(server_err(name, "\"disabled\" must be true or false")),
        },
        retryable: match obj.get("retryable") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(server_err(name, "\"retryable\" must be true or false")),
        },
        retryable_tools: list("retryableTools")?,
        call_timeout: obj
            .get("timeout")
            .map_or(Ok(DEFAULT_CALL_TIMEOUT), |v| seconds(name, "timeout", v))?,
        start_timeout: obj
            .get("startTimeout")
            .map_or(Ok(DEFAULT_START_TIMEOUT), |v| {
                seconds(name, "startTimeout", v)
            })?,
        discover_timeout: obj
            .get("discoverTimeout")
            .map_or(Ok(DEFAULT_DISCOVER_TIMEOUT), |v| {
                seconds(name, "discoverTimeout", v)
            })?,
        isolation: match obj.get("isolation").map(|v| v.as_str()) {
            None | Some(Some("shared")) => Isolation::Shared,
            Some(Some("session")) => Isolation::Session,
            Some(_) => {
                return Err(server_err(
                    name,
                    "\"isolation\" must be \"shared\" (the default) or \"session\"",
                ));
            }
        },
        protocol: match obj.get("protocol").map(|v| v.as_str()) {
            Some(Some("2025-11-25")) => Protocol::Handshake,
            Some(Some("2026-07-28")) if legacy_sse => {
                return Err(server_err(
                    name,
                    "the legacy HTTP+SSE transport (\"type\": \"sse\") has sessions, which \
                     2026-07-28 does not: give \"protocol\" \"2025-11-25\" or \"auto\"",
                ));
            }
            // The legacy transport only knows `initialize`: nothing to probe.
            None | Some(Some("auto")) if legacy_sse => Protocol::Handshake,
            Some(Some("2026-07-28")) => Protocol::Modern,
            None | Some(Some("auto")) => Protocol::Auto,
            Some(_) => {
                return Err(server_err(
                    name,
                    "\"protocol\" must be \"auto\" (the default), \"2025-11-25\" or \"2026-07-28\"",
                ));
            }
        },
        disabled_reason: None,
        auth,
    })
}

/// Expands one string of `server`'s entry.
fn ex_text<'a>(
    _server: &'a str,
    vars: &'a dyn Fn(&str) -> Option<String>,
) -> impl Fn(&str) -> Result<String, String> + 'a {
    move |s| expand(s, vars)
}

fn parse_overlaps(v: &Value) -> Result<Vec<(String, Vec<ToolId>)>, ConfigError> {
    let Value::Object(groups) = v else {
        return Err(ConfigError::Toolforge(
            "\"overlaps\" must be an object of group name -> [\"server/tool\", ...]".into(),
        ));
    };
    groups
        .iter()
        .map(|(group, members)| {
            let Value::Array(members) = members else {
                return Err(ConfigError::Toolforge(format!(
                    "overlap group \"{group}\" must list \"server/tool\" strings"
                )));
            };
            let ids = members
                .iter()
                .map(|m| {
                    m.as_str().and_then(ToolId::parse).ok_or_else(|| {
                        ConfigError::Toolforge(format!(
                            "overlap group \"{group}\": {m} is not \"server/tool\""
                        ))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok((group.clone(), ids))
        })
        .collect()
}

/// Parses a configuration text. `vars` looks up variables for `${VAR}` expansion.
///
/// # Errors
/// Invalid JSON, a missing `mcpServers`, or any invalid server entry (named in the message).
pub fn parse(text: &str, vars: &dyn Fn(&str) -> Option<String>) -> Result<PoolConfig, ConfigError> {
    let root: Value = serde_json::from_str(text)?;
    let Some(root) = root.as_object() else {
        return Err(ConfigError::NoServers);
    };
    let Some(Value::Object(servers)) = root.get("mcpServers") else {
        return Err(ConfigError::NoServers);
    };
    let mut warnings = Vec::new();
    for key in root.keys() {
        if key != "mcpServers" && key != "toolforge" && key != "$schema" {
            warnings.push(format!("unknown top-level key \"{key}\" ignored"));
        }
    }
    let servers = servers
        .iter()
        .map(|(name, v)| parse_server(name, v, vars, &mut warnings))
        .collect::<Result<Vec<_>, _>>()?;
    let mut settings = serde_json::Map::new();
    let overlaps = match root.get("toolforge") {
        None => Vec::new(),
        Some(Value::Object(tf)) => {
            for (key, value) in tf {
                if !TOOLFORGE_KEYS.contains(&key.as_str()) {
                    warnings.push(format!("\"toolforge\": unknown key \"{key}\" ignored"));
                } else if key != "overlaps" {
                    settings.insert(key.clone(), value.clone());
                }
            }
            if tf.get("pinning").is_some_and(|v| !v.is_boolean()) {
                return Err(ConfigError::Toolforge(
                    "\"pinning\" must be true or false".into(),
                ));
            }
            toolforge_guard::GuardSettings::from_value(tf.get("guards"))
                .map_err(ConfigError::Toolforge)?;
            if let Some(pins) = tf.get("pins") {
                let names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
                toolforge_select::pins::from_config(pins, &names)
                    .map_err(ConfigError::Toolforge)?;
            }
            tf.get("overlaps").map_or(Ok(Vec::new()), parse_overlaps)?
        }
        Some(_) => return Err(ConfigError::Toolforge("must be an object".into())),
    };
    Ok(PoolConfig {
        servers,
        overlaps,
        settings,
        warnings,
    })
}

/// A config with one object: handy for tests and for `Map` built in code.
#[must_use]
pub fn servers_object(entries: &[(&str, Value)]) -> Value {
    let mut servers = Map::new();
    for (name, v) in entries {
        servers.insert((*name).to_owned(), v.clone());
    }
    serde_json::json!({ "mcpServers": servers })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars(name: &str) -> Option<String> {
        match name {
            "HOME_DIR" => Some("/home/u".into()),
            "TOKEN" => Some("s3cret".into()),
            _ => None,
        }
    }

    #[test]
    fn expansion_table() {
        let cases = [
            ("plain", Ok("plain")),
            ("${HOME_DIR}/x", Ok("/home/u/x")),
            ("a${MISSING:-dflt}b", Ok("adfltb")),
            ("$$HOME_DIR", Ok("$HOME_DIR")),
            ("cost $5", Ok("cost $5")),
            ("${MISSING}", Err("MISSING is not set")),
            ("${HOME_DIR", Err("unterminated")),
            ("${1BAD}", Err("not a variable name")),
        ];
        for (input, want) in cases {
            let got = expand(input, &vars);
            match (want, got) {
                (Ok(w), Ok(g)) => assert_eq!(g, w, "{input}"),
                (Err(w), Err(g)) => assert!(g.contains(w), "{input}: {g}"),
                (w, g) => panic!("{input}: wanted {w:?}, got {g:?}"),
            }
        }
    }

    #[test]
    fn order_fields_and_overlaps() {
        let text = json!({
            "mcpServers": {
                "zeta": {"command": "z", "args": ["--root", "${HOME_DIR}"], "env": {"K": "${TOKEN}"},
                          "tags": ["fs", " read "], "aliases": "z1, z2", "timeout": 5},
                "alpha": {"url": "https://example.test/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"},
                          "disabled": true, "extra": 1}
            },
            "toolforge": {"overlaps": {"read": ["zeta/read_file", "alpha/get_file"]}}
        })
        .to_string();
        let cfg = parse(&text, &vars).expect("valid");
        let names: Vec<_> = cfg.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["zeta", "alpha"], "file order is kept");
        let zeta = &cfg.servers[0];
        assert_eq!(
            zeta.transport,
            Transport::Stdio {
                command: "z".into(),
                args: vec!["--root".into(), "/home/u".into()],
                env: vec![("K".into(), "s3cret".into())],
                cwd: None
            }
        );
        assert_eq!(zeta.tags, ["fs", "read"]);
        assert_eq!(zeta.aliases, ["z1", "z2"]);
        assert_eq!(zeta.call_timeout, Duration::from_secs(5));
        assert!(cfg.servers[1].disabled);
        assert_eq!(
            cfg.servers[1].transport,
            Transport::Http {
                url: "https://example.test/mcp".into(),
                headers: vec![("Authorization".into(), "Bearer s3cret".into())]
            }
        );
        assert_eq!(cfg.overlaps[0].0, "read");
        assert_eq!(cfg.overlaps[0].1[1], ToolId::new("alpha", "get_file"));
        assert_eq!(
            cfg.warnings,
            ["server \"alpha\": unknown key \"extra\" ignored"]
        );
    }

    #[test]
    fn errors_name_the_server_and_the_problem() {
        let cases = [
            (json!([]), "mcpServers"),
            (
                json!({"mcpServers": {"a": {}}}),
                "server \"a\": needs \"command\"",
            ),
            (
                json!({"mcpServers": {"a": {"command": "x", "url": "http://h"}}}),
                "not both",
            ),
            (
                json!({"mcpServers": {"a": {"command": "x", "env": {"K": "${NOPE}"}}}}),
                "NOPE is not set",
            ),
            (
                json!({"mcpServers": {"a": {"url": "ftp://h"}}}),
                "must be http(s)",
            ),
            (
                json!({"mcpServers": {"a": {"command": "x", "timeout": -1}}}),
                "\"timeout\"",
            ),
            (
                json!({"mcpServers": {"a": {"command": "x", "discoverTimeout": "3"}}}),
                "\"discoverTimeout\" must be a number of seconds",
            ),
            (
                json!({"mcpServers": {"a__b": {"command": "x"}}}),
                "server names",
            ),
            (
                json!({"mcpServers": {}, "toolforge": {"overlaps": {"g": ["nope"]}}}),
                "not \"server/tool\"",
            ),
            (
                json!({"mcpServers": {"a": {"command": "x"}}, "toolforge": {"pins": ["b/*"]}}),
                "\"toolforge\": \"pins\": pin \"b/*\" names no server",
            ),
            (
                json!({"mcpServers": {"a": {"command": "x"}}, "toolforge": {"pins": ["a/x*"]}}),
                "only \"*\" alone",
            ),
        ];
        for (cfg, want) in cases {
            let err = parse(&cfg.to_string(), &vars).expect_err(want).to_string();
            assert!(err.contains(want), "{cfg}: {err}");
        }
        assert!(parse("{not json", &vars).is_err());
    }

    #[test]
    fn a_legacy_sse_entry_is_its_own_transport() {
        let text = json!({"mcpServers": {
            "old": {"url": "http://h/sse", "type": "sse", "headers": {"X-Key": "k"}},
            "new": {"url": "http://h/mcp", "type": "http"},
            "local": {"command": "srv", "type": "stdio"}
        }})
        .to_string();
        let cfg = parse(&text, &vars).expect("valid");
        assert_eq!(
            cfg.servers[0].transport,
            Transport::Sse {
                url: "http://h/sse".into(),
                headers: vec![("X-Key".into(), "k".into())]
            }
        );
        assert!(!cfg.servers[0].disabled && cfg.servers[0].disabled_reason.is_none());
        assert!(matches!(cfg.servers[1].transport, Transport::Http { .. }));
        assert!(matches!(cfg.servers[2].transport, Transport::Stdio { .. }));
        assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
        for (entry, want) in [
            (
                json!({"url": "http://h/x", "type": "websocket"}),
                "is not a transport",
            ),
            (
                json!({"command": "srv", "type": "sse"}),
                "can only be \"stdio\"",
            ),
            (
                json!({"url": "http://h/sse", "type": "sse", "protocol": "2026-07-28"}),
                "has sessions",
            ),
        ] {
            let text = json!({"mcpServers": {"s": entry}}).to_string();
            let err = parse(&text, &vars).expect_err(want).to_string();
            assert!(err.contains(want), "{entry}: {err}");
        }
    }

    #[test]
    fn retryable_server_and_tools() {
        let text = json!({"mcpServers": {
            "a": {"command": "x", "retryable": true},
            "b": {"command": "x", "retryableTools": ["get", "list"]},
            "c": {"command": "x"}
        }})
        .to_string();
        let cfg = parse(&text, &vars).expect("valid");
        assert!(cfg.servers[0].retryable && cfg.servers[0].retryable_tools.is_empty());
        assert!(!cfg.servers[1].retryable);
        assert_eq!(cfg.servers[1].retryable_tools, ["get", "list"]);
        assert!(!cfg.servers[2].retryable && cfg.servers[2].retryable_tools.is_empty());
        assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
        let bad = json!({"mcpServers": {"a": {"command": "x", "retryable": "yes"}}}).to_string();
        let err = parse(&bad, &vars).expect_err("not a boolean").to_string();
        assert!(err.contains("\"retryable\" must be true or false"), "{err}");
    }
}
