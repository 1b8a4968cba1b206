//! The Messages API's streamed answer (server-sent events) assembled into one response.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::wire::{
    ApiError, WireUsage, bad_response, is_search_tool, read_search_result, stop_reason,
};
use crate::model::{Content, ModelError, ModelResponse, Usage};
use crate::provider_http::quote;

/// One SSE event's `data`, tagged by its `type` (the same name as the SSE `event:` line).
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum StreamEvent {
    MessageStart {
        message: StreamStart,
    },
    ContentBlockStart {
        index: usize,
        content_block: StartBlock,
    },
    ContentBlockDelta {
        index: usize,
        delta: Delta,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        delta: MessageDelta,
        #[serde(default)]
        usage: WireUsage,
    },
    MessageStop,
    Ping,
    Error {
        error: ApiError,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
pub(super) struct StreamStart {
    #[serde(default)]
    pub(super) model: String,
    #[serde(default)]
    pub(super) usage: WireUsage,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum StartBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
    },
    ServerToolUse {
        id: String,
        name: String,
    },
    /// Whole in its start event.
    ToolSearchToolResult {
        tool_use_id: String,
        content: Value,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum Delta {
    #[serde(rename = "text_delta")]
    Text { text: String },
    #[serde(rename = "input_json_delta")]
    InputJson { partial_json: String },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
pub(super) struct MessageDelta {
    pub(super) stop_reason: Option<String>,
}

/// A content block while it streams in.
pub(super) enum Block {
    Text(String),
    /// The input JSON accumulates as text; it is parsed once the block stops.
    ToolUse {
        id: String,
        name: String,
        json: String,
    },
    /// The tool search's call, its input accumulating likewise.
    ServerToolUse {
        id: String,
        name: String,
        json: String,
    },
    Finished(Content),
    /// A kind the agent does not use (thinking, ...): its deltas are dropped.
    Skipped,
}

pub(super) enum Flow {
    Continue,
    Stop,
}

pub(super) enum StreamFailure {
    /// An `error` event: `kind` is the API's error type.
    Api {
        kind: String,
        message: String,
    },
    Bad(ModelError),
}

/// Folds stream events into a [`ModelResponse`].
pub(super) struct Assembler {
    pub(super) model: String,
    pub(super) usage: Usage,
    pub(super) stop_reason: Option<String>,
    pub(super) blocks: BTreeMap<usize, Block>,
}

impl Assembler {
    pub(super) fn new(requested_model: &str) -> Self {
        Self {
            model: requested_model.to_owned(),
            usage: Usage::default(),
            stop_reason: None,
            blocks: BTreeMap::new(),
        }
    }

    pub(super) fn apply(&mut self, event: StreamEvent) -> Result<Flow, StreamFailure> {
        match event {
            StreamEvent::MessageStart { message } => {
                if !message.model.is_empty() {
                    self.model = message.model;
                }
                message.usage.apply_to(&mut self.usage);
            }
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => {
                let block = match content_block {
                    StartBlock::Text { text } => Block::Text(text),
                    StartBlock::ToolUse { id, name } => Block::ToolUse {
                        id,
                        name,
                        json: String::new(),
                    },
                    StartBlock::ServerToolUse { id, name } if is_search_tool(&name) => {
                        Block::ServerToolUse {
                            id,
                            name,
                            json: String::new(),
                        }
                    }
                    StartBlock::ToolSearchToolResult {
                        tool_use_id,
                        content,
                    } => {
                        let (tool_names, error) = read_search_result(&content);
                        Block::Finished(Content::ProviderSearchResult {
                            tool_use_id,
                            tool_names,
                            error,
                        })
                    }
                    StartBlock::ServerToolUse { .. } | StartBlock::Other => Block::Skipped,
                };
                self.blocks.insert(index, block);
            }
            StreamEvent::ContentBlockDelta { index, delta } => {
                let block = self.blocks.get_mut(&index).ok_or_else(|| {
                    bad(format!(
                        "content_block_delta for block {index} before its start"
                    ))
                })?;
                match (block, delta) {
                    (Block::Text(text), Delta::Text { text: more }) => text.push_str(&more),
                    (
                        Block::ToolUse { json, .. } | Block::ServerToolUse { json, .. },
                        Delta::InputJson { partial_json },
                    ) => {
                        json.push_str(&partial_json);
                    }
                    (Block::Skipped, _) | (_, Delta::Other) => {}
                    (Block::Finished(_), _) => {
                        return Err(bad(format!(
                            "content_block_delta for stopped block {index}"
                        )));
                    }
                    _ => {
                        return Err(bad(format!(
                            "content_block_delta of the wrong kind for block {index}"
                        )));
                    }
                }
            }
            StreamEvent::ContentBlockStop { index } => {
                let block = self.blocks.remove(&index).ok_or_else(|| {
                    bad(format!(
                        "content_block_stop for block {index} before its start"
                    ))
                })?;
                self.blocks.insert(index, finish_block(block)?);
            }
            StreamEvent::MessageDelta { delta, usage } => {
                if delta.stop_reason.is_some() {
                    self.stop_reason = delta.stop_reason;
                }
                usage.apply_to(&mut self.usage);
            }
            StreamEvent::MessageStop => return Ok(Flow::Stop),
            StreamEvent::Ping | StreamEvent::Unknown => {}
            StreamEvent::Error { error } => {
                return Err(StreamFailure::Api {
                    kind: error.kind.unwrap_or_default(),
                    message: quote(&error.message.unwrap_or_default()),
                });
            }
        }
        Ok(Flow::Continue)
    }

    pub(super) fn finish(self) -> Result<ModelResponse, ModelError> {
        let mut content = Vec::with_capacity(self.blocks.len());
        for block in self.blocks.into_values() {
            match finish_block(block) {
                Ok(Block::Finished(c)) => content.push(c),
                Ok(_) => {}
                Err(StreamFailure::Bad(e)) => return Err(e),
                Err(StreamFailure::Api { message, .. }) => return Err(bad_response(message)),
            }
        }
        Ok(ModelResponse {
            content,
            stop_reason: stop_reason(self.stop_reason.as_deref()),
            usage: self.usage,
            model: self.model,
        })
    }
}

pub(super) fn bad(message: String) -> StreamFailure {
    StreamFailure::Bad(bad_response(message))
}

/// Turns a streamed block into its final content; tool input JSON is parsed here (an empty
/// input streams as no text at all and means `{}`).
pub(super) fn finish_block(block: Block) -> Result<Block, StreamFailure> {
    Ok(match block {
        Block::Text(text) => Block::Finished(Content::Text { text }),
        Block::ToolUse { id, name, json } => {
            let input = if json.trim().is_empty() {
                Value::Object(serde_json::Map::new())
            } else {
                serde_json::from_str(&json).map_err(|e| {
                    bad(format!(
                        "tool_use {id} ({name}) input is not JSON: {e}; it starts {:?}",
                        quote(&json)
                    ))
                })?
            };
            Block::Finished(Content::ToolUse { id, name, input })
        }
        Block::ServerToolUse { id, name, json } => {
            let input = if json.trim().is_empty() {
                Value::Object(serde_json::Map::new())
            } else {
                serde_json::from_str(&json).map_err(|e| {
                    bad(format!(
                        "server_tool_use {id} ({name}) input is not JSON: {e}; it starts {:?}",
                        quote(&json)
                    ))
                })?
            };
            Block::Finished(Content::ProviderSearch { id, name, input })
        }
        other => other,
    })
}
