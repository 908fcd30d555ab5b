//! One provider API over HTTP and SSE, as data: its base URL, path, credential headers, request
//! body and stream reader ([`Wire`]), run by the one [`HttpProvider`] — the retries, tracing,
//! timeouts, cancellation and extension hooks around it are [`super::request`]'s and
//! [`HttpClient`]'s, the same for every API.

use serde_json::Value;

use super::http::{HttpClient, HttpConfig};
use super::sse::SseEvent;
use super::{Attempt, AttemptFuture, AttemptOutcome, Provider, ProviderError, ProviderRequest, StreamEvent};
use crate::message::AssistantMessage;

/// Where a stream's events go.
pub(crate) type Sink<'a> = &'a mut (dyn FnMut(StreamEvent) + Send);

/// What one attempt's stream is read into.
pub(crate) trait Stream: Default + Send {
    /// Reads one SSE event, streaming deltas to `sink`; `Ok(true)` at the protocol's end marker.
    fn on_event(&mut self, event: SseEvent, sink: Sink<'_>) -> Result<bool, ProviderError>;

    /// The assistant message the stream assembled (or why the stream was incomplete), after
    /// the body ended.
    fn finish(
        self,
        request: &ProviderRequest,
        provider: &str,
        sink: Sink<'_>,
    ) -> Result<AssistantMessage, ProviderError>;
}

/// One API's wire format.
pub(crate) trait Wire: Send + Sync + std::fmt::Debug + 'static {
    /// What one attempt's stream is read into.
    type State: Stream;

    /// The base URL when neither `--base-url` nor the model names one.
    const BASE: &'static str;

    /// The path under the base URL, when it is the same for every request.
    const PATH: &'static str = "";

    /// The path under the base URL (query included): [`Wire::PATH`] unless the request decides.
    fn path(&self, request: &ProviderRequest) -> String {
        let _ = request;
        Self::PATH.to_owned()
    }

    /// The credential headers for `key` (and any the API always wants): `Authorization:
    /// Bearer KEY` unless the API says otherwise.
    fn headers(&self, key: Option<&str>) -> Vec<(&'static str, String)> {
        bearer(key)
    }

    /// Headers the provider adds besides credentials, as extensions see them.
    fn default_headers(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    /// The request body (before extensions replace it).
    fn body(&self, request: &ProviderRequest) -> Value;

    /// Headers that sign the request as it will be sent (`url`, the final `body`): AWS SigV4
    /// for Bedrock; nothing for APIs with a key header.
    fn sign(&self, url: &str, body: &str) -> Result<Vec<(&'static str, String)>, ProviderError> {
        let _ = (url, body);
        Ok(Vec::new())
    }
}

/// `Authorization: Bearer KEY`, when there is a key.
pub(crate) fn bearer(key: Option<&str>) -> Vec<(&'static str, String)> {
    key.map(|key| ("authorization", format!("Bearer {key}"))).into_iter().collect()
}

/// A provider speaking `W` over HTTP.
#[derive(Debug)]
pub struct HttpProvider<W> {
    pub(crate) http: HttpClient,
    name: String,
    pub(crate) wire: W,
}

impl<W> HttpProvider<W> {
    /// A provider named `name` speaking `wire` (a key is optional: a local server needs none).
    pub(crate) fn of(config: HttpConfig, name: &str, wire: W) -> Result<Self, ProviderError> {
        Ok(HttpProvider { http: HttpClient::new(config)?, name: name.to_owned(), wire })
    }

    /// [`HttpProvider::of`], but without a key or a base URL it is a configuration error
    /// naming `key_var`.
    pub(crate) fn keyed(config: HttpConfig, name: &str, wire: W, key_var: &str) -> Result<Self, ProviderError> {
        if config.api_key.is_none() && config.base_url.is_none() {
            return Err(ProviderError::Config(format!("{key_var} is not set")));
        }
        Self::of(config, name, wire)
    }
}

impl<W: Wire> Provider for HttpProvider<W> {
    fn name(&self) -> &str {
        &self.name
    }

    fn payload(&self, request: &ProviderRequest) -> Value {
        self.wire.body(request)
    }

    fn default_headers(&self) -> Vec<(String, String)> {
        self.wire.default_headers()
    }

    fn server(&self, request: &ProviderRequest) -> Option<(String, u16)> {
        self.http.server(request, W::BASE)
    }

    fn attempt<'a>(&'a self, Attempt { request, cancel, sink }: Attempt<'a>) -> AttemptFuture<'a> {
        Box::pin(async move {
            let url = self.http.url(request, W::BASE, &self.wire.path(request));
            // The extensions' replacement body, else the API's: what is sent is what is signed.
            let body = request.control.payload.clone().unwrap_or_else(|| self.wire.body(request));
            let mut headers = self.wire.headers(self.http.config.api_key.as_deref());
            headers.extend(self.wire.sign(&url, &body.to_string())?);
            let mut state = W::State::default();
            sink(StreamEvent::Start);
            let on_event = |event: SseEvent| state.on_event(event, sink);
            let status = self.http.stream_sse(&url, &headers, &body, &request.control, cancel, on_event).await?;
            let message = state.finish(request, &self.name, sink)?;
            Ok(AttemptOutcome { message, status: Some(status) })
        })
    }
}
