//! What the command prints: streamed text, or JSON lines for `--mode json`.

use std::io::Write;

use pi_agent::events::{AgentEvent, Delta};
use pi_observe::core::ObsEvent;

/// Prints one JSON line for a contract event, wrapped so it cannot be confused with agent events.
pub fn contract_event_line(event: &ObsEvent) {
    json_line(format!("{{\"type\":\"observability\",\"event\":{}}}", event.to_json()));
}

/// Prints an agent event as one JSON line.
pub fn agent_event_line(event: &AgentEvent) {
    if let Ok(line) = serde_json::to_string(event) {
        json_line(line);
    }
}

/// Writes `line` and its newline as one append (stdout may be a file: a second signal exits
/// between appends, never inside one).
fn json_line(mut line: String) {
    line.push('\n');
    let _ = pi_observe::core::append_whole(|| {
        let mut out = std::io::stdout().lock();
        out.write_all(line.as_bytes()).and_then(|()| out.flush())
    });
}

/// Prints streamed assistant text as it arrives, and extension failures on stderr.
pub fn text_delta(event: &AgentEvent) {
    extension_failure(event);
    if let AgentEvent::MessageUpdate { delta: Delta::Text { text } } = event {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }
}

/// An extension failure, on stderr once per extension and event (a broken extension fails
/// every call the same way), whatever the output mode.
pub fn extension_failure(event: &AgentEvent) {
    if let AgentEvent::ExtensionError { extension, hook, error } = event {
        static SAID: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());
        let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
        if !said.iter().any(|(e, h)| e == extension && h == hook) {
            said.push((extension.clone(), hook.clone()));
            self::error(format_args!("pi: extension {extension} failed in {hook}: {error}"));
        }
    }
}

/// Prints a line on stdout; a closed stdout (`pi demo | head -1`) is not an error worth a panic.
pub fn line(text: impl std::fmt::Display) {
    let _ = writeln!(std::io::stdout().lock(), "{text}");
}

/// Prints text on stdout without a newline (see [`line`]).
pub fn text(text: impl std::fmt::Display) {
    let _ = write!(std::io::stdout().lock(), "{text}");
}

/// Where [`error`] lines go while the interactive mode owns the terminal.
static DIVERTED: std::sync::Mutex<Option<std::sync::mpsc::Sender<String>>> = std::sync::Mutex::new(None);

/// Sends what [`error`] would print to `to` instead (the interactive mode shows it in its
/// transcript; stderr is the terminal it draws on); `None` prints on stderr again.
pub fn divert_errors(to: Option<std::sync::mpsc::Sender<String>>) {
    *DIVERTED.lock().unwrap_or_else(|e| e.into_inner()) = to;
}

/// Prints a line on stderr (one write: stderr is unbuffered), ignoring a closed stderr.
pub fn error(text: impl std::fmt::Display) {
    let mut line = text.to_string();
    if let Some(to) = DIVERTED.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
        let _ = to.send(line);
        return;
    }
    line.push('\n');
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// Redraws the one progress line on stderr (a terminal): carriage return, the text, erase to the
/// end of the line. An empty `text` clears it.
pub fn progress(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "\r{text}\x1b[K");
    let _ = err.flush();
}

/// Prints `rows` (the first is the header) as aligned columns two spaces apart: the first `left`
/// columns left-aligned, the others (numbers) right-aligned, by display width (wide CJK
/// characters count two), trailing blanks trimmed.
pub fn table(rows: &[Vec<String>], left: usize) {
    use unicode_width::UnicodeWidthStr;
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> =
        (0..columns).map(|c| rows.iter().filter_map(|r| r.get(c)).map(|s| s.width()).max().unwrap_or(0)).collect();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, cell)| {
                let pad = " ".repeat(widths[c].saturating_sub(cell.width()));
                if c < left { format!("{cell}{pad}") } else { format!("{pad}{cell}") }
            })
            .collect();
        line(cells.join("  ").trim_end());
    }
}
