//! Spooled batches: what an exporter writes to the spool, which spooled batches it can
//! deliver, and one try at delivering one.

use std::time::Duration;

use pi_observe_spool::BatchMeta;

use super::payload::{Body, Payload, SPOOL_SINK, Signal, Wire};
use super::{Attempt, Delivery, Exporter};
use crate::config::url_without_secrets;

impl Exporter {
    /// What goes into the spool for `payload`: where it was going and its wire bytes (gRPC:
    /// the protobuf message the call carries).
    pub(crate) fn spool_batch(&self, payload: &Payload) -> (BatchMeta, Vec<u8>) {
        let url = url_without_secrets(&self.endpoints[payload.signal as usize]);
        let protocol = self.protocol_name(payload.signal);
        let meta = BatchMeta::new(SPOOL_SINK, payload.signal.name(), &url, protocol, payload.items);
        match &payload.wire {
            Wire::Http(bytes) => {
                (meta.with_content_encoding(self.lane(payload.signal).gzip.then_some("gzip")), bytes.clone())
            }
            Wire::Grpc(body) => (meta, body.to_protobuf()),
        }
    }

    /// The signal of a spooled batch this exporter can deliver: an OTLP batch for one of its
    /// own endpoints over the same transport (HTTP bodies carry their own content type).
    pub(super) fn spooled_signal(&self, meta: &BatchMeta) -> Option<Signal> {
        let signal = match meta.signal.as_str() {
            "traces" if self.sdk.is_none() => Signal::Traces,
            "metrics" => Signal::Metrics,
            "logs" => Signal::Logs,
            _ => return None,
        };
        let ours = meta.sink == SPOOL_SINK
            && (meta.protocol == "grpc") == self.grpc.is_some()
            && meta.url == url_without_secrets(&self.endpoints[signal as usize]);
        ours.then_some(signal)
    }

    /// True when this exporter can deliver the spooled batch `meta` describes.
    pub(crate) fn accepts(&self, meta: &BatchMeta) -> bool {
        self.spooled_signal(meta).is_some()
    }

    /// The fingerprint of the configured headers (the credentials spooled batches are sent with).
    pub(crate) fn credentials(&self) -> String {
        pi_observe_spool::fingerprint(self.lanes[0].headers.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    }

    /// One try at delivering a spooled batch (it stays spooled unless this says `Exported`).
    pub(crate) async fn send_spooled(&self, meta: &BatchMeta, body: &[u8], limit: Duration) -> Delivery {
        let Some(signal) = self.spooled_signal(meta) else {
            return Delivery::Rejected(format!("spooled batch for {} is not for this exporter", meta.url));
        };
        let attempt = match &self.grpc {
            Some(endpoint) => match Body::from_protobuf(&meta.signal, body) {
                Some(body) => self.grpc_attempt(endpoint, &body, limit).await.0,
                None => Attempt::Reject(format!("spooled {} batch is not an OTLP request", meta.signal)),
            },
            None => {
                let json = meta.protocol == "http/json";
                let gzip = meta.content_encoding.as_deref() == Some("gzip");
                self.http_attempt(self.lane(signal), &self.endpoints[signal as usize], body, json, gzip, limit).await.0
            }
        };
        match attempt {
            Attempt::Done => Delivery::Exported,
            Attempt::Retry { why, .. } => Delivery::Failed(why),
            Attempt::Reject(why) => Delivery::Rejected(why),
            Attempt::Unauthorized(why) => Delivery::Unauthorized(why),
            Attempt::Unsupported(why) => Delivery::Unsupported(why),
        }
    }
}
