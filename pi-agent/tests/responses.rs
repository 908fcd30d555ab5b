//! The OpenAI Responses API (`openai-responses`, `azure-openai-responses`) against a loopback
//! server replaying its wire format: named SSE events whose `data` carries the same `type`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pi_agent::message::{AssistantMessage, ContentBlock, Message, StopReason};
use pi_agent::model::ModelInfo;
use pi_agent::provider::{ProviderError, ResponsesProvider};
use serde_json::json;
use support::{Reply, Server, named_sse, provider_request, run, tool_result};

use support::catalogued as model;

use support::http_config as config;

/// A reasoning model's turn: a reasoning summary (with encrypted content), text, a function call
/// and usage with cached input, as OpenAI streams it.
const TURN: &[(&str, &str)] = &[
    (
        "response.created",
        r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","model":"gpt-5-mini-2025-08-07","output":[],"usage":null}}"#,
    ),
    (
        "response.in_progress",
        r#"{"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_1","status":"in_progress"}}"#,
    ),
    (
        "response.output_item.added",
        r#"{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}"#,
    ),
    (
        "response.reasoning_summary_part.added",
        r#"{"type":"response.reasoning_summary_part.added","sequence_number":3,"item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}}"#,
    ),
    (
        "response.reasoning_summary_text.delta",
        r#"{"type":"response.reasoning_summary_text.delta","sequence_number":4,"item_id":"rs_1","output_index":0,"summary_index":0,"delta":"Need the file."}"#,
    ),
    (
        "response.reasoning_summary_text.done",
        r#"{"type":"response.reasoning_summary_text.done","sequence_number":5,"item_id":"rs_1","output_index":0,"summary_index":0,"text":"Need the file."}"#,
    ),
    (
        "response.reasoning_summary_part.done",
        r#"{"type":"response.reasoning_summary_part.done","sequence_number":6,"item_id":"rs_1","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":"Need the file."}}"#,
    ),
    (
        "response.output_item.done",
        r#"{"type":"response.output_item.done","sequence_number":7,"output_index":0,"item":{"id":"rs_1","type":"reasoning","encrypted_content":"gAAAAABencrypted","summary":[{"type":"summary_text","text":"Need the file."}]}}"#,
    ),
    (
        "response.output_item.added",
        r#"{"type":"response.output_item.added","sequence_number":8,"output_index":1,"item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"}}"#,
    ),
    (
        "response.content_part.added",
        r#"{"type":"response.content_part.added","sequence_number":9,"item_id":"msg_1","output_index":1,"content_index":0,"part":{"type":"output_text","annotations":[],"text":""}}"#,
    ),
    (
        "response.output_text.delta",
        r#"{"type":"response.output_text.delta","sequence_number":10,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"Reading "}"#,
    ),
    (
        "response.output_text.delta",
        r#"{"type":"response.output_text.delta","sequence_number":11,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"it."}"#,
    ),
    (
        "response.output_text.done",
        r#"{"type":"response.output_text.done","sequence_number":12,"item_id":"msg_1","output_index":1,"content_index":0,"text":"Reading it."}"#,
    ),
    (
        "response.output_item.done",
        r#"{"type":"response.output_item.done","sequence_number":13,"output_index":1,"item":{"id":"msg_1","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"text":"Reading it."}],"role":"assistant"}}"#,
    ),
    (
        "response.output_item.added",
        r#"{"type":"response.output_item.added","sequence_number":14,"output_index":2,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"read"}}"#,
    ),
    (
        "response.function_call_arguments.delta",
        r#"{"type":"response.function_call_arguments.delta","sequence_number":15,"item_id":"fc_1","output_index":2,"delta":"{\"path\":"}"#,
    ),
    (
        "response.function_call_arguments.delta",
        r#"{"type":"response.function_call_arguments.delta","sequence_number":16,"item_id":"fc_1","output_index":2,"delta":"\"a.txt\"}"}"#,
    ),
    (
        "response.function_call_arguments.done",
        r#"{"type":"response.function_call_arguments.done","sequence_number":17,"item_id":"fc_1","output_index":2,"arguments":"{\"path\":\"a.txt\"}"}"#,
    ),
    (
        "response.output_item.done",
        r#"{"type":"response.output_item.done","sequence_number":18,"output_index":2,"item":{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"path\":\"a.txt\"}","call_id":"call_1","name":"read"}}"#,
    ),
    (
        "response.completed",
        r#"{"type":"response.completed","sequence_number":19,"response":{"id":"resp_1","status":"completed","model":"gpt-5-mini-2025-08-07","usage":{"input_tokens":1200,"input_tokens_details":{"cached_tokens":1000},"output_tokens":80,"output_tokens_details":{"reasoning_tokens":64},"total_tokens":1280}}}"#,
    ),
];

#[tokio::test]
async fn a_reasoning_turn_with_a_function_call_and_cached_input_is_read_and_priced() {
    let server = Server::start(vec![Reply::Sse(named_sse(TURN))]).await;
    let provider = ResponsesProvider::openai(config(&format!("{}/v1", server.base)), "openai").unwrap();
    let gpt = model("openai", "gpt-5-mini");
    let (out, streamed) = run(&provider, &req(gpt.clone(), vec![Message::user("read a.txt")]), 0).await;
    assert!(out.error.is_none(), "{:?}", out.error);
    let m = &out.message;
    assert_eq!(m.text(), "Reading it.");
    assert_eq!(m.thinking(), "Need the file.");
    assert_eq!(m.tool_calls(), vec![("call_1|fc_1".into(), "read".into(), json!({"path": "a.txt"}))]);
    assert_eq!(m.stop_reason, StopReason::ToolUse);
    assert_eq!(m.model, "gpt-5-mini-2025-08-07");
    assert_eq!((m.usage.input, m.usage.output, m.usage.cache_read, m.usage.total_tokens), (200, 80, 1000, 1280));
    let prices = gpt.cost.unwrap();
    let expected = (200.0 * prices.input + 80.0 * prices.output + 1000.0 * prices.cache_read) / 1e6;
    assert!((m.usage.cost.total - expected).abs() < 1e-12);
    assert!(streamed.len() >= 5, "deltas streamed as they came");

    let sent = &server.requests()[0];
    assert_eq!((sent.method.as_str(), sent.path.as_str()), ("POST", "/v1/responses"));
    assert_eq!(sent.header("authorization"), Some("Bearer sk-test-key-1234567890"));
    let body: serde_json::Value = serde_json::from_str(&sent.body).unwrap();
    assert_eq!(body["input"][0], json!({"role": "developer", "content": "be brief"}));
    assert_eq!(body["input"][1]["content"][0], json!({"type": "input_text", "text": "read a.txt"}));
    assert_eq!((body["stream"].clone(), body["store"].clone()), (json!(true), json!(false)));
    assert_eq!(body["reasoning"], json!({"effort": "medium", "summary": "auto"}));
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["name"], "read");
}

#[tokio::test]
async fn the_next_turn_carries_the_encrypted_reasoning_the_call_and_its_output_back() {
    let first = Server::start(vec![Reply::Sse(named_sse(TURN))]).await;
    let provider = ResponsesProvider::openai(config(&format!("{}/v1", first.base)), "openai").unwrap();
    let gpt = model("openai", "gpt-5-mini");
    let (out, _) = run(&provider, &req(gpt.clone(), vec![Message::user("read a.txt")]), 0).await;
    let assistant: AssistantMessage = out.message;
    assert!(
        matches!(&assistant.content[0], ContentBlock::Thinking { signature: Some(item), .. } if item.contains("gAAAAABencrypted"))
    );
    let result = tool_result("call_1|fc_1", "read", "hello", false);

    let second =
        Server::start(vec![Reply::Sse(named_sse(&TURN[..1]).into_iter().chain(named_sse(&[TURN[19]])).collect())])
            .await;
    let provider = ResponsesProvider::openai(config(&format!("{}/v1", second.base)), "openai").unwrap();
    let messages = vec![Message::user("read a.txt"), Message::Assistant(assistant), result];
    let (out, _) = run(&provider, &req(gpt, messages), 0).await;
    assert!(out.error.is_none(), "{:?}", out.error);
    let body: serde_json::Value = serde_json::from_str(&second.requests()[0].body).unwrap();
    let input = body["input"].as_array().unwrap();
    let reasoning = input.iter().find(|i| i["type"] == "reasoning").unwrap();
    assert_eq!(reasoning["encrypted_content"], "gAAAAABencrypted");
    let text = input.iter().find(|i| i["type"] == "message").unwrap();
    assert_eq!(text["content"][0], json!({"type": "output_text", "text": "Reading it.", "annotations": []}));
    let call = input.iter().find(|i| i["type"] == "function_call").unwrap();
    assert_eq!((call["call_id"].clone(), call["id"].clone()), (json!("call_1"), json!("fc_1")));
    assert_eq!(call["arguments"], r#"{"path":"a.txt"}"#);
    let output = input.iter().find(|i| i["type"] == "function_call_output").unwrap();
    assert_eq!(output, &json!({"type": "function_call_output", "call_id": "call_1", "output": "hello"}));
}

#[tokio::test]
async fn rate_limits_are_retried_after_retry_after_and_errors_in_the_stream_are_not() {
    let limited = Reply::Status {
        status: 429,
        headers: vec![("retry-after".into(), "0".into())],
        body: r#"{"error":{"message":"Rate limit reached for gpt-5-mini","type":"requests","code":"rate_limit_exceeded"}}"#.into(),
    };
    let server = Server::start(vec![limited, Reply::Sse(named_sse(TURN))]).await;
    let provider = ResponsesProvider::openai(config(&server.base), "openai").unwrap();
    let (out, _) = run(&provider, &req(model("openai", "gpt-5-mini"), vec![Message::user("hi")]), 2).await;
    assert!(out.error.is_none(), "{:?}", out.error);
    assert_eq!(out.retries, 1);

    let mut broken = named_sse(&TURN[..12]);
    broken.extend(named_sse(&[("error", r#"{"type":"error","sequence_number":12,"code":"server_error","message":"The server had an error","param":null}"#)]));
    let server = Server::start(vec![Reply::Sse(broken), Reply::Sse(named_sse(TURN))]).await;
    let provider = ResponsesProvider::openai(config(&server.base), "openai").unwrap();
    let (out, _) = run(&provider, &req(model("openai", "gpt-5-mini"), vec![Message::user("hi")]), 3).await;
    assert_eq!(out.error, Some(ProviderError::Provider("Error Code server_error: The server had an error".into())));
    assert_eq!(server.requests().len(), 1, "no retry after text was streamed");

    let failed = named_sse(&[
        TURN[0],
        (
            "response.failed",
            r#"{"type":"response.failed","response":{"id":"resp_1","status":"failed","error":{"code":"server_error","message":"boom"}}}"#,
        ),
    ]);
    let server = Server::start(vec![Reply::Sse(failed)]).await;
    let provider = ResponsesProvider::openai(config(&server.base), "openai").unwrap();
    let (out, _) = run(&provider, &req(model("openai", "gpt-5-mini"), vec![Message::user("hi")]), 0).await;
    assert_eq!(out.error, Some(ProviderError::Provider("server_error: boom".into())));
    assert_eq!(out.message.stop_reason, StopReason::Error);

    let cut = named_sse(&[
        TURN[0],
        (
            "response.incomplete",
            r#"{"type":"response.incomplete","response":{"id":"resp_1","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":10,"output_tokens":5,"total_tokens":15}}}"#,
        ),
    ]);
    let server = Server::start(vec![Reply::Sse(cut)]).await;
    let provider = ResponsesProvider::openai(config(&server.base), "openai").unwrap();
    let (out, _) = run(&provider, &req(model("openai", "gpt-5-mini"), vec![Message::user("hi")]), 0).await;
    assert_eq!(out.message.stop_reason, StopReason::Length);
    assert_eq!(out.message.usage.output, 5);

    let server = Server::start(vec![Reply::Sse(named_sse(&TURN[..5]))]).await;
    let provider = ResponsesProvider::openai(config(&server.base), "openai").unwrap();
    let (out, _) = run(&provider, &req(model("openai", "gpt-5-mini"), vec![Message::user("hi")]), 0).await;
    assert!(matches!(out.error, Some(ProviderError::Stream(_))), "a cut stream: {:?}", out.error);
}

#[tokio::test]
async fn azure_sends_its_key_header_api_version_and_deployment() {
    let server = Server::start(vec![Reply::Sse(named_sse(TURN))]).await;
    let base = format!("{}/openai/v1", server.base);
    let provider = ResponsesProvider::azure(config(&base), "azure-openai-responses", None)
        .unwrap()
        .deployments("gpt-5-mini=team-mini, other=x");
    let (out, _) =
        run(&provider, &req(model("azure-openai-responses", "gpt-5-mini"), vec![Message::user("hi")]), 0).await;
    assert!(out.error.is_none(), "{:?}", out.error);
    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/openai/v1/responses?api-version=v1");
    assert_eq!(sent.header("api-key"), Some("sk-test-key-1234567890"));
    assert_eq!(sent.header("authorization"), None);
    let body: serde_json::Value = serde_json::from_str(&sent.body).unwrap();
    assert_eq!(body["model"], "team-mini");
}

fn req(model: ModelInfo, messages: Vec<Message>) -> pi_agent::provider::ProviderRequest {
    provider_request(model, messages, Some("medium"))
}
