//! `toolforge tools overlaps` on a catalog snapshot: the current groups and why they formed
//! (shared name, declared), and suggestions from description similarity with a snippet that,
//! pasted into the config, forms the group. The command never writes anything.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::bin;

fn tool(name: &str, description: &str) -> Value {
    json!({"name": name, "description": description, "inputSchema": {"type": "object"}})
}

/// Two servers share `read_file` (a group), one group is declared (with a member that is not in
/// the catalog), `web/fetch_url` and `browser/get_page` describe the same job in nearly the same
/// words (a suggestion), and `clock/get_current_time` vs `mail/send_email` are unrelated.
fn catalog() -> Value {
    json!({
        "servers": [
            {"name": "fs", "tools": [
                tool("read_file", "Read the complete contents of a file from disk."),
                tool("write_file", "Create a new file or overwrite an existing file with content."),
                tool("list_directory", "List the files and folders of a directory."),
            ]},
            {"name": "gh", "tools": [
                tool("read_file", "Get the contents of a file or directory from a GitHub repository."),
                tool("create_or_update_file", "Create or update a single file in a GitHub repository."),
                tool("create_issue", "Open a new issue in a GitHub repository."),
            ]},
            {"name": "web", "tools": [
                tool("fetch_url", "Fetch a URL from the internet and return its content as markdown."),
            ]},
            {"name": "browser", "tools": [
                tool("get_page", "Fetches a URL from the internet and returns its content as Markdown."),
            ]},
            {"name": "clock", "tools": [
                tool("get_current_time", "Get the current time in a given IANA timezone."),
            ]},
            {"name": "mail", "tools": [
                tool("send_email", "Send an email message to one or more recipients."),
            ]},
        ],
        "overlaps": {"write": ["fs/write_file", "gh/create_or_update_file", "gone/write"]}
    })
}

fn write(dir: &Path, snapshot: &Value) -> PathBuf {
    let path = dir.join("catalog.json");
    std::fs::write(&path, serde_json::to_string_pretty(snapshot).unwrap()).unwrap();
    path
}

fn run(catalog: &Path, extra: &[&str]) -> String {
    let out = Command::new(bin())
        .args(["tools", "overlaps", "--catalog"])
        .arg(catalog)
        .args(extra)
        .env_remove("EMBEDDER_BACKEND")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn run_json(catalog: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["--json"];
    args.extend_from_slice(extra);
    serde_json::from_str(&run(catalog, &args)).unwrap()
}

fn members(suggestions: &Value) -> Vec<Vec<String>> {
    suggestions
        .as_array()
        .unwrap()
        .iter()
        .map(|s| serde_json::from_value(s["members"].clone()).unwrap())
        .collect()
}

#[test]
fn overlaps_explains_groups_and_suggests_near_duplicate_descriptions() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &catalog());
    let before = std::fs::read(&path).unwrap();
    let out = run_json(&path, &[]);

    assert_eq!(out["embedder"], "hashing-v1/512", "{out}");
    assert_eq!(out["min_similarity"], 0.8);
    assert_eq!(
        out["groups"],
        json!([
            {"name": "read_file", "members": ["fs/read_file", "gh/read_file"],
             "why": {"shared_names": ["read_file"], "declared": []}},
            {"name": "write", "members": ["fs/write_file", "gh/create_or_update_file"],
             "why": {"shared_names": [], "declared": ["write"]}},
        ])
    );
    assert_eq!(
        out["ignored_declared_members"],
        json!([{"group": "write", "member": "gone/write"}])
    );

    let suggestions = &out["suggestions"];
    assert_eq!(
        members(suggestions),
        [["web/fetch_url", "browser/get_page"]],
        "{suggestions}"
    );
    let s = &suggestions[0];
    assert_eq!(s["name"], "fetch_url");
    let similarity = s["similarity"].as_f64().unwrap();
    assert!((0.8..=1.0).contains(&similarity), "{s}");
    assert_eq!(s["name_overlap"], 0.0);
    assert_eq!(
        s["snippet"],
        json!({"toolforge": {"overlaps": {"fetch_url": ["web/fetch_url", "browser/get_page"]}}})
    );

    // Unrelated tools are far apart: not suggested even well below the default.
    let loose = run_json(&path, &["--min-similarity", "0.3"]);
    for m in members(&loose["suggestions"]) {
        assert!(
            !(m.contains(&"clock/get_current_time".to_owned())
                && m.contains(&"mail/send_email".to_owned())),
            "unrelated pair suggested: {loose}"
        );
        // Tools already in a group are never suggested again.
        for grouped in ["fs/read_file", "gh/read_file", "fs/write_file"] {
            assert!(!m.contains(&grouped.to_owned()), "{loose}");
        }
    }
    // Nothing reaches a cosine of 1 here.
    let strict = run_json(&path, &["--min-similarity", "1"]);
    assert_eq!(strict["suggestions"], json!([]));

    assert_eq!(std::fs::read(&path).unwrap(), before, "the catalog changed");
}

#[test]
fn overlaps_text_snippet_pasted_into_the_config_forms_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &catalog());
    let text = run(&path, &[]);
    assert_eq!(run(&path, &[]), text, "output is not deterministic");
    assert!(
        text.starts_with("overlap groups: 2 (10 tools on 6 servers)\n"),
        "{text}"
    );
    assert!(
        text.contains("  read_file  (shared name read_file)\n"),
        "{text}"
    );
    assert!(text.contains("  write  (declared write)\n"), "{text}");
    assert!(text.contains("  write: gone/write\n"), "{text}");
    assert!(
        text.contains(
            "suggested groups: 1 (descriptions embedded with hashing-v1/512, cosine >= 0.80"
        ),
        "{text}"
    );

    let line = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("config: "))
        .unwrap_or_else(|| panic!("no snippet in {text}"));
    assert_eq!(
        line,
        r#""toolforge": {"overlaps": {"fetch_url": ["web/fetch_url", "browser/get_page"]}}"#
    );
    // Paste it: the suggestion becomes a declared group and is no longer suggested.
    let pasted: Value = serde_json::from_str(&format!("{{{line}}}")).unwrap();
    let mut snapshot = catalog();
    snapshot["overlaps"]["fetch_url"] = pasted["toolforge"]["overlaps"]["fetch_url"].clone();
    let path = write(dir.path(), &snapshot);
    let out = run_json(&path, &[]);
    assert_eq!(
        out["groups"][2],
        json!({"name": "fetch_url", "members": ["web/fetch_url", "browser/get_page"],
               "why": {"shared_names": [], "declared": ["fetch_url"]}})
    );
    assert_eq!(out["suggestions"], json!([]));
}

#[test]
fn overlaps_rejects_a_similarity_outside_zero_to_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(bin())
        .args(["tools", "overlaps", "--min-similarity", "1.5", "--catalog"])
        .arg(write(dir.path(), &catalog()))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--min-similarity"), "{err}");
}
