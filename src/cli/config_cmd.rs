//! `pi config [--json]`: the effective configuration — every setting with the file it came
//! from, the model, session folder, attribution and telemetry pipeline as a run with the same
//! flags would resolve them (with flag / env / default sources), and what the managed policy
//! pins, caps, requires and forbids. Secret values (headers, DSN keys, URL credentials) are
//! never printed.

use std::process::ExitCode;

use clap::Args;
use serde_json::{Value, json};

use crate::cli::settings::trust::TrustReason;

use crate::cli::args::{AgentArgs, ObserveArgs};
use crate::cli::config::{Config, Source, keys, managed};
use crate::cli::observe::status;
use crate::cli::sinks::{SINKS, SinkSetup};
use crate::cli::{CliError, attribution, output, setup};

/// `pi config` arguments: the flags of a run, so their effect can be seen.
#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// One JSON document on stdout instead of the table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    pub agent: AgentArgs,
    #[command(flatten)]
    pub observe: ObserveArgs,
}

/// Keys whose values are secrets (or may hold them): shown as `<set>`.
fn secret(key: &str) -> bool {
    let last = key.rsplit('.').next().unwrap_or(key);
    key.contains(".headers.") || matches!(last, "dsn" | "apiKey" | "token" | "password")
}

/// A setting's value for display: secrets masked, URLs without credentials.
fn shown(key: &str, value: &Value) -> Value {
    match value {
        _ if secret(key) => json!("<set>"),
        Value::String(s) if s.contains("://") => json!(pi_observe::otel::url_without_secrets(s)),
        other => other.clone(),
    }
}

/// Prints the effective configuration. Exit 0, or the error a run would stop with.
pub fn run(args: &ConfigArgs, cfg: &Config) -> Result<ExitCode, CliError> {
    let cwd = setup::cwd(args.agent.cwd.as_deref())?;
    let (files, missing, settings) = (file_list(cfg), missing_files(cfg), settings_list(cfg));
    let selected = setup::select(&args.agent, cfg)?;
    let model_source = |key, flag: Option<&'static str>| cfg.source(key, flag, &[]).to_string();
    let attribution = attribution::attribution(&args.observe, cfg, &cwd)?;
    let sink_setup = SinkSetup::resolve(&args.observe.sinks, args.observe.events_jsonl.as_deref(), cfg)?;
    let pipeline = status::pipeline(&sink_setup, &args.observe.sinks, cfg);
    let session_dir = setup::session_path(&args.agent, &cwd, cfg)?
        .and_then(|p| p.parent().and_then(|d| d.parent()).map(|d| d.display().to_string()));
    let document = json!({
        "files": files,
        "missingFiles": missing,
        "project": {
            "path": cfg.trust.project.display().to_string(),
            "trusted": cfg.trust.trusted,
            "reason": match &cfg.trust.reason {
                TrustReason::NothingToLoad => "nothing to load (no .pi/ settings, skills, prompts or extensions)".to_owned(),
                TrustReason::Trusted(root) => format!("trusted ({})", root.display()),
                TrustReason::Hook => "trusted by an extension for this run".to_owned(),
                TrustReason::Untrusted => "not trusted: its .pi/ resources are not loaded (`pi trust` loads them)".to_owned(),
                TrustReason::Forbidden => "the managed policy forbids project resources".to_owned(),
            },
            "resources": cfg.trust.resources.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        },
        "settings": settings,
        "resolved": {
            "provider": { "value": selected.model.provider, "source": model_source(&keys::DEFAULT_PROVIDER, args.agent.provider.as_ref().map(|_| "--provider")) },
            "model": { "value": selected.model.id, "source": model_source(&keys::DEFAULT_MODEL, args.agent.model.as_ref().map(|_| "--model")) },
            "sessionDir": session_dir,
            "attribution": attribution.iter().map(|(k, v)| (k.to_owned(), json!(v))).collect::<serde_json::Map<_, _>>(),
            "telemetry": pipeline,
        },
        "managedPolicy": cfg.managed.as_ref().map(|m| managed_policy(cfg, m)),
    });
    if args.json {
        output::line(document);
    } else {
        print_human(&document);
    }
    Ok(ExitCode::SUCCESS)
}

/// The settings files in force, most binding first, with the keys each has that pi does not know.
fn file_list(cfg: &Config) -> Vec<Value> {
    cfg.managed
        .iter()
        .chain(cfg.settings.files())
        .map(|f| json!({ "scope": f.scope.as_str(), "path": f.path.display().to_string(), "unknownKeys": f.unknown }))
        .collect()
}

/// The files pi looks for that are not there (so a user sees where to put them).
fn missing_files(cfg: &Config) -> Vec<Value> {
    let mut missing: Vec<Value> = Vec::new();
    if let Some(dir) = &cfg.agent_dir
        && cfg.settings.file(crate::cli::settings::Scope::Global).is_none()
    {
        missing.push(
            json!({"scope": "global", "path": dir.join(crate::cli::settings::SETTINGS_FILE).display().to_string()}),
        );
    }
    if cfg.managed.is_none() {
        missing.push(json!({"scope": "managed", "path": managed::MANAGED_PATH}));
    }
    missing
}

/// Every setting's value and the file it came from (the managed policy's first), secrets hidden.
fn settings_list(cfg: &Config) -> Vec<Value> {
    let mut settings: Vec<Value> = Vec::new();
    if let Some(managed) = &cfg.managed {
        let layered = crate::cli::settings::Settings::new(vec![managed.clone()]);
        for (key, found) in layered.leaves() {
            settings.push(
                json!({ "key": key, "value": shown(&key, found.value), "source": Source::of(found.file).to_string() }),
            );
        }
    }
    for (key, found) in cfg.settings.leaves() {
        let path: Vec<&str> = key.split('.').collect();
        let overridden = cfg.managed.as_ref().and_then(|m| m.get(&path)).is_some_and(|v| !v.is_null());
        settings.push(json!({
            "key": key,
            "value": shown(&key, found.value),
            "source": Source::of(found.file).to_string(),
            "overriddenByManagedPolicy": overridden,
        }));
    }
    settings
}

/// What the managed policy `m` governs: pinned sinks, capture caps, required attribution, rules.
fn managed_policy(cfg: &Config, m: &crate::cli::settings::SettingsFile) -> Value {
    let policy = cfg.policy();
    json!({
        "path": m.path.display().to_string(),
        "pinnedSinks": SINKS.iter().filter(|k| k.pins.is_some_and(|key| cfg.pinned(key).is_some())).map(|k| k.name).collect::<Vec<_>>(),
        "captureCaps": SINKS.iter().filter(|k| k.settings.is_some()).filter_map(|k| {
            cfg.capture_cap(k.name).ok().flatten().map(|kinds| (k.name.to_string(), json!(kinds.iter().map(|k| k.as_str()).collect::<Vec<_>>())))
        }).collect::<serde_json::Map<_, _>>(),
        "requiredAttribution": policy.required_attribution(),
        "redactRules": cfg.redact_rules().iter().filter(|(_, s)| matches!(s, Source::Managed(_))).count(),
        "allowedProviders": policy.allowed().0,
        "allowedModels": policy.allowed().1,
        "allowNonManagedExtensions": policy.allows_non_managed_extensions(),
        "allowProjectResources": policy.allows_project_resources(),
    })
}

fn print_human(document: &Value) {
    output::line("files");
    for file in document["files"].as_array().into_iter().flatten() {
        output::line(format_args!("  {:<8}{}", status::plain(&file["scope"]), status::plain(&file["path"])));
    }
    for file in document["missingFiles"].as_array().into_iter().flatten() {
        output::line(format_args!(
            "  {:<8}{}  (not present)",
            status::plain(&file["scope"]),
            status::plain(&file["path"])
        ));
    }
    let project = &document["project"];
    output::line(format_args!("project {}: {}", status::plain(&project["path"]), status::plain(&project["reason"])));
    output::line("settings");
    for setting in document["settings"].as_array().into_iter().flatten() {
        let note =
            if setting["overriddenByManagedPolicy"] == json!(true) { ", overridden by the managed policy" } else { "" };
        output::line(format_args!(
            "  {:<40}{}  ({}{note})",
            status::plain(&setting["key"]),
            status::plain(&setting["value"]),
            status::plain(&setting["source"])
        ));
    }
    let resolved = &document["resolved"];
    output::line("resolved");
    for key in ["provider", "model"] {
        output::line(format_args!(
            "  {key:<14}{}  ({})",
            status::plain(&resolved[key]["value"]),
            status::plain(&resolved[key]["source"])
        ));
    }
    output::line(format_args!("  {:<14}{}", "sessionDir", status::plain(&resolved["sessionDir"])));
    output::line(format_args!("  {:<14}{}", "attribution", status::plain(&resolved["attribution"])));
    status::print_pipeline(&resolved["telemetry"]);
    status::section("managed policy", &document["managedPolicy"]);
}
