//! The one error type for a setting an adapter cannot use, shared by every adapter so the
//! binary reports them alike: `SETTING: what is wrong`.

/// A setting that cannot be used; the message names the variable, flag or settings key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The variable, flag or settings key.
    pub setting: String,
    /// What is wrong.
    pub message: String,
}

impl ConfigError {
    /// An error for `setting`.
    pub fn new(setting: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError { setting: setting.into(), message: message.into() }
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.setting, self.message)
    }
}

impl std::error::Error for ConfigError {}
