//! SIGINT, SIGTERM and SIGHUP abort a run like Ctrl+C.

use std::process::ExitCode;
use std::sync::{Arc, OnceLock};

use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio_util::sync::CancellationToken;

use super::{CliError, output};

/// SIGHUP's number (the exit code of a hangup is 128 + it).
pub const SIGHUP: i32 = 1;

/// Longest a second signal waits for a write of whole lines under way (a hung disk).
const APPEND_PATIENCE: std::time::Duration = std::time::Duration::from_secs(1);

/// The first signal received, if any.
pub type Interrupted = Arc<OnceLock<i32>>;

/// Listens for SIGINT, SIGTERM and SIGHUP: the first one cancels `cancel` (tools' process groups
/// are killed, the aborted state is written to the session, sinks are flushed) and is remembered
/// for the exit code (128 + signal); a second one exits at once, between two appends: every file
/// pi writes holds whole lines at any moment.
pub fn abort_on(cancel: &CancellationToken) -> Result<Interrupted, CliError> {
    let listen =
        |kind: SignalKind| signal(kind).map_err(|e| CliError::Failure(format!("cannot listen for signals: {e}")));
    let (mut int, mut term, mut hup) =
        (listen(SignalKind::interrupt())?, listen(SignalKind::terminate())?, listen(SignalKind::hangup())?);
    let received = Arc::new(OnceLock::new());
    let (first, cancel) = (received.clone(), cancel.clone());
    tokio::spawn(async move {
        let mut signals = [(&mut int, 2), (&mut term, 15), (&mut hup, 1)];
        let signal = next_signal(&mut signals).await;
        let _ = first.set(signal);
        cancel.cancel();
        let again = next_signal(&mut signals).await;
        output::error(format_args!("pi: {} again: exiting now", name(again)));
        pi_observe::core::exit_between_appends(128 + again, APPEND_PATIENCE);
    });
    Ok(received)
}

/// Says which signal aborted the run; the exit code is 128 + its number.
pub fn exit(signal: i32) -> ExitCode {
    output::error(format_args!("pi: aborted by {}", name(signal)));
    ExitCode::from(128 + signal as u8)
}

/// While set, SIGINT is not pi's: a program an extension runs on the terminal in pi's process
/// group has it (Ctrl+C in that program must not end pi).
static SIGINT_HELD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Lets SIGINT through to pi again (`false`) or not (`true`).
pub fn hold_sigint(held: bool) {
    SIGINT_HELD.store(held, std::sync::atomic::Ordering::SeqCst);
}

/// The number of the next signal among `signals` (SIGINT skipped while held).
async fn next_signal(signals: &mut [(&mut Signal, i32); 3]) -> i32 {
    let [(int, i), (term, t), (hup, h)] = signals;
    loop {
        tokio::select! {
            _ = int.recv() => if !SIGINT_HELD.load(std::sync::atomic::Ordering::SeqCst) { return *i },
            _ = term.recv() => return *t,
            _ = hup.recv() => return *h,
        }
    }
}

fn name(signal: i32) -> &'static str {
    match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        15 => "SIGTERM",
        _ => "a signal",
    }
}
