//! Offer pins: tools an offer shows whatever their rank.
//!
//! An operator pins `"server/tool"` or `"server/*"` (every tool of the server) in the servers
//! configuration; the agent may add learned pins (tools the asker called in its recent runs).
//! A pin lifts a tool past the ranking and the cap, never past visibility (the caller's visible
//! set), policy, or an exclude rule: deny always wins. Each pinned tool's offer says which pin
//! brought it in.

use std::fmt;

use serde::Serialize;

use crate::catalog::ToolId;

/// What a pin names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PinPattern {
    /// `server/tool`.
    Tool(ToolId),
    /// `server/*`: every tool of the server.
    Server(String),
}

/// Why a pin text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("pin {text:?}: {reason}; a pin is \"server/tool\" or \"server/*\"")]
pub struct PinError {
    pub text: String,
    pub reason: &'static str,
}

impl PinPattern {
    /// Parses `server/tool` or `server/*`.
    ///
    /// # Errors
    /// [`PinError`] when the text is not one of the two forms (no `/`, an empty side, a `*`
    /// anywhere but as the whole tool part, surrounding whitespace).
    pub fn parse(text: &str) -> Result<Self, PinError> {
        let refuse = |reason| PinError {
            text: text.to_owned(),
            reason,
        };
        if text.trim() != text {
            return Err(refuse("it has spaces around it"));
        }
        let Some((server, tool)) = text.split_once('/') else {
            return Err(refuse("it names no server"));
        };
        if server.is_empty() {
            return Err(refuse("the server part is empty"));
        }
        if tool.is_empty() {
            return Err(refuse("the tool part is empty"));
        }
        if server.contains('*') {
            return Err(refuse("a server cannot be a pattern"));
        }
        if tool == "*" {
            return Ok(Self::Server(server.to_owned()));
        }
        if tool.contains('*') {
            return Err(refuse("only \"*\" alone pins every tool of a server"));
        }
        Ok(Self::Tool(ToolId::new(server, tool)))
    }

    /// The server it names.
    #[must_use]
    pub fn server(&self) -> &str {
        match self {
            Self::Tool(id) => &id.server,
            Self::Server(server) => server,
        }
    }

    /// True when it names `id`.
    #[must_use]
    pub fn matches(&self, id: &ToolId) -> bool {
        match self {
            Self::Tool(pinned) => pinned == id,
            Self::Server(server) => *server == id.server,
        }
    }
}

impl fmt::Display for PinPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Tool(id) => write!(f, "{id}"),
            Self::Server(server) => write!(f, "{server}/*"),
        }
    }
}

/// Who pinned a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum PinSource {
    /// The operator (`"toolforge": {"pins": [...]}`).
    Operator,
    /// Learned: the asker called it `calls` times in its recent runs.
    Learned { calls: u32 },
}

/// One pin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    pub pattern: PinPattern,
    pub source: PinSource,
}

impl Pin {
    /// An operator's pin.
    #[must_use]
    pub fn operator(pattern: PinPattern) -> Self {
        Self {
            pattern,
            source: PinSource::Operator,
        }
    }

    /// A learned pin of one tool called `calls` times.
    #[must_use]
    pub fn learned(tool: ToolId, calls: u32) -> Self {
        Self {
            pattern: PinPattern::Tool(tool),
            source: PinSource::Learned { calls },
        }
    }

    /// How an offer explains a tool this pin brought in.
    #[must_use]
    pub fn rule(&self) -> String {
        match self.source {
            PinSource::Operator => format!("pinned by the operator ({})", self.pattern),
            PinSource::Learned { calls } => format!(
                "learned pin: called {calls} time{} in recent runs",
                if calls == 1 { "" } else { "s" }
            ),
        }
    }
}

/// Parses an operator's pin list, refusing the first bad entry and duplicates.
///
/// # Errors
/// The first entry that is not `server/tool` or `server/*`, or that repeats an earlier one.
pub fn parse_pins<'a>(texts: impl IntoIterator<Item = &'a str>) -> Result<Vec<Pin>, PinError> {
    let mut pins: Vec<Pin> = Vec::new();
    for text in texts {
        let pattern = PinPattern::parse(text)?;
        if pins.iter().any(|p| p.pattern == pattern) {
            return Err(PinError {
                text: text.to_owned(),
                reason: "it is listed twice",
            });
        }
        pins.push(Pin::operator(pattern));
    }
    Ok(pins)
}

/// The operator's pins from the servers configuration's `"toolforge": {"pins": [...]}`: a list
/// of `"server/tool"` or `"server/*"` strings, each naming a configured server (`servers`).
///
/// # Errors
/// A message naming the entry and what is wrong with it.
pub fn from_config(value: &serde_json::Value, servers: &[&str]) -> Result<Vec<Pin>, String> {
    let Some(list) = value.as_array() else {
        return Err("\"pins\" must be a list of \"server/tool\" or \"server/*\" strings".into());
    };
    let mut texts = Vec::with_capacity(list.len());
    for entry in list {
        let Some(text) = entry.as_str() else {
            return Err(format!(
                "\"pins\": {entry} is not a string (\"server/tool\" or \"server/*\")"
            ));
        };
        texts.push(text);
    }
    let pins = parse_pins(texts).map_err(|e| format!("\"pins\": {e}"))?;
    if let Some(pin) = pins.iter().find(|p| !servers.contains(&p.pattern.server())) {
        return Err(format!(
            "\"pins\": pin \"{}\" names no server of \"mcpServers\" (servers: {})",
            pin.pattern,
            servers.join(", ")
        ));
    }
    Ok(pins)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pin_texts_table() {
        let tool = |s: &str, t: &str| -> Result<PinPattern, &str> {
            Ok(PinPattern::Tool(ToolId::new(s, t)))
        };
        let cases: &[(&str, Result<PinPattern, &str>)] = &[
            ("github/create_issue", tool("github", "create_issue")),
            ("github/*", Ok(PinPattern::Server("github".into()))),
            ("a/b/c", tool("a", "b/c")),
            ("github", Err("it names no server")),
            ("/x", Err("the server part is empty")),
            ("github/", Err("the tool part is empty")),
            ("*/x", Err("a server cannot be a pattern")),
            (
                "github/create_*",
                Err("only \"*\" alone pins every tool of a server"),
            ),
            (" github/x", Err("it has spaces around it")),
        ];
        for (text, want) in cases {
            let got = PinPattern::parse(text).map_err(|e| e.reason);
            assert_eq!(&got, want, "{text}");
        }
        let e = PinPattern::parse("github").unwrap_err().to_string();
        assert_eq!(
            e,
            "pin \"github\": it names no server; a pin is \"server/tool\" or \"server/*\""
        );
    }

    #[test]
    fn config_lists_are_checked_against_the_servers() {
        let servers = ["github", "fs"];
        let pins = from_config(&serde_json::json!(["github/*", "fs/read_file"]), &servers).unwrap();
        assert_eq!(pins.len(), 2);
        let err = |v: serde_json::Value| from_config(&v, &servers).unwrap_err();
        assert_eq!(
            err(serde_json::json!(["gitlab/*"])),
            "\"pins\": pin \"gitlab/*\" names no server of \"mcpServers\" (servers: github, fs)"
        );
        assert!(err(serde_json::json!("github/*")).contains("must be a list"));
        assert!(err(serde_json::json!([3])).contains("3 is not a string"));
        assert!(err(serde_json::json!(["github"])).contains("names no server; a pin is"));
    }

    #[test]
    fn patterns_match_and_explain_themselves() {
        let id = ToolId::new("github", "create_issue");
        assert!(PinPattern::Server("github".into()).matches(&id));
        assert!(!PinPattern::Server("git".into()).matches(&id));
        assert!(PinPattern::Tool(id.clone()).matches(&id));
        let pins = parse_pins(["github/*", "fs/read_file"]).unwrap();
        assert_eq!(pins[0].rule(), "pinned by the operator (github/*)");
        assert_eq!(
            Pin::learned(id, 3).rule(),
            "learned pin: called 3 times in recent runs"
        );
        assert_eq!(
            parse_pins(["a/b", "a/b"]).unwrap_err().reason,
            "it is listed twice"
        );
    }
}
