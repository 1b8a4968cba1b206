//! The Skills extension (SEP-2640) through an rmcp client on a handshake-era session: every
//! file a `skills/list` entry names reads back with exactly the digest and size the entry
//! promises, the entry's frontmatter is the `SKILL.md`'s own, and the directory reads descend.

use rmcp::model::{
    GetSkillRequestParams, ReadResourceDirectoryRequestParams, ReadResourceRequestParams,
    ResourceContents, SkillResources,
};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;
use sha2::{Digest, Sha256};
use toolforge_conformance::Fixture;

async fn connect() -> RunningService<RoleClient, ()> {
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        if let Ok(running) = Fixture::new().serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    ().serve(client_io).await.expect("handshake")
}

/// The text `resources/read` returns for `uri` (the fixture's skill files are all text).
async fn read(client: &RunningService<RoleClient, ()>, uri: &str) -> String {
    let result = client
        .read_resource(ReadResourceRequestParams::new(uri))
        .await
        .unwrap_or_else(|e| panic!("resources/read {uri}: {e}"));
    assert_eq!(result.contents.len(), 1, "{uri}");
    match &result.contents[0] {
        ResourceContents::TextResourceContents {
            text, mime_type, ..
        } => {
            assert_eq!(mime_type.as_deref(), Some("text/markdown"), "{uri}");
            text.clone()
        }
        other => panic!("{uri}: not text: {other:?}"),
    }
}

#[tokio::test]
async fn every_listed_file_reads_back_with_the_digest_and_size_of_its_entry() {
    let client = connect().await;
    let caps = client.peer_info().unwrap().capabilities.clone();
    assert!(caps.supports_directory_read(), "{caps:?}");
    let skills = client.list_all_skills().await.unwrap();
    assert_eq!(skills.len(), 2);
    let mut files = 0;
    for skill in &skills {
        let SkillResources::Files(entries) = &skill.resources else {
            panic!("{}: resources not listed", skill.uri);
        };
        assert!(entries.iter().any(|e| e.uri == skill.uri), "{}", skill.uri);
        for entry in entries {
            let bytes = read(&client, &entry.uri).await.into_bytes();
            let digest = format!("sha256:{}", hex::encode(Sha256::digest(&bytes)));
            assert_eq!(entry.digest, digest, "{}", entry.uri);
            assert_eq!(entry.size, bytes.len() as u64, "{}", entry.uri);
            files += 1;
        }
        // The entry's frontmatter is the SKILL.md's YAML block, field for field.
        let text = read(&client, &skill.uri).await;
        let block = text
            .strip_prefix("---\n")
            .and_then(|rest| rest.split_once("\n---\n"))
            .map(|(block, _)| block)
            .unwrap();
        let parsed: Value = yaml_serde::from_str(block).unwrap();
        assert_eq!(serde_json::to_value(&skill.frontmatter).unwrap(), parsed);

        let got = client
            .get_skill(GetSkillRequestParams::new(&skill.uri))
            .await
            .unwrap();
        assert_eq!(&got.skill, skill);
    }
    assert_eq!(files, 3);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn unknown_skills_and_non_directories_are_invalid_params() {
    let client = connect().await;
    let err = client
        .get_skill(GetSkillRequestParams::new("skill://nope/SKILL.md"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("-32602"), "{err}");
    let err = client
        .read_resource_directory(ReadResourceDirectoryRequestParams::new(
            "skill://pdf-processing/SKILL.md",
        ))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("-32602"), "{err}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_skill_directory_lists_a_subdirectory_to_descend_into() {
    let client = connect().await;
    let mut children = Vec::new();
    let mut params = ReadResourceDirectoryRequestParams::new("skill://pdf-processing");
    loop {
        let page = client
            .read_resource_directory(params.clone())
            .await
            .unwrap();
        children.extend(page.resources);
        match page.next_cursor {
            Some(next) => params = params.with_cursor(next),
            None => break,
        }
    }
    let sub = children
        .iter()
        .find(|r| r.is_directory())
        .expect("a subdirectory");
    assert_eq!(sub.uri, "skill://pdf-processing/references");
    let inside = client
        .read_resource_directory(ReadResourceDirectoryRequestParams::new(&sub.uri))
        .await
        .unwrap();
    assert_eq!(
        inside.resources[0].uri,
        "skill://pdf-processing/references/FORMS.md"
    );
    client.cancel().await.unwrap();
}
