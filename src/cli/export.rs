//! `pi export`: replay session files into the configured adapters (backfill).

use std::process::ExitCode;

use pi_agent::session::replay;
use pi_observe::core::{EventKind, Observability};

use super::run::{
    FLUSH_DEADLINE, LocalSinks, attach_log_json, attach_otlp, attach_sentry, attach_sinks, output_files, report_events,
    report_export, report_sentry,
};
use super::{CliError, ExportArgs, output, report, setup};

/// Records handed to the adapters before waiting for them to catch up: below every adapter's
/// queue capacity, so a long backfill is paced instead of dropped.
const BATCH_RECORDS: usize = 2048;

/// Replays every session (files or directories, as `pi report`) through the adapters given by
/// the flags, with the same content policy as a live run, then flushes within the deadline.
pub fn run(args: &ExportArgs) -> Result<ExitCode, CliError> {
    let policies = setup::policies(&args.sinks.content)?;
    let otlp = setup::otlp(&args.sinks.otlp)?;
    let sentry_config = setup::sentry(args.sinks.sentry.as_deref())?;
    // An output that is one of the sessions being replayed would be truncated before it is read.
    let files = report::session_files_of(&args.paths)?;
    let inputs: Vec<(&str, &std::path::Path)> =
        files.iter().map(|(path, _)| ("a session being exported", path.as_path())).collect();
    setup::check_outputs(&inputs, &output_files(args.events_jsonl.as_deref(), args.sinks.log_json.as_deref()))?;
    let flush_deadline = otlp.as_ref().and_then(|c| c.timeout).unwrap_or(FLUSH_DEADLINE);
    let hub = Observability::with_policy(policies.base.clone());
    let LocalSinks { mut subscriptions, events: events_file } =
        attach_sinks(&hub, &policies, args.events_jsonl.as_deref(), false)?;
    let exporter = attach_otlp(&hub, &policies.otlp, otlp, &mut subscriptions)?;
    let sentry = attach_sentry(&hub, &policies.sentry, sentry_config, &mut subscriptions)?;
    let log_guard = attach_log_json(&hub, &policies.log, args.sinks.log_json.as_deref(), &mut subscriptions)?;
    if subscriptions.is_empty() {
        return Err(CliError(
            "export: nothing to export to: give --otlp, --sentry, --log-json or --events-jsonl".into(),
        ));
    }
    // A signal stops the replay between sessions (each replayed session is a whole tree); what
    // was handed over is still flushed.
    let cancel = tokio_util::sync::CancellationToken::new();
    let interrupted = super::run::abort_on_signals(&cancel)?;
    let (mut sessions, mut pending) = (0, 0);
    let mut traces = Vec::new();
    let failed = report::for_each_session(&args.paths, "export", |session| {
        if cancel.is_cancelled() {
            return;
        }
        sessions += 1;
        for event in replay(&session) {
            if event.kind == EventKind::Start && event.parent_span_id.is_none() {
                traces.push(event.trace_id);
            }
            hub.emit(event);
            pending += 1;
            if pending >= BATCH_RECORDS {
                pending = 0;
                if let Err(e) = hub.flush(flush_deadline) {
                    output::error(format_args!("pi: export: an adapter did not keep up: {e}"));
                }
            }
        }
    })?;
    let _ = hub.shutdown(flush_deadline);
    report_events(events_file.as_deref());
    drop(subscriptions);
    drop(log_guard);
    let spans = hub.stats().emitted / 2;
    output::error(format_args!("pi: export: {sessions} sessions, {} traces, {spans} spans", traces.len()));
    if let Some(otel) = &exporter {
        // Trace ids (and links) only for a small backfill; totals always.
        report_export(otel, if traces.len() <= 20 { &traces } else { &[] });
    }
    if let Some(sentry) = &sentry {
        report_sentry(sentry);
    }
    if let Some(signal) = interrupted.get() {
        return Ok(super::run::interrupted_exit(*signal));
    }
    Ok(if failed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}
