//! One model turn's tool calls: each is routed (the selector's rules, then its arguments against
//! the schema), admitted (policy, then limits; a refused call never reaches its server), run
//! concurrently with the others (or only planned, in a dry run), and recorded as a `Step`, a
//! trace record and the tool result the model reads next. A call of the search tool is
//! answered here, in order, before the others run (it only ranks the catalog, so a dry run
//! searches too); what it finds joins the offer from the next model call on.

use std::time::Instant;

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use toolforge_llm::{Content, ModelResponse};
use toolforge_select::{Call, Resolved, Selection, ToolId};

use super::offering::{Found, Offering};
use super::prepared::Prepared;
use super::result::{SearchStep, raw_result, short};
use super::{Agent, RunRequest, RunState, Step};
use crate::backend::{ToolFailure, ToolOutput};
use crate::governance::Refusal;
use crate::trace::Searcher;

/// A call the model asked for, after routing.
enum Planned {
    Unknown,
    Invalid {
        id: ToolId,
        rule: String,
        alternatives: Vec<String>,
        message: String,
    },
    Run {
        id: ToolId,
        rule: String,
        alternatives: Vec<String>,
    },
    /// A call of the search tool, answered.
    Search(Found),
}

/// What became of an admitted call: `None` when it was not run (refused, or a dry run).
type Outcome = Option<Result<ToolOutput, ToolFailure>>;

/// Policy's verdict on a call (`Ok(None)`: nothing to decide, the call is not run).
type Admission = Result<Option<toolforge_policy::Decision>, Refusal>;

impl Agent {
    /// Routes, admits and runs the tool uses of one model turn (`step`, its `response` and
    /// what it cost), records every one, and returns the tool results for the next message,
    /// in the order the model asked.
    pub(super) async fn call_tools(
        &self,
        request: &RunRequest,
        prepared: &Prepared,
        state: &mut RunState,
        step: u32,
        response: &ModelResponse,
        (cost, shares): (f64, usize),
    ) -> Vec<Content> {
        let uses: Vec<(String, String, Value)> = response
            .tool_uses()
            .into_iter()
            .map(|(id, name, input)| (id.to_owned(), name.to_owned(), input.clone()))
            .collect();
        // Route every call against the offer the model was shown, then answer its searches
        // in order (what they find is callable from the next turn), then run the calls
        // concurrently.
        let n = uses.len();
        let routed: Vec<Option<Planned>> = uses
            .iter()
            .map(|(_, name, input)| {
                if state.offering.is_search(name) {
                    return None;
                }
                let span = crate::spans::route();
                let plan = span.in_scope(|| {
                    route(
                        prepared,
                        &state.offering,
                        prompt_context(prepared, request, &state.history),
                        name,
                        input,
                    )
                });
                let chosen = match &plan {
                    Planned::Run { id, rule, .. } | Planned::Invalid { id, rule, .. } => {
                        Some((id, rule.as_str()))
                    }
                    Planned::Unknown | Planned::Search(_) => None,
                };
                crate::spans::record_route(&span, chosen);
                Some(plan)
            })
            .collect();
        let planned: Vec<Planned> = routed
            .into_iter()
            .zip(&uses)
            .map(|(plan, (_, _, input))| {
                plan.unwrap_or_else(|| Planned::Search(state.offering.search(prepared, input)))
            })
            .collect();
        let futures = uses
            .iter()
            .zip(&planned)
            .map(|((_, _, input), plan)| self.admit_and_run(request, prepared, plan, input));
        let outcomes = futures::future::join_all(futures).await;

        let mut results = Vec::with_capacity(n);
        for (i, (((use_id, name, input), plan), (outcome, latency_ms, admission))) in
            uses.iter().zip(planned).zip(outcomes).enumerate()
        {
            let tokens_in = split_even(response.usage.total_input(), shares, i);
            let tokens_out = split_even(response.usage.output_tokens, shares, i);
            if let Planned::Search(found) = plan {
                let (content, is_error) = found.tool_result(prepared);
                let search = SearchStep {
                    step,
                    by: Searcher::Agent,
                    query: found
                        .args
                        .as_ref()
                        .map(|a| a.query.clone())
                        .unwrap_or_default(),
                    found: Found::names(prepared, &found.found),
                    added: Found::names(prepared, &found.added),
                    error: found.args.as_ref().err().map(ToString::to_string),
                    tokens_in,
                    tokens_out,
                    cost_usd: cost / shares.max(1) as f64,
                };
                let record = self.search_record(
                    &state.session_id,
                    request,
                    name,
                    input,
                    &search,
                    found.args.as_ref().map_or(0, |a| a.limit),
                    (
                        Found::ids(prepared, &found.found),
                        Found::ids(prepared, &found.added),
                    ),
                );
                if !self.trace(record).await {
                    state.trace_failed = true;
                }
                state.result.searches.push(search);
                results.push(Content::ToolResult {
                    tool_use_id: use_id.clone(),
                    content,
                    is_error,
                });
                continue;
            }
            let mut record = Step {
                step,
                tool: name.clone(),
                server: None,
                server_tool: None,
                arguments: input.clone(),
                selection_rule: None,
                alternatives: Vec::new(),
                executed: false,
                dry_run: request.dry_run,
                success: false,
                error: None,
                corrective_retry: state.rejected_once.contains(name),
                latency_ms,
                attempts: 0,
                retry_reason: None,
                tokens_in,
                tokens_out,
                cost_usd: cost / shares.max(1) as f64,
                result_summary: String::new(),
                raw_result: Value::Null,
                policy: None,
            };
            match &admission {
                Ok(Some(decision)) if self.governance.has_policy() => {
                    record.policy = Some(decision.deciding());
                }
                Err(Refusal::Denied { policy, .. }) => {
                    record.policy = Some(policy.clone());
                }
                _ => {}
            }
            let (content, is_error) = self
                .settle(prepared, state, &mut record, plan, admission, outcome)
                .await;
            if record.executed
                && record.success
                && let (Some(server), Some(tool)) = (&record.server, &record.server_tool)
            {
                self.learned
                    .record(request.principal.as_str(), ToolId::new(server, tool));
            }
            record.result_summary = short(&content, 200);
            if record.raw_result.is_null() {
                record.raw_result = json!({"text": content});
            }
            if !self
                .trace(self.tool_call_record(&state.session_id, &request.principal, &record))
                .await
            {
                state.trace_failed = true;
            }
            state.send(super::RunEvent::ToolResult(Box::new(record.clone())));
            state.result.steps.push(record);
            results.push(Content::ToolResult {
                tool_use_id: use_id.clone(),
                content,
                is_error,
            });
        }
        results
    }

    /// Admits one routed call and runs it (not in a dry run): its outcome, its latency in ms
    /// and the admission.
    async fn admit_and_run(
        &self,
        request: &RunRequest,
        prepared: &Prepared,
        plan: &Planned,
        input: &Value,
    ) -> (Outcome, f64, Admission) {
        let started = Instant::now();
        let principal = &request.principal;
        // Policy, then limits: a refused call never reaches its server.
        let admission = match plan {
            Planned::Run { id, .. } => match prepared.visible.get(id) {
                Some(tool) if request.dry_run => {
                    let d = self.governance.decide(
                        principal,
                        toolforge_policy::Action::Call,
                        toolforge_policy::Target::Tool(crate::governance::tool_ref(tool)),
                        Some(input),
                    );
                    if d.allowed {
                        Ok(Some(d))
                    } else {
                        Err(Refusal::Denied {
                            policy: d.deciding(),
                            message: d.denial(toolforge_policy::Action::Call, &id.to_string()),
                        })
                    }
                }
                Some(tool) => self
                    .governance
                    .admit_call(principal, tool, input)
                    .await
                    .map(Some),
                None => Ok(None),
            },
            _ => Ok(None),
        };
        let outcome = match (plan, &admission) {
            (Planned::Run { id, .. }, Ok(_)) if !request.dry_run => {
                let args = match input {
                    Value::Object(m) => m.clone(),
                    _ => Map::new(),
                };
                let cancel: Option<CancellationToken> = request.cancel.clone();
                let on_behalf = toolforge_mcp::OnBehalf {
                    principal: request.principal.to_string(),
                    token: request.caller_token.clone(),
                };
                Some(
                    self.backend
                        .call_for(on_behalf, &id.server, &id.name, args, cancel)
                        .await,
                )
            }
            _ => None,
        };
        (outcome, started.elapsed().as_secs_f64() * 1000.0, admission)
    }

    /// Fills `record` from what became of the call and returns the tool result the model reads
    /// (and whether it is an error). Executed calls feed session recency (dry runs never do).
    async fn settle(
        &self,
        prepared: &Prepared,
        state: &mut RunState,
        record: &mut Step,
        plan: Planned,
        admission: Admission,
        outcome: Outcome,
    ) -> (String, bool) {
        let name = record.tool.clone();
        match plan {
            // Answered while planning; never settled here.
            Planned::Search(_) => (String::new(), true),
            Planned::Unknown => {
                let names = state.offering.names();
                let known: Vec<&str> = names.iter().map(String::as_str).collect();
                let msg = format!("unknown tool \"{name}\"");
                record.error = Some(msg.clone());
                (
                    format!("Error: {msg}. The tools offered are: {}.", known.join(", ")),
                    true,
                )
            }
            Planned::Invalid {
                id,
                rule,
                alternatives,
                message,
            } => {
                record.server = Some(id.server.clone());
                record.server_tool = Some(id.name.clone());
                record.selection_rule = Some(rule);
                record.alternatives = alternatives;
                record.error = Some(message.clone());
                let schema = prepared
                    .visible
                    .get(&id)
                    .map(|t| t.input_schema.as_json().to_owned())
                    .unwrap_or_default();
                let text = if state.rejected_once.insert(name.clone()) {
                    format!(
                        "Error: the arguments do not match the input schema of \"{name}\" ({message}). Its schema is {schema}. Call it again with arguments that match."
                    )
                } else {
                    format!(
                        "Error: the arguments still do not match the input schema of \"{name}\" ({message}); the call was not made."
                    )
                };
                (text, true)
            }
            Planned::Run {
                id,
                rule,
                alternatives,
            } => {
                record.server = Some(id.server.clone());
                record.server_tool = Some(id.name.clone());
                record.selection_rule = Some(rule);
                record.alternatives = alternatives;
                if let Err(refusal) = admission {
                    let message = refusal.message().to_owned();
                    record.error = Some(message.clone());
                    record.raw_result = match &refusal {
                        Refusal::Limited { retry_after_ms, .. } => {
                            json!({"error": message, "retryAfterMs": retry_after_ms})
                        }
                        Refusal::Denied { policy, .. } => {
                            json!({"error": message, "policy": policy})
                        }
                    };
                    return (format!("Error: {message}"), true);
                }
                match outcome {
                    None => {
                        record.success = true;
                        let synthetic = json!({
                            "dry_run": true,
                            "executed": false,
                            "server": id.server,
                            "tool": id.name,
                            "note": "Dry run: this call was planned but not executed. Continue the plan as if it had succeeded, without inventing its result.",
                        });
                        record.raw_result = synthetic.clone();
                        (synthetic.to_string(), false)
                    }
                    Some(Ok(out)) => {
                        record.executed = true;
                        record.success = !out.is_error;
                        if out.is_error {
                            record.error = Some(short(&out.text, 500));
                        }
                        record.raw_result = raw_result(&out);
                        state.history.push(id.clone());
                        self.sessions.push(&state.session_id, id.clone()).await;
                        let text = match &out.structured {
                            Some(v) if out.text.trim().is_empty() => v.to_string(),
                            _ => out.text.clone(),
                        };
                        record.attempts = out.attempts;
                        record.retry_reason = out.retry_reason.clone();
                        (text, out.is_error)
                    }
                    Some(Err(failure)) => {
                        record.executed = true;
                        record.error = Some(failure.error.clone());
                        record.attempts = failure.attempts;
                        record.retry_reason = failure.retry_reason.clone();
                        (format!("Error: {}", failure.error), true)
                    }
                }
            }
        }
    }
}

/// What routing reads of the request besides the call: the prompt, its vector and the session.
#[derive(Clone, Copy)]
struct PromptContext<'a> {
    selection: &'a Selection,
    prompt_vector: Option<&'a [f32]>,
    prompt: &'a str,
    history: &'a [ToolId],
}

fn prompt_context<'a>(
    prepared: &'a Prepared,
    request: &'a RunRequest,
    history: &'a [ToolId],
) -> PromptContext<'a> {
    PromptContext {
        selection: &prepared.selection,
        prompt_vector: prepared.prompt_vector.as_deref(),
        prompt: &request.message,
        history,
    }
}

/// Routes one call of a tool the model was `shown`: its overlap group's member by the
/// selector's rules (a lone tool is `single-candidate`), then its arguments against that
/// member's schema. A name the model was not shown is unknown, whatever the catalog holds.
fn route(
    prepared: &Prepared,
    shown: &Offering,
    context: PromptContext<'_>,
    name: &str,
    input: &Value,
) -> Planned {
    let (id, rule, alternatives) = match shown.resolve(prepared, name) {
        None => return Planned::Unknown,
        Some(Resolved::Direct(id)) => (id, "single-candidate".to_owned(), Vec::new()),
        Some(Resolved::Group(group)) => {
            let call = Call {
                candidates: &group.members,
                prompt: context.prompt,
                arguments: input,
                session: context.history,
                prompt_vector: context.prompt_vector,
            };
            match context.selection.route(&call) {
                Some(d) => (d.chosen, d.rule.to_owned(), d.alternatives),
                None => return Planned::Unknown,
            }
        }
    };
    if let Some(message) = context.selection.argument_errors(&id, input) {
        return Planned::Invalid {
            id,
            rule,
            alternatives,
            message,
        };
    }
    Planned::Run {
        id,
        rule,
        alternatives,
    }
}

/// Splits `total` into `n` parts that add up to it (earlier parts take the remainder).
pub(super) fn split_even(total: u64, n: usize, i: usize) -> u64 {
    let n = n.max(1) as u64;
    total / n + u64::from((i as u64) < total % n)
}
