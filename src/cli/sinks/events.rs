//! The events sink: the contract records as JSON lines in a file (`--events-jsonl`, the demo's
//! events file, or `telemetry.sinks.events`), through `pi-observe-log`'s `JsonlFileSink`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use pi_observe::core::TraceId;
use pi_observe::log::JsonlFileSink;
use serde_json::Value;

use super::local;
use super::sink::{
    Attach, Attached, CanaryReader, Resolve, Resolved, Running, Sink, SinkKind, Sources, Subscribed, no_flags,
};
use crate::cli::config::Key;
use crate::cli::settings::check;
use crate::cli::{CliError, output};

/// The events sink in the list of sinks (`SINKS`).
pub const KIND: SinkKind = SinkKind {
    name: "events",
    remote: false,
    pins: Some(&PATH),
    flags: no_flags,
    settings: Some(check::<local::Settings>),
    resolve,
};

/// Where it sends: set by the managed policy, it pins the sink.
const PATH: Key<String> =
    Key { path: &["telemetry", "sinks", "events", "path"], read: |f| local::path_in(f, "events") };

/// Always resolved: off until it has a file (`pi observe canary` gives it one, to try its
/// capture policy).
fn resolve(from: &Resolve<'_>) -> Resolved {
    let flagged = from.events.is_some();
    let path = local::path(from.cfg, "events", &PATH, ("--events-jsonl", from.events.map(Path::to_owned)))?;
    Ok(Some(Box::new(EventsSink { path, flagged })))
}

struct EventsSink {
    path: Option<PathBuf>,
    flagged: bool,
}

impl Sink for EventsSink {
    fn status(&self, sources: &Sources<'_>) -> Option<Value> {
        let target = self.path.as_ref()?.display().to_string();
        Some(local::status(("events", &PATH), &target, self.flagged.then_some("--events-jsonl"), sources))
    }

    fn output_file(&self) -> Option<(&'static str, &Path)> {
        self.path.as_deref().map(|path| ("--events-jsonl", path))
    }

    fn canary(&mut self, dir: &Path) -> Option<CanaryReader> {
        let path = dir.join("events.jsonl");
        self.path = Some(path.clone());
        Some(local::read(path))
    }

    fn attach(self: Box<Self>, _to: &Attach<'_>) -> Result<Option<Attached>, CliError> {
        let Some(path) = self.path else { return Ok(None) };
        let file = JsonlFileSink::create(&path, JsonlFileSink::DEFAULT_CAPACITY)
            .map_err(|e| CliError::Usage(format!("--events-jsonl {}: {e}", path.display())))?;
        // Records are serialized on the sinks' thread, not the agent's.
        let subscription = Subscribed::OffThread(file.clone(), "--events-jsonl");
        Ok(Some(Attached { subscription, running: Some(Arc::new(RunningEvents(file))) }))
    }
}

/// The open file.
struct RunningEvents(Arc<JsonlFileSink>);

impl Running for RunningEvents {
    /// Says what could not be written, when anything.
    fn report(&self, _traces: &[TraceId], _deadline: Duration) {
        let (written, not_written) = self.0.counts();
        if not_written > 0 {
            let why = self.0.last_error().map(|w| format!(": {w}")).unwrap_or_default();
            output::error(format_args!(
                "pi: events-jsonl: {written} records written, {not_written} not written ({}{why})",
                self.0.path().display()
            ));
        }
    }
}
