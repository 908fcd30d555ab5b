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
//! The life of a sink: [`SinkKind::flags`] and [`SinkKind::settings`] declare its flags and
//! settings keys (the built-in sinks' older flags are fields of [`SinkArgs`]);
//! [`SinkKind::resolve`] reads its flags, settings and variables into a [`Sink`] before any work
//! starts (nothing is created yet; a bad value is a one-line
//! error naming it); [`SinkSetup::attach`] subscribes every resolved sink to the hub under its
//! capture policy, each becoming a [`Running`] sink; [`Sinks::finish`] shuts the hub down within
//! the deadline, lets each running sink say on stderr what it delivered and did not, and records
//! their counters for `pi observe status`. `pi observe status`, `test`, `flush` and `canary` ask
//! the resolved sinks the same way. [`SINKS`] is the list: adding a sink is its adapter crate, one
//! file here and its line in the list (CONTRIBUTING.md, "Adding a sink").
//!
//! Support modules: `sink` (the traits), `flags` (the sink flags), [`capture`] (one content
//! policy per sink), [`spool`] (where undelivered batches go), `local` (what the file sinks
//! share), [`trace_link`] (`PI_TRACE_URL_TEMPLATE`), [`exit`] (the exit lines' wording). None of
//! them, and no sink, uses this module: the list is handed to what needs it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use pi_observe::core::{Background, ContentKind, ContentPolicy, Observability, Subscriber, Subscription, TraceId};
use pi_observe::spool::{SpoolConfig, SpoolDelivery, SpoolStats};
use serde_json::Value;

pub mod capture;
mod events;
pub mod exit;
mod flags;
mod json;
mod local;
mod log;
mod otlp;
mod sentry;
mod sink;
pub mod spool;
pub mod trace_link;

pub use capture::SinkPolicies;
pub use flags::{OtlpArgs, SinkArgs, parse_key_value};
pub use sink::{
    Attach, CanaryReader, Delivered, Health, Resolve, Running, Sink, SinkKind, Sources, Subscribed, captured,
};

use crate::cli::CliError;
use crate::cli::config::{Config, Source};

/// Every sink, in the order `pi observe status` lists them and the exit lines speak. Adding a
/// sink: its file above (`mod NAME;`) and its `NAME::KIND` here (CONTRIBUTING.md, "Adding a sink").
pub const SINKS: &[SinkKind] = &[otlp::KIND, sentry::KIND, log::KIND, events::KIND, json::KIND];

/// The subscribers of the sinks under one policy that asked to run off the agent's threads
/// ([`Subscribed::OffThread`]), to run on one thread of their own ([`Background`]): each record
/// is queued once for all of them, not once per sink. The remote sinks come first: the thread
/// hands each batch to one sink after another, and at the exit a remote sink still has a
/// request to send and wait for after its last record, a file sink only a write.
struct OffThread {
    policy: Arc<ContentPolicy>,
    subscribers: Vec<Arc<dyn Subscriber>>,
    /// The sinks' flags, for the error when the thread cannot start.
    flags: Vec<&'static str>,
    /// How many of the subscribers (the first ones) are remote sinks'.
    remote: usize,
}

impl OffThread {
    /// Adds `subscriber` (of a `remote` sink or not) to the group of `policy` in `groups`.
    fn add(
        groups: &mut Vec<OffThread>,
        policy: &Arc<ContentPolicy>,
        (subscriber, flag): (Arc<dyn Subscriber>, &'static str),
        remote: bool,
    ) {
        let at = match groups.iter().position(|g| Arc::ptr_eq(&g.policy, policy)) {
            Some(at) => at,
            None => {
                groups.push(OffThread {
                    policy: policy.clone(),
                    subscribers: Vec::new(),
                    flags: Vec::new(),
                    remote: 0,
                });
                groups.len() - 1
            }
        };
        let group = &mut groups[at];
        // After the remote sinks already there (a remote one), or last (a local one).
        let place = if remote { group.remote } else { group.subscribers.len() };
        group.subscribers.insert(place, subscriber);
        group.flags.insert(place, flag);
        group.remote += usize::from(remote);
    }

    /// Starts the thread and subscribes it to `hub`; the thread, for its drop count, and the
    /// sinks' flags.
    fn subscribe(self, hub: &Observability) -> Result<(Subscription, Arc<Background>, String), CliError> {
        /// Records queued before new ones are dropped (and counted).
        const QUEUE: usize = 8192;
        let flags = self.flags.join(", ");
        let background = Background::spawn_many(self.subscribers, "pi-sinks", QUEUE)
            .map_err(|e| CliError::Failure(format!("{flags}: cannot start the sinks' thread: {e}")))?;
        let background = Arc::new(background);
        Ok((hub.subscribe_arc(background.clone(), self.policy), background, flags))
    }
}

/// `cmd` with the flags each sink declares itself ([`SinkKind::flags`]) added to every command
/// (and subcommand) that takes the sink flags ([`SinkArgs`], found by its argument group).
pub fn with_sink_flags(cmd: clap::Command) -> clap::Command {
    let takes_sinks = cmd.get_groups().any(|g| g.get_id() == "SinkArgs");
    let mut cmd = if takes_sinks { SINKS.iter().fold(cmd, |cmd, kind| (kind.flags)(cmd)) } else { cmd };
    let names: Vec<String> = cmd.get_subcommands().map(|c| c.get_name().to_owned()).collect();
    for name in names {
        cmd = cmd.mut_subcommand(name, with_sink_flags);
    }
    cmd
}

/// Compiles the built-in secret scrubber's rules — a few milliseconds, which the first check of
/// a tool's name or id, or of captured text, would otherwise spend on the agent's path — on a
/// short-lived thread of their own while the command starts up. Whoever needs the scrubber
/// before it is done waits for that compile rather than starting another.
pub fn compile_scrubber_early() {
    let _ = std::thread::Builder::new()
        .name("pi-scrubber".into())
        .spawn(|| pi_observe::core::Scrubber::default().compile());
}

/// Declares each sink's settings keys to the settings files' check (before any file is read).
pub fn declare_settings() {
    crate::cli::settings::declare_sinks(SINKS.iter().filter_map(|k| Some((k.name, k.settings?))).collect());
}

/// How long the exit waits for sinks to write what they have (unless a sink sets its own).
pub const FLUSH_DEADLINE: Duration = Duration::from_secs(5);

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
        let policies = capture::policies(&args.content, cfg, SINKS)?;
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

    /// Each resolved sink's values and where each came from, for `pi observe status` and `pi
    /// config` (sinks with nothing to show are left out).
    pub fn statuses(&self, args: &SinkArgs, cfg: &Config) -> Vec<Value> {
        let sources = |name: &str| {
            let flagged = args.content.capture.iter().any(|c| capture::names_sink(c, name, SINKS));
            let capped = cfg.capture_cap(name).ok().flatten().is_some();
            let from = cfg.capture_source(name, flagged).to_string();
            let capture = if capped && !from.starts_with("managed") {
                format!("{from}, capped by the managed policy")
            } else {
                from
            };
            Sources { cfg, args, policy: self.policies.of(name), capture }
        };
        self.sinks.iter().filter_map(|(kind, sink)| sink.status(&sources(kind.name))).collect()
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

    /// A backfill: remote sinks pace the replay instead of dropping what it hands them, and find
    /// out early whether their receiver answers, so a stalled one's batches go straight to the
    /// spool.
    pub fn for_backfill(&mut self) {
        for (_, sink) in &mut self.sinks {
            sink.for_backfill();
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

    /// Subscribes every sink to `hub`, each under its own policy, in reverse [`SINKS`] order;
    /// then, per policy, the sinks that run off the agent's threads, on one thread together
    /// ([`Subscribed::OffThread`]). Of the subscribers sharing a policy, the last one subscribed
    /// is handed each record to keep: that thread's queue.
    pub fn attach(self, hub: &Observability, json_mode: bool) -> Result<Sinks, CliError> {
        self.attach_with(hub, json_mode, None)
    }

    /// [`SinkSetup::attach`], with `watcher` — a light subscriber of the command's own (the
    /// prompts' trace ids), run on the agent's threads — subscribed under the policy of the
    /// first group of sinks that run off those threads, just before that group's thread: the
    /// hub then hands it each record by reference with the group's, where under a policy of
    /// its own it cost a copy and a redaction pass of every record (~1.7 ms of the 32-turn
    /// all-sinks run, measured without it). With no such group, under the base (safe-only)
    /// policy, the hub's default.
    pub fn attach_with(
        self,
        hub: &Observability,
        json_mode: bool,
        mut watcher: Option<Arc<dyn Subscriber>>,
    ) -> Result<Sinks, CliError> {
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
            off_threads: Vec::new(),
            running: Vec::new(),
            flush_deadline: self.flush_deadline,
        };
        // The sinks that run off the agent's threads, by policy: remote ones first, each kind in
        // the order attached.
        let mut off_threads = Vec::new();
        for (kind, sink) in self.sinks.into_iter().rev() {
            let to = Attach { hub, policy: policy(self.policies.of(kind.name)), json_mode };
            let Some(attached) = sink.attach(&to)? else { continue };
            match attached.subscription {
                Subscribed::Now(subscription) => sinks.subscriptions.push(subscription),
                Subscribed::OffThread(subscriber, flag) => {
                    OffThread::add(&mut off_threads, &to.policy, (subscriber, flag), kind.remote)
                }
            }
            if let Some(running) = attached.running {
                sinks.running.push((kind.name, running));
            }
        }
        for group in off_threads {
            if let Some(watcher) = watcher.take() {
                sinks.subscriptions.push(hub.subscribe_arc(watcher, group.policy.clone()));
            }
            let (subscription, background, flags) = group.subscribe(hub)?;
            sinks.subscriptions.push(subscription);
            sinks.off_threads.push((background, flags));
        }
        if let Some(watcher) = watcher {
            sinks.subscriptions.push(hub.subscribe_arc(watcher, Arc::new(self.policies.base.clone())));
        }
        sinks.running.reverse();
        Ok(sinks)
    }
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
    /// The threads the sinks that work off the agent's threads share, with their flags.
    off_threads: Vec<(Arc<Background>, String)>,
    running: Vec<(&'static str, Arc<dyn Running>)>,
    flush_deadline: Duration,
}

impl Sinks {
    /// True when no sink is attached.
    pub fn is_empty(&self) -> bool {
        self.subscriptions.is_empty()
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

    /// A backfill's pace: waits until the sinks have taken what was emitted, flush after flush
    /// while one times out and the sinks' threads are still handing records over (a slow
    /// receiver the replay waits for: ADR 0033), so their queues never overflow. When a whole
    /// flush deadline passes without a record handed over, the last flush's error is returned
    /// and the caller goes on (what then does not fit a queue is dropped and counted).
    pub fn pace(&self) -> Result<(), pi_observe::core::SubscriberError> {
        let handed = || self.off_threads.iter().map(|(background, _)| background.handed()).sum::<u64>();
        let mut before = handed();
        loop {
            let Err(e) = self.flush() else { return Ok(()) };
            let now = handed();
            if now == before {
                return Err(e);
            }
            before = now;
        }
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
        // What their shared queue dropped never reached those sinks' own counts.
        for (background, flags) in &self.off_threads {
            let dropped = background.dropped();
            if dropped > 0 {
                crate::cli::output::error(format_args!(
                    "pi: {flags}: {dropped} records dropped before these sinks got them (their queue was full, or \
                     they came after the exit began)"
                ));
            }
        }
        self.save_state(command);
        // Closed: what is left is memory (queues, buffers, clients), which the process ending
        // next gives back at once; freeing it piece by piece cost every run time.
        std::mem::forget(self);
    }

    /// Records the counters of a finished `command` — the hub's and each running sink's — in the
    /// state file (a failure is one warning on stderr).
    fn save_state(&self, command: &str) {
        use crate::cli::run_state::{HubCounters, RunState, SpoolCounters, state_path};
        let Some(path) = state_path() else { return };
        let states: Vec<(&str, sink::SinkState)> = self.running.iter().map(|(name, r)| (*name, r.state())).collect();
        let (spool_stats, deliveries): (Vec<SpoolStats>, Vec<SpoolDelivery>) =
            states.iter().filter_map(|(_, state)| state.spool.clone()).unzip();
        let state = RunState {
            version: RunState::VERSION,
            finished_at: pi_observe::agent::time::iso8601(pi_observe::agent::time::now_millis()),
            command: command.to_owned(),
            hub: HubCounters::of(&self.hub.stats()),
            sinks: states
                .iter()
                .filter_map(|(name, state)| Some(((*name).to_owned(), state.counters.clone()?)))
                .collect(),
            spool: SpoolCounters::of(&spool_stats, &deliveries),
        };
        if let Err(e) = state.save(&path) {
            crate::cli::output::error(format_args!(
                "pi: warning: cannot record the run for `pi observe status` ({}: {e})",
                path.display()
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SINKS;
    use super::capture::names_sink;

    #[test]
    fn the_remote_sinks_come_first_on_the_sinks_thread() {
        use super::OffThread;
        use std::sync::Arc;
        let policy = Arc::new(pi_observe_core::ContentPolicy::default());
        let nothing = || -> Arc<dyn pi_observe_core::Subscriber> { Arc::new(|_: &pi_observe_core::ObsEvent| {}) };
        let mut groups = Vec::new();
        for (flag, remote) in [("--events-jsonl", false), ("--log-json", false), ("--sentry", true)] {
            OffThread::add(&mut groups, &policy, (nothing(), flag), remote);
        }
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].flags, ["--sentry", "--events-jsonl", "--log-json"]);
    }

    #[test]
    fn a_capture_value_names_its_sinks_and_no_others() {
        let names = |value, sink| names_sink(value, sink, SINKS);
        assert!(names("prompt", "log") && names("prompt", "events") && names("prompt", "json"));
        assert!(!names("prompt", "otlp"), "a bare value is local only");
        assert!(names("remote=prompt", "sentry") && !names("remote=prompt", "log"));
        assert!(names("events=prompt", "events") && !names("events=prompt", "log"));
        assert!(names("all=prompt", "otlp"));
        assert!(!names("nope=prompt", "otlp"));
    }
}
