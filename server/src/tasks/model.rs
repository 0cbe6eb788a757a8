//! The model behind `run_task`: an OpenAI-compatible chat-completions
//! endpoint with image input. One request per step; the answer's text is
//! parsed by `uitars`. The key never reaches a log, an error or the trace.

use std::time::{Duration, Instant};

use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

/// The most bytes of an answer body read; a larger one is refused.
const MAX_BODY: usize = 4 << 20;

/// Where and how to ask.
#[derive(Clone)]
pub struct ModelConfig {
    /// `…/v1` (chat completions live at `{base}/chat/completions`).
    pub base_url: String,
    /// The model's name.
    pub model: String,
    /// Bearer key.
    pub api_key: Option<SecretString>,
    /// Bound of one answer.
    pub timeout: Duration,
}

impl std::fmt::Debug for ModelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelConfig")
            .field("base_url", &crate::audit::redact::url(&self.base_url))
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .finish()
    }
}

/// What the model answered.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The message's text.
    pub text: String,
    /// How long it took.
    pub ms: i64,
    /// Reported prompt tokens.
    pub prompt_tokens: Option<i64>,
    /// Reported completion tokens.
    pub completion_tokens: Option<i64>,
}

/// Why no answer came.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// Down, unreachable, too slow, or a 5xx.
    #[error("the model endpoint is unavailable: {0}")]
    Unavailable(String),
    /// A 4xx: the request was refused (bad key, unknown model, too large).
    #[error("the model endpoint refused the request (HTTP {0})")]
    Refused(u16),
    /// Not the chat-completions shape.
    #[error("the model endpoint's answer is malformed: {0}")]
    Malformed(String),
}

impl ModelError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unavailable(_) => "model_unavailable",
            Self::Refused(_) => "model_refused",
            Self::Malformed(_) => "model_malformed",
        }
    }
}

/// One chat message.
#[derive(Debug, Clone)]
pub enum Message {
    /// The system prompt.
    System(String),
    /// The user's text and images (PNG or JPEG bytes).
    User {
        /// Text parts.
        text: Option<String>,
        /// Images, oldest first.
        images: Vec<(&'static str, Vec<u8>)>,
    },
    /// What the model answered before.
    Assistant(String),
}

impl Message {
    fn json(&self) -> Value {
        use base64::Engine;
        match self {
            Self::System(t) => json!({ "role": "system", "content": t }),
            Self::Assistant(t) => json!({ "role": "assistant", "content": t }),
            Self::User { text, images } => {
                let mut parts = Vec::new();
                if let Some(t) = text {
                    parts.push(json!({ "type": "text", "text": t }));
                }
                for (mime, bytes) in images {
                    let data = base64::engine::general_purpose::STANDARD.encode(bytes);
                    parts.push(json!({
                        "type": "image_url",
                        "image_url": { "url": format!("data:{mime};base64,{data}") },
                    }));
                }
                json!({ "role": "user", "content": parts })
            }
        }
    }
}

/// A client of one endpoint.
#[derive(Clone, Debug)]
pub struct ModelClient {
    http: reqwest::Client,
    cfg: ModelConfig,
}

impl ModelClient {
    /// A client (no connection is made yet).
    pub fn new(cfg: ModelConfig) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(cfg.timeout)
            .connect_timeout(Duration::from_secs(10))
            // The endpoint is configured by the operator; no proxy from the
            // environment may see the images or the key.
            .no_proxy()
            // The images and the prompt go to the endpoint configured and
            // nowhere else: a redirect (a 307 would send the body again,
            // to an address of the endpoint's choosing, from the control
            // plane's host) is an answer refused.
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self { http, cfg })
    }

    /// Asks once; temperature 0.
    pub async fn complete(&self, messages: &[Message]) -> Result<Answer, ModelError> {
        let url = format!(
            "{}/chat/completions",
            self.cfg.base_url.trim_end_matches('/')
        );
        let body = json!({
            "model": self.cfg.model,
            "messages": messages.iter().map(Message::json).collect::<Vec<_>>(),
            "temperature": 0,
            "max_tokens": 1000,
        });
        let started = Instant::now();
        let mut req = self.http.post(&url).json(&body);
        if let Some(key) = &self.cfg.api_key {
            req = req.bearer_auth(key.expose_secret());
        }
        // Only the error's kind: reqwest's message names the URL, which may
        // carry a key in its query.
        let res = req.send().await.map_err(|e| {
            ModelError::Unavailable(if e.is_timeout() {
                format!("no answer within {} s", self.cfg.timeout.as_secs())
            } else if e.is_connect() {
                "cannot connect".into()
            } else {
                "the request failed".into()
            })
        })?;
        let status = res.status();
        if status.is_server_error() {
            return Err(ModelError::Unavailable(format!("HTTP {}", status.as_u16())));
        }
        if !status.is_success() {
            return Err(ModelError::Refused(status.as_u16()));
        }
        let mut bytes = Vec::new();
        let mut res = res;
        while let Some(chunk) = res
            .chunk()
            .await
            .map_err(|_| ModelError::Unavailable("the answer was cut off".into()))?
        {
            if bytes.len() + chunk.len() > MAX_BODY {
                return Err(ModelError::Malformed(format!(
                    "the answer is larger than {} MiB",
                    MAX_BODY >> 20
                )));
            }
            bytes.extend_from_slice(&chunk);
        }
        let ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
        let v: Value = serde_json::from_slice(&bytes)
            .map_err(|e| ModelError::Malformed(format!("not JSON: {e}")))?;
        let text = match &v["choices"][0]["message"]["content"] {
            Value::String(s) => s.clone(),
            // Some servers answer content as parts.
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join(""),
            _ => {
                return Err(ModelError::Malformed(
                    "no choices[0].message.content".into(),
                ));
            }
        };
        Ok(Answer {
            text,
            ms,
            prompt_tokens: v["usage"]["prompt_tokens"].as_i64(),
            completion_tokens: v["usage"]["completion_tokens"].as_i64(),
        })
    }
}
