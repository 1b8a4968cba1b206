//! `toolforge tools overlaps`: the overlap groups of a catalog and why each formed (a tool name
//! shared by several servers, or a group declared in config), then *suggested* groups: tools on
//! different servers, in no group yet, whose descriptions embed close together (DESIGN §2). It
//! only reads; a suggestion becomes a group when someone pastes its snippet into the config.
//!
//! Suggestions: every tool in no group with a non-empty description is embedded (description
//! only) with the `EMBEDDER_BACKEND` embedder (hashing when none is configured). A pair of such
//! tools on different servers is a candidate when their cosine is at least `--min-similarity`.
//! Candidates are clustered by complete linkage, strongest pair first: two clusters join only
//! when every cross pair is a candidate and no server appears twice, so a cluster never chains
//! through a weak link and holds at most one tool per server. The order is by similarity
//! (weakest pair of the cluster, to 3 decimals), then name-token overlap, then config order.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use serde_json::{Value, json};
use toolforge_llm::embed::cosine;
use toolforge_select::overlap::{OverlapGroup, overlap_groups};
use toolforge_select::{Catalog, Tool, ToolId};

use crate::config::Config;
use crate::embedder::{self, Backend};

/// Default `--min-similarity` for the hashing embedder. Measured on
/// `evals/catalogs/reference.json`: the closest cross-server pair doing different jobs scores
/// 0.52, and real equivalents in other words score only 0.06 to 0.48 (hashing sees words, not
/// meaning), while hand-written near-verbatim rewordings (a fork, a wrapper, a re-exposed
/// upstream tool) score 0.79 to 0.92. So hashing suggests near-duplicates only; templated
/// descriptions of different jobs ("Create a new issue/pull request in a GitHub repository",
/// 0.82) can still pass, which is why these are only suggestions.
pub const DEFAULT_MIN_SIMILARITY_HASHING: f32 = 0.8;
/// Default `--min-similarity` for model embedders (`local`, `openai`, `voyage`). With
/// all-MiniLM-L6-v2 the closest cross-server pair doing different jobs on the reference catalog
/// (`github/list_commits`, `git/git_branch`) scores 0.74, and close paraphrases 0.79 to 0.86.
pub const DEFAULT_MIN_SIMILARITY_MODEL: f32 = 0.8;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A catalog snapshot (JSON, as written by `toolforge tools snapshot`) instead of the live
    /// pool.
    #[arg(long, value_name = "FILE", conflicts_with = "config")]
    pub catalog: Option<PathBuf>,
    /// Servers configuration for the live pool (default: $MCP_SERVERS_CONFIG, else
    /// ./mcp.servers.json).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Suggest a pair when the cosine of its descriptions is at least this (0 to 1; default 0.8
    /// for the hashing embedder and for model embedders).
    #[arg(long, value_name = "X")]
    pub min_similarity: Option<f32>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(args: Args, config: &Config) -> anyhow::Result<ExitCode> {
    if let Some(x) = args.min_similarity
        && !(0.0..=1.0).contains(&x)
    {
        anyhow::bail!("--min-similarity must be between 0 and 1, got {x}");
    }
    let catalog = match &args.catalog {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading catalog snapshot {}", path.display()))?;
            Catalog::from_snapshot_json(&text)
                .with_context(|| format!("parsing catalog snapshot {}", path.display()))?
        }
        None => live_catalog(config, args.config.clone()).await?,
    };
    // Suggestions need an embedder: `none` (BM25 only elsewhere) means the hashing one here.
    let backend = match config.embedder.backend_or_none() {
        Backend::None => Backend::Hashing,
        b => b,
    };
    let min_similarity = args.min_similarity.unwrap_or(match backend {
        Backend::None | Backend::Hashing => DEFAULT_MIN_SIMILARITY_HASHING,
        Backend::Local | Backend::OpenAi | Backend::Voyage => DEFAULT_MIN_SIMILARITY_MODEL,
    });
    let embedder = embedder::build(backend, &config.embedder)?
        .context("no embedder for overlap suggestions")?;

    let groups = overlap_groups(&catalog);
    let report_groups: Vec<GroupReport> = groups.iter().map(|g| explain(&catalog, g)).collect();
    let ignored = ignored_declared_members(&catalog);

    let grouped: BTreeSet<ToolId> = groups.iter().flat_map(|g| g.members.clone()).collect();
    let eligible: Vec<&Tool> = catalog
        .tools()
        .filter(|t| !t.description.trim().is_empty() && !grouped.contains(&t.id()))
        .collect();
    let texts: Vec<String> = eligible.iter().map(|t| t.description.clone()).collect();
    let vectors = if texts.is_empty() {
        Vec::new()
    } else {
        embedder
            .embed(&texts)
            .await
            .context("embedding tool descriptions")?
    };
    anyhow::ensure!(
        vectors.len() == texts.len(),
        "the embedder returned {} vectors for {} descriptions",
        vectors.len(),
        texts.len()
    );
    let mut taken: BTreeSet<String> = catalog.overlaps.iter().map(|(k, _)| k.clone()).collect();
    taken.extend(groups.iter().map(|g| g.name.clone()));
    let suggestions = suggest(&eligible, &vectors, min_similarity, &mut taken);

    if args.json {
        let out = json!({
            "embedder": embedder.id(),
            "min_similarity": round3(min_similarity),
            "groups": report_groups.iter().map(GroupReport::to_json).collect::<Vec<_>>(),
            "ignored_declared_members": ignored
                .iter()
                .map(|(group, member)| json!({"group": group, "member": member}))
                .collect::<Vec<_>>(),
            "suggestions": suggestions.iter().map(Suggestion::to_json).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_text(
            &catalog,
            &report_groups,
            &ignored,
            &suggestions,
            embedder.id(),
            min_similarity,
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The live pool's catalog, as `toolforge tools snapshot` takes it (with its warnings).
async fn live_catalog(config: &Config, flag: Option<PathBuf>) -> anyhow::Result<Catalog> {
    let pool = crate::pool::start(config, flag).await?;
    let catalog = pool.catalog();
    let health = pool.health();
    pool.shutdown().await;
    for h in health
        .iter()
        .filter(|h| h.state != toolforge_mcp::ServerState::Ready)
    {
        eprintln!(
            "warning: server {} is {:?}; its tools are missing from the overlaps{}",
            h.name,
            h.state,
            h.last_error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        );
    }
    Ok(catalog)
}

/// One current group and why it formed.
struct GroupReport {
    name: String,
    members: Vec<ToolId>,
    /// Tool names that two or more members share.
    shared_names: Vec<String>,
    /// Keys of the declared groups that contributed a member, in config order.
    declared: Vec<String>,
}

impl GroupReport {
    fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "members": self.members,
            "why": {"shared_names": self.shared_names, "declared": self.declared},
        })
    }

    fn why(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if !self.declared.is_empty() {
            parts.push(format!("declared {}", self.declared.join(", ")));
        }
        if !self.shared_names.is_empty() {
            parts.push(format!("shared name {}", self.shared_names.join(", ")));
        }
        parts.join("; ")
    }
}

fn explain(catalog: &Catalog, group: &OverlapGroup) -> GroupReport {
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for m in &group.members {
        *count.entry(m.name.as_str()).or_default() += 1;
    }
    let mut shared_names: Vec<String> = Vec::new();
    for m in &group.members {
        if count[m.name.as_str()] >= 2 && !shared_names.contains(&m.name) {
            shared_names.push(m.name.clone());
        }
    }
    let declared = catalog
        .overlaps
        .iter()
        .filter(|(_, members)| members.iter().any(|m| group.members.contains(m)))
        .map(|(key, _)| key.clone())
        .collect();
    GroupReport {
        name: group.name.clone(),
        members: group.members.clone(),
        shared_names,
        declared,
    }
}

/// Declared members that are not in the catalog (ignored when groups form), in config order.
fn ignored_declared_members(catalog: &Catalog) -> Vec<(String, ToolId)> {
    catalog
        .overlaps
        .iter()
        .flat_map(|(key, members)| {
            members
                .iter()
                .filter(|m| catalog.get(m).is_none())
                .map(move |m| (key.clone(), m.clone()))
        })
        .collect()
}

/// A suggested group.
struct Suggestion {
    /// The key its snippet declares: the first member's name, made unique.
    name: String,
    /// Members in config order, with their descriptions.
    members: Vec<(ToolId, String)>,
    /// The weakest pair's cosine.
    similarity: f32,
    /// Jaccard overlap of the members' name tokens (tie-breaker).
    name_overlap: f32,
}

impl Suggestion {
    fn ids(&self) -> Vec<String> {
        self.members.iter().map(|(id, _)| id.to_string()).collect()
    }

    fn snippet(&self) -> Value {
        json!({"toolforge": {"overlaps": {self.name.clone(): self.ids()}}})
    }

    /// The snippet as one line to paste inside the config's top-level object.
    fn snippet_text(&self) -> String {
        let quote = |s: &str| Value::from(s).to_string();
        let members: Vec<String> = self.ids().iter().map(|id| quote(id)).collect();
        format!(
            "\"toolforge\": {{\"overlaps\": {{{}: [{}]}}}}",
            quote(&self.name),
            members.join(", ")
        )
    }

    fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "members": self.ids(),
            "similarity": round3(self.similarity),
            "name_overlap": round3(self.name_overlap),
            "snippet": self.snippet(),
        })
    }
}

fn round3(x: f32) -> f64 {
    (f64::from(x) * 1000.0).round() / 1000.0
}

/// Similarity as the sort key: thousandths, so float noise never beats the tie-breaker.
fn millis(x: f32) -> i64 {
    (f64::from(x) * 1000.0).round() as i64
}

/// Lower-case tokens of a tool name (split at non-alphanumerics and camelCase), without the
/// server's own name (`git/git_log` is `log`).
fn name_tokens(tool: &Tool) -> BTreeSet<String> {
    let mut tokens = BTreeSet::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in tool.name.chars() {
        if (!c.is_alphanumeric() || (c.is_uppercase() && prev_lower)) && !word.is_empty() {
            tokens.insert(std::mem::take(&mut word));
        }
        if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
    }
    if !word.is_empty() {
        tokens.insert(word);
    }
    let server = tool.server.to_lowercase();
    if tokens.len() > 1 {
        tokens.remove(&server);
    }
    tokens
}

fn jaccard(sets: &[&BTreeSet<String>]) -> f32 {
    let Some((first, rest)) = sets.split_first() else {
        return 0.0;
    };
    let mut common: BTreeSet<&String> = first.iter().collect();
    let mut all: BTreeSet<&String> = first.iter().collect();
    for s in rest {
        common.retain(|t| s.contains(*t));
        all.extend(s.iter());
    }
    if all.is_empty() {
        0.0
    } else {
        common.len() as f32 / all.len() as f32
    }
}

/// Clusters `tools` (config order) by complete linkage over the pairs at or above `min`.
/// `taken` holds config keys already in use; the suggestions' keys are added to it.
fn suggest(
    tools: &[&Tool],
    vectors: &[Vec<f32>],
    min: f32,
    taken: &mut BTreeSet<String>,
) -> Vec<Suggestion> {
    let tokens: Vec<BTreeSet<String>> = tools.iter().map(|t| name_tokens(t)).collect();
    let mut sim: BTreeMap<(usize, usize), f32> = BTreeMap::new();
    for i in 0..tools.len() {
        for j in i + 1..tools.len() {
            if tools[i].server == tools[j].server {
                continue;
            }
            let s = cosine(&vectors[i], &vectors[j]);
            if s >= min {
                sim.insert((i, j), s);
            }
        }
    }
    let mut edges: Vec<((usize, usize), f32, f32)> = sim
        .iter()
        .map(|(&(i, j), &s)| ((i, j), s, jaccard(&[&tokens[i], &tokens[j]])))
        .collect();
    edges.sort_by(|a, b| {
        millis(b.1)
            .cmp(&millis(a.1))
            .then(millis(b.2).cmp(&millis(a.2)))
            .then(a.0.cmp(&b.0))
    });
    // cluster[i]: the cluster id of tool i; clusters[id]: its members (ascending).
    let mut cluster: Vec<usize> = (0..tools.len()).collect();
    let mut clusters: Vec<Vec<usize>> = (0..tools.len()).map(|i| vec![i]).collect();
    for ((i, j), _, _) in edges {
        let (ci, cj) = (cluster[i], cluster[j]);
        if ci == cj {
            continue;
        }
        let joinable = clusters[ci].iter().all(|&a| {
            clusters[cj].iter().all(|&b| {
                let key = (a.min(b), a.max(b));
                tools[a].server != tools[b].server && sim.contains_key(&key)
            })
        });
        if !joinable {
            continue;
        }
        let (keep, gone) = (ci.min(cj), ci.max(cj));
        let moved = std::mem::take(&mut clusters[gone]);
        for &m in &moved {
            cluster[m] = keep;
        }
        clusters[keep].extend(moved);
        clusters[keep].sort_unstable();
    }
    let mut out: Vec<Suggestion> = clusters
        .into_iter()
        .filter(|c| c.len() >= 2)
        .map(|c| {
            let mut weakest = f32::INFINITY;
            for (x, &a) in c.iter().enumerate() {
                for &b in &c[x + 1..] {
                    weakest = weakest.min(sim[&(a, b)]);
                }
            }
            let sets: Vec<&BTreeSet<String>> = c.iter().map(|&m| &tokens[m]).collect();
            Suggestion {
                name: String::new(),
                members: c
                    .iter()
                    .map(|&m| (tools[m].id(), tools[m].description.clone()))
                    .collect(),
                similarity: weakest,
                name_overlap: jaccard(&sets),
            }
        })
        .collect();
    // Clusters were built from config-ordered indices, so the first member orders ties.
    out.sort_by(|a, b| {
        millis(b.similarity)
            .cmp(&millis(a.similarity))
            .then(millis(b.name_overlap).cmp(&millis(a.name_overlap)))
            .then(a.members[0].0.cmp(&b.members[0].0))
    });
    for s in &mut out {
        s.name = unique_key(&s.members[0].0.name, taken);
    }
    out
}

/// `base`, or `base_2`, `base_3`, ... : the first not in `taken` (which then holds it).
fn unique_key(base: &str, taken: &mut BTreeSet<String>) -> String {
    let mut key = base.to_owned();
    let mut n = 2;
    while taken.contains(&key) {
        key = format!("{base}_{n}");
        n += 1;
    }
    taken.insert(key.clone());
    key
}

fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty());
    let line = line.unwrap_or("");
    if line.chars().count() > max {
        let cut: String = line.chars().take(max - 1).collect();
        format!("{cut}…")
    } else {
        line.to_owned()
    }
}

fn print_text(
    catalog: &Catalog,
    groups: &[GroupReport],
    ignored: &[(String, ToolId)],
    suggestions: &[Suggestion],
    embedder: &str,
    min: f32,
) {
    println!(
        "overlap groups: {} ({} tools on {} servers)",
        groups.len(),
        catalog.len(),
        catalog.servers.len()
    );
    for g in groups {
        println!("  {}  ({})", g.name, g.why());
        for m in &g.members {
            println!("    {m}");
        }
    }
    if !ignored.is_empty() {
        println!("declared members not in the catalog (ignored):");
        for (group, member) in ignored {
            println!("  {group}: {member}");
        }
    }
    println!();
    println!(
        "suggested groups: {} (descriptions embedded with {embedder}, cosine >= {min:.2}; nothing \
         is changed)",
        suggestions.len()
    );
    if suggestions.is_empty() {
        println!("  none: no two ungrouped tools on different servers are that similar");
    }
    for s in suggestions {
        println!(
            "  {}  similarity {:.3}, name overlap {:.2}",
            s.name, s.similarity, s.name_overlap
        );
        let width = s
            .members
            .iter()
            .map(|(id, _)| id.to_string().chars().count())
            .max()
            .unwrap_or(0);
        for (id, description) in &s.members {
            let id = id.to_string();
            println!("    {id:<width$}  {}", first_line(description, 70));
        }
        println!("    config: {}", s.snippet_text());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(server: &str, name: &str) -> Tool {
        let def = json!({"name": name}).as_object().cloned().unwrap();
        Tool::from_mcp(server, def, &[]).unwrap()
    }

    #[test]
    fn name_tokens_split_and_drop_the_server_name() {
        let t = |s: &str, n: &str| name_tokens(&tool(s, n)).into_iter().collect::<Vec<_>>();
        assert_eq!(t("git", "git_create_branch"), ["branch", "create"]);
        assert_eq!(t("gh", "getFileContents"), ["contents", "file", "get"]);
        assert_eq!(t("fetch", "fetch"), ["fetch"]);
    }

    #[test]
    fn keys_are_made_unique() {
        let mut taken: BTreeSet<String> = ["read".to_owned(), "read_2".to_owned()].into();
        assert_eq!(unique_key("read", &mut taken), "read_3");
        assert_eq!(unique_key("write", &mut taken), "write");
        assert_eq!(unique_key("write", &mut taken), "write_2");
    }
}
