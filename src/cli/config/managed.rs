//! The managed policy: a settings file an administrator owns at a system path. Its keys mean
//! what they mean in `settings.json`, but bind over flags and environment, and some widen into
//! powers a user cannot loosen:
//!
//! - a sink whose destination it sets (`endpoint`, `dsn`, `path`) is pinned: users cannot
//!   remove or redirect it, nor change its headers, and `OTEL_SDK_DISABLED` does not stop it;
//! - a sink's `capture` is a cap: a user's list is intersected with it;
//! - `redact` rules are added to every user's, never replaced;
//! - `attribution.required` refuses runs without those keys;
//! - `policy.allowedProviders` / `policy.allowedModels` restrict models,
//!   `policy.allowNonManagedExtensions` / `policy.allowProjectResources` forbid what is not
//!   the administrator's.
//!
//! A malformed or unreadable managed file stops `pi` with one line naming it (fail closed).

use std::path::{Path, PathBuf};

use crate::cli::settings::{self, Scope, SettingsFile};

use crate::cli::CliError;

/// The managed policy's system path.
pub const MANAGED_PATH: &str = "/etc/pi/managed-settings.json";
/// Names a managed policy file — honoured only when the system path has none, so a user
/// cannot escape a real policy with it (tests and containers use it).
pub const MANAGED_VAR: &str = "PI_MANAGED_SETTINGS";

/// Reads the managed policy: the system file when it exists, else `PI_MANAGED_SETTINGS` (which
/// must then exist), else none.
pub fn load() -> Result<Option<SettingsFile>, CliError> {
    let system = Path::new(MANAGED_PATH);
    let (path, named_by_var) = match std::fs::symlink_metadata(system) {
        Ok(_) => (system.to_owned(), false),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            match std::env::var_os(MANAGED_VAR).filter(|v| !v.is_empty()) {
                Some(path) => (PathBuf::from(path), true),
                None => return Ok(None),
            }
        }
        Err(e) => return Err(fail(format!("{MANAGED_PATH}: {e}"))),
    };
    match SettingsFile::load(&path, Scope::Managed) {
        Ok(Some(file)) => Ok(Some(file)),
        Ok(None) if named_by_var => Err(fail(format!("{MANAGED_VAR}: {}: no such file", path.display()))),
        Ok(None) => Ok(None),
        Err(e) => Err(fail(e.to_string())),
    }
}

fn fail(why: String) -> CliError {
    CliError::Usage(format!("managed policy {why} (pi does not run without a readable policy)"))
}

/// The powers of the managed policy that are not plain settings.
#[derive(Debug, Clone, Copy)]
pub struct Policy<'a> {
    pub(super) file: Option<&'a SettingsFile>,
}

impl<'a> Policy<'a> {
    /// The policy's own section (`policy`), when it has one.
    fn section(&self) -> Option<&'a settings::Policy> {
        self.file?.doc.policy.as_ref()
    }

    /// Attribution keys every run must carry.
    pub fn required_attribution(&self) -> Vec<&'a str> {
        let attribution = self.file.and_then(|f| f.doc.telemetry.as_ref()?.attribution.as_ref());
        attribution.and_then(|a| a.required.as_ref()).into_iter().flatten().map(String::as_str).collect()
    }

    /// `policy.allowedProviders` and `policy.allowedModels`, when set.
    pub fn allowed(&self) -> (Option<&'a [String]>, Option<&'a [String]>) {
        let section = self.section();
        (section.and_then(|p| p.allowed_providers.as_deref()), section.and_then(|p| p.allowed_models.as_deref()))
    }

    /// False when the policy forbids project resources (`policy.allowProjectResources: false`).
    pub fn allows_project_resources(&self) -> bool {
        self.section().and_then(|p| p.allow_project_resources) != Some(false)
    }

    /// `Err(why)` when the policy does not allow `provider` / `model`. Patterns are exact names
    /// or globs with `*` (`anthropic`, `claude-*`; models may be written `provider/id`).
    pub fn check_model(&self, provider: &str, model: &str) -> Result<(), String> {
        let path = self.file.map(|f| f.path.display().to_string()).unwrap_or_default();
        let (providers, models) = self.allowed();
        if let Some(allowed) = providers
            && !allowed.iter().any(|p| glob(p, provider))
        {
            return Err(format!(
                "provider {provider:?} is not allowed by the managed policy {path} (allowed: {})",
                allowed.join(", ")
            ));
        }
        let full = format!("{provider}/{model}");
        if let Some(allowed) = models
            && !allowed.iter().any(|p| glob(p, model) || glob(p, &full))
        {
            return Err(format!(
                "model {full:?} is not allowed by the managed policy {path} (allowed: {})",
                allowed.join(", ")
            ));
        }
        Ok(())
    }

    /// False when the policy forbids extensions it does not list itself.
    pub fn allows_non_managed_extensions(&self) -> bool {
        self.section().and_then(|p| p.allow_non_managed_extensions) != Some(false)
    }
}

/// `*` matches any run of characters; everything else literally.
fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_whole_names() {
        assert!(glob("claude-*", "claude-sonnet-4-5"));
        assert!(glob("anthropic/*", "anthropic/x"));
        assert!(glob("*-mini", "gpt-4o-mini"));
        assert!(glob("a*b*c", "axxbyyc"));
        assert!(!glob("a*b*c", "axxc"));
        assert!(!glob("gpt-4o", "gpt-4o-mini"));
        assert!(!glob("ab*ba", "aba"));
    }

    #[test]
    fn models_outside_the_allowed_lists_are_refused_with_the_reason() {
        let file = SettingsFile::parse(
            r#"{"policy":{"allowedProviders":["anthropic","faux"],"allowedModels":["claude-*","faux/*"]}}"#,
            Path::new("/etc/pi/managed-settings.json"),
            Scope::Managed,
        )
        .unwrap();
        let policy = Policy { file: Some(&file) };
        assert!(policy.check_model("anthropic", "claude-sonnet-4-5").is_ok());
        assert!(policy.check_model("faux", "faux-1").is_ok());
        assert!(policy.check_model("openai", "gpt-4o").unwrap_err().contains("provider \"openai\""));
        assert!(policy.check_model("anthropic", "other").unwrap_err().contains("anthropic/other"));
        assert!(Policy { file: None }.check_model("openai", "x").is_ok());
    }
}
