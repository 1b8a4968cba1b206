//! The Chat Completions's streamed answer (server-sent events) assembled into one response.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::wire::{Answer, WireUsage, arguments_from_text, fallback_call_id, stop_reason};
use crate::model::{Content, ModelResponse};

/// One `data:` chunk of a stream.
#[derive(Deserialize)]
pub(super) struct WireChunk {
    /// Empty in the final usage chunk.
    pub(super) choices: Option<Vec<ChunkChoice>>,
    pub(super) usage: Option<WireUsage>,
    pub(super) model: Option<String>,
    /// An error reported mid-stream (the HTTP status was already 200).
    pub(super) error: Option<Value>,
}

#[derive(Deserialize)]
pub(super) struct ChunkChoice {
    pub(super) index: Option<u32>,
    pub(super) delta: Option<ChunkDelta>,
    pub(super) finish_reason: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct ChunkDelta {
    pub(super) content: Option<String>,
    pub(super) refusal: Option<String>,
    pub(super) tool_calls: Option<Vec<ChunkToolCall>>,
}

/// A piece of a tool call: `id` and `name` come in its first piece, `arguments` in pieces.
#[derive(Deserialize)]
pub(super) struct ChunkToolCall {
    pub(super) index: Option<usize>,
    pub(super) id: Option<String>,
    pub(super) function: Option<ChunkFunction>,
}

#[derive(Deserialize)]
pub(super) struct ChunkFunction {
    pub(super) name: Option<String>,
    pub(super) arguments: Option<Value>,
}

/// A tool call while its pieces stream in.
#[derive(Default)]
pub(super) struct PartialCall {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) arguments: String,
}

/// Folds stream chunks into a [`ModelResponse`].
pub(super) struct Assembler {
    pub(super) model: String,
    pub(super) text: String,
    pub(super) refusal: String,
    pub(super) calls: BTreeMap<usize, PartialCall>,
    pub(super) finish_reason: Option<String>,
    pub(super) usage: Option<WireUsage>,
}

impl Assembler {
    pub(super) fn new(requested_model: &str) -> Self {
        Self {
            model: requested_model.to_owned(),
            text: String::new(),
            refusal: String::new(),
            calls: BTreeMap::new(),
            finish_reason: None,
            usage: None,
        }
    }

    pub(super) fn apply(&mut self, chunk: WireChunk) {
        if let Some(model) = chunk.model.filter(|m| !m.is_empty()) {
            self.model = model;
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage);
        }
        // One completion was asked for (no `n`), so only choice 0 is read.
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index.is_some_and(|i| i != 0) {
                continue;
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
            }
            let Some(delta) = choice.delta else { continue };
            if let Some(text) = delta.content {
                self.text.push_str(&text);
            }
            if let Some(refusal) = delta.refusal {
                self.refusal.push_str(&refusal);
            }
            for (position, piece) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
                // Servers that send every call whole may leave out `index`: the position in
                // the list stands in.
                let call = self
                    .calls
                    .entry(piece.index.unwrap_or(position))
                    .or_default();
                // `id` and `name` are whole values sent once; servers that repeat them in
                // later pieces must not double them.
                if let Some(id) = piece.id.filter(|id| !id.is_empty())
                    && call.id.is_empty()
                {
                    call.id = id;
                }
                let Some(function) = piece.function else {
                    continue;
                };
                if let Some(name) = function.name.filter(|n| !n.is_empty())
                    && call.name.is_empty()
                {
                    call.name = name;
                }
                match function.arguments {
                    Some(Value::String(more)) => call.arguments.push_str(&more),
                    None | Some(Value::Null) => {}
                    Some(other) => call.arguments.push_str(&other.to_string()),
                }
            }
        }
    }

    pub(super) fn finish(self) -> Answer {
        let mut content = Vec::with_capacity(self.calls.len() + 1);
        let text = if self.text.is_empty() {
            self.refusal
        } else {
            self.text
        };
        if !text.is_empty() {
            content.push(Content::Text { text });
        }
        let has_tool_calls = !self.calls.is_empty();
        for (position, call) in self.calls.into_values().enumerate() {
            content.push(Content::ToolUse {
                id: if call.id.is_empty() {
                    fallback_call_id(position)
                } else {
                    call.id
                },
                name: call.name,
                input: arguments_from_text(call.arguments),
            });
        }
        let has_usage = self.usage.as_ref().is_some_and(WireUsage::is_reported);
        Answer {
            response: ModelResponse {
                content,
                stop_reason: stop_reason(self.finish_reason.as_deref(), has_tool_calls),
                usage: self
                    .usage
                    .as_ref()
                    .map(WireUsage::to_usage)
                    .unwrap_or_default(),
                model: self.model,
            },
            has_usage,
        }
    }
}
