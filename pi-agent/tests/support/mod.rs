//! A scripted HTTP/1.1 server on 127.0.0.1:0 for provider tests: each connection gets the next
//! reply from a queue, and every request is recorded.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the server does with one connection.
#[derive(Clone, Debug)]
pub enum Reply {
    /// 200 with an SSE body sent in these pieces, then close.
    Sse(Vec<String>),
    /// A status with headers and a body.
    Status { status: u16, headers: Vec<(String, String)>, body: String },
    /// 200 and these SSE pieces, then hold the connection open without sending more.
    Stall(Vec<String>),
    /// Close the connection without answering.
    Reset,
    /// 200 with this content type and a binary body sent in these pieces (AWS event-stream
    /// frames), then close.
    Binary(&'static str, Vec<Vec<u8>>),
    /// 200 with this content type and these pieces, then hold the connection open.
    StallBinary(&'static str, Vec<Vec<u8>>),
}

/// A request as received.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

pub struct Server {
    pub base: String,
    pub requests: Arc<Mutex<Vec<Recorded>>>,
    replies: Arc<Mutex<VecDeque<Reply>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Server {
    pub async fn start(replies: Vec<Reply>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let replies = Arc::new(Mutex::new(VecDeque::from(replies)));
        let (req, rep) = (requests.clone(), replies.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else { break };
                let (req, rep) = (req.clone(), rep.clone());
                tokio::spawn(async move { serve(socket, req, rep).await });
            }
        });
        Server { base, requests, replies, task }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

async fn read_request(socket: &mut TcpStream) -> Option<Recorded> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let header_end = loop {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, path) = (first.next()?.to_owned(), first.next()?.to_owned());
    let headers: Vec<(String, String)> =
        lines.filter_map(|l| l.split_once(':').map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))).collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[header_end..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Recorded { method, path, headers, body: String::from_utf8_lossy(&body).into_owned() })
}

async fn serve(mut socket: TcpStream, requests: Arc<Mutex<Vec<Recorded>>>, replies: Arc<Mutex<VecDeque<Reply>>>) {
    let Some(request) = read_request(&mut socket).await else { return };
    requests.lock().unwrap().push(request);
    let reply = replies.lock().unwrap().pop_front().unwrap_or(Reply::Status {
        status: 500,
        headers: vec![],
        body: "{\"error\":{\"message\":\"no scripted reply left\"}}".into(),
    });
    let sse_head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
    match reply {
        Reply::Sse(pieces) => {
            let _ = socket.write_all(sse_head.as_bytes()).await;
            for piece in pieces {
                if socket.write_all(piece.as_bytes()).await.is_err() {
                    return;
                }
                let _ = socket.flush().await;
                tokio::task::yield_now().await;
            }
            let _ = socket.shutdown().await;
        }
        Reply::Status { status, headers, body } => {
            let mut head = format!("HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n", body.len());
            for (k, v) in headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str("\r\n");
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(body.as_bytes()).await;
            let _ = socket.shutdown().await;
        }
        Reply::Stall(pieces) => {
            let _ = socket.write_all(sse_head.as_bytes()).await;
            for piece in pieces {
                let _ = socket.write_all(piece.as_bytes()).await;
            }
            let _ = socket.flush().await;
            // Hold the connection until the client gives up and closes it.
            let mut sink = [0u8; 64];
            while let Ok(n) = socket.read(&mut sink).await {
                if n == 0 {
                    break;
                }
            }
        }
        Reply::Reset => drop(socket),
        Reply::StallBinary(content_type, pieces) => {
            let head = format!("HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\nconnection: close\r\n\r\n");
            let _ = socket.write_all(head.as_bytes()).await;
            for piece in pieces {
                let _ = socket.write_all(&piece).await;
            }
            let _ = socket.flush().await;
            let mut sink = [0u8; 64];
            while let Ok(n) = socket.read(&mut sink).await {
                if n == 0 {
                    break;
                }
            }
        }
        Reply::Binary(content_type, pieces) => {
            let head = format!("HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\nconnection: close\r\n\r\n");
            let _ = socket.write_all(head.as_bytes()).await;
            for piece in pieces {
                if socket.write_all(&piece).await.is_err() {
                    return;
                }
                let _ = socket.flush().await;
                tokio::task::yield_now().await;
            }
            let _ = socket.shutdown().await;
        }
    }
}

/// One AWS event-stream message (`:message-type` `event`, or `exception` when `event` starts
/// with `exception:`), framed as Bedrock sends it.
pub fn aws_event(event: &str, payload: &str) -> Vec<u8> {
    use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
    let string = |v: &str| HeaderValue::String(v.to_owned().into());
    let headers = match event.strip_prefix("exception:") {
        Some(kind) => vec![(":message-type", "exception"), (":exception-type", kind)],
        None => vec![(":message-type", "event"), (":event-type", event)],
    };
    let mut message = Message::new(payload.as_bytes().to_vec());
    for (name, value) in headers {
        message = message.add_header(Header::new(name, string(value)));
    }
    message = message.add_header(Header::new(":content-type", string("application/json")));
    let mut out = Vec::new();
    aws_smithy_eventstream::frame::write_message_to(&message, &mut out).unwrap();
    out
}

/// `data: <json>\n\n` for each payload.
pub fn sse(payloads: &[&str]) -> Vec<String> {
    payloads.iter().map(|p| format!("data: {p}\n\n")).collect()
}

/// `event: <name>\ndata: <json>\n\n` for each pair.
pub fn named_sse(events: &[(&str, &str)]) -> Vec<String> {
    events.iter().map(|(e, d)| format!("event: {e}\ndata: {d}\n\n")).collect()
}

/// A provider's HTTP settings for the loopback server at `base`: a test key and short timeouts
/// (a stalled stream fails in 400 ms).
pub fn http_config(base: &str) -> pi_agent::provider::HttpConfig {
    pi_agent::provider::HttpConfig {
        base_url: Some(base.to_owned()),
        api_key: Some("sk-test-key-1234567890".into()),
        idle_timeout: std::time::Duration::from_millis(400),
        response_timeout: std::time::Duration::from_secs(5),
        ..pi_agent::provider::HttpConfig::default()
    }
}

/// A model from the shipped catalogue.
pub fn catalogued(provider: &str, id: &str) -> pi_agent::model::ModelInfo {
    pi_agent::model::Registry::builtin().find(provider, id).unwrap().clone()
}

/// A request to `model`: a short system prompt, `messages`, the `read` tool and a thinking
/// level (`None`: off).
pub fn provider_request(
    model: pi_agent::model::ModelInfo,
    messages: Vec<pi_agent::message::Message>,
    reasoning: Option<&str>,
) -> pi_agent::provider::ProviderRequest {
    pi_agent::provider::ProviderRequest {
        model,
        system_prompt: Some("be brief".into()),
        messages,
        tools: pi_agent::tools::ToolRegistry::builtin(&["read"]).unwrap().specs(),
        reasoning: reasoning.map(str::to_owned),
        session_id: None,
        control: Default::default(),
        call_kind: Default::default(),
    }
}

/// Runs `request` through the traced, retrying [`pi_agent::provider::request`] (up to `retries`
/// quick retries) and returns its outcome and what it streamed; its spans must pair up and
/// name the model's API.
pub async fn run(
    provider: &dyn pi_agent::provider::Provider,
    request: &pi_agent::provider::ProviderRequest,
    retries: u32,
) -> (pi_agent::provider::RequestOutcome, Vec<pi_agent::provider::StreamEvent>) {
    use pi_observe_core::testing::{CaptureSubscriber, assert_paired, span_named};
    let hub = pi_observe_core::Observability::new();
    let (capture, _sub) = CaptureSubscriber::attach(&hub);
    let retry = pi_agent::provider::RetryPolicy {
        max_retries: retries,
        base_delay: std::time::Duration::from_millis(1),
        max_delay: std::time::Duration::from_millis(5),
    };
    let cancel = tokio_util::sync::CancellationToken::new();
    let mut streamed = Vec::new();
    let outcome =
        hub.scope(pi_agent::provider::request(provider, request, &retry, &cancel, &mut |e| streamed.push(e))).await;
    let events = capture.take();
    let spans = assert_paired(&events);
    let span = span_named(&spans, pi_observe_core::names::PROVIDER_REQUEST);
    let api = pi_observe_core::Value::from(request.model.api.as_str());
    assert_eq!(span.attributes.get(pi_observe_core::names::API), Some(&api));
    (outcome, streamed)
}

/// A tool's result for call `id` of tool `name`.
pub fn tool_result(id: &str, name: &str, text: &str, is_error: bool) -> pi_agent::message::Message {
    pi_agent::message::Message::ToolResult(pi_agent::message::ToolResultMessage {
        tool_call_id: id.into(),
        tool_name: name.into(),
        content: vec![pi_agent::message::ContentBlock::text(text)],
        details: None,
        usage: None,
        is_error,
        timestamp: 0,
    })
}
