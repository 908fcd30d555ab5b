//! The spool: where the remote sinks' undelivered batches wait for a later run — its folder and
//! caps from the managed policy, `--spool-dir` / `--no-spool`, `PI_SPOOL_*` and the settings
//! files (in that order of precedence), checked.

use crate::cli::CliError;
use crate::cli::config::keys::spool as key;
use crate::cli::config::{Config, Given, Source, env_set};

/// Variable that moves the spool.
pub const SPOOL_DIR_VAR: &str = "PI_SPOOL_DIR";
/// Variable with the spool's size cap in bytes.
pub const SPOOL_MAX_BYTES_VAR: &str = "PI_SPOOL_MAX_BYTES";
/// Variable with the spool's age cap in days.
pub const SPOOL_MAX_AGE_VAR: &str = "PI_SPOOL_MAX_AGE_DAYS";

/// The spool and where its directory came from — managed `telemetry.spool.dir`,
/// `--spool-dir`, `PI_SPOOL_DIR`, the settings files, default — or `None` with `--no-spool`
/// (or `telemetry.spool.enabled: false`, or no home directory to put it in).
pub fn spool(
    dir: Option<&std::path::Path>,
    off: bool,
    cfg: &Config,
) -> Result<Option<(pi_observe::spool::SpoolConfig, Source)>, CliError> {
    use pi_observe::spool::SpoolConfig;
    if let Some(file) = cfg.managed_sets(&key::ENABLED) {
        if (key::ENABLED.read)(file) == Some(false) {
            return Ok(None);
        }
        if off {
            cfg.notice(format!("the managed policy {} keeps the spool on: --no-spool ignored", file.path.display()));
        }
    } else if off || (dir.is_none() && cfg.find(&key::ENABLED).map(|(on, _)| on) == Some(false)) {
        return Ok(None);
    }
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let managed_dir = cfg.managed_sets(&key::DIR).is_some();
    if managed_dir && (dir.is_some() || env_set(SPOOL_DIR_VAR)) {
        cfg.notice("the managed policy sets telemetry.spool.dir: --spool-dir / PI_SPOOL_DIR ignored".to_owned());
    }
    let (dir, source) = match (dir, std::env::var_os(SPOOL_DIR_VAR).filter(|d| !d.is_empty())) {
        _ if managed_dir => cfg.path_setting(&key::DIR).unwrap_or_default(),
        (Some(dir), _) if dir.as_os_str().is_empty() => {
            return Err(CliError::Usage("--spool-dir: the path is empty".into()));
        }
        (Some(dir), _) => (dir.to_owned(), Source::Flag("--spool-dir")),
        (None, Some(dir)) => {
            (crate::cli::paths::expand_home(dir.into(), home.as_ref()), Source::Env(SPOOL_DIR_VAR.into()))
        }
        (None, None) => match cfg.path_setting(&key::DIR) {
            Some(found) => found,
            None => match crate::cli::paths::agent_dir() {
                Some(agent) => (agent.join("spool"), Source::Default),
                None => return Ok(None),
            },
        },
    };
    // Checked up front like other output paths: a file where the folder should be would only
    // show when the first batch cannot be written.
    let culprit = match &source {
        Source::Flag(flag) => (*flag).to_owned(),
        Source::Env(var) => var.to_string(),
        Source::Default => "the spool folder".to_owned(),
        other => format!("telemetry.spool.dir ({other})"),
    };
    crate::cli::paths::check_dir(&culprit, &dir).map_err(CliError::Usage)?;
    let mut config = SpoolConfig::new(dir);
    if let Some(found) = cfg.pick(&key::MAX_BYTES, None, &[SPOOL_MAX_BYTES_VAR]) {
        let bytes = match &found.value {
            Given::Set(bytes) => Some(*bytes),
            Given::Var(raw) => raw.trim().parse::<u64>().ok(),
            Given::Flag => None,
        };
        config.max_bytes = bytes.filter(|n| *n > 0).ok_or_else(|| {
            CliError::Usage(format!("{}: {:?} is not a positive whole number of bytes", found.culprit(), found.text()))
        })?;
    }
    if let Some(found) = cfg.pick(&key::MAX_AGE_DAYS, None, &[SPOOL_MAX_AGE_VAR]) {
        let days = match &found.value {
            Given::Set(days) => Some(*days),
            Given::Var(raw) => raw.trim().parse::<f64>().ok(),
            Given::Flag => None,
        };
        let days = days.filter(|d| d.is_finite() && *d > 0.0 && *d <= 3650.0).ok_or_else(|| {
            let why = "is not a number of days between 0 and 3650";
            CliError::Usage(format!("{}: {:?} {why}", found.culprit(), found.text()))
        })?;
        config.max_age = std::time::Duration::from_secs_f64(days * 86_400.0);
    }
    Ok(Some((config, source)))
}
