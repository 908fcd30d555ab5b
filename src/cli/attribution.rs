//! `--user`, `--org`, `--context` and `PI_USER_ID` / `PI_ORG_ID`, checked.

use pi_observe::core::{Attribution, names};

use super::CliError;
use super::args::ObserveArgs;

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

/// `--user`, `--org`, `--context` (flags win over `PI_USER_ID` / `PI_ORG_ID`). Keys and values
/// are checked: at most 256 bytes, no control characters.
pub fn attribution(args: &ObserveArgs) -> Result<Attribution, CliError> {
    let mut attribution = Attribution::new();
    for (key, flag, flag_name, var) in [
        (names::CTX_USER_ID, args.user.as_deref(), "--user", names::ENV_USER_ID),
        (names::CTX_ORG_ID, args.org.as_deref(), "--org", names::ENV_ORG_ID),
    ] {
        if let Some((value, culprit)) = flag_or_env(flag, flag_name, var)? {
            check_attribution(&culprit, "the value", &value)?;
            attribution = attribution.with(key, value);
        }
    }
    for (key, value) in &args.context {
        check_attribution("--context", "a key", key)?;
        check_attribution("--context", &format!("the value of {key}"), value)?;
        attribution = attribution.with(key.clone(), value.clone());
    }
    Ok(attribution)
}
