//! `pi trust [PATH]` / `pi trust --revoke [PATH]`: the user's decision about a project's own
//! resources, kept in `<agent dir>/trusted-projects.json`.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::cli::settings::trust::{TRUST_FILE, TrustStore};
use clap::Args;

use crate::cli::config::Config;
use crate::cli::{CliError, output};

/// `pi trust` arguments.
#[derive(Debug, Args)]
pub struct TrustArgs {
    /// The project folder (default: the current directory). Trust covers its subfolders.
    #[arg(value_name = "PATH")]
    path: Option<PathBuf>,
    /// Take the trust back.
    #[arg(long)]
    revoke: bool,
}

/// Records the decision and says what it means for the project.
pub fn run(args: &TrustArgs, cfg: &Config) -> Result<ExitCode, CliError> {
    let dir = match &args.path {
        Some(path) if path.is_dir() => path.clone(),
        Some(path) => return Err(CliError::Usage(format!("trust: {} is not a directory", path.display()))),
        None => std::env::current_dir().map_err(|e| CliError::Usage(format!("current directory: {e}")))?,
    };
    let agent_dir = cfg
        .agent_dir
        .clone()
        .ok_or_else(|| CliError::Usage("trust: no home directory to keep the decision in (set HOME)".into()))?;
    let mut store = TrustStore::load(&agent_dir.join(TRUST_FILE)).map_err(|e| CliError::Usage(e.to_string()))?;
    let write =
        |store: &TrustStore| store.save().map_err(|e| CliError::Failure(format!("{}: {e}", store.path().display())));
    if args.revoke {
        let removed = store.revoke(&dir);
        write(&store)?;
        let shown = std::fs::canonicalize(&dir).unwrap_or(dir.clone());
        match (removed, store.trusted_root(&dir)) {
            (_, Some(root)) => output::line(format_args!(
                "{} is still trusted through {} (revoke that folder to untrust it)",
                shown.display(),
                root.display()
            )),
            (true, None) => output::line(format_args!("{} is no longer trusted", shown.display())),
            (false, None) => output::line(format_args!("{} was not trusted", shown.display())),
        }
        return Ok(ExitCode::SUCCESS);
    }
    output::line(trust(store, &dir, cfg)?);
    Ok(ExitCode::SUCCESS)
}

/// Trusts `dir` in the user's trust store (`/trust` in the interactive mode); says what it means.
pub fn trust_project(dir: &std::path::Path, cfg: &Config) -> Result<String, CliError> {
    let agent_dir = cfg
        .agent_dir
        .clone()
        .ok_or_else(|| CliError::Usage("trust: no home directory to keep the decision in (set HOME)".into()))?;
    let store = TrustStore::load(&agent_dir.join(TRUST_FILE)).map_err(|e| CliError::Usage(e.to_string()))?;
    trust(store, dir, cfg)
}

fn trust(mut store: TrustStore, dir: &std::path::Path, cfg: &Config) -> Result<String, CliError> {
    if !cfg.policy().allows_project_resources() {
        cfg.notice(
            "warning: the managed policy forbids project resources: trusting changes nothing while it does".into(),
        );
    }
    let stored = store.trust(dir, pi_agent::time::iso8601(pi_agent::time::now_millis()));
    store.save().map_err(|e| CliError::Failure(format!("{}: {e}", store.path().display())))?;
    Ok(format!("trusted {}: its .pi/ settings, skills, prompt templates and extensions will load", stored.display()))
}
