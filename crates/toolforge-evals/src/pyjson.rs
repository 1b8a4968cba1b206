//! Python's renderings of JSON values, byte for byte: `json.dumps(v)` and
//! `json.dumps(v, sort_keys=True)` (separators `", "` and `": "`, `ensure_ascii` escaping,
//! float `repr`), `str(v)` and `repr(v)` of the decoded value.
//!
//! Why: mock tool responses are keyed by these strings (`react_step`'s lookup steps 1 and 2).
//! Callers build their mock tables in Python, so a key must match what Python would have
//! produced for the same arguments, or a mock silently stops matching.

use serde_json::Value;

/// `json.dumps(value)`: keys in their given order.
#[must_use]
pub fn dumps(value: &Value) -> String {
    let mut out = String::new();
    write_json(&mut out, value, KeyOrder::AsGiven);
    out
}

/// `json.dumps(value, sort_keys=True)`: keys sorted at every level (by code point).
#[must_use]
pub fn dumps_sorted(value: &Value) -> String {
    let mut out = String::new();
    write_json(&mut out, value, KeyOrder::Sorted);
    out
}

/// `str(value)` of the value `json.loads` would give: strings unquoted, `True`, `None`,
/// containers as their `repr`.
#[must_use]
pub fn str_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => repr(other),
    }
}

/// `repr(value)` of the value `json.loads` would give (`{'a': [1, True, None]}`).
#[must_use]
pub fn repr(value: &Value) -> String {
    let mut out = String::new();
    write_repr(&mut out, value);
    out
}

/// Python's type name of the decoded value (`dict`, `list`, `str`, ...).
#[must_use]
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum KeyOrder {
    AsGiven,
    Sorted,
}

fn write_json(out: &mut String, value: &Value, order: KeyOrder) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => out.push_str(&number(n)),
        Value::String(s) => write_json_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_json(out, item, order);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            if order == KeyOrder::Sorted {
                // Rust's str order is UTF-8 byte order, which is code point order, as Python's.
                entries.sort_by(|a, b| a.0.cmp(b.0));
            }
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_json_string(out, k);
                out.push_str(": ");
                write_json(out, v, order);
            }
            out.push('}');
        }
    }
}

/// `ensure_ascii=True`: everything outside printable ASCII becomes `\uXXXX` (surrogate pairs
/// beyond the BMP), with the short escapes Python uses.
fn write_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
}

/// An integer as is; a float as Python's `repr` writes it.
fn number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    float_repr(n.as_f64().unwrap_or(f64::NAN))
}

/// Python's `repr(float)`: the shortest digits that round-trip, positional when the decimal
/// exponent is in `-4..16`, else scientific with a signed two-digit exponent (`1e-05`,
/// `1.5e+16`); always a `.0` or a fraction in positional form.
#[must_use]
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    // Rust's `{:e}` gives the shortest round-trip digits too: "1.2345e-5".
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if negative { "-" } else { "" };
    if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        let body = if point <= 0 {
            format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
        } else if (point as usize) >= digits.len() {
            format!("{digits}{}.0", "0".repeat(point as usize - digits.len()))
        } else {
            let (int, frac) = digits.split_at(point as usize);
            format!("{int}.{frac}")
        };
        format!("{sign}{body}")
    } else {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{first}{frac}e{esign}{:02}", exp.unsigned_abs())
    }
}

fn write_repr(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => {
            // Python's float repr spells infinities `inf`, but JSON input has none.
            out.push_str(&number(n));
        }
        Value::String(s) => write_str_repr(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_str_repr(out, k);
                out.push_str(": ");
                write_repr(out, v);
            }
            out.push('}');
        }
    }
}

/// Python's `repr(str)`: single quotes unless the text has a `'` and no `"`; printable
/// characters (non-ASCII included) kept, control characters escaped.
fn write_str_repr(out: &mut String, s: &str) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || (0x7f..0xa0).contains(&(c as u32)) => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Expected strings were produced by CPython 3.12 (`json.dumps`, `str`, `repr`).
    #[test]
    fn dumps_matches_python() {
        let cases = [
            (json!({"b": 1, "a": "x"}), r#"{"a": "x", "b": 1}"#),
            (json!({"path": "./1.txt"}), r#"{"path": "./1.txt"}"#),
            (
                json!({"z": {"d": [1, 2.5, null, true]}, "a": []}),
                r#"{"a": [], "z": {"d": [1, 2.5, null, true]}}"#,
            ),
            (json!({"é": "ü\n\"\\"}), r#"{"\u00e9": "\u00fc\n\"\\"}"#),
            (json!({"emoji": "😀"}), r#"{"emoji": "\ud83d\ude00"}"#),
            (json!({"c": "\u{1}\u{7f}"}), r#"{"c": "\u0001\u007f"}"#),
            (
                json!({"f": 1.0, "g": 1e-5, "h": 1e16, "i": 0.1}),
                r#"{"f": 1.0, "g": 1e-05, "h": 1e+16, "i": 0.1}"#,
            ),
            (json!({}), "{}"),
        ];
        for (v, want) in cases {
            assert_eq!(dumps_sorted(&v), want, "{v}");
        }
        assert_eq!(dumps(&json!({"b": 1, "a": 2})), r#"{"b": 1, "a": 2}"#);
    }

    #[test]
    fn float_repr_matches_python() {
        for (x, want) in [
            (1.0, "1.0"),
            (-2.5, "-2.5"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (123456789012345.0, "123456789012345.0"),
            (1234567890123456.0, "1234567890123456.0"),
            (1e16, "1e+16"),
            (1.5e17, "1.5e+17"),
            (1.23456, "1.23456"),
            (1e-310, "1e-310"),
            (100.0, "100.0"),
            (0.1 + 0.2, "0.30000000000000004"),
        ] {
            assert_eq!(float_repr(x), want, "{x}");
        }
    }

    #[test]
    fn str_and_repr_match_python() {
        assert_eq!(str_of(&json!("./1.txt")), "./1.txt");
        assert_eq!(str_of(&json!(3)), "3");
        assert_eq!(str_of(&json!(2.0)), "2.0");
        assert_eq!(str_of(&json!(true)), "True");
        assert_eq!(str_of(&json!(null)), "None");
        assert_eq!(
            repr(&json!({"path": "a", "n": [1, false, null], "q": "it's"})),
            r#"{'path': 'a', 'n': [1, False, None], 'q': "it's"}"#
        );
        assert_eq!(repr(&json!("both ' and \"")), r#"'both \' and "'"#);
        assert_eq!(repr(&json!("tab\tnl\n")), r"'tab\tnl\n'");
        assert_eq!(repr(&json!("é")), "'é'");
        assert_eq!(type_name(&json!([1])), "list");
    }
}
