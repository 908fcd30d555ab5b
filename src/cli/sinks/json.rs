//! The JSON sink: `--mode json` prints each contract record on stdout, between the agent's
//! events.

use std::path::Path;
use std::sync::{Arc, Mutex};

use pi_observe::core::ObsEvent;
use serde_json::Value;

use super::sink::{Attach, Attached, CanaryReader, Resolve, Resolved, Sink, SinkKind, Sources, Subscribed, no_flags};
use crate::cli::{CliError, output};

/// The JSON sink in the list of sinks (`SINKS`).
pub const KIND: SinkKind =
    SinkKind { name: "json", remote: false, pins: None, flags: no_flags, settings: None, resolve };

/// Always resolved: it prints only in `--mode json` (or into `pi observe canary`'s capture).
fn resolve(_from: &Resolve<'_>) -> Resolved {
    Ok(Some(Box::new(JsonSink { canary: None })))
}

struct JsonSink {
    /// `pi observe canary`'s capture instead of stdout.
    canary: Option<Arc<Mutex<Vec<String>>>>,
}

impl Sink for JsonSink {
    /// Nothing to configure: the mode decides.
    fn status(&self, _sources: &Sources<'_>) -> Option<Value> {
        None
    }

    fn canary(&mut self, _dir: &Path) -> Option<CanaryReader> {
        let lines = Arc::new(Mutex::new(Vec::new()));
        self.canary = Some(lines.clone());
        Some(Box::new(move || vec![lines.lock().unwrap_or_else(|p| p.into_inner()).join("\n").into_bytes()]))
    }

    fn attach(self: Box<Self>, to: &Attach<'_>) -> Result<Option<Attached>, CliError> {
        let subscription = match self.canary {
            Some(lines) => to.hub.subscribe_arc(
                Arc::new(move |e: &ObsEvent| lines.lock().unwrap_or_else(|p| p.into_inner()).push(e.to_json())),
                to.policy.clone(),
            ),
            None if to.json_mode => {
                to.hub.subscribe_arc(Arc::new(|e: &ObsEvent| output::contract_event_line(e)), to.policy.clone())
            }
            None => return Ok(None),
        };
        Ok(Some(Attached { subscription: Subscribed::Now(subscription), running: None }))
    }
}
