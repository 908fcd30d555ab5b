//! An abort on every provider API: the request stops while the answer streams (the server
//! holds the connection open), promptly, as `aborted`, with the span closed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use pi_agent::message::{Message, StopReason};
use pi_agent::provider::{
    AnthropicProvider, AwsAuth, BedrockProvider, GoogleProvider, MistralProvider, OpenAiProvider, Provider,
    ProviderError, ResponsesProvider, RetryPolicy, StreamEvent, request,
};
use pi_observe_core::Observability;
use pi_observe_core::testing::{CaptureSubscriber, assert_paired};
use support::{Reply, Server, aws_event, catalogued, http_config, named_sse, provider_request, sse};
use tokio_util::sync::CancellationToken;

/// Streams until the first text arrives, then aborts; the request must end as aborted (the
/// server never ends the stream: without the abort it would end by the 400 ms idle timeout, a
/// different error).
async fn aborts(provider: &dyn Provider, model: pi_agent::model::ModelInfo, name: &str) {
    let hub = Observability::new();
    let (capture, _sub) = CaptureSubscriber::attach(&hub);
    let cancel = CancellationToken::new();
    let abort = cancel.clone();
    let retry =
        RetryPolicy { max_retries: 3, base_delay: Duration::from_millis(1), max_delay: Duration::from_millis(5) };
    let req = provider_request(model, vec![Message::user("hi")], None);
    let mut on_event = |event: StreamEvent| {
        if matches!(event, StreamEvent::TextDelta(_)) {
            abort.cancel();
        }
    };
    let outcome = hub.scope(request(provider, &req, &retry, &cancel, &mut on_event)).await;
    assert_eq!(outcome.error, Some(ProviderError::Aborted), "{name}");
    assert_eq!(outcome.message.stop_reason, StopReason::Aborted, "{name}");
    assert_paired(&capture.take());
}

#[tokio::test]
async fn every_api_stops_streaming_when_aborted() {
    let text_sse = |data: &str| Reply::Stall(sse(&[data]));
    let server = Server::start(vec![text_sse(r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#)]).await;
    let provider = OpenAiProvider::new(http_config(&server.base), "openai").unwrap();
    aborts(&provider, catalogued("openai", "gpt-4o-mini"), "openai-completions").await;

    let server = Server::start(vec![Reply::Stall(named_sse(&[
        (
            "response.output_item.added",
            r#"{"type":"response.output_item.added","output_index":0,"item":{"id":"m","type":"message","content":[]}}"#,
        ),
        (
            "response.output_text.delta",
            r#"{"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":0,"delta":"Hel"}"#,
        ),
    ]))])
    .await;
    let provider = ResponsesProvider::openai(http_config(&server.base), "openai").unwrap();
    aborts(&provider, catalogued("openai", "gpt-5-mini"), "openai-responses").await;

    let server = Server::start(vec![Reply::Stall(named_sse(&[
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}"#,
        ),
    ]))])
    .await;
    let provider = AnthropicProvider::new(http_config(&server.base), "anthropic").unwrap();
    aborts(&provider, catalogued("anthropic", "claude-sonnet-4-5"), "anthropic-messages").await;

    let server =
        Server::start(vec![text_sse(r#"{"candidates":[{"content":{"parts":[{"text":"Hel"}],"role":"model"}}]}"#)])
            .await;
    let provider = GoogleProvider::new(http_config(&server.base), "google").unwrap();
    aborts(&provider, catalogued("google", "gemini-2.5-flash"), "google-generative-ai").await;

    let server =
        Server::start(vec![text_sse(r#"{"model":"m","choices":[{"index":0,"delta":{"content":"Hel"}}]}"#)]).await;
    let provider = MistralProvider::new(http_config(&server.base), "mistral").unwrap();
    aborts(&provider, catalogued("mistral", "devstral-medium-latest"), "mistral-conversations").await;

    let frames = vec![aws_event("contentBlockDelta", r#"{"contentBlockIndex":0,"delta":{"text":"Hel"}}"#)];
    let server = Server::start(vec![Reply::StallBinary("application/vnd.amazon.eventstream", frames)]).await;
    let auth = AwsAuth::Bearer("bedrock-key".into());
    let provider =
        BedrockProvider::with_auth(http_config(&server.base), "amazon-bedrock", auth, "us-east-1".into()).unwrap();
    aborts(&provider, catalogued("amazon-bedrock", "amazon.nova-pro-v1:0"), "bedrock-converse-stream").await;
}
