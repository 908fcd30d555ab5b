//! One attempt on the wire — an HTTP POST or a gRPC call — classified for the retry loop, and
//! the HTTP clients behind it.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::logs::v1::logs_service_client::LogsServiceClient;
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_client::MetricsServiceClient;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use prost::Message;
use tonic::codec::CompressionEncoding;
use tonic::transport::Endpoint;

use super::payload::{Body, Signal};
use super::{Attempt, Exporter};
use crate::config::ConfigError;
use crate::config::url_without_secrets;

/// A `Retry-After` value — delay-seconds or an HTTP-date (RFC 9110) — as a delay from `now`
/// (a date in the past is no delay); `None` when it is neither.
pub(crate) fn retry_after(value: &str, now: std::time::SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds.min(86_400.0)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// How one signal is sent: its headers, body encoding, timeout and HTTP client.
pub(super) struct Lane {
    pub(super) headers: Vec<(String, String)>,
    pub(super) json: bool,
    pub(super) gzip: bool,
    pub(super) timeout: Duration,
    pub(super) http: reqwest::Client,
}

/// An HTTP client trusting `ca` (else the system roots) and presenting `identity`. A client
/// for plain `http://` endpoints only (`plain`) trusts nothing: loading the system's root
/// certificates costs milliseconds at every start and would never be used.
pub(super) fn http_client(
    ca: Option<&[u8]>,
    identity: Option<&(Vec<u8>, Vec<u8>)>,
    ca_setting: &str,
    plain: bool,
) -> Result<reqwest::Client, ConfigError> {
    use crate::names::env;
    let mut http = reqwest::Client::builder().connect_timeout(Duration::from_secs(5));
    if plain && ca.is_none() {
        http = http.tls_certs_only(Vec::new());
    }
    if let Some(ca) = ca {
        let certs = reqwest::Certificate::from_pem_bundle(ca)
            .map_err(|e| ConfigError::new(ca_setting, format!("not a PEM certificate bundle: {e}")))?;
        http = http.tls_certs_only(certs);
    }
    if let Some((cert, key)) = identity {
        let pem = [key.as_slice(), b"\n", cert.as_slice()].concat();
        let identity = reqwest::Identity::from_pem(&pem)
            .map_err(|e| ConfigError::new(env::CLIENT_CERTIFICATE, format!("not a PEM certificate and key: {e}")))?;
        http = http.identity(identity);
    }
    http.build().map_err(|e| ConfigError::new("OTLP exporter", format!("cannot build HTTP client: {e}")))
}

pub(super) fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl Exporter {
    /// One POST: what came of it, and the status line (`HTTP 200`) when there was an answer.
    pub(super) async fn http_attempt(
        &self,
        lane: &Lane,
        endpoint: &str,
        body: &[u8],
        json: bool,
        gzip: bool,
        limit: Duration,
    ) -> (Attempt, Option<String>) {
        let mut request = lane
            .http
            .post(endpoint)
            .timeout(limit)
            .header("content-type", if json { "application/json" } else { "application/x-protobuf" })
            .body(body.to_vec());
        if gzip {
            request = request.header("content-encoding", "gzip");
        }
        for (k, v) in &lane.headers {
            request = request.header(k.as_str(), v.as_str());
        }
        match request.send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                let line = Some(format!("HTTP {status}"));
                if response.status().is_success() {
                    if endpoint == self.endpoints[Signal::Traces as usize] {
                        let json = response
                            .headers()
                            .get("content-type")
                            .and_then(|v| v.to_str().ok())
                            .is_some_and(|v| v.starts_with("application/json"));
                        let answer = response.bytes().await.unwrap_or_default();
                        self.note_partial_success(&answer, json);
                    }
                    return (Attempt::Done, line);
                }
                let after = response
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| retry_after(v, std::time::SystemTime::now()));
                let why = format!("HTTP {status} from {}", url_without_secrets(endpoint));
                let attempt = match status {
                    401 | 403 => Attempt::Unauthorized(why),
                    404 | 405 | 415 => Attempt::Unsupported(why),
                    408 | 429 | 500..=599 => Attempt::Retry { after, why, refused: false },
                    _ => Attempt::Reject(why),
                };
                (attempt, line)
            }
            Err(e) => {
                // reqwest's message is "error sending request for url (…)": the cause is the news.
                let mut cause: &dyn std::error::Error = &e;
                while let Some(next) = cause.source() {
                    cause = next;
                }
                let why = format!("{}: {}", url_without_secrets(endpoint), one_line(&cause.to_string()));
                (Attempt::Retry { after: None, why, refused: e.is_connect() }, None)
            }
        }
    }

    /// Counts the spans an OTLP/HTTP traces answer says were rejected (`partial_success`). An
    /// empty or unparsable body is full success, as the specification says.
    pub(super) fn note_partial_success(&self, answer: &[u8], json: bool) {
        use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
        if answer.is_empty() {
            return;
        }
        let parsed = if json {
            serde_json::from_slice::<ExportTraceServiceResponse>(answer).ok()
        } else {
            ExportTraceServiceResponse::decode(answer).ok()
        };
        let rejected = parsed.and_then(|r| r.partial_success).map_or(0, |p| p.rejected_spans);
        self.link.partially_rejected.fetch_add(u64::try_from(rejected).unwrap_or(0), Relaxed);
    }

    /// One call: what came of it, and the status (`gRPC Ok`) when the server answered.
    pub(super) async fn grpc_attempt(
        &self,
        endpoint: &Endpoint,
        body: &Body,
        limit: Duration,
    ) -> (Attempt, Option<String>) {
        let channel = self.channel.get_or_init(|| endpoint.connect_lazy()).clone();
        let result = match body {
            Body::Traces(r) => {
                let mut client = TraceServiceClient::new(channel);
                if self.lanes[0].gzip {
                    client = client.send_compressed(CompressionEncoding::Gzip);
                }
                client.export(self.grpc_request(&self.lanes[0], r.clone(), limit)).await.map(|answer| {
                    let rejected = answer.into_inner().partial_success.map_or(0, |p| p.rejected_spans);
                    self.link.partially_rejected.fetch_add(u64::try_from(rejected).unwrap_or(0), Relaxed);
                })
            }
            Body::Metrics(r) => {
                let mut client = MetricsServiceClient::new(channel);
                if self.lanes[1].gzip {
                    client = client.send_compressed(CompressionEncoding::Gzip);
                }
                client.export(self.grpc_request(&self.lanes[1], r.clone(), limit)).await.map(|_| ())
            }
            Body::Logs(r) => {
                let mut client = LogsServiceClient::new(channel);
                if self.lanes[2].gzip {
                    client = client.send_compressed(CompressionEncoding::Gzip);
                }
                client.export(self.grpc_request(&self.lanes[2], r.clone(), limit)).await.map(|_| ())
            }
        };
        match result {
            Ok(()) => (Attempt::Done, Some("gRPC Ok".into())),
            Err(status) => {
                use tonic::Code;
                let why = format!(
                    "gRPC {:?} from {}: {}",
                    status.code(),
                    url_without_secrets(&self.endpoints[0]),
                    one_line(status.message())
                );
                // A status tonic made up for a failed connection is not an answer.
                let answered = std::error::Error::source(&status).is_none();
                let line = answered.then(|| format!("gRPC {:?}", status.code()));
                let attempt = match status.code() {
                    Code::Unauthenticated | Code::PermissionDenied => Attempt::Unauthorized(why),
                    Code::Unimplemented => Attempt::Unsupported(why),
                    Code::Unavailable
                    | Code::ResourceExhausted
                    | Code::DeadlineExceeded
                    | Code::Aborted
                    | Code::Cancelled
                    | Code::Unknown => {
                        // A transport error (no connection) surfaces as UNAVAILABLE from tonic.
                        let refused = status.code() == Code::Unavailable
                            && std::error::Error::source(&status).is_some()
                            && status.message().contains("connect");
                        Attempt::Retry { after: None, why, refused }
                    }
                    _ => Attempt::Reject(why),
                };
                (attempt, line)
            }
        }
    }

    pub(super) fn grpc_request<T>(&self, lane: &Lane, message: T, limit: Duration) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        request.set_timeout(limit);
        for (k, v) in &lane.headers {
            if let (Ok(key), Ok(value)) = (
                tonic::metadata::MetadataKey::from_bytes(k.to_ascii_lowercase().as_bytes()),
                tonic::metadata::MetadataValue::try_from(v.as_str()),
            ) {
                request.metadata_mut().insert(key, value);
            }
        }
        request
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use super::retry_after;

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        // Sun, 06 Nov 1994 08:49:37 GMT, RFC 9110's example.
        let date = UNIX_EPOCH + Duration::from_secs(784_111_777);
        assert_eq!(retry_after("120", date), Some(Duration::from_secs(120)));
        assert_eq!(retry_after(" 1.5 ", date), Some(Duration::from_millis(1500)));
        let before = date - Duration::from_secs(30);
        assert_eq!(retry_after("Sun, 06 Nov 1994 08:49:37 GMT", before), Some(Duration::from_secs(30)));
        assert_eq!(retry_after("Sunday, 06-Nov-94 08:49:37 GMT", before), Some(Duration::from_secs(30)));
        assert_eq!(retry_after("Sun Nov  6 08:49:37 1994", before), Some(Duration::from_secs(30)));
        assert_eq!(retry_after("Sun, 06 Nov 1994 08:49:37 GMT", SystemTime::now()), Some(Duration::ZERO));
        assert_eq!(retry_after("-1", date), None);
        assert_eq!(retry_after("soon", date), None);
    }
}
