//! The jobs of the driver that are more than a line: each a function of what it needs (the
//! harness, the shared state, the arguments), called from [`super::Driver`]'s dispatch.

use std::path::Path;
use std::sync::atomic::Ordering;

use pi_agent::events::AgentEvent;
use pi_agent::message::Message;
use pi_agent::session::{EntryKind, SessionWriter};
use pi_agent::{AgentSink as Sink, PromptSource, SwitchReason};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::outcome::{JobError, JobOutput, JobResult};
use super::{Shared, THINKING_LEVELS, commands_of, lock, model_json, prompt, shortcuts_of, switch};
use crate::cli::args::AgentArgs;
use crate::cli::config::Config;
use crate::cli::modes::harness::Harness;
use crate::cli::{extensions, setup};

/// An extension's command; the prompt it hands back, if any, runs as the extension's.
pub(super) async fn extension_command(
    harness: &mut Harness,
    shared: &Shared,
    line: &str,
    cancel: &CancellationToken,
    sink: Sink<'_>,
) -> JobResult {
    let session_file = harness.agent.session_file();
    let at = (harness.cwd.as_path(), session_file.as_deref());
    let outcome = crate::cli::extensions::run_command(
        &harness.extensions,
        (harness.agent.resources(), harness.agent.model()),
        line,
        at,
    )
    .await;
    match outcome {
        None => Err(format!("{}: no such command", line.split_whitespace().next().unwrap_or("")).into()),
        Some(Err(e)) => Err(e.into()),
        Some(Ok((output, next))) => {
            if let Some(next) = next {
                let source = harness.agent.config().source;
                harness.agent.config_mut().source = PromptSource::Extension;
                shared.busy.store(true, Ordering::SeqCst);
                let ran = prompt(harness, (&next, Vec::new()), cancel, &mut *sink).await;
                harness.agent.config_mut().source = source;
                ran?;
            }
            Ok(JobOutput::Command { output })
        }
    }
}

/// An extension's key shortcut.
pub(super) async fn extension_shortcut(harness: &mut Harness, key: &str) -> JobResult {
    let session_file = harness.agent.session_file();
    let at = (harness.cwd.as_path(), session_file.as_deref());
    let context = (harness.agent.resources(), harness.agent.model());
    match crate::cli::extensions::run_shortcut(&harness.extensions, context, key, at).await {
        None => Err(format!("{key}: no extension handles it").into()),
        Some(outcome) => outcome.map(|()| JobOutput::Nothing).map_err(Into::into),
    }
}

/// A compaction now; the summary entry it wrote, or why it did not compact.
pub(super) async fn compact(
    harness: &mut Harness,
    shared: &Shared,
    instructions: Option<&str>,
    cancel: &CancellationToken,
    outer: Sink<'_>,
) -> JobResult {
    shared.compacting.store(true, Ordering::SeqCst);
    let mut failure = None;
    let mut sink = |event: AgentEvent| {
        if let AgentEvent::SessionCompactFailed { error, .. } = &event {
            failure = Some(error.clone());
        }
        outer(event);
    };
    let scope = harness.scope();
    let compacted = harness
        .hub
        .enter(scope, harness.agent.compact(instructions, cancel, &mut sink))
        .await
        .map_err(|e| e.to_string())?;
    if !compacted {
        return Err(JobError(failure.unwrap_or_else(|| "nothing was compacted".into())));
    }
    let last = harness.agent.with_session(|s| {
        s.entries().iter().rev().find_map(|e| match &e.kind {
            EntryKind::Compaction { summary, first_kept_entry_id, tokens_before, .. } => Some(JobOutput::Compacted {
                summary: Some(summary.clone()),
                first_kept_entry_id: first_kept_entry_id.clone(),
                tokens_before: *tokens_before,
                details: json!({}),
            }),
            _ => None,
        })
    });
    let nothing =
        || JobOutput::Compacted { summary: None, first_kept_entry_id: None, tokens_before: 0, details: json!({}) };
    Ok(last.flatten().unwrap_or_else(nothing))
}

/// A new session file holding the branch up to the user message `entry_id`; its text comes back
/// for the editor.
pub(super) async fn fork(harness: &mut Harness, cfg: &Config, entry_id: &str, sink: Sink<'_>) -> JobResult {
    let found = harness
        .agent
        .with_session(|s| {
            s.entries().iter().find(|e| e.id == entry_id).map(|e| match &e.kind {
                EntryKind::Message { message: Message::User(user) } => Ok((user.content.text(), e.parent_id.clone())),
                _ => Err(format!("{entry_id}: not a user message")),
            })
        })
        .ok_or_else(|| "fork needs a session (not --no-session)".to_owned())?
        .ok_or_else(|| format!("{entry_id}: no such entry"))??;
    let (text, parent) = found;
    let parent = parent.ok_or_else(|| format!("{entry_id}: nothing before this message to fork"))?;
    let path = setup::new_session_path(&harness.cwd, cfg);
    let scope = harness.scope();
    let forked = harness.hub.enter(scope, harness.agent.fork(&parent, &path, sink)).await.map_err(|e| e.to_string())?;
    Ok(JobOutput::Forked { text, cancelled: !forked })
}

/// A fork at `entry_id` (else at the leaf: upstream's `clone`): the new session holds the branch
/// up to and with that entry.
pub(super) async fn fork_at(harness: &mut Harness, cfg: &Config, entry_id: Option<&str>, sink: Sink<'_>) -> JobResult {
    let at = harness
        .agent
        .with_session(|s| match entry_id {
            Some(id) => {
                s.entries().iter().any(|e| e.id == id).then(|| id.to_owned()).ok_or(format!("{id}: no such entry"))
            }
            None => s.leaf().map(str::to_owned).ok_or_else(|| "the session is empty: nothing to clone".to_owned()),
        })
        .ok_or_else(|| "fork needs a session (not --no-session)".to_owned())??;
    let path = setup::new_session_path(&harness.cwd, cfg);
    let scope = harness.scope();
    let forked = harness.hub.enter(scope, harness.agent.fork(&at, &path, sink)).await.map_err(|e| e.to_string())?;
    Ok(JobOutput::Switched { cancelled: !forked })
}

/// `/reload`: the session ends for the extensions, which stop; settings, extensions, tools,
/// skills and templates are read again; the session starts again with reason `reload`. Returns
/// what was loaded and the configuration read.
pub(super) async fn reload(
    harness: &mut Harness,
    args: &AgentArgs,
    shared: &Shared,
    sink: Sink<'_>,
) -> Result<(JobOutput, Config), JobError> {
    let scope = harness.scope();
    harness.hub.enter(scope.clone(), harness.agent.shutdown(&mut *sink)).await;
    for extension in &harness.extensions {
        extension.shutdown().await;
    }
    let fresh = Config::load(&harness.cwd).map_err(|e| e.to_string())?;
    let cfg = &fresh;
    let cwd = harness.cwd.clone();
    let found = extensions::discover((&args.extensions, args.no_extensions), cfg, &cwd).map_err(|e| e.to_string())?;
    let tools = setup::tools(args.tools.as_deref()).map_err(|e| e.to_string())?;
    let extensions::Assembled { extensions: started, tools, resources, failures } =
        extensions::assemble(args, cfg, &cwd, found, None, tools, "reload").await;
    // A reload keeps the session going: what failed is said, whatever `onLoadError` says.
    for failure in failures {
        crate::cli::output::error(format_args!("pi: {failure}; not loaded"));
    }
    let loaded = JobOutput::Reloaded {
        extensions: started.len(),
        skills: resources.skills.len(),
        prompts: resources.templates.len(),
    };
    harness.agent.set_tools(tools);
    harness.agent.set_resources(resources);
    let refs: Vec<&dyn pi_agent::extensions::Extension> =
        started.iter().map(|e| e as &dyn pi_agent::extensions::Extension).collect();
    harness.agent.replace_extensions(&refs);
    *lock(&shared.extension_commands) = commands_of(&started);
    *lock(&shared.extension_shortcuts) = shortcuts_of(&started);
    harness.extensions = started;
    harness.hub.enter(scope, harness.agent.restart_session("reload", sink)).await;
    Ok((loaded, fresh))
}

/// RPC `set_model` / `/model`: the model and its provider (faux keeps its script).
pub(super) async fn set_model(
    harness: &mut Harness,
    (args, cfg): (&AgentArgs, &Config),
    provider: String,
    model: String,
    sink: Sink<'_>,
) -> JobResult {
    let current = harness.agent.model().clone();
    // A provider an extension serves (upstream's `registerProvider`), else one of pi's.
    let served = harness.extensions.iter().find_map(|e| e.provider(&provider));
    if let Some((models, served)) = served {
        let chosen = models.into_iter().find(|m| m.id == model);
        let chosen = chosen.ok_or_else(|| format!("{provider} (an extension's provider) has no model {model}"))?;
        let scope = harness.scope();
        harness.hub.enter(scope, harness.agent.select_model(served, chosen.clone(), "set", sink)).await;
        return Ok(JobOutput::Model(model_json(&chosen)));
    }
    let selected = setup::select_named(args, cfg, Some(provider), Some(model)).map_err(|e| e.to_string())?;
    // The faux provider keeps its script across a change between its models.
    let provider = if selected.model.api == pi_agent::model::Api::Faux && current.api == selected.model.api {
        harness.agent.provider()
    } else {
        selected.provider
    };
    let scope = harness.scope();
    harness.hub.enter(scope, harness.agent.select_model(provider, selected.model.clone(), "set", sink)).await;
    Ok(JobOutput::Model(model_json(&selected.model)))
}

/// RPC `cycle_model`, Ctrl+P / Shift+Ctrl+P: the next (or previous) model of the same provider
/// (`null` when it has one).
pub(super) async fn cycle_model(
    harness: &mut Harness,
    (args, cfg): (&AgentArgs, &Config),
    (backward, session_scope): (bool, Option<&[String]>),
    sink: Sink<'_>,
) -> JobResult {
    let current = harness.agent.model().clone();
    let registry = setup::registry(args, cfg).map_err(|e| e.to_string())?;
    // The scope (this session's, `--models`, `enabledModels`) when there is one, else the
    // provider's models.
    let scoped = match session_scope {
        Some(names) => crate::cli::model_scope::matching(names, &registry),
        None => crate::cli::model_scope::scoped_models(args, cfg, &registry),
    };
    let is_scoped = !scoped.is_empty();
    let same: Vec<&pi_agent::model::ModelInfo> = if is_scoped {
        scoped.iter().collect()
    } else {
        registry.models().iter().filter(|m| m.provider == current.provider).collect()
    };
    if same.len() < 2 && !(is_scoped && same.first().is_some_and(|m| m.id != current.id)) {
        return Ok(JobOutput::Nothing);
    }
    // Outside the scope, the first (or last) of it is next.
    let here = same.iter().position(|m| m.id == current.id && m.provider == current.provider);
    let at = match here {
        Some(here) if backward => here + same.len() - 1,
        Some(here) => here + 1,
        None if backward => same.len() - 1,
        None => 0,
    };
    let next = same[at % same.len()].clone();
    let selected = setup::select_named(args, cfg, Some(next.provider.clone()), Some(next.id.clone()))
        .map_err(|e| e.to_string())?;
    let provider = if selected.model.api == current.api && current.api == pi_agent::model::Api::Faux {
        harness.agent.provider()
    } else {
        selected.provider
    };
    let scope = harness.scope();
    harness.hub.enter(scope, harness.agent.select_model(provider, selected.model.clone(), "cycle", sink)).await;
    let level = harness.agent.config().reasoning.clone().unwrap_or_else(|| "off".into());
    Ok(JobOutput::CycledModel { model: model_json(&selected.model), thinking_level: level, is_scoped })
}

/// `!cmd` / RPC `bash`: a shell command whose output joins the next request's context.
pub(super) async fn bash(harness: &mut Harness, command: (&str, bool), cancel: &CancellationToken) -> JobResult {
    let scope = harness.scope();
    let done = harness.hub.enter(scope, harness.agent.run_bash(command, cancel)).await.map_err(|e| e.to_string())?;
    Ok(JobOutput::Bash {
        output: done.output,
        exit_code: done.exit_code,
        cancelled: done.cancelled,
        truncated: done.truncated,
    })
}

/// RPC `new_session` / `/new`: a fresh session file (none with `--no-session`).
pub(super) async fn new_session(harness: &mut Harness, cfg: &Config, sink: Sink<'_>) -> JobResult {
    let next = match harness.agent.session_file() {
        Some(_) => Some(
            SessionWriter::create(&setup::new_session_path(&harness.cwd, cfg), &harness.cwd)
                .map_err(|e| e.to_string())?,
        ),
        None => None,
    };
    switch(harness, SwitchReason::New, next, sink).await
}

/// RPC `switch_session` / `/resume`: the session file at `path`.
pub(super) async fn switch_session(harness: &mut Harness, path: &Path, sink: Sink<'_>) -> JobResult {
    if !path.is_file() {
        return Err(format!("{}: no such session file", path.display()).into());
    }
    let next = harness.hub.in_scope(|| setup::open_session(path, &harness.cwd)).map_err(|e| e.to_string())?;
    switch(harness, SwitchReason::Resume, Some(next), sink).await
}

/// `/tree ID [summarize]`: the leaf moves to `target`.
pub(super) async fn navigate(
    harness: &mut Harness,
    target: &str,
    summarize: bool,
    cancel: &CancellationToken,
    sink: Sink<'_>,
) -> JobResult {
    let scope = harness.scope();
    let navigation = harness
        .hub
        .enter(scope, harness.agent.navigate(target, summarize, cancel, sink))
        .await
        .map_err(|e| e.to_string())?;
    Ok(JobOutput::Navigated {
        moved: navigation.moved,
        cancelled_by: navigation.cancelled_by,
        abandoned_entries: navigation.abandoned_entries,
        summarized: navigation.summary.is_some(),
        editor_text: navigation.editor_text,
    })
}

/// RPC `cycle_thinking_level`: the next level (`null` for a model that does not reason).
pub(super) async fn cycle_thinking_level(harness: &mut Harness, sink: Sink<'_>) -> JobOutput {
    if !harness.agent.model().reasoning {
        return JobOutput::Nothing;
    }
    let current = harness.agent.config().reasoning.clone().unwrap_or_else(|| "off".into());
    let at = THINKING_LEVELS.iter().position(|l| *l == current).map_or(0, |i| i + 1);
    let next = THINKING_LEVELS[at % THINKING_LEVELS.len()];
    let scope = harness.scope();
    let level = (next != "off").then(|| next.to_owned());
    harness.hub.enter(scope, harness.agent.select_thinking_level(level, sink)).await;
    JobOutput::ThinkingLevel { level: next }
}

/// RPC `set_thinking_level`: one of [`THINKING_LEVELS`] (sent only to models that reason).
pub(super) async fn set_thinking_level(harness: &mut Harness, level: String, sink: Sink<'_>) -> JobResult {
    if !THINKING_LEVELS.contains(&level.as_str()) {
        return Err(format!("unknown thinking level {level:?} (give {})", THINKING_LEVELS.join(", ")).into());
    }
    let reasons = harness.agent.model().reasoning;
    let scope = harness.scope();
    let level = (level != "off" && reasons).then_some(level);
    harness.hub.enter(scope, harness.agent.select_thinking_level(level, sink)).await;
    Ok(JobOutput::Nothing)
}
