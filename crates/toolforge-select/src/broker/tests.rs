use std::collections::BTreeMap;

use serde_json::json;

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

fn described(server: &str, name: &str, description: &str) -> Tool {
    let def = serde_json::json!({
        "name": name, "description": description, "inputSchema": {"type": "object"}
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

/// S4-41: the seed's quick-start acceptance, with its own tool names.
#[test]
fn seed_quick_start_selects_two_of_three() {
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
        described("tasks", "tasks_list", "List tasks"),
        described("tasks", "tasks_create", "Create a task"),
        described("ci", "build_go_project", "Build a Go project"),
    ]);
    let intent = intent::detect("create a new task for the backend")
        .first()
        .map_or("*", |(name, _)| *name);
    let r = b.select(intent, u32::MAX);
    assert_eq!((r.count, r.total), (2, 3));
    assert_eq!(names(&r), ["tasks_list", "tasks_create"]);
    assert_eq!(r.override_block, "");
}

fn hints_table() -> BTreeMap<String, Hints> {
    BTreeMap::from([
        (
            "read_file".to_owned(),
            Hints {
                preconditions: vec![
                    "the path exists".into(),
                    "call `list_directory`\n first when unsure".into(),
                ],
                anti_patterns: vec!["reading binary files".into()],
                chains_with: vec!["list_directory".into(), "write_file".into()],
                output_shape: "the file's text".into(),
            },
        ),
        (
            "write_file".to_owned(),
            Hints {
                output_shape: "nothing on success".into(),
                ..Hints::default()
            },
        ),
        ("create_pr".to_owned(), Hints::default()),
    ])
}

#[test]
fn override_block_exact_markdown() {
    let b = LocalBroker::new(Rules::default_rules()).with_enricher(Arc::new(hints_table()));
    b.register([
        tool("toolkit", "sql_query"),
        tool("filesystem", "read_file"),
        tool("filesystem", "write_file"),
        tool("github", "create_pr"),
        tool("toolkit", "rest_get"),
    ]);
    let r = b.select("review_pr", u32::MAX);
    assert_eq!(
        names(&r),
        [
            "create_pr",
            "read_file",
            "write_file",
            "sql_query",
            "rest_get"
        ]
    );
    assert_eq!(
        r.override_block,
        "## Tool Overrides

- `read_file`
  - Preconditions: the path exists; call `list_directory` first when unsure
  - Anti-patterns: reading binary files
  - Chains with: `list_directory`, `write_file`
  - Output shape: the file's text
- `write_file`
  - Output shape: nothing on success
- Summarized (sent without their input schemas): `sql_query`, `rest_get`. Call `request_tools` with their names to get the full definitions before calling them.
"
    );
    assert_eq!(r.override_error, None);

    // Without an enricher only the summarized tools are worth a line.
    let plain = select(
        &b.all_tools(),
        &Rules::default_rules(),
        "review_pr",
        u32::MAX,
    );
    assert_eq!(
        plain.override_block,
        "## Tool Overrides

- Summarized (sent without their input schemas): `sql_query`, `rest_get`. Call `request_tools` with their names to get the full definitions before calling them.
"
    );
    // Nothing summarized, no hints: nothing to say.
    assert_eq!(
        select(&b.all_tools(), &Rules::default(), "x", u32::MAX).override_block,
        ""
    );
}

#[test]
fn compose_override_block_is_hints_only() {
    let table = hints_table();
    assert_eq!(
        compose_override_block(&["write_file", "create_pr", "nope", "write_file"], &table).unwrap(),
        "## Tool Overrides\n\n- `write_file`\n  - Output shape: nothing on success\n"
    );
    assert_eq!(compose_override_block(&["create_pr"], &table).unwrap(), "");
    assert_eq!(
        compose_override_block(&["read_file"], &NopEnricher).unwrap(),
        ""
    );
}

struct Broken;

impl Enricher for Broken {
    fn lookup_by_tool_name(&self, name: &str) -> Result<Option<Hints>, EnrichError> {
        Err(EnrichError {
            tool: name.to_owned(),
            reason: "database is locked".into(),
        })
    }
}

/// S4-67: an enricher failure never fails selection; the block is dropped and the reason kept.
#[test]
fn enricher_failure_is_swallowed_and_reported() {
    let b = LocalBroker::new(Rules::default()).with_enricher(Arc::new(Broken));
    b.register([tool("fs", "read_file")]);
    let r = b.select("x", u32::MAX);
    assert_eq!(names(&r), ["read_file"]);
    assert_eq!(r.override_block, "");
    let err = r.override_error.expect("error kept");
    assert_eq!(
        err.to_string(),
        "hints lookup for tool \"read_file\" failed: database is locked"
    );
    assert_eq!(
        r.rationale.last().unwrap(),
        "override block omitted: hints lookup for tool \"read_file\" failed: database is locked"
    );
}

#[test]
fn hints_json_codec() {
    let h = hints_table().remove("read_file").unwrap();
    let text = h.to_json();
    assert_eq!(Hints::from_json(&text).unwrap(), h);
    assert_eq!(
        Hints {
            output_shape: "x".into(),
            ..Hints::default()
        }
        .to_json(),
        r#"{"output_shape":"x"}"#
    );
    assert_eq!(Hints::from_json("{}").unwrap(), Hints::default());
    assert!(Hints::from_json(r#"{"precondition":["typo"]}"#).is_err());
    assert!(
        Hints {
            preconditions: vec![" ".into()],
            ..Hints::default()
        }
        .is_empty()
    );
}

#[test]
fn tool_summary_is_the_first_sentence_without_schema() {
    let t = described(
        "toolkit",
        "sql_query",
        "Run one read-only SELECT. Results are paginated.\nSee docs.",
    );
    let s = SelectedTool {
        tool: Arc::new(t),
        summarized: true,
    }
    .summary();
    assert_eq!(s.description, "Run one read-only SELECT.");
    assert_eq!(
        s.definition(),
        json!({"name": "sql_query", "description": "Run one read-only SELECT.",
               "inputSchema": {"type": "object"}})
    );
    assert_eq!(
        ToolSummary::of(&described("s", "t", "v1.2 tool\nmore")).description,
        "v1.2 tool"
    );
    assert_eq!(ToolSummary::of(&described("s", "t", "")).description, "");
}

fn discovery_pool() -> Vec<Arc<Tool>> {
    [
        described("filesystem", "read_file", "Read a file from disk"),
        described("filesystem", "delete_file", "Delete a file"),
        described("github", "create_pr", "Open a pull request"),
        described("github", "list_commits", "List the commits of a branch"),
        described("git", "git_log", "Show the commit log"),
        described("toolkit", "sql_query", "Run a read-only SQL query"),
        described("mirror", "read_file", "Read a file from the mirror"),
    ]
    .into_iter()
    .map(Arc::new)
    .collect()
}

#[test]
fn scoring_helpers() {
    let pool = discovery_pool();
    assert_eq!(tokenize_intent("run_build"), ["run", "build"]);
    assert_eq!(tokenize_intent("Find the files, files!"), ["find", "fil"]); // rank's crude stemmer
    assert_eq!(
        intent_keywords("review_pr"),
        ["review", "pr", "pull", "approve", "comment"]
    );
    let hits = score_by_keywords(&pool, &["commit"], 10);
    let hit_names: Vec<&str> = hits.iter().map(|(i, _)| pool[*i].name.as_str()).collect();
    assert_eq!(hit_names, ["list_commits", "git_log"]); // name hits weigh more
    assert!(hits.iter().all(|(_, s)| *s > MIN_KEYWORD_SCORE));
    assert_eq!(score_by_keywords(&pool, &["commit"], 1).len(), 1);
    assert!(score_by_keywords(&pool, &["kubernetes"], 10).is_empty());
    let by_intent = score_by_intent(&pool, "review_pr", 3);
    assert_eq!(pool[by_intent[0].0].name, "create_pr");
    assert_eq!(
        find_by_names(
            &pool,
            &["read_file", "github/create_pr", "git__git_log", "nope"]
        ),
        [0, 6, 2, 4]
    );
}

#[test]
fn request_tools_schema_is_an_mcp_tool() {
    let schema = request_tools_schema();
    assert_eq!(schema["name"], REQUEST_TOOLS);
    let serde_json::Value::Object(def) = schema.clone() else {
        unreachable!()
    };
    let t = Tool::from_mcp("broker", def, &[]).unwrap();
    assert_eq!(
        t.parameter_names(),
        ["names", "keywords", "intent", "max_results"]
    );
    assert_eq!(schema["inputSchema"]["additionalProperties"], false);
    assert_eq!(
        schema["inputSchema"]["properties"]["max_results"]["maximum"],
        20
    );
}

#[test]
fn request_tools_answers_names_then_search_and_withholds_denied() {
    let pool = discovery_pool();
    let rules = Rules::default_rules(); // never-delete excludes delete_* for every intent
    let args = json!({
        "names": ["github/create_pr", "delete_file", "frobnicate"],
        "intent": "look at the commit log",
        "max_results": 3
    });
    let a = answer_request_tools(&pool, &rules, "review", &args).unwrap();
    let got: Vec<(&str, MatchedBy)> = a
        .tools
        .iter()
        .map(|f| (f.tool.name.as_str(), f.matched_by))
        .collect();
    assert_eq!(got[0], ("create_pr", MatchedBy::Name));
    assert_eq!(got[1].0, "git_log");
    assert_eq!(got[2].0, "list_commits");
    assert_eq!(a.tools.len(), 3);
    assert_eq!(a.not_found, ["frobnicate"]);
    assert_eq!(a.denied, ["delete_file"]);
    // A keyword search never surfaces a denied tool either.
    let a = answer_request_tools(&pool, &rules, "x", &json!({"keywords": ["delete"]})).unwrap();
    assert!(a.tools.is_empty(), "{:?}", a.tools);

    let j = answer_request_tools(
        &pool,
        &Rules::default(),
        "x",
        &json!({"names": ["read_file"]}),
    )
    .unwrap()
    .to_json();
    assert_eq!(
        j,
        json!({
            "tools": [
                {"server": "filesystem", "matched_by": "name", "definition": {
                    "name": "read_file", "description": "Read a file from disk",
                    "inputSchema": {"type": "object"}}},
                {"server": "mirror", "matched_by": "name", "definition": {
                    "name": "read_file", "description": "Read a file from the mirror",
                    "inputSchema": {"type": "object"}}}
            ],
            "not_found": [],
            "denied": []
        })
    );
    let j = answer_request_tools(&pool, &Rules::default(), "x", &json!({"keywords": ["sql"]}))
        .unwrap()
        .to_json();
    assert_eq!(j["tools"][0]["matched_by"], "search");
    assert!(j["tools"][0]["score"].as_f64().unwrap() > 0.0);
}

#[test]
fn request_tools_limits_and_errors() {
    let pool = discovery_pool();
    let none = Rules::default();
    let all = json!({"keywords": ["file", "commit", "sql", "pull", "log"], "max_results": 0});
    assert_eq!(
        answer_request_tools(&pool, &none, "x", &all)
            .unwrap()
            .tools
            .len(),
        1
    );
    let all = json!({"keywords": ["file", "commit", "sql", "pull", "log"]});
    assert_eq!(
        answer_request_tools(&pool, &none, "x", &all)
            .unwrap()
            .tools
            .len(),
        DEFAULT_MAX_RESULTS
    );
    assert_eq!(
        RequestTools {
            max_results: Some(1000),
            ..RequestTools::default()
        }
        .limit(),
        MAX_RESULTS_LIMIT
    );
    for bad in [
        json!({}),
        json!(null),
        json!({"names": [" "], "intent": ""}),
    ] {
        let err = answer_request_tools(&pool, &none, "x", &bad).unwrap_err();
        assert!(matches!(err, RequestToolsError::Empty), "{bad}: {err}");
    }
    for bad in [json!({"name": "x"}), json!({"names": "x"}), json!([1])] {
        let err = answer_request_tools(&pool, &none, "x", &bad).unwrap_err();
        assert!(
            matches!(err, RequestToolsError::Arguments(_)),
            "{bad}: {err}"
        );
    }
}

#[test]
fn local_broker_request_tools_matches_the_pure_answer() {
    let b = LocalBroker::new(Rules::default_rules());
    b.register(discovery_pool());
    let args = json!({"names": ["delete_file"], "keywords": ["file", "commit"], "max_results": 20});
    let pure = answer_request_tools(&b.all_tools(), &b.rules(), "review", &args).unwrap();
    assert_eq!(b.request_tools("review", &args).unwrap(), pure);
    // The cached index follows registration.
    b.register([described("fs2", "file_stat", "Stat a file")]);
    let after = b.request_tools("review", &args).unwrap();
    assert!(after.tools.iter().any(|f| f.tool.name == "file_stat"));
    assert_eq!(after.denied, ["delete_file"]);
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

    fn arb_tools() -> impl Strategy<Value = Vec<Arc<Tool>>> {
        prop::collection::vec("[ab][ab]?[ab]?", 0..12).prop_map(|ns| {
            ns.iter()
                .enumerate()
                .map(|(i, n)| Arc::new(tool(&format!("s{}", i % 2), n)))
                .collect()
        })
    }

    /// Tools with repeats (same server and name), for registration that replaces; up to 150
    /// so the bitsets span several words.
    fn arb_registrations() -> impl Strategy<Value = Vec<Tool>> {
        prop::collection::vec(("[ab][ab]?[ab]?", 0..3u8, 0..4u8), 0..150).prop_map(|ns| {
            ns.iter()
                .map(|(n, s, d)| described(&format!("s{s}"), n, &format!("v{d}")))
                .collect()
        })
    }

    /// The selection algorithm as it was written before the precomputed sets: every tool
    /// against every applicable rule. The fast paths must agree with it exactly.
    fn reference_select(
        tools: &[Arc<Tool>],
        rules: &Rules,
        intent: &str,
        budget: u32,
    ) -> (Vec<(String, String, bool)>, Vec<String>) {
        let mut applicable: Vec<(usize, &Rule)> = rules
            .rules
            .iter()
            .enumerate()
            .filter(|(_, r)| r.applies_to(intent))
            .collect();
        applicable.sort_by_key(|(i, r)| (std::cmp::Reverse(r.priority), *i));
        let has_include = applicable.iter().any(|(_, r)| r.action != Action::Exclude);
        let mut fired = vec![0usize; applicable.len()];
        let mut picked: Vec<(usize, usize, bool)> = Vec::new();
        for (ti, tool) in tools.iter().enumerate() {
            let mut first_include = None;
            let mut excluded = false;
            for (ri, (_, rule)) in applicable.iter().enumerate() {
                if !rule.matches_tool(tool) {
                    continue;
                }
                fired[ri] += 1;
                match rule.action {
                    Action::Exclude => excluded = true,
                    _ if first_include.is_none() => first_include = Some((ri, rule.action)),
                    _ => {}
                }
            }
            if excluded {
                continue;
            }
            match first_include {
                Some((ri, action)) => picked.push((ri, ti, action == Action::Summarize)),
                None if !has_include => picked.push((0, ti, false)),
                None => {}
            }
        }
        picked.sort_by_key(|(ri, ti, _)| (*ri, *ti));
        let mut selected: Vec<(Arc<Tool>, bool)> = picked
            .into_iter()
            .map(|(_, t, s)| (Arc::clone(&tools[t]), s))
            .collect();
        let mut rationale: Vec<String> = applicable
            .iter()
            .zip(&fired)
            .filter(|(_, n)| **n > 0)
            .map(|((_, r), n)| {
                format!(
                    "rule {:?} ({:?}, priority {}) matched {n} tool(s)",
                    r.name, r.action, r.priority
                )
            })
            .collect();
        let before = selected.len();
        prune_to_budget(&mut selected, budget, |(t, _)| &**t);
        if selected.len() < before {
            rationale.push(format!(
                "budget of {budget} tokens dropped {} tool(s) from the end",
                before - selected.len()
            ));
        }
        let out = selected
            .into_iter()
            .map(|(t, s)| (t.server.clone(), t.name.clone(), s))
            .collect();
        (out, rationale)
    }

    fn observed(r: &SelectResult) -> (Vec<(String, String, bool)>, Vec<String>) {
        let tools = r
            .tools
            .iter()
            .map(|s| (s.tool.server.clone(), s.tool.name.clone(), s.summarized))
            .collect();
        (tools, r.rationale.clone())
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
        fn pure_select_equals_the_reference(
            rules in arb_rules(), tools in arb_tools(), intent in "[xy]z?", budget in 0u32..400,
        ) {
            for budget in [budget, u32::MAX] {
                let r = select(&tools, &rules, &intent, budget);
                prop_assert_eq!(observed(&r), reference_select(&tools, &rules, &intent, budget));
                prop_assert_eq!(r.count, r.tools.len());
                prop_assert_eq!(r.total, tools.len());
            }
        }

        /// The registry path (precomputed sets, updated on register and rebuilt on reload)
        /// agrees with the reference after any interleaving of the two.
        #[test]
        fn local_broker_equals_the_reference(
            first in arb_rules(), second in arb_rules(), regs in arb_registrations(),
            split in 0usize..150, intent in "[xy]z?", budget in 0u32..2000,
        ) {
            let split = split.min(regs.len());
            let b = LocalBroker::new(first.clone());
            b.register(regs[..split].to_vec());
            let check = |rules: &Rules| -> Result<(), TestCaseError> {
                let tools = b.all_tools();
                for budget in [budget, u32::MAX] {
                    let r = b.select(&intent, budget);
                    prop_assert_eq!(observed(&r), reference_select(&tools, rules, &intent, budget));
                    prop_assert_eq!(r.total, tools.len());
                }
                Ok(())
            };
            check(&first)?;
            b.reload_rules(second.clone());
            check(&second)?;
            b.register(regs[split..].to_vec());
            check(&second)?;
            // Registration replaced same-named tools in place: one entry per server+name.
            let mut ids: Vec<_> = b.all_tools().iter().map(|t| t.id()).collect();
            let n = ids.len();
            ids.sort();
            ids.dedup();
            prop_assert_eq!(ids.len(), n);
        }

        #[test]
        fn selection_is_deterministic(rules in arb_rules(), tools in arb_tools(), intent in "[xy]z?") {
            prop_assert_eq!(select(&tools, &rules, &intent, 500), select(&tools, &rules, &intent, 500));
        }
    }
}

/// go-toolbroker's own rule files: keys in Go's capitalisation, `match: {patterns}` and
/// `action: {type}`, in JSON and YAML, select as its algorithm says.
#[test]
fn go_toolbroker_rule_files_load_unchanged() {
    let json = r#"{"Rules": [
        {"Name": "hide-noisy-build-tools", "Intent": "*", "Priority": 10,
         "Match": {"Patterns": ["build_*"]}, "Action": {"Type": "exclude"}},
        {"Name": "tasks-on-write", "Intent": "write", "Priority": 20,
         "Match": {"Patterns": ["tasks_*"]}, "Action": {"Type": "include"}}
    ]}"#;
    let yaml = "rules:\n  - name: hide-noisy-build-tools\n    intent: \"*\"\n    priority: 10\n    match:\n      patterns: [\"build_*\"]\n    action:\n      type: exclude\n  - name: tasks-on-write\n    intent: write\n    priority: 20\n    match:\n      patterns: [\"tasks_*\"]\n    action:\n      type: include\n";
    let from_json = Rules::from_path_text("rules.json", json).expect("json");
    let from_yaml = Rules::from_path_text("rules.yaml", yaml).expect("yaml");
    assert_eq!(from_json, from_yaml);
    assert_eq!(from_json.rules[0].action, Action::Exclude);
    assert_eq!(from_json.rules[0].matcher.patterns, ["build_*"]);
    let tools: Vec<Arc<Tool>> = [
        ("tasks", "tasks_list"),
        ("tasks", "tasks_create"),
        ("ci", "build_go_project"),
        ("notes", "notes_add"),
    ]
    .iter()
    .map(|(s, n)| Arc::new(tool(s, n)))
    .collect();
    let names =
        |r: &SelectResult| -> Vec<String> { r.tools.iter().map(|t| t.tool.name.clone()).collect() };
    let all = select(&tools, &from_json, "read", u32::MAX);
    assert_eq!(names(&all), ["tasks_list", "tasks_create", "notes_add"]);
    let write = select(&tools, &from_json, "write", u32::MAX);
    assert_eq!(names(&write), ["tasks_list", "tasks_create"]);
    // The fast path agrees, and says per tool what decided.
    let broker = LocalBroker::new(from_json);
    broker.register(tools.iter().cloned());
    assert_eq!(broker.select("write", u32::MAX), write);
    let verdicts = broker.verdicts("write");
    assert_eq!(verdicts[2], RuleVerdict::Excluded(0));
    assert_eq!(verdicts[3], RuleVerdict::NotIncluded);
    assert_eq!(
        verdicts[0],
        RuleVerdict::Included {
            rule: Some(1),
            summarized: false
        }
    );
    assert_eq!(Broker::all_tools(&broker).len(), 4);
    let each: Vec<u64> = tools
        .iter()
        .map(|t| u64::from(estimate_tokens(t)))
        .collect();
    assert_eq!(
        estimate_tools_tokens(tools.iter().map(|t| &**t)),
        each.iter().sum::<u64>()
    );
}

#[test]
fn rule_file_mistakes_are_explained() {
    let err = Rules::from_json_str(r#"{"rules": [{"name": "x", "action": {"type": "allow"}}]}"#)
        .expect_err("unknown action")
        .to_string();
    assert!(err.contains("allow") && err.contains("include"), "{err}");
    let err = Rules::from_yaml_str(
        "rules:\n  - name: x\n    match: {patterns: ['[']}\n    action: exclude\n",
    )
    .expect_err("bad pattern")
    .to_string();
    assert!(err.contains("rule \"x\""), "{err}");
    assert_eq!(
        Rules::from_yaml_str("").expect("empty file"),
        Rules::default()
    );
}
