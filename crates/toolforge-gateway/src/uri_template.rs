//! RFC 6570-style URI templates, as far as routing a resource URI to the server whose
//! template it matches needs them.

/// `{name}`-style URI template match: literal parts must match, each `{var}` takes one or more
/// characters (no `/` unless the variable is `{+var}` or `{/var}` style).
pub fn template_matches(template: &str, uri: &str) -> bool {
    fn go(t: &str, u: &str) -> bool {
        match t.find('{') {
            None => t == u,
            Some(i) => {
                if !u.starts_with(&t[..i]) {
                    return false;
                }
                let Some(close) = t[i..].find('}') else {
                    return t == u;
                };
                let var = &t[i + 1..i + close];
                let rest_t = &t[i + close + 1..];
                let rest_u = &u[i..];
                let slash_ok = var.starts_with('+') || var.starts_with('/');
                for end in 1..=rest_u.len() {
                    if !rest_u.is_char_boundary(end) {
                        continue;
                    }
                    if !slash_ok && rest_u[..end].contains('/') {
                        break;
                    }
                    if go(rest_t, &rest_u[end..]) {
                        return true;
                    }
                }
                false
            }
        }
    }
    go(template, uri)
}

#[cfg(test)]
mod tests {
    use super::template_matches;

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
        ];
        for (t, u, want) in cases {
            assert_eq!(template_matches(t, u), want, "{t} vs {u}");
        }
    }
}
