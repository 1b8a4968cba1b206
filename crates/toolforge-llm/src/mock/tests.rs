use super::*;
use crate::model::Message;

fn tool(name: &str, description: &str, schema: Value) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: description.into(),
        input_schema: schema,
    }
}

fn toolkit() -> Vec<ToolSpec> {
    vec![
        tool(
            "sql_query",
            "Run exactly one read-only SELECT over the sample database.",
            json!({"type":"object","properties":{"sql":{"type":"string"},"page_size":{"type":"integer"}},"required":["sql"]}),
        ),
        tool(
            "rest_exchange_rate",
            "Fetch the exchange rate from one currency to another.",
            json!({"type":"object","properties":{"base":{"type":"string"},"target":{"type":"string"}},"required":["base","target"]}),
        ),
    ]
}

const TASK: &str =
    "Look up customer Alice Nguyen's orders, sum their total, and tell me if it exceeds $500.";

fn request(messages: Vec<Message>) -> ModelRequest {
    ModelRequest {
        system: "You are an agent.".into(),
        tools: toolkit(),
        messages,
        max_tokens: 1024,
        cache: true,
        stable_tools: 0,
        deferred_tools: Vec::new(),
    }
}

#[test]
fn reference_task_is_one_sql_query_then_the_seed_answer() {
    let first = respond(&request(vec![Message::user(TASK)]));
    assert_eq!(first.stop_reason, StopReason::ToolUse);
    let (id, name, input) = first.tool_uses()[0];
    assert_eq!(name, "sql_query");
    assert_eq!(input["page_size"], 25);
    assert!(
        input["sql"]
            .as_str()
            .unwrap()
            .ends_with("WHERE c.name = 'Alice Nguyen'")
    );
    let page = json!({"columns": [], "rows": [
        {"line_total": 59.5, "status": "completed"},
        {"line_total": 120.0, "status": "completed"},
        {"line_total": 154.5, "status": "completed"},
        {"line_total": 999.0, "status": "cancelled"}],
        "has_more": false, "next_offset": null});
    let second = respond(&request(vec![
        Message::user(TASK),
        Message {
            role: Role::Assistant,
            content: first.content.clone(),
        },
        Message {
            role: Role::User,
            content: vec![Content::ToolResult {
                tool_use_id: id.to_owned(),
                content: page.to_string(),
                is_error: false,
            }],
        },
    ]));
    assert_eq!(second.stop_reason, StopReason::EndTurn);
    let answer: Value = serde_json::from_str(&second.text()).unwrap();
    assert_eq!(
        answer["answer"],
        "Alice Nguyen's completed orders total $334.00, which does not exceed $500.00."
    );
    assert_eq!(answer["key_facts"]["num_completed_orders"], 3);
    assert_eq!(answer["key_facts"]["exceeds_threshold"], false);
    assert_eq!(answer["key_facts"]["order_total"], 334.0);
    // The second call reads the cached prefix the first one wrote.
    assert!(first.usage.cache_creation_input_tokens > 0);
    assert_eq!(
        second.usage.cache_read_input_tokens,
        first.usage.cache_creation_input_tokens
    );
}

#[test]
fn a_tool_left_out_is_searched_for_then_called() {
    let search = tool(
        SEARCH_TOOLS,
        "Find tools you were not offered.",
        json!({"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}),
    );
    let list = tool(
        "list_directory",
        "List a directory.",
        json!({"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}),
    );
    let read = tool(
        "read_file",
        "Read a file from the disk.",
        json!({"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}),
    );
    let task = "read the file notes.md";
    // Offered: a tool whose name does not fit, and the search tool.
    let mut req = ModelRequest {
        tools: vec![list.clone(), search.clone()],
        messages: vec![Message::user(task)],
        max_tokens: 512,
        cache: true,
        ..ModelRequest::default()
    };
    let first = respond(&req);
    let (id, name, input) = first.tool_uses()[0];
    assert_eq!((name, input), (SEARCH_TOOLS, &json!({"query": task})));
    req.messages.push(Message {
        role: Role::Assistant,
        content: first.content.clone(),
    });
    req.messages.push(Message {
        role: Role::User,
        content: vec![Content::ToolResult {
            tool_use_id: id.to_owned(),
            content: r#"{"added":[{"name":"read_file"}]}"#.into(),
            is_error: false,
        }],
    });
    // The search's find joined the offer after it.
    req.tools.push(read);
    req.stable_tools = 2;
    let second = respond(&req);
    let (_, name, input) = second.tool_uses()[0];
    assert_eq!((name, input), ("read_file", &json!({"path": "notes.md"})));
    // Billed: the first offer's prefix read back, what joined written.
    assert!(second.usage.cache_read_input_tokens > 0);
    assert!(second.usage.cache_creation_input_tokens > 0);

    // A tool whose name fits is called at once; the reference task searches by name.
    let direct = respond(&ModelRequest {
        tools: vec![
            tool("read_file", "Read.", json!({"type":"object"})),
            search.clone(),
        ],
        messages: vec![Message::user(task)],
        max_tokens: 512,
        ..ModelRequest::default()
    });
    assert_eq!(direct.tool_uses()[0].1, "read_file");
    let reference = respond(&ModelRequest {
        tools: vec![list, search],
        messages: vec![Message::user(TASK)],
        max_tokens: 512,
        ..ModelRequest::default()
    });
    assert_eq!(
        (reference.tool_uses()[0].1, reference.tool_uses()[0].2),
        (SEARCH_TOOLS, &json!({"query": "sql query"}))
    );
}

#[test]
fn thresholds_and_names_vary() {
    let t = ReferenceTask::parse("customer Bob O'Neil's orders: does the total exceed $1,200.50?")
        .unwrap();
    assert_eq!(t.customer, "Bob O'Neil");
    assert!((t.threshold - 1200.5).abs() < 1e-9);
    assert!(t.sql().ends_with("'Bob O''Neil'"));
    assert!(ReferenceTask::parse("read README.md").is_none());
}

#[test]
fn generic_requests_rank_a_tool_and_fill_its_schema() {
    let tools = vec![
        tool(
            "read_file",
            "Read the complete contents of a file from the file system.",
            json!({"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}),
        ),
        tool(
            "list_commits",
            "List commits of a branch in a GitHub repository.",
            json!({"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"perPage":{"type":"number"}},"required":["owner","repo"]}),
        ),
    ];
    let req = ModelRequest {
        tools,
        messages: vec![Message::user(
            "Read the file docs/notes.md then list the last 5 commits of anthropics/anthropic-sdk-python",
        )],
        max_tokens: 512,
        ..ModelRequest::default()
    };
    let r = respond(&req);
    let (_, name, input) = r.tool_uses()[0];
    assert_eq!(name, "read_file");
    assert_eq!(input, &json!({"path": "docs/notes.md"}));
    assert_eq!(r.usage.cache_creation_input_tokens, 0, "no caching asked");

    let args = fill_arguments(
        &req.tools[1].input_schema,
        "list the last 5 commits of anthropics/anthropic-sdk-python",
    );
    assert_eq!(
        args,
        json!({"owner": "anthropics", "repo": "anthropic-sdk-python", "perPage": 5})
    );
}

#[test]
fn currency_codes_nullable_numbers_and_code_are_filled() {
    let rate = json!({"type":"object","properties":{
        "base":{"type":"string"},"target":{"type":"string"},
        "amount":{"type":["number","null"]}},"required":["base","target"]});
    assert_eq!(
        fill_arguments(&rate, "Convert 100 USD to EUR"),
        json!({"base": "USD", "target": "EUR", "amount": 100})
    );
    let python = json!({"type":"object","properties":{"code":{"type":"string"},
        "timeout_seconds":{"type":["integer","null"]}},"required":["code"]});
    assert_eq!(
        fill_arguments(&python, "Run this Python: print(sum(range(10)))"),
        json!({"code": "print(sum(range(10)))"})
    );
    assert_eq!(
        fill_arguments(&python, "evaluate `print(2 ** 10)` in the sandbox"),
        json!({"code": "print(2 ** 10)"})
    );
}

#[test]
fn no_matching_tool_is_a_plain_answer_and_max_tokens_cuts() {
    let req = ModelRequest {
        tools: toolkit(),
        messages: vec![Message::user("zzz qqq")],
        max_tokens: 2,
        ..ModelRequest::default()
    };
    let r = respond(&req);
    assert_eq!(r.stop_reason, StopReason::MaxTokens);
    assert_eq!(r.usage.output_tokens, 2);
    assert!(r.tool_uses().is_empty());
}
