//! What the gateway decided about a tool call before it ran: a record's `decision`. It is
//! written as one string, as schema "1" has always written it: `allow` (followed by what a
//! content guard changed in the call, each after `; `), `deny: <policy>`,
//! `limited: retry after <ms> ms`, `quarantined`, `blocked: <reason>` or `not_found`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One call's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Sent to its server; `guarded` says what a content guard changed in it (redacted
    /// arguments or results), if anything.
    Allow { guarded: Vec<String> },
    /// Refused by these policies (their ids, as `Policies::decide` names them).
    Deny { policy: String },
    /// Refused by a rate limit; the caller may retry after this long.
    Limited { retry_after_ms: u64 },
    /// The tool is held in quarantine until an operator approves it.
    Quarantined,
    /// A content guard refused the call.
    Blocked { reason: String },
    /// No tool this caller may see has the name.
    NotFound,
    /// The caller must first consent to the tool's server using its own account (OAuth).
    AuthorizationRequired,
}

impl Decision {
    /// An allowed call a content guard did not change.
    #[must_use]
    pub const fn allow() -> Self {
        Self::Allow {
            guarded: Vec::new(),
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Allow { guarded } => {
                f.write_str("allow")?;
                for change in guarded {
                    write!(f, "; {change}")?;
                }
                Ok(())
            }
            Self::Deny { policy } => write!(f, "deny: {policy}"),
            Self::Limited { retry_after_ms } => {
                write!(f, "limited: retry after {retry_after_ms} ms")
            }
            Self::Quarantined => f.write_str("quarantined"),
            Self::Blocked { reason } => write!(f, "blocked: {reason}"),
            Self::NotFound => f.write_str("not_found"),
            Self::AuthorizationRequired => f.write_str("authorization_required"),
        }
    }
}

/// A `decision` string that is none of the forms schema "1" writes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown trace decision {0:?}")]
pub struct UnknownDecision(pub String);

impl FromStr for Decision {
    type Err = UnknownDecision;

    fn from_str(text: &str) -> Result<Self, UnknownDecision> {
        let unknown = || UnknownDecision(text.to_owned());
        if let Some(rest) = text.strip_prefix("allow") {
            if rest.is_empty() {
                return Ok(Self::allow());
            }
            let guarded = rest.strip_prefix("; ").ok_or_else(unknown)?;
            return Ok(Self::Allow {
                guarded: guarded.split("; ").map(str::to_owned).collect(),
            });
        }
        if let Some(policy) = text.strip_prefix("deny: ") {
            return Ok(Self::Deny {
                policy: policy.to_owned(),
            });
        }
        if let Some(rest) = text.strip_prefix("limited: retry after ") {
            let ms = rest.strip_suffix(" ms").ok_or_else(unknown)?;
            let retry_after_ms = ms.parse().map_err(|_| unknown())?;
            return Ok(Self::Limited { retry_after_ms });
        }
        if let Some(reason) = text.strip_prefix("blocked: ") {
            return Ok(Self::Blocked {
                reason: reason.to_owned(),
            });
        }
        match text {
            "quarantined" => Ok(Self::Quarantined),
            "not_found" => Ok(Self::NotFound),
            "authorization_required" => Ok(Self::AuthorizationRequired),
            _ => Err(unknown()),
        }
    }
}

impl Serialize for Decision {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Decision {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every form reads back as the decision that wrote it, and writes the same string.
    #[test]
    fn each_form_is_written_as_schema_1_writes_it_and_read_back() {
        let cases = [
            (Decision::allow(), "allow"),
            (
                Decision::Allow {
                    guarded: vec!["redacted 1 secret in the result".into(), "x".into()],
                },
                "allow; redacted 1 secret in the result; x",
            ),
            (
                Decision::Deny {
                    policy: "default-deny".into(),
                },
                "deny: default-deny",
            ),
            (
                Decision::Limited {
                    retry_after_ms: 1500,
                },
                "limited: retry after 1500 ms",
            ),
            (Decision::Quarantined, "quarantined"),
            (
                Decision::Blocked {
                    reason: "a secret in the arguments".into(),
                },
                "blocked: a secret in the arguments",
            ),
            (Decision::NotFound, "not_found"),
            (Decision::AuthorizationRequired, "authorization_required"),
        ];
        for (decision, text) in cases {
            assert_eq!(decision.to_string(), text);
            assert_eq!(
                serde_json::to_value(&decision).unwrap(),
                serde_json::json!(text)
            );
            assert_eq!(text.parse::<Decision>(), Ok(decision.clone()), "{text}");
            let back: Decision = serde_json::from_value(serde_json::json!(text)).unwrap();
            assert_eq!(back, decision);
        }
    }

    #[test]
    fn other_strings_are_refused_with_the_value() {
        for bad in [
            "",
            "Allow",
            "allowed",
            "deny",
            "limited: retry after soon",
            "limited: retry after 5",
            "maybe",
        ] {
            assert_eq!(
                bad.parse::<Decision>(),
                Err(UnknownDecision(bad.to_owned()))
            );
        }
        let err = serde_json::from_value::<Decision>(serde_json::json!("maybe")).unwrap_err();
        assert!(err.to_string().contains("\"maybe\""), "{err}");
    }
}
