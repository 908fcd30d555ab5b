//! Mistral (`mistral-conversations`) against a loopback server replaying its chat stream:
//! `data:` chunks in snake case, content as text or chunk lists, `[DONE]` at the end.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pi_agent::message::{ContentBlock, Message, StopReason};
use pi_agent::model::ModelInfo;
use pi_agent::provider::{MistralProvider, ProviderError};
use serde_json::json;
use support::{Reply, Server, catalogued, http_config, provider_request, run, sse, tool_result};

const TURN: &[&str] = &[
    r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"magistral-medium-2509","choices":[{"index":0,"delta":{"role":"assistant","content":[{"type":"thinking","thinking":[{"type":"text","text":"Need the file."}]}]},"finish_reason":null}]}"#,
    r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"magistral-medium-2509","choices":[{"index":0,"delta":{"content":"Reading it."},"finish_reason":null}]}"#,
    r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"magistral-medium-2509","choices":[{"index":0,"delta":{"tool_calls":[{"id":"D681PevKs","function":{"name":"read","arguments":"{\"path\": \"a.txt\"}"},"index":0}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":300,"total_tokens":350,"completion_tokens":50}}"#,
    "[DONE]",
];

#[tokio::test]
async fn thinking_text_a_tool_call_and_usage_are_read_and_priced() {
    let server = Server::start(vec![Reply::Sse(sse(TURN))]).await;
    let provider = MistralProvider::new(http_config(&server.base), "mistral").unwrap();
    let magistral = catalogued("mistral", "magistral-medium-latest");
    let (out, _) = run(&provider, &req(magistral.clone(), vec![Message::user("read a.txt")]), 0).await;
    assert!(out.error.is_none(), "{:?}", out.error);
    let m = &out.message;
    assert_eq!((m.thinking(), m.text()), ("Need the file.".into(), "Reading it.".into()));
    assert_eq!(m.tool_calls(), vec![("D681PevKs".into(), "read".into(), json!({"path": "a.txt"}))]);
    assert_eq!(m.stop_reason, StopReason::ToolUse);
    assert_eq!(m.model, "magistral-medium-2509");
    assert_eq!((m.usage.input, m.usage.output), (300, 50));
    let prices = magistral.cost.unwrap();
    assert!((m.usage.cost.total - (300.0 * prices.input + 50.0 * prices.output) / 1e6).abs() < 1e-12);

    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.header("authorization"), Some("Bearer sk-test-key-1234567890"));
    let body: serde_json::Value = serde_json::from_str(&sent.body).unwrap();
    assert_eq!(body["prompt_mode"], "reasoning");
    assert_eq!(body["messages"][0], json!({"role": "system", "content": "be brief"}));
    assert_eq!(body["tools"][0]["function"]["name"], "read");
}

#[tokio::test]
async fn tool_results_and_foreign_call_ids_go_back_as_mistral_takes_them() {
    let server = Server::start(vec![Reply::Sse(sse(&TURN[1..]))]).await;
    let provider = MistralProvider::new(http_config(&server.base), "mistral").unwrap();
    // A call made by another provider earlier in the session: its id is rewritten alike twice.
    let earlier = pi_agent::message::AssistantMessage {
        content: vec![ContentBlock::ToolCall {
            id: "call_1|fc_1".into(),
            name: "read".into(),
            arguments: json!({"path": "a"}),
        }],
        api: "openai-responses".into(),
        provider: "openai".into(),
        model: "gpt-5-mini".into(),
        usage: Default::default(),
        stop_reason: StopReason::ToolUse,
        error_message: None,
        timestamp: 0,
    };
    let result = tool_result("call_1|fc_1", "read", "no such file", true);
    let messages = vec![Message::user("read a"), Message::Assistant(earlier), result];
    let (out, _) = run(&provider, &req(catalogued("mistral", "devstral-medium-latest"), messages), 0).await;
    assert!(out.error.is_none(), "{:?}", out.error);
    let body: serde_json::Value = serde_json::from_str(&server.requests()[0].body).unwrap();
    let call_id = body["messages"][2]["tool_calls"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(call_id.len(), 9);
    assert_eq!(body["messages"][3]["tool_call_id"], call_id);
    assert_eq!(body["messages"][3]["content"][0]["text"], "[tool error] no such file");
    assert_eq!(body["messages"][3]["name"], "read");
    assert!(body.get("prompt_mode").is_none(), "devstral does not reason");
}

#[tokio::test]
async fn rate_limits_retry_and_broken_streams_are_errors() {
    let limited = Reply::Status {
        status: 429,
        headers: vec![("retry-after".into(), "0".into())],
        body: r#"{"object":"error","message":"Requests rate limit exceeded","type":"rate_limited","param":null,"code":"1300"}"#.into(),
    };
    let server = Server::start(vec![limited, Reply::Sse(sse(TURN))]).await;
    let provider = MistralProvider::new(http_config(&server.base), "mistral").unwrap();
    let (out, _) =
        run(&provider, &req(catalogued("mistral", "magistral-medium-latest"), vec![Message::user("hi")]), 2).await;
    assert!(out.error.is_none(), "{:?}", out.error);
    assert_eq!(out.retries, 1);

    let mut broken = sse(&TURN[..2]);
    broken.extend(sse(&[r#"{"object":"error","message":"Internal server error","type":"internal_error"}"#]));
    let server = Server::start(vec![Reply::Sse(broken)]).await;
    let provider = MistralProvider::new(http_config(&server.base), "mistral").unwrap();
    let (out, _) =
        run(&provider, &req(catalogued("mistral", "magistral-medium-latest"), vec![Message::user("hi")]), 3).await;
    assert_eq!(out.error, Some(ProviderError::Provider("Internal server error".into())));
    assert_eq!(server.requests().len(), 1);

    let server = Server::start(vec![Reply::Sse(sse(&TURN[..2]))]).await;
    let provider = MistralProvider::new(http_config(&server.base), "mistral").unwrap();
    let (out, _) =
        run(&provider, &req(catalogued("mistral", "magistral-medium-latest"), vec![Message::user("hi")]), 0).await;
    assert!(matches!(out.error, Some(ProviderError::Stream(_))), "{:?}", out.error);
}

fn req(model: ModelInfo, messages: Vec<Message>) -> pi_agent::provider::ProviderRequest {
    provider_request(model, messages, Some("medium"))
}
