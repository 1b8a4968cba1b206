use super::*;

fn tool(server: &str, name: &str) -> Tool {
    let def = serde_json::json!({
        "name": name, "description": format!("{name} tool"), "inputSchema": {"type": "object"}
    });
    let serde_json::Value::Object(def) = def else {
        unreachable!()
    };
    Tool::from_mcp(server, def, &[]).unwrap()
}

fn names(r: &SelectResult) -> Vec<&str> {
    r.tools.iter().map(|t| t.tool.name.as_str()).collect()
}

/// Q4-1: the seed's quick start, literally. Deny always wins, so the priority-20 include on
/// `run_build` does not bring back tools hidden by the priority-10 exclude on `*`.
#[test]
fn seed_quick_start_deny_always_wins() {
    let rules = Rules::from_yaml_str(
        r#"
rules:
  - name: hide-noisy-build-tools
    intent: "*"
    priority: 10
    match: { tools: ["build_*"] }
    action: exclude
  - name: show-build-tools-on-build-intent
    intent: run_build
    priority: 20
    match: { tools: ["build_*"] }
    action: include
"#,
    )
    .unwrap();
    let b = LocalBroker::new(rules);
    b.register([
        tool("ci", "build_run"),
        tool("ci", "build_clean"),
        tool("fs", "read_file"),
    ]);
    let r = b.select("run_build", u32::MAX);
    assert!(names(&r).is_empty(), "{:?}", names(&r));
    let r = b.select("edit", u32::MAX);
    assert_eq!(names(&r), ["read_file"]);
    assert_eq!(r.total, 3);
}

#[test]
fn include_orders_by_priority_and_summarize_marks() {
    let b = LocalBroker::new(Rules::default_rules());
    b.register([
        tool("toolkit", "sql_query"),
        tool("filesystem", "read_file"),
        tool("filesystem", "delete_file"),
        tool("github", "create_pr"),
    ]);
    let r = b.select("review_pr", u32::MAX);
    assert_eq!(names(&r), ["create_pr", "read_file", "sql_query"]);
    assert!(r.tools[2].summarized && !r.tools[0].summarized);
    assert!(
        r.rationale.iter().any(|l| l.contains("never-delete")),
        "{:?}",
        r.rationale
    );
}

#[test]
fn load_errors_are_clear() {
    let err = Rules::from_yaml_str("rules: [{name: x, match: {tools: ['[']}, action: exclude}]")
        .unwrap_err();
    assert!(err.to_string().contains("rule \"x\""), "{err}");
    assert!(Rules::from_json_str(r#"{"rules":[{"name":"x","action":"frobnicate"}]}"#).is_err());
    assert!(Rules::from_path_text("r.toml", "").is_err());
    assert!(Rules::from_path_text("r.JSON", r#"{"rules":[]}"#).is_ok());
}

#[test]
fn budget_drops_from_the_end() {
    let b = LocalBroker::new(Rules::default());
    b.register((0..10).map(|i| tool("s", &format!("t{i}"))));
    let one = estimate_tokens(&tool("s", "t0"));
    let r = b.select("x", one * 3 + 1);
    assert_eq!(names(&r), ["t0", "t1", "t2"]);
    assert!(r.rationale.last().unwrap().contains("dropped 7"));
}

#[test]
fn concurrent_register_reload_select() {
    let b = std::sync::Arc::new(LocalBroker::new(Rules::default_rules()));
    std::thread::scope(|s| {
        for k in 0..3 {
            let b = &b;
            s.spawn(move || {
                for i in 0..200 {
                    match k {
                        0 => b.register([tool("filesystem", &format!("f{i}"))]),
                        1 => b.reload_rules(if i % 2 == 0 {
                            Rules::default()
                        } else {
                            Rules::default_rules()
                        }),
                        _ => assert!(b.select("review", u32::MAX).count <= 200),
                    }
                }
            });
        }
    });
    assert_eq!(b.select("any", u32::MAX).total, 200);
}

mod props {
    use proptest::prelude::*;

    use super::*;

    fn arb_rules() -> impl Strategy<Value = Rules> {
        let rule = (
            0..3u8,
            "[ab]?\\*?",
            -5..5i32,
            prop::sample::select(vec!["*", "x*", "y"]),
        )
            .prop_map(|(a, pat, priority, intent)| Rule {
                name: format!("r{a}{pat}{priority}"),
                intent: intent.to_owned(),
                priority,
                matcher: Match {
                    tools: vec![pat],
                    ..Match::default()
                },
                action: [Action::Include, Action::Exclude, Action::Summarize][usize::from(a)],
            });
        prop::collection::vec(rule, 0..6).prop_map(|rules| Rules { rules })
    }

    fn arb_tools() -> impl Strategy<Value = Vec<Tool>> {
        prop::collection::vec("[ab][ab]?[ab]?", 0..12).prop_map(|ns| {
            ns.iter()
                .enumerate()
                .map(|(i, n)| tool(&format!("s{}", i % 2), n))
                .collect()
        })
    }

    proptest! {
        #[test]
        fn deny_always_wins(rules in arb_rules(), tools in arb_tools(), intent in "[xy]z?") {
            let r = select(&tools, &rules, &intent, u32::MAX);
            for s in &r.tools {
                let denied = rules.rules.iter().any(|rule| {
                    rule.action == Action::Exclude && rule.applies_to(&intent) && rule.matches_tool(&s.tool)
                });
                prop_assert!(!denied, "{} selected despite an exclude", s.tool.name);
            }
        }

        #[test]
        fn pruning_never_exceeds_budget(tools in arb_tools(), budget in 0u32..200) {
            let r = select(&tools, &Rules::default(), "x", budget);
            let used: u32 = r.tools.iter().map(|s| estimate_tokens(&s.tool)).sum();
            prop_assert!(used <= budget);
        }

        #[test]
        fn selection_is_deterministic(rules in arb_rules(), tools in arb_tools(), intent in "[xy]z?") {
            prop_assert_eq!(select(&tools, &rules, &intent, 500), select(&tools, &rules, &intent, 500));
        }
    }
}
