//! Resource URIs in one spelling (RFC 3986, section 6.2.2), so that visibility and policy decide
//! on the URI the backend will read, not on one of its many spellings.
//!
//! A policy that forbids `files://secret.txt` was passed by `files://secret.txt?`,
//! `files://secret.txt#x`, `files://SECRET.txt`, `files://./secret.txt` and
//! `files://secret%2Etxt`: each is another string, and each reached the backend, which read the
//! same file. Every resource URI a client sends is therefore normalised before anything looks
//! at it, and the normalised URI is what is decided on and what the backend gets:
//! - the scheme and the authority in lower case;
//! - percent-encodings of unreserved characters decoded (`%2E` is `.`), the others in upper
//!   case (`%2f` is `%2F`);
//! - `.` and `..` path segments removed (also right after the authority, as in `files://./x`);
//! - an empty query (`?` alone) and any fragment (`#…`, never part of what is read) dropped.
//!
//! A URI that cannot be normalised is refused: no scheme, a malformed percent-encoding, or
//! whitespace and control characters.

use rmcp::ErrorData as McpError;

/// Why a resource URI was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UriProblem {
    #[error("the resource URI has no scheme (such as file:// or test://)")]
    NoScheme,
    #[error("the resource URI has a malformed percent-encoding")]
    BadPercent,
    #[error("the resource URI has whitespace or control characters")]
    BadCharacter,
}

fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// `part` with unreserved percent-encodings decoded and the others in upper case.
fn normalise_percent(part: &str, lower: bool) -> Result<String, UriProblem> {
    let bytes = part.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or(UriProblem::BadPercent)?;
            let text = std::str::from_utf8(hex).map_err(|_| UriProblem::BadPercent)?;
            let value = u8::from_str_radix(text, 16).map_err(|_| UriProblem::BadPercent)?;
            if unreserved(value) {
                out.push(if lower {
                    value.to_ascii_lowercase()
                } else {
                    value
                });
            } else {
                out.push(b'%');
                out.extend(text.to_ascii_uppercase().bytes());
            }
            i += 3;
            continue;
        }
        out.push(if lower { b.to_ascii_lowercase() } else { b });
        i += 1;
    }
    // Only ASCII bytes were changed or added, so the text stays UTF-8.
    String::from_utf8(out).map_err(|_| UriProblem::BadCharacter)
}

/// RFC 3986's remove_dot_segments, on a path that may or may not start with `/`.
fn remove_dot_segments(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut kept: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').collect();
    let last = segments.len().saturating_sub(1);
    let mut trailing_slash = false;
    for (i, segment) in segments.iter().enumerate() {
        match *segment {
            "." => trailing_slash = i == last,
            ".." => {
                if kept.last().is_some_and(|s| !s.is_empty()) {
                    kept.pop();
                }
                trailing_slash = i == last;
            }
            s => {
                kept.push(s);
                trailing_slash = false;
            }
        }
    }
    // A leading "" (from the leading '/') may have been popped by "..": keep the path absolute.
    let mut out = kept.join("/");
    if absolute && !out.starts_with('/') {
        out.insert(0, '/');
    }
    if trailing_slash && !out.ends_with('/') {
        out.push('/');
    }
    out
}

/// The one spelling of `uri`.
///
/// # Errors
/// The URI cannot be normalised (see [`UriProblem`]).
pub fn normalise(uri: &str) -> Result<String, UriProblem> {
    if uri.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(UriProblem::BadCharacter);
    }
    let colon = uri.find(':').ok_or(UriProblem::NoScheme)?;
    let scheme = &uri[..colon];
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    if !scheme_ok {
        return Err(UriProblem::NoScheme);
    }
    let rest = &uri[colon + 1..];
    // The fragment is never part of what is read.
    let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
    let (rest, query) = match rest.split_once('?') {
        Some((before, q)) => (before, (!q.is_empty()).then_some(q)),
        None => (rest, None),
    };
    let mut out = scheme.to_ascii_lowercase();
    out.push(':');
    let path = if let Some(after) = rest.strip_prefix("//") {
        let end = after.find('/').unwrap_or(after.len());
        let authority = &after[..end];
        out.push_str("//");
        // `files://./secret.txt`: a dot segment where a host would be is a path segment.
        let (authority, path) = if authority == "." || authority == ".." {
            ("", after)
        } else {
            (authority, &after[end..])
        };
        out.push_str(&normalise_percent(authority, true)?);
        let path = normalise_percent(path, false)?;
        let mut path = remove_dot_segments(&path);
        if authority.is_empty() && !rest[2..].starts_with('/') {
            // No host: what followed `//` was all path, and stays relative to it.
            path = path.trim_start_matches('/').to_owned();
        }
        path
    } else {
        remove_dot_segments(&normalise_percent(rest, false)?)
    };
    out.push_str(&path);
    if let Some(q) = query {
        out.push('?');
        out.push_str(&normalise_percent(q, false)?);
    }
    Ok(out)
}

// What the MCP handlers call: the client's URI checked, as an MCP error when refused.

/// Refuses a resource URI longer than [`crate::uri_template::MAX_URI_BYTES`] before anything
/// looks it up (the error quotes its length, not the URI).
pub(crate) fn bounded_uri(uri: &str) -> Result<(), McpError> {
    let max = crate::uri_template::MAX_URI_BYTES;
    if uri.len() <= max {
        return Ok(());
    }
    Err(McpError::invalid_params(
        format!(
            "the resource URI is {} bytes long; the limit is {max}",
            uri.len()
        ),
        None,
    ))
}

/// A client's resource URI, bounded and in its one spelling ([`crate::resource_uri`]): what
/// visibility and policy decide on and what the backend reads. Refused when it cannot be
/// normalised.
pub(crate) fn normalised_uri(uri: &str) -> Result<String, McpError> {
    bounded_uri(uri)?;
    normalise(uri).map_err(|problem| {
        McpError::invalid_params(
            format!("{problem}; it is refused rather than guessed at"),
            None,
        )
    })
}

/// Whether a listed resource's URI is `uri` (the client's, normalised).
pub(crate) fn same_uri(listed: &str, uri: &str) -> bool {
    listed == uri || normalise(listed).is_ok_and(|l| l == uri)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The regression: each of these spellings passed a policy on `files://secret.txt`.
    #[test]
    fn every_spelling_of_a_uri_is_one_uri() {
        for spelling in [
            "files://secret.txt",
            "files://secret.txt?",
            "files://secret.txt#x",
            "files://SECRET.txt",
            "FILES://secret.txt",
            "files://./secret.txt",
            "files://secret%2Etxt",
            "files://secret%2etxt",
            "files://secret.txt?#frag",
        ] {
            assert_eq!(
                normalise(spelling).as_deref(),
                Ok("files://secret.txt"),
                "{spelling}"
            );
        }
    }

    #[test]
    fn paths_lose_their_dot_segments_and_keep_their_case() {
        let cases = [
            ("file:///a/./b/../c.txt", "file:///a/c.txt"),
            ("file:///a/b/../../../etc/passwd", "file:///etc/passwd"),
            ("file:///Docs/Read%20Me.md", "file:///Docs/Read%20Me.md"),
            ("file:///a/%2f/b", "file:///a/%2F/b"),
            ("test://template/123/data", "test://template/123/data"),
            ("test://static-text", "test://static-text"),
            ("ui://widget/card.html", "ui://widget/card.html"),
            ("mem:notes/./today", "mem:notes/today"),
            ("x://h/a?b=%7e&c", "x://h/a?b=~&c"),
            ("x://h/dir/.", "x://h/dir/"),
        ];
        for (uri, want) in cases {
            assert_eq!(normalise(uri).as_deref(), Ok(want), "{uri}");
        }
    }

    #[test]
    fn what_cannot_be_normalised_is_refused() {
        for (uri, problem) in [
            ("secret.txt", UriProblem::NoScheme),
            ("://x", UriProblem::NoScheme),
            ("1x://y", UriProblem::NoScheme),
            ("files://secret%2", UriProblem::BadPercent),
            ("files://secret%zz.txt", UriProblem::BadPercent),
            ("files://secret .txt", UriProblem::BadCharacter),
            ("files://secret\n.txt", UriProblem::BadCharacter),
        ] {
            assert_eq!(normalise(uri), Err(problem), "{uri}");
        }
    }
}
