//! Snapshots (insta) of what the gateway puts on the wire for `tools/list`: the definitions a
//! client sees, single tools re-exposed with their server's own definition and overlap groups
//! under one name with merged annotations, and the list's cache hints. A change to any of it
//! shows up as a snapshot diff to review.

use serde_json::json;

use crate::Served;
use crate::stateless::{rpc_at, session_rpc};

#[tokio::test]
async fn tools_list_of_a_single_server_and_of_overlap_groups() {
    let toolkit = json!({"command": "toolforge", "args": ["server", "toolkit", "--stdio"]});
    // The same server twice: every tool of one is a member of an overlap group.
    let served = Served::start_full(
        &json!({"mcpServers": {"toolkit": toolkit, "mirror": toolkit}}),
        &[],
        &["--stateless"],
    )
    .await;
    served
        .wait_health(60, |h| {
            ["toolkit", "mirror"]
                .iter()
                .all(|s| crate::server_state(h, s)["state"] == "ready")
        })
        .await;
    let (_, grouped) = session_rpc(&served.base, None, 1, "tools/list", json!({})).await;
    insta::assert_json_snapshot!("tools_list_overlap_groups", grouped);

    let single = Served::start_full(
        &json!({"mcpServers": {"toolkit": toolkit}}),
        &[],
        &["--stateless"],
    )
    .await;
    single
        .wait_health(60, |h| {
            crate::server_state(h, "toolkit")["state"] == "ready"
        })
        .await;
    // Narrowed by the request: the cache hint turns private.
    let (_, narrowed) = rpc_at(
        &format!("{}/mcp?tools=sql_query", single.base),
        None,
        2,
        "tools/list",
        json!({}),
    )
    .await;
    insta::assert_json_snapshot!("tools_list_single_server_narrowed", narrowed);
}
