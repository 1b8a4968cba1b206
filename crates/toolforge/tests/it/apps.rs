//! MCP Apps through the gateway: two fastmcp app servers (`tests/python/app_server.py`) whose
//! `show_card` tools both link `ui://widget/card.html`, behind one gateway; a host on the
//! official Python SDK (`tests/python/apps_client.py`) lists the tools and reads each tool's
//! `ui://` resource, as it would to render the tool's results, and must get that tool's own
//! server's HTML, in the default mode and with `--namespace always`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{Served, root, tool};

fn app_server(label: &str) -> Value {
    json!({
        "command": tool("fastmcp-venv/bin/python"),
        "args": [root().join("crates/toolforge/tests/python/app_server.py"), label],
    })
}

async fn host_view(served: &Served) -> Value {
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(tool("venv/bin/python"))
            .arg(root().join("crates/toolforge/tests/python/apps_client.py"))
            .arg(served.mcp())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the host finished within 120 s")
    .expect("the host ran");
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "apps_client.py output is not JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The `ui` link of the tool named `name`.
fn link<'a>(view: &'a Value, name: &str) -> &'a str {
    view["tools"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == name))
        .and_then(|t| t["ui"].as_str())
        .unwrap_or_else(|| panic!("no tool {name} with a ui link in {view}"))
}

/// What reading `uri` gave the host.
fn html<'a>(view: &'a Value, uri: &str) -> &'a str {
    view["reads"][uri]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{uri} was not read: {view}"))
}

async fn each_tool_opens_its_own_html(args: &[&str]) {
    let config = json!({"mcpServers": {"alpha": app_server("alpha"), "beta": app_server("beta")}});
    let served = Served::start_full(&config, &[], args).await;
    let health = served.wait_health(90, |h| h["status"] == "ok").await;
    assert_eq!(health["status"], "ok", "{health}");
    let view = host_view(&served).await;

    let alpha = link(&view, "alpha__show_card");
    let beta = link(&view, "beta__show_card");
    assert_ne!(alpha, beta, "the two tools lead to two resources: {view}");
    assert!(
        alpha.starts_with("ui://") && beta.starts_with("ui://"),
        "{view}"
    );
    assert!(html(&view, alpha).contains("card of alpha"), "{view}");
    assert!(html(&view, beta).contains("card of beta"), "{view}");
    if args.is_empty() {
        // Plain tools of the same name still merge into one.
        assert!(
            view["tools"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["name"] == "ping"),
            "{view}"
        );
    }
    assert_eq!(
        view["reads"][beta]["uris"],
        json!([beta]),
        "the contents are named as the host asked: {view}"
    );
    assert_eq!(view["reads"][beta]["mimeType"], "text/html;profile=mcp-app");
    // Both copies are listed, each under the URI its tool links.
    let listed: Vec<&str> = view["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["uri"].as_str())
        .collect();
    assert!(listed.contains(&alpha) && listed.contains(&beta), "{view}");
    // The gateway declares the extension its backends offer.
    assert!(
        view["extensions"]["io.modelcontextprotocol/ui"].is_object(),
        "{view}"
    );
}

#[tokio::test]
async fn two_app_servers_each_open_their_own_html_by_default() {
    each_tool_opens_its_own_html(&[]).await;
}

#[tokio::test]
async fn two_app_servers_each_open_their_own_html_with_namespace_always() {
    each_tool_opens_its_own_html(&["--namespace", "always"]).await;
}
