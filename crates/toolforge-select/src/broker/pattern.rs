//! Name patterns with Go `path.Match` semantics, plus the seed's `prefix*` fallback.
//!
//! Why Go semantics: seed 004 defines rules against `path.Match`, so `*` and `?` never cross a
//! `/`, `[...]` classes support ranges, `^` negation and `\` escapes, and a malformed pattern
//! is an error. Patterns are validated when rules load, never at selection time.

use thiserror::Error;

/// A malformed pattern (Go's `ErrBadPattern`).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid glob pattern {pattern:?}: {reason}")]
pub struct PatternError {
    /// The offending pattern.
    pub pattern: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// Checks that `pattern` is well formed under `path.Match` rules.
pub fn validate(pattern: &str) -> Result<(), PatternError> {
    let p: Vec<char> = pattern.chars().collect();
    let bad = |reason| PatternError {
        pattern: pattern.to_owned(),
        reason,
    };
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            '\\' => {
                if i + 1 >= p.len() {
                    return Err(bad("trailing backslash"));
                }
                i += 2;
            }
            '[' => {
                i = class_end(&p, i + 1)
                    .ok_or_else(|| bad("unterminated or empty character class"))?
            }
            _ => i += 1,
        }
    }
    Ok(())
}

/// Index just past the `]` closing a class whose body starts at `i`; `None` if malformed.
fn class_end(p: &[char], mut i: usize) -> Option<usize> {
    if p.get(i) == Some(&'^') {
        i += 1;
    }
    let mut first = true;
    loop {
        let c = *p.get(i)?;
        if c == ']' && !first {
            return Some(i + 1);
        }
        first = false;
        let (_, next) = class_char(p, i)?;
        i = next;
        if p.get(i) == Some(&'-') {
            let (_, n2) = class_char(p, i + 1)?;
            i = n2;
        }
    }
}

fn class_char(p: &[char], i: usize) -> Option<(char, usize)> {
    match *p.get(i)? {
        '\\' => Some((*p.get(i + 1)?, i + 2)),
        '-' | ']' => None,
        c => Some((c, i + 1)),
    }
}

/// Go `path.Match`: does the whole of `name` match `pattern`? Malformed patterns are errors.
pub fn path_match(pattern: &str, name: &str) -> Result<bool, PatternError> {
    validate(pattern)?;
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    Ok(match_at(&p, &n))
}

fn match_at(p: &[char], n: &[char]) -> bool {
    let Some(&c) = p.first() else {
        return n.is_empty();
    };
    match c {
        '*' => (0..=n.len())
            .take_while(|&k| k == 0 || n[k - 1] != '/')
            .any(|k| match_at(&p[1..], &n[k..])),
        '?' => n.first().is_some_and(|&x| x != '/') && match_at(&p[1..], &n[1..]),
        '\\' => n.first() == p.get(1) && match_at(&p[2..], &n[1..]),
        '[' => {
            let Some(&x) = n.first() else { return false };
            let end = class_end(p, 1).unwrap_or(p.len());
            let body = &p[1..end - 1];
            let (neg, body) = match body.first() {
                Some('^') => (true, &body[1..]),
                _ => (false, body),
            };
            let mut i = 0;
            let mut hit = false;
            while i < body.len() {
                let Some((lo, next)) = class_char(body, i) else {
                    break;
                };
                i = next;
                let mut hi = lo;
                if body.get(i) == Some(&'-')
                    && let Some((h, n2)) = class_char(body, i + 1)
                {
                    hi = h;
                    i = n2;
                }
                hit |= lo <= x && x <= hi;
            }
            hit != neg && x != '/' && match_at(&p[end..], &n[1..])
        }
        _ => n.first() == Some(&c) && match_at(&p[1..], &n[1..]),
    }
}

/// The seed's matcher: `path.Match`, and when that fails a pattern ending in `*` also matches
/// any name with the preceding prefix (so `git_*` matches `git_log/x`).
pub fn matches(pattern: &str, name: &str) -> Result<bool, PatternError> {
    // Fast paths for the shapes rules use most, equal to the general match below: a literal
    // name, `*`, and `prefix*` (path.Match needs no `/` after the prefix, the fallback accepts
    // any suffix, so together: a plain prefix test). No allocation on these paths.
    let meta = |c: char| matches!(c, '*' | '?' | '[' | '\\');
    if !pattern.contains(meta) {
        return Ok(pattern == name);
    }
    if let Some(prefix) = pattern.strip_suffix('*')
        && !prefix.contains(meta)
    {
        return Ok(name.starts_with(prefix));
    }
    if path_match(pattern, name)? {
        return Ok(true);
    }
    Ok(pattern
        .strip_suffix('*')
        .is_some_and(|prefix| name.starts_with(prefix)))
}

/// A validated pattern sorted once into the shape [`matches`] would find on every call, for
/// matching one pattern against many names (building a rule's tool set).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Compiled<'a> {
    /// No metacharacter: equality.
    Literal(&'a str),
    /// `prefix*` with a plain prefix: starts-with.
    Prefix(&'a str),
    /// Anything else: the general matcher.
    Glob(&'a str),
}

impl<'a> Compiled<'a> {
    /// Sorts `pattern` (validated at rule load).
    pub(crate) fn new(pattern: &'a str) -> Self {
        let meta = |c: char| matches!(c, '*' | '?' | '[' | '\\');
        if !pattern.contains(meta) {
            return Self::Literal(pattern);
        }
        match pattern.strip_suffix('*') {
            Some(prefix) if !prefix.contains(meta) => Self::Prefix(prefix),
            _ => Self::Glob(pattern),
        }
    }

    /// Same answer as [`matches`] (a malformed pattern matches nothing).
    pub(crate) fn matches(&self, name: &str) -> bool {
        match *self {
            Self::Literal(p) => p == name,
            Self::Prefix(p) => name.starts_with(p),
            Self::Glob(p) => matches(p, name).unwrap_or(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_path_match_table() {
        let cases = [
            ("abc", "abc", true),
            ("*", "abc", true),
            ("*c", "abc", true),
            ("a*", "a", true),
            ("a*/b", "abc/b", true),
            ("a*/b", "a/c/b", false),
            ("a*b*c*d*e*/f", "axbxcxdxe/f", true),
            ("a*b?c*x", "abxbbxdbxebxczzx", true),
            ("a*b?c*x", "abxbbxdbxebxczzy", false),
            ("ab[c]", "abc", true),
            ("ab[b-d]", "abc", true),
            ("ab[e-g]", "abc", false),
            ("ab[^c]", "abc", false),
            ("ab[^e-g]", "abc", true),
            ("a\\*b", "a*b", true),
            ("a\\*b", "ab", false),
            ("a?b", "a/b", false),
            ("a*b", "a/b", false),
            ("[\\]a]", "]", true),
            ("[a-ζ]*", "α", true),
        ];
        for (p, n, want) in cases {
            assert_eq!(path_match(p, n).unwrap(), want, "{p} vs {n}");
        }
    }

    #[test]
    fn bad_patterns_are_errors() {
        for p in ["[", "[]a]", "[-]", "[x-]", "a\\", "[^", "[a-"] {
            assert!(validate(p).is_err(), "{p} should be bad");
        }
    }

    #[test]
    fn prefix_fallback_crosses_slash() {
        assert!(!path_match("git_*", "git_log/x").unwrap());
        assert!(matches("git_*", "git_log/x").unwrap());
        assert!(!matches("git_*", "gh_log").unwrap());
    }

    proptest::proptest! {
        /// The allocation-free fast paths agree with the general matcher.
        #[test]
        fn fast_paths_agree_with_the_general_match(
            pattern in "[ab_/]{0,4}\\*?",
            name in "[ab_/]{0,6}",
        ) {
            let general = path_match(&pattern, &name).unwrap()
                || pattern.strip_suffix('*').is_some_and(|p| name.starts_with(p));
            proptest::prop_assert_eq!(matches(&pattern, &name).unwrap(), general);
            proptest::prop_assert_eq!(Compiled::new(&pattern).matches(&name), general);
        }
    }
}
