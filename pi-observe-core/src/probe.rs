//! What sending one probe through a sink found (`pi observe test`): the same shape for every
//! adapter, so a tool can print or check them alike.

use std::time::Duration;

/// The outcome of one probe request to one sink.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProbeOutcome {
    /// The sink (`otlp`, `sentry`).
    pub sink: String,
    /// What was sent (`traces`, `metrics`, `envelope`).
    pub signal: String,
    /// Where it went, without credentials.
    pub endpoint: String,
    /// How (`http/protobuf`, `http/json`, `grpc`, `sentry`).
    pub protocol: String,
    /// The receiver answered (any status).
    pub reachable: bool,
    /// Its answer (`HTTP 200`, `gRPC Unauthenticated`), when there was one.
    pub status: Option<String>,
    /// From sending to the answer (or to giving up).
    pub latency: Duration,
    /// `Some(false)` when the receiver refused the credentials (401/403, `UNAUTHENTICATED`,
    /// `PERMISSION_DENIED`); `None` without an answer.
    pub auth_accepted: Option<bool>,
    /// The receiver took the probe.
    pub accepted: bool,
    /// Why not, when it did not.
    pub error: Option<String>,
    /// The receiver answered that it takes no such signal (HTTP 404/405/415, gRPC
    /// `Unimplemented`): a trace-only backend asked for metrics. Not a failure of the sink.
    pub unsupported: bool,
}

/// Whether `host` (a URL's host, IPv6 with or without brackets) names this machine's loopback:
/// `localhost`, `127.0.0.0/8` or `::1`. Such a receiver's round trip is nil: a sink need not
/// time it to know how long to wait for its first answer.
pub fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_matches(['[', ']']);
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::is_loopback_host;

    #[test]
    fn loopback_hosts_are_told_from_others() {
        for host in ["localhost", "LocalHost", "127.0.0.1", "127.8.9.10", "::1", "[::1]"] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in ["example.com", "10.0.0.1", "[::2]", "localhost.example.com", "", "0.0.0.0"] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }
}
