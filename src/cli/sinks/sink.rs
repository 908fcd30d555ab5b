//! What every sink implements: its entry in the list ([`SinkKind`]), its resolved configuration
//! ([`Sink`]) and, once attached to the hub, its running side ([`Running`]).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pi_observe::core::{ContentKind, ContentPolicy, Observability, ProbeOutcome, Subscriber, Subscription, TraceId};
use pi_observe::spool::{SpoolConfig, SpoolDelivery, SpoolStats};
use serde_json::Value;

use super::flags::SinkArgs;
use crate::cli::CliError;
use crate::cli::config::{Config, Key};
use crate::cli::settings::SinkCheck;

/// One kind of sink: its name and how it is resolved.
pub struct SinkKind {
    /// The name `--capture NAME=`, `telemetry.sinks.NAME`, `pi observe` and the exit lines use.
    pub name: &'static str,
    /// True when it sends off the machine: the `remote` group of `--capture` (others are
    /// `local`, which a bare `--capture KINDS` means), and `pi observe test` probes it.
    pub remote: bool,
    /// The key of its settings object that says where it sends (`endpoint`, `dsn`, `path`): set
    /// in the managed policy, it pins the sink (flags and variables cannot move it). `None`: the
    /// sink cannot be pinned.
    pub pins: Option<&'static Key<String>>,
    /// Adds the flags the sink declares itself (read back from
    /// [`SinkArgs::declared`](super::flags::SinkArgs::declared)); the built-in sinks' flags are
    /// fields of `SinkArgs`, so theirs add nothing.
    pub flags: fn(clap::Command) -> clap::Command,
    /// How its `telemetry.sinks.NAME` settings object is checked: `check::<ItsSettings>`, a
    /// serde type with `enabled` and `capture` among its keys; `None` when settings cannot
    /// configure it. A wrong value is an error naming its key path, an unknown key one warning.
    pub settings: Option<SinkCheck>,
    /// Reads the sink's flags, settings and variables: `None` when it is off.
    pub resolve: fn(&Resolve<'_>) -> Resolved,
}

/// For [`SinkKind::flags`]: a sink that declares no flags of its own.
pub fn no_flags(cmd: clap::Command) -> clap::Command {
    cmd
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
    /// The spool, when it is on.
    pub spool: Option<&'a SpoolConfig>,
    /// The sink's name.
    pub name: &'static str,
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

    /// For a backfill (`pi export`): the replay can wait for a sink, so it is paced rather than
    /// dropped, and a receiver that does not answer is found out early (asked at once while
    /// the sessions are still being read, or given a short patience for its first answer).
    fn for_backfill(&mut self) {}

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

    /// Subscribes it to the hub under `policy` (or hands its subscriber back to be run off the
    /// agent's threads, [`Subscribed::OffThread`]); `None` when it turns out to have nothing to
    /// do.
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
    /// How its subscriber is subscribed.
    pub subscription: Subscribed,
    /// What it says at exit, its live health and counters.
    pub running: Option<Arc<dyn Running>>,
}

/// How an attached sink's subscriber reaches the hub.
pub enum Subscribed {
    /// Subscribed by the sink (kept until the sinks finish).
    Now(Subscription),
    /// To be run off the agent's threads: [`super::SinkSetup::attach`] subscribes the sinks of
    /// one policy that ask for it together, on one thread of their own ([`Background`]), so each
    /// record is queued once for all of them. The flag names the sink in the error when that
    /// thread cannot start.
    ///
    /// [`Background`]: pi_observe::core::Background
    OffThread(Arc<dyn Subscriber>, &'static str),
}

/// A sink at work.
pub trait Running: Send + Sync {
    /// Adds what it delivered, lost and spooled so far (remote sinks).
    fn health(&self, _health: &mut Health) {}

    /// After the hub is shut down: says on stderr what it delivered and did not (each trace id
    /// in `traces` where that is how the user finds the run).
    fn report(&self, _traces: &[TraceId], _deadline: Duration) {}

    /// What it leaves in the state file (`pi observe status` shows it).
    fn state(&self) -> SinkState {
        SinkState::default()
    }
}

/// What a running sink leaves in the state file.
#[derive(Default)]
pub struct SinkState {
    /// Its counters, when it keeps any.
    pub counters: Option<Value>,
    /// Its spool's counters and what it delivered from the spool, when it has a spool.
    pub spool: Option<(SpoolStats, SpoolDelivery)>,
}

impl SinkState {
    /// A remote sink's state: its `counters`, and its spool's (`spool`) with what it delivered
    /// from the spool (`from_spool`).
    pub fn remote(counters: impl serde::Serialize, spool: Option<SpoolStats>, from_spool: &SpoolDelivery) -> Self {
        let spool = spool.map(|stats| (stats, from_spool.clone()));
        SinkState { counters: serde_json::to_value(counters).ok(), spool }
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
    /// Where what it captures came from (a `--capture` flag naming it, a settings file, the
    /// managed policy's cap).
    pub capture: String,
}

impl Sources<'_> {
    /// The source of the setting `key`, given by `flag` when it was given, else by `vars`.
    pub fn of<T>(&self, key: &Key<T>, flag: Option<&'static str>, vars: &[&str]) -> String {
        self.cfg.source(key, flag, vars).to_string()
    }
}
