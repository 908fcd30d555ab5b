//! Google's Gemini API (`google-generative-ai`) against a loopback server replaying its wire
//! format: `streamGenerateContent?alt=sse`, unnamed SSE events, no end marker.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pi_agent::message::{ContentBlock, Message, StopReason};
use pi_agent::model::ModelInfo;
use pi_agent::provider::{GoogleProvider, ProviderError};
use serde_json::json;
use support::{Reply, Server, catalogued, http_config, provider_request, run, sse, tool_result};

const TURN: &[&str] = &[
    r#"{"candidates":[{"content":{"parts":[{"text":"The user wants a file.","thought":true}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":1500,"totalTokenCount":1500},"modelVersion":"gemini-2.5-pro","responseId":"r1"}"#,
    r#"{"candidates":[{"content":{"parts":[{"text":" Read it.","thought":true,"thoughtSignature":"c2lnbmF0dXJl"}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-pro","responseId":"r1"}"#,
    r#"{"candidates":[{"content":{"parts":[{"text":"Reading "}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-pro","responseId":"r1"}"#,
    r#"{"candidates":[{"content":{"parts":[{"text":"it."},{"functionCall":{"name":"read","args":{"path":"a.txt"}}}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":1500,"candidatesTokenCount":40,"totalTokenCount":1640,"cachedContentTokenCount":1000,"thoughtsTokenCount":100,"promptTokensDetails":[{"modality":"TEXT","tokenCount":1500}]},"modelVersion":"gemini-2.5-pro","responseId":"r1"}"#,
];

#[tokio::test]
async fn thoughts_text_a_function_call_and_cached_usage_are_read_and_priced() {
    let server = Server::start(vec![Reply::Sse(sse(TURN))]).await;
    let provider = GoogleProvider::new(http_config(&format!("{}/v1beta", server.base)), "google").unwrap();
    let gemini = catalogued("google", "gemini-2.5-pro");
    let (out, _) = run(&provider, &req(gemini.clone(), vec![Message::user("read a.txt")]), 0).await;
    assert!(out.error.is_none(), "{:?}", out.error);
    let m = &out.message;
    assert_eq!(m.thinking(), "The user wants a file. Read it.");
    assert!(matches!(&m.content[0], ContentBlock::Thinking { signature: Some(s), .. } if s == "c2lnbmF0dXJl"));
    assert_eq!(m.text(), "Reading it.");
    let calls = m.tool_calls();
    assert_eq!((calls[0].1.as_str(), calls[0].2.clone()), ("read", json!({"path": "a.txt"})));
    assert!(calls[0].0.starts_with("read_"), "an id is made up: {}", calls[0].0);
    assert_eq!(m.stop_reason, StopReason::ToolUse);
    assert_eq!(m.model, "gemini-2.5-pro");
    // Cached tokens are their own bucket; thoughts are billed as output.
    assert_eq!((m.usage.input, m.usage.output, m.usage.cache_read), (500, 140, 1000));
    let prices = gemini.cost.unwrap();
    let expected = (500.0 * prices.input + 140.0 * prices.output + 1000.0 * prices.cache_read) / 1e6;
    assert!((m.usage.cost.total - expected).abs() < 1e-12);

    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse");
    assert_eq!(sent.header("x-goog-api-key"), Some("sk-test-key-1234567890"));
    let body: serde_json::Value = serde_json::from_str(&sent.body).unwrap();
    assert_eq!(body["systemInstruction"], json!({"parts": [{"text": "be brief"}]}));
    assert_eq!(body["contents"][0], json!({"role": "user", "parts": [{"text": "read a.txt"}]}));
    assert_eq!(body["tools"][0]["functionDeclarations"][0]["name"], "read");
    assert_eq!(body["generationConfig"]["thinkingConfig"], json!({"includeThoughts": true, "thinkingBudget": 32768}));
}

#[tokio::test]
async fn the_next_turn_carries_the_thought_signature_and_the_function_response() {
    let first = Server::start(vec![Reply::Sse(sse(TURN))]).await;
    let provider = GoogleProvider::new(http_config(&first.base), "google").unwrap();
    let gemini = catalogued("google", "gemini-2.5-pro");
    let (out, _) = run(&provider, &req(gemini.clone(), vec![Message::user("read a.txt")]), 0).await;
    let (id, _, _) = out.message.tool_calls().remove(0);
    let result = tool_result(&id, "read", "hello", false);
    let second = Server::start(vec![Reply::Sse(sse(&TURN[3..]))]).await;
    let provider = GoogleProvider::new(http_config(&second.base), "google").unwrap();
    let messages = vec![Message::user("read a.txt"), Message::Assistant(out.message), result];
    let (out, _) = run(&provider, &req(gemini, messages), 0).await;
    assert!(out.error.is_none(), "{:?}", out.error);
    let body: serde_json::Value = serde_json::from_str(&second.requests()[0].body).unwrap();
    let model_turn = &body["contents"][1];
    assert_eq!(model_turn["role"], "model");
    assert_eq!(model_turn["parts"][0]["thought"], true);
    assert_eq!(model_turn["parts"][0]["thoughtSignature"], "c2lnbmF0dXJl");
    assert_eq!(model_turn["parts"][2]["functionCall"], json!({"name": "read", "args": {"path": "a.txt"}}));
    assert_eq!(
        body["contents"][2],
        json!({"role": "user", "parts": [{"functionResponse": {"name": "read", "response": {"output": "hello"}}}]})
    );
}

#[tokio::test]
async fn rate_limits_retry_and_broken_or_cut_streams_are_errors() {
    let limited = Reply::Status {
        status: 429,
        headers: vec![("retry-after".into(), "0".into())],
        body: r#"{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}"#.into(),
    };
    let server = Server::start(vec![limited, Reply::Sse(sse(TURN))]).await;
    let provider = GoogleProvider::new(http_config(&server.base), "google").unwrap();
    let (out, _) = run(&provider, &req(catalogued("google", "gemini-2.5-pro"), vec![Message::user("hi")]), 2).await;
    assert!(out.error.is_none(), "{:?}", out.error);
    assert_eq!(out.retries, 1);

    let mut broken = sse(&TURN[..2]);
    broken.extend(sse(&[r#"{"error":{"code":500,"message":"Internal error encountered.","status":"INTERNAL"}}"#]));
    let server = Server::start(vec![Reply::Sse(broken)]).await;
    let provider = GoogleProvider::new(http_config(&server.base), "google").unwrap();
    let (out, _) = run(&provider, &req(catalogued("google", "gemini-2.5-pro"), vec![Message::user("hi")]), 3).await;
    assert_eq!(out.error, Some(ProviderError::Provider("Internal error encountered.".into())));
    assert_eq!(server.requests().len(), 1, "no retry after thinking was streamed");

    let server = Server::start(vec![Reply::Sse(sse(&TURN[..3]))]).await;
    let provider = GoogleProvider::new(http_config(&server.base), "google").unwrap();
    let (out, _) = run(&provider, &req(catalogued("google", "gemini-2.5-pro"), vec![Message::user("hi")]), 0).await;
    assert!(matches!(out.error, Some(ProviderError::Stream(_))), "no finish reason: {:?}", out.error);

    let blocked = r#"{"candidates":[{"finishReason":"SAFETY","index":0}],"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9}}"#;
    let server = Server::start(vec![Reply::Sse(sse(&[blocked]))]).await;
    let provider = GoogleProvider::new(http_config(&server.base), "google").unwrap();
    let (out, _) = run(&provider, &req(catalogued("google", "gemini-2.5-pro"), vec![Message::user("hi")]), 0).await;
    assert_eq!(out.message.stop_reason, StopReason::Error);
}

fn req(model: ModelInfo, messages: Vec<Message>) -> pi_agent::provider::ProviderRequest {
    provider_request(model, messages, Some("high"))
}
