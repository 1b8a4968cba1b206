//! The engine against the schema of `engine.rs`: each kind of target and action, the deciding
//! ids, call arguments in the context, and files that are refused.

use serde_json::json;

use crate::{Action, Annotations, Policies, PolicyError, Request, Target, ToolRef};

const POLICY: &str = r#"
@id("everyone-reads")
permit(principal, action in [Action::"list", Action::"search", Action::"read", Action::"prompt"], resource);

@id("alice-calls")
permit(principal == User::"alice", action == Action::"call", resource);

@id("read-only-for-all")
permit(principal, action == Action::"call", resource is Tool)
when { resource.annotations.readOnly };

@id("no-destructive")
forbid(principal, action == Action::"call", resource is Tool)
when { resource.annotations.destructive && !(resource.tags.contains("safe")) };

@id("hide-admin")
forbid(principal, action, resource is Tool) when { resource.server == "admin" };

@id("no-etc")
forbid(principal, action == Action::"call", resource == Tool::"fs/read_file")
when { context.arguments has path && context.arguments.path like "/etc/*" };

@id("secret-prompt")
forbid(principal, action == Action::"prompt", resource == Prompt::"ops/rotate_keys")
unless { principal == User::"alice" };

@id("no-env-files")
forbid(principal, action == Action::"read", resource) when { resource.uri like "*.env" };
"#;

fn tool<'a>(
    server: &'a str,
    name: &'a str,
    tags: &'a [String],
    annotations: Annotations,
) -> Target<'a> {
    Target::Tool(ToolRef {
        server,
        name,
        tags,
        annotations,
    })
}

const READ_ONLY: Annotations = Annotations {
    read_only: true,
    destructive: false,
    idempotent: true,
    open_world: false,
};
const SAFE_WRITE: Annotations = Annotations {
    read_only: false,
    destructive: false,
    idempotent: false,
    open_world: false,
};

fn decide(
    policies: &Policies,
    principal: &str,
    action: Action,
    target: Target<'_>,
    arguments: Option<&serde_json::Value>,
) -> (bool, String) {
    let d = policies.decide(&Request {
        principal,
        action,
        target,
        arguments,
    });
    (d.allowed, d.deciding())
}

#[test]
fn calls_follow_principal_and_annotations() {
    let p = Policies::parse(POLICY).unwrap();
    let none: [String; 0] = [];
    // bob may call read-only tools only.
    assert_eq!(
        decide(
            &p,
            "bob",
            Action::Call,
            tool("fs", "list", &none, READ_ONLY),
            None
        ),
        (true, "read-only-for-all".to_owned())
    );
    assert_eq!(
        decide(
            &p,
            "bob",
            Action::Call,
            tool("fs", "write", &none, SAFE_WRITE),
            None
        ),
        (false, "default-deny".to_owned())
    );
    // alice may call it; nobody may call a destructive tool unless it is tagged safe.
    assert!(
        decide(
            &p,
            "alice",
            Action::Call,
            tool("fs", "write", &none, SAFE_WRITE),
            None
        )
        .0
    );
    assert_eq!(
        decide(
            &p,
            "alice",
            Action::Call,
            tool("fs", "rm", &none, Annotations::default()),
            None
        ),
        (false, "no-destructive".to_owned())
    );
    let safe = ["safe".to_owned()];
    assert!(
        decide(
            &p,
            "alice",
            Action::Call,
            tool("fs", "rm", &safe, Annotations::default()),
            None
        )
        .0
    );
}

#[test]
fn every_action_on_a_hidden_server_is_denied_by_its_forbid() {
    let p = Policies::parse(POLICY).unwrap();
    let none: [String; 0] = [];
    for action in [Action::List, Action::Search, Action::Call] {
        assert_eq!(
            decide(
                &p,
                "alice",
                action,
                tool("admin", "x", &none, READ_ONLY),
                None
            ),
            (false, "hide-admin".to_owned()),
            "{action}"
        );
        assert!(decide(&p, "alice", action, tool("fs", "x", &none, READ_ONLY), None).0);
    }
}

#[test]
fn call_arguments_are_in_the_context() {
    let p = Policies::parse(POLICY).unwrap();
    let none: [String; 0] = [];
    let target = || tool("fs", "read_file", &none, READ_ONLY);
    let etc = json!({"path": "/etc/passwd", "n": 1.5, "x": null, "deep": [[{"a": 1}]]});
    assert_eq!(
        decide(&p, "bob", Action::Call, target(), Some(&etc)),
        (false, "no-etc".to_owned())
    );
    let home = json!({"path": "/home/bob/notes"});
    assert!(decide(&p, "bob", Action::Call, target(), Some(&home)).0);
    // No `path`: the `has` guard keeps the forbid from erroring; the call is allowed.
    assert!(decide(&p, "bob", Action::Call, target(), Some(&json!({}))).0);
}

#[test]
fn hostile_arguments_do_not_break_the_decision() {
    let p = Policies::parse(POLICY).unwrap();
    let none: [String; 0] = [];
    let mut deep = json!("/etc/passwd");
    for _ in 0..500 {
        deep = json!([deep]);
    }
    let args = json!({"path": "/etc/shadow", "deep": deep, "big": u64::MAX});
    let (allowed, by) = decide(
        &p,
        "bob",
        Action::Call,
        tool("fs", "read_file", &none, READ_ONLY),
        Some(&args),
    );
    assert_eq!((allowed, by.as_str()), (false, "no-etc"));
}

#[test]
fn resources_and_prompts_have_their_own_entities() {
    let p = Policies::parse(POLICY).unwrap();
    let read = |uri| Target::Resource { server: "fs", uri };
    assert!(decide(&p, "bob", Action::Read, read("file:///notes.txt"), None).0);
    assert_eq!(
        decide(&p, "bob", Action::Read, read("file:///app/.env"), None),
        (false, "no-env-files".to_owned())
    );
    let prompt = || Target::Prompt {
        server: "ops",
        name: "rotate_keys",
    };
    assert_eq!(
        decide(&p, "bob", Action::Prompt, prompt(), None),
        (false, "secret-prompt".to_owned())
    );
    assert!(decide(&p, "alice", Action::Prompt, prompt(), None).0);
    assert!(
        decide(
            &p,
            "anonymous",
            Action::Prompt,
            Target::Prompt {
                server: "ops",
                name: "hello"
            },
            None
        )
        .0
    );
}

#[test]
fn a_denial_names_the_deciding_policy() {
    let p = Policies::parse(POLICY).unwrap();
    let none: [String; 0] = [];
    let d = p.decide(&Request {
        principal: "bob",
        action: Action::Call,
        target: tool("admin", "reset", &none, READ_ONLY),
        arguments: None,
    });
    assert_eq!(
        d.denial(Action::Call, "admin/reset"),
        "call of admin/reset denied by policy \"hide-admin\""
    );
}

#[test]
fn ids_default_to_file_order() {
    let p = Policies::parse("permit(principal, action, resource);\n@id(\"x\") forbid(principal, action, resource) when { false };").unwrap();
    assert_eq!(p.ids(), ["policy0", "x"]);
}

#[test]
fn files_outside_the_schema_are_refused_with_the_reason() {
    for (source, says) in [
        (
            "permit(principal, action == Action::\"delete\", resource);",
            "unknown action",
        ),
        (
            "permit(principal == Group::\"x\", action, resource);",
            "principal must be a User",
        ),
        (
            "permit(principal, action, resource is File);",
            "resource must be a Tool",
        ),
        (
            "permit(principal == ?principal, action, resource);",
            "templates",
        ),
        (
            "@id(\"a\") permit(principal, action, resource); @id(\"a\") permit(principal, action, resource);",
            "two policies",
        ),
        ("", "no policies"),
        ("permit(principal, action, resource", "not valid Cedar"),
    ] {
        let err = Policies::parse(source).unwrap_err();
        assert!(err.to_string().contains(says), "{source}: {err}");
        if says == "not valid Cedar" {
            assert!(matches!(err, PolicyError::Syntax(_)));
        }
    }
}

#[test]
fn annotations_take_the_mcp_defaults() {
    let definition = json!({"name": "t", "annotations": {"readOnlyHint": true}});
    let a = Annotations::from_mcp(definition.as_object().unwrap());
    assert!(a.read_only && a.destructive && !a.idempotent && a.open_world);
    let bare = json!({"name": "t"});
    assert_eq!(
        Annotations::from_mcp(bare.as_object().unwrap()),
        Annotations::default()
    );
}

#[test]
fn the_worked_policy_of_the_docs_loads_and_decides_as_they_say() {
    let doc = include_str!("../../../docs/governance.md");
    let start = doc.find("```cedar\n").unwrap() + "```cedar\n".len();
    let end = start + doc[start..].find("```").unwrap();
    let p = Policies::parse(&doc[start..end]).unwrap();
    let none: [String; 0] = [];
    let fs = |name| tool("filesystem", name, &none, SAFE_WRITE);
    assert_eq!(
        decide(&p, "bob", Action::Call, fs("write_file"), None),
        (false, "default-deny".to_owned())
    );
    assert!(decide(&p, "alice", Action::Call, fs("write_file"), None).0);
    assert!(
        !decide(
            &p,
            "bob",
            Action::List,
            tool("admin", "x", &none, READ_ONLY),
            None
        )
        .0
    );
    let etc = json!({"path": "/etc/passwd"});
    let read = tool("filesystem", "read_text_file", &none, READ_ONLY);
    assert_eq!(
        decide(&p, "bob", Action::Call, read, Some(&etc)),
        (false, "no-etc".to_owned())
    );
    assert_eq!(
        decide(
            &p,
            "alice",
            Action::Call,
            tool("fs", "rm", &none, Annotations::default()),
            None
        ),
        (false, "no-destructive".to_owned())
    );
}

#[test]
fn a_tool_whose_definition_changed_is_decided_afresh_not_from_the_cache() {
    let p = Policies::parse(POLICY).unwrap();
    let none: [String; 0] = [];
    let safe = ["safe".to_owned()];
    let destructive = Annotations {
        destructive: true,
        ..READ_ONLY
    };
    let call = |principal: &str, tags: &[String], annotations: Annotations| {
        decide(
            &p,
            principal,
            Action::Call,
            tool("fs", "wipe", tags, annotations),
            None,
        )
    };
    // The same principal and tool name, asked again after each change of the definition.
    for _ in 0..2 {
        assert_eq!(
            call("bob", &none, READ_ONLY),
            (true, "read-only-for-all".to_owned())
        );
        assert_eq!(
            call("bob", &none, destructive),
            (false, "no-destructive".to_owned())
        );
        assert_eq!(
            call("bob", &safe, destructive),
            (true, "read-only-for-all".to_owned())
        );
        assert_eq!(
            call("carol", &none, SAFE_WRITE),
            (false, "default-deny".to_owned())
        );
        assert_eq!(
            call("alice", &none, SAFE_WRITE),
            (true, "alice-calls".to_owned())
        );
    }
}

/// The regression: a `forbid` over an argument was skipped when the argument was a number that
/// is not an i64 (`1000.0`, `1e3`, 2^63) or a string (`"1000"`): the comparison errored and
/// Cedar ignores a policy that errors. Integral numbers are integers now, and a policy that
/// errors denies, naming itself.
#[test]
fn a_forbid_over_an_argument_holds_for_every_spelling_of_a_number() {
    let p = Policies::parse(
        r#"
@id("everyone") permit(principal, action, resource);
@id("no-big-payments")
forbid(principal, action == Action::"call", resource == Tool::"pay/send")
when { context.arguments has amount && context.arguments.amount > 100 };
"#,
    )
    .unwrap();
    let none: [String; 0] = [];
    let send = |raw: &str| {
        let arguments: serde_json::Value =
            serde_json::from_str(&format!(r#"{{"amount": {raw}}}"#)).unwrap();
        decide(
            &p,
            "alice",
            Action::Call,
            tool("pay", "send", &none, SAFE_WRITE),
            Some(&arguments),
        )
    };
    for big in [
        "1000",
        "1000.0",
        "1e3",
        "\"1000\"",
        "9223372036854775808",
        "1e300",
        "100.5",
    ] {
        let (allowed, deciding) = send(big);
        assert!(!allowed, "amount {big} passed the forbid");
        assert_eq!(deciding, "no-big-payments", "amount {big}");
    }
    for small in ["100", "5", "5.0", "-1e2"] {
        assert_eq!(send(small), (true, "everyone".to_owned()), "amount {small}");
    }
    // The denial of an erring policy says so.
    let arguments = json!({"amount": "1000"});
    let d = p.decide(&Request {
        principal: "alice",
        action: Action::Call,
        target: tool("pay", "send", &none, SAFE_WRITE),
        arguments: Some(&arguments),
    });
    let text = d.denial(Action::Call, "pay/send");
    assert!(text.contains("could not be evaluated"), "{text}");
    assert!(text.contains("no-big-payments"), "{text}");
}
