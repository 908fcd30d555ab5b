//! Amazon Bedrock's ConverseStream (`bedrock-converse-stream`) against a loopback server
//! replaying its wire format: AWS event-stream frames, requests signed with SigV4.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pi_agent::message::{ContentBlock, Message, StopReason};
use pi_agent::model::ModelInfo;
use pi_agent::provider::{AwsAuth, BedrockProvider, ProviderError};
use serde_json::json;
use support::{Reply, Server, aws_event, catalogued, http_config, provider_request, run, tool_result};

const EVENTSTREAM: &str = "application/vnd.amazon.eventstream";

fn req(model: ModelInfo, messages: Vec<Message>) -> pi_agent::provider::ProviderRequest {
    provider_request(model, messages, Some("medium"))
}

fn keys() -> AwsAuth {
    AwsAuth::Keys {
        access_key: "AKIDEXAMPLE".into(),
        secret_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
        session_token: Some("session-token-1".into()),
    }
}

fn turn() -> Vec<Vec<u8>> {
    vec![
        aws_event("messageStart", r#"{"p":"abc","role":"assistant"}"#),
        aws_event(
            "contentBlockDelta",
            r#"{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"Need the file."}},"p":"a"}"#,
        ),
        aws_event(
            "contentBlockDelta",
            r#"{"contentBlockIndex":0,"delta":{"reasoningContent":{"signature":"EqQBCkYIBxgCKkA"}},"p":"a"}"#,
        ),
        aws_event("contentBlockStop", r#"{"contentBlockIndex":0,"p":"a"}"#),
        aws_event("contentBlockDelta", r#"{"contentBlockIndex":1,"delta":{"text":"Reading it."},"p":"ab"}"#),
        aws_event("contentBlockStop", r#"{"contentBlockIndex":1,"p":"a"}"#),
        aws_event(
            "contentBlockStart",
            r#"{"contentBlockIndex":2,"start":{"toolUse":{"name":"read","toolUseId":"tooluse_abc123"}},"p":"a"}"#,
        ),
        aws_event(
            "contentBlockDelta",
            r#"{"contentBlockIndex":2,"delta":{"toolUse":{"input":"{\"path\": "}},"p":"a"}"#,
        ),
        aws_event("contentBlockDelta", r#"{"contentBlockIndex":2,"delta":{"toolUse":{"input":"\"a.txt\"}"}},"p":"a"}"#),
        aws_event("contentBlockStop", r#"{"contentBlockIndex":2,"p":"a"}"#),
        aws_event("messageStop", r#"{"p":"abcd","stopReason":"tool_use"}"#),
        aws_event(
            "metadata",
            r#"{"metrics":{"latencyMs":812},"p":"a","usage":{"cacheReadInputTokens":1000,"cacheWriteInputTokens":200,"inputTokens":50,"outputTokens":90,"totalTokens":1340}}"#,
        ),
    ]
}

#[tokio::test]
async fn a_signed_request_streams_reasoning_text_a_tool_call_and_cache_usage() {
    let server = Server::start(vec![Reply::Binary(EVENTSTREAM, turn())]).await;
    let mut config = http_config(&server.base);
    config.api_key = None;
    let provider = BedrockProvider::with_auth(config, "amazon-bedrock", keys(), "eu-west-1".into()).unwrap();
    let claude = catalogued("amazon-bedrock", "anthropic.claude-sonnet-4-5-20250929-v1:0");
    let (out, _) = run(&provider, &req(claude.clone(), vec![Message::user("read a.txt")]), 0).await;
    assert!(out.error.is_none(), "{:?}", out.error);
    let m = &out.message;
    assert_eq!((m.thinking(), m.text()), ("Need the file.".into(), "Reading it.".into()));
    assert!(matches!(&m.content[0], ContentBlock::Thinking { signature: Some(s), .. } if s == "EqQBCkYIBxgCKkA"));
    assert_eq!(m.tool_calls(), vec![("tooluse_abc123".into(), "read".into(), json!({"path": "a.txt"}))]);
    assert_eq!(m.stop_reason, StopReason::ToolUse);
    assert_eq!((m.usage.input, m.usage.output, m.usage.cache_read, m.usage.cache_write), (50, 90, 1000, 200));
    let p = claude.cost.unwrap();
    let expected = (50.0 * p.input + 90.0 * p.output + 1000.0 * p.cache_read + 200.0 * p.cache_write) / 1e6;
    assert!((m.usage.cost.total - expected).abs() < 1e-12);

    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream");
    let auth = sent.header("authorization").unwrap();
    assert!(auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/"), "{auth}");
    assert!(
        auth.contains(
            "/eu-west-1/bedrock/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-security-token"
        ),
        "{auth}"
    );
    assert_eq!(sent.header("x-amz-security-token"), Some("session-token-1"));
    assert!(sent.header("x-amz-date").is_some_and(|d| d.len() == 16 && d.ends_with('Z')));
    assert_eq!(sent.header("accept"), Some(EVENTSTREAM));
    let body: serde_json::Value = serde_json::from_str(&sent.body).unwrap();
    assert_eq!(body["system"], json!([{"text": "be brief"}]));
    assert_eq!(body["messages"][0], json!({"role": "user", "content": [{"text": "read a.txt"}]}));
    assert_eq!(body["toolConfig"]["tools"][0]["toolSpec"]["name"], "read");
    assert_eq!(body["additionalModelRequestFields"], json!({"thinking": {"type": "enabled", "budget_tokens": 8192}}));
}

#[tokio::test]
async fn the_next_turn_carries_the_signed_reasoning_the_tool_use_and_its_result() {
    let first = Server::start(vec![Reply::Binary(EVENTSTREAM, turn())]).await;
    let mut config = http_config(&first.base);
    config.api_key = None;
    let provider = BedrockProvider::with_auth(config.clone(), "amazon-bedrock", keys(), "us-east-1".into()).unwrap();
    let claude = catalogued("amazon-bedrock", "anthropic.claude-sonnet-4-5-20250929-v1:0");
    let (out, _) = run(&provider, &req(claude.clone(), vec![Message::user("read a.txt")]), 0).await;
    let second = Server::start(vec![Reply::Binary(EVENTSTREAM, turn())]).await;
    config.base_url = Some(second.base.clone());
    let provider = BedrockProvider::with_auth(config, "amazon-bedrock", keys(), "us-east-1".into()).unwrap();
    let messages = vec![
        Message::user("read a.txt"),
        Message::Assistant(out.message),
        tool_result("tooluse_abc123", "read", "hello", false),
    ];
    let (out, _) = run(&provider, &req(claude, messages), 0).await;
    assert!(out.error.is_none(), "{:?}", out.error);
    let body: serde_json::Value = serde_json::from_str(&second.requests()[0].body).unwrap();
    let assistant = &body["messages"][1]["content"];
    assert_eq!(
        assistant[0],
        json!({"reasoningContent": {"reasoningText": {"text": "Need the file.", "signature": "EqQBCkYIBxgCKkA"}}})
    );
    assert_eq!(
        assistant[2],
        json!({"toolUse": {"toolUseId": "tooluse_abc123", "name": "read", "input": {"path": "a.txt"}}})
    );
    assert_eq!(
        body["messages"][2],
        json!({"role": "user", "content": [{"toolResult": {"toolUseId": "tooluse_abc123", "content": [{"text": "hello"}], "status": "success"}}]})
    );
}

#[tokio::test]
async fn throttling_is_retried_exceptions_and_cut_streams_are_errors_and_api_keys_are_bearer() {
    let throttled = Reply::Status {
        status: 429,
        headers: vec![
            (
                "x-amzn-errortype".into(),
                "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/".into(),
            ),
            ("retry-after".into(), "0".into()),
        ],
        body: r#"{"message":"Too many requests, please wait before trying again."}"#.into(),
    };
    let server = Server::start(vec![throttled, Reply::Binary(EVENTSTREAM, turn())]).await;
    let mut config = http_config(&server.base);
    config.api_key = None;
    let provider = BedrockProvider::with_auth(
        config.clone(),
        "amazon-bedrock",
        AwsAuth::Bearer("bedrock-api-key-1".into()),
        "us-east-1".into(),
    )
    .unwrap();
    let model = catalogued("amazon-bedrock", "amazon.nova-pro-v1:0");
    let (out, _) = run(&provider, &req(model.clone(), vec![Message::user("hi")]), 2).await;
    assert!(out.error.is_none(), "{:?}", out.error);
    assert_eq!(out.retries, 1);
    assert_eq!(server.requests()[1].header("authorization"), Some("Bearer bedrock-api-key-1"));
    assert!(server.requests()[1].header("x-amz-date").is_none(), "an API key is not signed");

    let mut broken = turn()[..5].to_vec();
    broken.push(aws_event("exception:modelStreamErrorException", r#"{"message":"The model failed mid-stream"}"#));
    let server = Server::start(vec![Reply::Binary(EVENTSTREAM, broken)]).await;
    config.base_url = Some(server.base.clone());
    let provider = BedrockProvider::with_auth(config.clone(), "amazon-bedrock", keys(), "us-east-1".into()).unwrap();
    let (out, _) = run(&provider, &req(model.clone(), vec![Message::user("hi")]), 3).await;
    assert_eq!(
        out.error,
        Some(ProviderError::Provider("modelStreamErrorException: The model failed mid-stream".into()))
    );
    assert_eq!(server.requests().len(), 1);

    let mut cut = turn()[..5].concat();
    cut.truncate(cut.len() - 7);
    let server = Server::start(vec![Reply::Binary(EVENTSTREAM, vec![cut])]).await;
    config.base_url = Some(server.base.clone());
    let provider = BedrockProvider::with_auth(config, "amazon-bedrock", keys(), "us-east-1".into()).unwrap();
    let (out, _) = run(&provider, &req(model, vec![Message::user("hi")]), 0).await;
    assert!(matches!(out.error, Some(ProviderError::Stream(_))), "{:?}", out.error);
}
