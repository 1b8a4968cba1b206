//! OpenAI input tokens counted locally, with the model family's own byte-level BPE
//! (`o200k_base` for the GPT-4o, GPT-4.1, GPT-4.5, GPT-5 and o-series families, `cl100k_base`
//! for GPT-4 and GPT-3.5), shipped inside the binary by `tiktoken-rs`. Chat Completions has no
//! endpoint that counts a request's tokens, so this is how the cost guard sizes an OpenAI call
//! more tightly than the byte bound.
//!
//! The count encodes every text the request sends (system prompt, each tool's name,
//! description and JSON schema, each message's text, tool calls with their arguments and tool
//! results) and adds framing: [`REQUEST_FRAMING`], [`MESSAGE_FRAMING`] per message and
//! [`TOOL_FRAMING`] per tool. OpenAI's documented framing is 3 tokens per message and 3 to
//! prime the reply; tools are rendered server-side in a form that takes fewer tokens than the
//! JSON counted here, so the framing below is generous on purpose. The cost guard then adds its
//! own margin ([`crate::model::counted_bound`]) and never uses more than the byte bound.
//!
//! Models of other families (an OpenAI-compatible server running Llama, Qwen, ...) are not
//! counted: their tokenizers are not shipped, and the byte bound applies.

use tiktoken_rs::CoreBPE;

use crate::model::{Content, ModelRequest};

/// Tokens added once per request (reply priming, tool-section header).
pub const REQUEST_FRAMING: u64 = 32;
/// Tokens added per message (role and separators; tool-call ids and names included).
pub const MESSAGE_FRAMING: u64 = 8;
/// Tokens added per tool definition beyond its counted text.
pub const TOOL_FRAMING: u64 = 16;

/// The BPE families this binary ships.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    O200k,
    Cl100k,
}

/// The tokenizer family of an OpenAI model id (dated snapshots and fine-tune ids such as
/// `ft:gpt-4o-mini:org::id` included); `None` for models outside the shipped families.
#[must_use]
pub fn family(model: &str) -> Option<Family> {
    let id = model.strip_prefix("ft:").unwrap_or(model);
    let id = id.rsplit('/').next().unwrap_or(id);
    const O200K: [&str; 9] = [
        "gpt-4o",
        "chatgpt-4o",
        "gpt-4.1",
        "gpt-4.5",
        "gpt-5",
        "gpt-oss",
        "o1",
        "o3",
        "o4",
    ];
    const CL100K: [&str; 2] = ["gpt-4", "gpt-3.5"];
    let family_of = |prefix: &str| {
        id.strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['-', ':', '.']))
    };
    if O200K.iter().any(|p| family_of(p)) {
        Some(Family::O200k)
    } else if CL100K.iter().any(|p| family_of(p)) || id.starts_with("gpt-4-") {
        Some(Family::Cl100k)
    } else {
        None
    }
}

/// Loads the tokenizer of `model`'s family on a thread of its own (it takes a moment; a debug
/// build takes seconds), so that the first call's count does not wait for it.
pub fn warm(model: &str) {
    if let Some(family) = family(model) {
        std::thread::spawn(move || bpe(family));
    }
}

fn bpe(family: Family) -> &'static CoreBPE {
    match family {
        Family::O200k => tiktoken_rs::o200k_base_singleton(),
        Family::Cl100k => tiktoken_rs::cl100k_base_singleton(),
    }
}

/// The input tokens `request` sends to `model`, counted with its family's tokenizer plus the
/// framing above; `None` when the model's family is not shipped. Special-token text in the
/// input (`<|endoftext|>` typed by a user) is counted as ordinary text, as the API bills it.
#[must_use]
pub fn count(model: &str, request: &ModelRequest) -> Option<u64> {
    let bpe = bpe(family(model)?);
    let tokens = |text: &str| bpe.encode_ordinary(text).len() as u64;
    let mut total = REQUEST_FRAMING + tokens(&request.system);
    for tool in &request.tools {
        total += TOOL_FRAMING
            + tokens(&tool.name)
            + tokens(&tool.description)
            + tokens(&tool.input_schema.to_string());
    }
    // A deferred tool's name and description are in the prompt (OpenAI defers only the
    // parameters); what a search loads is the bound's to add (`counted_bound`).
    for tool in &request.deferred_tools {
        total += TOOL_FRAMING + tokens(&tool.name) + tokens(&tool.description);
    }
    for message in &request.messages {
        total += MESSAGE_FRAMING;
        for content in &message.content {
            total += match content {
                Content::Text { text } => tokens(text),
                Content::ToolUse { id, name, input } => {
                    tokens(id) + tokens(name) + tokens(&input.to_string())
                }
                Content::ToolResult {
                    tool_use_id,
                    content,
                    ..
                } => tokens(tool_use_id) + tokens(content) + MESSAGE_FRAMING,
                // Anthropic's; never sent to OpenAI, counted all the same.
                Content::ProviderSearch { id, name, input } => {
                    tokens(id) + tokens(name) + tokens(&input.to_string())
                }
                Content::ProviderSearchResult { tool_names, .. } => {
                    tool_names.iter().map(|n| tokens(n)).sum::<u64>()
                }
            };
        }
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Message, Role, ToolSpec, input_token_upper_bound};
    use serde_json::json;

    #[test]
    fn families_by_model_id() {
        for id in [
            "gpt-4o-mini",
            "gpt-4o-2024-08-06",
            "ft:gpt-4o-mini:acme::abc123",
            "gpt-4.1-nano",
            "gpt-5",
            "o3-mini",
            "o1",
            "openai/gpt-4o",
        ] {
            assert_eq!(family(id), Some(Family::O200k), "{id}");
        }
        for id in ["gpt-4", "gpt-4-turbo", "gpt-3.5-turbo-0125"] {
            assert_eq!(family(id), Some(Family::Cl100k), "{id}");
        }
        for id in [
            "llama-3.1-8b-instruct",
            "qwen2.5",
            "o1x",
            "gpt-4omega",
            "mistral",
        ] {
            assert_eq!(family(id), None, "{id}");
        }
    }

    #[test]
    fn counts_with_the_family_tokenizer() {
        // OpenAI's cookbook ("How to count tokens with tiktoken"): "tiktoken is great!" is
        // these six cl100k_base tokens; "hello world" is two tokens in both families.
        let o200k = bpe(Family::O200k);
        let cl100k = bpe(Family::Cl100k);
        assert_eq!(
            cl100k.encode_ordinary("tiktoken is great!"),
            vec![83, 1609, 5963, 374, 2294, 0]
        );
        assert_eq!(cl100k.encode_ordinary("hello world").len(), 2);
        assert_eq!(o200k.encode_ordinary("hello world").len(), 2);
    }

    fn request(text: &str) -> ModelRequest {
        ModelRequest {
            system: "You are a careful assistant.".into(),
            tools: vec![ToolSpec {
                name: "sql_query".into(),
                description: "Run a read-only SQL query.".into(),
                input_schema: json!({"type": "object", "properties": {"sql": {"type": "string"}}}),
            }],
            messages: vec![Message {
                role: Role::User,
                content: vec![Content::text(text)],
            }],
            max_tokens: 1024,
            cache: false,
            stable_tools: 0,
            deferred_tools: Vec::new(),
        }
    }

    #[test]
    fn a_count_lies_between_the_text_and_the_byte_bound() {
        let text = "Look up customer Alice Nguyen's orders and sum their total. ".repeat(50);
        let req = request(&text);
        let counted = count("gpt-4o-mini", &req).expect("o200k model");
        let text_only = bpe(Family::O200k).encode_ordinary(&text).len() as u64;
        assert!(counted > text_only, "framing and tools are counted");
        assert!(
            counted * 2 < input_token_upper_bound(&req),
            "{counted} tokens should be far below the byte bound"
        );
        assert_eq!(count("llama-3.1-8b-instruct", &req), None);
    }

    #[test]
    fn special_token_text_is_ordinary_text() {
        let req = request("<|endoftext|><|im_start|>system");
        assert!(count("gpt-4o", &req).is_some());
    }
}
