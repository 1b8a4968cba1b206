//! Who is asking: the identity a request was authenticated as, or `anonymous`.

use std::fmt;
use std::sync::Arc;

/// The identity behind a request: an API key's principal, a JWT's `sub`, or `anonymous` when
/// identity is off. Cheap to clone (shared text).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal(Arc<str>);

/// The principal of every request when identity is off.
pub const ANONYMOUS: &str = "anonymous";

impl Principal {
    /// A named principal. An empty name is the anonymous principal.
    #[must_use]
    pub fn new(id: &str) -> Self {
        if id.is_empty() {
            Self::anonymous()
        } else {
            Self(Arc::from(id))
        }
    }

    /// The principal of unauthenticated requests (identity off).
    #[must_use]
    pub fn anonymous() -> Self {
        Self(Arc::from(ANONYMOUS))
    }

    /// The id as text (`User::"<id>"` in policies, `principal` in trace records).
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True for the anonymous principal.
    #[must_use]
    pub fn is_anonymous(&self) -> bool {
        &*self.0 == ANONYMOUS
    }
}

impl Default for Principal {
    fn default() -> Self {
        Self::anonymous()
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Principal({:?})", &*self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_names_are_anonymous() {
        assert!(Principal::new("").is_anonymous());
        assert!(Principal::default().is_anonymous());
        assert!(!Principal::new("alice").is_anonymous());
        assert_eq!(Principal::new("alice").to_string(), "alice");
    }
}
