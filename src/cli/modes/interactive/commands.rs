//! The interactive mode's own slash commands. Anything else that starts with `/` — a skill
//! (`/skill:name`), a prompt template, an extension's command — goes to the agent as typed.

use super::transcript::Tone;
use super::{Done, Replies, Ui};
use crate::cli::modes::driver::Job;

const HELP: &str = "\
commands:
  /help                 this list
  /model [PROVIDER/ID]  the models, or switch to one
  /session              session file, id, messages, tokens, cost
  /compact [FOCUS]      summarize the older conversation now
  /tree [ID [summarize]] the session tree, or continue from entry ID
  /new                  a fresh session
  /resume [N|PATH]      this project's sessions, or continue one
  /fork [N]             your messages, or fork before message N
  /trust                trust this project (its .pi/ loads at the next start or /reload)
  /reload               settings, extensions, skills and prompt templates read again
  /observe              the telemetry pipeline: sinks, delivered, dropped, traces
  /quit                 exit (also Ctrl+D on an empty editor, Ctrl+C twice)
  /skill:NAME, /TEMPLATE and extension commands run as prompts
keys: Enter send (queues a steering message while working) · Alt+Enter queue a follow-up ·
  Ctrl+J newline · Esc abort · Up/Down history · PageUp/PageDown scroll · !cmd shell command";

impl Ui<'_> {
    /// Runs `line` when it is a built-in command (true), else leaves it to the agent (false).
    pub(super) fn builtin(&mut self, line: &str, replies: &Replies) -> bool {
        let (name, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let rest = rest.trim();
        match name {
            "/help" => self.transcript.notice(Tone::Info, HELP),
            "/quit" | "/exit" => self.quit = true,
            "/session" => self.session(),
            "/observe" => self.observe(),
            "/trust" => match crate::cli::trust_cmd::trust_project(&self.cwd, self.cfg) {
                Ok(said) => self.transcript.notice(Tone::Info, format!("{said} (at the next start or /reload)")),
                Err(e) => self.transcript.notice(Tone::Error, e.to_string()),
            },
            "/reload" => {
                self.running = Some("reloading".into());
                self.send(Job::Reload, Done::Reload, replies);
            }
            "/compact" => {
                self.running = Some("compacting".into());
                let instructions = (!rest.is_empty()).then(|| rest.to_owned());
                self.send(Job::Compact { instructions }, Done::Compact, replies);
            }
            "/new" => {
                self.send(Job::NewSession, Done::Session("new session"), replies);
            }
            "/resume" => self.resume(rest, replies),
            "/fork" => self.fork(rest, replies),
            "/tree" => {
                let mut words = rest.split_whitespace();
                match words.next() {
                    None => self.send(Job::Tree, Done::Tree { navigate: false }, replies),
                    Some(target) => {
                        let summarize = words.next() == Some("summarize");
                        let job = Job::Navigate { target: target.to_owned(), summarize };
                        self.send(job, Done::Tree { navigate: true }, replies);
                    }
                }
            }
            "/model" => self.model(rest, replies),
            _ => return false,
        }
        true
    }

    fn session(&mut self) {
        let text = self.shared.with_state(|state| {
            let usage = state.usage;
            format!(
            "session file: {}\nsession id: {}\nmessages: {}\ntokens: in {} out {} cache read {} cache write {} (total {})\ncost: ${:.6}",
            state.session_file.as_deref().unwrap_or("none (--no-session)"),
            state.session_id.as_deref().unwrap_or("none"),
            state.messages.len(),
            usage.input,
            usage.output,
            usage.cache_read,
            usage.cache_write,
            usage.total_tokens,
            usage.cost.total,
            )
        });
        self.transcript.notice(Tone::Info, text);
    }

    fn observe(&mut self) {
        let health = self.probe.health();
        let traces = self.traces.lock().map(|t| t.clone()).unwrap_or_default();
        let mut text = if health.sinks.is_empty() {
            "telemetry: no sink (give --otlp, --sentry, --log-json or --events-jsonl, or the settings' telemetry)"
                .to_owned()
        } else {
            format!(
                "telemetry sinks: {}\ndelivered: {}\ndropped: {}\nspooled for a later run: {}",
                health.sinks.join(", "),
                health.exported,
                health.dropped,
                health.spooled
            )
        };
        if let Some(error) = &health.last_error {
            text.push_str(&format!("\nlast delivery error: {error}"));
        }
        text.push_str(&format!("\ntraces this session: {}", traces.len()));
        if let Some(last) = traces.last() {
            let template = crate::cli::sinks::trace_link::trace_url_template().ok().flatten();
            let link = template.map(|t| format!(" {}", t.to(last))).unwrap_or_default();
            text.push_str(&format!("\nlast trace: {last}{link}"));
        }
        self.transcript.notice(Tone::Info, text);
    }

    fn resume(&mut self, rest: &str, replies: &Replies) {
        let sessions = self.project_sessions();
        if rest.is_empty() {
            if sessions.is_empty() {
                self.transcript.notice(Tone::Info, "no earlier sessions for this project");
                return;
            }
            let listing: Vec<String> =
                sessions.iter().enumerate().map(|(i, p)| format!("{:>3}  {}", i + 1, p.display())).collect();
            self.transcript.notice(Tone::Info, format!("sessions (newest first; /resume N):\n{}", listing.join("\n")));
            return;
        }
        let path = match rest.parse::<usize>() {
            Ok(n) if (1..=sessions.len()).contains(&n) => sessions[n - 1].clone(),
            Ok(n) => {
                self.transcript.notice(Tone::Error, format!("/resume: no session {n}"));
                return;
            }
            Err(_) => std::path::PathBuf::from(rest),
        };
        self.send(Job::SwitchSession { path }, Done::Session("resumed"), replies);
    }

    /// This project's session files, newest first (the folder new sessions go to).
    fn project_sessions(&self) -> Vec<std::path::PathBuf> {
        let probe = crate::cli::setup::new_session_path(&self.cwd, self.cfg);
        let Some(dir) = probe.parent() else { return Vec::new() };
        let current = self.shared.with_state(|state| state.session_file.clone());
        let mut files: Vec<(std::time::SystemTime, std::path::PathBuf)> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .filter(|p| current.as_deref() != Some(&*p.display().to_string()))
            .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
            .collect();
        files.sort_by_key(|f| std::cmp::Reverse(f.0));
        files.into_iter().map(|(_, p)| p).collect()
    }

    fn fork(&mut self, rest: &str, replies: &Replies) {
        let points = self.shared.with_state(|state| state.user_entries.clone());
        if rest.is_empty() {
            if points.is_empty() {
                self.transcript.notice(Tone::Info, "nothing to fork: no message of yours in this session yet");
                return;
            }
            let listing: Vec<String> = points
                .iter()
                .enumerate()
                .map(|(i, (_, text))| format!("{:>3}  {}", i + 1, text.lines().next().unwrap_or("")))
                .collect();
            self.transcript.notice(
                Tone::Info,
                format!("your messages (/fork N starts a new session before message N):\n{}", listing.join("\n")),
            );
            return;
        }
        match rest.parse::<usize>() {
            Ok(n) if (1..=points.len()).contains(&n) => {
                let entry_id = points[n - 1].0.clone();
                self.send(Job::Fork { entry_id }, Done::Fork, replies);
            }
            _ => self.transcript.notice(Tone::Error, format!("/fork: give a number from 1 to {}", points.len())),
        }
    }

    fn model(&mut self, rest: &str, replies: &Replies) {
        let current = self.shared.with_state(|state| state.model.clone());
        if rest.is_empty() {
            let listing: Vec<String> = self
                .registry
                .models()
                .iter()
                .map(|m| {
                    let mark = if m.provider == current.provider && m.id == current.id { "●" } else { " " };
                    format!("{mark} {}/{}", m.provider, m.id)
                })
                .collect();
            self.transcript.notice(Tone::Info, format!("models (/model PROVIDER/ID):\n{}", listing.join("\n")));
            return;
        }
        let (provider, model) = match rest.split_once('/') {
            Some((provider, model)) => (provider.to_owned(), model.to_owned()),
            None => (current.provider.clone(), rest.to_owned()),
        };
        self.send(Job::SetModel { provider, model }, Done::Model, replies);
    }
}
