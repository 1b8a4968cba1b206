//! What to do with findings: `"toolforge": {"guards": {"secrets": ..., "poisoning": ...}}`.

use serde::Deserialize;

/// What a secret in a call's arguments or text results does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SecretAction {
    /// Not scanned.
    Off,
    /// Replaced by `[REDACTED:<kind>]` before the backend (arguments) or the client (results)
    /// sees it.
    #[default]
    Redact,
    /// The call is refused (arguments) or its result withheld (results), with an error naming
    /// the kind of secret.
    Block,
}

/// What a poisoning marker in a tool's definition does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PoisonAction {
    Off,
    /// Logged, and the tool stays available.
    Warn,
    /// The tool is quarantined until approved (`toolforge tools approve`).
    #[default]
    Quarantine,
}

/// The guards' configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardSettings {
    #[serde(default)]
    pub secrets: SecretAction,
    #[serde(default)]
    pub poisoning: PoisonAction,
}

impl GuardSettings {
    /// Reads the `"guards"` value of the `"toolforge"` object (absent: the defaults).
    ///
    /// # Errors
    /// A message for a person naming the key or value that is wrong.
    pub fn from_value(value: Option<&serde_json::Value>) -> Result<Self, String> {
        let Some(value) = value else {
            return Ok(Self::default());
        };
        serde_json::from_value(value.clone()).map_err(|e| {
            format!(
                "\"guards\": {e}; use {{\"secrets\": \"off\"|\"redact\"|\"block\", \"poisoning\": \"off\"|\"warn\"|\"quarantine\"}}"
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_and_errors() {
        assert_eq!(
            GuardSettings::from_value(None).unwrap(),
            GuardSettings::default()
        );
        let s = GuardSettings::from_value(Some(&json!({"secrets": "block"}))).unwrap();
        assert_eq!(s.secrets, SecretAction::Block);
        assert_eq!(s.poisoning, PoisonAction::Quarantine);
        let e = GuardSettings::from_value(Some(&json!({"secrets": "nuke"}))).unwrap_err();
        assert!(e.contains("redact"), "{e}");
    }
}
