//! A run from its request to its result: the offer, then model turns (each one's tool calls
//! routed, admitted and run by `calls`) until the model answers, a halt or `max_steps`.

use std::collections::HashSet;

use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use toolforge_llm::{InputBound, Message, ModelRequest, Role, StopReason, Usage};
use tracing::Instrument as _;

use super::offering::Offering;
use super::prepared::Prepared;
use super::provider_search;
use super::request::RunRequest;
use super::result::{RunEvent, RunResult, halt_on_trace, parse_answer, partial_output};
use super::{Agent, RunState};
use crate::cost::{Allowance, CostGuard};
use crate::halt::HaltReason;

impl Agent {
    /// Runs one request to its end. Events go to `events` when given.
    pub async fn run(
        &self,
        request: RunRequest,
        events: Option<mpsc::UnboundedSender<RunEvent>>,
    ) -> RunResult {
        let span = crate::spans::run(request.dry_run);
        let result = self
            .run_inner(request, events)
            .instrument(span.clone())
            .await;
        crate::spans::record_run(&span, &result);
        drop(span);
        if let Some(m) = &self.metrics {
            m.record_run(&result);
        }
        result
    }

    async fn run_inner(
        &self,
        request: RunRequest,
        events: Option<mpsc::UnboundedSender<RunEvent>>,
    ) -> RunResult {
        let session_id = request
            .session_id
            .clone()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        if !request.dry_run {
            // Servers launched a moment ago (`serve` answers at once) get their start.
            self.backend.settled().await;
        }
        let prepared = self.prepare(&request, &session_id).await;
        let (price, known) = self.config.prices.price(self.model.model());
        if !known {
            tracing::warn!(
                model = self.model.model(),
                "no price configured for this model: charging the dearest known price"
            );
        }
        let offering = Offering::new(
            &prepared,
            &self.config.discovery,
            self.model.tool_search().is_some(),
        );
        let mut state = RunState {
            history: Vec::new(),
            rejected_once: HashSet::new(),
            trace_failed: false,
            events,
            result: RunResult {
                session_id: session_id.clone(),
                response: String::new(),
                key_facts: json!({}),
                steps: Vec::new(),
                cost_usd: 0.0,
                tokens_in: 0,
                tokens_out: 0,
                usage: Usage::default(),
                model_calls: 0,
                halted: false,
                halt_reason: None,
                error: None,
                dry_run: request.dry_run,
                model: self.model.model().to_owned(),
                ceiling_usd: self.config.ceiling_usd,
                available_tools: prepared.available_tools.clone(),
                offered_tools: offering.names(),
                broker_rationale: prepared.rationale.clone(),
                searches: Vec::new(),
            },
            session_id,
            offering,
        };
        state.send(RunEvent::SessionStart {
            session_id: state.session_id.clone(),
            dry_run: request.dry_run,
            offered_tools: state.result.offered_tools.clone(),
        });

        if !request.dry_run
            && let Some(error) = self.servers_down(&prepared)
        {
            state.result.halted = true;
            state.result.halt_reason = Some(HaltReason::ServersUnavailable);
            state.result.error = Some(error);
            return state.finish();
        }
        if self.config.trace_fail_closed && !self.traces.writable().await {
            halt_on_trace(&mut state.result);
            state.result.error = Some(format!(
                "{} Nothing was run.",
                state.result.error.take().unwrap_or_default()
            ));
            return state.finish();
        }

        let mut guard = CostGuard::new(self.config.ceiling_usd, price);
        state.history = self.sessions.history(&state.session_id).await;
        let mut messages = request.prior.clone();
        messages.push(Message::user(request.message.clone()));
        let halt = self
            .turns(&request, &prepared, &mut state, &mut guard, &mut messages)
            .await;
        let result = &mut state.result;
        let reason = match halt {
            Ended::Answered => None,
            Ended::Halted(reason) => Some(reason),
            Ended::OutOfSteps => Some(HaltReason::MaxSteps),
        };
        if let Some(reason) = reason {
            result.halted = true;
            result.halt_reason = Some(reason);
        }
        if result.halted && result.response.is_empty() {
            result.response = partial_output(result);
        }
        result.cost_usd = guard.spent();
        result.tokens_in = result.usage.total_input();
        result.tokens_out = result.usage.output_tokens;
        state.finish()
    }

    /// The model turns of a run, up to `max_steps`, and how they ended (a halt with more to
    /// say, such as a model error's message, has already put it on `state.result`).
    async fn turns(
        &self,
        request: &RunRequest,
        prepared: &Prepared,
        state: &mut RunState,
        guard: &mut CostGuard,
        messages: &mut Vec<Message>,
    ) -> Ended {
        let cancelled = || {
            request
                .cancel
                .as_ref()
                .is_some_and(CancellationToken::is_cancelled)
        };
        for step in 1..=self.config.max_steps.max(1) {
            if cancelled() {
                return Ended::Halted(HaltReason::Cancelled);
            }
            let mut model_request = ModelRequest {
                system: self.config.system_prompt.clone(),
                tools: state.offering.specs().to_vec(),
                messages: messages.clone(),
                max_tokens: self.config.max_tokens,
                cache: self.config.cache,
                stable_tools: state.offering.stable(),
                deferred_tools: state.offering.deferred().to_vec(),
            };
            let bound = self.input_bound(guard, &model_request).await;
            let clamped = match guard.allow(bound.tokens, self.config.max_tokens) {
                Allowance::Halt => return Ended::Halted(HaltReason::CostCeiling),
                Allowance::Call { max_tokens } => {
                    model_request.max_tokens = max_tokens;
                    max_tokens < self.config.max_tokens
                }
            };
            let span = crate::spans::model_call(self.model.provider(), self.model.model());
            let called = self
                .model
                .complete(&model_request)
                .instrument(span.clone())
                .await;
            let response = match called {
                Ok(r) => r,
                Err(e) => {
                    crate::spans::record_model_error(&span);
                    state.result.error = Some(e.to_string());
                    return Ended::Halted(HaltReason::ModelError);
                }
            };
            state.result.model_calls += 1;
            let cost = guard.record(bound, &response.usage);
            crate::spans::record_model_call(&span, &response.usage, cost);
            drop(span);
            state.result.usage.add(&response.usage);
            let calls_tools = !response.tool_uses().is_empty();
            // The turn's cost is split over the calls it runs and the searches the provider
            // ran in it; a turn with neither gets a record of its own.
            let runs = if calls_tools && response.stop_reason != StopReason::MaxTokens {
                response.tool_uses().len()
            } else {
                0
            };
            let searches = provider_search::provider_searches(&response);
            let shares = runs + searches.len();
            if !searches.is_empty() {
                self.record_provider_searches(
                    request,
                    prepared,
                    state,
                    step,
                    &response,
                    cost,
                    &searches,
                    (shares, runs),
                )
                .await;
            }
            if shares == 0 {
                let record =
                    self.model_call_record(&state.session_id, step, &response, cost, request);
                if !self.trace(record).await {
                    state.trace_failed = true;
                }
            }
            if response.stop_reason == StopReason::MaxTokens {
                state.result.response = response.text();
                return Ended::Halted(if clamped {
                    HaltReason::CostCeiling
                } else {
                    HaltReason::MaxTokens
                });
            }
            if response.stop_reason == StopReason::PauseTurn && !calls_tools {
                // The provider paused its own tools' turn: sent back as it is, it goes on.
                messages.push(Message {
                    role: Role::Assistant,
                    content: response.content.clone(),
                });
                continue;
            }
            if !calls_tools {
                let (answer, facts) = parse_answer(&response.text());
                state.result.response = answer;
                state.result.key_facts = facts;
                return Ended::Answered;
            }
            // The caller left while the model answered: no new tool call starts.
            if cancelled() {
                return Ended::Halted(HaltReason::Cancelled);
            }
            messages.push(Message {
                role: Role::Assistant,
                content: response.content.clone(),
            });
            let results = self
                .call_tools(request, prepared, state, step, &response, (cost, shares))
                .await;
            messages.push(Message {
                role: Role::User,
                content: results,
            });
            if state.trace_failed {
                halt_on_trace(&mut state.result);
                return Ended::Halted(HaltReason::TraceUnavailable);
            }
        }
        Ended::OutOfSteps
    }

    /// The bound the guard sizes the next call with: the byte bound when it already pays the
    /// whole `max_tokens` (no round trip needed), else the model's count while counts are
    /// trusted. Once a bill has passed its bound, the largest figure seen: the byte bound scaled
    /// by that overrun, or the model's count when it is larger, asked every time.
    async fn input_bound(&self, guard: &CostGuard, request: &ModelRequest) -> InputBound {
        let upper = guard.scaled(InputBound::upper(request));
        if guard.billed_past_a_bound() {
            let counted = self.model.input_bound(request).await;
            return if counted.tokens > upper.tokens {
                counted
            } else {
                upper
            };
        }
        let fits = matches!(
            guard.allow(upper.tokens, self.config.max_tokens),
            Allowance::Call { max_tokens } if max_tokens == self.config.max_tokens
        );
        if fits || !guard.trusts_counts() {
            return upper;
        }
        // The count, also when it is above the byte bound: the larger figure bounds the call.
        self.model.input_bound(request).await
    }
}

/// How a run's model turns ended.
enum Ended {
    /// The model gave its final answer.
    Answered,
    Halted(HaltReason),
    /// `max_steps` turns and still calling tools.
    OutOfSteps,
}
