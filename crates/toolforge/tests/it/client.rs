//! `toolforge client` against the conformance fixture over Streamable HTTP, on protocol
//! 2026-07-28: a multi round-trip call (the client answers the fixture's input requests and
//! echoes its sealed `requestState`) and a tool whose argument travels in an `Mcp-Param-*`
//! header the fixture checks against the body.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use crate::{announced_blocking, bin};

/// `toolforge server conformance --port 0`, killed on drop.
struct Fixture {
    child: std::process::Child,
    url: String,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn fixture() -> Fixture {
    let mut child = std::process::Command::new(bin())
        .args(["server", "conformance", "--port", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the conformance fixture");
    let stderr = child.stderr.take().expect("piped stderr");
    let addr = announced_blocking(
        stderr,
        "conformance fixture listening on http://",
        Duration::from_secs(30),
    );
    Fixture {
        child,
        url: format!("http://{addr}/mcp"),
    }
}

/// Runs `toolforge client URL --tool TOOL [--args JSON]`; its exit success and printed JSON.
fn client(url: &str, tool: &str, args: Option<&str>) -> (bool, Value) {
    let mut cmd = std::process::Command::new(bin());
    cmd.args(["client", "--timeout", "20", "--tool", tool])
        .env_remove("MCP_CONFORMANCE_SCENARIO")
        .env_remove("MCP_CONFORMANCE_CONTEXT");
    if let Some(args) = args {
        cmd.args(["--args", args]);
    }
    let out = cmd.arg(url).output().expect("run toolforge client");
    let printed = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "no JSON on stdout; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.success(), printed)
}

fn first_text(printed: &Value) -> &str {
    printed["calls"][0]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text result: {printed}"))
}

#[test]
fn client_answers_input_requests_and_echoes_the_request_state() {
    let f = fixture();
    let (ok, printed) = client(&f.url, "test_input_required_result_list_roots", None);
    assert!(ok, "{printed}");
    assert_eq!(first_text(&printed), "Found 0 root(s)");

    // Sealed requestState: the fixture completes only if the client echoed it unchanged.
    let (ok, printed) = client(&f.url, "test_input_required_result_capabilities", None);
    assert!(ok, "{printed}");
    assert_eq!(
        first_text(&printed),
        "capabilities-ok: received elicit_input"
    );
}

#[test]
fn client_mirrors_annotated_arguments_into_headers() {
    let f = fixture();
    for region in ["us-west1", "Grüße, 世界", " padded "] {
        let args = serde_json::json!({ "region": region }).to_string();
        let (ok, printed) = client(&f.url, "test_custom_header", Some(&args));
        assert!(ok, "{region}: {printed}");
        assert_eq!(first_text(&printed), format!("Region: {region}"));
    }
}
