//! A sentence-transformers model run in-process with candle: BERT (e.g. all-MiniLM-L6-v2) or
//! MPNet (e.g. all-mpnet-base-v2, [`super::mpnet`]), chosen by `config.json`'s `model_type`.
//!
//! Why in-process: it needs no server, no network and no API key, so CI and air-gapped users get
//! dense retrieval with nothing but three files (`config.json`, `tokenizer.json`,
//! `model.safetensors`). Inference is CPU-bound, so it runs in `spawn_blocking`, batched, with
//! each text truncated to the model's maximum sequence length; vectors are mean-pooled over the
//! attention mask and L2-normalised (what sentence-transformers does for this family).

use std::path::Path;
use std::sync::Arc;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use futures::future::BoxFuture;
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use super::embedder::{EmbedError, Embedder};
use super::mpnet::{MpnetConfig, MpnetModel};

/// Texts per forward pass.
const BATCH: usize = 32;
/// Sequence cap when the model folder does not say (sentence-transformers' usual 256).
const DEFAULT_MAX_TOKENS: usize = 256;

/// The model files' contents; [`LocalEmbedder::from_dir`] reads them from a folder.
#[derive(Debug, Clone)]
pub struct LocalModelFiles {
    /// `config.json` (a Hugging Face BERT config).
    pub config_json: Vec<u8>,
    /// `tokenizer.json` (Hugging Face tokenizers format).
    pub tokenizer_json: Vec<u8>,
    /// `model.safetensors` (F32 weights).
    pub weights: Vec<u8>,
    /// `sentence_bert_config.json` when present (gives `max_seq_length`).
    pub sentence_config_json: Option<Vec<u8>>,
}

/// The encoders the local embedder runs, chosen by `config.json`'s `model_type`.
enum Encoder {
    Bert(BertModel),
    Mpnet(MpnetModel),
}

struct Model {
    encoder: Encoder,
    tokenizer: Tokenizer,
}

/// The local BERT embedder; cheap to clone (the model is shared).
#[derive(Clone)]
pub struct LocalEmbedder {
    model: Arc<Model>,
    id: String,
    dims: usize,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("id", &self.id)
            .finish()
    }
}

fn model_err(what: &str, e: impl std::fmt::Display) -> EmbedError {
    EmbedError::Model(format!("{what}: {e}"))
}

impl LocalEmbedder {
    /// Loads a sentence-transformers folder. `name` goes into [`Embedder::id`] (use the folder
    /// name, e.g. `all-MiniLM-L6-v2`).
    pub fn from_dir(dir: &Path) -> Result<Self, EmbedError> {
        let read = |file: &str| {
            let path = dir.join(file);
            std::fs::read(&path).map_err(|e| {
                EmbedError::Model(format!(
                    "cannot read {} ({e}); the model folder needs config.json, tokenizer.json \
                     and model.safetensors (run scripts/setup to install all-MiniLM-L6-v2)",
                    path.display()
                ))
            })
        };
        let files = LocalModelFiles {
            config_json: read("config.json")?,
            tokenizer_json: read("tokenizer.json")?,
            weights: read("model.safetensors")?,
            sentence_config_json: std::fs::read(dir.join("sentence_bert_config.json")).ok(),
        };
        let name = dir
            .file_name()
            .map_or_else(|| "local".to_owned(), |n| n.to_string_lossy().into_owned());
        Self::from_files(&name, files)
    }

    /// Builds the embedder from the model files' contents.
    pub fn from_files(name: &str, files: LocalModelFiles) -> Result<Self, EmbedError> {
        let model_type = serde_json::from_slice::<serde_json::Value>(&files.config_json)
            .map_err(|e| model_err("config.json is not JSON", e))?
            .get("model_type")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("bert")
            .to_owned();
        if !matches!(model_type.as_str(), "bert" | "mpnet") {
            return Err(EmbedError::Model(format!(
                "config.json names model_type {model_type:?}; the local embedder runs \"bert\" \
                 (e.g. all-MiniLM-L6-v2) and \"mpnet\" (e.g. all-mpnet-base-v2) models"
            )));
        }
        let vb = VarBuilder::from_buffered_safetensors(files.weights, DType::F32, &Device::Cpu)
            .map_err(|e| model_err("model.safetensors", e))?;
        let (encoder, hidden_size, max_positions, pad_id) = match model_type.as_str() {
            "mpnet" => {
                let config: MpnetConfig = serde_json::from_slice(&files.config_json)
                    .map_err(|e| model_err("config.json is not an MPNet config", e))?;
                let model =
                    MpnetModel::load(vb, &config).map_err(|e| model_err("loading weights", e))?;
                // Positions start after the padding id, so two fewer are usable.
                let positions = config
                    .max_position_embeddings
                    .saturating_sub(config.pad_token_id + 1);
                (
                    Encoder::Mpnet(model),
                    config.hidden_size,
                    positions,
                    config.pad_token_id,
                )
            }
            _ => {
                // "bert", or no model_type (older BERT exports).
                let config: Config = serde_json::from_slice(&files.config_json)
                    .map_err(|e| model_err("config.json is not a BERT config", e))?;
                let model =
                    BertModel::load(vb, &config).map_err(|e| model_err("loading weights", e))?;
                let positions = config.max_position_embeddings;
                (
                    Encoder::Bert(model),
                    config.hidden_size,
                    positions,
                    config.pad_token_id,
                )
            }
        };
        let max_tokens = files
            .sentence_config_json
            .as_deref()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(b).ok())
            .and_then(|v| v.get("max_seq_length").and_then(serde_json::Value::as_u64))
            .map_or(DEFAULT_MAX_TOKENS, |n| n as usize)
            .min(max_positions);
        let mut tokenizer = Tokenizer::from_bytes(&files.tokenizer_json)
            .map_err(|e| model_err("tokenizer.json", e))?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                ..TruncationParams::default()
            }))
            .map_err(|e| model_err("tokenizer truncation", e))?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            pad_id: pad_id as u32,
            ..PaddingParams::default()
        }));
        let dims = hidden_size;
        Ok(Self {
            model: Arc::new(Model { encoder, tokenizer }),
            id: format!("local:{name}/{dims}"),
            dims,
        })
    }

    /// Vector dimensions (the model's hidden size).
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Embeds synchronously (CPU-bound; call from a blocking thread).
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        // Similar lengths share a batch so padding stays small; results go back in input order.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let mut out = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(BATCH) {
            let batch: Vec<&str> = chunk.iter().map(|&i| texts[i].as_str()).collect();
            let vecs = self.model.forward(&batch)?;
            for (&i, v) in chunk.iter().zip(vecs) {
                out[i] = v;
            }
        }
        Ok(out)
    }
}

impl Model {
    fn forward(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let enc = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| model_err("tokenizing", e))?;
        let rows = enc.len();
        let cols = enc.first().map_or(0, |e| e.get_ids().len());
        let flat = |f: &dyn Fn(&tokenizers::Encoding) -> &[u32]| -> Vec<u32> {
            enc.iter().flat_map(|e| f(e).iter().copied()).collect()
        };
        let t = |v: Vec<u32>| Tensor::from_vec(v, (rows, cols), &Device::Cpu);
        let run = || -> candle_core::Result<Vec<Vec<f32>>> {
            let ids = t(flat(&|e| e.get_ids()))?;
            let types = t(flat(&|e| e.get_type_ids()))?;
            let mask = t(flat(&|e| e.get_attention_mask()))?;
            let hidden = match &self.encoder {
                Encoder::Bert(bert) => bert.forward(&ids, &types, Some(&mask))?,
                Encoder::Mpnet(mpnet) => mpnet.forward(&ids, &mask)?,
            };
            // Mean over real tokens, then L2 norm.
            let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
            let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
            let counts = mask.sum(1)?.clamp(1e-9, f32::MAX)?;
            let mean = summed.broadcast_div(&counts)?;
            let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f32::MAX)?;
            mean.broadcast_div(&norm)?.to_vec2::<f32>()
        };
        run().map_err(|e| model_err("inference", e))
    }
}

impl Embedder for LocalEmbedder {
    fn id(&self) -> &str {
        &self.id
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        let this = self.clone();
        let texts = texts.to_vec();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || this.embed_blocking(&texts))
                .await
                .map_err(|e| model_err("inference thread", e))?
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::embedder::cosine;

    /// The model installed by `scripts/setup.d/30-embedding-model.sh`.
    fn model() -> LocalEmbedder {
        let dir =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/models/all-MiniLM-L6-v2");
        assert!(
            dir.join("model.safetensors").is_file(),
            "{} is missing: run scripts/setup",
            dir.display()
        );
        LocalEmbedder::from_dir(&dir).expect("model loads")
    }

    fn texts(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[tokio::test]
    async fn minilm_vectors_are_normalised_and_semantic() {
        let m = model();
        assert_eq!(m.id(), "local:all-MiniLM-L6-v2/384");
        let v = m
            .embed(&texts(&[
                "read the contents of a file on disk",
                "open a local file and return its text",
                "send an email message to a colleague",
            ]))
            .await
            .unwrap();
        assert_eq!(v.len(), 3);
        for x in &v {
            assert_eq!(x.len(), 384);
            let norm: f32 = x.iter().map(|a| a * a).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-4, "norm {norm}");
        }
        let related = cosine(&v[0], &v[1]);
        let unrelated = cosine(&v[0], &v[2]);
        assert!(
            related > unrelated + 0.2,
            "related {related} unrelated {unrelated}"
        );
    }

    #[test]
    fn padding_and_batch_order_do_not_change_vectors() {
        let m = model();
        let short = "weather forecast";
        let long = "a much longer sentence about booking flights, hotels and rental cars for a \
                    family holiday in the mountains next summer";
        let alone = m.embed_blocking(&texts(&[short])).unwrap();
        let batched = m.embed_blocking(&texts(&[long, short, long])).unwrap();
        assert_eq!(batched.len(), 3);
        assert!(cosine(&alone[0], &batched[1]) > 0.9999);
        assert!(cosine(&batched[0], &batched[2]) > 0.9999);
        assert!(m.embed_blocking(&[]).unwrap().is_empty());
    }

    #[test]
    fn overlong_text_is_truncated_not_rejected() {
        let m = model();
        let huge = "tool ".repeat(5_000);
        let v = m.embed_blocking(&[huge]).unwrap();
        assert_eq!(v[0].len(), 384);
    }

    #[test]
    fn an_unsupported_model_type_is_named() {
        let files = LocalModelFiles {
            config_json: br#"{"model_type": "gpt2"}"#.to_vec(),
            tokenizer_json: Vec::new(),
            weights: Vec::new(),
            sentence_config_json: None,
        };
        let err = LocalEmbedder::from_files("m", files)
            .unwrap_err()
            .to_string();
        assert!(err.contains(r#"model_type "gpt2""#), "{err}");
        assert!(err.contains("mpnet"), "{err}");
    }

    #[test]
    fn missing_folder_says_run_setup() {
        let err = LocalEmbedder::from_dir(Path::new("/nonexistent/model")).unwrap_err();
        assert!(err.to_string().contains("run scripts/setup"), "{err}");
    }
}
