//! Where settings come from: the process environment, else `./.env`, read once into a
//! [`Source`]. The only code of toolforge that reads environment variables (but for the few the
//! C library and the async runtime read themselves, [`process_env_sets`]).
//!
//! `.env` values are toolforge's own settings and `${VAR}` in the servers configuration; they
//! are not exported to the MCP servers toolforge starts.

use std::collections::HashMap;
use std::path::PathBuf;
use std::str::FromStr;

use anyhow::bail;

/// The environment and `./.env`, as they were when the process started.
#[derive(Debug, Clone, Default)]
pub struct Source {
    process: HashMap<String, String>,
    dotenv: HashMap<String, String>,
}

impl Source {
    /// Reads the process environment and `./.env` (a missing file is no file; one that cannot
    /// be read is reported on stderr and skipped).
    #[allow(clippy::disallowed_methods)]
    pub fn read() -> Self {
        let process = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect();
        let dotenv = match std::fs::read_to_string(".env") {
            Ok(text) => parse_dotenv(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => HashMap::new(),
            Err(e) => {
                eprintln!("warning: cannot read .env ({e}); using the environment only");
                HashMap::new()
            }
        };
        Self { process, dotenv }
    }

    /// A source of exactly these variables (tests).
    #[cfg(test)]
    pub fn of(vars: &[(&str, &str)]) -> Self {
        Self {
            process: vars
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            dotenv: HashMap::new(),
        }
    }

    /// A variable as set, empty values included (for `${VAR}` in the servers configuration).
    pub fn raw(&self, name: &str) -> Option<String> {
        self.process
            .get(name)
            .or_else(|| self.dotenv.get(name))
            .cloned()
    }

    /// A setting: empty values count as unset.
    pub fn text(&self, name: &str) -> Option<String> {
        self.raw(name).filter(|v| !v.trim().is_empty())
    }

    /// A path setting.
    pub fn path(&self, name: &str) -> Option<PathBuf> {
        self.text(name).map(PathBuf::from)
    }

    /// A boolean: `1`/`true`/`yes`/`on` or `0`/`false`/`no`/`off`; `None` when unset.
    pub fn flag(&self, name: &str) -> anyhow::Result<Option<bool>> {
        match self.text(name).map(|v| v.trim().to_ascii_lowercase()) {
            None => Ok(None),
            Some(v) if ["1", "true", "yes", "on"].contains(&v.as_str()) => Ok(Some(true)),
            Some(v) if ["0", "false", "no", "off"].contains(&v.as_str()) => Ok(Some(false)),
            Some(v) => bail!("{name} is \"{v}\"; use 1/true/yes/on or 0/false/no/off"),
        }
    }

    /// A number; `None` when unset.
    pub fn number<T: FromStr>(&self, name: &str) -> anyhow::Result<Option<T>> {
        self.text(name)
            .map(|v| {
                v.trim()
                    .parse::<T>()
                    .map_err(|_| anyhow::anyhow!("{name} is \"{v}\", which is not a valid number"))
            })
            .transpose()
    }

    /// A comma-separated list, its items trimmed and the empty ones dropped.
    pub fn list(&self, name: &str) -> Option<Vec<String>> {
        self.text(name).map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
    }
}

/// Whether the process environment itself (not `./.env`) sets `name`: for settings that the C
/// library or the async runtime read there at start-up, such as `MALLOC_ARENA_MAX`.
#[allow(clippy::disallowed_methods)]
pub fn process_env_sets(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty())
}

/// `KEY=value` lines: blank lines and `#` comments are skipped, an `export ` prefix is allowed,
/// and a value in single or double quotes is taken as is (without the quotes); an unquoted value
/// ends at ` #`.
fn parse_dotenv(text: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let value = value.trim();
        let value = match value.chars().next() {
            Some(q @ ('"' | '\'')) => value[1..].split(q).next().unwrap_or_default(),
            _ => value.split(" #").next().unwrap_or_default().trim_end(),
        };
        out.insert(key.to_owned(), value.to_owned());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{Source, parse_dotenv};

    #[test]
    fn dotenv_lines_comments_quotes_and_export() {
        let vars = parse_dotenv(
            "# settings\n\
             LLM_PROVIDER=anthropic\n\
             export COST_CEILING_USD = 0.05   # five cents\n\
             ANTHROPIC_API_KEY=\"sk-ant #1\"\n\
             TRACE_SINK='logs/my traces.jsonl'\n\
             EMPTY=\n\
             not a line\n\
             BAD-KEY=x\n",
        );
        assert_eq!(vars["LLM_PROVIDER"], "anthropic");
        assert_eq!(vars["COST_CEILING_USD"], "0.05");
        assert_eq!(vars["ANTHROPIC_API_KEY"], "sk-ant #1");
        assert_eq!(vars["TRACE_SINK"], "logs/my traces.jsonl");
        assert_eq!(vars["EMPTY"], "");
        assert_eq!(vars.len(), 5);
    }

    #[test]
    fn the_environment_wins_over_dotenv_and_empty_is_unset() {
        let mut source = Source::of(&[("A", "from env"), ("EMPTY", " ")]);
        source.dotenv = parse_dotenv("A=from file\nB=only in file\n");
        assert_eq!(source.text("A").as_deref(), Some("from env"));
        assert_eq!(source.text("B").as_deref(), Some("only in file"));
        assert_eq!(source.text("EMPTY"), None);
        assert_eq!(source.raw("EMPTY").as_deref(), Some(" "));
    }

    #[test]
    fn flags_numbers_and_lists_parse_or_name_the_variable() {
        let source = Source::of(&[
            ("ON", "Yes"),
            ("N", " 12 "),
            ("BAD", "maybe"),
            ("L", "a, ,b"),
        ]);
        assert_eq!(source.flag("ON").unwrap(), Some(true));
        assert_eq!(source.flag("UNSET").unwrap(), None);
        let err = source.flag("BAD").unwrap_err().to_string();
        assert!(err.contains("BAD is \"maybe\""), "{err}");
        assert_eq!(source.number::<u32>("N").unwrap(), Some(12));
        assert!(source.number::<u32>("BAD").is_err());
        assert_eq!(source.list("L").unwrap(), ["a", "b"]);
    }
}
