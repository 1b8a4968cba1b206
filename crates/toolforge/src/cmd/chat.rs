//! `toolforge chat`: one request through the agent, from the command line.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use toolforge_agent::halt::HaltReason;
use toolforge_agent::{RunRequest, RunResult};

use super::serve::NamespaceArg;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
The model is LLM_PROVIDER (mock, the offline default; anthropic; openai). COST_CEILING_USD \
(default 0.10) caps the spend; traces go to TRACE_SINK (default logs/traces.jsonl).

A dry run plans from the catalog cache and contacts no MCP server; servers whose tools are not \
cached are left out (say so with --allow-listing to list them first).

Exit status: 0 answered, 2 halted with partial output (cost ceiling, step cap), 1 failed \
(servers down, model error, trace not writable in fail-closed mode, every tool call failed, \
bad configuration).")]
pub struct Args {
    /// What you want done, in plain words.
    pub request: String,
    /// Plan without executing: the model runs and every stage decides, but no tool is called
    /// and no MCP server is contacted (tools come from the catalog cache).
    #[arg(long)]
    pub dry_run: bool,
    /// With --dry-run: start the servers whose tools are not cached, only to list them.
    #[arg(long, requires = "dry_run")]
    pub allow_listing: bool,
    /// Print the same JSON object `POST /chat` returns.
    #[arg(long)]
    pub json: bool,
    /// Continue a session (the selector's session-recency rule sees its earlier calls).
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Servers configuration (default: $MCP_SERVERS_CONFIG, else ./mcp.servers.json).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// How tool names are shown to the model.
    #[arg(long, value_enum, default_value = "auto")]
    pub namespace: NamespaceArg,
    /// Broker rule file (YAML or JSON; default: the configuration's
    /// "toolforge": {"broker": {"rules": FILE}}).
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    #[command(flatten)]
    pub visibility: super::visibility::VisibilityArgs,
    #[command(flatten)]
    pub governance: super::governance::GovernanceArgs,
    #[command(flatten)]
    pub who: super::governance::StdioIdentityArgs,
}

pub async fn run(args: Args, process: &crate::config::Config) -> anyhow::Result<ExitCode> {
    if args.request.trim().is_empty() {
        anyhow::bail!(
            "the request is empty: say what you want done, e.g. toolforge chat \"list the tables\""
        );
    }
    let visibility = std::sync::Arc::new(args.visibility.config(process)?);
    let config_path = process.servers_config_path(args.config.clone());
    let mut config = crate::pool::load_config(process, args.config)?;
    let settings = config.settings.clone();
    let rules = super::broker::rules_for(args.rules.as_deref(), &settings, &config_path)?;
    let governance = args
        .governance
        .build(process, &settings, &config_path)
        .await?;
    let who = args.who.resolve(process, &settings).await?;
    let principal = who
        .as_ref()
        .map_or_else(toolforge_policy::Principal::anonymous, |w| {
            toolforge_policy::Principal::new(&w.principal)
        });
    let mut options = crate::pool::options(process).await?;
    // A dry run never contacts a server whose tools the cache already holds, and (unless
    // listing is allowed) leaves out the servers it does not.
    options.cached_only = args.dry_run;
    let mut unlisted = Vec::new();
    if args.dry_run && !args.allow_listing {
        for server in config.servers.iter_mut().filter(|s| !s.disabled) {
            let cached = match &options.cache {
                Some(cache) => !matches!(
                    cache.lookup(server).await,
                    toolforge_mcp::cache::Lookup::Miss
                ),
                None => false,
            };
            if !cached {
                server.disabled = true;
                unlisted.push(server.name.clone());
            }
        }
    }
    let pool = toolforge_mcp::Pool::start(config, options).await;
    for h in pool.health() {
        if let Some(err) = &h.last_error {
            // The state as the API names it (`crashed`, `starting`), not as Rust spells it.
            let state = serde_json::to_value(h.state)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            tracing::warn!(server = %h.name, state = %state, "{err}");
        }
    }
    let agent = crate::agent::build(
        process,
        pool.clone(),
        &settings,
        args.namespace.into(),
        rules,
    )
    .await;
    let agent = match agent {
        Ok(a) => Arc::new(a.with_governance(governance)),
        Err(e) => {
            pool.shutdown().await;
            return Err(e);
        }
    };
    let channels = toolforge_gateway::visible::RequestChannels {
        principal: principal.clone(),
        ..Default::default()
    };
    let request = RunRequest {
        message: args.request,
        session_id: args.session,
        dry_run: args.dry_run,
        visibility: Some(std::sync::Arc::new(
            move |catalog: &toolforge_select::Catalog| {
                visibility.resolve(catalog, &channels).catalog(catalog)
            },
        )),
        principal,
        caller_token: who.and_then(|w| w.token),
        ..RunRequest::default()
    };
    let mut result = agent.run(request, None).await;
    if !unlisted.is_empty() {
        result.response = format!("{}\n{}", unlisted_note(&unlisted), result.response)
            .trim_end()
            .to_owned();
    }
    agent.traces().flush().await;
    crate::agent::shutdown_metrics(&agent).await;
    pool.shutdown().await;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        print!("{}", render(&result));
    }
    Ok(exit_code(&result))
}

/// What a dry run says about servers it planned without.
fn unlisted_note(servers: &[String]) -> String {
    format!(
        "Dry run without the tools of {}: no cached tool list, and a dry run contacts no server. \
         Run once without --dry-run (or `toolforge tools snapshot`) to cache them, or pass \
         --allow-listing to list them now.",
        servers.join(", ")
    )
}

/// 1 when the run failed (a failing halt, or tool calls were made and every one failed), 2 when
/// it halted at a limit, else 0.
fn exit_code(result: &RunResult) -> ExitCode {
    let failed_halt = result.halt_reason.is_some_and(HaltReason::is_failure);
    let executed = result.steps.iter().filter(|s| s.executed);
    let all_calls_failed = executed.clone().count() > 0 && !executed.clone().any(|s| s.success);
    if failed_halt || all_calls_failed {
        ExitCode::FAILURE
    } else if result.halted || result.halt_reason.is_some() {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    }
}

/// The human-readable report: answer, key facts, steps with the rule that chose each server,
/// and the cost.
fn render(r: &RunResult) -> String {
    let mut out = String::new();
    if let Some(err) = &r.error {
        let _ = writeln!(out, "error: {err}");
    }
    if r.halted {
        let _ = writeln!(
            out,
            "halted: {}",
            r.halt_reason.map_or("unknown", HaltReason::as_str)
        );
    }
    if r.dry_run {
        let _ = writeln!(out, "dry run: no tool was called");
    }
    if !r.response.is_empty() {
        let _ = writeln!(out, "{}", r.response);
    }
    if r.key_facts.as_object().is_some_and(|o| !o.is_empty()) {
        let _ = writeln!(out, "\nkey facts:");
        if let Some(facts) = r.key_facts.as_object() {
            for (k, v) in facts {
                let _ = writeln!(out, "  {k}: {v}");
            }
        }
    }
    if !r.steps.is_empty() {
        let _ = writeln!(out, "\nsteps:");
        for s in &r.steps {
            let target = match (&s.server, &s.server_tool) {
                (Some(server), Some(tool)) => format!("{server}/{tool}"),
                _ => "(no server)".to_owned(),
            };
            let outcome = if s.dry_run {
                "planned"
            } else if !s.executed {
                "rejected"
            } else if s.success {
                "ok"
            } else {
                "failed"
            };
            let mut line = format!(
                "  {}. {} -> {target} [{}] {outcome}",
                s.step,
                s.tool,
                s.selection_rule.as_deref().unwrap_or("-"),
            );
            if s.executed {
                let _ = write!(line, " in {:.0} ms", s.latency_ms);
            }
            if !s.alternatives.is_empty() {
                let _ = write!(line, " (over {})", s.alternatives.join(", "));
            }
            if s.corrective_retry {
                line.push_str(" (corrective retry)");
            }
            let _ = writeln!(out, "{line}");
            if let Some(err) = &s.error {
                let _ = writeln!(out, "     {}", first_line(err));
            }
        }
    }
    let _ = writeln!(
        out,
        "\ncost: ${:.4} of ${:.2} ceiling, {} model call(s), {} tokens in, {} out ({}); session {}",
        r.cost_usd, r.ceiling_usd, r.model_calls, r.tokens_in, r.tokens_out, r.model, r.session_id
    );
    out
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolforge_agent::Step;

    fn result() -> RunResult {
        RunResult {
            session_id: "s".into(),
            response: "It is done.".into(),
            key_facts: json!({"total": 334.0}),
            steps: vec![Step {
                step: 1,
                tool: "sql_query".into(),
                server: Some("toolkit".into()),
                server_tool: Some("sql_query".into()),
                arguments: json!({}),
                selection_rule: Some("single-candidate".into()),
                alternatives: vec![],
                executed: true,
                dry_run: false,
                success: true,
                error: None,
                corrective_retry: false,
                latency_ms: 3.2,
                attempts: 1,
                retry_reason: None,
                tokens_in: 10,
                tokens_out: 2,
                cost_usd: 0.001,
                result_summary: String::new(),
                raw_result: json!({}),
                policy: None,
            }],
            cost_usd: 0.0021,
            tokens_in: 20,
            tokens_out: 4,
            usage: toolforge_llm::Usage::default(),
            model_calls: 2,
            halted: false,
            halt_reason: None,
            error: None,
            dry_run: false,
            model: "mock".into(),
            ceiling_usd: 0.1,
            available_tools: vec![],
            offered_tools: vec![],
            broker_rationale: String::new(),
            searches: Vec::new(),
        }
    }

    #[test]
    fn report_names_rule_server_and_cost() {
        let text = render(&result());
        assert!(text.starts_with("It is done.\n"), "{text}");
        assert!(text.contains("  total: 334.0"), "{text}");
        assert!(
            text.contains("  1. sql_query -> toolkit/sql_query [single-candidate] ok in 3 ms"),
            "{text}"
        );
        assert!(text.contains("cost: $0.0021 of $0.10 ceiling, 2 model call(s)"));
    }

    #[test]
    fn halts_exit_2_and_failures_exit_1() {
        let mut r = result();
        assert_eq!(exit_code(&r), ExitCode::SUCCESS);
        r.halt_reason = Some(HaltReason::CostCeiling);
        assert_eq!(exit_code(&r), ExitCode::from(2));
        r.halt_reason = Some(HaltReason::ServersUnavailable);
        assert_eq!(exit_code(&r), ExitCode::FAILURE);
        r.halt_reason = Some(HaltReason::TraceUnavailable);
        assert_eq!(exit_code(&r), ExitCode::FAILURE);
        r.halted = false;
        r.halt_reason = None;
        r.steps[0].success = false;
        assert_eq!(
            exit_code(&r),
            ExitCode::FAILURE,
            "its only tool call failed"
        );
        r.steps[0].success = true;
        r.dry_run = true;
        r.steps[0].dry_run = true;
        r.steps[0].executed = false;
        assert!(render(&r).contains("[single-candidate] planned\n"));
    }
}
