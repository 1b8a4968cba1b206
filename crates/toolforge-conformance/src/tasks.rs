//! The Tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`): the tools the suite's
//! `tasks-*` scenarios call, run as tasks by rmcp's `TaskManager`.
//!
//! The server decides which calls become tasks; a request becomes one only when it declares
//! the extension (in the session's capabilities or in its own
//! `_meta["io.modelcontextprotocol/clientCapabilities"]`):
//! - `greet`: never a task (a legacy `task` hint on the call is ignored).
//! - `slow_compute` (`seconds`, `label`): a task when the request declares the extension, else
//!   run in the call (at most [`MAX_SYNC_SECONDS`]). Cancelled, it settles as `cancelled`.
//! - `failing_job`: task support *required*: without the extension the call is refused with
//!   -32021 naming it; as a task it completes about a second later with a tool error
//!   (`isError`), which is `completed`, not `failed`.
//! - `protocol_error_job`: a task that fails with a JSON-RPC error (`failed`, with `error`).
//! - `confirm_delete` (`filename`): a task that asks the user to confirm (one elicitation in
//!   `inputRequests`) and completes with the answer given through `tasks/update`.
//! - `multi_input`: a task that asks two elicitations at once; it stays `input_required` until
//!   both are answered.
//! - `test_tool_with_task`: task support required; its first round is an MRTR
//!   `input_required` asking for `user_name`, and the retry carrying the answer becomes a task
//!   whose result greets that name.
//!
//! Tasks live in memory, shared by every session and stateless request of one fixture, for
//! their TTL ([`TASK_TTL_MS`]) and as long again once terminal (rmcp's retention).

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    ContentBlock, CreateTaskResult, ElicitRequest, ElicitRequestParams, GetTaskParams,
    GetTaskResult, InputRequest, InputRequests, InputRequiredResult, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::task_manager::{TaskContext, TaskExit, TaskFuture, TaskManager, TaskOptions};
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};

use crate::catalog::wire;

/// How long a task stays readable after it starts (and as long again once it ends).
pub(crate) const TASK_TTL_MS: u64 = 600_000;
/// The polling interval the fixture suggests.
const POLL_INTERVAL_MS: u64 = 200;
/// The longest `slow_compute` runs inside a call that is not a task.
const MAX_SYNC_SECONDS: u64 = 5;
/// The longest `slow_compute` runs as a task.
const MAX_TASK_SECONDS: u64 = 3_600;
/// The most tasks that may be running at once (terminal ones are not counted).
const MAX_RUNNING_TASKS: usize = 256;

/// The tools of the tasks scenarios, in listing order.
pub(crate) fn tools() -> Value {
    let object = |properties: Value, required: &[&str]| json!({"type": "object", "properties": properties, "required": required});
    json!([
        {"name": "greet", "description": "Tasks: a plain tool (never a task); greets `name`",
         "inputSchema": object(json!({"name": {"type": "string"}}), &["name"])},
        {"name": "slow_compute", "description": "Tasks: works for `seconds` seconds, as a task when the client declares the tasks extension",
         "inputSchema": object(json!({"seconds": {"type": "number", "minimum": 0}, "label": {"type": "string"}}), &["seconds"])},
        {"name": "failing_job", "description": "Tasks (task support required): a task whose tool reports an error after a second",
         "inputSchema": object(json!({}), &[])},
        {"name": "protocol_error_job", "description": "Tasks: a task that fails with a JSON-RPC error",
         "inputSchema": object(json!({}), &[])},
        {"name": "confirm_delete", "description": "Tasks: a task that asks the user to confirm deleting `filename`",
         "inputSchema": object(json!({"filename": {"type": "string"}}), &["filename"])},
        {"name": "multi_input", "description": "Tasks: a task that asks the user two questions at once",
         "inputSchema": object(json!({}), &[])},
        {"name": "test_tool_with_task", "description": "Tasks (task support required): asks for `user_name` (MRTR), then greets it from a task",
         "inputSchema": object(json!({}), &[])},
    ])
}

/// The fixture's tasks: clones share them.
#[derive(Clone, Default)]
pub(crate) struct Tasks {
    manager: TaskManager,
}

impl std::fmt::Debug for Tasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tasks")
    }
}

fn text(s: impl Into<String>) -> ContentBlock {
    ContentBlock::text(s)
}

fn declares_tasks(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.client_capabilities()
        .is_some_and(|caps| caps.supports_tasks())
}

fn tasks_required() -> McpError {
    McpError::missing_required_client_capability(
        ClientCapabilities::builder().enable_tasks().build(),
    )
}

fn argument<'a>(req: &'a CallToolRequestParams, name: &str) -> Option<&'a Value> {
    req.arguments.as_ref().and_then(|a| a.get(name))
}

fn string_argument(req: &CallToolRequestParams, name: &str, default: &str) -> String {
    argument(req, name)
        .and_then(Value::as_str)
        .unwrap_or(default)
        .to_owned()
}

fn seconds(req: &CallToolRequestParams, most: u64) -> Result<u64, McpError> {
    match argument(req, "seconds") {
        None => Ok(0),
        Some(v) => match v.as_f64() {
            // Whole seconds, rounded up; bounded so no call holds the fixture for long.
            Some(s) if s >= 0.0 && s.is_finite() => Ok((s.ceil() as u64).min(most)),
            _ => Err(McpError::invalid_params(
                "`seconds` must be a number of seconds, 0 or more",
                None,
            )),
        },
    }
}

/// An `elicitation/create` for the task's `inputRequests`.
fn elicitation(message: &str, properties: Value) -> Result<InputRequest, McpError> {
    let params: ElicitRequestParams = wire(
        "elicitation request",
        json!({"mode": "form", "message": message,
               "requestedSchema": {"type": "object", "properties": properties}}),
    )?;
    Ok(InputRequest::Elicitation(ElicitRequest::new(params)))
}

/// The `content` of an accepted elicitation answer, if it was accepted.
fn accepted(answer: &Value) -> Option<&serde_json::Map<String, Value>> {
    (answer.get("action").and_then(Value::as_str) == Some("accept"))
        .then(|| answer.get("content").and_then(Value::as_object))
        .flatten()
}

async fn ask(context: &TaskContext, key: &str, request: InputRequest) -> Result<Value, TaskExit> {
    context.request_input(key, request).await
}

impl Tasks {
    /// The answer to a call of one of [`tools`], or `None` for any other tool.
    pub(crate) fn call(
        &self,
        req: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Option<Result<CallToolResponse, McpError>> {
        let declared = declares_tasks(ctx);
        let answer = match req.name.as_ref() {
            "greet" => {
                let name = string_argument(req, "name", "World");
                Ok(CallToolResponse::Complete(CallToolResult::success(vec![
                    text(format!("Hello, {name}!")),
                ])))
            }
            "slow_compute" if declared => seconds(req, MAX_TASK_SECONDS).and_then(|secs| {
                let label = string_argument(req, "label", "slow_compute");
                self.spawn(move |context| Box::pin(slow_compute(context, secs, label)))
            }),
            // Handled in the call (`sync_slow_compute`).
            "slow_compute" => return None,
            "failing_job" | "test_tool_with_task" if !declared => Err(tasks_required()),
            "failing_job" => self.spawn(|_| {
                Box::pin(async {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    Ok(CallToolResult::error(vec![text(
                        "failing_job: the job ran and reported an error",
                    )]))
                })
            }),
            "protocol_error_job" if declared => self.spawn(|_| {
                Box::pin(async {
                    Err(TaskExit::Error(McpError::internal_error(
                        "protocol_error_job: the job failed before it produced a result",
                        None,
                    )))
                })
            }),
            "protocol_error_job" => Err(McpError::internal_error(
                "protocol_error_job: the job failed before it produced a result",
                None,
            )),
            "confirm_delete" | "multi_input" if !declared => Err(tasks_required()),
            "confirm_delete" => {
                let filename = string_argument(req, "filename", "the file");
                elicitation(
                    &format!("Delete {filename}?"),
                    json!({"confirm": {"type": "boolean"}}),
                )
                .and_then(|question| {
                    self.spawn(move |context| Box::pin(confirm_delete(context, filename, question)))
                })
            }
            "multi_input" => elicitation("Your name?", json!({"name": {"type": "string"}}))
                .and_then(|first| {
                    let second = elicitation("Go ahead?", json!({"confirm": {"type": "boolean"}}))?;
                    self.spawn(move |context| Box::pin(multi_input(context, first, second)))
                }),
            "test_tool_with_task" => self.with_task_after_input(req),
            _ => return None,
        };
        Some(answer)
    }

    /// `slow_compute` in a call that is not a task: its work done before the answer.
    pub(crate) async fn sync_slow_compute(
        req: &CallToolRequestParams,
    ) -> Result<CallToolResult, McpError> {
        let secs = seconds(req, MAX_SYNC_SECONDS)?;
        tokio::time::sleep(Duration::from_secs(secs)).await;
        let label = string_argument(req, "label", "slow_compute");
        Ok(CallToolResult::success(vec![text(format!(
            "{label}: computed in {secs} s"
        ))]))
    }

    /// `test_tool_with_task`: round one asks for the name (MRTR); the retry with the answer
    /// becomes a task.
    fn with_task_after_input(
        &self,
        req: &CallToolRequestParams,
    ) -> Result<CallToolResponse, McpError> {
        let answer = req
            .input_responses
            .as_ref()
            .and_then(|r| r.get("user_name"));
        let Some(answer) = answer else {
            let mut asked = InputRequests::new();
            asked.insert(
                "user_name".to_owned(),
                elicitation("Your name?", json!({"name": {"type": "string"}}))?,
            );
            return Ok(CallToolResponse::InputRequired(
                InputRequiredResult::from_input_requests(asked),
            ));
        };
        let name = accepted(answer)
            .and_then(|c| c.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("stranger")
            .to_owned();
        self.spawn(move |_| {
            Box::pin(async move {
                Ok(CallToolResult::success(vec![text(format!(
                    "Hello, {name}! (from a task)"
                ))]))
            })
        })
    }

    fn spawn(
        &self,
        work: impl FnOnce(TaskContext) -> TaskFuture,
    ) -> Result<CallToolResponse, McpError> {
        if self.manager.running_task_count() >= MAX_RUNNING_TASKS {
            return Err(McpError::internal_error(
                format!("the fixture already runs {MAX_RUNNING_TASKS} tasks: cancel some first"),
                None,
            ));
        }
        let options = TaskOptions::new()
            .with_ttl_ms(TASK_TTL_MS)
            .with_poll_interval_ms(POLL_INTERVAL_MS);
        Ok(CallToolResponse::Task(CreateTaskResult::new(
            self.manager.spawn(options, work),
        )))
    }

    pub(crate) fn get(&self, req: &GetTaskParams) -> Result<GetTaskResult, McpError> {
        self.manager.get_task(&req.task_id).map(GetTaskResult::new)
    }

    pub(crate) fn update(&self, req: UpdateTaskParams) -> Result<(), McpError> {
        self.manager.update_task(&req.task_id, req.input_responses)
    }

    pub(crate) fn cancel(&self, req: &CancelTaskParams) -> Result<(), McpError> {
        self.manager.cancel_task(&req.task_id)
    }
}

async fn slow_compute(
    context: TaskContext,
    secs: u64,
    label: String,
) -> Result<CallToolResult, TaskExit> {
    tokio::select! {
        () = tokio::time::sleep(Duration::from_secs(secs)) => Ok(CallToolResult::success(vec![
            text(format!("{label}: computed in {secs} s")),
        ])),
        () = context.cancelled() => Err(TaskExit::Cancelled),
    }
}

async fn confirm_delete(
    context: TaskContext,
    filename: String,
    question: InputRequest,
) -> Result<CallToolResult, TaskExit> {
    let answer = ask(&context, "confirm", question).await?;
    let confirmed = accepted(&answer)
        .and_then(|c| c.get("confirm"))
        .and_then(Value::as_bool)
        == Some(true);
    let outcome = if confirmed {
        format!("Deleted {filename}")
    } else {
        format!("Kept {filename}")
    };
    Ok(CallToolResult::success(vec![text(outcome)]))
}

async fn multi_input(
    context: TaskContext,
    first: InputRequest,
    second: InputRequest,
) -> Result<CallToolResult, TaskExit> {
    let (name, go) = tokio::try_join!(
        ask(&context, "name", first),
        ask(&context, "confirm", second)
    )?;
    let name = accepted(&name)
        .and_then(|c| c.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("stranger")
        .to_owned();
    let go = accepted(&go).is_some();
    Ok(CallToolResult::success(vec![text(format!(
        "{name} answered both questions (go ahead: {go})"
    ))]))
}
