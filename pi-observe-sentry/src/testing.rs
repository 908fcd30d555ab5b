//! Test helpers (feature `testing`): a loopback Sentry envelope endpoint and an envelope parser.

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};

use serde_json::Value as Json;

/// One received request: its request line and (decompressed) body.
pub type Request = (String, Vec<u8>);

/// A loopback HTTP server that answers every request with 200 and keeps what it received,
/// standing in for Sentry's envelope endpoint (`POST /api/PROJECT/envelope/`).
#[derive(Debug, Clone)]
pub struct EnvelopeEndpoint {
    port: u16,
    received: Arc<Mutex<Vec<Request>>>,
}

impl EnvelopeEndpoint {
    /// Starts listening on `127.0.0.1:0`.
    ///
    /// # Panics
    /// When no loopback port can be bound (tests only).
    pub fn start() -> EnvelopeEndpoint {
        Self::start_at(0)
    }

    /// Starts listening on `127.0.0.1:port` (e.g. a port a DSN named while nothing listened).
    ///
    /// # Panics
    /// When the port cannot be bound (tests only).
    #[allow(clippy::expect_used)]
    pub fn start_at(port: u16) -> EnvelopeEndpoint {
        let listener = std::net::TcpListener::bind(("127.0.0.1", port)).expect("bind loopback");
        let port = listener.local_addr().expect("local addr").port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let store = received.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let store = store.clone();
                std::thread::spawn(move || serve(stream, &store));
            }
        });
        EnvelopeEndpoint { port, received }
    }

    /// A DSN pointing here (project 1).
    pub fn dsn(&self) -> String {
        format!("http://public@127.0.0.1:{}/1", self.port)
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Request> {
        self.received.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Every envelope item so far: (item type, JSON payload).
    pub fn items(&self) -> Vec<(String, Json)> {
        self.requests().iter().flat_map(|(_, body)| envelope_items(body)).collect()
    }
}

fn serve(mut stream: std::net::TcpStream, store: &Mutex<Vec<Request>>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    loop {
        let n = match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let lower = head.to_ascii_lowercase();
            let len: usize = lower
                .lines()
                .find_map(|l| l.strip_prefix("content-length:").and_then(|v| v.trim().parse().ok()))
                .unwrap_or(0);
            if buf.len() < end + 4 + len {
                break;
            }
            let mut body = buf[end + 4..end + 4 + len].to_vec();
            if lower.contains("content-encoding: gzip") {
                let mut out = Vec::new();
                if flate2::read::GzDecoder::new(&body[..]).read_to_end(&mut out).is_ok() {
                    body = out;
                }
            }
            let line = head.lines().next().unwrap_or_default().to_owned();
            store.lock().unwrap_or_else(|e| e.into_inner()).push((line, body));
            buf.drain(..end + 4 + len);
            if stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}").is_err() {
                return;
            }
        }
    }
}

/// The items of an envelope's wire form: (item type, JSON payload).
pub fn envelope_items(bytes: &[u8]) -> Vec<(String, Json)> {
    let text = String::from_utf8_lossy(bytes);
    let mut lines = text.lines();
    let _header = lines.next();
    let mut items = Vec::new();
    while let Some(header) = lines.next() {
        if header.trim().is_empty() {
            continue;
        }
        let header: Json = serde_json::from_str(header).unwrap_or(Json::Null);
        let payload = lines.next().unwrap_or_default();
        let kind = header["type"].as_str().unwrap_or_default().to_owned();
        items.push((kind, serde_json::from_str(payload).unwrap_or(Json::Null)));
    }
    items
}
