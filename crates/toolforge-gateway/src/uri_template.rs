//! RFC 6570-style URI templates, as far as routing a resource URI to the server whose
//! template it matches needs them.
//!
//! Matching is linear in the URI's length (times the template's length): the template is read
//! as a sequence of literal characters and variables, and the URI is run through it as an
//! automaton over the set of positions it can be at, one character at a time. A backtracking
//! matcher is quadratic or worse on a long URI (every split of the URI among the variables),
//! and a client chooses the URI: one `resources/read` of a megabyte held an async worker for
//! half a minute. URIs are also bounded before they reach a matcher ([`MAX_URI_BYTES`]).

/// The longest resource URI the gateway accepts (`resources/read`, `resources/subscribe`,
/// `resources/unsubscribe`, a completion's `ref/uri`): longer ones are refused with
/// `invalid_params` before any lookup. Resource URIs are identifiers; 8 KiB is the common
/// bound on an HTTP request line too.
pub const MAX_URI_BYTES: usize = 8 * 1024;

/// One step of a template.
#[derive(Debug, Clone, Copy)]
enum Part {
    /// One character of the template's literal text.
    Literal(char),
    /// A `{var}`: one or more characters, `/` only in `{+var}` and `{/var}` forms.
    Variable { slash_ok: bool },
}

fn parts(template: &str) -> Vec<Part> {
    let mut parts = Vec::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            // An unclosed brace is literal text, as the template's author wrote it.
            break;
        };
        parts.extend(rest[..open].chars().map(Part::Literal));
        let var = &rest[open + 1..open + close];
        parts.push(Part::Variable {
            slash_ok: var.starts_with('+') || var.starts_with('/'),
        });
        rest = &rest[open + close + 1..];
    }
    parts.extend(rest.chars().map(Part::Literal));
    parts
}

/// `{name}`-style URI template match: literal parts must match, each `{var}` takes one or more
/// characters (no `/` unless the variable is `{+var}` or `{/var}` style).
#[must_use]
pub fn template_matches(template: &str, uri: &str) -> bool {
    run(&parts(template), uri, &mut 0)
}

/// Runs `uri` through the automaton of `parts`, counting the state steps in `steps`.
///
/// State `j` means "the first `j` parts are matched"; when part `j - 1` is a variable the
/// automaton may stay at `j` on another character the variable takes.
fn run(parts: &[Part], uri: &str, steps: &mut usize) -> bool {
    let n = parts.len();
    let mut now = vec![false; n + 1];
    let mut next = vec![false; n + 1];
    now[0] = true;
    for c in uri.chars() {
        next.fill(false);
        let mut any = false;
        for j in 0..=n {
            if !now[j] {
                continue;
            }
            *steps += 1;
            if j > 0
                && let Part::Variable { slash_ok } = parts[j - 1]
                && (slash_ok || c != '/')
            {
                next[j] = true;
                any = true;
            }
            if j < n {
                let takes = match parts[j] {
                    Part::Literal(l) => l == c,
                    Part::Variable { slash_ok } => slash_ok || c != '/',
                };
                if takes {
                    next[j + 1] = true;
                    any = true;
                }
            }
        }
        if !any {
            return false;
        }
        std::mem::swap(&mut now, &mut next);
    }
    now[n]
}

#[cfg(test)]
mod tests {
    use super::{parts, run, template_matches};

    #[test]
    fn uri_templates() {
        let cases = [
            (
                "test://template/{id}/data",
                "test://template/123/data",
                true,
            ),
            (
                "test://template/{id}/data",
                "test://template/1/2/data",
                false,
            ),
            ("test://template/{id}/data", "test://template//data", false),
            ("file:///{+path}", "file:///a/b/c.txt", true),
            ("res://{name}", "res://x.md", true),
            ("res://{name}", "other://x.md", false),
            ("plain://uri", "plain://uri", true),
            ("plain://uri", "plain://uri2", false),
            ("plain://uri", "plain://ur", false),
            // Two variables split the text between them; each takes at least one character.
            ("x://{a}.{b}", "x://one.two.three", true),
            ("x://{a}{b}", "x://é", false),
            ("x://{a}{b}", "x://éa", true),
            ("x://{a}", "x://", false),
            // An unclosed brace is literal.
            ("x://{a", "x://{a", true),
            ("x://{a", "x://b", false),
        ];
        for (t, u, want) in cases {
            assert_eq!(template_matches(t, u), want, "{t} vs {u}");
        }
    }

    /// The regression of the quadratic matcher: the work grows with the URI's length times the
    /// template's, never with the square of the URI's length.
    #[test]
    fn matching_work_is_linear_in_the_uri_length() {
        for template in ["files://{name}", "files://{+path}", "x://{a}.{b}/{c}.txt"] {
            let parts = parts(template);
            for len in [1_000usize, 100_000, 1_000_000] {
                let uri = format!("files://{}", "a".repeat(len));
                let mut steps = 0;
                run(&parts, &uri, &mut steps);
                let bound = (uri.chars().count() + 1) * (parts.len() + 1);
                assert!(
                    steps <= bound,
                    "{template}: {steps} steps for a URI of {len} bytes (bound {bound})"
                );
            }
        }
    }
}
