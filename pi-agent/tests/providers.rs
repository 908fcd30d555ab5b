//! Providers against real HTTP servers on 127.0.0.1:0 replaying recorded-format SSE streams:
//! messages, usage and cost, retries, errors, malformed input and stalls.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod support;

use std::time::Duration;

use pi_agent::message::{ContentBlock, Message, StopReason};
use pi_agent::model::ModelInfo;
use pi_agent::provider::{
    AnthropicProvider, HttpConfig, OpenAiProvider, Provider, ProviderError, ProviderRequest, RequestOutcome,
    RetryPolicy, StreamEvent, request,
};
use pi_observe_core::testing::{CaptureSubscriber, assert_paired, span_named};
use pi_observe_core::{EventKind, ObsEvent, Observability, Value, names};
use serde_json::json;
use support::{Reply, Server, named_sse, sse};
use tokio_util::sync::CancellationToken;

use support::catalogued as model;

fn req(model: ModelInfo) -> ProviderRequest {
    ProviderRequest {
        model,
        system_prompt: Some("be brief".into()),
        messages: vec![Message::user("hi")],
        tools: pi_agent::tools::ToolRegistry::builtin(&["read"]).unwrap().specs(),
        reasoning: None,
        session_id: Some("s-1".into()),
        control: Default::default(),
        call_kind: Default::default(),
    }
}

use support::http_config as config;

fn fast_retry(max_retries: u32) -> RetryPolicy {
    RetryPolicy { max_retries, base_delay: Duration::from_millis(1), max_delay: Duration::from_millis(20) }
}

struct Outcome {
    result: RequestOutcome,
    stream: Vec<StreamEvent>,
    events: Vec<ObsEvent>,
}

async fn call(provider: &dyn Provider, request_: &ProviderRequest, retry: RetryPolicy) -> Outcome {
    let hub = Observability::new();
    let (capture, _sub) = CaptureSubscriber::attach(&hub);
    let mut stream = Vec::new();
    let cancel = CancellationToken::new();
    let result = hub.scope(request(provider, request_, &retry, &cancel, &mut |e| stream.push(e))).await;
    Outcome { result, stream, events: capture.take() }
}

const OPENAI_OK: &[&str] = &[
    r#"{"id":"c1","object":"chat.completion.chunk","model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
    r#"{"id":"c1","object":"chat.completion.chunk","model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}"#,
    r#"{"id":"c1","object":"chat.completion.chunk","model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"content":" world"},"finish_reason":null}]}"#,
    r#"{"id":"c1","object":"chat.completion.chunk","model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_abc","type":"function","function":{"name":"read","arguments":""}}]},"finish_reason":null}]}"#,
    r#"{"id":"c1","object":"chat.completion.chunk","model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":"}}]},"finish_reason":null}]}"#,
    r#"{"id":"c1","object":"chat.completion.chunk","model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"a.txt\"}"}}]},"finish_reason":null}]}"#,
    r#"{"id":"c1","object":"chat.completion.chunk","model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
    r#"{"id":"c1","object":"chat.completion.chunk","model":"gpt-4o-mini-2024-07-18","choices":[],"usage":{"prompt_tokens":120,"completion_tokens":30,"total_tokens":150,"prompt_tokens_details":{"cached_tokens":100}}}"#,
    "[DONE]",
];

#[tokio::test]
async fn openai_stream_yields_text_tool_call_usage_and_cost() {
    let server = Server::start(vec![Reply::Sse(sse(OPENAI_OK))]).await;
    let provider = OpenAiProvider::new(config(&format!("{}/v1", server.base)), "openai").unwrap();
    let out = call(&provider, &req(model("openai", "gpt-4o-mini")), fast_retry(0)).await;
    assert!(out.result.error.is_none(), "{:?}", out.result.error);
    let m = &out.result.message;
    assert_eq!(m.text(), "Hello world");
    assert_eq!(m.stop_reason, StopReason::ToolUse);
    assert_eq!(m.tool_calls(), vec![("call_abc".into(), "read".into(), json!({"path": "a.txt"}))]);
    assert_eq!((m.usage.input, m.usage.output, m.usage.cache_read, m.usage.total_tokens), (20, 30, 100, 150));
    let expected = (20.0 * 0.15 + 30.0 * 0.6 + 100.0 * 0.08) / 1e6; // the catalogue's prices
    assert!((m.usage.cost.total - expected).abs() < 1e-12, "{} vs {expected}", m.usage.cost.total);
    assert_eq!(m.model, "gpt-4o-mini-2024-07-18");
    assert!(out.stream.contains(&StreamEvent::TextDelta("Hello".into())));

    let sent = &server.requests()[0];
    assert_eq!((sent.method.as_str(), sent.path.as_str()), ("POST", "/v1/chat/completions"));
    assert_eq!(sent.header("authorization"), Some("Bearer sk-test-key-1234567890"));
    let body: serde_json::Value = serde_json::from_str(&sent.body).unwrap();
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(body["tools"][0]["function"]["name"], "read");

    let spans = assert_paired(&out.events);
    let span = span_named(&spans, names::PROVIDER_REQUEST);
    let traceparent = sent.header("traceparent").unwrap();
    assert_eq!(traceparent, format!("00-{}-{}-01", span.trace_id, span.span_id), "traceparent names the request span");
    assert_eq!(span.attributes.get(names::STATUS_CODE), Some(&Value::I64(200)));
    let port = server.base.rsplit(':').next().unwrap().parse::<i64>().unwrap();
    assert_eq!(span.attributes.get(names::SERVER_ADDRESS), Some(&Value::from("127.0.0.1")));
    assert_eq!(span.attributes.get(names::SERVER_PORT), Some(&Value::I64(port)));
    assert_eq!(span.attributes.get(names::CACHE_READ_TOKENS), Some(&Value::I64(100)));
    assert_eq!(span.attributes.get(names::RETRY_COUNT), Some(&Value::I64(0)));
    assert!(span.events.iter().any(|e| e.name == names::PROVIDER_FIRST_TOKEN));
    let dump: String = out.events.iter().map(ObsEvent::to_json).collect();
    assert!(!dump.contains("sk-test-key") && !dump.contains("Hello"), "key or completion leaked: {dump}");
}

const ANTHROPIC_OK: &[(&str, &str)] = &[
    (
        "message_start",
        r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":1000,"cache_read_input_tokens":2000,"output_tokens":1}}}"#,
    ),
    (
        "content_block_start",
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
    ),
    (
        "content_block_delta",
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me think."}}"#,
    ),
    (
        "content_block_delta",
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"abc"}}"#,
    ),
    ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
    ("content_block_start", r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#),
    ("ping", r#"{"type": "ping"}"#),
    (
        "content_block_delta",
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Reading it."}}"#,
    ),
    ("content_block_stop", r#"{"type":"content_block_stop","index":1}"#),
    (
        "content_block_start",
        r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"read","input":{}}}"#,
    ),
    (
        "content_block_delta",
        r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"path\": "}}"#,
    ),
    (
        "content_block_delta",
        r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"a.txt\"}"}}"#,
    ),
    ("content_block_stop", r#"{"type":"content_block_stop","index":2}"#),
    (
        "message_delta",
        r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":42}}"#,
    ),
    ("message_stop", r#"{"type":"message_stop"}"#),
];

#[tokio::test]
async fn anthropic_stream_yields_thinking_text_tool_use_and_cache_tokens() {
    let server = Server::start(vec![Reply::Sse(named_sse(ANTHROPIC_OK))]).await;
    let provider = AnthropicProvider::new(config(&server.base), "anthropic").unwrap();
    let out = call(&provider, &req(model("anthropic", "claude-sonnet-4-5")), fast_retry(0)).await;
    assert!(out.result.error.is_none(), "{:?}", out.result.error);
    let m = &out.result.message;
    assert_eq!(m.thinking(), "Let me think.");
    assert_eq!(m.text(), "Reading it.");
    assert_eq!(m.stop_reason, StopReason::ToolUse);
    assert!(
        matches!(&m.content[2], ContentBlock::ToolCall { id, arguments, .. } if id == "toolu_1" && arguments == &json!({"path": "a.txt"}))
    );
    assert_eq!((m.usage.input, m.usage.output, m.usage.cache_read, m.usage.cache_write), (25, 42, 2000, 1000));
    let expected = (25.0 * 3.0 + 42.0 * 15.0 + 2000.0 * 0.3 + 1000.0 * 3.75) / 1e6;
    assert!((m.usage.cost.total - expected).abs() < 1e-12);
    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some("sk-test-key-1234567890"));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert!(sent.header("traceparent").is_some());
    let spans = assert_paired(&out.events);
    let span = span_named(&spans, names::PROVIDER_REQUEST);
    assert_eq!(span.attributes.get(names::CACHE_WRITE_TOKENS), Some(&Value::I64(1000)));
}

#[tokio::test]
async fn rate_limit_with_retry_after_is_retried_then_succeeds() {
    let limited = Reply::Status {
        status: 429,
        headers: vec![("retry-after".into(), "0".into())],
        body: r#"{"error":{"message":"Rate limit reached"}}"#.into(),
    };
    let server = Server::start(vec![limited.clone(), limited, Reply::Sse(sse(OPENAI_OK))]).await;
    let provider = OpenAiProvider::new(config(&server.base), "openai").unwrap();
    let out = call(&provider, &req(model("openai", "gpt-4o-mini")), fast_retry(3)).await;
    assert!(out.result.error.is_none());
    assert_eq!(out.result.retries, 2);
    assert_eq!(server.requests().len(), 3);
    let retries: Vec<_> =
        out.events.iter().filter(|e| e.kind == EventKind::Event && e.name == names::PROVIDER_RETRY).collect();
    assert_eq!(retries.len(), 2);
    assert_eq!(retries[0].payload.get(names::STATUS_CODE), Some(&Value::I64(429)));
    assert_eq!(retries[0].payload.get(names::DELAY_MS), Some(&Value::I64(0)), "Retry-After: 0 honoured");
    let spans = assert_paired(&out.events);
    assert_eq!(span_named(&spans, names::PROVIDER_REQUEST).attributes.get(names::RETRY_COUNT), Some(&Value::I64(2)));
}

#[tokio::test]
async fn unauthorized_is_not_retried() {
    let server = Server::start(vec![Reply::Status {
        status: 401,
        headers: vec![],
        body: r#"{"error":{"message":"Incorrect API key provided"}}"#.into(),
    }])
    .await;
    let provider = OpenAiProvider::new(config(&server.base), "openai").unwrap();
    let out = call(&provider, &req(model("openai", "gpt-4o-mini")), fast_retry(3)).await;
    assert!(
        matches!(&out.result.error, Some(ProviderError::Auth { status: 401, message }) if message == "Incorrect API key provided")
    );
    assert_eq!(server.requests().len(), 1);
    assert_eq!(out.result.message.stop_reason, StopReason::Error);
    let spans = assert_paired(&out.events);
    assert_eq!(span_named(&spans, names::PROVIDER_REQUEST).error.as_ref().unwrap().name, "AuthError");
}

#[tokio::test]
async fn server_errors_are_retried_up_to_the_cap() {
    let boom = Reply::Status { status: 503, headers: vec![], body: "overloaded".into() };
    let server = Server::start(vec![boom.clone(), boom.clone(), boom.clone(), boom]).await;
    let provider = OpenAiProvider::new(config(&server.base), "openai").unwrap();
    let out = call(&provider, &req(model("openai", "gpt-4o-mini")), fast_retry(2)).await;
    assert!(matches!(out.result.error, Some(ProviderError::Http { status: 503, .. })));
    assert_eq!(out.result.retries, 2);
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn connection_reset_is_a_network_error_and_retried() {
    let server = Server::start(vec![Reply::Reset, Reply::Sse(sse(OPENAI_OK))]).await;
    let provider = OpenAiProvider::new(config(&server.base), "openai").unwrap();
    let out = call(&provider, &req(model("openai", "gpt-4o-mini")), fast_retry(1)).await;
    assert!(out.result.error.is_none(), "{:?}", out.result.error);
    assert_eq!(out.result.retries, 1);
}

#[tokio::test]
async fn error_mid_stream_fails_without_retrying_duplicated_output() {
    let mut pieces = sse(&OPENAI_OK[..3]);
    pieces.extend(sse(&[r#"{"error":{"message":"The server had an error","type":"server_error"}}"#]));
    let server = Server::start(vec![Reply::Sse(pieces), Reply::Sse(sse(OPENAI_OK))]).await;
    let provider = OpenAiProvider::new(config(&server.base), "openai").unwrap();
    let out = call(&provider, &req(model("openai", "gpt-4o-mini")), fast_retry(3)).await;
    assert_eq!(out.result.error, Some(ProviderError::Provider("The server had an error".into())));
    assert_eq!(server.requests().len(), 1, "no retry after text was streamed");
}

#[tokio::test]
async fn stalled_stream_times_out() {
    let server = Server::start(vec![Reply::Stall(sse(&OPENAI_OK[..2]))]).await;
    let provider = OpenAiProvider::new(config(&server.base), "openai").unwrap();
    let out = call(&provider, &req(model("openai", "gpt-4o-mini")), fast_retry(0)).await;
    assert!(matches!(out.result.error, Some(ProviderError::Timeout(_))), "{:?}", out.result.error);
    let spans = assert_paired(&out.events);
    assert_eq!(span_named(&spans, names::PROVIDER_REQUEST).attributes.get(names::TIMEOUT), Some(&Value::Bool(true)));
}

#[tokio::test]
async fn malformed_and_truncated_streams_are_typed_errors_never_panics() {
    let openai_cases: Vec<Vec<String>> = vec![
        vec!["data: {not json\n\n".into()],
        sse(&OPENAI_OK[..3]),                                                 // ends before [DONE]
        vec!["data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}".into()], // torn mid-event
        sse(&[r#"{"choices":[{"delta":{"tool_calls":[{"index":7,"function":{"name":"x"}}]}}]}"#]),
        vec!["data: \u{0}\u{1}\n\n".into()],
        sse(&[r#"{"choices":"nope"}"#, "[DONE]"]),
    ];
    for (i, pieces) in openai_cases.into_iter().enumerate() {
        let server = Server::start(vec![Reply::Sse(pieces)]).await;
        let provider = OpenAiProvider::new(config(&server.base), "openai").unwrap();
        let out = call(&provider, &req(model("openai", "gpt-4o-mini")), fast_retry(0)).await;
        assert_paired(&out.events);
        if i < 5 {
            assert!(matches!(out.result.error, Some(ProviderError::Stream(_))), "case {i}: {:?}", out.result.error);
        }
    }
    let anthropic_cases: Vec<Vec<String>> = vec![
        named_sse(&[(
            "content_block_delta",
            r#"{"type":"content_block_delta","index":5,"delta":{"type":"text_delta","text":"x"}}"#,
        )]),
        named_sse(&[("message_start", "{oops")]),
        named_sse(&ANTHROPIC_OK[..4]),
        named_sse(&[("error", r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#)]),
    ];
    for (i, pieces) in anthropic_cases.into_iter().enumerate() {
        let server = Server::start(vec![Reply::Sse(pieces)]).await;
        let provider = AnthropicProvider::new(config(&server.base), "anthropic").unwrap();
        let out = call(&provider, &req(model("anthropic", "claude-sonnet-4-5")), fast_retry(0)).await;
        assert_paired(&out.events);
        assert!(out.result.error.is_some(), "anthropic case {i} did not fail");
    }
}

#[test]
fn missing_keys_are_configuration_errors_naming_the_variable() {
    let openai = OpenAiProvider::new(HttpConfig { api_key: None, ..HttpConfig::default() }, "openai");
    if std::env::var_os("OPENAI_API_KEY").is_none() {
        assert!(matches!(openai, Err(ProviderError::Config(m)) if m.contains("OPENAI_API_KEY")));
    }
    // An OpenAI-compatible server needs no key.
    assert!(
        OpenAiProvider::new(
            HttpConfig { base_url: Some("http://127.0.0.1:1".into()), ..HttpConfig::default() },
            "local"
        )
        .is_ok()
    );
}

#[tokio::test]
async fn the_reasoning_level_is_exported_only_from_pis_vocabulary() {
    // An embedder or extension may set any text as the level: only pi's own names leave as safe.
    for (level, exported) in [("high", "high"), ("sk-ant-api03-secretsecretsecretsecret", "invalid")] {
        let faux = pi_agent::provider::FauxProvider::new();
        faux.push([pi_agent::provider::FauxResponse::text("ok")]);
        let mut request = req(model("faux", "faux-1"));
        request.reasoning = Some(level.into());
        let out = call(&faux, &request, fast_retry(0)).await;
        let spans = assert_paired(&out.events);
        let span = span_named(&spans, names::PROVIDER_REQUEST);
        assert_eq!(span.attributes.get(names::REASONING), Some(&Value::from(exported)), "{level}");
        assert!(!format!("{:?}", out.events).contains("secretsecret"), "the level's text reached a record");
    }
}
