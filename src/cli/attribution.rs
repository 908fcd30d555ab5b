//! Attribution: the managed policy, `--user` / `--org` / `--context`, `PI_USER_ID` /
//! `PI_ORG_ID`, and `telemetry.attribution` in the settings files, checked.

use std::path::Path;

use crate::cli::settings::{self, Scope, SettingsFile};
use pi_observe::core::{Attribution, names};

use super::CliError;
use super::args::ObserveArgs;
use super::config::Config;

/// Longest attribution key or value, in bytes.
pub const MAX_ATTRIBUTION_BYTES: usize = 256;

/// An attribution key or value: at most [`MAX_ATTRIBUTION_BYTES`], no control characters.
fn check_attribution(culprit: &str, what: &str, text: &str) -> Result<(), CliError> {
    if text.len() > MAX_ATTRIBUTION_BYTES {
        return Err(CliError::Usage(format!(
            "{culprit}: {what} is {} bytes; at most {MAX_ATTRIBUTION_BYTES} are allowed",
            text.len()
        )));
    }
    if let Some(c) = text.chars().find(|c| c.is_control()) {
        return Err(CliError::Usage(format!("{culprit}: {what} contains the control character {:?}", c)));
    }
    Ok(())
}

/// A flag's value, else the variable's (non-UTF-8 is an error naming the variable); empty = none.
fn flag_or_env(flag: Option<&str>, flag_name: &str, var: &str) -> Result<Option<(String, String)>, CliError> {
    if let Some(value) = flag {
        return Ok((!value.is_empty()).then(|| (value.to_owned(), flag_name.to_owned())));
    }
    match std::env::var(var) {
        Ok(value) => Ok((!value.is_empty()).then(|| (value, var.to_owned()))),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(CliError::Usage(format!("{var}: not valid UTF-8"))),
    }
}

/// How long an attribution command (`userIdCommand`, …) may run.
pub const COMMAND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Most bytes an attribution command may print (an id, not a document).
pub const COMMAND_OUTPUT_CAP: usize = 4096;

/// The attribution of a run. Per key: the managed policy's value (a flag it overrides is said
/// once), else `--user` / `--org` / `--context`, else `PI_USER_ID` / `PI_ORG_ID`, else the
/// settings files' `telemetry.attribution` (a value, or `KEYCommand`: a command run once in
/// `cwd` whose trimmed output is the value). Keys and values are checked: at most 256 bytes,
/// no control characters. A key in `attribution.required` (managed policy or settings) that
/// ends up unset refuses the run.
pub fn attribution(args: &ObserveArgs, cfg: &Config, cwd: &Path) -> Result<Attribution, CliError> {
    let mut attribution = Attribution::new();
    let mut set = |key: &str, value: String, culprit: &str| -> Result<(), CliError> {
        check_attribution(culprit, "the value", &value)?;
        check_attribution(culprit, "the key", key)?;
        attribution = std::mem::take(&mut attribution).with(key.to_owned(), value);
        Ok(())
    };
    let mut given: Vec<(String, String, &str)> = Vec::new();
    for (key, flag, flag_name, var) in [
        (names::CTX_USER_ID, args.user.as_deref(), "--user", names::ENV_USER_ID),
        (names::CTX_ORG_ID, args.org.as_deref(), "--org", names::ENV_ORG_ID),
    ] {
        if let Some((value, culprit)) = flag_or_env(flag, flag_name, var)? {
            given.push((key.to_owned(), value, if culprit == flag_name { flag_name } else { var }));
        }
    }
    for (key, value) in &args.context {
        given.push((key.clone(), value.clone(), "--context"));
    }
    // The files' keys, most binding layer first: managed, then project, then global.
    let layers: Vec<&SettingsFile> = cfg.managed.iter().chain(cfg.settings.files()).collect();
    let mut keys: Vec<String> = Vec::new();
    for (k, _) in layers.iter().filter_map(|file| section(file)).flat_map(|a| &a.values) {
        let base = k.strip_suffix("Command").filter(|b| !b.is_empty()).unwrap_or(k);
        if !keys.iter().any(|existing| existing == base) {
            keys.push(base.to_owned());
        }
    }
    for (key, value, culprit) in &given {
        if let Some(managed) = cfg.managed.as_ref().filter(|m| layer_sets(m, key)) {
            cfg.notice(format!(
                "the managed policy {} sets telemetry.attribution.{key}: {culprit} ignored",
                managed.path.display()
            ));
            continue;
        }
        set(key, value.clone(), culprit)?;
    }
    for key in &keys {
        let Some(file) = layers.iter().find(|f| layer_sets(f, key)) else { continue };
        let flag_given = given.iter().any(|(k, _, _)| k == key);
        if flag_given && file.scope != Scope::Managed {
            continue;
        }
        let Some(written) = section(file) else { continue };
        let culprit = format!("{}: telemetry.attribution.{key}", file.path.display());
        if let Some(value) = written.get(key) {
            set(key, value.to_owned(), &culprit)?;
            continue;
        }
        let command_key = format!("{key}Command");
        let Some(command) = written.get(&command_key) else { continue };
        match run_command(command, cwd) {
            Ok(value) => set(key, value, &format!("{culprit}Command"))?,
            Err(why) => cfg.notice(format!(
                "warning: {}: telemetry.attribution.{command_key}: `{command}` {why}; {key} not set",
                file.path.display()
            )),
        }
    }
    check_required(&attribution, &layers)?;
    Ok(attribution)
}

/// Refuses the run when a key of `attribution.required` (the managed list always; of a user's
/// files, the most binding one that has a list) is unset, naming the file and how to set it.
fn check_required(attribution: &Attribution, layers: &[&SettingsFile]) -> Result<(), CliError> {
    let mut required: Vec<(String, String)> = Vec::new();
    for file in layers {
        let Some(list) = section(file).and_then(|a| a.required.as_ref()) else { continue };
        for key in list {
            if !required.iter().any(|(k, _)| k == key) {
                required.push((key.to_owned(), file.path.display().to_string()));
            }
        }
        // A user's files replace each other's lists; the managed list always applies.
        if file.scope != Scope::Managed {
            break;
        }
    }
    for (key, file) in required {
        if attribution.get(&key).is_none() {
            let hint = match key.as_str() {
                names::CTX_USER_ID => format!("--user, {} or ", names::ENV_USER_ID),
                names::CTX_ORG_ID => format!("--org, {} or ", names::ENV_ORG_ID),
                _ => format!("--context {key}=… or "),
            };
            return Err(CliError::Usage(format!(
                "attribution key {key} is required ({file}): give {hint}telemetry.attribution.{key}"
            )));
        }
    }
    Ok(())
}

/// `telemetry.attribution` of `file`, when it has one.
fn section(file: &SettingsFile) -> Option<&settings::Attribution> {
    file.doc.telemetry.as_ref()?.attribution.as_ref()
}

/// True when `file` sets attribution `key` (as a value or a command).
fn layer_sets(file: &SettingsFile, key: &str) -> bool {
    section(file).is_some_and(|a| a.get(key).is_some() || a.get(&format!("{key}Command")).is_some())
}

/// Runs `command` with `sh -c` in `cwd` (no stdin, stderr discarded) and returns its trimmed
/// output; a failure, an empty output or [`COMMAND_TIMEOUT`] is `Err(why)`.
fn run_command(command: &str, cwd: &Path) -> Result<String, String> {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        // Its own group: what it starts in the background is ended with it.
        .process_group(0)
        .spawn()
        .map_err(|e| format!("could not start ({e})"))?;
    let group = child.id();
    // Read on a thread, at most one byte past the cap: a command that prints more is named as
    // such (and stopped), never left blocked on a full pipe until the timeout.
    let (tx, output) = std::sync::mpsc::channel();
    if let Some(stdout) = child.stdout.take() {
        std::thread::spawn(move || {
            let mut out = Vec::new();
            let _ = stdout.take(COMMAND_OUTPUT_CAP as u64 + 1).read_to_end(&mut out);
            let _ = tx.send(out);
        });
    }
    let deadline = std::time::Instant::now() + COMMAND_TIMEOUT;
    let stop = |child: &mut std::process::Child, why: String| {
        pi_agent::process::kill_group(group);
        let _ = child.kill();
        let _ = child.wait();
        Err(why)
    };
    let too_much = || format!("printed more than {COMMAND_OUTPUT_CAP} bytes");
    let timed_out = || format!("took longer than {} s", COMMAND_TIMEOUT.as_secs());
    let mut early = None;
    let status = loop {
        if early.is_none()
            && let Ok(out) = output.try_recv()
        {
            if out.len() > COMMAND_OUTPUT_CAP {
                return stop(&mut child, too_much());
            }
            early = Some(out);
        }
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if std::time::Instant::now() >= deadline => return stop(&mut child, timed_out()),
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(2)),
            Err(e) => return stop(&mut child, format!("could not be waited for ({e})")),
        }
    };
    // The command is done: whatever it left running in the background goes (and lets go of
    // the pipe), then the answer is read.
    pi_agent::process::kill_group(group);
    let out = match early {
        Some(out) => out,
        None => output.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now())).unwrap_or_default(),
    };
    if out.len() > COMMAND_OUTPUT_CAP {
        return Err(too_much());
    }
    if !status.success() {
        return Err(format!("failed ({status})"));
    }
    let value = String::from_utf8_lossy(&out).trim().to_owned();
    if value.is_empty() { Err("printed nothing".into()) } else { Ok(value) }
}
