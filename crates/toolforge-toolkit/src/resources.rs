//! File resources with explicit handles: list, open (a handle), read through it, release.
//!
//! Files come from the bundled set (compiled in) or from one flat directory. Names are checked
//! against a strict pattern and looked up in the listing, so a path can never leave the set.
//! Each MCP session has its own [`Resources`] (its own handles, dropped with the session), and
//! a handle is 128 random bits: one client can neither guess nor exhaust another's.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use serde::Serialize;

const BUNDLED: &[(&str, &str)] = &[
    (
        "currency_notes.txt",
        include_str!("../data/resources/currency_notes.txt"),
    ),
    (
        "refund_policy.md",
        include_str!("../data/resources/refund_policy.md"),
    ),
    ("schema.sql", include_str!("../data/resources/schema.sql")),
];

/// URI prefix of the MCP resources.
pub const URI_PREFIX: &str = "resource://mcp-agent-toolkit/";
/// Largest file served.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// One listed resource.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema, PartialEq)]
pub struct ResourceInfo {
    pub name: String,
    pub uri: String,
    pub size_bytes: u64,
    pub mime_type: String,
}

/// Why a resource operation failed; the message is what the caller sees.
#[derive(Debug, thiserror::Error)]
pub enum ResourceError {
    #[error("no resource named {0:?}; call list_resources to see the names")]
    NotFound(String),
    #[error("no open handle {0:?} (it was never opened, or it was released)")]
    BadHandle(String),
    #[error("too many open handles ({0}); release some with release_resource")]
    TooManyHandles(usize),
    #[error("no source of random handle ids: {0}")]
    Random(String),
    #[error("could not read {0}: {1}")]
    Io(String, String),
}

/// The resource set and its open handles.
#[derive(Debug)]
pub struct Resources {
    dir: Option<PathBuf>,
    max_handles: usize,
    handles: Mutex<HashMap<String, String>>,
}

/// A new handle id: `h-` and 128 random bits in hex.
fn new_handle() -> Result<String, ResourceError> {
    let mut bits = [0u8; 16];
    getrandom::fill(&mut bits).map_err(|e| ResourceError::Random(e.to_string()))?;
    let hex: String = bits.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("h-{hex}"))
}

fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 128
        && !n.starts_with('.')
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

fn mime(name: &str) -> &'static str {
    match name.rsplit('.').next() {
        Some("md") => "text/markdown",
        Some("json") => "application/json",
        Some("sql") => "application/sql",
        Some("csv") => "text/csv",
        _ => "text/plain",
    }
}

impl Resources {
    /// The bundled files (`dir = None`) or the regular files directly in `dir`.
    #[must_use]
    pub fn new(dir: Option<PathBuf>, max_handles: usize) -> Self {
        Self {
            dir,
            max_handles,
            handles: Mutex::new(HashMap::new()),
        }
    }

    /// The same files with no handles open (for a new session).
    #[must_use]
    pub fn fresh(&self) -> Self {
        Self::new(self.dir.clone(), self.max_handles)
    }

    /// This set's open handles: (handle id, resource name), sorted by name.
    pub fn open_handles(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self
            .handles
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|(h, n)| (h.clone(), n.clone()))
            .collect();
        out.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        out
    }

    /// Every resource, sorted by name.
    ///
    /// # Errors
    /// The directory cannot be listed.
    pub fn list(&self) -> Result<Vec<ResourceInfo>, ResourceError> {
        let mut out: Vec<ResourceInfo> = match &self.dir {
            None => BUNDLED
                .iter()
                .map(|(n, c)| info(n, c.len() as u64))
                .collect(),
            Some(dir) => std::fs::read_dir(dir)
                .map_err(|e| ResourceError::Io(dir.display().to_string(), e.to_string()))?
                .filter_map(Result::ok)
                .filter_map(|e| {
                    let name = e.file_name().into_string().ok()?;
                    let meta = std::fs::symlink_metadata(e.path()).ok()?;
                    (meta.is_file() && valid_name(&name) && meta.len() <= MAX_FILE_BYTES)
                        .then(|| info(&name, meta.len()))
                })
                .collect(),
        };
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// The content of the resource `name` (which must be in the listing).
    ///
    /// # Errors
    /// Unknown name, or the file cannot be read.
    pub fn content(&self, name: &str) -> Result<String, ResourceError> {
        if !valid_name(name) {
            return Err(ResourceError::NotFound(name.to_owned()));
        }
        match &self.dir {
            None => BUNDLED
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, c)| (*c).to_owned())
                .ok_or_else(|| ResourceError::NotFound(name.to_owned())),
            Some(dir) => {
                if !self.list()?.iter().any(|r| r.name == name) {
                    return Err(ResourceError::NotFound(name.to_owned()));
                }
                let bytes = std::fs::read(dir.join(name))
                    .map_err(|e| ResourceError::Io(name.to_owned(), e.to_string()))?;
                Ok(String::from_utf8_lossy(&bytes).into_owned())
            }
        }
    }

    /// Open a handle on `name`.
    ///
    /// # Errors
    /// Unknown name, or too many open handles.
    pub fn open(&self, name: &str) -> Result<String, ResourceError> {
        self.content(name)?;
        let mut h = self
            .handles
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if h.len() >= self.max_handles {
            return Err(ResourceError::TooManyHandles(self.max_handles));
        }
        let mut id = new_handle()?;
        while h.contains_key(&id) {
            id = new_handle()?;
        }
        h.insert(id.clone(), name.to_owned());
        Ok(id)
    }

    /// Read through an open handle: (resource name, content).
    ///
    /// # Errors
    /// Unknown or released handle, or the file cannot be read.
    pub fn read(&self, handle: &str) -> Result<(String, String), ResourceError> {
        let name = self
            .handles
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(handle)
            .cloned()
            .ok_or_else(|| ResourceError::BadHandle(handle.to_owned()))?;
        let content = self.content(&name)?;
        Ok((name, content))
    }

    /// Release a handle; later reads through it fail.
    ///
    /// # Errors
    /// Unknown or already released handle.
    pub fn release(&self, handle: &str) -> Result<String, ResourceError> {
        self.handles
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(handle)
            .ok_or_else(|| ResourceError::BadHandle(handle.to_owned()))
    }
}

fn info(name: &str, size: u64) -> ResourceInfo {
    ResourceInfo {
        name: name.to_owned(),
        uri: format!("{URI_PREFIX}{name}"),
        size_bytes: size,
        mime_type: mime(name).to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_random_and_per_set() {
        let a = Resources::new(None, 8);
        let h1 = a.open("schema.sql").unwrap();
        let h2 = a.open("schema.sql").unwrap();
        assert_ne!(h1, h2);
        for h in [&h1, &h2] {
            assert_eq!(h.len(), 2 + 32, "{h}");
            assert!(h[2..].bytes().all(|b| b.is_ascii_hexdigit()), "{h}");
        }
        // Another session's set sees none of them.
        let b = a.fresh();
        assert!(matches!(b.read(&h1), Err(ResourceError::BadHandle(_))));
        assert!(matches!(b.release(&h1), Err(ResourceError::BadHandle(_))));
        assert!(b.open_handles().is_empty());
        assert_eq!(a.open_handles().len(), 2);
        assert!(a.read(&h1).is_ok());
    }
}
