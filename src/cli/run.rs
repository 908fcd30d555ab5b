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

/// Subscribes the local sinks (`--events-jsonl`, `--mode json`) to `hub` under `policy`.
pub fn attach_sinks(
    hub: &Observability,
    policy: &ContentPolicy,
    events_jsonl: Option<&std::path::Path>,
    json_mode: bool,
) -> Result<Vec<pi_observe::core::Subscription>, CliError> {
    let policy = Arc::new(policy.clone());
    let mut subscriptions = Vec::new();
    if let Some(path) = events_jsonl {
        let sink = JsonlFileSink::create(path, JsonlFileSink::DEFAULT_CAPACITY, hub)
            .map_err(|e| CliError(format!("--events-jsonl {}: {e}", path.display())))?;
        subscriptions.push(hub.subscribe_arc(sink, policy.clone()));
    }
    if json_mode {
        subscriptions.push(hub.subscribe_arc(Arc::new(|e: &ObsEvent| output::contract_event_line(e)), policy));
    }
    Ok(subscriptions)
}

/// Subscribes the Sentry exporter, when configured, to `hub` under `policy`.
pub fn attach_sentry(
    hub: &Observability,
    policy: &ContentPolicy,
    flag: Option<&str>,
    subscriptions: &mut Vec<pi_observe::core::Subscription>,
) -> Result<Option<Arc<pi_observe::sentry::SentrySubscriber>>, CliError> {
    let Some(config) = setup::sentry(flag)? else { return Ok(None) };
    let sentry = pi_observe::sentry::SentrySubscriber::new(config, hub).map_err(|e| CliError(e.to_string()))?;
    subscriptions.push(hub.subscribe_arc(sentry.clone(), Arc::new(policy.clone())));
    Ok(Some(sentry))
}

/// After a Sentry run: what was handed to the Sentry client, on stderr.
pub fn report_sentry(sentry: &pi_observe::sentry::SentrySubscriber) {
    let stats = sentry.stats();
    output::error(format_args!("pi: sentry: {} transactions, {} error events sent", stats.transactions, stats.errors));
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
    let template = std::env::var("PI_TRACE_URL_TEMPLATE").ok().filter(|t| t.contains("{trace_id}"));
    for trace in traces {
        let link =
            template.as_ref().map(|t| format!(" {}", t.replace("{trace_id}", &trace.to_string()))).unwrap_or_default();
        output::error(format_args!("pi: trace {trace}{link}"));
    }
    output::error(format_args!("pi: otlp: {} spans exported, {} dropped", stats.spans_exported, stats.spans_dropped()));
    for diagnostic in stats.diagnostics {
        output::error(format_args!("pi: warning: {diagnostic}"));
    }
}

pub async fn run(cli: &Cli, prompt: &str) -> Result<ExitCode, CliError> {
    let policy = setup::policy(&cli.observe.sinks.content)?;
    let attribution = setup::attribution(&cli.observe);
    let selected = setup::select(&cli.agent, prompt)?;
    let tools = setup::tools(cli.agent.tools.as_deref())?;
    let cwd = setup::cwd(cli.agent.cwd.as_deref())?;
    let session = setup::session(&cli.agent, &cwd)?;
    let traceparent = std::env::var(names::ENV_TRACEPARENT).ok().filter(|v| !v.is_empty());
    if let Some(tp) = &traceparent {
        if TraceParent::parse(tp).is_none() {
            output::error(format_args!(
                "pi: warning: {}: not a valid W3C traceparent; starting a new trace",
                names::ENV_TRACEPARENT
            ));
        }
    }

    let otlp = setup::otlp(&cli.observe.sinks.otlp)?;
    // The exit waits at most this long for exporters: the OTLP export timeout if one is set.
    let flush_deadline = otlp.as_ref().and_then(|c| c.timeout).unwrap_or(FLUSH_DEADLINE);

    let hub = Observability::with_policy(policy.clone());
    let mut subscriptions = attach_sinks(&hub, &policy, cli.observe.events_jsonl.as_deref(), cli.mode == Mode::Json)?;
    let exporter = attach_otlp(&hub, &policy, otlp, &mut subscriptions)?;
    let sentry = attach_sentry(&hub, &policy, cli.observe.sinks.sentry.as_deref(), &mut subscriptions)?;
    let log_guard = attach_log_json(&hub, &policy, cli.observe.sinks.log_json.as_deref(), &mut subscriptions)?;
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
    let on_interrupt = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_interrupt.cancel();
        }
    });
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
