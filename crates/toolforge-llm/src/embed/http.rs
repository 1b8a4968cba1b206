//! Remote embedding APIs: any OpenAI-compatible `/v1/embeddings` (OpenAI, LM Studio, Ollama,
//! vLLM, Together, ...) and Voyage AI.
//!
//! Why one client for both: the two APIs share the request (`{"model", "input": [...]}`) and
//! response (`{"data": [{"index", "embedding"}]}`) shapes; they differ in defaults, in
//! Voyage's `input_type`, and in batch limits. Answers are matched to inputs by `index`, never
//! by position, and every failure maps to an [`EmbedError`] naming what the caller can do
//! (bad key, rate limit, unreadable body).

use std::time::Duration;

use futures::future::BoxFuture;
use serde::Deserialize;

use super::embedder::{EmbedError, Embedder, normalise};

/// Voyage's public endpoint (base URL; `/embeddings` is appended).
pub const VOYAGE_BASE_URL: &str = "https://api.voyageai.com/v1";

/// Which API dialect to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpApi {
    /// OpenAI-compatible `/v1/embeddings`; the key (optional: local servers need none) goes in
    /// `Authorization: Bearer`.
    OpenAi,
    /// Voyage AI; sends `input_type: "document"` (tool descriptions and queries are embedded in
    /// one space either way).
    Voyage,
}

/// Typed config for [`HttpEmbedder`] (the binary fills it from flags and env).
#[derive(Debug, Clone)]
pub struct HttpEmbedderConfig {
    pub api: HttpApi,
    /// Base URL including the version path, e.g. `http://127.0.0.1:11434/v1`.
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    /// Texts per request.
    pub batch_size: usize,
    /// Per-request timeout.
    pub timeout: Duration,
}

impl HttpEmbedderConfig {
    /// OpenAI-compatible defaults: 128 texts a request, 60 s timeout.
    pub fn openai(base_url: &str, model: &str, api_key: Option<String>) -> Self {
        Self {
            api: HttpApi::OpenAi,
            base_url: base_url.to_owned(),
            model: model.to_owned(),
            api_key,
            batch_size: 128,
            timeout: Duration::from_secs(60),
        }
    }

    /// Voyage defaults: [`VOYAGE_BASE_URL`], 128 texts a request, 60 s timeout.
    pub fn voyage(model: &str, api_key: String) -> Self {
        Self {
            api: HttpApi::Voyage,
            base_url: VOYAGE_BASE_URL.to_owned(),
            model: model.to_owned(),
            api_key: Some(api_key),
            batch_size: 128,
            timeout: Duration::from_secs(60),
        }
    }
}

/// An embedder backed by an HTTP API.
#[derive(Debug, Clone)]
pub struct HttpEmbedder {
    config: HttpEmbedderConfig,
    client: reqwest::Client,
    url: String,
    id: String,
}

#[derive(Deserialize)]
struct Response {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    index: usize,
    embedding: Vec<f32>,
}

/// Longest error body quoted in an error message.
const MAX_QUOTED: usize = 300;

fn quote(body: &str) -> String {
    // Prefer the providers' {"error": {"message"}} / {"detail"} text over the raw body.
    let parsed: Option<String> = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.get("detail"))
                .or_else(|| v.get("error"))
                .and_then(|m| m.as_str().map(str::to_owned))
        });
    let text = parsed.unwrap_or_else(|| body.trim().to_owned());
    text.chars().take(MAX_QUOTED).collect()
}

impl HttpEmbedder {
    /// Builds the client; fails only when the HTTP client cannot be created.
    pub fn new(config: HttpEmbedderConfig) -> Result<Self, EmbedError> {
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .build()
            .map_err(|e| EmbedError::Transport(e.to_string()))?;
        let url = format!("{}/embeddings", config.base_url.trim_end_matches('/'));
        let id = match config.api {
            HttpApi::OpenAi => format!("openai:{}@{}", config.model, config.base_url),
            HttpApi::Voyage => format!("voyage:{}", config.model),
        };
        Ok(Self {
            config,
            client,
            url,
            id,
        })
    }

    async fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut body = serde_json::json!({"model": self.config.model, "input": texts});
        match self.config.api {
            HttpApi::OpenAi => body["encoding_format"] = "float".into(),
            HttpApi::Voyage => body["input_type"] = "document".into(),
        }
        let mut req = self.client.post(&self.url).json(&body);
        if let Some(key) = &self.config.api_key {
            req = req.bearer_auth(key);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| EmbedError::Transport(format!("{}: {e}", self.url)))?;
        let status = resp.status().as_u16();
        let text = resp
            .text()
            .await
            .map_err(|e| EmbedError::Transport(format!("{}: reading the body: {e}", self.url)))?;
        match status {
            200..=299 => {}
            401 | 403 => {
                return Err(EmbedError::Auth {
                    status,
                    message: quote(&text),
                });
            }
            429 => return Err(EmbedError::RateLimited(quote(&text))),
            _ => {
                return Err(EmbedError::Http {
                    status,
                    message: quote(&text),
                });
            }
        }
        let parsed: Response = serde_json::from_str(&text)
            .map_err(|e| EmbedError::BadResponse(format!("{e}; body starts {:?}", quote(&text))))?;
        let mut out: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        for item in parsed.data {
            let slot = out.get_mut(item.index).ok_or_else(|| {
                EmbedError::BadResponse(format!("index {} for {} inputs", item.index, texts.len()))
            })?;
            *slot = Some(item.embedding);
        }
        let out: Vec<Vec<f32>> = out
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                v.ok_or_else(|| EmbedError::BadResponse(format!("no vector for input {i}")))
            })
            .collect::<Result<_, _>>()?;
        if let Some(first) = out.first()
            && (first.is_empty() || out.iter().any(|v| v.len() != first.len()))
        {
            return Err(EmbedError::BadResponse(
                "vectors are empty or of different lengths".into(),
            ));
        }
        // Unit length, like every embedder here, so a dot product is the cosine.
        Ok(out.into_iter().map(normalise).collect())
    }
}

impl Embedder for HttpEmbedder {
    fn id(&self) -> &str {
        &self.id
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(async move {
            let mut out = Vec::with_capacity(texts.len());
            for chunk in texts.chunks(self.config.batch_size.max(1)) {
                out.extend(self.embed_batch(chunk).await?);
            }
            Ok(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use wiremock::matchers::{body_partial_json, header, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;

    fn texts(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("text {i}")).collect()
    }

    /// A provider-shaped answer for `n` inputs starting at `from`, listed in reverse order.
    fn answer(n: usize, from: usize) -> Value {
        let data: Vec<Value> = (0..n)
            .rev()
            .map(|i| json!({"object": "embedding", "index": i, "embedding": [(from + i) as f32, 1.0]}))
            .collect();
        json!({"object": "list", "data": data, "model": "m", "usage": {"prompt_tokens": 3, "total_tokens": 3}})
    }

    fn client(server: &MockServer, api: HttpApi, key: Option<&str>) -> HttpEmbedder {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut c = HttpEmbedderConfig::openai(
            &format!("{}/v1", server.uri()),
            "text-embedding-3-small",
            key.map(str::to_owned),
        );
        c.api = api;
        HttpEmbedder::new(c).unwrap()
    }

    #[tokio::test]
    async fn openai_request_shape_and_index_order() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/embeddings"))
            .and(header("authorization", "Bearer sk-test"))
            .and(body_partial_json(json!({
                "model": "text-embedding-3-small",
                "input": ["text 0", "text 1", "text 2"],
                "encoding_format": "float"
            })))
            .respond_with(ResponseTemplate::new(200).set_body_json(answer(3, 0)))
            .expect(1)
            .mount(&server)
            .await;
        let e = client(&server, HttpApi::OpenAi, Some("sk-test"));
        let v = e.embed(&texts(3)).await.unwrap();
        let h = std::f32::consts::FRAC_1_SQRT_2;
        let n = 5f32.sqrt();
        assert_eq!(v, vec![vec![0.0, 1.0], vec![h, h], vec![2.0 / n, 1.0 / n]]);
        assert!(e.id().starts_with("openai:text-embedding-3-small@"));
    }

    #[tokio::test]
    async fn local_servers_get_no_authorization_header() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(answer(1, 0)))
            .mount(&server)
            .await;
        client(&server, HttpApi::OpenAi, None)
            .embed(&texts(1))
            .await
            .unwrap();
        let reqs = server.received_requests().await.unwrap();
        assert_eq!(reqs.len(), 1);
        assert!(!reqs[0].headers.contains_key("authorization"));
    }

    #[tokio::test]
    async fn voyage_sends_input_type_and_key() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/embeddings"))
            .and(header("authorization", "Bearer pa-key"))
            .and(body_partial_json(
                json!({"input_type": "document", "input": ["text 0"]}),
            ))
            .respond_with(ResponseTemplate::new(200).set_body_json(answer(1, 0)))
            .expect(1)
            .mount(&server)
            .await;
        let e = client(&server, HttpApi::Voyage, Some("pa-key"));
        assert_eq!(e.embed(&texts(1)).await.unwrap().len(), 1);
        assert_eq!(e.id(), "voyage:text-embedding-3-small");
    }

    #[tokio::test]
    async fn batches_keep_input_order() {
        let server = MockServer::start().await;
        for (from, n) in [(0usize, 2usize), (2, 2), (4, 1)] {
            let input: Vec<String> = (from..from + n).map(|i| format!("text {i}")).collect();
            Mock::given(body_partial_json(json!({"input": input})))
                .respond_with(ResponseTemplate::new(200).set_body_json(answer(n, from)))
                .expect(1)
                .mount(&server)
                .await;
        }
        let mut e = client(&server, HttpApi::OpenAi, None);
        e.config.batch_size = 2;
        let v = e.embed(&texts(5)).await.unwrap();
        // Vectors arrive as [i, 1] (normalised): x / y recovers i.
        let order: Vec<f32> = v.iter().map(|x| (x[0] / x[1]).round()).collect();
        assert_eq!(order, vec![0.0, 1.0, 2.0, 3.0, 4.0]);
    }

    #[tokio::test]
    async fn errors_are_classified() {
        // (status, body, expected error prefix, text the message must quote)
        let cases = [
            (
                401,
                r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#,
                "rejected the credentials",
                "Incorrect API key",
            ),
            (
                401,
                r#"{"detail":"Provided API key is invalid."}"#,
                "rejected the credentials",
                "API key is invalid",
            ),
            (
                429,
                r#"{"error":{"message":"Rate limit reached","type":"requests"}}"#,
                "rate limiting",
                "Rate limit reached",
            ),
            (
                500,
                "upstream exploded",
                "answered HTTP 500",
                "upstream exploded",
            ),
            (
                200,
                "<html>not json</html>",
                "unreadable answer",
                "not json",
            ),
            (
                200,
                r#"{"data":[{"index":5,"embedding":[1.0]}]}"#,
                "unreadable answer",
                "index 5",
            ),
            (
                200,
                r#"{"data":[]}"#,
                "unreadable answer",
                "no vector for input 0",
            ),
        ];
        for (status, body, kind, quoted) in cases {
            let server = MockServer::start().await;
            Mock::given(method("POST"))
                .respond_with(ResponseTemplate::new(status).set_body_string(body))
                .mount(&server)
                .await;
            let err = client(&server, HttpApi::OpenAi, Some("k"))
                .embed(&texts(1))
                .await
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(kind) && err.contains(quoted),
                "{status} {body}: {err}"
            );
        }
    }

    #[tokio::test]
    async fn dead_server_is_a_transport_error() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let e = HttpEmbedder::new(HttpEmbedderConfig::openai(
            &format!("http://127.0.0.1:{port}/v1"),
            "m",
            None,
        ))
        .unwrap();
        let err = e.embed(&texts(1)).await.unwrap_err();
        assert!(matches!(err, EmbedError::Transport(_)), "{err}");
    }
}
