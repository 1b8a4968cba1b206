//! Adapter registration, composite routing, unreachable servers, slots and JIT-swap protection.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;
use toolforge_evals::tools::CompleteOptions;
use toolforge_evals::{EvalsConfig, RemoteBackend, Tools};

use crate::{Fake, Reply, config, dead_url, tools_over};

fn user(text: &str) -> Vec<serde_json::Value> {
    vec![json!({"role": "user", "content": text})]
}

#[tokio::test]
async fn list_models_merges_servers_and_reports_the_unreachable() {
    let a = Fake::start(&["zeta", "alpha"]).await;
    let b = Fake::start(&["alpha", "beta"]).await;
    *b.state.bare_models.lock().unwrap() = true;
    let dead = dead_url();
    let broken = Fake::start(&["x"]).await;
    *broken.state.models_status.lock().unwrap() = Some(500);
    let tools = Tools::new(&config(&[
        &a.url,
        &format!("{}/v1/", b.url),
        &dead,
        &broken.url,
    ]))
    .unwrap();
    let listing = serde_json::to_value(tools.list_models().await.unwrap()).unwrap();
    assert_eq!(
        listing,
        json!({
            "models": ["alpha", "beta", "zeta"],
            "servers": {a.url.clone(): ["alpha", "zeta"], format!("{}/v1", b.url): ["alpha", "beta"]},
            "unreachable": [dead, broken.url.clone()],
        })
    );
}

#[tokio::test]
async fn no_adapter_is_a_runtime_error() {
    let tools = Tools::new(&config(&[])).unwrap();
    let e = tools.list_models().await.unwrap_err().to_string();
    assert!(e.starts_with("RuntimeError: no adapter registered"), "{e}");
    let e = tools
        .complete("m", user("hi"), CompleteOptions::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("RuntimeError: no adapter registered"), "{e}");
}

#[tokio::test]
async fn a_model_routes_to_the_server_that_lists_it() {
    let a = Fake::start(&["model-a"]).await;
    let b = Fake::start(&["model-b"]).await;
    let tools = Tools::new(&config(&[&a.url, &b.url])).unwrap();
    let out = tools
        .complete("model-b", user("to b"), CompleteOptions::default())
        .await
        .unwrap();
    assert_eq!(out, "echo: to b");
    assert!(a.requests().is_empty());
    assert_eq!(b.requests().len(), 1);
    let out = tools
        .complete("model-a", user("to a"), CompleteOptions::default())
        .await
        .unwrap();
    assert_eq!(out, "echo: to a");
    assert_eq!(a.requests().len(), 1);
}

#[tokio::test]
async fn an_unknown_model_names_the_unreachable_servers() {
    let a = Fake::start(&["model-a"]).await;
    let dead = dead_url();
    let tools = Tools::new(&config(&[&a.url, &dead])).unwrap();
    let e = tools
        .complete("nope", user("hi"), CompleteOptions::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("RuntimeError: no server available for model \"nope\""),
        "{e}"
    );
    assert!(e.contains(&dead), "{e}");
    // Other models keep working although one server is down.
    assert_eq!(
        tools
            .complete("model-a", user("x"), CompleteOptions::default())
            .await
            .unwrap(),
        "echo: x"
    );
}

#[tokio::test]
async fn manifests_are_cached_and_refreshed_for_new_models() {
    let a = Fake::start(&["m1"]).await;
    let tools = tools_over(&a);
    for _ in 0..3 {
        tools
            .complete("m1", user("x"), CompleteOptions::default())
            .await
            .unwrap();
    }
    assert_eq!(
        a.state.models_calls.load(Ordering::SeqCst),
        1,
        "cached within the TTL"
    );
    // A model downloaded after the last fetch is found by a refresh.
    a.state.models.lock().unwrap().push("m2".into());
    tools
        .complete("m2", user("x"), CompleteOptions::default())
        .await
        .unwrap();
    assert_eq!(a.state.models_calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn one_slot_per_lm_studio_server_by_default() {
    let a = Fake::start(&["m"]).await;
    a.script((0..3).map(|_| Reply::delay(150, Reply::text("ok"))));
    let tools = tools_over(&a);
    let calls = (0..3).map(|_| {
        let t = Arc::clone(&tools);
        async move { t.complete("m", user("x"), CompleteOptions::default()).await }
    });
    for r in futures::future::join_all(calls).await {
        assert_eq!(r.unwrap(), "ok");
    }
    assert_eq!(a.state.max_in_flight.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn busy_servers_spread_the_load() {
    let a = Fake::start(&["m"]).await;
    let b = Fake::start(&["m"]).await;
    a.script((0..2).map(|_| Reply::delay(500, Reply::text("a"))));
    b.script((0..2).map(|_| Reply::delay(500, Reply::text("b"))));
    let tools = Arc::new(Tools::new(&config(&[&a.url, &b.url])).unwrap());
    let calls = (0..2).map(|_| {
        let t = Arc::clone(&tools);
        async move {
            t.complete("m", user("x"), CompleteOptions::default())
                .await
                .unwrap()
        }
    });
    let mut got = futures::future::join_all(calls).await;
    got.sort();
    assert_eq!(got, ["a", "b"], "the second call went to the idle server");
}

#[tokio::test]
async fn jit_swap_guard_never_mixes_models_on_one_lm_studio_server() {
    let a = Fake::start(&["m1", "m2"]).await;
    a.script((0..4).map(|_| Reply::delay(300, Reply::text("ok"))));
    let mut cfg = config(&[&a.url]);
    cfg.lm_studio_slots = 4;
    let tools = Arc::new(Tools::new(&cfg).unwrap());
    let calls = ["m1", "m2", "m1", "m2"].into_iter().map(|m| {
        let t = Arc::clone(&tools);
        async move { t.complete(m, user("x"), CompleteOptions::default()).await }
    });
    for r in futures::future::join_all(calls).await {
        r.unwrap();
    }
    assert_eq!(a.state.max_models_in_flight.load(Ordering::SeqCst), 1);
    assert!(
        a.state.max_in_flight.load(Ordering::SeqCst) >= 2,
        "same-model requests share the server"
    );
}

#[tokio::test]
async fn together_and_hf_send_keys_and_their_penalty_field() {
    let together = Fake::start(&[]).await;
    *together.state.bare_models.lock().unwrap() = true;
    together
        .state
        .models
        .lock()
        .unwrap()
        .push("meta/llama".into());
    let hf = Fake::start(&["ignored"]).await;
    let mut cfg = EvalsConfig::default();
    crate::tls();
    cfg.together = Some(RemoteBackend::new(&format!("{}/v1", together.url), "tk"));
    let mut hf_backend = RemoteBackend::new(&format!("{}/v1", hf.url), "hk");
    hf_backend.models = Some(vec!["org/fixed".into()]);
    cfg.huggingface = Some(hf_backend);
    let tools = Tools::new(&cfg).unwrap();
    let listing = tools.list_models().await.unwrap();
    assert_eq!(listing.models, ["meta/llama", "org/fixed"]);
    assert_eq!(
        hf.state.models_calls.load(Ordering::SeqCst),
        0,
        "a fixed list needs no discovery"
    );
    let opts = CompleteOptions {
        repeat_penalty: Some(1.2),
        ..CompleteOptions::default()
    };
    tools
        .complete("meta/llama", user("x"), opts.clone())
        .await
        .unwrap();
    tools.complete("org/fixed", user("y"), opts).await.unwrap();
    assert_eq!(
        together.state.auth.lock().unwrap()[0].as_deref(),
        Some("Bearer tk")
    );
    assert_eq!(
        hf.state.auth.lock().unwrap()[0].as_deref(),
        Some("Bearer hk")
    );
    assert_eq!(together.last_request()["repetition_penalty"], 1.2);
    assert_eq!(hf.last_request()["repetition_penalty"], 1.2);
}

#[tokio::test]
async fn a_slow_manifest_makes_the_server_unreachable_not_the_call() {
    // A server that accepts connections but never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let slow = format!("http://{}", listener.local_addr().unwrap());
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    let a = Fake::start(&["m"]).await;
    let mut cfg = config(&[&a.url, &slow]);
    cfg.manifest_timeout = Duration::from_millis(300);
    let tools = Tools::new(&cfg).unwrap();
    let listing = tools.list_models().await.unwrap();
    assert_eq!(listing.models, ["m"]);
    assert_eq!(listing.unreachable, [slow]);
    hold.abort();
}
