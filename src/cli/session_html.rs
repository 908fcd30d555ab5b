//! A session as one self-contained HTML page — upstream's `/export`, `pi --export` and RPC
//! `export_html`: the session tree, every entry in file order (the current branch, the others
//! dimmed), messages with markdown, thinking and tool calls with their output, the tokens and
//! cost of each billed entry, the totals `pi report` computes for the file, and each prompt's
//! trace id (a link with `PI_TRACE_URL_TEMPLATE`). No script, no request leaves the page.

use std::collections::{HashMap, HashSet};
use std::fmt::Write;
use std::path::{Path, PathBuf};

use pi_agent::message::{ContentBlock, Message, Usage, UserContent};
use pi_agent::session::{ATTRIBUTION_CUSTOM_TYPE, Entry, EntryKind, Session, TRACE_CUSTOM_TYPE};

use crate::cli::CliError;
use crate::cli::sinks::trace_link::{TraceLink, trace_url_template};

/// Writes the page of `session_file` to `out` (default: `pi-session-<file name>.html` in `cwd`,
/// as upstream) and returns where. `flag` names the request in errors (`--export`, `/export`).
pub fn export(flag: &str, session_file: &Path, out: Option<&Path>, cwd: &Path) -> Result<PathBuf, CliError> {
    let session = pi_agent::session::read_session(session_file).map_err(|e| CliError::Usage(format!("{flag}: {e}")))?;
    // The totals `pi report` shows for this file: the same scan, summed in file order.
    let mut totals = Totals::default();
    pi_agent::session::scan_usage(session_file, |row| {
        totals.usage.add(&row.usage);
        totals.turns += u64::from(row.assistant_message);
    })
    .map_err(|e| CliError::Usage(format!("{flag}: {e}")))?;
    let link = trace_url_template()?;
    let html = page(&session, &totals, link.as_ref());
    let path = match out {
        Some(path) => path.to_owned(),
        None => {
            let stem = session_file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            cwd.join(format!("pi-session-{stem}.html"))
        }
    };
    std::fs::write(&path, html).map_err(|e| CliError::Failure(format!("{flag}: {}: {e}", path.display())))?;
    Ok(path)
}

/// What `pi report` adds up for one file.
#[derive(Default)]
struct Totals {
    usage: Usage,
    turns: u64,
}

const STYLE: &str = "body{font:14px/1.5 system-ui,sans-serif;margin:0;display:flex;color:#1d1f21;background:#fafafa}\
nav{width:280px;flex:none;height:100vh;overflow:auto;position:sticky;top:0;border-right:1px solid #ddd;\
padding:8px;font-size:12px;background:#f0f0f0}nav ul{list-style:none;padding-left:10px;margin:0}\
nav a{color:#555;text-decoration:none;display:block;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}\
nav .on>a{color:#1d1f21}nav .leaf>a{font-weight:bold}main{flex:1;padding:16px 24px;max-width:960px}\
.entry{border-left:3px solid #ccc;padding:4px 12px;margin:10px 0;background:#fff}.off{opacity:.55}\
.user{border-color:#3a7bd5}.assistant{border-color:#2e9d5b}.tool{border-color:#c98a1b}.error{border-color:#c0392b}\
.meta{color:#777;font-size:12px}pre{white-space:pre-wrap;word-break:break-word;background:#f4f4f4;padding:6px;\
margin:4px 0;font-size:12px}.totals{font-size:13px;margin:8px 0 16px}.totals span{margin-right:14px}\
details>summary{cursor:pointer;color:#555}h1{font-size:18px}code{background:#f0f0f0}";

fn page(session: &Session, totals: &Totals, link: Option<&TraceLink>) -> String {
    let leaf = session.entries.last().map(|e| e.id.as_str());
    let on_branch = branch_ids(&session.entries, leaf);
    let header = &session.header;
    let mut out = String::from("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    let _ = write!(out, "<title>pi session {}</title><style>{STYLE}</style></head><body>", escape(&header.id));
    out.push_str("<nav><b>Session tree</b>");
    out.push_str(&tree(&session.entries, &on_branch, leaf));
    out.push_str("</nav><main>");
    let _ = write!(out, "<h1>pi session {}</h1><div class=\"meta\">", escape(&header.id));
    let _ = write!(out, "started {} · {}", escape(&header.timestamp), escape(&header.cwd));
    if let Some(parent) = &header.parent_session {
        let _ = write!(out, " · forked from {}", escape(parent));
    }
    out.push_str("</div>");
    let u = &totals.usage;
    let _ = write!(
        out,
        "<div class=\"totals\" id=\"totals\"><span>turns {}</span><span>input {}</span><span>output {}</span>\
         <span>cache read {}</span><span>cache write {}</span><span>total tokens {}</span><span>{}</span></div>",
        totals.turns,
        u.input,
        u.output,
        u.cache_read,
        u.cache_write,
        u.total_tokens,
        cost(u)
    );
    for entry in &session.entries {
        out.push_str(&entry_html(entry, on_branch.contains(entry.id.as_str()), link));
    }
    out.push_str("</main></body></html>\n");
    out
}

/// The ids on the path from the root to `leaf`.
fn branch_ids<'a>(entries: &'a [Entry], leaf: Option<&'a str>) -> HashSet<&'a str> {
    let parents: HashMap<&str, Option<&str>> =
        entries.iter().map(|e| (e.id.as_str(), e.parent_id.as_deref())).collect();
    let mut on = HashSet::new();
    let mut next = leaf;
    while let Some(id) = next {
        if !on.insert(id) {
            break; // a cycle in a hand-edited file
        }
        next = parents.get(id).copied().flatten();
    }
    on
}

/// The entries as a tree: a chain stays at one level, a fork opens one nested list per branch.
fn tree(entries: &[Entry], on_branch: &HashSet<&str>, leaf: Option<&str>) -> String {
    let ids: HashSet<&str> = entries.iter().map(|e| e.id.as_str()).collect();
    let mut children: HashMap<&str, Vec<&Entry>> = HashMap::new();
    let mut roots = Vec::new();
    for entry in entries {
        match entry.parent_id.as_deref().filter(|p| ids.contains(p)) {
            Some(parent) => children.entry(parent).or_default().push(entry),
            None => roots.push(entry),
        }
    }
    let mut out = String::new();
    let mut seen = HashSet::new();
    // (entries of one list level, still to draw); a stack instead of recursion: deep chains.
    let mut stack: Vec<Vec<&Entry>> = vec![roots.into_iter().rev().collect()];
    out.push_str("<ul>");
    while let Some(level) = stack.last_mut() {
        let Some(entry) = level.pop() else {
            stack.pop();
            out.push_str("</ul>");
            if !stack.is_empty() {
                out.push_str("</li>");
            }
            continue;
        };
        if !seen.insert(entry.id.as_str()) {
            continue;
        }
        let class = match (Some(entry.id.as_str()) == leaf, on_branch.contains(entry.id.as_str())) {
            (true, _) => "leaf on",
            (false, true) => "on",
            _ => "",
        };
        let _ =
            write!(out, "<li class=\"{class}\"><a href=\"#e-{0}\">{1}</a>", escape(&entry.id), escape(&label(entry)));
        match children.get(entry.id.as_str()).map(Vec::as_slice) {
            // A chain: the child follows at this level.
            Some([only]) => {
                out.push_str("</li>");
                level.push(only);
            }
            Some(many) => {
                out.push_str("<ul>");
                // Each branch is a list of its own, drawn in file order.
                let branches: Vec<&Entry> = many.iter().rev().copied().collect();
                stack.push(branches);
            }
            None => out.push_str("</li>"),
        }
    }
    out
}

/// A few words saying what an entry is, for the tree.
fn label(entry: &Entry) -> String {
    let short = |text: &str| {
        let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
        let mut cut: String = line.chars().take(48).collect();
        if cut.len() < line.len() {
            cut.push('…');
        }
        cut
    };
    match &entry.kind {
        EntryKind::Message { message } => match message {
            Message::User(m) => format!("user: {}", short(&user_text(&m.content))),
            Message::Assistant(m) => {
                let calls: Vec<String> = m.tool_calls().into_iter().map(|(_, name, _)| name).collect();
                match (m.text(), calls.is_empty()) {
                    (text, true) => format!("assistant: {}", short(&text)),
                    (_, false) => format!("assistant: {}", calls.join(", ")),
                }
            }
            Message::ToolResult(m) => format!("{} result", m.tool_name),
            Message::BashExecution(m) => format!("$ {}", short(&m.command)),
            Message::Custom(m) => format!("{}: {}", m.custom_type, short(&user_text(&m.content))),
            Message::BranchSummary(_) => "branch summary".into(),
            Message::CompactionSummary(_) => "compaction summary".into(),
        },
        EntryKind::ModelChange { provider, model_id } => format!("model {provider}/{model_id}"),
        EntryKind::ThinkingLevelChange { thinking_level } => format!("thinking {thinking_level}"),
        EntryKind::Compaction { .. } => "compaction".into(),
        EntryKind::BranchSummary { .. } => "branch summary".into(),
        EntryKind::Custom { custom_type, .. } if custom_type == TRACE_CUSTOM_TYPE => "trace".into(),
        EntryKind::Custom { custom_type, .. } if custom_type == ATTRIBUTION_CUSTOM_TYPE => "attribution".into(),
        EntryKind::Custom { custom_type, .. } | EntryKind::CustomMessage { custom_type, .. } => custom_type.clone(),
        EntryKind::Label { label, .. } => format!("label {}", label.as_deref().unwrap_or("(cleared)")),
        EntryKind::SessionInfo { name } => format!("name {}", short(name)),
        EntryKind::Unknown(_) => "(unknown entry)".into(),
    }
}

fn entry_html(entry: &Entry, on_branch: bool, link: Option<&TraceLink>) -> String {
    let (class, body) = match &entry.kind {
        EntryKind::Message { message } => message_html(message),
        EntryKind::ModelChange { provider, model_id } => {
            ("meta", format!("model {}", escape(&format!("{provider}/{model_id}"))))
        }
        EntryKind::ThinkingLevelChange { thinking_level } => {
            ("meta", format!("thinking level {}", escape(thinking_level)))
        }
        EntryKind::Compaction { summary, tokens_before, usage, .. } => (
            "meta",
            format!(
                "<b>compaction</b> ({tokens_before} context tokens before){}{}",
                markdown(summary),
                usage.as_ref().map(usage_line).unwrap_or_default()
            ),
        ),
        EntryKind::BranchSummary { summary, usage, .. } => (
            "meta",
            format!("<b>branch summary</b>{}{}", markdown(summary), usage.as_ref().map(usage_line).unwrap_or_default()),
        ),
        EntryKind::Custom { custom_type, data } if custom_type == TRACE_CUSTOM_TYPE => {
            let trace = data.get("traceId").and_then(|t| t.as_str()).unwrap_or_default();
            let shown = match (link, trace.parse::<pi_observe::core::TraceId>()) {
                (Some(link), Ok(id)) => format!("<a href=\"{}\">{}</a>", escape(&link.to(&id)), escape(trace)),
                _ => escape(trace),
            };
            ("meta", format!("trace <code class=\"trace\">{shown}</code>"))
        }
        EntryKind::Custom { custom_type, data } if custom_type == ATTRIBUTION_CUSTOM_TYPE => {
            let pairs: Vec<String> = data
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect();
            ("meta", format!("attributed to {}", escape(&pairs.join(" "))))
        }
        EntryKind::Custom { custom_type, .. } => ("meta", format!("extension state: {}", escape(custom_type))),
        EntryKind::CustomMessage { custom_type, content, .. } => {
            ("user", format!("<div class=\"meta\">{}</div>{}", escape(custom_type), markdown(&user_text(content))))
        }
        EntryKind::Label { target_id, label } => {
            ("meta", format!("label {} on {}", escape(label.as_deref().unwrap_or("(cleared)")), escape(target_id)))
        }
        EntryKind::SessionInfo { name } => ("meta", format!("session named {}", escape(name))),
        EntryKind::Unknown(value) => {
            let kind = value.get("type").and_then(|t| t.as_str()).unwrap_or("?");
            ("meta", format!("an entry of type {} this pi does not show", escape(kind)))
        }
    };
    let off = if on_branch { "" } else { " off" };
    let tag = if on_branch { "" } else { " · other branch" };
    format!(
        "<div class=\"entry {class}{off}\" id=\"e-{id}\"><div class=\"meta\">{id} · {time}{tag}</div>{body}</div>\n",
        id = escape(&entry.id),
        time = escape(&entry.timestamp),
    )
}

fn message_html(message: &Message) -> (&'static str, String) {
    match message {
        Message::User(m) => ("user", format!("<b>user</b>{}", markdown(&user_text(&m.content)))),
        Message::Assistant(m) => {
            let mut body = format!(
                "<b>assistant</b> <span class=\"meta\">{}</span>",
                escape(&format!("{}/{}", m.provider, m.model))
            );
            for block in &m.content {
                match block {
                    ContentBlock::Thinking { thinking, .. } => {
                        let _ = write!(body, "<details><summary>thinking</summary>{}</details>", markdown(thinking));
                    }
                    ContentBlock::Text { text } => body.push_str(&markdown(text)),
                    ContentBlock::ToolCall { name, arguments, .. } => {
                        let args = serde_json::to_string_pretty(arguments).unwrap_or_default();
                        let _ = write!(
                            body,
                            "<div class=\"meta\">calls {}</div><pre>{}</pre>",
                            escape(name),
                            escape(&args)
                        );
                    }
                    ContentBlock::Image { mime_type, .. } => {
                        let _ = write!(body, "<div class=\"meta\">[image {}]</div>", escape(mime_type));
                    }
                }
            }
            if let Some(error) = &m.error_message {
                let _ = write!(body, "<pre>{}</pre>", escape(error));
            }
            body.push_str(&usage_line(&m.usage));
            let class = if m.error_message.is_some() { "assistant error" } else { "assistant" };
            (class, body)
        }
        Message::ToolResult(m) => {
            let output = pi_agent::message::joined_text(&m.content);
            let state = if m.is_error { " (failed)" } else { "" };
            let body = format!(
                "<details{open}><summary>{} result{state} · {} lines</summary><pre>{}</pre></details>{}",
                escape(&m.tool_name),
                output.lines().count(),
                escape(&output),
                m.usage.as_ref().map(usage_line).unwrap_or_default(),
                open = if output.lines().count() <= 20 { " open" } else { "" },
            );
            (if m.is_error { "tool error" } else { "tool" }, body)
        }
        Message::BashExecution(m) => {
            let exit = m.exit_code.map(|c| format!(" · exit {c}")).unwrap_or_default();
            let body = format!(
                "<b>$ {}</b><span class=\"meta\">{exit}</span><pre>{}</pre>",
                escape(&m.command),
                escape(&m.output)
            );
            ("tool", body)
        }
        Message::Custom(m) => (
            "user",
            format!("<div class=\"meta\">{}</div>{}", escape(&m.custom_type), markdown(&user_text(&m.content))),
        ),
        Message::BranchSummary(m) => ("meta", format!("<b>branch summary</b>{}", markdown(&m.summary))),
        Message::CompactionSummary(m) => ("meta", format!("<b>compaction summary</b>{}", markdown(&m.summary))),
    }
}

fn user_text(content: &UserContent) -> String {
    match content {
        UserContent::Text(text) => text.clone(),
        UserContent::Blocks(blocks) => blocks
            .iter()
            .map(|b| match b {
                ContentBlock::Text { text } => text.clone(),
                ContentBlock::Image { mime_type, .. } => format!("[image {mime_type}]"),
                _ => String::new(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// `tokens in … out … · $cost` under a billed entry.
fn usage_line(usage: &Usage) -> String {
    let mut line = format!("tokens in {} out {}", usage.input, usage.output);
    if usage.cache_read + usage.cache_write > 0 {
        let _ = write!(line, " cache read {} write {}", usage.cache_read, usage.cache_write);
    }
    format!("<div class=\"meta usage\">{line} · {}</div>", cost(usage))
}

/// As `pi report` writes it: six decimals, or n/a when a price is unknown.
fn cost(usage: &Usage) -> String {
    if usage.cost.unknown { "cost n/a".into() } else { format!("cost ${:.6}", usage.cost.total) }
}

/// Markdown as HTML. Raw HTML in the text is shown as text, images become their alt text (a
/// page that loads nothing), and links other than http(s), mailto and in-page ones are dropped.
fn markdown(text: &str) -> String {
    use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
    let safe_link = |url: &str| {
        let lower = url.trim().to_ascii_lowercase();
        ["http://", "https://", "mailto:", "#"].iter().any(|s| lower.starts_with(s))
    };
    let events = Parser::new_ext(text, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH).filter_map(|event| {
        Some(match event {
            Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
            Event::Start(Tag::Image { .. }) | Event::End(TagEnd::Image) => return None,
            Event::Start(Tag::Link { link_type, dest_url, title, id }) if !safe_link(&dest_url) => {
                Event::Start(Tag::Link { link_type, dest_url: "#".into(), title, id })
            }
            other => other,
        })
    });
    let mut html = String::new();
    pulldown_cmark::html::push_html(&mut html, events);
    html
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_keeps_no_raw_html_script_or_remote_image() {
        let html = markdown(
            "**bold** <script>alert(1)</script> ![x](http://example.com/a.png) [j](javascript:alert(1)) [ok](https://pi.dev)",
        );
        assert!(html.contains("<strong>bold</strong>"), "{html}");
        assert!(!html.contains("<script") && html.contains("&lt;script&gt;"), "{html}");
        assert!(!html.contains("<img") && !html.contains("javascript:"), "{html}");
        assert!(html.contains("href=\"https://pi.dev\""), "{html}");
    }

    #[test]
    fn a_fork_is_a_nested_list_and_a_chain_is_not() {
        let entry = |id: &str, parent: Option<&str>| Entry {
            id: id.into(),
            parent_id: parent.map(str::to_owned),
            timestamp: "t".into(),
            kind: EntryKind::SessionInfo { name: id.into() },
        };
        let entries = vec![entry("a", None), entry("b", Some("a")), entry("c", Some("b")), entry("d", Some("b"))];
        let on = branch_ids(&entries, Some("d"));
        assert_eq!(on, HashSet::from(["a", "b", "d"]));
        let html = tree(&entries, &on, Some("d"));
        assert_eq!(html.matches("<ul>").count(), 2, "{html}");
        assert_eq!(html.matches("<ul>").count(), html.matches("</ul>").count(), "{html}");
        assert_eq!(html.matches("<li").count(), html.matches("</li>").count(), "{html}");
        assert!(html.contains("<li class=\"leaf on\"><a href=\"#e-d\">"), "{html}");
    }
}
