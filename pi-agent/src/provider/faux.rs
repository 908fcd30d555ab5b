//! `faux`: scripted responses for tests and the offline demo. Each request takes the next queued
//! response and streams it in small chunks; usage is estimated (~4 characters per token).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{Attempt, AttemptFuture, AttemptOutcome, EventSink, Provider, ProviderError, ProviderRequest, StreamEvent};
use crate::message::{AssistantMessage, ContentBlock, StopReason, Usage};

/// One block of a scripted response.
#[derive(Debug, Clone, PartialEq)]
pub enum FauxBlock {
    /// Assistant text.
    Text(String),
    /// Reasoning text.
    Thinking(String),
    /// A tool call.
    ToolCall {
        /// Tool name.
        name: String,
        /// Arguments.
        arguments: Value,
    },
}

/// One scripted response.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FauxResponse {
    /// What the model "says".
    pub blocks: Vec<FauxBlock>,
    /// Fail instead of answering (after `fail_after_chunks` chunks, default at once).
    pub error: Option<ProviderError>,
    /// Number of chunks streamed before `error` is returned.
    pub fail_after_chunks: usize,
    /// Text the request this response answers must contain (in its messages or system prompt):
    /// when it does not, the response is a provider error naming the missing text — a script's
    /// way to check what the model was actually sent.
    pub expect: Vec<String>,
    /// Text the request must **not** contain: when it does, the response is a provider error
    /// naming it.
    pub reject: Vec<String>,
    /// Wait this long before each chunk of this response (instead of the provider's delay).
    pub chunk_delay: Option<Duration>,
}

impl FauxResponse {
    /// A text-only response.
    pub fn text(text: impl Into<String>) -> Self {
        FauxResponse { blocks: vec![FauxBlock::Text(text.into())], ..Default::default() }
    }

    /// A response calling tools, with optional text first.
    pub fn tools(text: Option<&str>, calls: Vec<(&str, Value)>) -> Self {
        let mut blocks: Vec<FauxBlock> = text.map(|t| FauxBlock::Text(t.to_owned())).into_iter().collect();
        blocks.extend(
            calls.into_iter().map(|(name, arguments)| FauxBlock::ToolCall { name: name.to_owned(), arguments }),
        );
        FauxResponse { blocks, ..Default::default() }
    }

    /// A response that fails with `error`.
    pub fn error(error: ProviderError) -> Self {
        FauxResponse { error: Some(error), ..Default::default() }
    }
}

/// Answers a request when the script is used up.
type Fallback = Box<dyn Fn(&ProviderRequest) -> FauxResponse + Send + Sync>;

/// The scripted provider.
pub struct FauxProvider {
    queue: Mutex<VecDeque<FauxResponse>>,
    fallback: Option<Fallback>,
    chunk_chars: usize,
    chunk_delay: Duration,
    calls: std::sync::atomic::AtomicUsize,
    sent: Mutex<Vec<FauxRequest>>,
}

/// What one faux attempt "sent": the request body and headers after extensions changed them.
#[derive(Debug, Clone, PartialEq)]
pub struct FauxRequest {
    /// The body (the provider's own, or an extension's replacement).
    pub payload: serde_json::Value,
    /// The headers (defaults with the extensions' patch applied), lowercase names.
    pub headers: std::collections::BTreeMap<String, String>,
}

impl std::fmt::Debug for FauxProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FauxProvider")
            .field("queued", &self.remaining())
            .field("fallback", &self.fallback.is_some())
            .field("chunk_chars", &self.chunk_chars)
            .field("chunk_delay", &self.chunk_delay)
            .finish_non_exhaustive()
    }
}

impl Default for FauxProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl FauxProvider {
    /// An empty script: requests fail with "no more responses" until responses are pushed.
    pub fn new() -> Self {
        FauxProvider {
            queue: Mutex::new(VecDeque::new()),
            fallback: None,
            chunk_chars: 8,
            chunk_delay: Duration::ZERO,
            calls: Default::default(),
            sent: Mutex::new(Vec::new()),
        }
    }

    /// Every attempt so far, in order.
    pub fn sent(&self) -> Vec<FauxRequest> {
        self.sent.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Streams `chars` characters per delta.
    pub fn chunk_chars(mut self, chars: usize) -> Self {
        self.chunk_chars = chars.max(1);
        self
    }

    /// Waits this long before each chunk (to make streaming observable, e.g. for abort tests).
    pub fn chunk_delay(mut self, delay: Duration) -> Self {
        self.chunk_delay = delay;
        self
    }

    /// Answers every request made when no scripted response is queued (instead of failing
    /// with "no more responses"): the offline agent's endless conversation.
    pub fn fallback(mut self, answer: impl Fn(&ProviderRequest) -> FauxResponse + Send + Sync + 'static) -> Self {
        self.fallback = Some(Box::new(answer));
        self
    }

    /// Queues responses.
    pub fn push(&self, responses: impl IntoIterator<Item = FauxResponse>) {
        self.queue.lock().unwrap_or_else(|e| e.into_inner()).extend(responses);
    }

    /// Responses still queued.
    pub fn remaining(&self) -> usize {
        self.queue.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    async fn pause(&self, response: &FauxResponse, cancel: &CancellationToken) -> Result<(), ProviderError> {
        let delay = response.chunk_delay.unwrap_or(self.chunk_delay);
        if delay.is_zero() {
            return if cancel.is_cancelled() { Err(ProviderError::Aborted) } else { Ok(()) };
        }
        tokio::select! {
            () = cancel.cancelled() => Err(ProviderError::Aborted),
            () = tokio::time::sleep(delay) => Ok(()),
        }
    }
}

fn chunks(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

fn estimate_tokens(chars: usize) -> u64 {
    chars.div_ceil(4) as u64
}

impl FauxProvider {
    /// Keeps what a real provider would have sent: the payload (or the extensions'
    /// replacement) and the headers after the extensions' changes.
    fn record_sent(&self, request: &ProviderRequest) {
        let mut headers: std::collections::BTreeMap<String, String> = self.default_headers().into_iter().collect();
        for (name, value) in &request.control.headers {
            match value {
                Some(value) => headers.insert(name.to_ascii_lowercase(), value.clone()),
                None => headers.remove(&name.to_ascii_lowercase()),
            };
        }
        let payload = request.control.payload.clone().unwrap_or_else(|| self.payload(request));
        self.sent.lock().unwrap_or_else(|e| e.into_inner()).push(FauxRequest { payload, headers });
    }

    /// Streams the scripted blocks in chunks (failing where the script says): the content, the
    /// bytes produced and the number of tool calls.
    async fn stream_blocks(
        &self,
        response: &FauxResponse,
        call_number: usize,
        cancel: &CancellationToken,
        sink: EventSink<'_>,
        fail_now: impl Fn(usize) -> Result<(), ProviderError>,
    ) -> Result<(Vec<ContentBlock>, usize, usize), ProviderError> {
        let (mut content, mut produced, mut tool_index, mut streamed_chunks) = (Vec::new(), 0usize, 0usize, 0usize);
        for block in &response.blocks {
            match block {
                FauxBlock::Text(text) | FauxBlock::Thinking(text) => {
                    let thinking = matches!(block, FauxBlock::Thinking(_));
                    for piece in chunks(text, self.chunk_chars) {
                        self.pause(response, cancel).await?;
                        produced += piece.len();
                        sink(if thinking { StreamEvent::ThinkingDelta(piece) } else { StreamEvent::TextDelta(piece) });
                        streamed_chunks += 1;
                        fail_now(streamed_chunks)?;
                    }
                    content.push(if thinking {
                        ContentBlock::Thinking { thinking: text.clone(), signature: None }
                    } else {
                        ContentBlock::Text { text: text.clone() }
                    });
                }
                FauxBlock::ToolCall { name, arguments } => {
                    self.pause(response, cancel).await?;
                    let id = format!("faux_call_{call_number}_{tool_index}");
                    sink(StreamEvent::ToolCallStart { index: tool_index, id: id.clone(), name: name.clone() });
                    let json = arguments.to_string();
                    produced += name.len() + json.len();
                    sink(StreamEvent::ToolCallDelta { index: tool_index, delta: json });
                    sink(StreamEvent::ToolCallEnd { index: tool_index });
                    streamed_chunks += 1;
                    fail_now(streamed_chunks)?;
                    content.push(ContentBlock::ToolCall { id, name: name.clone(), arguments: arguments.clone() });
                    tool_index += 1;
                }
            }
        }
        Ok((content, produced, tool_index))
    }
}

impl Provider for FauxProvider {
    fn name(&self) -> &str {
        "faux"
    }

    fn payload(&self, request: &ProviderRequest) -> serde_json::Value {
        serde_json::json!({
            "model": request.model.id,
            "system": request.system_prompt,
            "messages": request.messages,
            "tools": request.tools,
        })
    }

    fn default_headers(&self) -> Vec<(String, String)> {
        vec![("x-faux-version".to_owned(), "1".to_owned())]
    }

    fn attempt<'a>(&'a self, Attempt { request, cancel, sink }: Attempt<'a>) -> AttemptFuture<'a> {
        Box::pin(async move {
            self.record_sent(request);
            let response = self.queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
            let response = match (response, &self.fallback) {
                (Some(response), _) => response,
                (None, Some(answer)) => answer(request),
                (None, None) => return Err(ProviderError::NoMoreResponses),
            };
            if let Some(why) = check_sent(request, &response) {
                return Err(ProviderError::Provider(format!("faux script: the request {why}")));
            }
            let call_number = self.calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let fail_now = |streamed: usize| match &response.error {
                Some(error) if streamed >= response.fail_after_chunks => Err(error.clone()),
                _ => Ok(()),
            };
            let status = match &response.error {
                Some(error) if response.fail_after_chunks == 0 => error.status().unwrap_or(200),
                _ => 200,
            };
            request.control.observe_response(status, Vec::new()).await;
            fail_now(0)?;
            sink(StreamEvent::Start);
            let (content, produced, tool_index) =
                self.stream_blocks(&response, call_number, cancel, sink, fail_now).await?;
            fail_now(usize::MAX)?;
            let stop_reason = if tool_index > 0 { StopReason::ToolUse } else { StopReason::Stop };
            sink(StreamEvent::Done { stop_reason });
            let input_chars: usize = request.system_prompt.as_ref().map_or(0, String::len)
                + request.messages.iter().map(crate::message::Message::char_len).sum::<usize>();
            let usage = Usage::tokens(estimate_tokens(input_chars), estimate_tokens(produced), 0, 0);
            let message = AssistantMessage {
                content,
                api: request.model.api.as_str().to_owned(),
                provider: "faux".to_owned(),
                model: request.model.id.clone(),
                usage,
                stop_reason,
                error_message: None,
                timestamp: crate::time::now_millis(),
            };
            Ok(AttemptOutcome { message, status: None })
        })
    }
}

/// Why `request` does not match what `response` expects it to contain (and not contain);
/// `None` when it does. Texts match as sent or JSON-escaped, so they may contain newlines.
fn check_sent(request: &ProviderRequest, response: &FauxResponse) -> Option<String> {
    if response.expect.is_empty() && response.reject.is_empty() {
        return None;
    }
    let sent = format!(
        "{}\n{}",
        request.system_prompt.as_deref().unwrap_or_default(),
        serde_json::to_string(&request.messages).unwrap_or_default()
    );
    let contains = |text: &String| {
        let escaped = serde_json::to_string(text).unwrap_or_default();
        sent.contains(text.as_str()) || sent.contains(escaped.trim_matches('"'))
    };
    if let Some(missing) = response.expect.iter().find(|e| !contains(e)) {
        return Some(format!("does not contain {missing:?}"));
    }
    response.reject.iter().find(|r| contains(r)).map(|found| format!("contains {found:?}"))
}
