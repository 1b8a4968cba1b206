//! Rules: which tools a request with a given intent sees.
//!
//! Rule text is parsed here (YAML or JSON, chosen by file extension); the binary reads files.
//! Every glob is validated at load so a bad pattern fails loudly once, not on each selection.
//!
//! go-toolbroker's own rule files load unchanged: `match: {patterns: [...]}` (tool-name
//! patterns, the same as our `tools`), `action: {type: exclude}` as well as `action: exclude`,
//! and keys in any case (`"Rules"`, `"Match"`, `"Patterns"`), as Go's `encoding/json` matches
//! them. Our `servers` and `tags` matchers are additions.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use thiserror::Error;

use super::pattern::{self, Compiled, PatternError};
use crate::catalog::Tool;

/// What a rule does to the tools it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Show the tools.
    Include,
    /// Hide the tools; an applicable exclude always wins over any include.
    Exclude,
    /// Like include, but the tools are returned marked as summarized.
    Summarize,
}

impl Action {
    /// The action as rule files spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Include => "include",
            Self::Exclude => "exclude",
            Self::Summarize => "summarize",
        }
    }
}

/// Which tools a rule applies to; empty lists are ignored, a tool matches if any list matches.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Match {
    /// Tool-name patterns (Go `path.Match` plus the `prefix*` fallback).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// go-toolbroker's name for tool-name patterns; the same as `tools`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patterns: Vec<String>,
    /// Server-name patterns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<String>,
    /// Exact tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

/// One rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Name, quoted in the rationale.
    pub name: String,
    /// Intent glob; empty or `*` applies to every intent.
    #[serde(default)]
    pub intent: String,
    /// Higher runs first; orders included tools.
    #[serde(default)]
    pub priority: i32,
    /// What the rule matches.
    #[serde(rename = "match", default)]
    pub matcher: Match,
    /// What it does.
    pub action: Action,
}

/// A rule set (the seed's `Config {rules}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rules {
    /// The rules, in file order.
    #[serde(default)]
    pub rules: Vec<Rule>,
}

/// Why a rule set failed to load.
#[derive(Debug, Error)]
pub enum RulesError {
    /// YAML syntax.
    #[error("rules YAML: {0}")]
    Yaml(#[from] yaml_serde::Error),
    /// JSON syntax.
    #[error("rules JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A well-formed file whose content is not a rule set (a missing name or action, an
    /// unknown action or key).
    #[error("rules: {0}")]
    Shape(serde_json::Error),
    /// A malformed glob in a named rule.
    #[error("rule {rule:?}: {source}")]
    Pattern {
        /// The rule.
        rule: String,
        /// The pattern problem.
        source: PatternError,
    },
    /// The file extension is neither YAML nor JSON.
    #[error("rules file {0:?}: extension must be .yaml, .yml or .json")]
    Extension(String),
}

const DEFAULT_RULES_YAML: &str = include_str!("default-rules.yaml");

impl Rules {
    /// Parses YAML rule text and validates every pattern.
    pub fn from_yaml_str(text: &str) -> Result<Self, RulesError> {
        Self::from_value(yaml_serde::from_str(text)?)
    }

    /// Parses JSON rule text and validates every pattern.
    pub fn from_json_str(text: &str) -> Result<Self, RulesError> {
        Self::from_value(serde_json::from_str(text)?)
    }

    /// A parsed rule file in either dialect (ours or go-toolbroker's, module docs).
    fn from_value(value: Value) -> Result<Self, RulesError> {
        if value.is_null() {
            return Ok(Self::default()); // an empty file: no rules
        }
        let rules: Self = serde_json::from_value(go_dialect(value)).map_err(RulesError::Shape)?;
        rules.validate()?;
        Ok(rules)
    }

    /// Parses `text` read from `path_name`, choosing the format from its extension.
    pub fn from_path_text(path_name: &str, text: &str) -> Result<Self, RulesError> {
        let lower = path_name.to_ascii_lowercase();
        if lower.ends_with(".json") {
            Self::from_json_str(text)
        } else if lower.ends_with(".yaml") || lower.ends_with(".yml") {
            Self::from_yaml_str(text)
        } else {
            Err(RulesError::Extension(path_name.to_owned()))
        }
    }

    /// The embedded example rule set for a filesystem/github/git/toolkit pool.
    pub fn default_rules() -> Self {
        Self::from_yaml_str(DEFAULT_RULES_YAML).expect("embedded default-rules.yaml is valid")
    }

    fn validate(&self) -> Result<(), RulesError> {
        for rule in &self.rules {
            let m = &rule.matcher;
            for p in std::iter::once(&rule.intent)
                .chain(&m.tools)
                .chain(&m.patterns)
                .chain(&m.servers)
            {
                pattern::validate(p).map_err(|source| RulesError::Pattern {
                    rule: rule.name.clone(),
                    source,
                })?;
            }
        }
        Ok(())
    }
}

impl Rule {
    /// Does this rule apply to `intent`? (Patterns were validated at load.)
    pub fn applies_to(&self, intent: &str) -> bool {
        self.intent.is_empty() || pattern::matches(&self.intent, intent).unwrap_or(false)
    }

    /// Does this rule match `tool`?
    pub fn matches_tool(&self, tool: &Tool) -> bool {
        let m = &self.matcher;
        let any =
            |pats: &[String], s: &str| pats.iter().any(|p| pattern::matches(p, s).unwrap_or(false));
        any(&m.tools, &tool.name)
            || any(&m.patterns, &tool.name)
            || any(&m.servers, &tool.server)
            || m.tags.iter().any(|t| tool.tags.contains(t))
    }

    /// [`Rule::matches_tool`] with the patterns sorted once, for matching many tools.
    pub(crate) fn tool_matcher(&self) -> impl Fn(&Tool) -> bool + '_ {
        let m = &self.matcher;
        let tools: Vec<Compiled<'_>> = m
            .tools
            .iter()
            .chain(&m.patterns)
            .map(|p| Compiled::new(p))
            .collect();
        let servers: Vec<Compiled<'_>> = m.servers.iter().map(|p| Compiled::new(p)).collect();
        move |tool: &Tool| {
            tools.iter().any(|p| p.matches(&tool.name))
                || servers.iter().any(|p| p.matches(&tool.server))
                || m.tags.iter().any(|t| tool.tags.contains(t))
        }
    }
}

/// go-toolbroker's rule files as ours: object keys lower-cased (Go's `encoding/json` matches
/// field names case-insensitively; our own keys are all lower case) and an action object
/// `{type: X}` replaced by `X`.
fn go_dialect(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut out = Map::with_capacity(map.len());
            for (key, value) in map {
                let key = key.to_lowercase();
                let mut value = go_dialect(value);
                if key == "action"
                    && let Value::Object(action) = &mut value
                    && let Some(kind) = action.remove("type")
                {
                    value = kind;
                }
                out.insert(key, value);
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(go_dialect).collect()),
        other => other,
    }
}
