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
    while reading.load(std::sync::atomic::Ordering::SeqCst) {
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
