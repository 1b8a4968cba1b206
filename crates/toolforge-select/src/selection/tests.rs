use super::*;
use serde_json::json;

fn catalog() -> Catalog {
    Catalog::from_snapshot_json(
        &json!({"servers": [
            {"name": "filesystem", "aliases": ["fs"], "tools": [
                {"name": "read_file", "description": "Read a local file",
                 "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}},
                                 "required": ["path"]}},
                {"name": "delete_file", "description": "Delete a local file",
                 "inputSchema": {"type": "object"}}]},
            {"name": "github", "aliases": ["gh"], "tools": [
                {"name": "read_file", "description": "Read a file from a repository",
                 "inputSchema": {"type": "object", "properties": {"repo": {"type": "string"}},
                                 "required": ["repo"]}}]},
            {"name": "git", "tools": [
                {"name": "git_log", "description": "Show the commit log",
                 "inputSchema": {"type": "object"}},
                {"name": "git_commit", "description": "Record changes to the repository",
                 "inputSchema": {"type": "object"}}]},
            {"name": "web", "tools": [
                {"name": "fetch", "description": "Fetch a web page by URL",
                 "inputSchema": {"type": "object"}}]}
        ]})
        .to_string(),
    )
    .expect("catalog")
}

fn id(s: &str) -> ToolId {
    ToolId::parse(s).expect("server/tool")
}

fn reason(offer: &Offer, tool: &str) -> Option<LeftOutReason> {
    offer
        .left_out
        .iter()
        .find(|l| l.tool == id(tool))
        .map(|l| l.reason.clone())
}

fn rules() -> Rules {
    Rules::from_yaml_str(
        "rules:\n\
         - {name: never-delete, intent: '*', priority: 100, match: {patterns: ['delete_*']}, action: {type: exclude}}\n\
         - {name: git-work, intent: git, priority: 50, match: {servers: [git]}, action: include}\n",
    )
    .expect("rules")
}

#[test]
fn an_offer_applies_the_rules_for_the_intent_and_says_why_tools_are_left_out() {
    let selection = Selection::new(catalog(), rules(), Limits::default());
    let offer = selection.offer(&OfferRequest::new("commit and show the git log"));
    assert_eq!(offer.intent, "git");
    assert_eq!(offer.ids(), [id("git/git_log"), id("git/git_commit")]);
    assert_eq!(
        reason(&offer, "filesystem/delete_file"),
        Some(LeftOutReason::ExcludedByRule {
            rule: "never-delete".into()
        })
    );
    assert_eq!(
        reason(&offer, "web/fetch"),
        Some(LeftOutReason::NotIncluded)
    );
    assert_eq!(offer.visible, 6);
    assert_eq!(offer.left_out.len(), 4);
    let summary = offer.summary();
    assert!(summary.contains("never-delete"), "{summary}");
    assert!(
        summary.contains("left out: filesystem/read_file"),
        "{summary}"
    );

    // Another intent: no include rule applies, so only the exclusion holds.
    let offer = selection.offer(&OfferRequest {
        intent: Some("read"),
        ..OfferRequest::new("anything")
    });
    assert_eq!(offer.intent, "read");
    assert_eq!(offer.tools.len(), 5);
    assert_eq!(offer.left_out.len(), 1);
}

#[test]
fn the_cap_keeps_the_best_ranked_and_a_group_counts_once() {
    let limits = Limits {
        max_tools: 1,
        ..Limits::default()
    };
    let selection = Selection::new(catalog(), Rules::default(), limits);
    let offer = selection.offer(&OfferRequest::new("fetch the web page"));
    assert_eq!(offer.ids(), [id("web/fetch")]);
    assert!(matches!(
        reason(&offer, "git/git_log"),
        Some(LeftOutReason::BelowCap { cap: 1, .. })
    ));
    // Both members of the read_file group come together, in one slot.
    let offer = selection.offer(&OfferRequest::new("read the file"));
    assert_eq!(
        offer.ids(),
        [id("filesystem/read_file"), id("github/read_file")]
    );
    assert!(offer.rationale.iter().any(|r| r.contains("1 of 5 tools")));
}

#[test]
fn pins_bypass_rank_and_cap_but_never_an_exclusion_or_visibility() {
    let limits = Limits {
        max_tools: 1,
        ..Limits::default()
    };
    let selection = Selection::new(catalog(), rules(), limits);
    let pins = crate::pins::parse_pins(["web/fetch", "filesystem/*", "git/git_log"]).expect("pins");
    let visible: HashSet<ToolId> = [
        id("web/fetch"),
        id("filesystem/delete_file"),
        id("git/git_log"),
        id("git/git_commit"),
    ]
    .into();
    // Intent "git": its include rule keeps the git tools only; the cap keeps one of them.
    let offer = selection.offer(&OfferRequest {
        visible: Some(&visible),
        pins: &pins,
        ..OfferRequest::new("commit my work to git")
    });
    assert_eq!(offer.intent, "git");
    assert_eq!(
        offer.ids(),
        [id("git/git_log"), id("git/git_commit"), id("web/fetch")],
        "web/fetch is pinned past the include rule; git_log past the cap"
    );
    let by = |t: &str| {
        offer
            .tools
            .iter()
            .find(|o| o.tool == id(t))
            .map(|o| o.by.clone())
    };
    assert_eq!(
        by("web/fetch"),
        Some(OfferedBy::Pin {
            rule: "pinned by the operator (web/fetch)".into()
        })
    );
    assert_eq!(by("git/git_commit"), Some(OfferedBy::Rank { rank: 1 }));
    // The exclusion wins over the server pin; the hidden tools stay hidden.
    assert_eq!(
        reason(&offer, "filesystem/delete_file"),
        Some(LeftOutReason::ExcludedByRule {
            rule: "never-delete".into()
        })
    );
    assert!(!offer.ids().contains(&id("filesystem/read_file")));
    let summary = offer.summary();
    assert!(
        summary.contains("pinned: git/git_log (pinned by the operator (git/git_log)), web/fetch"),
        "{summary}"
    );
    // A cap of 0 offers the pins alone.
    let selection = Selection::new(
        catalog(),
        Rules::default(),
        Limits {
            max_tools: 0,
            ..Limits::default()
        },
    );
    let offer = selection.offer(&OfferRequest {
        pins: &pins[..1],
        ..OfferRequest::new("read the file")
    });
    assert_eq!(offer.ids(), [id("web/fetch")]);
}

#[test]
fn the_budget_and_the_visible_set_bound_an_offer() {
    let one_tool = estimate_tokens(catalog().get(&id("web/fetch")).expect("fetch"));
    let limits = Limits {
        max_tools: 10,
        token_budget: one_tool,
    };
    let selection = Selection::new(catalog(), Rules::default(), limits);
    let visible: HashSet<ToolId> = [id("web/fetch"), id("git/git_log")].into();
    let offer = selection.offer(&OfferRequest {
        visible: Some(&visible),
        ..OfferRequest::new("fetch a page")
    });
    assert_eq!(offer.ids(), [id("web/fetch")]);
    assert_eq!(offer.visible, 2);
    assert_eq!(
        reason(&offer, "git/git_log"),
        Some(LeftOutReason::OverBudget { budget: one_tool })
    );
    assert!(
        reason(&offer, "filesystem/read_file").is_none(),
        "not visible"
    );
}

#[test]
fn vectors_take_part_in_ranking() {
    let limits = Limits {
        max_tools: 1,
        ..Limits::default()
    };
    let selection = Selection::new(catalog(), Rules::default(), limits);
    let n = selection.rank_texts().len();
    assert_eq!(n, 6 + 4, "six tools, four servers");
    // Only git_commit's vector points where the query's does.
    let vectors: Vec<Vec<f32>> = (0..n)
        .map(|i| {
            if i == 4 {
                vec![0.0, 1.0]
            } else {
                vec![1.0, 0.0]
            }
        })
        .collect();
    let selection = selection.with_rank_vectors(vectors);
    let message = "save my work";
    let q = vec![vec![0.0, 1.0]; Selection::query_texts(message).len()];
    let offer = selection.offer(&OfferRequest {
        query_vectors: Some(&q),
        ..OfferRequest::new(message)
    });
    assert_eq!(offer.ids(), [id("git/git_commit")]);
    assert!(
        offer
            .rationale
            .iter()
            .any(|r| r.contains("BM25 + embeddings"))
    );
}

#[test]
fn route_decides_among_the_group_with_evidence() {
    let selection = Selection::new(catalog(), Rules::default(), Limits::default());
    let args = json!({"repo": "r"});
    let call = Call {
        candidates: &[],
        prompt: "read it",
        arguments: &args,
        session: &[],
        prompt_vector: None,
    };
    let d = selection
        .route_tool(&id("filesystem/read_file"), &call)
        .expect("decision");
    assert_eq!(
        (d.rule, d.chosen.clone()),
        ("argument-type", id("github/read_file"))
    );
    assert_eq!(d.alternatives, ["filesystem"]);
    assert_eq!(d.trace[0].rule, "explicit-mention");

    // Only the candidates the caller shows take part.
    let shown = [id("filesystem/read_file")];
    let d = selection
        .route(&Call {
            candidates: &shown,
            ..call
        })
        .expect("decision");
    assert_eq!(d.rule, "single-candidate");
    assert!(
        selection
            .route(&Call {
                candidates: &[id("x/y")],
                ..call
            })
            .is_none()
    );

    assert!(
        selection
            .argument_errors(&id("filesystem/read_file"), &json!({}))
            .is_some_and(|e| e.contains("path"))
    );
    assert!(
        selection
            .argument_errors(&id("filesystem/read_file"), &json!({"path": "a"}))
            .is_none()
    );
}

#[test]
fn server_descriptions_join_their_tools_documents() {
    let limits = Limits {
        max_tools: 1,
        ..Limits::default()
    };
    let descriptions: HashMap<String, String> =
        [("git".to_owned(), "Version control".to_owned())].into();
    let selection =
        Selection::new(catalog(), Rules::default(), limits).with_server_descriptions(&descriptions);
    let offer = selection.offer(&OfferRequest::new("version control"));
    assert_eq!(offer.tools.len(), 1);
    assert_eq!(offer.tools[0].tool.server, "git");
}
