//! The Sentry sink: transactions and error events as envelopes (`--sentry [DSN]`, `SENTRY_*`,
//! `telemetry.sinks.sentry`), through `pi-observe-sentry`.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pi_observe::core::{ProbeOutcome, TraceId};
use pi_observe::otel::url_without_secrets;
use pi_observe::sentry::{EnvelopeCapture, SentryConfig, SentryStats, SentrySubscriber};
use pi_observe::spool::Spool;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::exit;
use super::sink::{
    Attach, Attached, CanaryReader, Delivered, Health, Resolve, Resolved, Running, Sink, SinkKind, SinkState, Sources,
    Subscribed, no_flags,
};
use crate::cli::CliError;
use crate::cli::config::{Config, Given, env_set};
use crate::cli::output;
use crate::cli::settings::{Ratio, check, sink_section};

/// The Sentry sink in the list of sinks (`SINKS`).
pub const KIND: SinkKind = SinkKind {
    name: "sentry",
    remote: true,
    pins: Some(&key::DSN),
    flags: no_flags,
    settings: Some(check::<Settings>),
    resolve,
};

fn resolve(from: &Resolve<'_>) -> Resolved {
    let Some(mut config) = settings(from.args.sentry.as_deref(), from.cfg)? else { return Ok(None) };
    config.spool = from.spool()?;
    Ok(Some(Box::new(SentrySink { config })))
}

/// The Sentry settings from the managed policy, `--sentry [DSN]`, `SENTRY_*` and
/// `telemetry.sinks.sentry`; `None` when none of them asks for Sentry. A DSN the managed policy
/// sets pins the sink.
fn settings(flag: Option<&str>, cfg: &Config) -> Result<Option<SentryConfig>, CliError> {
    if flag.is_none() && !env_set("SENTRY_DSN") && !cfg.sink_in_files("sentry", &key::DSN) {
        return Ok(None);
    }
    let mut config = SentryConfig::default();
    let flag_dsn = flag.map(str::trim).filter(|d| !d.is_empty());
    let from_file = |config: &mut SentryConfig| -> Result<(), CliError> {
        if let Some((dsn, source)) = cfg.text(&key::DSN)? {
            config.dsn = Some(dsn.trim().to_owned());
            config.dsn_source = Some(format!("{}: {}", source.file(), key::DSN.dotted()));
        }
        Ok(())
    };
    if let Some(managed) = cfg.pinned(&key::DSN) {
        if flag_dsn.is_some() || env_set("SENTRY_DSN") {
            cfg.notice(format!(
                "the managed policy {} pins the Sentry sink: {} ignored",
                managed.path.display(),
                if flag_dsn.is_some() { "--sentry DSN" } else { "SENTRY_DSN" }
            ));
        }
        from_file(&mut config)?;
    } else if let Some(dsn) = flag_dsn {
        config.dsn = Some(dsn.to_owned());
        config.dsn_source = Some("--sentry".into());
    } else if !env_set("SENTRY_DSN") {
        from_file(&mut config)?;
    }
    // Each by the one precedence: the managed policy, the variable, the project's file, the
    // global one.
    let text = |key, var: &str| cfg.pick(key, None, &[var]).map(|found| found.text());
    config.environment = text(&key::ENVIRONMENT, "SENTRY_ENVIRONMENT");
    config.release = text(&key::RELEASE, "SENTRY_RELEASE");
    if let Some(found) = cfg.pick(&key::SAMPLE_RATE, None, &["SENTRY_TRACES_SAMPLE_RATE"]) {
        let rate = match &found.value {
            Given::Set(rate) => Some(*rate),
            Given::Var(raw) => raw.trim().parse::<f64>().ok().filter(|r| (0.0..=1.0).contains(r)),
            Given::Flag => None,
        };
        config.traces_sample_rate = Some(rate.ok_or_else(|| {
            CliError::Usage(format!("{}: {:?} is not a ratio between 0 and 1", found.culprit(), found.text()))
        })?);
    }
    let lookup = |name: &str| {
        let ignored = name != "SENTRY_DSN" || cfg.pinned(&key::DSN).is_some();
        std::env::var(name).ok().filter(|v| !ignored && !v.trim().is_empty())
    };
    let config = config.with_env(lookup).map_err(|e| CliError::Usage(e.to_string()))?;
    Ok(Some(config))
}

struct SentrySink {
    config: SentryConfig,
}

impl Sink for SentrySink {
    fn status(&self, sources: &Sources<'_>) -> Option<Value> {
        let c = &self.config;
        let dsn_flag = sources.args.sentry.as_deref().filter(|d| !d.trim().is_empty()).map(|_| "--sentry");
        Some(json!({
            "sink": "sentry",
            "endpoint": c.envelope_url().map(|u| url_without_secrets(&u)),
            "protocol": "sentry envelope",
            "capture": super::sink::captured(sources.policy),
            "environment": c.environment,
            "release": c.release,
            "sampleRatio": c.traces_sample_rate.unwrap_or(1.0),
            "pinned": sources.cfg.pinned(&key::DSN).is_some(),
            "sources": {
                "endpoint": sources.of(&key::DSN, dsn_flag, &["SENTRY_DSN"]),
                "capture": sources.capture.clone(),
                "environment": sources.of(&key::ENVIRONMENT, None, &["SENTRY_ENVIRONMENT"]),
                "release": sources.of(&key::RELEASE, None, &["SENTRY_RELEASE"]),
                "sampleRatio": sources.of(&key::SAMPLE_RATE, None, &["SENTRY_TRACES_SAMPLE_RATE"]),
            },
        }))
    }

    fn for_backfill(&mut self) {
        self.config.backfill = true;
    }

    fn probe(&self, trace: TraceId) -> Result<Vec<ProbeOutcome>, CliError> {
        Ok(vec![pi_observe::sentry::probe(&self.config, trace)?])
    }

    fn deliver_spooled(&self, deadline: Instant) -> Result<Option<Delivered>, CliError> {
        let Some(spool) = self.config.spool.clone().map(Spool::new) else { return Ok(None) };
        let result = pi_observe::sentry::deliver_spooled(&self.config, &spool, deadline)?;
        let destination = self.config.envelope_url().unwrap_or_default();
        Ok(Some(Delivered { destination, result, stats: spool.stats() }))
    }

    fn canary(&mut self, _dir: &Path) -> Option<CanaryReader> {
        let capture = EnvelopeCapture::default();
        self.config.transport = Some(Arc::new(capture.clone()));
        self.config.spool = None;
        Some(Box::new(move || capture.bodies()))
    }

    fn attach(self: Box<Self>, _to: &Attach<'_>) -> Result<Option<Attached>, CliError> {
        let sentry = SentrySubscriber::new(self.config).map_err(|e| CliError::Usage(e.to_string()))?;
        // Spans are kept and transactions built on the sinks' thread, not the agent's.
        let subscription = Subscribed::OffThread(sentry.clone(), "--sentry");
        Ok(Some(Attached { subscription, running: Some(Arc::new(RunningSentry(sentry))) }))
    }
}

/// `telemetry.sinks.sentry`, as each settings file writes it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Settings {
    enabled: Option<bool>,
    dsn: Option<String>,
    environment: Option<String>,
    release: Option<String>,
    sample_rate: Option<Ratio>,
    capture: Option<Vec<String>>,
}

sink_section!(Settings);

/// The sink's settings keys, each read from a file's typed `telemetry.sinks.sentry`.
mod key {
    use super::*;
    use crate::cli::config::Key;

    fn sentry(file: &crate::cli::settings::SettingsFile) -> Option<&Settings> {
        file.sink::<Settings>("sentry")
    }

    /// Where the sink sends: set by the managed policy, it pins the sink.
    pub const DSN: Key<String> =
        Key { path: &["telemetry", "sinks", "sentry", "dsn"], read: |f| sentry(f)?.dsn.clone() };
    /// `environment`.
    pub const ENVIRONMENT: Key<String> =
        Key { path: &["telemetry", "sinks", "sentry", "environment"], read: |f| sentry(f)?.environment.clone() };
    /// `release`.
    pub const RELEASE: Key<String> =
        Key { path: &["telemetry", "sinks", "sentry", "release"], read: |f| sentry(f)?.release.clone() };
    /// `sampleRate`: a ratio (0..1).
    pub const SAMPLE_RATE: Key<f64> = Key {
        path: &["telemetry", "sinks", "sentry", "sampleRate"],
        read: |f| sentry(f)?.sample_rate.map(|Ratio(rate)| rate),
    };
}

/// The sink's counters in the state file, in envelopes.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Counters {
    transactions: u64,
    error_events: u64,
    delivered: u64,
    spooled: u64,
    not_delivered: u64,
    sampled_out: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_error: Option<String>,
    delivered_from_spool: u64,
}

impl Counters {
    fn of(stats: &SentryStats) -> Self {
        Counters {
            transactions: stats.transactions,
            error_events: stats.errors,
            delivered: stats.delivered,
            spooled: stats.spooled,
            not_delivered: stats.not_delivered,
            sampled_out: stats.sampled_out,
            last_error: stats.last_error.clone(),
            delivered_from_spool: stats.from_spool.delivered_items,
        }
    }
}

/// The attached sink.
struct RunningSentry(Arc<SentrySubscriber>);

impl Running for RunningSentry {
    fn health(&self, health: &mut Health) {
        let stats = self.0.stats();
        health.exported += stats.delivered;
        health.dropped += stats.not_delivered;
        health.spooled += stats.spooled;
        health.last_error = health.last_error.take().or(stats.last_error);
    }

    /// What was handed to Sentry and what the server accepted.
    fn report(&self, _traces: &[TraceId], _deadline: Duration) {
        let (sentry, stats) = (&self.0, self.0.stats());
        // Envelopes still queued at the deadline were not delivered either.
        let not_delivered = (stats.transactions + stats.errors)
            .saturating_sub(stats.delivered + stats.spooled)
            .max(stats.not_delivered);
        let gone = sentry.spool_stats().and_then(|s| s.gone_items.get("envelope").copied()).unwrap_or(0);
        let spooled = if stats.spooled > 0 { exit::spooled_note(stats.spooled, gone) } else { String::new() };
        output::error(format_args!(
            "pi: sentry: {} transactions, {} error events: {} delivered{spooled}, {not_delivered} not delivered{}",
            stats.transactions,
            stats.errors,
            stats.delivered,
            exit::reason(not_delivered + stats.spooled, stats.last_error.as_deref()),
        ));
        exit::report_from_spool("sentry", &stats.from_spool);
        exit::warnings(sentry.spool_stats().map(|s| s.diagnostics).unwrap_or_default());
    }

    fn state(&self) -> SinkState {
        let stats = self.0.stats();
        SinkState::remote(Counters::of(&stats), self.0.spool_stats(), &stats.from_spool)
    }
}
