//! The pickers of the interactive mode in a real pseudo-terminal: `pi -r` opens the session
//! picker at start (the chosen session's conversation comes back), and outside the interactive
//! mode `-r` is a one-line usage error.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod support;

use serde_json::json;
use support::tui::Tui;
use support::{Flag, pi, scratch};

#[test]
fn resume_flag_opens_the_session_picker_at_start() {
    let dir = scratch("pickers-resume");
    let sessions = dir.join("sessions");
    std::fs::write(dir.join("script.json"), json!([{"text": "Remembered answer."}]).to_string()).unwrap();
    pi().args(["-p", "the earlier question", "--cwd"])
        .arg(&dir)
        .flag("--faux-script", dir.join("script.json"))
        .env("PI_CODING_AGENT_DIR", dir.join("agent"))
        .env("PI_CODING_AGENT_SESSION_DIR", &sessions)
        .output()
        .unwrap();
    let mut tui = Tui::start(&dir, &json!([]), &["-r"]);
    tui.shows("Resume a session");
    tui.shows("the earlier question");
    tui.keys("\r");
    let screen = tui.shows("resumed: ");
    assert!(screen.contains("Remembered answer."), "{screen}");
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);

    let out = pi().args(["-p", "x", "-r"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("-r/--resume picks a session in the interactive mode"));
    std::fs::remove_dir_all(&dir).unwrap();
}
