//! Why a policy or limits file was refused.

/// A policy or limits file that cannot be used (reported at start-up).
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The text is not valid Cedar.
    #[error("the policy file is not valid Cedar: {0}")]
    Syntax(String),
    /// Valid Cedar that names something outside toolforge's schema, or a set toolforge cannot
    /// use.
    #[error("the policy file is not usable: {0}")]
    Invalid(String),
    /// The limits configuration is malformed.
    #[error("the limits configuration is not usable: {0}")]
    Limits(String),
}
