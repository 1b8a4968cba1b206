//! The five-rule selector: which server runs a call to an overlap group.
//!
//! Rules run in strict order and the first that decides wins: `explicit-mention`,
//! `argument-type` (may only narrow), `session-recency`, `cosine-similarity`, `priority-order`;
//! a lone candidate is `single-candidate`. Pure and deterministic: embeddings, validators and
//! session history arrive as data. The [`Decision`] records every rule's evidence.

use serde::Serialize;
use serde_json::Value;

use crate::catalog::ToolId;

/// One visible member of the group, in config order.
pub struct Candidate<'a> {
    pub id: ToolId,
    /// Configured aliases of the candidate's server.
    pub aliases: &'a [String],
    /// Validator for the tool's input schema, built once by the caller and reused.
    pub validator: Option<&'a jsonschema::Validator>,
    /// Embedding of the tool description.
    pub embedding: Option<&'a [f32]>,
}

/// What the selector knows about the request.
pub struct Context<'a> {
    pub prompt: &'a str,
    pub arguments: &'a Value,
    /// Earlier executed calls in this session, oldest first.
    pub session: &'a [ToolId],
    /// All members of the group (visible or not), used by `session-recency`.
    pub group: &'a [ToolId],
    pub prompt_embedding: Option<&'a [f32]>,
}

/// A rule's outcome when it does not abstain.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// The candidate at this index wins.
    Choose(usize, String),
    /// Later rules choose among these indices only.
    Narrow(Vec<usize>, String),
}

/// One rule's evidence in a decision.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RuleTrace {
    pub rule: &'static str,
    pub outcome: &'static str,
    pub evidence: String,
}

/// The selector's answer, explaining itself.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Decision {
    pub rule: &'static str,
    pub chosen: ToolId,
    pub alternatives: Vec<String>,
    pub candidates: Vec<ToolId>,
    pub trace: Vec<RuleTrace>,
}

type Rule = fn(&Context<'_>, &[&Candidate<'_>]) -> Option<Verdict>;

/// The rules in order with their exact labels.
pub const RULES: [(&str, Rule); 5] = [
    ("explicit-mention", explicit_mention),
    ("argument-type", argument_type),
    ("session-recency", session_recency),
    ("cosine-similarity", cosine_similarity),
    ("priority-order", priority_order),
];

/// Minimum lead of the best cosine score over the runner-up.
pub const COSINE_MARGIN: f32 = 0.05;

/// Picks one candidate. Returns `None` only for an empty candidate set.
pub fn select(ctx: &Context<'_>, candidates: &[Candidate<'_>]) -> Option<Decision> {
    let first = candidates.first()?;
    let ids: Vec<ToolId> = candidates.iter().map(|c| c.id.clone()).collect();
    let finish = |rule, chosen: &ToolId, trace| {
        let mut alternatives: Vec<String> = Vec::new();
        for c in candidates {
            if c.id.server != chosen.server && !alternatives.contains(&c.id.server) {
                alternatives.push(c.id.server.clone());
            }
        }
        Decision {
            rule,
            chosen: chosen.clone(),
            alternatives,
            candidates: ids.clone(),
            trace,
        }
    };
    if candidates.len() == 1 {
        return Some(finish("single-candidate", &first.id, Vec::new()));
    }
    let mut remaining: Vec<&Candidate<'_>> = candidates.iter().collect();
    let mut trace = Vec::new();
    for (label, rule) in RULES {
        match rule(ctx, &remaining) {
            Some(Verdict::Choose(i, evidence)) => {
                let chosen = remaining[i].id.clone();
                trace.push(RuleTrace {
                    rule: label,
                    outcome: "chose",
                    evidence,
                });
                return Some(finish(label, &chosen, trace));
            }
            Some(Verdict::Narrow(keep, evidence)) => {
                trace.push(RuleTrace {
                    rule: label,
                    outcome: "narrowed",
                    evidence,
                });
                remaining = keep.into_iter().map(|i| remaining[i]).collect();
            }
            None => trace.push(RuleTrace {
                rule: label,
                outcome: "abstained",
                evidence: String::new(),
            }),
        }
    }
    // priority-order always decides on a non-empty set; keep a total fallback anyway.
    Some(finish(
        "priority-order",
        &remaining.first().unwrap_or(&first).id,
        trace,
    ))
}

fn mentions(prompt: &str, word: &str) -> bool {
    if word.is_empty() {
        return false;
    }
    let hay = prompt.to_lowercase();
    let word = word.to_lowercase();
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    hay.match_indices(&word).any(|(at, m)| {
        let before = hay[..at].chars().next_back().is_none_or(|c| !is_word(c));
        let after = hay[at + m.len()..]
            .chars()
            .next()
            .is_none_or(|c| !is_word(c));
        before && after
    })
}

/// Exactly one candidate server named (by name or alias, whole word, case-insensitive).
pub fn explicit_mention(ctx: &Context<'_>, cands: &[&Candidate<'_>]) -> Option<Verdict> {
    let named: Vec<usize> = (0..cands.len())
        .filter(|&i| {
            mentions(ctx.prompt, &cands[i].id.server)
                || cands[i].aliases.iter().any(|a| mentions(ctx.prompt, a))
        })
        .collect();
    match named.as_slice() {
        [i] => Some(Verdict::Choose(
            *i,
            format!("prompt names {}", cands[*i].id.server),
        )),
        _ => None,
    }
}

/// Exactly one schema validates: it wins; several: narrow; none: abstain.
pub fn argument_type(ctx: &Context<'_>, cands: &[&Candidate<'_>]) -> Option<Verdict> {
    let valid: Vec<usize> = (0..cands.len())
        .filter(|&i| cands[i].validator.is_none_or(|v| v.is_valid(ctx.arguments)))
        .collect();
    let names = |v: &[usize]| {
        v.iter()
            .map(|&i| cands[i].id.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match valid.len() {
        0 => None,
        1 => Some(Verdict::Choose(
            valid[0],
            format!("only {} accepts the arguments", names(&valid)),
        )),
        n if n == cands.len() => None,
        _ => Some(Verdict::Narrow(
            valid.clone(),
            format!("accepted by {}", names(&valid)),
        )),
    }
}

/// The server that served the latest earlier call to a member of the same group.
pub fn session_recency(ctx: &Context<'_>, cands: &[&Candidate<'_>]) -> Option<Verdict> {
    let last = ctx
        .session
        .iter()
        .rev()
        .find(|call| ctx.group.contains(call))?;
    let i = cands.iter().position(|c| c.id.server == last.server)?;
    Some(Verdict::Choose(
        i,
        format!("latest call in this group went to {last}"),
    ))
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na * nb)
    }
}

/// Best prompt/description cosine wins if it leads the runner-up by at least the margin.
pub fn cosine_similarity(ctx: &Context<'_>, cands: &[&Candidate<'_>]) -> Option<Verdict> {
    let prompt = ctx.prompt_embedding?;
    let scores: Vec<f32> = cands
        .iter()
        .map(|c| c.embedding.map_or(0.0, |e| cosine(prompt, e)))
        .collect();
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    let (best, second) = (order[0], *order.get(1)?);
    let evidence = cands
        .iter()
        .zip(&scores)
        .map(|(c, s)| format!("{}={s:.3}", c.id))
        .collect::<Vec<_>>()
        .join(", ");
    (scores[best] - scores[second] >= COSINE_MARGIN).then_some(Verdict::Choose(best, evidence))
}

/// First remaining candidate in config order.
pub fn priority_order(_: &Context<'_>, cands: &[&Candidate<'_>]) -> Option<Verdict> {
    (!cands.is_empty()).then(|| Verdict::Choose(0, "first in config order".into()))
}

/// Validation errors of `arguments` against a validator, as text (for a corrective retry);
/// `None` when they are valid.
pub fn validation_errors(validator: &jsonschema::Validator, arguments: &Value) -> Option<String> {
    let errors: Vec<String> = validator
        .iter_errors(arguments)
        .map(|e| e.to_string())
        .collect();
    (!errors.is_empty()).then(|| errors.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn validator(schema: Value) -> jsonschema::Validator {
        jsonschema::validator_for(&schema).unwrap()
    }

    struct Case {
        label: &'static str,
        prompt: &'static str,
        args: Value,
        session: Vec<ToolId>,
        prompt_emb: Option<Vec<f32>>,
        want: (&'static str, &'static str),
    }

    #[test]
    fn rules_table() {
        let path_only = validator(
            json!({"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}),
        );
        let repo = validator(json!({"type":"object","required":["path","repo"]}));
        let any = validator(json!({"type":"object"}));
        let fs_alias = vec!["fs".to_string()];
        let gh_alias = vec!["gh".to_string()];
        let no_alias: Vec<String> = vec![];
        let e1 = [1.0f32, 0.0];
        let e2 = [0.0f32, 1.0];
        let e3 = [0.7f32, 0.7];
        let cands = [
            Candidate {
                id: ToolId::new("filesystem", "read_file"),
                aliases: &fs_alias,
                validator: Some(&path_only),
                embedding: Some(&e1),
            },
            Candidate {
                id: ToolId::new("github", "get_file_contents"),
                aliases: &gh_alias,
                validator: Some(&repo),
                embedding: Some(&e2),
            },
            Candidate {
                id: ToolId::new("notes", "read_file"),
                aliases: &no_alias,
                validator: Some(&any),
                embedding: Some(&e3),
            },
        ];
        let group: Vec<ToolId> = cands.iter().map(|c| c.id.clone()).collect();
        let cases = vec![
            Case {
                label: "alias mention",
                prompt: "read it with fs please",
                args: json!({"path":"a","x":1}),
                session: vec![],
                prompt_emb: None,
                want: ("explicit-mention", "filesystem"),
            },
            Case {
                label: "fsck is not fs",
                prompt: "run fsck on it",
                args: json!({"path":"a","repo":"r"}),
                session: vec![],
                prompt_emb: None,
                want: ("priority-order", "github"),
            },
            Case {
                label: "two named abstains",
                prompt: "fs or GH?",
                args: json!({"path":"a","repo":"r"}),
                session: vec![],
                prompt_emb: None,
                want: ("priority-order", "github"),
            },
            Case {
                label: "several valid then recency",
                prompt: "read a",
                args: json!({"path":"a"}),
                session: vec![ToolId::new("notes", "read_file")],
                prompt_emb: None,
                want: ("session-recency", "notes"),
            },
            Case {
                label: "cosine with margin",
                prompt: "read a",
                args: json!({"path":"a"}),
                session: vec![],
                prompt_emb: Some(vec![1.0, 0.0]),
                want: ("cosine-similarity", "filesystem"),
            },
            Case {
                label: "cosine tie falls to priority",
                prompt: "read a",
                args: json!({"path":"a"}),
                session: vec![],
                prompt_emb: Some(vec![1.0, 0.4142]),
                want: ("priority-order", "filesystem"),
            },
            Case {
                label: "none valid keeps all",
                prompt: "read",
                args: json!(5),
                session: vec![],
                prompt_emb: None,
                want: ("priority-order", "filesystem"),
            },
        ];
        for case in cases {
            let ctx = Context {
                prompt: case.prompt,
                arguments: &case.args,
                session: &case.session,
                group: &group,
                prompt_embedding: case.prompt_emb.as_deref(),
            };
            let d = select(&ctx, &cands).unwrap();
            assert_eq!(
                (d.rule, d.chosen.server.as_str()),
                case.want,
                "{}: {d:?}",
                case.label
            );
            assert!(!d.alternatives.contains(&d.chosen.server), "{}", case.label);
        }
        let ctx = Context {
            prompt: "x",
            arguments: &json!({}),
            session: &[],
            group: &group,
            prompt_embedding: None,
        };
        assert_eq!(select(&ctx, &cands[..1]).unwrap().rule, "single-candidate");
        assert!(validation_errors(&path_only, &json!({})).is_some());
        assert!(validation_errors(&path_only, &json!({"path":"a"})).is_none());
    }

    proptest! {
        #[test]
        fn deterministic_member_and_alternatives(prompt in "[a-z ]{0,20}", n in 1usize..5, recent in 0usize..6, emb in prop::collection::vec(-1.0f32..1.0, 2)) {
            let servers: Vec<String> = (0..n).map(|i| format!("s{i}")).collect();
            let embs: Vec<[f32; 2]> = (0..n).map(|i| [i as f32, 1.0]).collect();
            let cands: Vec<Candidate<'_>> = (0..n).map(|i| Candidate { id: ToolId::new(servers[i].clone(), "t"), aliases: &[], validator: None, embedding: Some(&embs[i]) }).collect();
            let group: Vec<ToolId> = cands.iter().map(|c| c.id.clone()).collect();
            let session: Vec<ToolId> = group.get(recent).cloned().into_iter().collect();
            let args = json!({});
            let ctx = Context { prompt: &prompt, arguments: &args, session: &session, group: &group, prompt_embedding: Some(&emb) };
            let a = select(&ctx, &cands).unwrap();
            let b = select(&ctx, &cands).unwrap();
            prop_assert_eq!(&a, &b);
            prop_assert!(group.contains(&a.chosen));
            prop_assert!(!a.alternatives.contains(&a.chosen.server));
        }
    }
}
