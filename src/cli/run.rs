//! `pi -p PROMPT`: one prompt in print mode.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use pi_agent::events::AgentEvent;
use pi_agent::harness::{Agent, AgentConfig, PromptSource};
use pi_agent::message::StopReason;
use pi_observe::core::{ContentPolicy, ObsEvent, Observability, TraceParent, names, run_with_traceparent};
use pi_observe::log::JsonlFileSink;
use pi_observe::otel::OtelSubscriber;
use tokio_util::sync::CancellationToken;

use super::setup::SinkPolicies;
use super::{Cli, CliError, Mode, output, setup};

/// How long the exit waits for sinks to write what they have.
pub const FLUSH_DEADLINE: Duration = Duration::from_secs(5);

/// Subscribes the OTLP exporter, when configured, to `hub` under `policy`.
pub fn attach_otlp(
    hub: &Observability,
    policy: &ContentPolicy,
    config: Option<pi_observe::otel::OtlpConfig>,
    subscriptions: &mut Vec<pi_observe::core::Subscription>,
) -> Result<Option<Arc<OtelSubscriber>>, CliError> {
    let Some(config) = config else { return Ok(None) };
    let otel = OtelSubscriber::new(config, hub).map_err(|e| CliError(e.to_string()))?;
    subscriptions.push(hub.subscribe_arc(otel.clone(), Arc::new(policy.clone())));
    Ok(Some(otel))
}

/// The local sinks' subscriptions, and the events file (for its exit summary).
pub struct LocalSinks {
    pub subscriptions: Vec<pi_observe::core::Subscription>,
    pub events: Option<Arc<JsonlFileSink>>,
}

/// After the hub shut down: what did not reach the events file, if anything, on stderr.
pub fn report_events(events: Option<&JsonlFileSink>) {
    if let Some(events) = events {
        let (written, not_written) = events.counts();
        if not_written > 0 {
            output::error(format_args!(
                "pi: events-jsonl: {written} records written, {not_written} not written ({})",
                events.path().display()
            ));
        }
    }
}

/// Subscribes the local sinks (`--events-jsonl`, `--mode json`) to `hub`, each under its policy.
pub fn attach_sinks(
    hub: &Observability,
    policies: &SinkPolicies,
    events_jsonl: Option<&std::path::Path>,
    json_mode: bool,
) -> Result<LocalSinks, CliError> {
    let mut subscriptions = Vec::new();
    let mut events = None;
    if let Some(path) = events_jsonl {
        let sink = JsonlFileSink::create(path, JsonlFileSink::DEFAULT_CAPACITY, hub)
            .map_err(|e| CliError(format!("--events-jsonl {}: {e}", path.display())))?;
        subscriptions.push(hub.subscribe_arc(sink.clone(), Arc::new(policies.events.clone())));
        events = Some(sink);
    }
    if json_mode {
        subscriptions.push(
            hub.subscribe_arc(Arc::new(|e: &ObsEvent| output::contract_event_line(e)), Arc::new(policies.json.clone())),
        );
    }
    Ok(LocalSinks { subscriptions, events })
}

/// Subscribes the Sentry exporter, when configured, to `hub` under `policy`.
pub fn attach_sentry(
    hub: &Observability,
    policy: &ContentPolicy,
    config: Option<pi_observe::sentry::SentryConfig>,
    subscriptions: &mut Vec<pi_observe::core::Subscription>,
) -> Result<Option<Arc<pi_observe::sentry::SentrySubscriber>>, CliError> {
    let Some(config) = config else { return Ok(None) };
    let sentry = pi_observe::sentry::SentrySubscriber::new(config, hub).map_err(|e| CliError(e.to_string()))?;
    subscriptions.push(hub.subscribe_arc(sentry.clone(), Arc::new(policy.clone())));
    Ok(Some(sentry))
}

/// After a Sentry run: what was handed to Sentry and what the server accepted, on stderr.
pub fn report_sentry(sentry: &pi_observe::sentry::SentrySubscriber) {
    let stats = sentry.stats();
    // Envelopes still queued at the deadline were not delivered either.
    let not_delivered = (stats.transactions + stats.errors).saturating_sub(stats.delivered).max(stats.not_delivered);
    output::error(format_args!(
        "pi: sentry: {} transactions, {} error events: {} delivered, {not_delivered} not delivered{}",
        stats.transactions,
        stats.errors,
        stats.delivered,
        reason(not_delivered, stats.last_error.as_deref()),
    ));
}

/// ` (last error: …)` when something was not delivered and the reason is known.
fn reason(not_delivered: u64, last_error: Option<&str>) -> String {
    match last_error {
        Some(why) if not_delivered > 0 => format!(" (last error: {why})"),
        _ => String::new(),
    }
}

/// Installs JSON-lines logging (`--log-json [PATH]`) and subscribes the `tracing` bridge to
/// `hub`; keep the guard until exit (it flushes the writer).
pub fn attach_log_json(
    hub: &Observability,
    policy: &ContentPolicy,
    log_json: Option<&str>,
    subscriptions: &mut Vec<pi_observe::core::Subscription>,
) -> Result<Option<pi_observe::log::LogGuard>, CliError> {
    use pi_observe::log::{JsonLogConfig, LogDestination, SpanLevel, TracingSubscriber};
    let Some(target) = log_json else { return Ok(None) };
    let destination =
        if target.is_empty() { LogDestination::Stderr } else { LogDestination::File(std::path::PathBuf::from(target)) };
    let guard = pi_observe::log::init_json_logging(&JsonLogConfig { destination, ..JsonLogConfig::default() })
        .map_err(|e| CliError(format!("--log-json: {e}")))?;
    let bridge = TracingSubscriber::new().span_level(SpanLevel::Info);
    subscriptions.push(hub.subscribe_arc(Arc::new(bridge), Arc::new(policy.clone())));
    Ok(Some(guard))
}

/// After an OTLP run: each trace id (with a link from `PI_TRACE_URL_TEMPLATE`), the export
/// totals, and each export diagnostic, on stderr.
pub fn report_export(otel: &OtelSubscriber, traces: &[pi_observe::core::TraceId]) {
    let stats = otel.stats();
    let template = setup::trace_url_template().ok().flatten();
    for trace in traces {
        let link =
            template.as_ref().map(|t| format!(" {}", t.replace("{trace_id}", &trace.to_string()))).unwrap_or_default();
        output::error(format_args!("pi: trace {trace}{link}"));
    }
    let not_delivered = stats.spans_dropped();
    output::error(format_args!(
        "pi: otlp: {} spans delivered, {not_delivered} not delivered{}",
        stats.spans_exported,
        reason(not_delivered, stats.last_error.as_deref()),
    ));
    for diagnostic in stats.diagnostics {
        output::error(format_args!("pi: warning: {diagnostic}"));
    }
}

/// The local files a command writes, as (flag, path), for [`setup::check_outputs`].
pub fn output_files<'a>(
    events_jsonl: Option<&'a std::path::Path>,
    log_json: Option<&'a str>,
) -> Vec<(&'static str, &'a std::path::Path)> {
    let mut outputs = Vec::new();
    if let Some(path) = events_jsonl {
        outputs.push(("--events-jsonl", path));
    }
    if let Some(path) = log_json.filter(|p| !p.is_empty()) {
        outputs.push(("--log-json", std::path::Path::new(path)));
    }
    outputs
}

/// SIGINT, SIGTERM and SIGHUP abort the run like Ctrl+C: the first one cancels `cancel` (tools'
/// process groups are killed, the aborted state is written to the session, sinks are flushed)
/// and is remembered for the exit code (128 + signal); a second one exits at once — every file
/// pi writes holds whole lines at any moment.
pub fn abort_on_signals(cancel: &CancellationToken) -> Result<Arc<std::sync::OnceLock<i32>>, CliError> {
    use tokio::signal::unix::{SignalKind, signal};
    let listen = |kind: SignalKind| signal(kind).map_err(|e| CliError(format!("cannot listen for signals: {e}")));
    let (mut int, mut term, mut hup) =
        (listen(SignalKind::interrupt())?, listen(SignalKind::terminate())?, listen(SignalKind::hangup())?);
    let received = Arc::new(std::sync::OnceLock::new());
    let (first, cancel) = (received.clone(), cancel.clone());
    tokio::spawn(async move {
        let mut signals = [(&mut int, 2), (&mut term, 15), (&mut hup, 1)];
        let signal = next_signal(&mut signals).await;
        let _ = first.set(signal);
        cancel.cancel();
        let again = next_signal(&mut signals).await;
        output::error(format_args!("pi: {} again: exiting now", signal_name(again)));
        std::process::exit(128 + again);
    });
    Ok(received)
}

/// Says which signal aborted the run; the exit code is 128 + its number.
pub fn interrupted_exit(signal: i32) -> ExitCode {
    output::error(format_args!("pi: aborted by {}", signal_name(signal)));
    ExitCode::from(128 + signal as u8)
}

/// The number of the next signal among `signals`.
async fn next_signal(signals: &mut [(&mut tokio::signal::unix::Signal, i32); 3]) -> i32 {
    let [(int, i), (term, t), (hup, h)] = signals;
    tokio::select! {
        _ = int.recv() => *i,
        _ = term.recv() => *t,
        _ = hup.recv() => *h,
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        15 => "SIGTERM",
        _ => "a signal",
    }
}

pub async fn run(cli: &Cli, prompt: &str) -> Result<ExitCode, CliError> {
    // Everything is checked before anything is created or written.
    if prompt.trim().is_empty() {
        return Err(CliError("-p: the prompt is empty".into()));
    }
    let policies = setup::policies(&cli.observe.sinks.content)?;
    let attribution = setup::attribution(&cli.observe)?;
    let selected = setup::select(&cli.agent, prompt)?;
    let tools = setup::tools(cli.agent.tools.as_deref())?;
    let cwd = setup::cwd(cli.agent.cwd.as_deref())?;
    setup::check_dirs("--skills", &cli.agent.skills)?;
    setup::check_dirs("--prompt-templates", &cli.agent.prompt_templates)?;
    let otlp = setup::otlp(&cli.observe.sinks.otlp)?;
    let sentry_config = setup::sentry(cli.observe.sinks.sentry.as_deref())?;
    let session_path = setup::session_path(&cli.agent, &cwd)?;
    let inputs: Vec<(&str, &std::path::Path)> = session_path.iter().map(|p| ("--session", p.as_path())).collect();
    setup::check_outputs(
        &inputs,
        &output_files(cli.observe.events_jsonl.as_deref(), cli.observe.sinks.log_json.as_deref()),
    )?;
    let session = session_path.map(|path| setup::open_session(&path, &cwd)).transpose()?;
    let traceparent = std::env::var(names::ENV_TRACEPARENT).ok().filter(|v| !v.is_empty());
    if let Some(tp) = &traceparent {
        if TraceParent::parse(tp).is_none() {
            output::error(format_args!(
                "pi: warning: {}: not a valid W3C traceparent; starting a new trace",
                names::ENV_TRACEPARENT
            ));
        }
    }

    // The exit waits at most this long for exporters: the OTLP export timeout if one is set.
    let flush_deadline = otlp.as_ref().and_then(|c| c.timeout).unwrap_or(FLUSH_DEADLINE);

    let hub = Observability::with_policy(policies.base.clone());
    let LocalSinks { mut subscriptions, events: events_file } =
        attach_sinks(&hub, &policies, cli.observe.events_jsonl.as_deref(), cli.mode == Mode::Json)?;
    let exporter = attach_otlp(&hub, &policies.otlp, otlp, &mut subscriptions)?;
    let sentry = attach_sentry(&hub, &policies.sentry, sentry_config, &mut subscriptions)?;
    let log_guard = attach_log_json(&hub, &policies.log, cli.observe.sinks.log_json.as_deref(), &mut subscriptions)?;
    let trace = Arc::new(std::sync::OnceLock::new());
    let root = trace.clone();
    subscriptions.push(hub.subscribe(move |e: &ObsEvent| {
        if e.name == names::AGENT_PROMPT {
            let _ = root.set(e.trace_id);
        }
    }));
    let config = AgentConfig {
        source: PromptSource::Print,
        expose_session_environment: !cli.agent.no_session_env,
        ..AgentConfig::default()
    };
    let resources = setup::resources(&cli.agent, &cwd);
    let mut agent = Agent::new(selected.provider, selected.model, tools, session, config, cwd);
    agent.set_resources(resources);

    let cancel = CancellationToken::new();
    let interrupted = abort_on_signals(&cancel)?;
    let mode = cli.mode;
    let mut sink = move |event: AgentEvent| match mode {
        Mode::Json => output::agent_event_line(&event),
        Mode::Text => output::text_delta(&event),
    };
    let result = hub
        .run_with_context(
            attribution,
            run_with_traceparent(traceparent.as_deref(), async {
                let result = agent.prompt(prompt, &cancel, &mut sink).await;
                agent.shutdown(&mut sink).await;
                result
            }),
        )
        .await;
    let _ = hub.shutdown(flush_deadline);
    report_events(events_file.as_deref());
    drop(subscriptions);
    drop(log_guard);
    let result = result.map_err(|e| CliError(format!("session: {e}")))?;
    if mode == Mode::Text {
        output::line("");
    }
    if let Some(otel) = &exporter {
        let traces: Vec<_> = trace.get().copied().into_iter().collect();
        report_export(otel, &traces);
    }
    if let Some(sentry) = &sentry {
        report_sentry(sentry);
    }
    if let Some(signal) = interrupted.get() {
        return Ok(interrupted_exit(*signal));
    }
    Ok(match result.stop_reason {
        StopReason::Stop | StopReason::Length | StopReason::ToolUse => ExitCode::SUCCESS,
        StopReason::Aborted => {
            output::error(format_args!("pi: aborted"));
            ExitCode::from(130)
        }
        StopReason::Error => {
            let why = result.error.map(|e| e.to_string()).unwrap_or_else(|| "the provider failed".into());
            output::error(format_args!("pi: {why}"));
            ExitCode::FAILURE
        }
    })
}
