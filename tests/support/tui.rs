//! `pi` in a real pseudo-terminal (expectrl), its screen read back with a terminal emulator
//! (vt100): the interactive mode's tests.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use expectrl::process::unix::WaitStatus;
use serde_json::Value;

use super::Flag;

pub const ROWS: u16 = 40;
pub const COLS: u16 = 120;
pub const PATIENCE: Duration = Duration::from_secs(30);

/// `pi` in a pseudo-terminal.
pub struct Tui {
    pub session: expectrl::session::OsSession,
    pub screen: vt100::Parser,
    /// Every byte pi wrote.
    pub raw: Vec<u8>,
}

pub fn gate() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/extensions/gate.py")
}

impl Tui {
    /// Starts `pi ARGS` in `dir` on a faux script, with the Python extension that audits the
    /// session lifecycle to `dir/audit.txt`.
    pub fn start(dir: &Path, script: &Value, args: &[&str]) -> Tui {
        Tui::start_with_env(dir, script, args, &[])
    }

    pub fn start_with_env(dir: &Path, script: &Value, args: &[&str], env: &[(&str, &str)]) -> Tui {
        std::fs::write(dir.join("script.json"), script.to_string()).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_pi"));
        cmd.current_dir(dir)
            .flag("--faux-script", dir.join("script.json"))
            .flag("-e", gate())
            .args(args)
            .env("PI_CODING_AGENT_DIR", dir.join("agent"))
            .env("PI_CODING_AGENT_SESSION_DIR", dir.join("sessions"))
            .env("PY_EXT_AUDIT", dir.join("audit.txt"))
            .env("TERM", "xterm-256color")
            .envs(env.iter().copied());
        for var in ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TRACEPARENT", "OTEL_EXPORTER_OTLP_ENDPOINT", "PI_SPOOL_DIR"]
        {
            cmd.env_remove(var);
        }
        let mut session = expectrl::session::Session::spawn(cmd).unwrap();
        session.get_process_mut().set_window_size(COLS, ROWS).unwrap();
        Tui { session, screen: vt100::Parser::new(ROWS, COLS, 0), raw: Vec::new() }
    }

    /// Feeds what pi wrote so far to the emulator.
    pub fn pump(&mut self) {
        let mut buf = [0u8; 8192];
        loop {
            match self.session.try_read(&mut buf) {
                Ok(0) => return,
                Ok(n) => {
                    self.screen.process(&buf[..n]);
                    self.raw.extend_from_slice(&buf[..n]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(_) => return,
            }
        }
    }

    pub fn contents(&self) -> String {
        self.screen.screen().contents()
    }

    /// Waits until the screen satisfies `want`; returns the screen.
    pub fn wait_for(&mut self, what: &str, want: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            self.pump();
            let screen = self.contents();
            if want(&screen) {
                return screen;
            }
            if Instant::now() > deadline {
                panic!("no {what} on screen within {PATIENCE:?}:\n{screen}");
            }
            std::thread::yield_now();
        }
    }

    pub fn shows(&mut self, text: &str) -> String {
        self.wait_for(text, |s| s.contains(text))
    }

    pub fn keys(&mut self, bytes: &str) {
        self.session.write_all(bytes.as_bytes()).unwrap();
        self.session.flush().unwrap();
    }

    /// Types a line and presses Enter.
    pub fn enter(&mut self, text: &str) {
        self.keys(text);
        // The editor shows it before Enter, so keys and Enter do not race the renderer.
        let first = text.chars().take(20).collect::<String>();
        self.wait_for(&format!("{first} typed"), |s| s.contains(&first));
        self.keys("\r");
    }

    /// Waits for the exit; returns the exit code (128 + n for a signal).
    pub fn exit_code(&mut self) -> i32 {
        let deadline = Instant::now() + PATIENCE;
        loop {
            self.pump();
            match self.session.get_process().status() {
                Ok(WaitStatus::Exited(_, code)) => return code,
                Ok(WaitStatus::Signaled(_, signal, _)) => return 128 + signal as i32,
                _ if Instant::now() > deadline => panic!("pi did not exit:\n{}", self.contents()),
                _ => std::thread::yield_now(),
            }
        }
    }

    /// The foreground colour of the first cell of `text` where the screen shows it.
    pub fn colour_of(&self, text: &str) -> vt100::Color {
        let screen = self.contents();
        let (row, line) = screen
            .lines()
            .enumerate()
            .find(|(_, l)| l.contains(text))
            .unwrap_or_else(|| panic!("no {text:?} on screen:\n{screen}"));
        let col = line[..line.find(text).unwrap()].chars().count() as u16;
        self.screen.screen().cell(row as u16, col).unwrap().fgcolor()
    }

    pub fn pid(&self) -> i32 {
        self.session.get_process().pid().as_raw()
    }
}
