//! `pi export`: replay session files into the configured adapters (backfill).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use pi_agent::session::replay;
use pi_observe::core::EventKind;

use super::config::Config;
use super::sinks::{SinkSetup, Sinks};
use super::{CliError, files, output, sessions, signals};

/// `pi export [PATH…]` and the sinks to replay into.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Session files or directories (searched for `*.jsonl`); default `~/.pi/agent/sessions`.
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Write the replayed contract events as JSON lines to PATH.
    #[arg(long, value_name = "PATH")]
    pub events_jsonl: Option<PathBuf>,
    /// Also export OTLP metrics (tokens, cost, durations) from the replayed records. Off by
    /// default: a metrics backend adds what it receives, so replaying the same sessions twice
    /// would count their cost twice. Use it once per session set (see README, Backfill).
    #[arg(long)]
    pub export_metrics: bool,
    #[command(flatten)]
    pub sinks: super::sinks::SinkArgs,
}

/// Records handed to the adapters before waiting for them to catch up ([`Sinks::pace`]):
/// below every adapter's queue capacity, so a long backfill is paced instead of dropped.
const BATCH_RECORDS: usize = 2048;

/// Waits for the sinks to take what the replay handed them ([`Sinks::pace`]); says so when one
/// makes no progress for a whole flush deadline.
fn pace(sinks: &Sinks) {
    if let Err(e) = sinks.pace() {
        output::error(format_args!("pi: export: an adapter did not keep up: {e}"));
    }
}

/// Replays every session (files or directories, as `pi report`) through the adapters given by
/// the flags, with the same content policy as a live run, then flushes within the deadline.
pub fn run(args: &ExportArgs, cfg: &Config) -> Result<ExitCode, CliError> {
    let mut sink_setup = SinkSetup::resolve(&args.sinks, args.events_jsonl.as_deref(), cfg)?;
    if !args.export_metrics {
        // Spans have deterministic ids, so a second replay is idempotent; metric sums are not.
        sink_setup.without_metrics();
    }
    sink_setup.for_backfill();
    // An output that is one of the sessions being replayed would be truncated before it is read.
    let files = sessions::session_files_of(&args.paths)?;
    let inputs: Vec<(&str, &Path)> =
        files.iter().map(|(path, _)| ("a session being exported", path.as_path())).collect();
    files::check_outputs(&inputs, &sink_setup.output_files())?;
    // Recorded names are classified against the models a live run would know.
    let registry = super::setup::registry_with(cfg, None)?;
    let hub = sink_setup.hub();
    let sinks = sink_setup.attach(&hub, false)?;
    if sinks.is_empty() {
        return Err(CliError::Usage(
            "export: nothing to export to: give --otlp, --sentry, --log-json or --events-jsonl".into(),
        ));
    }
    // A signal stops the replay between sessions (each replayed session is a whole tree); what
    // was handed over is still flushed.
    let cancel = tokio_util::sync::CancellationToken::new();
    let interrupted = signals::abort_on(&cancel)?;
    let (mut sessions, mut pending) = (0, 0);
    let mut traces = Vec::new();
    let failed = sessions::for_each_session(&args.paths, "export", |session| {
        if cancel.is_cancelled() {
            return;
        }
        sessions += 1;
        for event in replay(&session, &registry) {
            if event.kind == EventKind::Start && event.parent_span_id.is_none() {
                traces.push(event.trace_id);
            }
            hub.emit(event);
            pending += 1;
            if pending >= BATCH_RECORDS {
                pending = 0;
                pace(&sinks);
            }
        }
    })?;
    // The last records handed over too before the shutdown's deadline starts.
    pace(&sinks);
    let spans = hub.stats().emitted / 2;
    output::error(format_args!("pi: export: {sessions} sessions, {} traces, {spans} spans", traces.len()));
    // Trace ids (and links) only for a small backfill; totals always.
    sinks.finish("export", if traces.len() <= 20 { &traces } else { &[] });
    if let Some(signal) = interrupted.get() {
        return Ok(signals::exit(*signal));
    }
    Ok(if failed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}
