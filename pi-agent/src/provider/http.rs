//! The HTTP side shared by the OpenAI and Anthropic providers: one request, streamed as SSE,
//! with response and idle timeouts, cancellation, error mapping and `traceparent` injection.

use std::time::Duration;

use futures_util::StreamExt;
use pi_observe_core::{ContentKind, Payload, names, record};
use tokio_util::sync::CancellationToken;

use super::ProviderError;
use super::eventstream::EventStreamParser;
use super::sse::{SseEvent, SseParser};

/// HTTP settings of a provider (`Debug` never shows the API key).
#[derive(Clone)]
pub struct HttpConfig {
    /// Base URL (e.g. `http://127.0.0.1:8080/v1`); `None` = the model's or the provider's default.
    pub base_url: Option<String>,
    /// API key; `None` = from the provider's environment variable.
    pub api_key: Option<String>,
    /// Extra request headers (a proxy's key, an organisation header: `models.json` `headers`).
    pub headers: Vec<(String, String)>,
    /// Connection timeout.
    pub connect_timeout: Duration,
    /// Time allowed until response headers arrive.
    pub response_timeout: Duration,
    /// Longest allowed gap between two chunks of a streamed body.
    pub idle_timeout: Duration,
}

impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("headers", &self.headers.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>())
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .finish()
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            base_url: None,
            api_key: None,
            headers: Vec::new(),
            connect_timeout: Duration::from_secs(10),
            response_timeout: Duration::from_secs(120),
            idle_timeout: Duration::from_secs(120),
        }
    }
}

/// Header names whose values are credentials: never recorded, even with header capture on.
const SECRET_HEADERS: [&str; 4] = ["authorization", "x-api-key", "cookie", "proxy-authorization"];

#[derive(Debug)]
pub(crate) struct HttpClient {
    client: reqwest::Client,
    pub(crate) config: HttpConfig,
    /// The protocol has no end marker: the body's end ends the stream (the provider checks it
    /// was complete).
    eof_ends: bool,
    /// The body is AWS event-stream frames, not SSE.
    event_stream: bool,
}

impl HttpClient {
    pub(crate) fn new(config: HttpConfig) -> Result<Self, ProviderError> {
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .build()
            .map_err(|e| ProviderError::Config(format!("cannot build HTTP client: {e}")))?;
        Ok(HttpClient { client, config, eof_ends: false, event_stream: false })
    }

    /// For a protocol without an end marker (Gemini): a body that ends between events ends the
    /// stream instead of being an error.
    pub(crate) fn end_at_eof(&mut self) {
        self.eof_ends = true;
    }

    /// For AWS's binary event-stream responses (Bedrock): frames are decoded into events.
    pub(crate) fn read_event_stream(&mut self) {
        self.event_stream = true;
    }

    /// Host and port of the base URL a request goes to (`--base-url`, else the model's, else
    /// `default_base`).
    pub(crate) fn server(&self, request: &super::ProviderRequest, default_base: &str) -> Option<(String, u16)> {
        let base = self.config.base_url.as_deref().or(request.model.base_url.as_deref()).unwrap_or(default_base);
        let url = reqwest::Url::parse(base).ok()?;
        Some((url.host_str()?.to_owned(), url.port_or_known_default()?))
    }

    /// The URL of `path` under the base URL a request goes to: `--base-url`, else the
    /// model's, else `default_base`.
    pub(crate) fn url(&self, request: &super::ProviderRequest, default_base: &str, path: &str) -> String {
        let base = self.config.base_url.as_deref().or(request.model.base_url.as_deref()).unwrap_or(default_base);
        join_url(base, path)
    }

    /// POSTs `body` as JSON and feeds each event (SSE, or event-stream frames) to `on_event`
    /// until it returns `true` (the protocol's end marker). Returns the HTTP status.
    pub(crate) async fn stream_sse(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: &serde_json::Value,
        control: &super::RequestControl,
        cancel: &CancellationToken,
        on_event: impl FnMut(SseEvent) -> Result<bool, ProviderError>,
    ) -> Result<u16, ProviderError> {
        record_request(headers, body);
        let request = self.build(url, headers, body, control)?;
        let send = tokio::time::timeout(self.config.response_timeout, request.send());
        let response = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(ProviderError::Aborted),
            sent = send => match sent {
                Err(_) => return Err(ProviderError::Timeout(format!("no response within {:?}", self.config.response_timeout))),
                Ok(result) => result.map_err(map_reqwest)?,
            },
        };
        let status = response.status().as_u16();
        if control.on_response.is_some() {
            let seen: Vec<(String, String)> = response
                .headers()
                .iter()
                .map(|(name, value)| (name.as_str().to_owned(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
                .collect();
            control.observe_response(status, seen).await;
        }
        if !response.status().is_success() {
            return Err(self.error_of(response).await);
        }
        self.read_events(response, cancel, on_event).await.map(|()| status)
    }

    /// The request with its headers: content negotiation, the provider's, `traceparent`, then
    /// the extensions' changes.
    fn build(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: &serde_json::Value,
        control: &super::RequestControl,
    ) -> Result<reqwest::RequestBuilder, ProviderError> {
        let accept = if self.event_stream { "application/vnd.amazon.eventstream" } else { "text/event-stream" };
        let mut all: Vec<(String, String)> =
            vec![("content-type".into(), "application/json".into()), ("accept".into(), accept.into())];
        all.extend(headers.iter().map(|(name, value)| (name.to_ascii_lowercase(), value.clone())));
        for (name, value) in &self.config.headers {
            all.retain(|(existing, _)| !existing.eq_ignore_ascii_case(name));
            all.push((name.to_ascii_lowercase(), value.clone()));
        }
        if let Some(tp) = pi_observe_core::current().traceparent() {
            all.push(("traceparent".into(), tp.to_string()));
        }
        for (name, value) in &control.headers {
            all.retain(|(existing, _)| !existing.eq_ignore_ascii_case(name));
            if let Some(value) = value {
                all.push((name.clone(), value.clone()));
            }
        }
        let mut request = self.client.post(url).body(body.to_string());
        for (name, value) in &all {
            let header_name = reqwest::header::HeaderName::from_bytes(name.as_bytes());
            let header_value = reqwest::header::HeaderValue::from_str(value);
            match (header_name, header_value) {
                (Ok(n), Ok(v)) => request = request.header(n, v),
                _ => return Err(ProviderError::Config(format!("invalid request header {name:?}"))),
            }
        }
        Ok(request)
    }

    /// The error of a non-success response (its body is recorded as provider payload content).
    async fn error_of(&self, response: reqwest::Response) -> ProviderError {
        let status = response.status().as_u16();
        let retry_after =
            response.headers().get("retry-after").and_then(|v| v.to_str().ok()).and_then(parse_retry_after);
        let body = tokio::time::timeout(self.config.idle_timeout, response.text())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        record(|| Payload::new().content_with(ContentKind::ProviderPayload, names::RESPONSE_BODY, || body.clone()));
        let message = error_message(&body);
        if status == 401 || status == 403 {
            ProviderError::Auth { status, message }
        } else {
            ProviderError::Http { status, message, retry_after }
        }
    }

    /// Reads the body as SSE until `on_event` sees the end marker, within the idle timeout.
    async fn read_events(
        &self,
        response: reqwest::Response,
        cancel: &CancellationToken,
        mut on_event: impl FnMut(SseEvent) -> Result<bool, ProviderError>,
    ) -> Result<(), ProviderError> {
        let mut stream = response.bytes_stream();
        let mut parser =
            if self.event_stream { Framing::Events(Default::default()) } else { Framing::Sse(Default::default()) };
        loop {
            let next = tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(ProviderError::Aborted),
                next = tokio::time::timeout(self.config.idle_timeout, stream.next()) => next,
            };
            let chunk = match next {
                Err(_) => {
                    return Err(ProviderError::Timeout(format!("stream stalled for {:?}", self.config.idle_timeout)));
                }
                Ok(None) if self.eof_ends && !parser.pending() => return Ok(()),
                Ok(None) => {
                    let detail = if parser.pending() { " mid-event" } else { "" };
                    return Err(ProviderError::Stream(format!("stream ended{detail} before the end marker")));
                }
                Ok(Some(chunk)) => chunk.map_err(map_reqwest)?,
            };
            for event in parser.push(&chunk).map_err(ProviderError::Stream)? {
                if on_event(event)? {
                    return Ok(());
                }
            }
        }
    }
}

/// How a streamed body is cut into events.
enum Framing {
    Sse(SseParser),
    Events(EventStreamParser),
}

impl Framing {
    fn push(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, String> {
        match self {
            Framing::Sse(parser) => parser.push(bytes),
            Framing::Events(parser) => parser.push(bytes),
        }
    }

    fn pending(&self) -> bool {
        match self {
            Framing::Sse(parser) => parser.pending(),
            Framing::Events(parser) => parser.pending(),
        }
    }
}

/// The request body and headers as content (credential headers never, even with capture on).
fn record_request(headers: &[(&str, String)], body: &serde_json::Value) {
    // Built only when captured: the body is the whole conversation, serialized anew each turn.
    record(|| {
        let shown = || -> Vec<String> {
            headers
                .iter()
                .filter(|(name, _)| !SECRET_HEADERS.contains(&name.to_ascii_lowercase().as_str()))
                .map(|(name, value)| format!("{name}: {value}"))
                .collect()
        };
        Payload::new()
            .content_with(ContentKind::ProviderPayload, names::REQUEST_BODY, || body.to_string())
            .content_with(ContentKind::Header, names::HEADERS, shown)
    });
}

fn map_reqwest(error: reqwest::Error) -> ProviderError {
    if error.is_timeout() {
        ProviderError::Timeout(error.to_string())
    } else if error.is_builder() {
        ProviderError::Config(error.to_string())
    } else {
        ProviderError::Network(error.to_string())
    }
}

/// `Retry-After` as delay-seconds (integer or decimal). HTTP-dates fall back to backoff.
pub(crate) fn parse_retry_after(value: &str) -> Option<Duration> {
    let secs: f64 = value.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(86_400.0)))
}

/// The `error.message` of a JSON error body, else the body itself, cut to 500 bytes.
fn error_message(body: &str) -> String {
    // `{"error": {"message"}}` (OpenAI, Anthropic, Gemini), or `{"message"}` (Bedrock, Mistral).
    let from_json = serde_json::from_str::<serde_json::Value>(body).ok().and_then(|v| {
        v.pointer("/error/message").or_else(|| v.get("message")).and_then(|m| m.as_str()).map(str::to_owned)
    });
    let mut message = from_json.unwrap_or_else(|| body.trim().to_owned());
    pi_observe_core::truncate(&mut message, 500);
    message
}

/// Joins a base URL and a path without doubling slashes.
pub(crate) fn join_url(base: &str, path: &str) -> String {
    format!("{}/{}", base.trim_end_matches('/'), path.trim_start_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_accepts_seconds_only() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after(" 0.5 "), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("-1"), None);
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }

    #[test]
    fn error_messages_prefer_the_json_message() {
        assert_eq!(error_message(r#"{"error":{"message":"Rate limited","type":"x"}}"#), "Rate limited");
        assert_eq!(error_message("oops\n"), "oops");
        assert_eq!(error_message(r#"{"message":"Too many requests"}"#), "Too many requests");
        assert_eq!(join_url("http://h/v1/", "/chat/completions"), "http://h/v1/chat/completions");
    }
}
