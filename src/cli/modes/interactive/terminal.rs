//! The terminal itself: raw mode on the alternate screen, its input on a thread of its own, and
//! noticing when it hangs up.

use std::time::Duration;

use tokio::sync::mpsc;

use super::whole_lines::WholeLines;
use ratatui::crossterm::event::{self, Event};

/// The terminal in raw mode on the alternate screen (restored by `ratatui::restore`, also on a
/// panic), drawn through [`WholeLines`]; a terminal that reports no size (a pseudo-terminal
/// nobody sized) gets an 80×24 screen, as a terminal emulator would start.
pub(super) fn terminal() -> std::io::Result<Screen> {
    let size = ratatui::try_init()?.size()?;
    let fixed = ratatui::layout::Rect::new(0, 0, 80, 24);
    let viewport =
        if size.width > 0 && size.height > 0 { ratatui::Viewport::Fullscreen } else { ratatui::Viewport::Fixed(fixed) };
    let backend = WholeLines::new(ratatui::backend::CrosstermBackend::new(std::io::stdout()), fixed);
    ratatui::Terminal::with_options(backend, ratatui::TerminalOptions { viewport })
}

/// kitty's keyboard protocol where the terminal speaks it (Shift+Enter, Ctrl+I and Tab, Esc and
/// Alt told apart — upstream asks for it too); a terminal that does not ignores the request.
/// Asked on the alternate screen, whose own flags the terminal drops when pi leaves it.
pub(super) fn enhance_keys() {
    use ratatui::crossterm::event::{KeyboardEnhancementFlags, PushKeyboardEnhancementFlags};
    let flags = KeyboardEnhancementFlags::DISAMBIGUATE_ESCAPE_CODES;
    let _ = ratatui::crossterm::execute!(std::io::stdout(), PushKeyboardEnhancementFlags(flags));
}

/// The terminal's keys as they were before [`enhance_keys`] (leaving the terminal to another
/// program, or for good).
pub(super) fn plain_keys() {
    let _ = ratatui::crossterm::execute!(std::io::stdout(), ratatui::crossterm::event::PopKeyboardEnhancementFlags);
}

/// The terminal the interactive mode draws on.
pub(super) type Screen = ratatui::Terminal<WholeLines<ratatui::backend::CrosstermBackend<std::io::Stdout>>>;

/// True when the terminal on stdin has hung up (the other end of its pseudo-terminal closed):
/// a zero-timeout poll that reports HUP, ERR or NVAL. crossterm's reader does not notice — on
/// a hung-up terminal it spins — so the screen's loop asks this on every tick and failed draw.
pub(super) fn terminal_hung_up() -> bool {
    use rustix::event::{PollFd, PollFlags, poll};
    let stdin = std::io::stdin();
    let mut fds = [PollFd::new(&stdin, PollFlags::IN)];
    let zero = rustix::time::Timespec { tv_sec: 0, tv_nsec: 0 };
    match poll(&mut fds, Some(&zero)) {
        Ok(_) => fds[0].revents().intersects(PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL),
        Err(_) => true,
    }
}

/// Reads terminal events on their own thread (crossterm's reader blocks) until told to stop.
pub(super) fn read_input(keys: &mpsc::UnboundedSender<Event>, reading: &std::sync::atomic::AtomicBool) {
    use std::sync::atomic::Ordering::SeqCst;
    while reading.load(SeqCst) {
        if INPUT_PAUSED.load(SeqCst) {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        match event::poll(Duration::from_millis(50)) {
            Ok(true) => match event::read() {
                Ok(event) => {
                    if keys.send(event).is_err() {
                        return;
                    }
                }
                Err(_) => return,
            },
            Ok(false) => {}
            Err(_) => return,
        }
    }
}

/// While another program has the terminal (Ctrl+G's editor), the input thread reads nothing.
static INPUT_PAUSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Ctrl+G: `text` in a scratch file opened with `command` (`$VISUAL`/`$EDITOR`, run by `sh` with
/// the file as its argument) on the terminal as it was before pi; then raw mode and the
/// alternate screen come back. `Ok(Err(why))` when the editor failed (the text is kept).
pub(super) fn external_editor(
    terminal: &mut Screen,
    command: &str,
    text: &str,
) -> std::io::Result<Result<String, String>> {
    use std::sync::atomic::Ordering::SeqCst;
    let file = std::env::temp_dir().join(format!("pi-message-{}.md", pi_observe::core::SpanId::random()));
    pi_observe::core::write_private(&file, text.as_bytes())?;
    INPUT_PAUSED.store(true, SeqCst);
    // The input thread finishes the poll it is in (50 ms) before the editor reads the keys.
    std::thread::sleep(Duration::from_millis(80));
    plain_keys();
    ratatui::restore();
    let status =
        std::process::Command::new("sh").arg("-c").arg(format!("{command} \"$1\"")).arg("sh").arg(&file).status();
    let restored = restore_screen(terminal);
    INPUT_PAUSED.store(false, SeqCst);
    restored?;
    let edited = std::fs::read_to_string(&file);
    let _ = std::fs::remove_file(&file);
    Ok(match (status, edited) {
        (Ok(status), _) if !status.success() => Err(format!("exited with {status}")),
        (Ok(_), Ok(text)) => Ok(text),
        (Err(e), _) | (_, Err(e)) => Err(e.to_string()),
    })
}

/// An extension's component asked for the terminal (upstream's `tui.stop()`, to run a full-screen
/// program): input reading paused, the terminal as it was before pi, SIGINT no longer pi's (the
/// program runs in pi's process group: `pi tty-run`), and `ack` written with pi's process group
/// — the extension waits for that file before it starts the program.
pub(super) fn hand_over(ack: &std::path::Path) -> std::io::Result<()> {
    use std::sync::atomic::Ordering::SeqCst;
    INPUT_PAUSED.store(true, SeqCst);
    // The input thread finishes the poll it is in (50 ms) before the program reads the keys.
    std::thread::sleep(Duration::from_millis(80));
    plain_keys();
    ratatui::restore();
    crate::cli::signals::hold_sigint(true);
    let pgid = rustix::process::getpgrp().as_raw_nonzero().get();
    pi_observe::core::write_private(ack, pgid.to_string().as_bytes())
}

/// The terminal back from an extension's program (upstream's `tui.start()`), drawn whole.
pub(super) fn take_back(terminal: &mut Screen) -> std::io::Result<()> {
    use std::sync::atomic::Ordering::SeqCst;
    crate::cli::signals::hold_sigint(false);
    let restored = restore_screen(terminal);
    INPUT_PAUSED.store(false, SeqCst);
    restored
}

/// Raw mode, the alternate screen and bracketed paste again, and the next frame drawn whole.
fn restore_screen(terminal: &mut Screen) -> std::io::Result<()> {
    use ratatui::crossterm::{event::EnableBracketedPaste, execute, terminal as term};
    term::enable_raw_mode()?;
    let clear = term::Clear(term::ClearType::All);
    execute!(std::io::stdout(), term::EnterAlternateScreen, EnableBracketedPaste, clear)?;
    enhance_keys();
    // The next frame is drawn whole against a blank screen (`Terminal::clear` would ask the
    // terminal where its cursor is, and not every terminal answers).
    terminal.backend_mut().forget();
    terminal.swap_buffers();
    Ok(())
}

/// Ctrl+Z: the terminal as it was before pi (cooked, main screen), then `SIGTSTP` to pi itself,
/// as a shell's job control expects; when the shell continues it (`fg`, `SIGCONT`), raw mode,
/// the alternate screen and bracketed paste come back and the whole screen is drawn again.
pub(super) fn suspend(terminal: &mut Screen) -> std::io::Result<()> {
    plain_keys();
    ratatui::restore();
    rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::TSTP)?;
    // Stopped here until continued.
    restore_screen(terminal)
}
