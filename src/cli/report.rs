//! `pi report`: cost per user/org/model/day from session files.

use std::collections::{BTreeMap, BTreeSet};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use pi_agent::session::{AttributedUsage, SessionError, scan_usage_counting};
use pi_observe_core::names::{CTX_ORG_ID, CTX_USER_ID};

use clap::{Args, ValueEnum};

use super::report_data::{Groups, Sums, Unpriced, unpriced_note};
use super::sessions::session_files_of;
use super::{CliError, output};

/// `pi report [PATH…]`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Session files or directories (searched for `*.jsonl`); default `~/.pi/agent/sessions`.
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: ReportFormat,
    /// Group by these dimensions (comma-separated: day, week (ISO, `2026-W49`), month, user,
    /// org, provider, model, or any attribution key recorded with `--context`, such as
    /// `teamId`; default day, user, org, model).
    #[arg(long, value_name = "DIMS")]
    pub by: Vec<String>,
    /// Report (exit 0) even when some entries carry usage pi could not read; without it such a
    /// report exits 1, since its totals are short.
    #[arg(long)]
    pub allow_partial: bool,
    /// Exit 1 when some usage has no known price (its cost shows `n/a`; the footnote names the
    /// models). Without it such a report still exits 0.
    #[arg(long)]
    pub strict_prices: bool,
    /// Only usage on or after this day: `YYYY-MM-DD`, or `Nd` (N days before today, UTC).
    #[arg(long, value_name = "DATE|Nd")]
    pub since: Option<String>,
    /// Only usage on or before this day: `YYYY-MM-DD`, or `Nd`.
    #[arg(long, value_name = "DATE|Nd")]
    pub until: Option<String>,
}

/// `--since` / `--until` as a `YYYY-MM-DD` day.
fn day_of(flag: &str, value: &str) -> Result<String, CliError> {
    let value = value.trim();
    if let Some(days) = value.strip_suffix('d').and_then(|n| n.parse::<u32>().ok()) {
        return Ok(pi_agent::time::days_ago(days));
    }
    if pi_agent::time::is_date(value) {
        return Ok(value.to_owned());
    }
    Err(CliError::Usage(format!("{flag}: {value:?} is not a date (YYYY-MM-DD) or a number of days (7d)")))
}

/// Which usage a report covers and how it groups it.
struct Query {
    dims: Vec<Dim>,
    /// Inclusive `YYYY-MM-DD` bounds.
    since: Option<String>,
    until: Option<String>,
}

impl Query {
    fn covers(&self, day: &str) -> bool {
        self.since.as_deref().is_none_or(|since| day >= since) && self.until.as_deref().is_none_or(|until| day <= until)
    }
}

/// How `pi report` prints.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ReportFormat {
    /// Aligned columns with a total row.
    Table,
    /// Comma-separated values with a header.
    Csv,
    /// One JSON array of rows.
    Json,
    /// One self-contained HTML page (no network at view time): cost over time per org, by
    /// user and model, the top sessions, and the unpriced-model footnote.
    Html,
}

/// A grouping dimension of the report.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Dim {
    Day,
    Week,
    Month,
    User,
    Org,
    Provider,
    Model,
    /// Any other key of the recorded attribution (`teamId`, `project`).
    Key(String),
}

/// The dimensions `--by` names in words (attribution keys come on top).
const DIMS: &str = "day, week, month, user, org, provider, model, or an attribution key such as teamId";

impl Dim {
    fn parse(name: &str) -> Option<Dim> {
        let name = name.trim();
        Some(match name {
            "day" => Dim::Day,
            "week" => Dim::Week,
            "month" => Dim::Month,
            "user" | CTX_USER_ID => Dim::User,
            "org" | CTX_ORG_ID => Dim::Org,
            "provider" => Dim::Provider,
            "model" => Dim::Model,
            key if key.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c)) => Dim::Key(key.to_owned()),
            _ => return None,
        })
    }

    fn name(&self) -> &str {
        match self {
            Dim::Day => "day",
            Dim::Week => "week",
            Dim::Month => "month",
            Dim::User => "user",
            Dim::Org => "org",
            Dim::Provider => "provider",
            Dim::Model => "model",
            Dim::Key(key) => key,
        }
    }

    /// This dimension's value for one usage entry (`-` for an attribution key it lacks).
    fn value_of(&self, row: &AttributedUsage) -> String {
        match self {
            Dim::Day => row.day.clone(),
            Dim::Week => pi_agent::time::iso_week(&row.day).unwrap_or_else(|| row.day.clone()),
            Dim::Month => row.day.get(..7).unwrap_or(&row.day).to_owned(),
            Dim::User => row.user().unwrap_or("-").to_owned(),
            Dim::Org => row.org().unwrap_or("-").to_owned(),
            Dim::Provider => row.model.split_once('/').map_or(row.model.as_str(), |(p, _)| p).to_owned(),
            Dim::Model => row.model.clone(),
            Dim::Key(key) => row.attributed(key).unwrap_or("-").to_owned(),
        }
    }
}

/// Reads every session, prints the report, and exits non-zero if a session file could not be
/// read (the others are still reported; each failure is one line on stderr naming the file and
/// line). Other JSON-lines files met while scanning a directory (event logs) are skipped.
pub fn run(args: &ReportArgs) -> Result<ExitCode, CliError> {
    let since = args.since.as_deref().map(|v| day_of("--since", v)).transpose()?;
    let until = args.until.as_deref().map(|v| day_of("--until", v)).transpose()?;
    if let (Some(since), Some(until)) = (&since, &until)
        && since > until
    {
        return Err(CliError::Usage(format!("--since {since} is after --until {until}")));
    }
    // The HTML page draws its own views: it groups by everything it shows.
    let dims = match args.format {
        ReportFormat::Html => vec![Dim::Day, Dim::Org, Dim::User, Dim::Model],
        _ => dims_of(&args.by)?,
    };
    let files = session_files_of(&args.paths)?;
    let query = Query { dims, since, until };
    let outcomes = scan_in_parallel(&files, &query);
    let dims = query.dims;
    // In file order, so the output (and its float sums) never depends on thread timing.
    let (mut groups, mut failed, mut partial) = (Groups::new(), 0, 0);
    let (mut unpriced, mut sessions, mut keys) = (Unpriced::new(), Vec::new(), BTreeSet::new());
    for ((file, _), outcome) in files.iter().zip(outcomes) {
        match outcome {
            Scanned::Rows(rows) => {
                for (model, tokens) in rows.unpriced {
                    *unpriced.entry(model).or_default() += tokens;
                }
                partial += file_notes(file, &rows.summary);
                keys.extend(rows.keys);
                let mut session = Sums::default();
                for (key, sums) in rows.groups {
                    session.usage.add(&sums.usage);
                    session.turns += sums.turns;
                    let total = groups.entry(key).or_default();
                    total.usage.add(&sums.usage);
                    total.turns += sums.turns;
                }
                sessions.push((file.display().to_string(), session));
            }
            Scanned::Skipped => {}
            Scanned::Failed(why) => {
                output::error(format_args!("pi: report: {why}"));
                failed += 1;
            }
        }
    }
    if !groups.is_empty() {
        unrecorded_keys(&dims, &keys)?;
    }
    match args.format {
        ReportFormat::Table => print_table(&dims, &groups),
        ReportFormat::Csv => print_csv(&dims, &groups),
        ReportFormat::Json => print_json(&dims, &groups),
        ReportFormat::Html => {
            let range = (query.since.as_deref(), query.until.as_deref());
            output::text(super::report_html::page(&groups, &sessions, &unpriced, range));
        }
    }
    if !unpriced.is_empty() {
        // Under the table; beside machine-readable output, on stderr.
        let note = unpriced_note(&unpriced);
        match args.format {
            ReportFormat::Table => output::line(format_args!("\n{note}")),
            _ => output::error(format_args!("pi: report: {note}")),
        }
        if args.strict_prices {
            output::error(format_args!("pi: report: --strict-prices: some usage has no known price"));
            failed += 1;
        }
    }
    if partial > 0 && !args.allow_partial {
        output::error(format_args!(
            "pi: report: the totals leave out {partial} billed entries; --allow-partial accepts a partial report"
        ));
        failed += 1;
    }
    Ok(if failed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// A `--by` attribution key that no usage in the report carries is most likely a typo: refused,
/// naming the keys the sessions do record.
fn unrecorded_keys(dims: &[Dim], recorded: &BTreeSet<String>) -> Result<(), CliError> {
    for dim in dims {
        if let Dim::Key(key) = dim
            && !recorded.contains(key)
        {
            let recorded: Vec<&str> = recorded.iter().map(String::as_str).collect();
            let recorded = if recorded.is_empty() { "none".to_owned() } else { recorded.join(", ") };
            return Err(CliError::Usage(format!(
                "--by: no usage in these sessions is attributed with {key:?} (attribution keys recorded: {recorded})"
            )));
        }
    }
    Ok(())
}

/// Says on stderr what a file's scan skipped; returns the billed entries left out.
fn file_notes(file: &Path, summary: &pi_agent::session::ScanSummary) -> usize {
    if let Some(torn) = summary.torn_tail {
        output::error(format_args!("pi: report: {}:{}: torn last line skipped", file.display(), torn.line));
    }
    if summary.unreadable_usage > 0 {
        output::error(format_args!(
            "pi: report: {}: {} entries with usage in a shape pi cannot read were skipped (their tokens and cost are missing)",
            file.display(),
            summary.unreadable_usage
        ));
    }
    summary.unreadable_usage
}

/// `--by`, checked (default day, user, org, model).
fn dims_of(by: &[String]) -> Result<Vec<Dim>, CliError> {
    let mut dims = Vec::new();
    for name in by.iter().flat_map(|b| b.split(',')) {
        if name.trim().is_empty() {
            return Err(CliError::Usage(format!("--by: {:?} has an empty dimension ({DIMS})", by.join(","))));
        }
        let dim =
            Dim::parse(name).ok_or_else(|| CliError::Usage(format!("--by: {name:?} is not a dimension ({DIMS})")))?;
        if !dims.contains(&dim) {
            dims.push(dim);
        }
    }
    if dims.is_empty() {
        dims = vec![Dim::Day, Dim::User, Dim::Org, Dim::Model];
    }
    Ok(dims)
}

/// What one readable session file adds to the report.
struct FileRows {
    groups: Groups,
    summary: pi_agent::session::ScanSummary,
    unpriced: Unpriced,
    /// The attribution keys its usage carries (gathered only when `--by` names one).
    keys: BTreeSet<String>,
}

/// One session file's part of the report.
enum Scanned {
    Rows(FileRows),
    /// A JSON-lines file met while scanning a directory that is not a session (an event log).
    Skipped,
    Failed(String),
}

/// Streams every file (each in bounded memory) on all cores; one outcome per file, in order.
/// On a terminal, a run that takes longer than a second shows its progress on stderr.
fn scan_in_parallel(files: &[(PathBuf, bool)], query: &Query) -> Vec<Scanned> {
    let next = AtomicUsize::new(0);
    let progress = Progress::default();
    let slots: Vec<Mutex<Option<Scanned>>> = files.iter().map(|_| Mutex::new(None)).collect();
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let workers = cores.min(files.len()).max(1);
    // Fewer files than cores: each file's lines are parsed on the spare cores too.
    let threads_per_file = cores / workers;
    let (running, finished) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            let running = running.clone();
            scope.spawn(|| {
                let _running = running;
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some((file, scanned)) = files.get(index) else { break };
                    let outcome = scan_file(file, *scanned, query, &progress.bytes, threads_per_file);
                    *slots[index].lock().unwrap_or_else(|e| e.into_inner()) = Some(outcome);
                    progress.files.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        drop(running);
        if std::io::stderr().is_terminal() {
            progress.show_until_done(files, &finished);
        }
    });
    slots
        .into_iter()
        .map(|slot| slot.into_inner().unwrap_or_else(|e| e.into_inner()).unwrap_or(Scanned::Skipped))
        .collect()
}

/// How far the workers are: bytes read and files finished.
#[derive(Default)]
struct Progress {
    bytes: AtomicU64,
    files: AtomicUsize,
}

impl Progress {
    /// After the first second, redraws one stderr line five times a second until every worker
    /// has hung up on `finished`; then clears it.
    fn show_until_done(&self, files: &[(PathBuf, bool)], finished: &std::sync::mpsc::Receiver<()>) {
        let total: u64 = files.iter().filter_map(|(file, _)| file.metadata().ok()).map(|m| m.len()).sum();
        let started = std::time::Instant::now();
        let mut shown = false;
        while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
            finished.recv_timeout(std::time::Duration::from_millis(200))
        {
            if started.elapsed() >= std::time::Duration::from_secs(1) {
                let (bytes, done) = (self.bytes.load(Ordering::Relaxed), self.files.load(Ordering::Relaxed));
                output::progress(&progress_line(bytes, total, done, files.len()));
                shown = true;
            }
        }
        if shown {
            output::progress("");
        }
    }
}

/// `pi report: 412.0 of 1024.0 MB (40%), 3 of 8 files`.
fn progress_line(bytes: u64, total: u64, done: usize, files: usize) -> String {
    const MB: f64 = 1024.0 * 1024.0;
    let percent = (bytes.min(total) * 100).checked_div(total).unwrap_or(100);
    format!("pi report: {:.1} of {:.1} MB ({percent}%), {done} of {files} files", bytes as f64 / MB, total as f64 / MB)
}

fn scan_file(file: &Path, scanned: bool, query: &Query, read: &AtomicU64, threads: usize) -> Scanned {
    let (mut groups, mut unpriced, mut keys) = (Groups::new(), Unpriced::new(), BTreeSet::new());
    let by_key = query.dims.iter().any(|d| matches!(d, Dim::Key(_)));
    let result = scan_usage_counting(file, read, threads, |row| {
        if !query.covers(&row.day) {
            return;
        }
        if by_key {
            for key in row.attribution.keys() {
                if !keys.contains(key) {
                    keys.insert(key.clone());
                }
            }
        }
        let key = query.dims.iter().map(|dim| dim.value_of(&row)).collect();
        if row.usage.cost.unknown {
            *unpriced.entry(row.model.clone()).or_default() += row.usage.total_tokens;
        }
        let sums = groups.entry(key).or_default();
        sums.usage.add(&row.usage);
        sums.turns += u64::from(row.assistant_message);
    });
    match result {
        Ok(summary) => Scanned::Rows(FileRows { groups, summary, unpriced, keys }),
        Err(SessionError::NoHeader { .. }) if scanned => Scanned::Skipped,
        Err(e) => Scanned::Failed(e.to_string()),
    }
}

const NUMBERS: [&str; 7] = ["turns", "input", "output", "cache_read", "cache_write", "total_tokens", "cost_usd"];

fn numbers(sums: &Sums) -> [String; 7] {
    let u = &sums.usage;
    [
        sums.turns.to_string(),
        u.input.to_string(),
        u.output.to_string(),
        u.cache_read.to_string(),
        u.cache_write.to_string(),
        u.total_tokens.to_string(),
        // Unknown when any of it has no price: a partial sum would read as the cost.
        if u.cost.unknown { "n/a".into() } else { format!("{:.6}", u.cost.total) },
    ]
}

fn print_table(dims: &[Dim], groups: &BTreeMap<Vec<String>, Sums>) {
    let header: Vec<String> = dims.iter().map(|d| d.name().to_owned()).chain(NUMBERS.map(str::to_owned)).collect();
    let mut total = Sums::default();
    let mut rows: Vec<Vec<String>> = vec![header];
    for (key, sums) in groups {
        total.usage.add(&sums.usage);
        total.turns += sums.turns;
        rows.push(key.iter().cloned().chain(numbers(sums)).collect());
    }
    let mut last: Vec<String> = dims.iter().map(|_| String::new()).collect();
    if let Some(first) = last.first_mut() {
        *first = "total".into();
    }
    rows.push(last.into_iter().chain(numbers(&total)).collect());
    let rows: Vec<Vec<String>> = rows.iter().map(|row| row.iter().map(|cell| table_cell(cell)).collect()).collect();
    // Dimensions left-aligned, numbers right-aligned.
    output::table(&rows, dims.len());
}

/// Widest table cell, in characters; longer ids are cut with `…` (CSV and JSON keep them whole).
const MAX_CELL_CHARS: usize = 48;

/// A value as one table cell: control characters escaped (`\n`), at most [`MAX_CELL_CHARS`].
fn table_cell(value: &str) -> String {
    let escaped: String =
        value.chars().map(|c| if c.is_control() { c.escape_default().collect() } else { c.to_string() }).collect();
    if escaped.chars().count() <= MAX_CELL_CHARS {
        return escaped;
    }
    let mut cut: String = escaped.chars().take(MAX_CELL_CHARS - 1).collect();
    cut.push('…');
    cut
}

fn print_csv(dims: &[Dim], groups: &BTreeMap<Vec<String>, Sums>) {
    let mut writer = csv::Writer::from_writer(Vec::new());
    let header: Vec<&str> = dims.iter().map(|d| d.name()).chain(NUMBERS).collect();
    // Writing to memory fails only on a bug; then the rows written so far are printed.
    let _ = writer.write_record(&header);
    for (key, sums) in groups {
        let _ = writer.write_record(key.iter().cloned().chain(numbers(sums)));
    }
    let bytes = writer.into_inner().unwrap_or_else(|e| e.into_inner().get_ref().clone());
    output::text(String::from_utf8_lossy(&bytes));
}

fn print_json(dims: &[Dim], groups: &BTreeMap<Vec<String>, Sums>) {
    let rows: Vec<serde_json::Value> = groups
        .iter()
        .map(|(key, sums)| {
            let mut row = serde_json::Map::new();
            for (dim, value) in dims.iter().zip(key) {
                let value = if value == "-" { serde_json::Value::Null } else { value.clone().into() };
                row.insert(dim.name().into(), value);
            }
            let u = &sums.usage;
            row.insert("turns".into(), sums.turns.into());
            row.insert("input".into(), u.input.into());
            row.insert("output".into(), u.output.into());
            row.insert("cacheRead".into(), u.cache_read.into());
            row.insert("cacheWrite".into(), u.cache_write.into());
            row.insert("totalTokens".into(), u.total_tokens.into());
            let cost = if u.cost.unknown { serde_json::Value::Null } else { u.cost.total.into() };
            row.insert("costUsd".into(), cost);
            serde_json::Value::Object(row)
        })
        .collect();
    output::line(serde_json::Value::Array(rows));
}

#[cfg(test)]
mod tests {
    use super::progress_line;

    #[test]
    fn progress_line_says_bytes_percent_and_files() {
        const MB: u64 = 1024 * 1024;
        assert_eq!(progress_line(412 * MB, 1024 * MB, 3, 8), "pi report: 412.0 of 1024.0 MB (40%), 3 of 8 files");
        // A file that grew while read never shows more than 100 %; an empty set shows done.
        assert_eq!(progress_line(2 * MB, MB, 1, 1), "pi report: 2.0 of 1.0 MB (100%), 1 of 1 files");
        assert_eq!(progress_line(0, 0, 0, 0), "pi report: 0.0 of 0.0 MB (100%), 0 of 0 files");
    }
}
