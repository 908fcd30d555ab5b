//! `pi observe canary`: plants canaries — every built-in secret format, and a plain marker per
//! kind of content — in a scripted faux-provider session run through the user's real telemetry
//! configuration, with every remote sink's transport replaced by a local capture of exactly
//! what it would send. Reports, per sink, which canaries would leave; exit 1 when a secret
//! would, or when content would reach a sink that did not opt in to its kind.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use pi_agent::provider::{FauxBlock, FauxProvider, FauxResponse, HttpConfig, ProviderError, RetryPolicy};
use pi_agent::{Agent, AgentConfig, PromptSource};
use pi_observe::core::canary::{SecretSample, secret_samples};
use pi_observe::core::{ContentKind, ContentPolicy, Scope, SpanId};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::cli::config::Config;
use crate::cli::sinks::SinkArgs;
use crate::cli::sinks::{SinkPolicies, SinkSetup, captured};
use crate::cli::{CliError, output};

/// `pi observe canary` arguments: the sinks, as for a run.
#[derive(Debug, Args)]
pub struct CanaryArgs {
    /// One JSON document on stdout instead of the report.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    sinks: SinkArgs,
}

/// A plain marker and the kinds of content it is planted in: finding it in a sink that
/// captures none of them means content leaked.
struct Marker {
    name: &'static str,
    text: String,
    kinds: &'static [ContentKind],
}

/// The markers of one run (random, so an earlier run's output cannot match).
fn markers() -> Vec<Marker> {
    let tag = SpanId::random().to_string();
    let marker = |name: &'static str, kinds: &'static [ContentKind]| Marker {
        name,
        text: format!("picanary{}{}", name.replace('_', ""), &tag[..10]),
        kinds,
    };
    use ContentKind::*;
    vec![
        marker("prompt", &[Prompt]),
        marker("completion", &[Completion]),
        marker("thinking", &[Thinking]),
        marker("tool_args", &[ToolArgs]),
        marker("tool_result", &[ToolResult]),
        marker("shell_output", &[ShellOutput]),
        marker("file_content", &[FileContent]),
        marker("error_text", &[ErrorText]),
        // The second prompt goes to a provider over HTTP: its text is in the request body too.
        marker("provider_payload", &[Prompt, ProviderPayload]),
        // An extra header on that request (as `models.json` `headers` adds one).
        marker("header", &[Header]),
    ]
}

fn find<'a>(markers: &'a [Marker], name: &str) -> &'a str {
    markers.iter().find(|m| m.name == name).map_or("", |m| m.text.as_str())
}

/// Runs the canary session and reports. Exit 0 when nothing would leak, 1 otherwise.
pub async fn run(args: &CanaryArgs, cfg: &Config) -> Result<ExitCode, CliError> {
    let setup = SinkSetup::resolve(&args.sinks, None, cfg)?;
    let dir = std::env::temp_dir().join(format!("pi-canary-{}", SpanId::random()));
    std::fs::create_dir_all(&dir).map_err(|e| CliError::Failure(format!("canary: {}: {e}", dir.display())))?;
    let result = run_in(args, setup, &dir).await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn run_in(args: &CanaryArgs, setup: SinkSetup, dir: &Path) -> Result<ExitCode, CliError> {
    let markers = markers();
    let secrets = secret_samples();
    let workdir = dir.join("project");
    plant_files(&workdir, &markers, &secrets)?;

    let (setup, readers) = setup.into_canary(dir);
    let policies = setup.policies.clone();
    let hub = setup.hub();
    let sinks = setup.attach(&hub, false)?;

    let everything: String = secrets.iter().map(|s| format!(" {} {}", s.text, s.env_line)).collect();
    let scope = || Scope::new();
    hub.enter(scope(), faux_session(&workdir, &markers, &everything)).await;
    hub.enter(scope(), provider_session(&workdir, &markers, &everything, &secrets)).await;
    sinks.close();

    // The report lists the sinks by name.
    let mut outputs: Vec<(&'static str, Vec<Vec<u8>>)> =
        readers.into_iter().map(|(name, read)| (name, read())).collect();
    outputs.sort_by_key(|(name, _)| *name);
    let reports: Vec<SinkReport> =
        outputs.iter().map(|(sink, bodies)| scan(sink, bodies, policies.of(sink), &markers, &secrets)).collect();
    report(args.json, &reports, &markers, &secrets, &policies);
    let leaked = reports.iter().any(|r| !r.secrets.is_empty() || r.content.iter().any(|c| !c.opted_in));
    Ok(if leaked { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// `notes.txt` (read: file content), `env.txt` (printed by bash: shell output), and a file whose
/// name is the tool-result marker (listed by `ls`).
fn plant_files(workdir: &Path, markers: &[Marker], secrets: &[SecretSample]) -> Result<(), CliError> {
    let env: String = secrets.iter().map(|s| format!("{}\n", s.env_line)).collect();
    let write = |name: String, text: String| {
        std::fs::create_dir_all(workdir)
            .and_then(|()| std::fs::write(workdir.join(&name), text))
            .map_err(|e| CliError::Failure(format!("canary: {}: {e}", workdir.join(&name).display())))
    };
    write("notes.txt".into(), format!("{}\n{env}", find(markers, "file_content")))?;
    write("env.txt".into(), env)?;
    write(format!("{}.txt", find(markers, "tool_result")), String::new())
}

/// The faux session: thinking, text and tool calls (read, bash, ls) carrying their markers and
/// every secret, then a provider error carrying the error marker.
async fn faux_session(workdir: &Path, markers: &[Marker], secrets: &str) {
    let shell = find(markers, "shell_output");
    let (head, tail) = shell.split_at(shell.len() / 2);
    // The command prints the marker without containing it, so it is only in the output.
    let command = format!("printf '%s%s\\n' '{head}' '{tail}'; cat env.txt # {}", find(markers, "tool_args"));
    let faux = FauxProvider::new();
    faux.push([
        FauxResponse {
            blocks: vec![
                FauxBlock::Thinking(format!("{}{secrets}", find(markers, "thinking"))),
                FauxBlock::Text(format!("{}{secrets}", find(markers, "completion"))),
                FauxBlock::ToolCall { name: "read".into(), arguments: json!({"path": "notes.txt"}) },
                FauxBlock::ToolCall { name: "bash".into(), arguments: json!({"command": command}) },
                FauxBlock::ToolCall { name: "ls".into(), arguments: json!({}) },
            ],
            ..FauxResponse::default()
        },
        FauxResponse::error(ProviderError::Http {
            status: 400,
            message: format!("{}{secrets}", find(markers, "error_text")),
            retry_after: None,
        }),
    ]);
    let model = pi_agent::model::Registry::builtin().default_for("faux").cloned();
    let Some(model) = model else { return };
    let prompt = format!("{}{secrets}", find(markers, "prompt"));
    run_agent(Arc::new(faux), model, workdir, &prompt).await;
}

/// A prompt to an OpenAI-compatible provider on a closed loopback port, with a canary key and
/// an extra header carrying the header marker and every secret: the request body (provider
/// payload) and the provider's own non-secret headers are recorded, the key never is.
async fn provider_session(workdir: &Path, markers: &[Marker], secrets: &str, samples: &[SecretSample]) {
    let Ok(port) = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()) else {
        return;
    };
    let key = samples.iter().find(|s| s.text.starts_with("sk-proj-")).map(|s| s.text.clone());
    // An extra header, as `models.json` adds one (pi records only a provider's own non-secret
    // headers, so its marker and secrets must never appear, captured or not), and the key again
    // under a secret header name.
    let headers = vec![
        ("x-pi-canary".to_owned(), format!("{}{secrets}", find(markers, "header"))),
        ("x-api-key".to_owned(), key.clone().unwrap_or_default()),
    ];
    let http = HttpConfig {
        base_url: Some(format!("http://127.0.0.1:{port}/v1")),
        api_key: key,
        headers,
        ..HttpConfig::default()
    };
    let model = pi_agent::model::ModelInfo::unknown("openai", "canary-model", pi_agent::model::Api::OpenAiCompletions);
    let Ok(provider) = pi_agent::provider::provider_for(&model, &http) else { return };
    let prompt = format!("{}{secrets}", find(markers, "provider_payload"));
    run_agent(provider, model, workdir, &prompt).await;
}

async fn run_agent(
    provider: Arc<dyn pi_agent::provider::Provider>,
    model: pi_agent::model::ModelInfo,
    workdir: &Path,
    prompt: &str,
) {
    let config = AgentConfig {
        source: PromptSource::Interactive,
        retry: RetryPolicy { max_retries: 0, ..RetryPolicy::default() },
        ..AgentConfig::default()
    };
    let tools = pi_agent::tools::ToolRegistry::all_builtin();
    let mut agent = Agent::new(provider, model, tools, None, config, PathBuf::from(workdir));
    let cancel = CancellationToken::new();
    let mut quiet = |_| {};
    let _ = agent.prompt(prompt, &cancel, &mut quiet).await;
    agent.shutdown(&mut quiet).await;
}

/// A content marker found in a sink.
struct Found {
    marker: &'static str,
    opted_in: bool,
}

/// What one sink would have carried.
struct SinkReport {
    sink: &'static str,
    bytes: usize,
    content: Vec<Found>,
    secrets: Vec<&'static str>,
}

/// `needle` in `body` as it is or JSON-escaped (captured text travels inside JSON strings).
fn contains(body: &[u8], needle: &str) -> bool {
    let escaped = serde_json::to_string(needle).unwrap_or_default();
    let escaped = escaped.trim_matches('"');
    [needle, escaped].iter().any(|n| !n.is_empty() && memchr::memmem::find(body, n.as_bytes()).is_some())
}

/// True when `policy` opted in to content of one of `kinds`, directly or as part of the
/// conversation a captured provider payload carries.
fn opted_in(policy: &ContentPolicy, kinds: &[ContentKind]) -> bool {
    kinds.iter().any(|k| policy.captures(*k) || (policy.captures(ContentKind::ProviderPayload) && k.in_conversation()))
}

fn scan(
    sink: &'static str,
    bodies: &[Vec<u8>],
    policy: &ContentPolicy,
    markers: &[Marker],
    secrets: &[SecretSample],
) -> SinkReport {
    let anywhere = |needle: &str| bodies.iter().any(|b| contains(b, needle));
    SinkReport {
        sink,
        bytes: bodies.iter().map(Vec::len).sum(),
        content: markers
            .iter()
            .filter(|m| anywhere(&m.text))
            .map(|m| Found { marker: m.name, opted_in: opted_in(policy, m.kinds) })
            .collect(),
        secrets: secrets.iter().filter(|s| anywhere(&s.secret)).map(|s| s.format).collect(),
    }
}

fn report(
    as_json: bool,
    reports: &[SinkReport],
    markers: &[Marker],
    secrets: &[SecretSample],
    policies: &SinkPolicies,
) {
    let planted: Vec<&str> = markers.iter().map(|m| m.name).collect();
    if as_json {
        let sinks: Vec<_> = reports
            .iter()
            .map(|r| {
                json!({
                    "sink": r.sink,
                    "remote": matches!(r.sink, "otlp" | "sentry"),
                    "bytes": r.bytes,
                    "captures": captured(policies.of(r.sink)),
                    "content": r.content.iter().map(|c| json!({"canary": c.marker, "optedIn": c.opted_in})).collect::<Vec<_>>(),
                    "secrets": r.secrets,
                })
            })
            .collect();
        let ok = reports.iter().all(|r| r.secrets.is_empty() && r.content.iter().all(|c| c.opted_in));
        output::line(json!({
            "planted": { "content": planted, "secretFormats": secrets.iter().map(|s| s.format).collect::<Vec<_>>() },
            "sinks": sinks,
            "ok": ok,
        }));
        return;
    }
    output::line(format_args!(
        "planted {} content canaries ({}) and {} secret formats in each of them",
        planted.len(),
        planted.join(", "),
        secrets.len()
    ));
    for r in reports {
        let captures = captured(policies.of(r.sink));
        let captures = if captures.is_empty() { "nothing".to_owned() } else { captures.join(",") };
        let content: Vec<String> = r
            .content
            .iter()
            .map(|c| format!("{}{}", c.marker, if c.opted_in { "" } else { " (NOT OPTED IN)" }))
            .collect();
        let leaves = if content.is_empty() { "no content".to_owned() } else { content.join(", ") };
        let secrets =
            if r.secrets.is_empty() { "no secret".to_owned() } else { format!("SECRETS: {}", r.secrets.join(", ")) };
        output::line(format_args!("{:<7} captures {captures}: would send {leaves}; {secrets}", r.sink));
    }
    let ok = reports.iter().all(|r| r.secrets.is_empty() && r.content.iter().all(|c| c.opted_in));
    output::line(if ok {
        "ok: no secret would leave, and content only reaches sinks that opted in to it"
    } else {
        "LEAK: see the lines above"
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_in_a_sink_without_its_kind_is_a_leak_and_secrets_are_found_json_escaped() {
        let markers = markers();
        let secrets = secret_samples();
        let pem = secrets.iter().find(|s| s.secret.contains('\n') || s.text.contains('\n')).unwrap();
        let prompt = find(&markers, "prompt");
        let escaped = serde_json::to_string(&pem.text).unwrap();
        let body = format!("{{\"a\":\"{prompt}\",\"b\":{escaped}}}").into_bytes();
        let report = scan("otlp", std::slice::from_ref(&body), &ContentPolicy::safe_only(), &markers, &secrets);
        assert_eq!(report.content.len(), 1);
        assert!(!report.content[0].opted_in);
        assert_eq!(report.secrets, vec![pem.format]);
        let opted = ContentPolicy::safe_only().capture(ContentKind::Prompt);
        assert!(scan("otlp", &[body], &opted, &markers, &secrets).content[0].opted_in);
    }

    #[test]
    fn markers_are_distinct_and_no_marker_contains_another() {
        let markers = markers();
        for a in &markers {
            for b in &markers {
                assert!(a.name == b.name || !a.text.contains(&b.text), "{} / {}", a.text, b.text);
            }
        }
    }
}
