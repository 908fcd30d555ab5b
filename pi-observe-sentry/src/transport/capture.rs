//! A transport that keeps envelopes instead of sending them (`pi observe canary`).

use std::sync::{Arc, Mutex};

use sentry::{Envelope, Transport, TransportFactory, TransportOptions};

/// A transport that keeps each envelope's wire bytes instead of sending them (`pi observe
/// canary`): set it as [`SentryConfig::transport`](crate::SentryConfig::transport). Clones
/// share one list.
#[derive(Clone, Default)]
pub struct EnvelopeCapture(Arc<Mutex<Vec<Vec<u8>>>>);

impl EnvelopeCapture {
    /// The bodies the HTTP transport would have posted, in order.
    pub fn bodies(&self) -> Vec<Vec<u8>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl std::fmt::Debug for EnvelopeCapture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvelopeCapture").field("envelopes", &self.0.lock().map(|b| b.len()).unwrap_or(0)).finish()
    }
}

impl TransportFactory for EnvelopeCapture {
    fn create_transport_with_options(&self, _: TransportOptions) -> Arc<dyn Transport> {
        Arc::new(self.clone())
    }
}

impl Transport for EnvelopeCapture {
    fn send_envelope(&self, envelope: Envelope) {
        let mut body = Vec::new();
        if envelope.to_writer(&mut body).is_ok() {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).push(body);
        }
    }
}
