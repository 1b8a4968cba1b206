//! MPNet (the encoder of sentence-transformers' all-mpnet-base-v2) in candle, which has no MPNet.
//!
//! MPNet is BERT with two differences, both in the weights' names and in the arithmetic:
//! - positions are RoBERTa-style (counted from `pad_token_id + 1`, padding keeps
//!   `pad_token_id`), and there are no token types;
//! - every layer adds a relative position bias to its attention scores: one learned value per
//!   head for each of 32 buckets of the key's offset from the query (T5's bidirectional
//!   bucketing, exact up to 8 positions either way, logarithmic up to 128), shared by all layers.
//!
//! `tests/fixtures/mpnet-tiny/make.py` spells the same arithmetic out in numpy; the test below
//! checks this encoder's hidden states against it on a small random model.

use candle_core::{D, DType, Device, Result, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear, Module, VarBuilder, embedding, layer_norm, linear};
use serde::Deserialize;

/// The fields of an MPNet `config.json` the encoder needs.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct MpnetConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    pub layer_norm_eps: f64,
    pub pad_token_id: usize,
    #[serde(default = "default_buckets")]
    pub relative_attention_num_buckets: usize,
}

fn default_buckets() -> usize {
    32
}

/// Offsets beyond this share the last logarithmic bucket (the reference's `max_distance`).
const MAX_DISTANCE: f64 = 128.0;

struct Layer {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
}

/// The MPNet encoder: token ids and attention mask in, the last hidden states out.
pub(crate) struct MpnetModel {
    word_embeddings: Embedding,
    position_embeddings: Embedding,
    embedding_norm: LayerNorm,
    layers: Vec<Layer>,
    relative_attention_bias: Embedding,
    heads: usize,
    head_size: usize,
    buckets: usize,
    pad_token_id: u32,
}

impl MpnetModel {
    pub fn load(vb: VarBuilder, config: &MpnetConfig) -> Result<Self> {
        let vb = if vb.contains_tensor("mpnet.embeddings.word_embeddings.weight") {
            vb.pp("mpnet")
        } else {
            vb
        };
        let h = config.hidden_size;
        if config.num_attention_heads == 0 || !h.is_multiple_of(config.num_attention_heads) {
            candle_core::bail!(
                "hidden_size {h} is not a multiple of num_attention_heads {}",
                config.num_attention_heads
            );
        }
        let eps = config.layer_norm_eps;
        let emb = vb.pp("embeddings");
        let enc = vb.pp("encoder");
        let layers = (0..config.num_hidden_layers)
            .map(|i| {
                let l = enc.pp(format!("layer.{i}"));
                let attn = l.pp("attention");
                Ok(Layer {
                    q: linear(h, h, attn.pp("attn.q"))?,
                    k: linear(h, h, attn.pp("attn.k"))?,
                    v: linear(h, h, attn.pp("attn.v"))?,
                    o: linear(h, h, attn.pp("attn.o"))?,
                    attention_norm: layer_norm(h, eps, attn.pp("LayerNorm"))?,
                    intermediate: linear(h, config.intermediate_size, l.pp("intermediate.dense"))?,
                    output: linear(config.intermediate_size, h, l.pp("output.dense"))?,
                    output_norm: layer_norm(h, eps, l.pp("output.LayerNorm"))?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            word_embeddings: embedding(config.vocab_size, h, emb.pp("word_embeddings"))?,
            position_embeddings: embedding(
                config.max_position_embeddings,
                h,
                emb.pp("position_embeddings"),
            )?,
            embedding_norm: layer_norm(h, eps, emb.pp("LayerNorm"))?,
            layers,
            relative_attention_bias: embedding(
                config.relative_attention_num_buckets,
                config.num_attention_heads,
                enc.pp("relative_attention_bias"),
            )?,
            heads: config.num_attention_heads,
            head_size: h / config.num_attention_heads,
            buckets: config.relative_attention_num_buckets,
            pad_token_id: config.pad_token_id as u32,
        })
    }

    /// `ids` and `mask` are `(batch, tokens)` u32 tensors; returns `(batch, tokens, hidden)`.
    pub fn forward(&self, ids: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let (batch, tokens) = ids.dims2()?;
        let device = ids.device();
        let positions = self.position_ids(&ids.to_vec2::<u32>()?, device)?;
        let mut xs =
            (self.word_embeddings.forward(ids)? + self.position_embeddings.forward(&positions)?)?;
        xs = self.embedding_norm.forward(&xs)?;
        // (1, heads, tokens, tokens) + (batch, 1, 1, tokens): padding keys get -inf-like scores.
        let bias = self.position_bias(tokens, device)?;
        let padding = ((mask.to_dtype(DType::F32)?.ones_like()? - mask.to_dtype(DType::F32)?)?
            * f64::from(f32::MIN))?
        .reshape((batch, 1, 1, tokens))?;
        let bias = bias.broadcast_add(&padding)?;
        for layer in &self.layers {
            xs = self.layer_forward(layer, &xs, &bias)?;
        }
        Ok(xs)
    }

    fn layer_forward(&self, layer: &Layer, xs: &Tensor, bias: &Tensor) -> Result<Tensor> {
        let (batch, tokens, hidden) = xs.dims3()?;
        let split = |t: Tensor| {
            t.reshape((batch, tokens, self.heads, self.head_size))?
                .transpose(1, 2)?
                .contiguous()
        };
        let q = split(layer.q.forward(xs)?)?;
        let k = split(layer.k.forward(xs)?)?;
        let v = split(layer.v.forward(xs)?)?;
        let scores = (q.matmul(&k.t()?)? / (self.head_size as f64).sqrt())?;
        let probs = candle_nn::ops::softmax(&scores.broadcast_add(bias)?, D::Minus1)?;
        let context = probs
            .matmul(&v)?
            .transpose(1, 2)?
            .contiguous()?
            .reshape((batch, tokens, hidden))?;
        let xs = layer
            .attention_norm
            .forward(&(layer.o.forward(&context)? + xs)?)?;
        let inner = layer.intermediate.forward(&xs)?.gelu_erf()?;
        layer
            .output_norm
            .forward(&(layer.output.forward(&inner)? + xs)?)
    }

    /// RoBERTa-style positions: real tokens count from `pad + 1`, padding stays at `pad`.
    fn position_ids(&self, ids: &[Vec<u32>], device: &Device) -> Result<Tensor> {
        let pad = self.pad_token_id;
        let rows: Vec<u32> = ids
            .iter()
            .flat_map(|row| {
                let mut seen = 0u32;
                row.iter()
                    .map(move |&id| {
                        if id == pad {
                            pad
                        } else {
                            seen += 1;
                            seen + pad
                        }
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        Tensor::from_vec(rows, (ids.len(), ids.first().map_or(0, Vec::len)), device)
    }

    /// The learned bias of every (query, key) pair: `(1, heads, tokens, tokens)`.
    fn position_bias(&self, tokens: usize, device: &Device) -> Result<Tensor> {
        let buckets: Vec<u32> = (0..tokens)
            .flat_map(|query| {
                (0..tokens).map(move |key| relative_bucket(key as i64 - query as i64, self.buckets))
            })
            .collect();
        let buckets = Tensor::from_vec(buckets, (tokens, tokens), device)?;
        self.relative_attention_bias
            .forward(&buckets)? // (tokens, tokens, heads)
            .permute((2, 0, 1))?
            .unsqueeze(0)?
            .contiguous()
    }
}

/// T5's bidirectional bucket of a key's offset from its query (`key - query`): half the
/// buckets for keys before the query, half for keys after; in each half, exact offsets below a
/// quarter of the buckets, then logarithmic steps up to [`MAX_DISTANCE`].
pub(crate) fn relative_bucket(offset: i64, buckets: usize) -> u32 {
    let half = (buckets / 2) as i64;
    let n = -offset;
    let mut bucket = if n < 0 { half } else { 0 };
    let n = n.abs();
    let exact = half / 2;
    bucket += if n < exact {
        n
    } else {
        let scaled = ((n as f64 / exact as f64).ln() / (MAX_DISTANCE / exact as f64).ln()
            * (half - exact) as f64) as i64;
        (exact + scaled).min(half - 1)
    };
    bucket as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2-layer MPNet with random weights and the hidden states the reference arithmetic
    /// (transformers' `MPNetModel`, in numpy) gives for two sequences, the second padded;
    /// written by `tests/fixtures/mpnet-tiny/make.py`.
    #[test]
    fn hidden_states_match_the_reference_implementation() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/mpnet-tiny");
        let config: MpnetConfig =
            serde_json::from_slice(&std::fs::read(format!("{dir}/config.json")).unwrap()).unwrap();
        let weights = std::fs::read(format!("{dir}/model.safetensors")).unwrap();
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu).unwrap();
        let model = MpnetModel::load(vb, &config).unwrap();
        let expected: serde_json::Value =
            serde_json::from_slice(&std::fs::read(format!("{dir}/expected.json")).unwrap())
                .unwrap();
        let rows =
            |key: &str| -> Vec<Vec<u32>> { serde_json::from_value(expected[key].clone()).unwrap() };
        let (ids, mask) = (rows("ids"), rows("mask"));
        let tensor = |v: Vec<Vec<u32>>| {
            let shape = (v.len(), v[0].len());
            Tensor::from_vec(v.concat(), shape, &Device::Cpu).unwrap()
        };
        let hidden = model
            .forward(&tensor(ids), &tensor(mask.clone()))
            .unwrap()
            .to_vec3::<f32>()
            .unwrap();
        let want: Vec<Vec<Vec<f32>>> = serde_json::from_value(expected["hidden"].clone()).unwrap();
        for (b, (got_row, want_row)) in hidden.iter().zip(&want).enumerate() {
            for (t, (got, want)) in got_row.iter().zip(want_row).enumerate() {
                // Padding positions are never pooled; only real tokens must agree.
                if mask[b][t] == 0 {
                    continue;
                }
                for (g, w) in got.iter().zip(want) {
                    assert!(
                        (g - w).abs() < 1e-4,
                        "sequence {b} token {t}: {got:?} != {want:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn buckets_match_the_reference_table() {
        // Values of transformers' MPNetEncoder.relative_position_bucket(offset, 32, 128).
        let table = [
            (0, 0),
            (-1, 1),
            (-7, 7),
            (-8, 8),
            (-12, 9),
            (-16, 10),
            (-32, 12),
            (-64, 14),
            (-127, 15),
            (-500, 15),
            (1, 17),
            (7, 23),
            (8, 24),
            (16, 26),
            (128, 31),
            (1000, 31),
        ];
        for (offset, want) in table {
            assert_eq!(relative_bucket(offset, 32), want, "offset {offset}");
        }
    }
}
