//! Every sink a command can write to, one file each behind one trait, and the list of them.
//!
//! | file | sink | what it is |
//! |---|---|---|
//! | [`otlp`] | `otlp` | traces, metrics and logs over OTLP (remote) |
//! | [`sentry`] | `sentry` | transactions and error events as Sentry envelopes (remote) |
//! | [`log`] | `log` | `--log-json`: JSON lines through `tracing` (local) |
//! | [`events`] | `events` | `--events-jsonl`: the contract records as JSON lines (local) |
//! | [`json`] | `json` | `--mode json`: the contract records on stdout (local) |
//!
//! The life of a sink: [`SinkKind::resolve`] reads its flags, typed settings and variables
//! into a [`Sink`] before any work starts (nothing is created yet; a bad value is a one-line
//! error naming it); [`SinkSetup::attach`] subscribes every resolved sink to the hub under its
//! capture policy, each becoming a [`Running`] sink; [`Sinks::finish`] shuts the hub down within
//! the deadline, lets each running sink say on stderr what it delivered and did not, and records
//! their counters for `pi observe status`. `pi observe status`, `test`, `flush` and `canary` ask
//! the resolved sinks the same way. [`SINKS`] is the list: adding a sink is its adapter crate, one
//! file here and one line there (CONTRIBUTING.md, "Adding a sink").
//!
//! Support modules: [`capture`] (one content policy per sink), [`spool`] (where undelivered
//! batches go), `local` (what the file sinks share), [`trace_link`] (`PI_TRACE_URL_TEMPLATE`), [`exit`] (the exit lines' wording).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pi_observe::core::{ContentKind, ContentPolicy, Observability, ProbeOutcome, Subscription, TraceId};
use pi_observe::spool::{SpoolConfig, SpoolDelivery, SpoolStats};
use serde_json::Value;

pub mod capture;
mod events;
pub mod exit;
mod json;
mod local;
mod log;
mod otlp;
mod sentry;
pub mod spool;
pub mod trace_link;

pub use capture::SinkPolicies;

use crate::cli::CliError;
use crate::cli::args::SinkArgs;
use crate::cli::config::{Config, Source};

/// Every sink, in the order `pi observe status` lists them and the exit lines speak.
pub const SINKS: &[SinkKind] = &[otlp::KIND, sentry::KIND, log::KIND, events::KIND, json::KIND];

/// How long the exit waits for sinks to write what they have (unless a sink sets its own).
pub const FLUSH_DEADLINE: Duration = Duration::from_secs(5);

/// One kind of sink: its name and how it is resolved.
pub struct SinkKind {
    /// The name `--capture NAME=`, `telemetry.sinks.NAME`, `pi observe` and the exit lines use.
    pub name: &'static str,
    /// True when it sends off the machine: the `remote` group of `--capture` (others are
    /// `local`, which a bare `--capture KINDS` means), and `pi observe test` probes it.
    pub remote: bool,
    /// Reads the sink's flags, settings and variables: `None` when it is off.
    pub resolve: fn(&Resolve<'_>) -> Resolved,
}

/// A sink resolved from its configuration (`None`: off), or the one-line error naming what is
/// wrong with it.
pub type Resolved = Result<Option<Box<dyn Sink>>, CliError>;

/// What a sink is resolved from.
pub struct Resolve<'a> {
    /// The command's sink flags.
    pub args: &'a SinkArgs,
    /// The command's `--events-jsonl` (or the demo's events file), when it has one.
    pub events: Option<&'a Path>,
    /// The settings files and the managed policy.
    pub cfg: &'a Config,
    /// What this sink captures.
    pub policy: &'a ContentPolicy,
    spool: Option<&'a SpoolConfig>,
    name: &'static str,
}

impl Resolve<'_> {
    /// The spool for this (remote) sink's undelivered batches, stamped with what the sink
    /// captures: its batches are delivered later only while the managed policy's cap for the
    /// sink still allows that. `None` with the spool off.
    pub fn spool(&self) -> Result<Option<SpoolConfig>, CliError> {
        let Some(config) = self.spool else { return Ok(None) };
        let names = |kinds: &mut dyn Iterator<Item = ContentKind>| kinds.map(|k| k.as_str().to_owned()).collect();
        let mut config = config.clone();
        config.capture = names(&mut ContentKind::ALL.into_iter().filter(|k| self.policy.captures(*k)));
        config.capture_cap = self.cfg.capture_cap(self.name)?.map(|cap| names(&mut cap.into_iter()));
        Ok(Some(config))
    }
}

/// A sink resolved from its configuration, not yet created.
pub trait Sink: Send {
    /// Its resolved values and where each came from, for `pi observe status` and `pi config`
    /// (`None` when there is nothing to show: off until attached, or only a stdout stream).
    fn status(&self, sources: &Sources<'_>) -> Option<Value>;

    /// The file it writes, as (flag, path), checked before any work starts.
    fn output_file(&self) -> Option<(&'static str, &Path)> {
        None
    }

    /// How long the exit should wait for it, when it says.
    fn flush_deadline(&self) -> Option<Duration> {
        None
    }

    /// For a backfill (`pi export`): metrics off (replayed spans are idempotent, sums are not).
    fn without_metrics(&mut self) {}

    /// `pi observe test`: one probe per request it would make (none for a local sink).
    fn probe(&self, _trace: TraceId) -> Result<Vec<ProbeOutcome>, CliError> {
        Ok(Vec::new())
    }

    /// `pi observe flush`: delivers what it spooled before `deadline` (`None`: it spools nothing).
    fn deliver_spooled(&self, _deadline: Instant) -> Result<Option<Delivered>, CliError> {
        Ok(None)
    }

    /// `pi observe canary`: its output goes to a local capture under `dir` instead (its spool
    /// off); the returned reader gives what it would have sent, one item per request or file.
    /// `None` when it would send nothing (off).
    fn canary(&mut self, dir: &Path) -> Option<CanaryReader>;

    /// Subscribes it to the hub under `policy`; `None` when it turns out to have nothing to do.
    fn attach(self: Box<Self>, to: &Attach<'_>) -> Result<Option<Attached>, CliError>;
}

/// Reads what a sink under `pi observe canary` would have sent.
pub type CanaryReader = Box<dyn FnOnce() -> Vec<Vec<u8>> + Send>;

/// What a sink's spooled batches came to under `pi observe flush`.
pub struct Delivered {
    /// Where they went, without secrets.
    pub destination: String,
    /// What was delivered, kept, held and removed.
    pub result: SpoolDelivery,
    /// The sink's spool counters afterwards.
    pub stats: SpoolStats,
}

/// Where a sink attaches.
pub struct Attach<'a> {
    /// The hub.
    pub hub: &'a Observability,
    /// The sink's content policy (shared with sinks that capture the same kinds).
    pub policy: Arc<ContentPolicy>,
    /// True when the command prints contract records on stdout (`--mode json`).
    pub json_mode: bool,
}

/// An attached sink: its subscription and, when it has something to report, its running side.
pub struct Attached {
    /// Kept until the sinks finish.
    pub subscription: Subscription,
    /// What it says at exit, its live health and counters.
    pub running: Option<Arc<dyn Running>>,
}

/// A sink at work.
pub trait Running: Send + Sync {
    /// Adds what it delivered, lost and spooled so far (remote sinks).
    fn health(&self, _health: &mut Health) {}

    /// After the hub is shut down: says on stderr what it delivered and did not (each trace id
    /// in `traces` where that is how the user finds the run).
    fn report(&self, _traces: &[TraceId], _deadline: Duration) {}

    /// Its counters for the state file (`pi observe status` shows them), when it keeps any.
    fn counters(&self) -> Option<Value> {
        None
    }

    /// Its spool's counters and what it delivered from the spool, when it has a spool.
    fn spool(&self) -> Option<(SpoolStats, SpoolDelivery)> {
        None
    }
}

/// The sinks' configuration, checked: nothing is created yet.
pub struct SinkSetup {
    /// One content policy per sink.
    pub policies: SinkPolicies,
    sinks: Vec<(&'static SinkKind, Box<dyn Sink>)>,
    /// Where undelivered batches go, and where that setting came from.
    pub spool: Option<(SpoolConfig, Source)>,
    /// How long the exit waits for the sinks.
    pub flush_deadline: Duration,
}

impl SinkSetup {
    /// Resolves every sink of [`SINKS`] from the flags (`events`: the command's
    /// `--events-jsonl`, when it has one), their variables and the `telemetry` settings; a bad
    /// value is a one-line error naming it.
    pub fn resolve(args: &SinkArgs, events: Option<&Path>, cfg: &Config) -> Result<SinkSetup, CliError> {
        let policies = capture::policies(&args.content, cfg)?;
        let spool = spool::spool(args.spool_dir.as_deref(), args.no_spool, cfg)?;
        let mut sinks = Vec::new();
        for kind in SINKS {
            let from = Resolve {
                args,
                events,
                cfg,
                policy: policies.of(kind.name),
                spool: spool.as_ref().map(|(config, _)| config),
                name: kind.name,
            };
            if let Some(sink) = (kind.resolve)(&from)? {
                sinks.push((kind, sink));
            }
        }
        let flush_deadline = sinks.iter().find_map(|(_, s)| s.flush_deadline()).unwrap_or(FLUSH_DEADLINE);
        Ok(SinkSetup { policies, sinks, spool, flush_deadline })
    }

    /// The resolved sinks, in [`SINKS`] order.
    pub fn sinks(&self) -> impl Iterator<Item = (&'static SinkKind, &dyn Sink)> {
        self.sinks.iter().map(|(kind, sink)| (*kind, sink.as_ref()))
    }

    /// True when a remote sink is on.
    pub fn has_remote(&self) -> bool {
        self.sinks.iter().any(|(kind, _)| kind.remote)
    }

    /// For `pi observe canary`: every sink's output becomes a local capture under `dir` and the
    /// spool is off. Everything else — which sinks, capture per sink, redaction, conventions —
    /// stays the user's. Returns each sink's reader, in [`SINKS`] order.
    pub fn into_canary(mut self, dir: &Path) -> (SinkSetup, Vec<(&'static str, CanaryReader)>) {
        let readers =
            self.sinks.iter_mut().filter_map(|(kind, sink)| sink.canary(dir).map(|read| (kind.name, read))).collect();
        self.spool = None;
        (self, readers)
    }

    /// Turns OTLP metrics off (a backfill exports spans only unless asked).
    pub fn without_metrics(&mut self) {
        for (_, sink) in &mut self.sinks {
            sink.without_metrics();
        }
    }

    /// The files these sinks would write, as (flag, path), for
    /// [`crate::cli::files::check_outputs`].
    pub fn output_files(&self) -> Vec<(&'static str, &Path)> {
        // Local files in the order a user lists them: the events file, then the log.
        self.sinks.iter().rev().filter_map(|(_, sink)| sink.output_file()).collect()
    }

    /// A hub whose default policy is safe-only with this scrubber.
    pub fn hub(&self) -> Observability {
        Observability::with_policy(self.policies.base.clone())
    }

    /// Subscribes every sink to `hub`, each under its own policy, in reverse [`SINKS`] order:
    /// of the sinks sharing a policy, the last one subscribed is handed each record to keep,
    /// and the OTLP queue is the one that keeps records.
    pub fn attach(self, hub: &Observability, json_mode: bool) -> Result<Sinks, CliError> {
        // Sinks whose policies capture the same kinds share one policy instance: the hub then
        // redacts (and copies) each record once for all of them instead of once per sink. The
        // per-sink policies differ only in what they capture (same scrubber, limits, redactors).
        let mut shared: Vec<(Vec<bool>, Arc<ContentPolicy>)> = Vec::new();
        let mut policy = |p: &ContentPolicy| {
            let key: Vec<bool> = ContentKind::ALL.iter().map(|k| p.captures(*k)).collect();
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
            running: Vec::new(),
            flush_deadline: self.flush_deadline,
        };
        for (kind, sink) in self.sinks.into_iter().rev() {
            let to = Attach { hub, policy: policy(self.policies.of(kind.name)), json_mode };
            if let Some(attached) = sink.attach(&to)? {
                sinks.subscriptions.push(attached.subscription);
                if let Some(running) = attached.running {
                    sinks.running.push((kind.name, running));
                }
            }
        }
        sinks.running.reverse();
        Ok(sinks)
    }
}

/// What the attached sinks did so far (spans for OTLP, envelopes for Sentry).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Health {
    /// The names of the sinks attached, in alphabetical order.
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
    running: Vec<(&'static str, Arc<dyn Running>)>,
}

impl HealthProbe {
    /// Live export health, for the interactive footer and `/observe`: the sinks attached and
    /// what the remote ones delivered, dropped and spooled so far.
    pub fn health(&self) -> Health {
        let mut health = Health::default();
        for (name, running) in &self.running {
            health.sinks.push(name);
            running.health(&mut health);
        }
        health.sinks.sort_unstable();
        health
    }
}

/// The attached sinks of one command.
pub struct Sinks {
    hub: Observability,
    subscriptions: Vec<Subscription>,
    running: Vec<(&'static str, Arc<dyn Running>)>,
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
        HealthProbe { running: self.running.clone() }
    }

    /// Waits (at most the flush deadline) until the sinks have taken what was emitted.
    pub fn flush(&self) -> Result<(), pi_observe::core::SubscriberError> {
        self.hub.flush(self.flush_deadline)
    }

    /// Shuts the hub down within the flush deadline, then lets each sink say on stderr what it
    /// delivered and did not (with each trace id in `traces` where that is how a user finds the
    /// run); then records the counters of `command` for `pi observe status`. The last thing a
    /// command does before the process ends: the closed sinks' memory is left to the operating
    /// system.
    pub fn finish(mut self, command: &str, traces: &[TraceId]) {
        let _ = self.hub.shutdown(self.flush_deadline);
        drop(std::mem::take(&mut self.subscriptions));
        for (_, running) in &self.running {
            running.report(traces, self.flush_deadline);
        }
        crate::cli::run_state::save(command, &self.hub.stats(), &self.running);
        // Closed: what is left is memory (queues, buffers, clients), which the process ending
        // next gives back at once; freeing it piece by piece cost every run time.
        std::mem::forget(self);
    }
}

/// The content kinds `policy` captures.
pub fn captured(policy: &ContentPolicy) -> Vec<&'static str> {
    ContentKind::ALL.iter().filter(|k| policy.captures(**k)).map(|k| k.as_str()).collect()
}

/// Where each value of a sink came from, for `pi observe status`.
pub struct Sources<'a> {
    /// The settings files and the managed policy.
    pub cfg: &'a Config,
    /// The command's sink flags.
    pub args: &'a SinkArgs,
    /// What the sink captures.
    pub policy: &'a ContentPolicy,
}

impl Sources<'_> {
    /// The source of the setting `key`, given by `flag` when it was given, else by `vars`.
    pub fn of(&self, key: &[&str], flag: Option<&'static str>, vars: &[&str]) -> String {
        self.cfg.source(key, flag, vars).to_string()
    }

    /// The source of sink `name`'s capture, saying when the managed policy caps it.
    pub fn capture(&self, name: &str) -> String {
        let flagged = self.args.content.capture.iter().any(|c| capture::names_sink(c, name));
        let capped = self.cfg.capture_cap(name).ok().flatten().is_some();
        let key = crate::cli::config::telemetry::sink_key(name, "capture");
        let from = self.of(&key, flagged.then_some("--capture"), &[]);
        if capped && !from.starts_with("managed") { format!("{from}, capped by the managed policy") } else { from }
    }
}
