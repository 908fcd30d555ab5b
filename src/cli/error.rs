//! The command's errors and exit codes.
//!
//! | exit | meaning |
//! |---|---|
//! | 0 | done |
//! | 1 | the work failed after it started: a provider error ended the prompt, a session could not be written, `pi report`/`pi export` met a corrupt session (the others are still reported) |
//! | 2 | bad input, before any work: an unknown flag, a malformed value, variable, settings or session file; one line on stderr names it |
//! | 128 + n | interrupted by signal n (SIGHUP 129, SIGINT 130, SIGTERM 143) |

use std::process::ExitCode;

/// A failure of the command, printed as one line `pi: <culprit>: <what is wrong>`.
#[derive(Debug)]
pub enum CliError {
    /// Bad input, found before any work started (exit 2).
    Usage(String),
    /// The work failed after it started (exit 1).
    Failure(String),
}

impl CliError {
    /// The exit code for this error.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            CliError::Usage(_) => ExitCode::from(2),
            CliError::Failure(_) => ExitCode::FAILURE,
        }
    }
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::Usage(message) | CliError::Failure(message) => f.write_str(message),
        }
    }
}

/// Configuration errors of the libraries (`ConfigError`, `ScrubError`, …) are bad input.
impl<E: std::error::Error> From<E> for CliError {
    fn from(e: E) -> Self {
        CliError::Usage(e.to_string())
    }
}
