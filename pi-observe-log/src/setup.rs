//! JSON-lines logging setup: a `tracing-subscriber` that writes one JSON object per line, through
//! a bounded non-blocking writer, to stderr or a file.

use std::io::Write;
use std::path::PathBuf;

use tracing_appender::non_blocking::{NonBlocking, NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// Where the JSON lines go.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum LogDestination {
    /// Standard error.
    #[default]
    Stderr,
    /// Appended to this file (created with its directory if missing).
    File(PathBuf),
}

/// Settings for [`init_json_logging`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonLogConfig {
    /// Where lines go.
    pub destination: LogDestination,
    /// Filter directives when neither `PI_LOG` nor `RUST_LOG` is set (`tracing` env-filter syntax).
    pub default_filter: String,
    /// Lines buffered before new ones are dropped (the writer never blocks the caller).
    pub buffered_lines: usize,
}

impl Default for JsonLogConfig {
    fn default() -> Self {
        JsonLogConfig { destination: LogDestination::Stderr, default_filter: "info".into(), buffered_lines: 16_384 }
    }
}

/// Why logging could not be set up; the message names the variable or file.
#[derive(Debug, thiserror::Error)]
pub enum LogInitError {
    /// `PI_LOG`, `RUST_LOG` or the default filter does not parse.
    #[error("{source_name}: invalid log filter {value:?}: {message}")]
    Filter {
        /// `PI_LOG`, `RUST_LOG` or `default filter`.
        source_name: String,
        /// The directives.
        value: String,
        /// What is wrong.
        message: String,
    },
    /// The log file cannot be opened.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// Another global `tracing` subscriber is already installed.
    #[error("a global tracing subscriber is already installed")]
    AlreadyInstalled,
}

/// Keeps the writer thread alive; dropping it flushes what is buffered.
#[must_use = "dropping the guard stops the log writer"]
pub struct LogGuard {
    _worker: WorkerGuard,
    writer: NonBlocking,
}

impl std::fmt::Debug for LogGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogGuard").field("dropped_lines", &self.dropped_lines()).finish()
    }
}

impl LogGuard {
    /// Lines dropped because the buffer was full.
    pub fn dropped_lines(&self) -> usize {
        self.writer.error_counter().dropped_lines()
    }
}

/// The filter: `PI_LOG`, else `RUST_LOG`, else `default`.
pub fn env_filter(default: &str) -> Result<EnvFilter, LogInitError> {
    let (source_name, value) = [("PI_LOG", std::env::var("PI_LOG").ok()), ("RUST_LOG", std::env::var("RUST_LOG").ok())]
        .into_iter()
        .find_map(|(name, value)| value.filter(|v| !v.trim().is_empty()).map(|v| (name.to_owned(), v)))
        .unwrap_or_else(|| ("default filter".to_owned(), default.to_owned()));
    EnvFilter::builder().parse(&value).map_err(|e| LogInitError::Filter { source_name, value, message: e.to_string() })
}

/// A JSON-lines `tracing` subscriber writing to `writer`: one object per event with the
/// event's fields at the top level (the `pi_observe` bridge's `event.name`, `trace_id`, …),
/// `timestamp`, `level` and `target`.
pub fn json_subscriber<W>(writer: W, filter: EnvFilter) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false)
        .with_writer(writer)
        .with_env_filter(filter)
        .finish()
}

/// A bounded, non-blocking writer in front of `inner`: when `lines` are waiting, new lines are
/// dropped (and counted) instead of blocking the caller.
pub fn non_blocking(inner: impl Write + Send + 'static, lines: usize) -> (NonBlocking, WorkerGuard) {
    NonBlockingBuilder::default().lossy(true).buffered_lines_limit(lines.max(1)).finish(inner)
}

/// Installs the global JSON-lines logger (filter from `PI_LOG` / `RUST_LOG`). Keep the guard
/// until exit.
pub fn init_json_logging(config: &JsonLogConfig) -> Result<LogGuard, LogInitError> {
    let filter = env_filter(&config.default_filter)?;
    let (writer, worker) = match &config.destination {
        LogDestination::Stderr => non_blocking(std::io::stderr(), config.buffered_lines),
        LogDestination::File(path) => {
            let file_error = |source| LogInitError::File { path: path.display().to_string(), source };
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(file_error)?;
            }
            let file = std::fs::OpenOptions::new().create(true).append(true).open(path).map_err(file_error)?;
            non_blocking(file, config.buffered_lines)
        }
    };
    tracing::subscriber::set_global_default(json_subscriber(writer.clone(), filter))
        .map_err(|_| LogInitError::AlreadyInstalled)?;
    Ok(LogGuard { _worker: worker, writer })
}
