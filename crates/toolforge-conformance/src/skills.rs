//! The Skills extension (SEP-2640, `io.modelcontextprotocol/skills`): two small skills whose
//! files are embedded in the binary, served the way the suite's `sep-2640-*` scenarios read
//! them.
//!
//! - `skills/list` and `skills/get` answer with each skill's entry: the URI of its `SKILL.md`,
//!   the frontmatter parsed from that file's own YAML block (so the two cannot differ), and every
//!   file with the `sha256:` digest and size of the bytes `resources/read` returns.
//! - `resources/list` lists every file; a `SKILL.md` is named and described by its
//!   frontmatter. `resources/read` serves the file text as `text/markdown`.
//! - `resources/directory/read` (declared with `directoryRead: true`) lists a skill directory's
//!   direct children, a subdirectory as `inode/directory`; any other URI is `-32602`.
//!
//! `skills/list` and `resources/directory/read` answer in pages of [`PAGE`] entries, so the
//! suite's pagination checks follow a real cursor (the entry's index).

use std::collections::BTreeMap;
use std::sync::LazyLock;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    DIRECTORY_MIME_TYPE, GetSkillResult, ListResourcesResult, ListSkillsResult, ReadResourceResult,
    Resource, ResourceContents, SKILL_MD, Skill, SkillFrontmatter, SkillResource, SkillResources,
};
use serde_json::{Value, json};

/// Entries per page of `skills/list` and `resources/directory/read`.
pub(crate) const PAGE: usize = 1;

const SCHEME: &str = "skill://";
const MARKDOWN: &str = "text/markdown";

/// One embedded skill: its path below `skill://` and its files, relative to that path.
struct Embedded {
    path: &'static str,
    files: &'static [(&'static str, &'static str)],
}

const PDF_SKILL_MD: &str = "---
name: pdf-processing
description: Extract text and tables from PDF files, fill PDF forms and merge documents. Use when the user works with PDF files.
license: Apache-2.0
metadata:
  author: toolforge
  version: \"1.0\"
---

# PDF processing

Extract the text of a page with `pdftotext -f N -l N input.pdf -`, and the tables with
`tabula` on the same page range.

To fill a form, read [the forms guide](references/FORMS.md) first: it lists the field types
and how each one is set.
";

const PDF_FORMS_MD: &str = "# Filling PDF forms

1. List the form's fields and their types (text, checkbox, choice, signature).
2. Write the values as a JSON object keyed by field name.
3. Fill the form and flatten it, so that the values can no longer be edited.

A checkbox takes its export value (often `Yes`), never `true`.
";

const COMMIT_SKILL_MD: &str = "---
name: commit-messages
description: Write a git commit message from a staged diff. Use when the user asks for a commit message.
---

# Commit messages

Write a subject line of at most 72 characters in the imperative mood, a blank line, and a
body that says why the change was made, wrapped at 72 columns.
";

/// The fixture's skills, by path; the second one sits under a multi-segment path.
const EMBEDDED: &[Embedded] = &[
    Embedded {
        path: "pdf-processing",
        files: &[
            ("SKILL.md", PDF_SKILL_MD),
            ("references/FORMS.md", PDF_FORMS_MD),
        ],
    },
    Embedded {
        path: "toolforge/commit-messages",
        files: &[("SKILL.md", COMMIT_SKILL_MD)],
    },
];

/// The skills, their files and their directories, built once from [`EMBEDDED`].
#[derive(Debug)]
pub(crate) struct Skills {
    skills: Vec<Skill>,
    /// Every file, in listing order, for `resources/list`.
    listed: Vec<Resource>,
    /// File URI to its text.
    files: BTreeMap<String, &'static str>,
    /// Directory URI (no trailing slash) to its direct children.
    directories: BTreeMap<String, Vec<Resource>>,
}

static SKILLS: LazyLock<Result<Skills, String>> = LazyLock::new(|| Skills::build(EMBEDDED));

/// The fixture's skills; an error only if an embedded `SKILL.md` is malformed (a fixture bug).
pub(crate) fn skills() -> Result<&'static Skills, McpError> {
    SKILLS
        .as_ref()
        .map_err(|e| McpError::internal_error(format!("fixture bug: {e}"), None))
}

/// The YAML frontmatter block at the start of a `SKILL.md`, as JSON.
fn frontmatter(text: &str) -> Result<Value, String> {
    let rest = text
        .strip_prefix("---\n")
        .ok_or("SKILL.md does not start with ---")?;
    let end = rest
        .find("\n---\n")
        .ok_or("SKILL.md frontmatter is not closed by ---")?;
    yaml_serde::from_str(&rest[..end]).map_err(|e| format!("SKILL.md frontmatter: {e}"))
}

/// The name a file is listed under: its final path segment.
fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

impl Skills {
    fn build(embedded: &[Embedded]) -> Result<Self, String> {
        let mut out = Self {
            skills: Vec::new(),
            listed: Vec::new(),
            files: BTreeMap::new(),
            directories: BTreeMap::new(),
        };
        for skill in embedded {
            let root = format!("{SCHEME}{}", skill.path);
            let (_, manifest) = skill
                .files
                .iter()
                .find(|(path, _)| *path == SKILL_MD)
                .ok_or_else(|| format!("{root} has no SKILL.md"))?;
            let front: SkillFrontmatter = serde_json::from_value(frontmatter(manifest)?)
                .map_err(|e| format!("{root}/SKILL.md frontmatter: {e}"))?;
            let mut entries = Vec::new();
            out.directories.entry(root.clone()).or_default();
            for (path, text) in skill.files {
                let uri = format!("{root}/{path}");
                entries.push(SkillResource::from_bytes(&uri, text.as_bytes()));
                let mut resource = Resource::new(&uri, file_name(path))
                    .with_mime_type(MARKDOWN)
                    .with_size(text.len() as u64);
                if *path == SKILL_MD {
                    resource = Resource::new(&uri, &front.name)
                        .with_description(&front.description)
                        .with_mime_type(MARKDOWN)
                        .with_size(text.len() as u64);
                }
                out.listed.push(resource.clone());
                out.files.insert(uri, text);
                // The file under its directory, and each directory under its parent.
                let mut child = resource;
                let mut dir = path.rsplit_once('/').map(|(dir, _)| dir);
                loop {
                    let parent = match dir {
                        Some(d) => format!("{root}/{d}"),
                        None => root.clone(),
                    };
                    let children = out.directories.entry(parent.clone()).or_default();
                    let known = children.iter().any(|c| c.uri == child.uri);
                    if !known {
                        children.push(child);
                    }
                    let Some(d) = dir else { break };
                    if known {
                        break;
                    }
                    child =
                        Resource::new(&parent, file_name(d)).with_mime_type(DIRECTORY_MIME_TYPE);
                    dir = d.rsplit_once('/').map(|(up, _)| up);
                }
            }
            let uri = format!("{root}/{SKILL_MD}");
            let entry = Skill::new(uri, front, SkillResources::Files(entries));
            entry.validate().map_err(|e| e.to_string())?;
            out.skills.push(entry);
        }
        Ok(out)
    }

    /// One page of `skills/list`.
    pub(crate) fn list(&self, cursor: Option<&str>) -> Result<ListSkillsResult, McpError> {
        let (items, next) = page(&self.skills, cursor)?;
        let mut result = ListSkillsResult::with_all_items(items);
        result.next_cursor = next;
        Ok(result)
    }

    /// `skills/get`: the entry of the skill whose `SKILL.md` is at `uri`.
    pub(crate) fn get(&self, uri: &str) -> Result<GetSkillResult, McpError> {
        self.skills
            .iter()
            .find(|s| s.uri == uri)
            .map(|s| GetSkillResult::new(s.clone()))
            .ok_or_else(|| {
                McpError::invalid_params(format!("no skill at {uri}"), Some(json!({"uri": uri})))
            })
    }

    /// Every skill file, for `resources/list`.
    pub(crate) fn resources(&self) -> &[Resource] {
        &self.listed
    }

    /// `resources/read` of a skill file; `None` when `uri` is not one.
    pub(crate) fn read(&self, uri: &str) -> Option<ReadResourceResult> {
        let text = self.files.get(uri)?;
        Some(ReadResourceResult::new(vec![
            ResourceContents::text(*text, uri).with_mime_type(MARKDOWN),
        ]))
    }

    /// One page of `resources/directory/read`; `-32602` when `uri` is not a skill directory.
    pub(crate) fn directory(
        &self,
        uri: &str,
        cursor: Option<&str>,
    ) -> Result<ListResourcesResult, McpError> {
        let children = self.directories.get(uri).ok_or_else(|| {
            McpError::invalid_params(format!("not a directory: {uri}"), Some(json!({"uri": uri})))
        })?;
        let (items, next) = page(children, cursor)?;
        let mut result = ListResourcesResult::with_all_items(items);
        result.next_cursor = next;
        Ok(result)
    }
}

/// The page of `items` that starts at `cursor` (an index this module handed out), and the
/// cursor of the next page.
fn page<T: Clone>(items: &[T], cursor: Option<&str>) -> Result<(Vec<T>, Option<String>), McpError> {
    let start = match cursor {
        None => 0,
        Some(c) => c
            .parse::<usize>()
            .ok()
            .filter(|&i| i > 0 && i < items.len())
            .ok_or_else(|| McpError::invalid_params(format!("invalid cursor {c:?}"), None))?,
    };
    let end = (start + PAGE).min(items.len());
    let next = (end < items.len()).then(|| end.to_string());
    Ok((items[start..end].to_vec(), next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_skills_build_and_validate() {
        let skills = skills().unwrap();
        let uris: Vec<&str> = skills.skills.iter().map(|s| s.uri.as_str()).collect();
        assert_eq!(
            uris,
            [
                "skill://pdf-processing/SKILL.md",
                "skill://toolforge/commit-messages/SKILL.md"
            ]
        );
        rmcp::model::validate_skills(&skills.skills).unwrap();
    }

    #[test]
    fn a_skill_directory_lists_its_direct_children_only() {
        let skills = skills().unwrap();
        let children = |uri| {
            let mut all = Vec::new();
            let mut cursor = None;
            loop {
                let page = skills.directory(uri, cursor.as_deref()).unwrap();
                all.extend(page.resources);
                match page.next_cursor {
                    Some(next) => cursor = Some(next),
                    None => return all,
                }
            }
        };
        let root = children("skill://pdf-processing");
        let listed: Vec<(&str, Option<&str>)> = root
            .iter()
            .map(|r| (r.uri.as_str(), r.mime_type.as_deref()))
            .collect();
        assert_eq!(
            listed,
            [
                ("skill://pdf-processing/SKILL.md", Some(MARKDOWN)),
                (
                    "skill://pdf-processing/references",
                    Some(DIRECTORY_MIME_TYPE)
                ),
            ]
        );
        let refs = children("skill://pdf-processing/references");
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0].uri, "skill://pdf-processing/references/FORMS.md");
        for not_a_directory in [
            "skill://pdf-processing/SKILL.md",
            "skill://toolforge",
            "skill://nope",
        ] {
            let err = skills.directory(not_a_directory, None).unwrap_err();
            assert_eq!(err.code.0, -32602, "{not_a_directory}");
        }
    }

    #[test]
    fn pages_follow_their_cursor_and_refuse_a_foreign_one() {
        let skills = skills().unwrap();
        let first = skills.list(None).unwrap();
        assert_eq!(first.skills.len(), PAGE);
        let second = skills.list(first.next_cursor.as_deref()).unwrap();
        assert_eq!(
            second.skills[0].uri,
            "skill://toolforge/commit-messages/SKILL.md"
        );
        assert_eq!(second.next_cursor, None);
        for bad in ["0", "9", "x", "-1"] {
            assert_eq!(skills.list(Some(bad)).unwrap_err().code.0, -32602, "{bad}");
        }
    }
}
