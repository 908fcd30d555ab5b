//! The interactive mode's own slash commands. Anything else that starts with `/` — a skill
//! (`/skill:name`), a prompt template, an extension's command — goes to the agent as typed.

use super::picker::{Picker, Purpose};
use super::selector::Selector;
use super::transcript::Tone;
use super::{Done, Replies, Ui};
use crate::cli::modes::driver::Job;

const HELP: &str = "\
commands:
  /help                 this list
  /model [PROVIDER/ID]  the models, or switch to one
  /session              session file, id, messages, tokens, cost
  /compact [FOCUS]      summarize the older conversation now
  /tree [ID [summarize]] the session tree to move in, or continue from entry ID
  /new                  a fresh session
  /resume [N|PATH]      this project's sessions, or continue one
  /fork [N]             your messages, or fork before message N
  /clone                this branch as it is, in a new session file
  /trust                trust this project (its .pi/ loads at the next start or /reload)
  /reload               settings, extensions, skills and prompt templates read again
  /observe              the telemetry pipeline: sinks, delivered, dropped, traces
  /name [NAME]          name this session (or show its name)
  /copy                 copy the last answer (terminal clipboard, OSC 52; and a clipboard tool)
  /export [FILE]        the session as one HTML page (default pi-session-<file>.html here)
  /settings             common options of ~/.pi/agent/settings.json (Enter changes one)
  /scoped-models        the models Ctrl+P cycles through (Enter toggles, Ctrl+S saves)
  /hotkeys              the keys
  /changelog            what changed in pi
  /login, /logout, /share  what pi offers instead of upstream's
  /quit                 exit (also Ctrl+D on an empty editor, Ctrl+C twice)
  /skill:NAME, /TEMPLATE and extension commands run as prompts
";

/// The commands this screen runs itself (what Tab completes a `/word` from, with extensions'
/// commands, prompt templates and skills).
pub(super) const BUILTIN_COMMANDS: &[&str] = &[
    "/help",
    "/model",
    "/session",
    "/compact",
    "/tree",
    "/new",
    "/resume",
    "/fork",
    "/clone",
    "/export",
    "/settings",
    "/scoped-models",
    "/trust",
    "/reload",
    "/observe",
    "/name",
    "/copy",
    "/hotkeys",
    "/changelog",
    "/login",
    "/logout",
    "/share",
    "/quit",
];

/// `/hotkeys` (and the end of `/help`).
const HOTKEYS: &str = "\
keys: Enter send (queues a steering message while working) · Alt+Enter queue a follow-up ·
  Ctrl+J newline · Esc abort · Up/Down history · PageUp/PageDown scroll · Ctrl+C abort/clear/exit ·
  Alt+B/Alt+F, Ctrl+Left/Right word moves · Ctrl+W, Alt+Backspace, Alt+D cut a word · Ctrl+K cut
  to the end, Ctrl+U to the start · Ctrl+Y yank, Alt+Y the cut before · Ctrl+- undo ·
  Ctrl+Z suspend (the shell's fg resumes) · Ctrl+G edit in $VISUAL/$EDITOR · Ctrl+] jump to a
  character · Ctrl+P/Shift+Ctrl+P next/previous model · Shift+Tab thinking level · Ctrl+L models ·
  Ctrl+T show thinking · Ctrl+O expand tool output · Alt+Up queued messages back to the editor ·
  Ctrl+D exit on an empty editor · !cmd shell command · !!cmd shell command kept out of the context";

/// What changed in pi (`/changelog`).
const CHANGELOG: &str = include_str!("../../../../CHANGELOG.md");

impl Ui<'_> {
    /// Runs `line` when it is a built-in command (true), else leaves it to the agent (false).
    pub(super) fn builtin(&mut self, line: &str, replies: &Replies) -> bool {
        let (name, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let rest = rest.trim();
        match name {
            "/help" => self.transcript.notice(Tone::Info, format!("{HELP}{HOTKEYS}")),
            "/hotkeys" => {
                let bindings = self.keymap.describe();
                self.transcript.notice(Tone::Info, format!("{HOTKEYS}\n\nkeybindings (~/.pi/agent/keybindings.json):\n{bindings}"));
            }
            "/changelog" => self.transcript.notice(Tone::Info, CHANGELOG.trim()),
            "/name" if rest.is_empty() => {
                let name = self.shared.with_state(|s| s.session_name.clone());
                self.transcript.notice(Tone::Info, name.map_or("this session has no name".into(), |n| format!("session name: {n}")));
            }
            "/name" => {
                self.send(Job::SetSessionName(rest.to_owned()), Done::Quiet, replies);
                self.transcript.notice(Tone::Info, format!("session name: {rest}"));
            }
            "/copy" => self.copy(),
            "/export" => self.export(rest, replies),
            "/settings" => self.open_settings(None),
            "/scoped-models" => self.open_scoped_models(),
            "/login" | "/logout" => self.transcript.notice(
                Tone::Info,
                "pi offers no subscription logins (OAuth): set the provider's API key variable (ANTHROPIC_API_KEY, OPENAI_API_KEY, …) or `apiKey` in ~/.pi/agent/models.json",
            ),
            "/share" => {
                let file = self.shared.with_state(|s| s.session_file.clone()).unwrap_or_else(|| "none (--no-session)".into());
                self.transcript.notice(Tone::Info, format!("pi does not upload sessions (upstream's /share makes a GitHub gist); the session file is {file}"));
            }
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
                self.send(Job::Compact { instructions }, Done::Compact(None), replies);
            }
            "/new" => {
                self.send(Job::NewSession, Done::Session("new session"), replies);
            }
            "/resume" => self.resume(rest, replies),
            "/fork" => self.fork(rest, replies),
            "/clone" => self.send(Job::Clone, Done::Session("cloned"), replies),
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

    /// `/copy`: the last answer to the terminal's clipboard (OSC 52, which works over SSH in
    /// terminals that allow it) and to a clipboard tool when one is installed.
    fn export(&mut self, rest: &str, replies: &Replies) {
        let out = (!rest.is_empty()).then(|| std::path::PathBuf::from(rest));
        self.send(Job::ExportHtml(out), Done::Quiet, replies);
    }

    fn copy(&mut self) {
        use base64::Engine as _;
        use std::io::Write as _;
        let Some(text) = self.shared.last_assistant_text().filter(|t| !t.is_empty()) else {
            return self.transcript.notice(Tone::Warn, "nothing to copy yet");
        };
        let encoded = base64::engine::general_purpose::STANDARD.encode(&text);
        let mut stdout = std::io::stdout();
        let _ = write!(stdout, "\x1b]52;c;{encoded}\x07").and_then(|()| stdout.flush());
        let tools: [(&str, &[&str]); 4] = [
            ("wl-copy", &[]),
            ("xclip", &["-selection", "clipboard"]),
            ("xsel", &["--clipboard", "--input"]),
            ("pbcopy", &[]),
        ];
        let tool = tools.iter().find_map(|(name, args)| {
            let mut child = std::process::Command::new(name)
                .args(*args)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .ok()?;
            child.stdin.take()?.write_all(text.as_bytes()).ok()?;
            child.wait().ok().filter(|s| s.success()).map(|_| *name)
        });
        let chars = text.chars().count();
        let via = tool.map_or(String::new(), |t| format!(" and {t}"));
        self.transcript.notice(Tone::Info, format!("copied {chars} characters (terminal clipboard{via})"));
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
            return self.open_session_picker();
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

    /// `/settings`: the options and their values in the global settings file, `selected` the
    /// one just changed.
    pub(super) fn open_settings(&mut self, selected: Option<&str>) {
        let Some(file) = super::settings_panel::global_file() else {
            return self.transcript.notice(Tone::Warn, "/settings: no agent folder (set HOME or PI_CODING_AGENT_DIR)");
        };
        let items = super::settings_panel::items(&file);
        let title = format!("Settings · {}", file.display());
        self.selector = Some(Selector::List(Picker::new(Purpose::Setting, &title, items, selected)));
    }

    /// The session picker (`/resume`, `pi -r`): this project's sessions first.
    pub(super) fn open_session_picker(&mut self) {
        let probe = crate::cli::setup::new_session_path(&self.cwd, self.cfg);
        let (root, _) = crate::cli::setup::sessions_dir(self.cfg);
        let here = probe.parent().map(std::path::Path::to_path_buf).unwrap_or_else(|| root.clone());
        let current = self.shared.with_state(|state| state.session_file.clone()).map(std::path::PathBuf::from);
        let picker = super::session_picker::SessionPicker::new(here, root, current);
        if picker.is_empty() {
            return self.transcript.notice(Tone::Info, "no earlier sessions for this project");
        }
        self.selector = Some(Selector::Sessions(picker));
    }

    /// This project's session files, newest first (the folder new sessions go to).
    pub(super) fn project_sessions(&self) -> Vec<std::path::PathBuf> {
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
                self.send(Job::Fork { entry_id, at: false }, Done::Fork, replies);
            }
            _ => self.transcript.notice(Tone::Error, format!("/fork: give a number from 1 to {}", points.len())),
        }
    }

    fn model(&mut self, rest: &str, replies: &Replies) {
        let current = self.shared.with_state(|state| state.model.clone());
        if rest.is_empty() {
            // The models that can run here (their key is set), as upstream's selector offers.
            let here = format!("{}/{}", current.provider, current.id);
            let items = self
                .registry
                .models()
                .iter()
                .map(|m| format!("{}/{}", m.provider, m.id))
                .zip(self.registry.models())
                .filter(|(name, m)| *name == here || crate::cli::models_cmd::status(m, &self.registry) == "ready")
                .map(|(name, _)| (name.clone(), name))
                .chain(self.extension_models.iter().map(|m| {
                    let name = format!("{}/{}", m.provider, m.id);
                    (format!("{name} (extension)"), name)
                }))
                .collect();
            self.selector = Some(Selector::List(Picker::new(Purpose::Model, "Model", items, Some(&here))));
            return;
        }
        let (provider, model) = match rest.split_once('/') {
            Some((provider, model)) => (provider.to_owned(), model.to_owned()),
            None => (current.provider.clone(), rest.to_owned()),
        };
        self.send(Job::SetModel { provider, model }, Done::Model, replies);
    }
}
