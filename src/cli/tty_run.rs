//! `pi tty-run --pgid PGID -- COMMAND [ARGS…]` (hidden): how an extension runs a full-screen
//! program while pi has handed it the terminal (upstream's `tui.stop()` then `spawnSync(…,
//! {stdio: "inherit"})`). The extension's own stdio is pi's protocol pipe, and its process group
//! is not the terminal's foreground one; so the program runs on the controlling terminal
//! (`/dev/tty`) in pi's own process group — the foreground one — and this helper exits as it
//! did.

use std::path::PathBuf;
use std::process::ExitCode;

/// `pi tty-run` (for the JavaScript host; hidden).
#[derive(Debug, clap::Args)]
pub struct TtyRunArgs {
    /// The process group to run in (pi's).
    #[arg(long)]
    pub pgid: i32,
    /// The program and its arguments.
    #[arg(trailing_var_arg = true, required = true, allow_hyphen_values = true)]
    pub command: Vec<String>,
}

/// Runs the command on the terminal; its exit code (128 + a signal's number), or 127 with one
/// line when it cannot start.
pub fn run(args: &TtyRunArgs) -> ExitCode {
    use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
    let tty = PathBuf::from("/dev/tty");
    let open = || std::fs::OpenOptions::new().read(true).write(true).open(&tty);
    let (Ok(input), Ok(output), Ok(errors)) = (open(), open(), open()) else {
        super::output::error(format_args!("pi: tty-run: no terminal to run on ({})", tty.display()));
        return ExitCode::from(127);
    };
    let Some((program, rest)) = args.command.split_first() else { return ExitCode::from(2) };
    let status = std::process::Command::new(program)
        .args(rest)
        .stdin(input)
        .stdout(output)
        .stderr(errors)
        .process_group(args.pgid)
        .status();
    match status {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => ExitCode::from(code.clamp(0, 255) as u8),
            (None, Some(signal)) => ExitCode::from((128 + signal).clamp(0, 255) as u8),
            _ => ExitCode::FAILURE,
        },
        Err(e) => {
            super::output::error(format_args!("pi: tty-run: {program}: {e}"));
            ExitCode::from(127)
        }
    }
}
