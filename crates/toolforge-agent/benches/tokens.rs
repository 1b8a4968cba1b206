//! Tokens per task: the broker and prompt caching against neither, over a 100-tool pool.
//!
//! The real agent drives the real [`AnthropicModel`] against a wire-exact fake of the Anthropic
//! Messages API on loopback (`POST /v1/messages`, and `POST /v1/messages/count_tokens`, which the
//! cost guard asks when the byte bound of a call would not fit the ceiling, as with all 100
//! tools sent). The fake checks the headers, parses the
//! request body as the API does, and bills usage the way the provider does: input tokens are
//! bytes/4 of the tools, system and messages JSON (in the API's prefix order: tools, system,
//! messages); with `cache_control` breakpoints, the longest breakpoint prefix seen before is a
//! cache read, the rest up to the last breakpoint a cache write, and only what follows the last
//! breakpoint plain input. Its answers follow a script: turn 1 calls the tool(s) the task is
//! about (picked by name from the tools offered), turn 2 answers with the JSON final answer.
//!
//! Four configs run the same 10 tasks: baseline (broker off: `max_tools` 1000, so all 100 tools
//! are sent; caching off), broker only, caching only, and toolforge (the defaults: broker on,
//! caching on). Each config starts with an empty prompt cache, and its tasks run back to back
//! (well inside the cache's 5-minute lifetime). A second pass clears the cache before every
//! task (tasks more than 5 minutes apart).
//!
//! Run: `cargo bench -p toolforge-agent --bench tokens`. Prints the tables and writes the
//! figures to `target/bench-tokens.json`. It is a token count, not a timing: it takes seconds.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::future::BoxFuture;
use parking_lot::Mutex;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;
use toolforge_agent::{
    Agent, AgentConfig, MemorySessions, RunRequest, RunResult, ToolBackend, ToolFailure,
    ToolOutput, TraceSink,
};
use toolforge_llm::anthropic::{API_VERSION, AnthropicConfig, AnthropicModel};
use toolforge_llm::{PriceTable, Usage};
use toolforge_select::{Catalog, ServerEntry, Tool};

const API_KEY: &str = "bench-key-not-secret";
const MODEL: &str = "claude-sonnet-4-6";
/// Shortest prefix the API caches for Sonnet models; a breakpoint before it is ignored.
const MIN_CACHEABLE_TOKENS: u64 = 1024;
/// Billed-equivalent weights of cache writes and reads (Anthropic's 5-minute cache pricing).
const CACHE_WRITE_WEIGHT: f64 = 1.25;
const CACHE_READ_WEIGHT: f64 = 0.1;

// ---- the 100-tool pool ----

type ToolDef = (&'static str, &'static str, &'static [&'static str]);

/// Ten servers of ten tools each: name, description, parameters (the first half required).
const POOL: &[(&str, &[ToolDef])] = &[
    (
        "github",
        &[
            (
                "create_issue",
                "Create a new issue in a GitHub repository. Use it to report a bug or request a feature; labels and assignees are optional.",
                &["owner", "repo", "title", "body", "labels", "assignees"],
            ),
            (
                "list_issues",
                "List issues in a GitHub repository, newest first. Filter by state, label or assignee.",
                &["owner", "repo", "state", "labels", "per_page"],
            ),
            (
                "create_pull_request",
                "Open a pull request that merges one branch into another.",
                &["owner", "repo", "title", "head", "base", "body"],
            ),
            (
                "merge_pull_request",
                "Merge an open pull request. Fails if required checks are still running or the branch has conflicts.",
                &["owner", "repo", "pull_number", "merge_method"],
            ),
            (
                "list_commits",
                "List the commits on a branch of a repository, newest first.",
                &["owner", "repo", "branch", "per_page"],
            ),
            (
                "get_file_contents",
                "Get the contents of a file or directory in a GitHub repository at a given ref.",
                &["owner", "repo", "path", "ref"],
            ),
            (
                "search_code",
                "Search for code across GitHub repositories with GitHub's code search syntax.",
                &["query", "per_page"],
            ),
            (
                "add_issue_comment",
                "Add a comment to an existing issue or pull request.",
                &["owner", "repo", "issue_number", "body"],
            ),
            (
                "create_branch",
                "Create a new branch in a repository, starting from an existing branch.",
                &["owner", "repo", "branch", "from_branch"],
            ),
            (
                "list_workflow_runs",
                "List recent GitHub Actions workflow runs for a repository. Shows each run's status, conclusion and the commit it built.",
                &["owner", "repo", "workflow_id", "status"],
            ),
        ],
    ),
    (
        "filesystem",
        &[
            (
                "read_file",
                "Read the complete contents of a file from the local disk. Text files come back as text; binary files are base64-encoded.",
                &["path", "encoding"],
            ),
            (
                "write_file",
                "Create a new file or overwrite an existing one with the given content. Parent directories must already exist.",
                &["path", "content", "encoding"],
            ),
            (
                "list_directory",
                "List the files and subdirectories of a directory, each marked [FILE] or [DIR].",
                &["path", "include_hidden"],
            ),
            (
                "create_directory",
                "Create a directory, including any missing parent directories. Succeeds silently if it already exists.",
                &["path", "mode"],
            ),
            (
                "move_file",
                "Move or rename a file or directory. Fails if the destination already exists.",
                &["source", "destination"],
            ),
            (
                "search_files",
                "Recursively search for files whose names match a glob pattern, starting at a directory.",
                &["path", "pattern", "exclude_patterns"],
            ),
            (
                "get_file_info",
                "Get metadata about a file or directory: size, timestamps, permissions and type.",
                &["path", "follow_symlinks"],
            ),
            (
                "edit_file",
                "Make line-based edits to a text file. Each edit replaces an exact text sequence with new text, and the result is shown as a git-style diff.",
                &["path", "old_text", "new_text", "dry_run"],
            ),
            (
                "delete_file",
                "Delete a file from the disk. Directories are refused.",
                &["path", "dry_run"],
            ),
            (
                "directory_tree",
                "Get a recursive tree of files and directories as JSON, down to a maximum depth.",
                &["path", "max_depth"],
            ),
        ],
    ),
    (
        "postgres",
        &[
            (
                "run_sql_query",
                "Run a read-only SQL query against the Postgres database and return the rows as JSON. Statements that write are rejected.",
                &["sql", "params", "limit"],
            ),
            (
                "list_tables",
                "List the tables of a schema in the Postgres database, with their estimated row counts.",
                &["schema", "include_views"],
            ),
            (
                "describe_table",
                "Describe a table: its columns, types, defaults, indexes and foreign keys.",
                &["schema", "table"],
            ),
            (
                "explain_query",
                "Show the plan Postgres would use for a SQL statement, optionally running it with EXPLAIN ANALYZE.",
                &["sql", "analyze"],
            ),
            (
                "list_slow_queries",
                "List the slowest statements recorded by pg_stat_statements, ordered by mean execution time.",
                &["limit", "min_calls"],
            ),
            (
                "get_table_size",
                "Report the on-disk size of a table and of its indexes.",
                &["schema", "table"],
            ),
            (
                "list_active_connections",
                "List the open database connections with their state, current query and wait events.",
                &["database", "state"],
            ),
            (
                "create_index",
                "Create an index on a table's columns. It is built CONCURRENTLY, so writes are not blocked.",
                &["schema", "table", "columns", "unique"],
            ),
            (
                "vacuum_table",
                "Run VACUUM, and optionally ANALYZE, on a table to reclaim space and refresh the planner's statistics.",
                &["schema", "table", "analyze"],
            ),
            (
                "list_locks",
                "List the locks held or awaited right now, and which sessions block which.",
                &["database", "blocked_only"],
            ),
        ],
    ),
    (
        "slack",
        &[
            (
                "slack_post_message",
                "Post a message to a Slack channel as the bot. Supports Slack's mrkdwn formatting.",
                &["channel", "text", "thread_ts"],
            ),
            (
                "slack_list_channels",
                "List the public channels of the Slack workspace with their topic and member count.",
                &["limit", "cursor"],
            ),
            (
                "slack_get_channel_history",
                "Get recent messages from a Slack channel, newest first.",
                &["channel", "limit", "oldest"],
            ),
            (
                "slack_reply_to_thread",
                "Reply to a message thread in a Slack channel.",
                &["channel", "thread_ts", "text"],
            ),
            (
                "slack_add_reaction",
                "Add an emoji reaction to a Slack message.",
                &["channel", "timestamp", "reaction"],
            ),
            (
                "slack_get_users",
                "List the users of the Slack workspace with their display names and time zones.",
                &["limit", "cursor"],
            ),
            (
                "slack_get_user_profile",
                "Get a Slack user's profile: real name, title, status, email and time zone.",
                &["user_id", "include_labels"],
            ),
            (
                "slack_search_messages",
                "Search Slack messages in every channel the bot can read.",
                &["query", "count", "sort"],
            ),
            (
                "slack_set_channel_topic",
                "Set the topic shown at the top of a Slack channel.",
                &["channel", "topic"],
            ),
            (
                "slack_schedule_message",
                "Schedule a message to be posted to a Slack channel at a later time.",
                &["channel", "text", "post_at"],
            ),
        ],
    ),
    (
        "jira",
        &[
            (
                "jira_create_issue",
                "Create a Jira issue in a project. Choose the issue type (Bug, Task or Story) and optionally a priority and an assignee.",
                &[
                    "project_key",
                    "summary",
                    "issue_type",
                    "description",
                    "priority",
                    "assignee",
                ],
            ),
            (
                "jira_get_issue",
                "Get a Jira issue by key, with its status, assignee, comments and linked issues.",
                &["issue_key", "fields"],
            ),
            (
                "jira_search",
                "Search Jira issues with a JQL query.",
                &["jql", "max_results", "fields"],
            ),
            (
                "jira_transition_issue",
                "Move a Jira issue to another status of its workflow, for example from In Progress to Done.",
                &["issue_key", "transition", "comment"],
            ),
            (
                "jira_add_comment",
                "Add a comment to a Jira issue.",
                &["issue_key", "body"],
            ),
            (
                "jira_assign_issue",
                "Assign a Jira issue to a user, or leave it unassigned.",
                &["issue_key", "assignee"],
            ),
            (
                "jira_list_sprints",
                "List the sprints of a Jira board: active, future and closed.",
                &["board_id", "state"],
            ),
            (
                "jira_get_sprint_issues",
                "List the issues in a sprint with their status and story points.",
                &["sprint_id", "max_results"],
            ),
            (
                "jira_log_work",
                "Log time spent on a Jira issue.",
                &["issue_key", "time_spent", "comment", "started"],
            ),
            (
                "jira_link_issues",
                "Link two Jira issues, for example one blocks the other.",
                &["inward_issue", "outward_issue", "link_type"],
            ),
        ],
    ),
    (
        "google_calendar",
        &[
            (
                "calendar_list_events",
                "List the events on a Google Calendar between two times. Recurring events are expanded into single instances.",
                &["calendar_id", "time_min", "time_max", "max_results"],
            ),
            (
                "calendar_create_event",
                "Create an event on a Google Calendar and invite attendees by email.",
                &[
                    "calendar_id",
                    "summary",
                    "start",
                    "end",
                    "attendees",
                    "location",
                ],
            ),
            (
                "calendar_update_event",
                "Change the time, title or location of an existing calendar event.",
                &["calendar_id", "event_id", "summary", "start", "end"],
            ),
            (
                "calendar_delete_event",
                "Delete an event from a calendar and notify its attendees.",
                &["calendar_id", "event_id", "send_updates"],
            ),
            (
                "calendar_find_free_time",
                "Find time slots when all the given people are free, within working hours.",
                &["attendees", "time_min", "time_max", "duration_minutes"],
            ),
            (
                "calendar_list_calendars",
                "List the calendars the user can see, with their ids and the user's access role.",
                &["min_access_role", "show_hidden"],
            ),
            (
                "calendar_respond_to_event",
                "Accept, decline or tentatively accept an event invitation.",
                &["calendar_id", "event_id", "response"],
            ),
            (
                "calendar_get_event",
                "Get one calendar event with its attendees, conference link and description.",
                &["calendar_id", "event_id"],
            ),
            (
                "calendar_quick_add",
                "Create an event from a plain sentence such as 'Lunch with Sam tomorrow at noon'.",
                &["calendar_id", "text"],
            ),
            (
                "calendar_set_out_of_office",
                "Block time as out of office. New invitations during it are declined automatically.",
                &["start", "end", "message"],
            ),
        ],
    ),
    (
        "gmail",
        &[
            (
                "gmail_search_emails",
                "Search the mailbox with Gmail's query syntax (from:, subject:, has:attachment, newer_than:) and return the matching messages.",
                &["query", "max_results"],
            ),
            (
                "gmail_read_email",
                "Read one email: its headers, plain-text body and the list of attachments.",
                &["message_id", "format"],
            ),
            (
                "gmail_send_email",
                "Send an email. Recipients, subject and a plain-text or HTML body are required.",
                &["to", "subject", "body", "cc", "bcc"],
            ),
            (
                "gmail_create_draft",
                "Save an email as a draft without sending it, optionally as a reply in an existing thread.",
                &["to", "subject", "body", "thread_id"],
            ),
            (
                "gmail_reply_to_email",
                "Reply to an email and keep the reply in the same thread.",
                &["message_id", "body", "reply_all"],
            ),
            (
                "gmail_list_labels",
                "List the mailbox's labels, both system and user-defined.",
                &["include_system", "include_counts"],
            ),
            (
                "gmail_modify_labels",
                "Add or remove labels on a message, for example to archive it or mark it as read.",
                &["message_id", "add_labels", "remove_labels"],
            ),
            (
                "gmail_get_attachment",
                "Download an attachment of an email, base64-encoded.",
                &["message_id", "attachment_id"],
            ),
            (
                "gmail_create_filter",
                "Create a filter that labels, archives or forwards incoming mail that matches criteria.",
                &["from", "subject", "add_labels", "forward_to"],
            ),
            (
                "gmail_trash_email",
                "Move an email to the trash, or delete it for good.",
                &["message_id", "permanent"],
            ),
        ],
    ),
    (
        "stripe",
        &[
            (
                "stripe_create_customer",
                "Create a Stripe customer with an email address and a name.",
                &["email", "name", "description", "metadata"],
            ),
            (
                "stripe_list_customers",
                "List Stripe customers, optionally only those with a given email address.",
                &["email", "limit"],
            ),
            (
                "stripe_create_payment_link",
                "Create a payment link for a product's price that can be shared with a customer.",
                &["price_id", "quantity"],
            ),
            (
                "stripe_list_charges",
                "List recent charges, newest first, optionally for one customer.",
                &["customer_id", "limit", "created_after"],
            ),
            (
                "stripe_create_refund",
                "Refund a charge, fully or partially. The money goes back to the original payment method.",
                &["charge_id", "amount", "reason"],
            ),
            (
                "stripe_create_invoice",
                "Create a draft invoice for a customer from their pending invoice items.",
                &["customer_id", "days_until_due", "description"],
            ),
            (
                "stripe_list_subscriptions",
                "List a customer's subscriptions with their status and current billing period.",
                &["customer_id", "status", "limit"],
            ),
            (
                "stripe_cancel_subscription",
                "Cancel a subscription now, or at the end of the current billing period.",
                &["subscription_id", "at_period_end"],
            ),
            (
                "stripe_retrieve_balance",
                "Get the Stripe account balance: the available and pending amounts per currency.",
                &["currency", "include_pending"],
            ),
            (
                "stripe_list_disputes",
                "List payment disputes (chargebacks) and the deadlines for submitting evidence.",
                &["status", "limit"],
            ),
        ],
    ),
    (
        "kubernetes",
        &[
            (
                "k8s_list_pods",
                "List the pods in a Kubernetes namespace with their phase, restart count and node.",
                &["namespace", "label_selector", "field_selector"],
            ),
            (
                "k8s_get_pod_logs",
                "Get the logs of a pod's container, optionally those of the previous, crashed instance.",
                &["namespace", "pod", "container", "tail_lines", "previous"],
            ),
            (
                "k8s_describe_resource",
                "Describe a Kubernetes resource (pod, deployment, service or node) with its recent events.",
                &["kind", "name", "namespace"],
            ),
            (
                "k8s_scale_deployment",
                "Scale a deployment to a number of replicas.",
                &["namespace", "deployment", "replicas"],
            ),
            (
                "k8s_rollout_restart",
                "Restart a deployment's pods with a rolling restart.",
                &["namespace", "deployment"],
            ),
            (
                "k8s_rollout_undo",
                "Roll a deployment back to its previous revision, or to a given one.",
                &["namespace", "deployment", "to_revision"],
            ),
            (
                "k8s_apply_manifest",
                "Apply a YAML manifest to the cluster, creating or updating the resources it describes.",
                &["manifest", "namespace", "dry_run"],
            ),
            (
                "k8s_list_events",
                "List recent cluster events in a namespace, warnings first.",
                &["namespace", "field_selector", "limit"],
            ),
            (
                "k8s_get_node_usage",
                "Show CPU and memory usage per node, from the metrics server.",
                &["label_selector", "sort_by"],
            ),
            (
                "k8s_exec_command",
                "Run a command inside a pod's container and return its output.",
                &["namespace", "pod", "container", "command"],
            ),
        ],
    ),
    (
        "notion",
        &[
            (
                "notion_search",
                "Search Notion pages and databases by title.",
                &["query", "filter_type", "page_size"],
            ),
            (
                "notion_get_page",
                "Get a Notion page's properties and its content as Markdown.",
                &["page_id", "include_children"],
            ),
            (
                "notion_create_page",
                "Create a new Notion page under a parent page or in a database, with Markdown content.",
                &["parent_id", "title", "content", "icon"],
            ),
            (
                "notion_update_page",
                "Update a Notion page's title or properties, or archive it.",
                &["page_id", "title", "properties", "archived"],
            ),
            (
                "notion_append_blocks",
                "Append Markdown content to the end of an existing Notion page.",
                &["page_id", "content"],
            ),
            (
                "notion_query_database",
                "Query a Notion database with filters and sorts and return the matching rows.",
                &["database_id", "filter", "sorts", "page_size"],
            ),
            (
                "notion_create_database_row",
                "Add a row to a Notion database with the given property values.",
                &["database_id", "properties"],
            ),
            (
                "notion_list_comments",
                "List the comments on a Notion page or block.",
                &["block_id", "page_size"],
            ),
            (
                "notion_add_comment",
                "Add a comment to a Notion page, or start a discussion on a block.",
                &["page_id", "text"],
            ),
            (
                "notion_list_users",
                "List the members and guests of the Notion workspace.",
                &["page_size", "cursor"],
            ),
        ],
    ),
];

/// One parameter's JSON schema, by name.
fn param(name: &str) -> Value {
    let (kind, description) = match name {
        "owner" => ("string", "Repository owner: a user or organisation login."),
        "repo" => ("string", "Repository name, without the owner."),
        "title" => ("string", "Title."),
        "body" => ("string", "Body text, in Markdown."),
        "labels" | "add_labels" => ("array", "Labels to apply."),
        "remove_labels" => ("array", "Labels to remove."),
        "assignees" => ("array", "Logins of the users to assign."),
        "state" => ("string", "Only items in this state."),
        "per_page" | "limit" | "max_results" | "page_size" | "count" => {
            ("integer", "Most results to return (1-100).")
        }
        "head" => ("string", "The branch that holds the changes."),
        "base" => ("string", "The branch the changes go into."),
        "pull_number" | "issue_number" => ("integer", "The issue or pull request number."),
        "merge_method" => ("merge_method", "How to merge."),
        "branch" => ("string", "Branch name."),
        "from_branch" => (
            "string",
            "Branch to start from (default: the default branch).",
        ),
        "path" => ("string", "Path of the file or directory."),
        "ref" => (
            "string",
            "Branch, tag or commit SHA (default: the default branch).",
        ),
        "query" => ("string", "The search query."),
        "workflow_id" => ("string", "Workflow file name or id."),
        "status" => ("string", "Only items with this status."),
        "encoding" => ("encoding", "Text encoding of the content."),
        "content" => ("string", "The content, in Markdown or plain text."),
        "include_hidden" => ("boolean", "Include entries whose names start with a dot."),
        "mode" => ("string", "Permissions in octal, e.g. 0755."),
        "source" => ("string", "Current path."),
        "destination" => ("string", "New path."),
        "pattern" => ("string", "Glob pattern, e.g. **/*.yaml."),
        "exclude_patterns" => ("array", "Glob patterns to skip."),
        "follow_symlinks" => ("boolean", "Describe the target of a symbolic link."),
        "old_text" => ("string", "Exact text to replace."),
        "new_text" => ("string", "Replacement text."),
        "dry_run" => (
            "boolean",
            "Show what would change without changing anything.",
        ),
        "max_depth" => ("integer", "Deepest level to descend to."),
        "sql" => ("string", "The SQL statement."),
        "params" => ("array", "Values for $1, $2, ... placeholders."),
        "schema" => ("string", "Schema name (default: public)."),
        "include_views" => ("boolean", "Also list views."),
        "table" => ("string", "Table name."),
        "analyze" => ("boolean", "Also run ANALYZE."),
        "min_calls" => ("integer", "Skip statements called fewer times than this."),
        "database" => ("string", "Database name (default: the connected one)."),
        "blocked_only" => ("boolean", "Only locks that someone waits on."),
        "columns" => ("array", "Column names, in index order."),
        "unique" => ("boolean", "Make it a unique index."),
        "channel" => ("string", "Channel id or #name."),
        "text" => ("string", "The text."),
        "thread_ts" => (
            "string",
            "Timestamp of the parent message, to post in its thread.",
        ),
        "cursor" => ("string", "Pagination cursor from the previous page."),
        "oldest" => ("string", "Only messages after this Unix timestamp."),
        "timestamp" => ("string", "Timestamp of the message."),
        "reaction" => ("string", "Emoji name without colons, e.g. thumbsup."),
        "user_id" => ("string", "Slack user id, e.g. U024BE7LH."),
        "include_labels" => ("boolean", "Include the labels of custom profile fields."),
        "sort" => ("sort", "Result order."),
        "topic" => ("string", "The new topic."),
        "post_at" => ("string", "When to post, as an RFC 3339 time."),
        "project_key" => ("string", "Jira project key, e.g. PAY."),
        "summary" => ("string", "One-line summary or title."),
        "issue_type" => ("issue_type", "Jira issue type."),
        "description" => ("string", "Longer description."),
        "priority" => ("priority", "Priority."),
        "assignee" => (
            "string",
            "Account id or email of the user; empty to unassign.",
        ),
        "issue_key" => ("string", "Jira issue key, e.g. PAY-42."),
        "fields" => ("array", "Fields to return (default: all)."),
        "jql" => ("string", "JQL query, e.g. project = PAY AND status = Open."),
        "transition" => (
            "string",
            "Name or id of the workflow transition, e.g. Done.",
        ),
        "comment" => ("string", "Comment to add with the change."),
        "board_id" => ("integer", "Jira board id."),
        "sprint_id" => ("integer", "Jira sprint id."),
        "time_spent" => ("string", "Time spent in Jira notation, e.g. 1h 30m."),
        "started" => ("string", "When the work started, as an RFC 3339 time."),
        "inward_issue" | "outward_issue" => ("string", "Jira issue key."),
        "link_type" => ("link_type", "Kind of link."),
        "calendar_id" => (
            "string",
            "Calendar id; primary for the user's main calendar.",
        ),
        "time_min" => ("string", "Start of the window, as an RFC 3339 time."),
        "time_max" => ("string", "End of the window, as an RFC 3339 time."),
        "start" => ("string", "Start, as an RFC 3339 time."),
        "end" => ("string", "End, as an RFC 3339 time."),
        "attendees" => ("array", "Email addresses of the attendees."),
        "location" => ("string", "Where it takes place."),
        "event_id" => ("string", "Calendar event id."),
        "send_updates" => ("send_updates", "Who to notify."),
        "duration_minutes" => ("integer", "Length of the slot in minutes."),
        "min_access_role" => (
            "string",
            "Only calendars where the user has at least this role.",
        ),
        "show_hidden" => ("boolean", "Include calendars hidden from the list."),
        "response" => ("response", "The answer to the invitation."),
        "message" => ("string", "Message shown to people who invite you."),
        "message_id" => ("string", "Gmail message id."),
        "format" => ("string", "full, metadata or minimal."),
        "to" => ("string", "Recipient addresses, comma-separated."),
        "subject" => ("string", "Subject line."),
        "cc" | "bcc" => ("array", "Further recipient addresses."),
        "thread_id" => ("string", "Gmail thread id, to reply in that thread."),
        "reply_all" => ("boolean", "Reply to every recipient, not only the sender."),
        "include_system" => ("boolean", "Include system labels such as INBOX and SPAM."),
        "include_counts" => ("boolean", "Include message and unread counts."),
        "attachment_id" => ("string", "Attachment id from the message."),
        "from" => ("string", "Sender address or domain to match."),
        "forward_to" => ("string", "Verified address to forward matching mail to."),
        "permanent" => ("boolean", "Delete for good instead of moving to the trash."),
        "email" => ("string", "Email address."),
        "name" => ("string", "Name."),
        "metadata" => ("object", "Key-value pairs to store with the object."),
        "price_id" => ("string", "Stripe price id, e.g. price_1Mo..."),
        "quantity" => ("integer", "How many units."),
        "customer_id" => ("string", "Stripe customer id, e.g. cus_9s6XKz..."),
        "created_after" => ("integer", "Only objects created after this Unix time."),
        "charge_id" => ("string", "Stripe charge id, e.g. ch_3Mt..."),
        "amount" => (
            "integer",
            "Amount in the smallest currency unit (cents); the full amount when left out.",
        ),
        "reason" => ("reason", "Why the refund is made."),
        "days_until_due" => ("integer", "Days the customer has to pay."),
        "subscription_id" => ("string", "Stripe subscription id."),
        "at_period_end" => (
            "boolean",
            "Cancel at the end of the billing period, not now.",
        ),
        "currency" => ("string", "Three-letter ISO currency code, lower case."),
        "include_pending" => ("boolean", "Include pending amounts."),
        "namespace" => ("string", "Kubernetes namespace."),
        "label_selector" => ("string", "Label selector, e.g. app=api,tier=backend."),
        "field_selector" => ("string", "Field selector, e.g. status.phase=Running."),
        "pod" => ("string", "Pod name."),
        "container" => (
            "string",
            "Container name (default: the pod's only container).",
        ),
        "tail_lines" => ("integer", "Only this many lines from the end."),
        "previous" => ("boolean", "Logs of the previous, terminated instance."),
        "kind" => ("kind", "Resource kind."),
        "deployment" => ("string", "Deployment name."),
        "replicas" => ("integer", "Number of replicas wanted."),
        "to_revision" => (
            "integer",
            "Revision to roll back to (default: the previous one).",
        ),
        "manifest" => ("string", "The YAML manifest."),
        "sort_by" => ("sort_by", "Sort nodes by this resource."),
        "command" => ("array", "The command and its arguments."),
        "filter_type" => ("filter_type", "Only pages or only databases."),
        "page_id" => ("string", "Notion page id."),
        "include_children" => ("boolean", "Also fetch nested blocks."),
        "parent_id" => ("string", "Id of the parent page or database."),
        "icon" => ("string", "An emoji for the page icon."),
        "properties" | "filter" => ("object", "Notion property values or filter, as JSON."),
        "archived" => ("boolean", "Archive the page."),
        "database_id" => ("string", "Notion database id."),
        "sorts" => ("array", "Sort criteria, as Notion sort objects."),
        "block_id" => ("string", "Notion page or block id."),
        other => panic!("no schema for parameter {other}"),
    };
    let choices: &[&str] = match kind {
        "merge_method" => &["merge", "squash", "rebase"],
        "encoding" => &["utf-8", "base64"],
        "sort" => &["score", "timestamp"],
        "issue_type" => &["Bug", "Task", "Story"],
        "priority" => &["Highest", "High", "Medium", "Low"],
        "link_type" => &["Blocks", "Relates", "Duplicates"],
        "send_updates" => &["all", "externalOnly", "none"],
        "response" => &["accepted", "declined", "tentative"],
        "reason" => &["duplicate", "fraudulent", "requested_by_customer"],
        "kind" => &["pod", "deployment", "service", "node"],
        "sort_by" => &["cpu", "memory"],
        "filter_type" => &["page", "database"],
        _ => &[],
    };
    match kind {
        "string" | "integer" | "boolean" | "object" => {
            json!({"type": kind, "description": description})
        }
        "array" => {
            json!({"type": "array", "items": {"type": "string"}, "description": description})
        }
        _ => json!({"type": "string", "enum": choices, "description": description}),
    }
}

fn tool_schema(params: &[&str]) -> Value {
    let properties: Map<String, Value> =
        params.iter().map(|p| ((*p).to_owned(), param(p))).collect();
    let required = &params[..params.len().div_ceil(2)];
    json!({"type": "object", "properties": properties, "required": required})
}

fn pool() -> Catalog {
    let servers = POOL
        .iter()
        .map(|(server, tools)| ServerEntry {
            name: (*server).to_owned(),
            tags: Vec::new(),
            aliases: Vec::new(),
            tools: tools
                .iter()
                .map(|(name, description, params)| {
                    let def = json!({
                        "name": name,
                        "description": description,
                        "inputSchema": tool_schema(params),
                    });
                    let Value::Object(def) = def else {
                        unreachable!()
                    };
                    Tool::from_mcp(server, def, &[]).expect("valid tool")
                })
                .collect(),
        })
        .collect();
    Catalog::new(servers, Vec::new()).expect("unique server names")
}

// ---- the tasks ----

struct Task {
    message: &'static str,
    /// The tools the task is about, with the arguments the scripted model gives them.
    calls: &'static [(&'static str, &'static str)],
}

const TASKS: &[Task] = &[
    Task {
        message: "Open a GitHub issue in acme/webshop titled 'Checkout button does nothing on Safari'.",
        calls: &[(
            "create_issue",
            r#"{"owner":"acme","repo":"webshop","title":"Checkout button does nothing on Safari"}"#,
        )],
    },
    Task {
        message: "Tell the #deploys channel on Slack that release 2.14 is live.",
        calls: &[(
            "slack_post_message",
            r##"{"channel":"#deploys","text":"Release 2.14 is live."}"##,
        )],
    },
    Task {
        message: "What meetings are on my calendar tomorrow between 9am and 5pm?",
        calls: &[(
            "calendar_list_events",
            r#"{"calendar_id":"primary","time_min":"2026-11-24T09:00:00Z","time_max":"2026-11-24T17:00:00Z"}"#,
        )],
    },
    Task {
        message: "Refund the Stripe charge ch_3PqK8 in full, the customer asked for it.",
        calls: &[(
            "stripe_create_refund",
            r#"{"charge_id":"ch_3PqK8","reason":"requested_by_customer"}"#,
        )],
    },
    Task {
        message: "Which pods keep crashing in the payments namespace, and what do their logs say?",
        calls: &[
            ("k8s_list_pods", r#"{"namespace":"payments"}"#),
            (
                "k8s_get_pod_logs",
                r#"{"namespace":"payments","pod":"payments-api-7d9f8","container":"api","previous":true}"#,
            ),
        ],
    },
    Task {
        message: "Run a SQL query on the database: how many orders are there per status?",
        calls: &[(
            "run_sql_query",
            r#"{"sql":"SELECT status, count(*) FROM orders GROUP BY status"}"#,
        )],
    },
    Task {
        message: "Read the file config/app.yaml and list what else is in the config directory.",
        calls: &[
            ("read_file", r#"{"path":"config/app.yaml"}"#),
            ("list_directory", r#"{"path":"config"}"#),
        ],
    },
    Task {
        message: "Find the email from our accountant about the Q3 invoice and draft a reply saying we will pay on Friday.",
        calls: &[
            (
                "gmail_search_emails",
                r#"{"query":"from:accountant subject:invoice Q3"}"#,
            ),
            (
                "gmail_create_draft",
                r#"{"to":"accountant@example.com","subject":"Re: Q3 invoice","body":"Thanks, we will pay on Friday."}"#,
            ),
        ],
    },
    Task {
        message: "Move the Jira ticket PAY-42 to Done.",
        calls: &[(
            "jira_transition_issue",
            r#"{"issue_key":"PAY-42","transition":"Done"}"#,
        )],
    },
    Task {
        message: "Write a Notion page in the engineering wiki that describes the new on-call rota.",
        calls: &[(
            "notion_create_page",
            r#"{"parent_id":"engineering-wiki","title":"On-call rota","content":"Each week one engineer is on call, Monday to Monday; handover is at 10:00."}"#,
        )],
    },
];

fn answer_for(task: usize) -> String {
    let tools: Vec<&str> = TASKS[task].calls.iter().map(|(t, _)| *t).collect();
    format!("Done with {}.", tools.join(" and "))
}

// ---- the tool backend ----

struct Backend {
    catalog: Catalog,
    calls: AtomicU64,
}

impl ToolBackend for Backend {
    fn catalog(&self) -> Catalog {
        self.catalog.clone()
    }
    fn unavailable(&self) -> Vec<String> {
        Vec::new()
    }
    fn call<'a>(
        &'a self,
        server: &'a str,
        tool: &'a str,
        _arguments: Map<String, Value>,
        _cancel: Option<CancellationToken>,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolFailure>> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Box::pin(async move {
            Ok(ToolOutput {
                text: format!("{server}/{tool}: ok, request 4711 completed."),
                structured: None,
                is_error: false,
                attempts: 1,
                retry_reason: None,
            })
        })
    }
}

// ---- the fake Anthropic Messages API ----

/// One request the fake answered.
#[derive(Debug, Clone)]
struct Exchange {
    task: usize,
    tools_offered: usize,
    max_tokens: u64,
    usage: Usage,
}

#[derive(Default)]
struct Fake {
    /// Hashes of the cached prefixes.
    cache: Mutex<HashSet<[u8; 32]>>,
    log: Mutex<Vec<Exchange>>,
    /// `task: tool` the script wanted but the request did not offer.
    misses: Mutex<Vec<String>>,
    seq: AtomicU64,
    /// `count_tokens` requests answered.
    counts: AtomicU64,
}

impl Fake {
    fn clear_cache(&self) {
        self.cache.lock().clear();
    }
}

fn api_error(status: StatusCode, kind: &str, message: impl Into<String>) -> Response {
    let body = json!({"type": "error", "error": {"type": kind, "message": message.into()}});
    (status, axum::Json(body)).into_response()
}

fn invalid(message: impl Into<String>) -> Response {
    api_error(StatusCode::BAD_REQUEST, "invalid_request_error", message)
}

/// One unit of the prompt prefix (a tool, a system block, a message content block): its bytes
/// as JSON (without `cache_control`), its identity for the prefix hash, and whether it carries a
/// breakpoint.
struct Unit {
    bytes: u64,
    key: String,
    breakpoint: bool,
}

/// Checks a `cache_control` value; returns whether one is present.
fn cache_control(block: &Value) -> Result<bool, String> {
    match block.get("cache_control") {
        None | Some(Value::Null) => Ok(false),
        Some(cc) if cc.get("type").and_then(Value::as_str) == Some("ephemeral") => Ok(true),
        Some(cc) => Err(format!(
            "cache_control: expected {{\"type\": \"ephemeral\"}}, got {cc}"
        )),
    }
}

fn unit(kind: &str, block: &Value) -> Result<Unit, String> {
    let breakpoint = cache_control(block)?;
    let mut stripped = block.clone();
    if let Some(o) = stripped.as_object_mut() {
        o.remove("cache_control");
    }
    let text = stripped.to_string();
    Ok(Unit {
        bytes: text.len() as u64,
        key: format!("{kind}:{text}"),
        breakpoint,
    })
}

fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A message's content as blocks (a plain string is one text block).
fn blocks(message: &Value) -> Result<Vec<Value>, String> {
    match message.get("content") {
        Some(Value::String(s)) => Ok(vec![json!({"type": "text", "text": s})]),
        Some(Value::Array(a)) if !a.is_empty() => Ok(a.clone()),
        _ => Err("messages: content must be a string or a non-empty array of blocks".into()),
    }
}

/// The parsed request: the units in prefix order, the tool names, the messages.
struct Parsed {
    model: String,
    max_tokens: u64,
    units: Vec<Unit>,
    tools: Vec<(String, Value)>,
    messages: Vec<(String, Vec<Value>)>,
}

fn parse(body: &Value) -> Result<Parsed, String> {
    let obj = body.as_object().ok_or("the body must be a JSON object")?;
    if let Some(k) = obj.keys().find(|k| {
        ![
            "model",
            "max_tokens",
            "system",
            "tools",
            "messages",
            "stream",
            "tool_choice",
            "temperature",
            "metadata",
            "stop_sequences",
        ]
        .contains(&k.as_str())
    }) {
        return Err(format!("{k}: Extra inputs are not permitted"));
    }
    let model = obj
        .get("model")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .ok_or("model: Field required")?
        .to_owned();
    let max_tokens = obj
        .get("max_tokens")
        .and_then(Value::as_u64)
        .filter(|n| *n >= 1)
        .ok_or("max_tokens: Field required (a positive integer)")?;
    if obj.get("stream").and_then(Value::as_bool) == Some(true) {
        return Err("stream: this fake answers plain JSON only".into());
    }
    let mut units = Vec::new();
    let mut tools = Vec::new();
    if let Some(list) = obj.get("tools") {
        let list = list.as_array().ok_or("tools: must be an array")?;
        for (i, t) in list.iter().enumerate() {
            let name = t
                .get("name")
                .and_then(Value::as_str)
                .filter(|n| valid_tool_name(n))
                .ok_or(format!(
                    "tools.{i}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
                ))?;
            if tools.iter().any(|(n, _)| n == name) {
                return Err(format!("tools: Tool names must be unique ({name})"));
            }
            let schema = t
                .get("input_schema")
                .filter(|s| s.get("type").and_then(Value::as_str) == Some("object"))
                .ok_or(format!(
                    "tools.{i}.input_schema: an object schema is required"
                ))?;
            if t.get("description").is_some_and(|d| !d.is_string()) {
                return Err(format!("tools.{i}.description: must be a string"));
            }
            tools.push((name.to_owned(), schema.clone()));
            units.push(unit("tool", t)?);
        }
    }
    match obj.get("system") {
        None => {}
        Some(Value::String(s)) => units.push(unit("system", &json!({"type": "text", "text": s}))?),
        Some(Value::Array(list)) => {
            for (i, b) in list.iter().enumerate() {
                if b.get("type").and_then(Value::as_str) != Some("text")
                    || !b.get("text").is_some_and(Value::is_string)
                {
                    return Err(format!("system.{i}: expected a text block"));
                }
                units.push(unit("system", b)?);
            }
        }
        Some(_) => return Err("system: must be a string or an array of text blocks".into()),
    }
    let list = obj
        .get("messages")
        .and_then(Value::as_array)
        .filter(|l| !l.is_empty())
        .ok_or("messages: Field required (a non-empty array)")?;
    let mut messages: Vec<(String, Vec<Value>)> = Vec::new();
    for (i, m) in list.iter().enumerate() {
        let role = m
            .get("role")
            .and_then(Value::as_str)
            .filter(|r| ["user", "assistant"].contains(r))
            .ok_or(format!("messages.{i}.role: must be user or assistant"))?;
        if i == 0 && role != "user" {
            return Err("messages: the first message must use the user role".into());
        }
        let content = blocks(m).map_err(|e| format!("messages.{i}: {e}"))?;
        for b in &content {
            let kind = b.get("type").and_then(Value::as_str).unwrap_or_default();
            let ok = match (role, kind) {
                (_, "text") => b
                    .get("text")
                    .and_then(Value::as_str)
                    .is_some_and(|t| !t.is_empty()),
                ("assistant", "tool_use") => {
                    b.get("id").is_some_and(Value::is_string)
                        && b.get("name").is_some_and(Value::is_string)
                        && b.get("input").is_some_and(Value::is_object)
                }
                ("user", "tool_result") => b.get("tool_use_id").is_some_and(Value::is_string),
                _ => false,
            };
            if !ok {
                return Err(format!(
                    "messages.{i}: invalid {kind:?} block for role {role}: {b}"
                ));
            }
            units.push(unit(role, b)?);
        }
        messages.push((role.to_owned(), content));
    }
    // Every tool_use must be answered by a tool_result in the next message, and every
    // tool_result must answer a tool_use of the message before it.
    for (i, (role, content)) in messages.iter().enumerate() {
        let ids = |c: &[Value], kind: &str, field: &str| -> Vec<String> {
            c.iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some(kind))
                .filter_map(|b| b.get(field).and_then(Value::as_str).map(str::to_owned))
                .collect()
        };
        if role == "user" {
            let results = ids(content, "tool_result", "tool_use_id");
            let asked = if i > 0 {
                ids(&messages[i - 1].1, "tool_use", "id")
            } else {
                Vec::new()
            };
            if let Some(r) = results.iter().find(|r| !asked.contains(r)) {
                return Err(format!(
                    "messages.{i}: unexpected `tool_use_id` found in `tool_result` blocks: {r}"
                ));
            }
        } else if i + 1 < messages.len() {
            let answered = ids(&messages[i + 1].1, "tool_result", "tool_use_id");
            if let Some(u) = ids(content, "tool_use", "id")
                .iter()
                .find(|u| !answered.contains(u))
            {
                return Err(format!(
                    "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {u}"
                ));
            }
        }
    }
    if units.iter().filter(|u| u.breakpoint).count() > 4 {
        return Err("A maximum of 4 blocks with cache_control may be provided".into());
    }
    Ok(Parsed {
        model,
        max_tokens,
        units,
        tools,
        messages,
    })
}

/// Bills the request: input tokens are bytes/4; the longest breakpoint prefix seen before is
/// read from the cache, the rest up to the last breakpoint written, what follows is input.
fn meter(fake: &Fake, parsed: &Parsed) -> Usage {
    let mut cum = Vec::with_capacity(parsed.units.len());
    let mut bytes = 0;
    for u in &parsed.units {
        bytes += u.bytes;
        cum.push(bytes.div_ceil(4));
    }
    let total = cum.last().copied().unwrap_or(0);
    let mut hasher = Sha256::new();
    hasher.update(parsed.model.as_bytes());
    let mut points: Vec<(u64, [u8; 32])> = Vec::new();
    for (i, u) in parsed.units.iter().enumerate() {
        hasher.update((u.key.len() as u64).to_le_bytes());
        hasher.update(u.key.as_bytes());
        if u.breakpoint && cum[i] >= MIN_CACHEABLE_TOKENS {
            points.push((cum[i], hasher.clone().finalize().into()));
        }
    }
    let Some(&(last, _)) = points.last() else {
        return Usage {
            input_tokens: total,
            ..Usage::default()
        };
    };
    let mut cache = fake.cache.lock();
    let read = points
        .iter()
        .rev()
        .find(|(_, h)| cache.contains(h))
        .map_or(0, |(t, _)| *t);
    for (_, h) in &points {
        cache.insert(*h);
    }
    Usage {
        input_tokens: total - last,
        cache_creation_input_tokens: last - read,
        cache_read_input_tokens: read,
        output_tokens: 0,
    }
}

/// Arguments for `schema`: the script's, plus a value for every other required property.
fn arguments(schema: &Value, given: &str) -> Value {
    let mut args: Map<String, Value> = serde_json::from_str(given).expect("task arguments");
    let props = schema.get("properties").and_then(Value::as_object);
    for req in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if args.contains_key(req) {
            continue;
        }
        let p = props.and_then(|m| m.get(req));
        let value = match p.and_then(|p| p.get("enum")).and_then(Value::as_array) {
            Some(choices) if !choices.is_empty() => choices[0].clone(),
            _ => match p.and_then(|p| p.get("type")).and_then(Value::as_str) {
                Some("integer") => json!(10),
                Some("boolean") => json!(false),
                Some("array") => json!([]),
                Some("object") => json!({}),
                _ => json!("main"),
            },
        };
        args.insert(req.to_owned(), value);
    }
    Value::Object(args)
}

/// The scripted answer: the content blocks and the stop reason.
fn script(fake: &Fake, task: usize, parsed: &Parsed) -> (Vec<Value>, &'static str) {
    let answered = parsed.messages.iter().any(|(r, _)| r == "assistant");
    if answered {
        let text = json!({"answer": answer_for(task), "key_facts": {}}).to_string();
        return (vec![json!({"type": "text", "text": text})], "end_turn");
    }
    let mut content = Vec::new();
    let mut used = Vec::new();
    for (tool, given) in TASKS[task].calls {
        let suffix = format!("__{tool}");
        match parsed
            .tools
            .iter()
            .find(|(n, _)| n == tool || n.ends_with(&suffix))
        {
            Some((name, schema)) => {
                let id = format!("toolu_{:024x}", fake.seq.fetch_add(1, Ordering::Relaxed));
                used.push(name.clone());
                content.push(json!({
                    "type": "tool_use",
                    "id": id,
                    "name": name,
                    "input": arguments(schema, given),
                }));
            }
            None => fake
                .misses
                .lock()
                .push(format!("task {}: {tool}", task + 1)),
        }
    }
    if content.is_empty() {
        let text = json!({"answer": "None of the tools offered can do this.", "key_facts": {}});
        return (
            vec![json!({"type": "text", "text": text.to_string()})],
            "end_turn",
        );
    }
    let lead = format!("I'll use {}.", used.join(" and "));
    content.insert(0, json!({"type": "text", "text": lead}));
    (content, "tool_use")
}

async fn messages(State(fake): State<Arc<Fake>>, headers: HeaderMap, body: Bytes) -> Response {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if header("x-api-key") != Some(API_KEY) {
        return api_error(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid x-api-key",
        );
    }
    if header("anthropic-version") != Some(API_VERSION) {
        return invalid(format!(
            "anthropic-version: expected {API_VERSION:?}, got {:?}",
            header("anthropic-version")
        ));
    }
    if !header(header::CONTENT_TYPE.as_str()).is_some_and(|v| v.starts_with("application/json")) {
        return invalid("content-type must be application/json");
    }
    let body: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return invalid(format!("the body is not valid JSON: {e}")),
    };
    let parsed = match parse(&body) {
        Ok(p) => p,
        Err(e) => return invalid(e),
    };
    let first = parsed.messages[0]
        .1
        .iter()
        .find_map(|b| b.get("text").and_then(Value::as_str))
        .unwrap_or_default();
    let Some(task) = TASKS.iter().position(|t| t.message == first) else {
        return invalid(format!("no script for the request {first:?}"));
    };
    let mut usage = meter(&fake, &parsed);
    let (content, stop) = script(&fake, task, &parsed);
    usage.output_tokens = (Value::Array(content.clone()).to_string().len() as u64).div_ceil(4);
    fake.log.lock().push(Exchange {
        task,
        tools_offered: parsed.tools.len(),
        max_tokens: parsed.max_tokens,
        usage,
    });
    let n = fake.seq.fetch_add(1, Ordering::Relaxed);
    let reply = json!({
        "id": format!("msg_{n:024x}"),
        "type": "message",
        "role": "assistant",
        "model": parsed.model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": null,
        "usage": {
            "input_tokens": usage.input_tokens,
            "cache_creation_input_tokens": usage.cache_creation_input_tokens,
            "cache_read_input_tokens": usage.cache_read_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": usage.cache_creation_input_tokens,
                "ephemeral_1h_input_tokens": 0,
            },
            "output_tokens": usage.output_tokens,
            "service_tier": "standard",
        },
    });
    ([("request-id", format!("req_{n:024x}"))], axum::Json(reply)).into_response()
}

/// `POST /v1/messages/count_tokens`: the body of a Messages request without `max_tokens` (and
/// `stream`), counted as the request would be billed in all (bytes/4), caching aside.
async fn count_tokens(State(fake): State<Arc<Fake>>, headers: HeaderMap, body: Bytes) -> Response {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if header("x-api-key") != Some(API_KEY) {
        return api_error(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid x-api-key",
        );
    }
    if header("anthropic-version") != Some(API_VERSION) {
        return invalid("anthropic-version is required");
    }
    let mut body: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return invalid(format!("the body is not valid JSON: {e}")),
    };
    for field in ["max_tokens", "stream"] {
        if body.get(field).is_some() {
            return invalid(format!("{field}: Extra inputs are not permitted"));
        }
    }
    if let Some(obj) = body.as_object_mut() {
        obj.insert("max_tokens".into(), json!(1));
    }
    let parsed = match parse(&body) {
        Ok(p) => p,
        Err(e) => return invalid(e),
    };
    fake.counts.fetch_add(1, Ordering::Relaxed);
    let bytes: u64 = parsed.units.iter().map(|u| u.bytes).sum();
    axum::Json(json!({"input_tokens": bytes.div_ceil(4)})).into_response()
}

async fn start_fake() -> (SocketAddr, Arc<Fake>) {
    let fake = Arc::new(Fake::default());
    let app = Router::new()
        .route("/v1/messages", post(messages))
        .route("/v1/messages/count_tokens", post(count_tokens))
        .with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, fake)
}

// ---- the runs ----

#[derive(Clone, Copy)]
struct Config {
    name: &'static str,
    broker: bool,
    cache: bool,
}

const CONFIGS: &[Config] = &[
    Config {
        name: "baseline (neither)",
        broker: false,
        cache: false,
    },
    Config {
        name: "broker only",
        broker: true,
        cache: false,
    },
    Config {
        name: "caching only",
        broker: false,
        cache: true,
    },
    Config {
        name: "toolforge (both)",
        broker: true,
        cache: true,
    },
];

/// What one config spent on the 10 tasks.
struct Totals {
    config: Config,
    max_tools: usize,
    usage: Usage,
    cost_usd: f64,
    model_calls: u32,
    tools_offered: Vec<usize>,
    /// Tokens sent per task, in task order.
    per_task: Vec<u64>,
    /// The smallest `max_tokens` a request carried (the cost guard clamps it near the ceiling).
    min_max_tokens: u64,
}

impl Totals {
    fn sent(&self) -> u64 {
        self.usage.total_input()
    }
    fn billed_equivalent(&self) -> f64 {
        self.usage.input_tokens as f64
            + self.usage.cache_creation_input_tokens as f64 * CACHE_WRITE_WEIGHT
            + self.usage.cache_read_input_tokens as f64 * CACHE_READ_WEIGHT
    }
}

async fn run_config(
    config: Config,
    isolated: bool,
    addr: SocketAddr,
    fake: &Arc<Fake>,
    catalog: &Catalog,
) -> Totals {
    fake.clear_cache();
    fake.log.lock().clear();
    let model = AnthropicModel::new(AnthropicConfig {
        api_key: API_KEY.to_owned(),
        base_url: format!("http://{addr}"),
        model: MODEL.to_owned(),
        max_attempts: 1,
        timeout: Duration::from_secs(10),
        ..AnthropicConfig::default()
    })
    .unwrap();
    // The broker's 32-tool offer without search: this benchmark measures the broker and
    // caching; progressive discovery (a smaller first offer and search) is measured by
    // `benches/discovery.rs`.
    let defaults = AgentConfig {
        discovery: toolforge_agent::discovery::Discovery {
            search: false,
            ..toolforge_agent::discovery::Discovery::default()
        },
        ..AgentConfig::default()
    };
    let max_tools = if config.broker {
        toolforge_select::selection::DEFAULT_MAX_TOOLS
    } else {
        1000
    };
    let backend = Arc::new(Backend {
        catalog: catalog.clone(),
        calls: AtomicU64::new(0),
    });
    let agent = Agent::new(
        backend.clone(),
        Arc::new(model),
        Arc::new(MemorySessions::default()),
        TraceSink::disabled(),
        AgentConfig {
            max_tools,
            cache: config.cache,
            ..defaults
        },
    );
    let (price, known) = PriceTable::default().price(MODEL);
    assert!(known, "the price table has {MODEL}");
    let mut totals = Totals {
        config,
        max_tools,
        usage: Usage::default(),
        cost_usd: 0.0,
        model_calls: 0,
        tools_offered: Vec::new(),
        per_task: Vec::new(),
        min_max_tokens: u64::MAX,
    };
    let mut executed = 0;
    for (i, task) in TASKS.iter().enumerate() {
        if isolated {
            fake.clear_cache();
        }
        let r: RunResult = agent
            .run(
                RunRequest {
                    message: task.message.to_owned(),
                    ..RunRequest::default()
                },
                None,
            )
            .await;
        let label = format!("{} / task {}", config.name, i + 1);
        assert!(
            !r.halted,
            "{label}: halted ({:?}): {:?}",
            r.halt_reason, r.error
        );
        assert_eq!(r.response, answer_for(i), "{label}: the final answer");
        assert_eq!(r.model_calls, 2, "{label}: one tool turn and one answer");
        let wanted: Vec<&str> = task.calls.iter().map(|(t, _)| *t).collect();
        for w in &wanted {
            assert!(
                r.offered_tools.iter().any(|o| o == w),
                "{label}: the broker did not offer {w} (offered: {:?})",
                r.offered_tools
            );
        }
        let called: Vec<&str> = r
            .steps
            .iter()
            .filter_map(|s| s.server_tool.as_deref())
            .collect();
        assert_eq!(called, wanted, "{label}: the tools called");
        assert!(
            r.steps.iter().all(|s| s.executed && s.success),
            "{label}: a step failed: {:?}",
            r.steps
        );
        executed += r.steps.len();
        let expected_cost = price.cost(&r.usage);
        assert!(
            (r.cost_usd - expected_cost).abs() < 1e-9,
            "{label}: the agent's cost {} is not usage x price {expected_cost}",
            r.cost_usd
        );
        totals.usage.add(&r.usage);
        totals.cost_usd += r.cost_usd;
        totals.model_calls += r.model_calls;
        totals.tools_offered.push(r.offered_tools.len());
        totals.per_task.push(r.usage.total_input());
    }
    assert_eq!(
        backend.calls.load(Ordering::Relaxed) as usize,
        executed,
        "every step ran once"
    );
    let log = fake.log.lock().clone();
    assert_eq!(log.len(), TASKS.len() * 2, "two model calls per task");
    let mut billed = Usage::default();
    for e in &log {
        billed.add(&e.usage);
        totals.min_max_tokens = totals.min_max_tokens.min(e.max_tokens);
        assert_eq!(
            e.tools_offered, totals.tools_offered[e.task],
            "the request carried the tools the agent says it offered"
        );
    }
    assert_eq!(
        billed, totals.usage,
        "the agent's usage is what the API billed"
    );
    totals
}

fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 { 0.0 } else { a / b }
}

fn print_table(title: &str, rows: &[Totals]) {
    let base = &rows[0];
    println!("\n{title}");
    println!(
        "| config | tools sent per call | input tokens sent | of which cache write / read | billed-equivalent input | output tokens | cost (USD) | tokens vs baseline | cost vs baseline |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for t in rows {
        let offered = t.tools_offered.iter().sum::<usize>() as f64 / t.tools_offered.len() as f64;
        println!(
            "| {} | {:.1} | {} | {} / {} | {:.0} | {} | {:.4} | {:.3} | {:.3} |",
            t.config.name,
            offered,
            t.sent(),
            t.usage.cache_creation_input_tokens,
            t.usage.cache_read_input_tokens,
            t.billed_equivalent(),
            t.usage.output_tokens,
            t.cost_usd,
            ratio(t.sent() as f64, base.sent() as f64),
            ratio(t.cost_usd, base.cost_usd),
        );
    }
    let clamps: Vec<String> = rows
        .iter()
        .map(|t| format!("{} {}", t.config.name, t.min_max_tokens))
        .collect();
    println!(
        "Smallest max_tokens sent (1024 unless the cost guard clamped it): {}",
        clamps.join(", ")
    );
}

fn json_rows(rows: &[Totals]) -> Value {
    let base = &rows[0];
    Value::Array(
        rows.iter()
            .map(|t| {
                json!({
                    "config": t.config.name,
                    "broker": t.config.broker,
                    "cache": t.config.cache,
                    "max_tools": t.max_tools,
                    "tools_offered_per_task": t.tools_offered,
                    "model_calls": t.model_calls,
                    "input_tokens": t.usage.input_tokens,
                    "cache_creation_input_tokens": t.usage.cache_creation_input_tokens,
                    "cache_read_input_tokens": t.usage.cache_read_input_tokens,
                    "input_tokens_sent": t.sent(),
                    "billed_equivalent_input_tokens": t.billed_equivalent().round(),
                    "output_tokens": t.usage.output_tokens,
                    "cost_usd": (t.cost_usd * 1e6).round() / 1e6,
                    "tokens_sent_vs_baseline": (ratio(t.sent() as f64, base.sent() as f64) * 1e4).round() / 1e4,
                    "cost_vs_baseline": (ratio(t.cost_usd, base.cost_usd) * 1e4).round() / 1e4,
                    "tokens_sent_per_task": t.per_task,
                    "smallest_max_tokens_sent": t.min_max_tokens,
                })
            })
            .collect(),
    )
}

/// `target/` of this build: the bench binary runs from `target/<profile>/deps/`.
fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            let deps = exe.parent()?;
            (deps.file_name()? == "deps").then(|| deps.parent()?.parent().map(PathBuf::from))?
        })
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let started = std::time::Instant::now();
    let catalog = pool();
    assert_eq!(catalog.tools().count(), 100, "a 100-tool pool");
    let (addr, fake) = start_fake().await;

    let mut warm = Vec::new();
    for &c in CONFIGS {
        warm.push(run_config(c, false, addr, &fake, &catalog).await);
    }
    let mut cold = Vec::new();
    for &c in CONFIGS {
        cold.push(run_config(c, true, addr, &fake, &catalog).await);
    }
    println!(
        "count_tokens requests answered: {}",
        fake.counts.load(Ordering::Relaxed)
    );
    let misses = fake.misses.lock().clone();
    assert!(
        misses.is_empty(),
        "tools the script wanted were not offered: {misses:?}"
    );

    let tools_json: u64 = catalog
        .tools()
        .map(|t| {
            json!({"name": t.name, "description": t.description, "input_schema": t.input_schema})
                .to_string()
                .len() as u64
        })
        .sum();
    println!(
        "Tokens per task: {} tasks, {} tools on {} servers ({} bytes of tool definitions, ~{} tokens), model {MODEL}, fake Anthropic API at {addr}",
        TASKS.len(),
        catalog.tools().count(),
        catalog.servers.len(),
        tools_json,
        tools_json / 4,
    );
    print_table(
        "Tasks back to back (each config starts with an empty cache; the cache lives 5 minutes):",
        &warm,
    );
    print_table(
        "Each task on its own (cache cleared before every task: tasks more than 5 minutes apart):",
        &cold,
    );
    println!("\nInput tokens sent per task (back to back):");
    println!(
        "| task | tools wanted | {} |",
        CONFIGS
            .iter()
            .map(|c| c.name)
            .collect::<Vec<_>>()
            .join(" | ")
    );
    println!("|---|---|{}", "---:|".repeat(CONFIGS.len()));
    for (i, task) in TASKS.iter().enumerate() {
        let wanted: Vec<&str> = task.calls.iter().map(|(t, _)| *t).collect();
        let cells: Vec<String> = warm.iter().map(|t| t.per_task[i].to_string()).collect();
        println!(
            "| {} | {} | {} |",
            i + 1,
            wanted.join(", "),
            cells.join(" | ")
        );
    }

    let report = json!({
        "bench": "tokens",
        "model": MODEL,
        "tasks": TASKS.len(),
        "pool_tools": catalog.tools().count(),
        "pool_servers": catalog.servers.len(),
        "tool_definition_bytes": tools_json,
        "tokens_per_byte": 0.25,
        "cache_write_weight": CACHE_WRITE_WEIGHT,
        "cache_read_weight": CACHE_READ_WEIGHT,
        "back_to_back": json_rows(&warm),
        "isolated": json_rows(&cold),
        "per_task": TASKS.iter().map(|t| json!({
            "message": t.message,
            "tools": t.calls.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    });
    let dir = target_dir();
    let path = dir.join("bench-tokens.json");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(&path, serde_json::to_string_pretty(&report).unwrap() + "\n").unwrap();
    println!(
        "\nWrote {} ({:.2} s).",
        path.display(),
        started.elapsed().as_secs_f64()
    );
}
