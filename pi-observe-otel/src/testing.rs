//! Test helpers (feature `testing`): an OTLP/HTTP receiver on 127.0.0.1:0 that decodes protobuf
//! or JSON bodies (gzip or not) with `opentelemetry-proto`, records headers, and answers with
//! scripted statuses — the stand-in collector of this crate's and the workspace's tests.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs, missing_debug_implementations)]

use std::collections::VecDeque;
use std::io::Read;
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What the receiver answers to one request.
#[derive(Clone, Debug)]
pub enum Answer {
    /// This status (200 = accept), with optional `Retry-After` seconds.
    Status(u16, Option<u32>),
    /// 200 with an OTLP `partial_success` saying this many spans were rejected.
    Partial(i64),
    /// This status with this raw `Retry-After` value (e.g. an HTTP-date).
    RetryAt(u16, String),
    /// Read the request, then never answer (until the client gives up).
    Stall,
    /// Close the connection without answering.
    Reset,
}

/// A request's path and headers.
pub type Head = (String, Vec<(String, String)>);

#[derive(Clone, Debug)]
pub struct Received {
    pub headers: Vec<(String, String)>,
    pub request: ExportTraceServiceRequest,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

pub struct Receiver {
    pub endpoint: String,
    pub received: Arc<Mutex<Vec<Received>>>,
    /// Metrics requests (always answered 200; scripted answers apply to traces only).
    pub metrics: Arc<Mutex<Vec<ExportMetricsServiceRequest>>>,
    /// Logs requests (always answered 200).
    pub logs: Arc<Mutex<Vec<ExportLogsServiceRequest>>>,
    pub attempts: Arc<Mutex<usize>>,
    /// When each traces request arrived.
    pub arrivals: Arc<Mutex<Vec<std::time::Instant>>>,
    /// Every request's path and headers (traces, metrics and logs).
    pub heads: Arc<Mutex<Vec<Head>>>,
    /// The status metrics and logs requests get (200 unless a test says otherwise: a
    /// trace-only backend answers 405).
    pub other_signals: Arc<Mutex<u16>>,
    _runtime: Option<tokio::runtime::Runtime>,
}

impl Receiver {
    /// Starts on its own runtime thread, so it serves whatever runtime (or none) the test uses.
    pub fn start(answers: Vec<Answer>) -> Receiver {
        Self::start_with(answers, None, "127.0.0.1:0")
    }

    /// Like [`Receiver::start`], listening where `endpoint` (an `http://host:port/…` URL, e.g.
    /// one from [`Receiver::down_endpoint`]) points.
    pub fn start_at(endpoint: &str, answers: Vec<Answer>) -> Receiver {
        let addr = endpoint.trim_start_matches("http://").split('/').next().unwrap().to_owned();
        Self::start_with(answers, None, &addr)
    }

    /// Like [`Receiver::start`], over HTTPS with the fixture server certificate (signed by
    /// `tests/fixtures/tls/ca.pem`).
    pub fn start_tls(answers: Vec<Answer>) -> Receiver {
        use tokio_rustls::rustls::pki_types::pem::PemObject;
        use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let dir = tls_fixtures();
        let certs: Vec<CertificateDer<'static>> =
            CertificateDer::pem_file_iter(format!("{dir}server.pem")).unwrap().map(Result::unwrap).collect();
        let key = PrivateKeyDer::from_pem_file(format!("{dir}server.key")).unwrap();
        let provider = Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider());
        let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap();
        Self::start_with(answers, Some(tokio_rustls::TlsAcceptor::from(Arc::new(config))), "127.0.0.1:0")
    }

    fn start_with(answers: Vec<Answer>, tls: Option<tokio_rustls::TlsAcceptor>, addr: &str) -> Receiver {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let listener = runtime.block_on(TcpListener::bind(addr)).unwrap();
        let scheme = if tls.is_some() { "https" } else { "http" };
        let endpoint = format!("{scheme}://{}/v1/traces", listener.local_addr().unwrap());
        let received = Arc::new(Mutex::new(Vec::new()));
        let metrics = Arc::new(Mutex::new(Vec::new()));
        let logs = Arc::new(Mutex::new(Vec::new()));
        let attempts = Arc::new(Mutex::new(0));
        let arrivals = Arc::new(Mutex::new(Vec::new()));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let other_signals = Arc::new(Mutex::new(200));
        let answers = Arc::new(Mutex::new(VecDeque::from(answers)));
        let sinks = Sinks {
            traces: received.clone(),
            metrics: metrics.clone(),
            logs: logs.clone(),
            arrivals: arrivals.clone(),
            heads: heads.clone(),
            other_signals: other_signals.clone(),
        };
        let (a, q) = (attempts.clone(), answers);
        runtime.spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (s, a, q, tls) = (sinks.clone(), a.clone(), q.clone(), tls.clone());
                tokio::spawn(async move {
                    match tls {
                        None => serve(socket, s, a, q).await,
                        Some(tls) => {
                            // A client that does not trust us fails the handshake: nothing to serve.
                            if let Ok(stream) = tls.accept(socket).await {
                                serve(stream, s, a, q).await
                            }
                        }
                    }
                });
            }
        });
        Receiver {
            endpoint,
            received,
            metrics,
            logs,
            attempts,
            arrivals,
            heads,
            other_signals,
            _runtime: Some(runtime),
        }
    }

    /// An endpoint where nothing listens.
    pub fn down_endpoint() -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        format!("http://{addr}/v1/traces")
    }

    pub fn requests(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    pub fn spans(&self) -> Vec<Span> {
        self.requests()
            .into_iter()
            .flat_map(|r| r.request.resource_spans)
            .flat_map(|rs| rs.scope_spans)
            .flat_map(|ss| ss.spans)
            .collect()
    }

    /// Resource attributes of the first request, as strings.
    pub fn resource(&self) -> Vec<(String, String)> {
        let requests = self.requests();
        let Some(first) = requests.first() else { return vec![] };
        first.request.resource_spans[0]
            .resource
            .as_ref()
            .map(|r| r.attributes.iter().map(|kv| (kv.key.clone(), format!("{:?}", kv.value))).collect())
            .unwrap_or_default()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(rt) = self._runtime.take() {
            rt.shutdown_background();
        }
    }
}

#[derive(Clone)]
struct Sinks {
    arrivals: Arc<Mutex<Vec<std::time::Instant>>>,
    heads: Arc<Mutex<Vec<Head>>>,
    other_signals: Arc<Mutex<u16>>,
    traces: Arc<Mutex<Vec<Received>>>,
    metrics: Arc<Mutex<Vec<ExportMetricsServiceRequest>>>,
    logs: Arc<Mutex<Vec<ExportLogsServiceRequest>>>,
}

/// One request as the test receiver read it.
struct Request {
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

async fn serve<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut socket: S,
    sinks: Sinks,
    attempts: Arc<Mutex<usize>>,
    answers: Arc<Mutex<VecDeque<Answer>>>,
) {
    while let Some(request) = read_request(&mut socket).await {
        sinks.heads.lock().unwrap().push((request.path.clone(), request.headers.clone()));
        let answer = if request.path == "/v1/metrics" || request.path == "/v1/logs" {
            Answer::Status(*sinks.other_signals.lock().unwrap(), None)
        } else {
            *attempts.lock().unwrap() += 1;
            sinks.arrivals.lock().unwrap().push(std::time::Instant::now());
            answers.lock().unwrap().pop_front().unwrap_or(Answer::Status(200, None))
        };
        let (status, retry_after, retry_at, partial) = match answer {
            Answer::Reset => return,
            Answer::Stall => {
                let mut sink = [0u8; 64];
                while let Ok(n) = socket.read(&mut sink).await {
                    if n == 0 {
                        break;
                    }
                }
                return;
            }
            Answer::Status(status, retry_after) => (status, retry_after, None, None),
            Answer::RetryAt(status, date) => (status, None, Some(date), None),
            Answer::Partial(rejected) => (200, None, None, Some(rejected)),
        };
        if status == 200 {
            store(&sinks, request);
        }
        if socket.write_all(&response(status, retry_after, retry_at, partial)).await.is_err() {
            return;
        }
    }
}

/// The next request on `socket`: its head, then a body of `content-length` bytes; `None` when
/// the connection ends first.
async fn read_request<S: tokio::io::AsyncRead + Unpin>(socket: &mut S) -> Option<Request> {
    let (mut buf, mut chunk) = (Vec::new(), [0u8; 8192]);
    let header_end = loop {
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).into_owned();
    let headers = head
        .split("\r\n")
        .skip(1)
        .filter_map(|l| l.split_once(':').map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned())))
        .collect();
    let path = head.split_whitespace().nth(1).unwrap_or_default().to_owned();
    let mut request = Request { path, headers, body: buf[header_end..].to_vec() };
    let length: usize = request.header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    while request.body.len() < length {
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => request.body.extend_from_slice(&chunk[..n]),
        }
    }
    Some(request)
}

/// Keeps an accepted request's export, decoded by its path and content type.
fn store(sinks: &Sinks, mut request: Request) {
    if request.header("content-encoding") == Some("gzip") {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&request.body[..]).read_to_end(&mut out).unwrap();
        request.body = out;
    }
    fn decode<T: prost::Message + Default + serde::de::DeserializeOwned>(json: bool, body: &[u8]) -> T {
        if json { serde_json::from_slice(body).unwrap() } else { T::decode(body).unwrap() }
    }
    let json = request.header("content-type") == Some("application/json");
    match request.path.as_str() {
        "/v1/metrics" => sinks.metrics.lock().unwrap().push(decode(json, &request.body)),
        "/v1/logs" => sinks.logs.lock().unwrap().push(decode(json, &request.body)),
        _ => {
            let request_body = decode(json, &request.body);
            sinks.traces.lock().unwrap().push(Received { headers: request.headers, request: request_body });
        }
    }
}

/// The HTTP response: `status`, a `retry-after` in seconds or as a date, and for a partial
/// success the protobuf body saying how many spans were rejected.
fn response(status: u16, retry_after: Option<u32>, retry_at: Option<String>, partial: Option<i64>) -> Vec<u8> {
    use opentelemetry_proto::tonic::collector::trace::v1::{ExportTracePartialSuccess, ExportTraceServiceResponse};
    let body = partial
        .map(|rejected| {
            let partial_success =
                ExportTracePartialSuccess { rejected_spans: rejected, error_message: "too old".into() };
            ExportTraceServiceResponse { partial_success: Some(partial_success) }.encode_to_vec()
        })
        .unwrap_or_default();
    let mut response = format!("HTTP/1.1 {status} X\r\ncontent-length: {}\r\n", body.len());
    if !body.is_empty() {
        response.push_str("content-type: application/x-protobuf\r\n");
    }
    if let Some(secs) = retry_after {
        response.push_str(&format!("retry-after: {secs}\r\n"));
    }
    if let Some(date) = retry_at {
        response.push_str(&format!("retry-after: {date}\r\n"));
    }
    response.push_str("\r\n");
    let mut bytes = response.into_bytes();
    bytes.extend_from_slice(&body);
    bytes
}

/// The TLS fixture directory (this file is also compiled into the workspace root's tests).
pub fn tls_fixtures() -> String {
    let root = env!("CARGO_MANIFEST_DIR");
    [format!("{root}/tests/fixtures/tls/"), format!("{root}/pi-observe-otel/tests/fixtures/tls/")]
        .into_iter()
        .find(|dir| std::path::Path::new(dir).exists())
        .expect("TLS fixtures")
}

/// The contract's operation name of an exported span: `pi.operation` where the span name follows
/// the GenAI conventions (`chat gpt-4o`), else the span name.
#[allow(dead_code)] // not every test binary that includes this module uses it
pub fn operation(span: &Span) -> String {
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
    span.attributes
        .iter()
        .find(|kv| kv.key == "pi.operation")
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
        .and_then(|v| match v {
            Any::StringValue(s) => Some(s.clone()),
            _ => None,
        })
        .unwrap_or_else(|| span.name.clone())
}
