//! Every sink a command can write to — the events file, `--mode json`, JSON logs, OTLP, Sentry —
//! and the spool behind the remote ones, resolved from flags and environment before any work
//! starts, attached to a hub, and finished (flushed within the deadline or spooled, summarized
//! on stderr, counters recorded for `pi observe status`) the same way by `pi -p`, `pi demo` and
//! `pi export`; `pi observe` resolves the same configuration.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use pi_observe::core::{ContentKind, ContentPolicy, ObsEvent, Observability, Subscription, TraceId};
use pi_observe::log::{JsonlFileSink, LogGuard};
use pi_observe::otel::{OtelSubscriber, OtlpConfig};
use pi_observe::sentry::{SentryConfig, SentrySubscriber};

pub mod capture;
pub mod config;

pub use capture::SinkPolicies;

use crate::cli::args::SinkArgs;
use crate::cli::config::{Config, Source};
use crate::cli::{CliError, output};

/// How long the exit waits for sinks to write what they have (unless the OTLP timeout is set).
pub const FLUSH_DEADLINE: Duration = Duration::from_secs(5);

/// The sinks' configuration, checked: nothing is created yet.
pub struct SinkSetup {
    /// One content policy per sink.
    pub policies: SinkPolicies,
    otlp: Option<OtlpConfig>,
    sentry: Option<SentryConfig>,
    log_json: Option<String>,
    events: Option<std::path::PathBuf>,
    /// Where undelivered batches go, and where that setting came from.
    pub spool: Option<(pi_observe::spool::SpoolConfig, Source)>,
    /// How long the exit waits for the sinks.
    pub flush_deadline: Duration,
}

impl SinkSetup {
    /// Reads `--capture`, `--redact`, `--otlp*`, `--sentry`, `--log-json`, `events` (the
    /// command's `--events-jsonl`, when it has one), their variables and the `telemetry`
    /// settings; a bad value is a one-line error naming it.
    pub fn resolve(args: &SinkArgs, events: Option<&Path>, cfg: &Config) -> Result<SinkSetup, CliError> {
        let policies = capture::policies(&args.content, cfg)?;
        let mut otlp = config::otlp(&args.otlp, cfg)?;
        let mut sentry = config::sentry(args.sentry.as_deref(), cfg)?;
        let spool = config::spool(args.spool_dir.as_deref(), args.no_spool, cfg)?;
        let log_json = file_sink(cfg, "log", "--log-json", args.log_json.clone().map(std::path::PathBuf::from))?
            .map(|p| p.display().to_string());
        let events = file_sink(cfg, "events", "--events-jsonl", events.map(Path::to_owned))?;
        // Each remote sink's batches record what it captures, and are delivered only while the
        // managed policy's cap for that sink still allows it.
        let sink_spool = |name: &str, policy: &ContentPolicy| -> Result<_, CliError> {
            let Some((config, _)) = &spool else { return Ok(None) };
            let names = |kinds: &mut dyn Iterator<Item = ContentKind>| kinds.map(|k| k.as_str().to_owned()).collect();
            let mut config = config.clone();
            config.capture = names(&mut ContentKind::ALL.into_iter().filter(|k| policy.captures(*k)));
            config.capture_cap = cfg.capture_cap(name)?.map(|cap| names(&mut cap.into_iter()));
            Ok(Some(config))
        };
        if let Some(otlp) = &mut otlp {
            otlp.spool = sink_spool("otlp", &policies.otlp)?;
        }
        if let Some(sentry) = &mut sentry {
            sentry.spool = sink_spool("sentry", &policies.sentry)?;
        }
        let flush_deadline = otlp.as_ref().and_then(|c| c.timeout).unwrap_or(FLUSH_DEADLINE);
        Ok(SinkSetup { policies, otlp, sentry, log_json, events, spool, flush_deadline })
    }

    /// The OTLP configuration, when OTLP export is on.
    pub fn otlp(&self) -> Option<&OtlpConfig> {
        self.otlp.as_ref()
    }

    /// The Sentry configuration, when Sentry export is on.
    pub fn sentry(&self) -> Option<&SentryConfig> {
        self.sentry.as_ref()
    }

    /// For `pi observe canary`: every remote sink's transport becomes a local capture of what
    /// it would send, `--log-json` writes to `log` and the events file to `events` instead,
    /// and the spool is off. Everything else — which sinks, capture per sink, redaction,
    /// conventions — stays the user's.
    pub fn into_canary(mut self, log: &Path, events: &Path) -> (SinkSetup, Captures) {
        let mut captures = Captures::default();
        if let Some(otlp) = &mut self.otlp {
            let capture = pi_observe::otel::WireCapture::default();
            otlp.capture = Some(capture.clone());
            otlp.spool = None;
            captures.otlp = Some(capture);
        }
        if let Some(sentry) = &mut self.sentry {
            let capture = pi_observe::sentry::EnvelopeCapture::default();
            sentry.transport = Some(Arc::new(capture.clone()));
            sentry.spool = None;
            captures.sentry = Some(capture);
        }
        if self.log_json.is_some() {
            self.log_json = Some(log.display().to_string());
        }
        self.events = Some(events.to_owned());
        self.spool = None;
        (self, captures)
    }

    /// Where the JSON log goes (`""` is stderr), when it is on.
    pub fn log_target(&self) -> Option<String> {
        self.log_json.clone()
    }

    /// The events file, when it is on.
    pub fn events_target(&self) -> Option<String> {
        self.events.as_ref().map(|p| p.display().to_string())
    }

    /// True when `--log-json` is on.
    pub fn has_log(&self) -> bool {
        self.log_json.is_some()
    }

    /// Turns OTLP metrics off (a backfill exports spans only unless asked).
    pub fn without_metrics(&mut self) {
        if let Some(otlp) = &mut self.otlp {
            otlp.metrics = Some(false);
        }
    }

    /// The files these sinks would write, as (flag, path), for
    /// [`crate::cli::files::check_outputs`].
    pub fn output_files(&self) -> Vec<(&'static str, &Path)> {
        let mut outputs = Vec::new();
        if let Some(path) = self.events.as_deref() {
            outputs.push(("--events-jsonl", path));
        }
        if let Some(path) = self.log_json.as_deref().filter(|p| !p.is_empty()) {
            outputs.push(("--log-json", Path::new(path)));
        }
        outputs
    }

    /// A hub whose default policy is safe-only with this scrubber.
    pub fn hub(&self) -> Observability {
        Observability::with_policy(self.policies.base.clone())
    }

    /// Subscribes every configured sink to `hub`, each under its own policy.
    pub fn attach(self, hub: &Observability, json_mode: bool) -> Result<Sinks, CliError> {
        // Sinks whose policies capture the same kinds share one policy instance: the hub then
        // redacts (and copies) each record once for all of them instead of once per sink. The
        // per-sink policies differ only in what they capture (same scrubber, limits, redactors).
        let mut shared: Vec<(Vec<bool>, Arc<ContentPolicy>)> = Vec::new();
        let mut policy = |p: &ContentPolicy| {
            let key: Vec<bool> = pi_observe::core::ContentKind::ALL.iter().map(|k| p.captures(*k)).collect();
            if let Some((_, arc)) = shared.iter().find(|(k, _)| *k == key) {
                return arc.clone();
            }
            let arc = Arc::new(p.clone());
            shared.push((key, arc.clone()));
            arc
        };
        let mut sinks = Sinks {
            hub: hub.clone(),
            subscriptions: Vec::new(),
            events: None,
            otel: None,
            sentry: None,
            log_guard: None,
            log_target: self.log_json.clone().filter(|t| !t.is_empty()),
            flush_deadline: self.flush_deadline,
        };
        if let Some(path) = self.events.as_deref() {
            let file = JsonlFileSink::create(path, JsonlFileSink::DEFAULT_CAPACITY)
                .map_err(|e| CliError::Usage(format!("--events-jsonl {}: {e}", path.display())))?;
            sinks.subscriptions.push(hub.subscribe_arc(file.clone(), policy(&self.policies.events)));
            sinks.events = Some(file);
        }
        if json_mode {
            let print = Arc::new(|e: &ObsEvent| output::contract_event_line(e));
            sinks.subscriptions.push(hub.subscribe_arc(print, policy(&self.policies.json)));
        }
        if let Some(target) = &self.log_json {
            let log = policy(&self.policies.log);
            sinks.log_guard = Some(attach_log_json(hub, log, target, &mut sinks.subscriptions)?);
        }
        if let Some(config) = self.sentry {
            let sentry = SentrySubscriber::new(config).map_err(|e| CliError::Usage(e.to_string()))?;
            sinks.subscriptions.push(hub.subscribe_arc(sentry.clone(), policy(&self.policies.sentry)));
            sinks.sentry = Some(sentry);
        }
        // Last: of the sinks sharing a policy, the last one subscribed is handed each record to
        // keep, and the OTLP queue is the one that keeps records.
        if let Some(config) = self.otlp {
            let otel = OtelSubscriber::new(config).map_err(|e| CliError::Usage(e.to_string()))?;
            sinks.subscriptions.push(hub.subscribe_arc(otel.clone(), policy(&self.policies.otlp)));
            sinks.otel = Some(otel);
        }
        Ok(sinks)
    }
}

/// A local file sink (`log`, `events`): the managed policy's path (pinned: the flag is
/// ignored, said once), else the flag (an empty `--log-json` value means stderr), else the
/// settings files' path when the sink is on there.
fn file_sink(
    cfg: &Config,
    name: &str,
    flag_name: &str,
    flag: Option<std::path::PathBuf>,
) -> Result<Option<std::path::PathBuf>, CliError> {
    let key = crate::cli::config::telemetry::sink_key(name, "path");
    if let Some(managed) = cfg.pinned(name) {
        if flag.is_some() {
            cfg.notice(format!(
                "the managed policy {} pins the {name} sink: {flag_name} ignored",
                managed.path.display()
            ));
        }
        return Ok(cfg.path_setting(&key).map(|(path, _)| path));
    }
    if flag.is_some() {
        return Ok(flag);
    }
    if !cfg.sink_in_files(name) {
        return Ok(None);
    }
    match cfg.path_setting(&key) {
        Some((path, _)) => Ok(Some(path)),
        None => {
            let found = cfg.settings.get(&["telemetry", "sinks", name]).map(|f| f.file);
            Err(match found {
                Some(file) => crate::cli::config::telemetry::bad(file, &key, "expected a file path (the sink is on)"),
                None => CliError::Usage(format!("telemetry.sinks.{name}.path: expected a file path")),
            })
        }
    }
}

/// Installs JSON-lines logging (`--log-json [PATH]`, empty = stderr) and subscribes the
/// `tracing` bridge to `hub`.
fn attach_log_json(
    hub: &Observability,
    policy: Arc<ContentPolicy>,
    target: &str,
    subscriptions: &mut Vec<Subscription>,
) -> Result<LogGuard, CliError> {
    use pi_observe::log::{JsonLogConfig, LogDestination, SpanLevel, TracingSubscriber};
    let destination =
        if target.is_empty() { LogDestination::Stderr } else { LogDestination::File(std::path::PathBuf::from(target)) };
    let guard = pi_observe::log::init_json_logging(&JsonLogConfig { destination, ..JsonLogConfig::default() })
        .map_err(|e| CliError::Usage(format!("--log-json: {e}")))?;
    let bridge = TracingSubscriber::new().span_level(SpanLevel::Info);
    subscriptions.push(hub.subscribe_arc(Arc::new(bridge), policy));
    Ok(guard)
}

/// What the remote sinks would have sent, kept locally ([`SinkSetup::into_canary`]).
#[derive(Debug, Default)]
pub struct Captures {
    /// OTLP requests.
    pub otlp: Option<pi_observe::otel::WireCapture>,
    /// Sentry envelopes.
    pub sentry: Option<pi_observe::sentry::EnvelopeCapture>,
}

/// What the attached sinks did so far (spans for OTLP, envelopes for Sentry).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Health {
    /// `events`, `log`, `otlp`, `sentry` — those attached.
    pub sinks: Vec<&'static str>,
    /// Delivered to a remote backend.
    pub exported: u64,
    /// Lost (queue full, rejected, failed without a spool).
    pub dropped: u64,
    /// Kept in the spool for a later run.
    pub spooled: u64,
    /// Why the last delivery failed (no secrets: the exporters' own words).
    pub last_error: Option<String>,
}

/// Reads what the attached sinks did so far.
#[derive(Clone)]
pub struct HealthProbe {
    events: bool,
    log: bool,
    otel: Option<Arc<OtelSubscriber>>,
    sentry: Option<Arc<SentrySubscriber>>,
}

impl HealthProbe {
    /// Live export health, for the interactive footer and `/observe`: the sinks attached and
    /// what the remote ones delivered, dropped and spooled so far.
    pub fn health(&self) -> Health {
        let mut health = Health::default();
        if self.events {
            health.sinks.push("events");
        }
        if self.log {
            health.sinks.push("log");
        }
        if let Some(otel) = &self.otel {
            let stats = otel.stats();
            health.sinks.push("otlp");
            health.exported += stats.spans_exported;
            health.dropped += stats.spans_dropped();
            health.spooled += stats.spans_spooled;
            health.last_error = health.last_error.or(stats.last_error);
        }
        if let Some(sentry) = &self.sentry {
            let stats = sentry.stats();
            health.sinks.push("sentry");
            health.exported += stats.delivered;
            health.dropped += stats.not_delivered;
            health.spooled += stats.spooled;
            health.last_error = health.last_error.or(stats.last_error);
        }
        health
    }
}

/// The attached sinks of one command.
pub struct Sinks {
    hub: Observability,
    subscriptions: Vec<Subscription>,
    events: Option<Arc<JsonlFileSink>>,
    otel: Option<Arc<OtelSubscriber>>,
    sentry: Option<Arc<SentrySubscriber>>,
    log_guard: Option<LogGuard>,
    /// Where `--log-json` writes (`None`: stderr), for the exit line.
    log_target: Option<String>,
    flush_deadline: Duration,
}

impl Sinks {
    /// True when no sink is attached.
    pub fn is_empty(&self) -> bool {
        self.subscriptions.is_empty()
    }

    /// Keeps `subscription` alive until the sinks finish.
    pub fn keep(&mut self, subscription: Subscription) {
        self.subscriptions.push(subscription);
    }

    /// Shuts the hub down without a summary (the command failed before its work began).
    pub fn close(self) {
        let _ = self.hub.shutdown(self.flush_deadline);
    }

    /// A handle that reads the sinks' live health from another task.
    pub fn probe(&self) -> HealthProbe {
        HealthProbe {
            events: self.events.is_some(),
            log: self.log_guard.is_some(),
            otel: self.otel.clone(),
            sentry: self.sentry.clone(),
        }
    }

    /// Waits (at most the flush deadline) until the sinks have taken what was emitted.
    pub fn flush(&self) -> Result<(), pi_observe::core::SubscriberError> {
        self.hub.flush(self.flush_deadline)
    }

    /// Shuts the hub down within the flush deadline, then says on stderr what each remote sink
    /// delivered and did not (and what the events file could not write), with each trace id in
    /// `traces` (linked through `PI_TRACE_URL_TEMPLATE`) when OTLP is on; then records the
    /// counters of `command` for `pi observe status`. The last thing a command does before the
    /// process ends: the closed sinks' memory is left to the operating system.
    pub fn finish(mut self, command: &str, traces: &[TraceId]) {
        let _ = self.hub.shutdown(self.flush_deadline);
        if let Some(events) = &self.events {
            let (written, not_written) = events.counts();
            if not_written > 0 {
                let why = events.last_error().map(|w| format!(": {w}")).unwrap_or_default();
                output::error(format_args!(
                    "pi: events-jsonl: {written} records written, {not_written} not written ({}{why})",
                    events.path().display()
                ));
            }
        }
        drop(std::mem::take(&mut self.subscriptions));
        if let Some(guard) = self.log_guard.take() {
            let (counts, why) = guard.close(self.flush_deadline);
            let lost = counts.dropped + counts.failed;
            if lost > 0 {
                let why = why.map(|w| format!(": {w}")).unwrap_or_default();
                output::error(format_args!(
                    "pi: log-json: {} lines written, {lost} lost ({}{why})",
                    counts.written,
                    self.log_target.as_deref().unwrap_or("stderr")
                ));
            }
        }
        if let Some(otel) = &self.otel {
            report_otlp(otel, traces);
        }
        if let Some(sentry) = &self.sentry {
            report_sentry(sentry);
        }
        self.save_state(command);
        // Closed: what is left is memory (queues, buffers, clients), which the process ending
        // next gives back at once; freeing it piece by piece cost every run time.
        std::mem::forget(self);
    }

    /// Writes this run's counters to the state file (a failure is one warning).
    fn save_state(&self, command: &str) {
        use crate::cli::run_state::{HubCounters, OtlpCounters, RunState, SentryCounters, SpoolCounters};
        let Some(path) = crate::cli::run_state::state_path() else { return };
        let otlp = self.otel.as_ref().map(|o| o.stats());
        let sentry = self.sentry.as_ref().map(|s| s.stats());
        let spool_stats: Vec<_> =
            [self.otel.as_ref().and_then(|o| o.spool_stats()), self.sentry.as_ref().and_then(|s| s.spool_stats())]
                .into_iter()
                .flatten()
                .collect();
        let deliveries: Vec<_> =
            otlp.iter().map(|o| &o.from_spool).chain(sentry.iter().map(|s| &s.from_spool)).collect();
        let state = RunState {
            version: RunState::VERSION,
            finished_at: pi_observe::agent::time::iso8601(pi_observe::agent::time::now_millis()),
            command: command.to_owned(),
            hub: HubCounters::of(&self.hub.stats()),
            otlp: otlp.as_ref().map(OtlpCounters::of),
            sentry: sentry.as_ref().map(SentryCounters::of),
            spool: SpoolCounters::of(&spool_stats, &deliveries),
        };
        if let Err(e) = state.save(&path) {
            output::error(format_args!(
                "pi: warning: cannot record the run for `pi observe status` ({}: {e})",
                path.display()
            ));
        }
    }
}

/// Each trace id (with a link from `PI_TRACE_URL_TEMPLATE`), the delivery totals and each export
/// diagnostic, on stderr.
fn report_otlp(otel: &OtelSubscriber, traces: &[TraceId]) {
    let stats = otel.stats();
    let template = config::trace_url_template().ok().flatten();
    for trace in traces {
        let link = template.as_ref().map(|t| format!(" {}", t.to(trace))).unwrap_or_default();
        output::error(format_args!("pi: trace {trace}{link}"));
    }
    let not_delivered = stats.spans_dropped();
    let spooled = match (stats.spans_spooled, otel.spool_stats()) {
        (0, _) | (_, None) => String::new(),
        (n, Some(spool)) => spooled_note(n, spool.gone_items.get("traces").copied().unwrap_or(0)),
    };
    let why = if not_delivered > 0 || stats.spans_spooled > 0 { stats.last_error.as_deref() } else { None };
    output::error(format_args!(
        "pi: otlp: {} spans delivered{spooled}, {not_delivered} not delivered{}",
        stats.spans_exported,
        why.map(|w| format!(" (last error: {w})")).unwrap_or_default(),
    ));
    report_from_spool("otlp", &stats.from_spool);
    let spool_diagnostics = otel.spool_stats().map(|s| s.diagnostics).unwrap_or_default();
    for diagnostic in stats.diagnostics.into_iter().chain(spool_diagnostics) {
        output::error(format_args!("pi: warning: {diagnostic}"));
    }
}

/// What was handed to Sentry and what the server accepted, on stderr.
fn report_sentry(sentry: &SentrySubscriber) {
    let stats = sentry.stats();
    // Envelopes still queued at the deadline were not delivered either.
    let not_delivered =
        (stats.transactions + stats.errors).saturating_sub(stats.delivered + stats.spooled).max(stats.not_delivered);
    let gone = sentry.spool_stats().and_then(|s| s.gone_items.get("envelope").copied()).unwrap_or(0);
    let spooled = if stats.spooled > 0 { spooled_note(stats.spooled, gone) } else { String::new() };
    output::error(format_args!(
        "pi: sentry: {} transactions, {} error events: {} delivered{spooled}, {not_delivered} not delivered{}",
        stats.transactions,
        stats.errors,
        stats.delivered,
        reason(not_delivered + stats.spooled, stats.last_error.as_deref()),
    ));
    report_from_spool("sentry", &stats.from_spool);
    for diagnostic in sentry.spool_stats().map(|s| s.diagnostics).unwrap_or_default() {
        output::error(format_args!("pi: warning: {diagnostic}"));
    }
}

/// ", N spooled for the next run", saying how many of them are no longer in the spool folder
/// (another run delivered them, or the folder was emptied) so the count never claims what the
/// disk does not hold.
fn spooled_note(spooled: u64, gone: u64) -> String {
    match gone.min(spooled) {
        0 => format!(", {spooled} spooled for the next run"),
        gone if gone == spooled => {
            format!(", {spooled} spooled but no longer in the spool folder (delivered by another run, or removed)")
        }
        gone => format!(
            ", {spooled} spooled ({} for the next run, {gone} no longer in the spool folder: delivered by another run, or removed)",
            spooled - gone
        ),
    }
}

/// What a sink delivered from the spool, when anything.
fn report_from_spool(sink: &str, earlier: &pi_observe::spool::SpoolDelivery) {
    if earlier.delivered_batches > 0 {
        output::error(format_args!(
            "pi: {sink}: delivered {} batches ({} items) spooled by earlier runs",
            earlier.delivered_batches, earlier.delivered_items
        ));
    }
    if earlier.over_cap > 0 {
        output::error(format_args!(
            "pi: {sink}: removed {} batches spooled by earlier runs under a wider capture than the managed policy now allows (not sent)",
            earlier.over_cap
        ));
    }
}

/// ` (last error: …)` when something was not delivered and the reason is known.
fn reason(not_delivered: u64, last_error: Option<&str>) -> String {
    match last_error {
        Some(why) if not_delivered > 0 => format!(" (last error: {why})"),
        _ => String::new(),
    }
}
