//! JSON-lines logging setup: a `tracing-subscriber` that writes one JSON object per line, through
//! a bounded batching writer ([`BatchedWriter`]), to stderr or a file.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use std::fmt;
use std::fmt::Write as _;

use tracing::field::{Field, Visit};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::registry::LookupSpan;

use crate::batched::BatchedWriter;

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
    /// Bytes buffered before new lines are dropped (the writer never blocks the caller).
    pub buffered_bytes: usize,
}

impl Default for JsonLogConfig {
    fn default() -> Self {
        JsonLogConfig { destination: LogDestination::Stderr, default_filter: "info".into(), buffered_bytes: 8 << 20 }
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

/// Keeps the writer thread alive; dropping it writes what is buffered (for at most a second).
#[must_use = "dropping the guard stops the log writer"]
pub struct LogGuard {
    writer: LogWriter,
}

impl std::fmt::Debug for LogGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogGuard").field("dropped_lines", &self.dropped_lines()).finish()
    }
}

impl LogGuard {
    /// Lines dropped because the buffer was full.
    pub fn dropped_lines(&self) -> u64 {
        self.writer.dropped_lines()
    }

    /// Writes what is buffered (waiting at most `timeout`) and stops the writer; then says what
    /// became of every line and why the last write failed, if one did.
    pub fn close(self, timeout: Duration) -> (crate::batched::LineCounts, Option<String>) {
        self.writer.0.close(timeout);
        (self.writer.0.counts(), self.writer.0.last_error())
    }
}

impl Drop for LogGuard {
    fn drop(&mut self) {
        self.writer.0.close(Duration::from_secs(1));
    }
}

/// A [`MakeWriter`] over a [`BatchedWriter`]: each formatted event (one `write` call from the
/// fmt layer) becomes one line in its buffer.
#[derive(Clone, Debug)]
pub struct LogWriter(Arc<BatchedWriter>);

impl LogWriter {
    /// Lines dropped because the buffer was full (or the writer closed).
    pub fn dropped_lines(&self) -> u64 {
        self.0.counts().dropped
    }

    /// Waits (at most `timeout`) until every line so far is written.
    pub fn flush(&self, timeout: Duration) -> bool {
        self.0.flush(timeout)
    }
}

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // A refused line is counted by the writer; the caller (a log statement) is never failed.
        let _ = self.0.push_line(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for LogWriter {
    type Writer = LogWriter;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// The filter: `PI_LOG`, else `RUST_LOG`, else `default`.
pub fn env_filter(default: &str) -> Result<EnvFilter, LogInitError> {
    let (source_name, value) = filter_directives(default);
    EnvFilter::builder().parse(&value).map_err(|e| LogInitError::Filter { source_name, value, message: e.to_string() })
}

/// Where the filter comes from (`PI_LOG`, `RUST_LOG` or `default filter`) and its directives.
fn filter_directives(default: &str) -> (String, String) {
    [("PI_LOG", std::env::var("PI_LOG").ok()), ("RUST_LOG", std::env::var("RUST_LOG").ok())]
        .into_iter()
        .find_map(|(name, value)| value.filter(|v| !v.trim().is_empty()).map(|v| (name.to_owned(), v)))
        .unwrap_or_else(|| ("default filter".to_owned(), default.to_owned()))
}

/// Set by [`init_json_logging`] when its filter only names targets and levels (no span or field
/// directives): the `pi_observe` bridge may then write its lines straight into the installed
/// writer ([`write_direct`]), the filter asked by target and level alone.
static DIRECT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Asks the writer of the JSON logging [`init_json_logging`] installed, when that is this
/// thread's `tracing` subscriber, to write what it holds now, without waiting.
pub(crate) fn flush_installed_soon() {
    tracing::dispatcher::get_default(|dispatch| {
        if let Some(writer) = dispatch.downcast_ref::<LogWriter>() {
            writer.0.flush_soon();
        }
    });
}

/// Writes one `pi_observe` record as the line [`FlatJson`] would make of it — `timestamp` (the
/// record's time, `at` since the Unix epoch, rather than the time it is written: the bridge may
/// write from another thread a little later), `level`, `fields` in order, `target` — straight
/// into the writer of the JSON logging [`init_json_logging`] installed, when that is this
/// thread's `tracing` subscriber: no callsite, `ValueSet` or layer in between. `false` when it is
/// not (the caller dispatches the event through `tracing` instead); `true` also when the filter
/// leaves the level out.
pub(crate) fn write_direct<'f>(
    level: tracing::Level,
    at: std::time::Duration,
    fields: impl Iterator<Item = (&'static str, &'f str, FieldText<'f>)>,
) -> bool {
    if !DIRECT.load(std::sync::atomic::Ordering::Relaxed) {
        return false;
    }
    let mut fields = Some(fields);
    tracing::dispatcher::get_default(|dispatch| {
        let Some(writer) = dispatch.downcast_ref::<LogWriter>() else { return false };
        let Some(fields) = fields.take() else { return false };
        if !dispatch.enabled(crate::bridge::level_metadata(level)) {
            return true;
        }
        thread_local! {
            static LINE: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
        }
        let mut spare = String::new();
        LINE.with(|kept| {
            let mut kept = kept.try_borrow_mut();
            let line = match &mut kept {
                Ok(kept) => &mut **kept,
                Err(_) => &mut spare,
            };
            line.clear();
            line.push_str("{\"timestamp\":\"");
            push_time(line, at);
            line.push_str("\",\"level\":\"");
            line.push_str(level.as_str());
            line.push('"');
            for (prefix, key, value) in fields {
                line.push_str(",\"");
                json_string_body(line, prefix);
                json_string_body(line, key);
                line.push_str("\":");
                value.write(line);
            }
            line.push_str(",\"target\":");
            json_string(line, crate::bridge::TARGET);
            line.push_str("}\n");
            let _ = writer.0.push_line(line.as_bytes());
            #[cfg(any(test, feature = "testing"))]
            crate::testing::DIRECT_LINES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if line.capacity() > crate::batched::KEPT_LINE_CAPACITY {
                *line = String::new();
            }
        });
        true
    })
}

/// A field's value as [`JsonFields`] writes it.
pub(crate) enum FieldText<'a> {
    Str(&'a str),
    I64(i64),
    F64(f64),
    Bool(bool),
}

impl FieldText<'_> {
    fn write(&self, out: &mut String) {
        match self {
            FieldText::Str(text) => json_string(out, text),
            FieldText::I64(v) => out.push_str(itoa::Buffer::new().format(*v)),
            FieldText::F64(v) => push_f64(out, *v),
            FieldText::Bool(v) => out.push_str(if *v { "true" } else { "false" }),
        }
    }
}

/// A JSON-lines `tracing` subscriber writing to `writer`: one object per event with the
/// event's fields at the top level (the `pi_observe` bridge's `event.name`, `trace_id`, …),
/// `timestamp`, `level` and `target` — the lines `fmt().json().flatten_event(true)` writes,
/// written by [`FlatJson`] straight into the line buffer.
pub fn json_subscriber<W>(writer: W, filter: EnvFilter) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt().event_format(FlatJson).with_writer(writer).with_env_filter(filter).finish()
}

/// One JSON object per event: `timestamp` (RFC 3339, UTC, microseconds), `level`, every field at
/// the top level in the order recorded (strings escaped, numbers and booleans as JSON values,
/// anything else as its `Debug` text), then `target`. The same shape as `tracing-subscriber`'s
/// flattened JSON format, without building a JSON value per field.
#[derive(Debug, Clone, Copy, Default)]
pub struct FlatJson;

impl<S, N> FormatEvent<S, N> for FlatJson
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> fmt::Result {
        thread_local! {
            /// The line being built (a plain `String`: no dynamic call per piece), reused.
            static LINE: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
        }
        LINE.with(|line| match line.try_borrow_mut() {
            Ok(mut line) => {
                line.clear();
                flat_json_line(&mut line, event);
                let written = writer.write_str(&line);
                if line.capacity() > crate::batched::KEPT_LINE_CAPACITY {
                    *line = String::new();
                }
                written
            }
            // An event logged while a line is being formatted on this thread gets its own buffer.
            Err(_) => {
                let mut line = String::new();
                flat_json_line(&mut line, event);
                writer.write_str(&line)
            }
        })
    }
}

/// One event as a [`FlatJson`] line, into `line`.
fn flat_json_line(line: &mut String, event: &tracing::Event<'_>) {
    line.push_str("{\"timestamp\":\"");
    push_now(line);
    line.push_str("\",\"level\":\"");
    line.push_str(event.metadata().level().as_str());
    line.push('"');
    event.record(&mut JsonFields { out: line });
    line.push_str(",\"target\":");
    json_string(line, event.metadata().target());
    line.push_str("}\n");
}

/// Appends the current time as [`push_time`] writes it.
fn push_now(out: &mut String) {
    push_time(out, std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default());
}

/// Appends the time `since_epoch` as RFC 3339 in UTC with microseconds
/// (`2026-12-03T17:26:15.281191Z`, as `tracing-subscriber`'s `SystemTime` timer writes it). The
/// date and time of day are worked out once per second per thread; each line then only writes
/// its microseconds.
fn push_time(out: &mut String, since_epoch: std::time::Duration) {
    thread_local! {
        /// The second last formatted and its `YYYY-MM-DDTHH:MM:SS` text.
        static SECOND: std::cell::RefCell<(u64, String)> = const { std::cell::RefCell::new((u64::MAX, String::new())) };
    }
    let secs = since_epoch.as_secs();
    SECOND.with(|cached| {
        let mut cached = cached.borrow_mut();
        if cached.0 != secs {
            let Ok(at) = time::OffsetDateTime::from_unix_timestamp(i64::try_from(secs).unwrap_or(i64::MAX)) else {
                return out.push_str("1970-01-01T00:00:00.000000Z");
            };
            let (year, month, day) = at.to_calendar_date();
            let (hour, minute, second) = at.to_hms();
            cached.1.clear();
            let _ = write!(cached.1, "{year:04}-{:02}-{day:02}T{hour:02}:{minute:02}:{second:02}", u8::from(month));
            cached.0 = secs;
        }
        out.push_str(&cached.1);
        let mut left = since_epoch.subsec_micros();
        let mut digits = ['0'; 6];
        for slot in digits.iter_mut().rev() {
            *slot = char::from(b'0' + (left % 10) as u8);
            left /= 10;
        }
        out.push('.');
        out.extend(digits);
        out.push('Z');
    })
}

/// Writes each field as `,"name":value`.
struct JsonFields<'a> {
    out: &'a mut String,
}

impl JsonFields<'_> {
    fn name(&mut self, field: &Field) -> &mut String {
        self.out.push(',');
        json_string(self.out, field.name());
        self.out.push(':');
        self.out
    }
}

impl Visit for JsonFields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        json_string(self.name(field), value);
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.name(field).push_str(itoa::Buffer::new().format(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.name(field).push_str(itoa::Buffer::new().format(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.name(field).push_str(if value { "true" } else { "false" });
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        push_f64(self.name(field), value);
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        json_string(self.name(field), &format!("{value:?}"));
    }
}

/// Appends `value` as `serde_json` writes a float (`12.0`, not `12`); not finite → `null`.
fn push_f64(out: &mut String, value: f64) {
    match serde_json::Number::from_f64(value) {
        Some(number) => {
            let _ = write!(out, "{number}");
        }
        None => out.push_str("null"),
    }
}

/// Appends `text` as a JSON string. Runs of bytes that need no escape are copied whole (a byte
/// that needs one is ASCII, so every cut falls on a character boundary).
fn json_string(out: &mut String, text: &str) {
    out.push('"');
    json_string_body(out, text);
    out.push('"');
}

/// Appends `text` escaped for the inside of a JSON string.
fn json_string_body(out: &mut String, text: &str) {
    // Most values (ids, names, numbers' text) need no escape: that is found in one pass with no
    // branch per byte, which the compiler vectorizes, and the text copied whole.
    let needs_escape = |byte: u8| byte < 0x20 || byte == b'"' || byte == b'\\';
    if !text.bytes().fold(false, |any, byte| any | needs_escape(byte)) {
        out.push_str(text);
        return;
    }
    let mut start = 0;
    for (i, byte) in text.bytes().enumerate() {
        let escaped = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..0x20 => "",
            _ => continue,
        };
        out.push_str(&text[start..i]);
        if escaped.is_empty() {
            let _ = write!(out, "\\u{byte:04x}");
        } else {
            out.push_str(escaped);
        }
        start = i + 1;
    }
    out.push_str(&text[start..]);
}

/// A bounded, non-blocking writer in front of `inner`: when `bytes` are waiting, new lines are
/// dropped (and counted) instead of blocking the caller; a background thread writes in batches.
pub fn non_blocking(inner: impl Write + Send + 'static, bytes: usize) -> std::io::Result<LogWriter> {
    BatchedWriter::start(inner, bytes).map(LogWriter)
}

/// Installs the global JSON-lines logger (filter from `PI_LOG` / `RUST_LOG`). Keep the guard
/// until exit.
pub fn init_json_logging(config: &JsonLogConfig) -> Result<LogGuard, LogInitError> {
    let filter = env_filter(&config.default_filter)?;
    let by_target_and_level = !filter_directives(&config.default_filter).1.contains(['[', '{']);
    let (writer, path) = match &config.destination {
        LogDestination::Stderr => (non_blocking(std::io::stderr(), config.buffered_bytes), "stderr".to_owned()),
        LogDestination::File(path) => {
            let file_error = |source| LogInitError::File { path: path.display().to_string(), source };
            pi_observe_core::create_private_parent(path).map_err(file_error)?;
            let file =
                pi_observe_core::private_file_options().create(true).append(true).open(path).map_err(file_error)?;
            (non_blocking(file, config.buffered_bytes), path.display().to_string())
        }
    };
    let writer = writer.map_err(|source| LogInitError::File { path, source })?;
    tracing::subscriber::set_global_default(json_subscriber(writer.clone(), filter))
        .map_err(|_| LogInitError::AlreadyInstalled)?;
    DIRECT.store(by_target_and_level, std::sync::atomic::Ordering::Relaxed);
    Ok(LogGuard { writer })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_json_lines_parse_back_to_the_fields_written() {
        let buffer = crate::testing::MemoryWriter::default();
        let subscriber = json_subscriber(buffer.clone(), EnvFilter::new("trace"));
        let tricky = "quote \" backslash \\ newline \n tab \t bell \u{7} nul \u{0} é 漢";
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(target: "pi_observe", text = tricky, n = -3i64, big = u64::MAX, ratio = 2.0f64, nan = f64::NAN, ok = true);
        });
        let out = buffer.text();
        assert_eq!(out.lines().count(), 1, "{out}");
        let line: serde_json::Value = serde_json::from_str(out.trim_end()).unwrap();
        assert_eq!(line["text"], tricky);
        assert_eq!((line["n"].as_i64(), line["big"].as_u64()), (Some(-3), Some(u64::MAX)));
        assert_eq!(line["ratio"].as_f64(), Some(2.0));
        assert!(line["nan"].is_null() && line["ok"] == true);
        assert_eq!((line["level"].as_str(), line["target"].as_str()), (Some("INFO"), Some("pi_observe")));
        assert!(line["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')));
        // No raw control character reaches the line.
        assert!(!out.trim_end().chars().any(char::is_control), "{out:?}");
    }

    #[test]
    fn line_timestamps_are_rfc3339_utc_microseconds_of_now() {
        use tracing_subscriber::fmt::time::FormatTime;
        let mut ours = String::new();
        let mut peer = String::new();
        let before = time::OffsetDateTime::now_utc();
        push_now(&mut ours);
        tracing_subscriber::fmt::time::SystemTime.format_time(&mut Writer::new(&mut peer)).unwrap();
        // The same shape as tracing-subscriber's timer: `2026-12-03T17:26:15.281191Z`.
        let shape = |t: &str| {
            t.len() == 27
                && t.char_indices().all(|(i, c)| match i {
                    4 | 7 => c == '-',
                    10 => c == 'T',
                    13 | 16 => c == ':',
                    19 => c == '.',
                    26 => c == 'Z',
                    _ => c.is_ascii_digit(),
                })
        };
        assert!(shape(&ours) && shape(&peer), "{ours} / {peer}");
        let parsed = time::OffsetDateTime::parse(&ours, &time::format_description::well_known::Rfc3339).unwrap();
        assert!((parsed - before).abs() < time::Duration::seconds(2), "{ours} vs {before}");
        // The cached date part is reused and the microseconds move on.
        let mut again = String::new();
        push_now(&mut again);
        assert!(again >= ours, "{again} < {ours}");
    }
}
