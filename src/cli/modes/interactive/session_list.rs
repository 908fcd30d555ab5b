//! The sessions the session picker lists: each file's summary (name, first message, message
//! count, age, folder, the session it was forked from) read from disk, and the list as upstream
//! orders it — threaded (forks under the session they came from), by recency, or by how well
//! they match the search — narrowed by the search (`re:PATTERN` a regular expression, `"a
//! phrase"` exactly, else each word's letters in order) and the named-only filter.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// One session file.
#[derive(Debug, Clone)]
pub struct Summary {
    pub path: PathBuf,
    /// The latest `session_info` name.
    pub name: Option<String>,
    /// The first user message's first line.
    pub first: String,
    pub messages: usize,
    pub modified: SystemTime,
    /// The folder the session ran in (its header's `cwd`).
    pub cwd: String,
    /// The session file it was forked from (its header's `parentSession`).
    pub parent: Option<String>,
}

/// How the list is ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    Threaded,
    Recent,
    Relevance,
}

impl Sort {
    /// Upstream's cycle: threaded → recent → relevance.
    pub fn next(self) -> Sort {
        match self {
            Sort::Threaded => Sort::Recent,
            Sort::Recent => Sort::Relevance,
            Sort::Relevance => Sort::Threaded,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Sort::Threaded => "Threaded",
            Sort::Recent => "Recent",
            Sort::Relevance => "Fuzzy",
        }
    }
}

/// A listed session: its index in the summaries and how deep it sits in the thread.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    pub index: usize,
    pub depth: usize,
}

/// The summaries of the session files directly in `dirs` that hold a message (unreadable files
/// and sessions never used — a fresh run's file — left out).
pub fn load(dirs: &[PathBuf]) -> Vec<Summary> {
    let files = dirs.iter().flat_map(|dir| std::fs::read_dir(dir).into_iter().flatten().flatten());
    let paths = files.map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "jsonl"));
    paths.filter_map(|path| summary(&path)).filter(|s| s.messages > 0).collect()
}

/// The folders of every project's sessions under `root`.
pub fn project_dirs(root: &Path) -> Vec<PathBuf> {
    let entries = std::fs::read_dir(root).into_iter().flatten().flatten();
    entries.map(|e| e.path()).filter(|p| p.is_dir()).collect()
}

/// One file's summary, read line by line (only message and `session_info` lines parsed).
pub fn summary(path: &Path) -> Option<Summary> {
    let modified = std::fs::metadata(path).ok()?.modified().ok()?;
    let mut lines = std::io::BufReader::new(std::fs::File::open(path).ok()?).lines();
    let header: serde_json::Value = serde_json::from_str(&lines.next()?.ok()?).ok()?;
    if header["type"] != "session" {
        return None;
    }
    let mut out = Summary {
        path: path.to_owned(),
        name: None,
        first: String::new(),
        messages: 0,
        modified,
        cwd: header["cwd"].as_str().unwrap_or_default().to_owned(),
        parent: header["parentSession"].as_str().map(str::to_owned),
    };
    for line in lines.map_while(Result::ok) {
        let is_message = line.contains(r#""type":"message""#);
        if !is_message && !line.contains(r#""type":"session_info""#) {
            continue;
        }
        let Ok(entry) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
        match entry["type"].as_str() {
            Some("message") => {
                out.messages += 1;
                if out.first.is_empty() && entry["message"]["role"] == "user" {
                    out.first = first_line(&entry["message"]["content"]);
                }
            }
            Some("session_info") => out.name = entry["name"].as_str().map(str::to_owned).filter(|n| !n.is_empty()),
            _ => {}
        }
    }
    Some(out)
}

/// The first non-empty line of a message's content (a string or text blocks).
fn first_line(content: &serde_json::Value) -> String {
    let text = match content {
        serde_json::Value::String(text) => text.clone(),
        blocks => {
            blocks.as_array().into_iter().flatten().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n")
        }
    };
    text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or_default().chars().take(200).collect()
}

/// A search as typed: `re:PATTERN` (compiled once per list, not per session), `"a phrase"`,
/// or words whose letters come in order.
enum Search {
    All,
    Pattern(Option<regex::Regex>),
    Phrase(String),
    Words(String),
}

impl Search {
    fn parse(query: &str) -> Search {
        let query = query.trim();
        if query.is_empty() {
            Search::All
        } else if let Some(pattern) = query.strip_prefix("re:") {
            // A pattern that does not compile matches nothing.
            Search::Pattern(regex::RegexBuilder::new(pattern).case_insensitive(true).build().ok())
        } else if let Some(phrase) = query.strip_prefix('"') {
            Search::Phrase(phrase.strip_suffix('"').unwrap_or(phrase).to_lowercase())
        } else {
            Search::Words(query.to_owned())
        }
    }

    /// Where it matches `text`: a rank (lower is better) or `None`.
    fn rank(&self, text: &str) -> Option<usize> {
        match self {
            Search::All => Some(0),
            Search::Pattern(re) => re.as_ref()?.find(text).map(|m| m.start()),
            Search::Phrase(phrase) => text.to_lowercase().find(phrase.as_str()),
            Search::Words(words) => match text.to_lowercase().find(&words.to_lowercase()) {
                Some(at) => Some(at),
                // Scattered letters rank after every whole match.
                None => crate::cli::models_cmd::matches(words, text).then_some(10_000),
            },
        }
    }
}

/// The rows to show: named-only when asked, narrowed by `query`, in `sort`'s order (threaded
/// only without a query, as upstream).
pub fn rows(sessions: &[Summary], query: &str, sort: Sort, named_only: bool) -> Vec<Row> {
    let text = |s: &Summary| format!("{} {} {}", s.name.as_deref().unwrap_or(""), s.first, s.cwd);
    let search = Search::parse(query);
    let mut kept: Vec<(usize, usize)> = sessions
        .iter()
        .enumerate()
        .filter(|(_, s)| !named_only || s.name.is_some())
        .filter_map(|(i, s)| search.rank(&text(s)).map(|r| (i, r)))
        .collect();
    kept.sort_by_key(|&(i, r)| {
        let relevance = if sort == Sort::Relevance { r } else { 0 };
        (relevance, std::cmp::Reverse(sessions[i].modified))
    });
    if sort != Sort::Threaded || !query.trim().is_empty() {
        return kept.into_iter().map(|(index, _)| Row { index, depth: 0 }).collect();
    }
    // Threaded: each session under the one it was forked from (when that one is listed too).
    let listed: Vec<usize> = kept.iter().map(|&(i, _)| i).collect();
    let parent_of = |i: usize| {
        let parent = sessions[i].parent.as_deref()?;
        listed.iter().copied().find(|&p| p != i && sessions[p].path == Path::new(parent))
    };
    let mut out = Vec::with_capacity(listed.len());
    let mut stack: Vec<(usize, usize)> =
        listed.iter().rev().filter(|&&i| parent_of(i).is_none()).map(|&i| (i, 0)).collect();
    while let Some((i, depth)) = stack.pop() {
        if out.iter().any(|r: &Row| r.index == i) {
            continue;
        }
        out.push(Row { index: i, depth });
        stack.extend(listed.iter().rev().filter(|&&c| parent_of(c) == Some(i)).map(|&c| (c, depth + 1)));
    }
    out
}

/// Upstream's age of a session: `now`, `5m`, `3h`, `2d`, `1w`, `4mo`, `1y`.
pub fn age(modified: SystemTime, now: SystemTime) -> String {
    let mins = now.duration_since(modified).unwrap_or_default().as_secs() / 60;
    let (hours, days) = (mins / 60, mins / 1440);
    match () {
        _ if mins < 1 => "now".into(),
        _ if mins < 60 => format!("{mins}m"),
        _ if hours < 24 => format!("{hours}h"),
        _ if days < 7 => format!("{days}d"),
        _ if days < 30 => format!("{}w", days / 7),
        _ if days < 365 => format!("{}mo", days / 30),
        _ => format!("{}y", days / 365),
    }
}

/// Deletes a session file: the `trash` command first where there is one (it can be got back),
/// else removed. Says which.
pub fn delete(path: &Path) -> Result<&'static str, String> {
    let trashed = std::process::Command::new("trash")
        .arg(path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if trashed && !path.exists() {
        return Ok("Session moved to trash");
    }
    std::fs::remove_file(path).map(|()| "Session deleted").map_err(|e| format!("Failed to delete: {e}"))
}

/// Names a session that is not the one running: a `session_info` entry appended to its file.
pub fn rename(path: &Path, name: &str) -> Result<(), String> {
    let cwd = summary(path).map(|s| PathBuf::from(s.cwd)).unwrap_or_default();
    let mut session = pi_agent::session::SessionWriter::open_or_create(path, &cwd).map_err(|e| e.to_string())?;
    session.append(pi_agent::session::EntryKind::SessionInfo { name: name.to_owned() }).map_err(|e| e.to_string())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn session(name: Option<&str>, first: &str, age_secs: u64, path: &str, parent: Option<&str>) -> Summary {
        Summary {
            path: path.into(),
            name: name.map(str::to_owned),
            first: first.into(),
            messages: 2,
            modified: SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 - age_secs),
            cwd: "/work".into(),
            parent: parent.map(str::to_owned),
        }
    }

    #[test]
    fn threads_recency_search_and_the_named_filter_order_the_list() {
        let sessions = vec![
            session(None, "fix the parser", 300, "/s/a.jsonl", None),
            session(Some("release"), "cut 1.0", 100, "/s/b.jsonl", None),
            session(None, "parser fork", 50, "/s/c.jsonl", Some("/s/a.jsonl")),
            session(None, "parser tests", 400, "/s/d.jsonl", None),
        ];
        let order = |rows: Vec<Row>| rows.iter().map(|r| (r.index, r.depth)).collect::<Vec<_>>();
        // Threaded: the fork under its parent, though it is the newest.
        assert_eq!(order(rows(&sessions, "", Sort::Threaded, false)), [(1, 0), (0, 0), (2, 1), (3, 0)]);
        assert_eq!(order(rows(&sessions, "", Sort::Recent, false)), [(2, 0), (1, 0), (0, 0), (3, 0)]);
        assert_eq!(order(rows(&sessions, "", Sort::Recent, true)), [(1, 0)]);
        // A search lists flat; relevance puts the earlier match first (then the newer).
        assert_eq!(order(rows(&sessions, "parser", Sort::Threaded, false)), [(2, 0), (0, 0), (3, 0)]);
        assert_eq!(order(rows(&sessions, "parser", Sort::Relevance, false)), [(2, 0), (3, 0), (0, 0)]);
        assert_eq!(order(rows(&sessions, "re:cut \\d", Sort::Recent, false)), [(1, 0)]);
        assert_eq!(order(rows(&sessions, "\"the parser\"", Sort::Recent, false)), [(0, 0)]);
        assert!(rows(&sessions, "re:(", Sort::Recent, false).is_empty(), "a bad pattern matches nothing");
    }

    #[test]
    fn ages_read_as_upstreams() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(100_000_000);
        let ago = |secs: u64| age(now - Duration::from_secs(secs), now);
        assert_eq!([ago(10), ago(300), ago(7_200), ago(200_000), ago(1_300_000)], ["now", "5m", "2h", "2d", "2w"]);
        assert_eq!([ago(6_000_000), ago(70_000_000)], ["2mo", "2y"]);
    }
}
