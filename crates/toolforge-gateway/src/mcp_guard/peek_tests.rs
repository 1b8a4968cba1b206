//! The fast path ([`super::peek`]) against the full check: the same answer wherever it answers,
//! and every message it does not vouch for left to the full check.

use super::checked;
use super::peek::peek;

/// What the full check makes of `body`, in the fast path's terms (`None`: an error).
fn full(body: &str, modern: bool) -> Option<(bool, Option<String>, String)> {
    let p = checked(body.as_bytes(), modern).ok()?;
    Some((p.is_request, p.method, p.id_key))
}

/// The fast path agrees with the full check wherever it answers.
#[test]
fn agrees_with_the_full_check() {
    let bodies = [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"m":"x"}}}"#,
        r#"{"jsonrpc":"2.0","id":"a-1","method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":7,"error":{"code":1,"message":"no"}}"#,
        r#"{"jsonrpc":"2.0","id":-3,"method":"ping","extra":[1,2,{"x":null}]}"#,
        r#" { "jsonrpc" : "2.0" , "id" : 0 , "method" : "initialize" , "params" : {} } "#,
        r#"{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"a:b"}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"e\u0063ho","arguments":{"a":[1,-2,3.5e10,true,null,{"b":"\"q\""}],"":{},"c":[]},"_meta":{"progressToken":"t"}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":null,"requestState":"s","inputResponses":{"k":{"action":"accept"}}}}"#,
    ];
    for body in bodies {
        for modern in [false, true] {
            let fast = peek(body.as_bytes(), modern).expect(body);
            assert_eq!(
                Some((fast.is_request, fast.method, fast.id_key)),
                full(body, modern),
                "{body}"
            );
        }
    }
    // On 2026-07-28 a subscribe is rmcp's to refuse, whatever its parameters.
    let subscribe = r#"{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{}}"#;
    assert!(peek(subscribe.as_bytes(), true).is_some());
    assert!(full(subscribe, true).is_some());
    assert!(peek(subscribe.as_bytes(), false).is_none());
    assert!(full(subscribe, false).is_none());
}

/// What the fast path does not vouch for goes to the full check: invalid messages, and
/// valid ones spelled in ways the shallow parse does not read.
#[test]
fn leaves_the_rest_to_the_full_check() {
    let bodies = [
        "not json",
        "[]",
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[]}"#,
        r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":-0,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":12345678901234567890123,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":"\u0041","method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":null}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"ping","id":2}"#,
        r#"{"jsonrpc":"2.0","id":1}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":5}}"#,
    ];
    for body in bodies {
        assert!(peek(body.as_bytes(), false).is_none(), "{body}");
    }
    // Call parameters rmcp refuses are never vouched for: the arguments are read through
    // in full, though not kept.
    let refused = [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","arguments":[1]}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","arguments":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","arguments":{"x":1e400}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","arguments":{"x":[-1e999]}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","_meta":7}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","requestState":1}}"#,
    ];
    for body in refused {
        assert!(full(body, false).is_none(), "the full check takes {body}");
        assert!(peek(body.as_bytes(), false).is_none(), "{body}");
    }
    // The full check still accepts a valid message the fast path leaves to it.
    assert_eq!(
        full(r#"{"jsonrpc":"2.0","id":"\u0041","method":"ping"}"#, false),
        Some((true, Some("ping".to_owned()), "\"A\"".to_owned()))
    );
}
