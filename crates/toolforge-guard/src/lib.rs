//! Content guards, pure: no I/O, no async, no clock.
//!
//! - [`secrets`]: credentials in tool arguments and results (cloud and API key formats,
//!   private keys, high-entropy tokens), found and redacted.
//! - [`poison`]: markers of tool poisoning in a tool's description (hidden Unicode,
//!   instructions addressed to the model, other tools' names, exfiltration).
//! - [`pin`]: a tool definition's canonical fingerprint, the field-level diff of two
//!   definitions, and the admission decision for a freshly listed set of tools against the
//!   pinned ones (unchanged, new, changed, renamed in one listing or two).
//! - [`settings`]: what to do with findings (`"toolforge": {"guards": {...}}`).
//!
//! The callers (the pool, the gateway) perform the I/O; this crate only decides.

pub mod pin;
pub mod poison;
pub mod secrets;
pub mod settings;

pub use pin::{
    Admission, Admitter, FieldChange, Pin, PinRef, Verdict, admit, canonical_json,
    canonical_object_json, diff, fingerprint,
};
pub use poison::{PoisonFinding, scan_tool};
pub use secrets::{
    SecretFinding, redact_adjacent, redact_string, redact_value, scan_adjacent, scan_text,
    scan_value,
};
pub use settings::{GuardSettings, PoisonAction, SecretAction};
