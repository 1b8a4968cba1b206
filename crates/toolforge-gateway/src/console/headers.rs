//! The headers every `/ui` response carries: the console's Content-Security-Policy and its
//! companions, also on answers given before the console's routes (a 401 of identity).

use axum::http::{HeaderMap, HeaderValue, header};

/// The policy on every `/ui` response: this origin's scripts, styles, images and connections
/// only; no inline script, no framing, no forms.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// Puts the console's policy and its companions on `headers`: on every `/ui` response, also
/// those answered before the console's routes (a 401 of identity).
pub(crate) fn set_secure_headers(headers: &mut HeaderMap) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}
