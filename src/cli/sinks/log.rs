//! The log sink: `--log-json [PATH]` (empty: stderr) or `telemetry.sinks.log`, JSON lines
//! through `tracing` and `pi-observe-log`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::{Arg, Command};
use pi_observe::core::TraceId;
use pi_observe::log::{JsonLogConfig, LogDestination, LogGuard, SpanLevel, TracingSubscriber};
use serde_json::Value;

use super::local;
use super::sink::{Attach, Attached, CanaryReader, Resolve, Resolved, Running, Sink, SinkKind, Sources, Subscribed};
use crate::cli::config::Key;
use crate::cli::settings::check;
use crate::cli::{CliError, output};

/// The log sink in the list of sinks (`SINKS`).
pub const KIND: SinkKind = SinkKind {
    name: "log",
    remote: false,
    pins: Some(&PATH),
    flags,
    settings: Some(check::<local::Settings>),
    resolve,
};

/// Where it sends: set by the managed policy, it pins the sink.
const PATH: Key<String> = Key { path: &["telemetry", "sinks", "log", "path"], read: |f| local::path_in(f, "log") };

/// The flag's id.
const LOG_JSON: &str = "log_json";

/// `--log-json [PATH]`.
fn flags(cmd: Command) -> Command {
    cmd.arg(Arg::new(LOG_JSON).long("log-json").value_name("PATH").num_args(0..=1).default_missing_value("").help(
        "Structured JSON-lines logs of every contract record (through `tracing`) to stderr, or to PATH; \
                 filtered by `PI_LOG` / `RUST_LOG` (default `info`)",
    ))
}

fn resolve(from: &Resolve<'_>) -> Resolved {
    let flag = from.args.declared.matches().get_one::<String>(LOG_JSON).map(PathBuf::from);
    let flagged = flag.is_some();
    let path = local::path(from.cfg, "log", &PATH, ("--log-json", flag))?;
    Ok(path.map(|path| Box::new(LogSink { target: path.display().to_string(), flagged }) as Box<dyn Sink>))
}

struct LogSink {
    /// The file, or `""` for stderr.
    target: String,
    flagged: bool,
}

impl Sink for LogSink {
    fn status(&self, sources: &Sources<'_>) -> Option<Value> {
        Some(local::status(("log", &PATH), &self.target, self.flagged.then_some("--log-json"), sources))
    }

    fn output_file(&self) -> Option<(&'static str, &Path)> {
        (!self.target.is_empty()).then(|| ("--log-json", Path::new(&self.target)))
    }

    fn canary(&mut self, dir: &Path) -> Option<CanaryReader> {
        let path = dir.join("log.jsonl");
        self.target = path.display().to_string();
        Some(local::read(path))
    }

    /// Installs JSON-lines logging and subscribes the `tracing` bridge.
    fn attach(self: Box<Self>, _to: &Attach<'_>) -> Result<Option<Attached>, CliError> {
        let destination = match self.target.as_str() {
            "" => LogDestination::Stderr,
            file => LogDestination::File(PathBuf::from(file)),
        };
        let guard = pi_observe::log::init_json_logging(&JsonLogConfig { destination, ..JsonLogConfig::default() })
            .map_err(|e| CliError::Usage(format!("--log-json: {e}")))?;
        // Lines are formatted on the sinks' thread, not the agent's (the logger is the global
        // default, which that thread sees too).
        let bridge = TracingSubscriber::new().span_level(SpanLevel::Info);
        let subscription = Subscribed::OffThread(Arc::new(bridge), "--log-json");
        let running = RunningLog { guard: Mutex::new(Some(guard)), target: self.target };
        Ok(Some(Attached { subscription, running: Some(Arc::new(running)) }))
    }
}

/// The installed logging.
struct RunningLog {
    guard: Mutex<Option<LogGuard>>,
    target: String,
}

impl Running for RunningLog {
    /// Closes the log (within the deadline); says what was lost, when anything was.
    fn report(&self, _traces: &[TraceId], deadline: Duration) {
        let Some(guard) = self.guard.lock().unwrap_or_else(|p| p.into_inner()).take() else { return };
        let (counts, why) = guard.close(deadline);
        let lost = counts.dropped + counts.failed;
        if lost > 0 {
            let why = why.map(|w| format!(": {w}")).unwrap_or_default();
            let target = if self.target.is_empty() { "stderr" } else { &self.target };
            output::error(format_args!("pi: log-json: {} lines written, {lost} lost ({target}{why})", counts.written));
        }
    }
}
