//! Upstream's default keybindings in a real pseudo-terminal, one row each: the bytes a terminal
//! sends for the key, and what the screen shows after. Then `~/.pi/agent/keybindings.json`
//! rebinding one, and Ctrl+G handing the message to `$EDITOR`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod support;

use serde_json::json;
use support::scratch;
use support::tui::Tui;

/// The editor line as drawn (`> text`), waited for.
fn editor(tui: &mut Tui, want: &str) {
    let line = format!("> {want}");
    tui.wait_for(&format!("editor {line:?}"), |s| s.lines().any(|l| l.trim_end() == line.trim_end()));
}

/// A key whose effect is on the editor: typed after `before`, the editor reads `after` (which
/// no state on the way to it shows, so a row cannot pass before its keys are read).
struct EditRow {
    action: &'static str,
    before: &'static str,
    keys: &'static str,
    after: &'static str,
}

#[test]
fn every_editing_keybinding_does_what_upstream_does() {
    let dir = scratch("keys-editing");
    let mut tui = Tui::start(&dir, &json!([]), &[]);
    tui.shows("/help for commands");
    let rows = [
        EditRow { action: "cursorLeft (ctrl+b)", before: "abc", keys: "\x02X", after: "abXc" },
        EditRow { action: "cursorRight (ctrl+f)", before: "abc", keys: "\x01\x06X", after: "aXbc" },
        EditRow { action: "cursorLineStart (ctrl+a)", before: "abc", keys: "\x01X", after: "Xabc" },
        EditRow { action: "cursorLineEnd (ctrl+e)", before: "abc", keys: "\x01\x05X", after: "abcX" },
        EditRow { action: "cursorLeft (left)", before: "abc", keys: "\x1b[DX", after: "abXc" },
        EditRow { action: "cursorLineStart (home)", before: "abc", keys: "\x1b[HX", after: "Xabc" },
        EditRow { action: "cursorWordLeft (alt+b)", before: "one two", keys: "\x1bbX", after: "one Xtwo" },
        EditRow { action: "cursorWordLeft (ctrl+left)", before: "one two", keys: "\x1b[1;5DX", after: "one Xtwo" },
        EditRow { action: "cursorWordRight (alt+f)", before: "one two", keys: "\x01\x1bfX", after: "oneX two" },
        EditRow { action: "jumpForward (ctrl+])", before: "alpha beta", keys: "\x01\x1dbX", after: "alpha Xbeta" },
        EditRow { action: "jumpBackward (ctrl+alt+])", before: "alpha beta", keys: "\x1b\x1daX", after: "alpha betXa" },
        EditRow { action: "deleteCharBackward (backspace)", before: "abc", keys: "\x7f", after: "ab" },
        EditRow { action: "deleteCharForward (ctrl+d)", before: "abc", keys: "\x01\x04", after: "bc" },
        EditRow { action: "deleteCharForward (delete)", before: "abc", keys: "\x01\x1b[3~", after: "bc" },
        EditRow { action: "deleteWordBackward (ctrl+w)", before: "one two", keys: "\x17", after: "one" },
        EditRow { action: "deleteWordBackward (alt+backspace)", before: "one two", keys: "\x1b\x7f", after: "one" },
        EditRow { action: "deleteWordForward (alt+d)", before: "one two", keys: "\x01\x1bd", after: " two" },
        EditRow { action: "deleteToLineStart (ctrl+u)", before: "one two", keys: "\x1bb\x15", after: "two" },
        EditRow { action: "deleteToLineEnd (ctrl+k)", before: "one two", keys: "\x1bb\x0b", after: "one" },
        EditRow { action: "yank (ctrl+y)", before: "one two", keys: "\x17\x19\x19", after: "one twotwo" },
        // Cut "b", then "a "; yank "a ", Alt+Y swaps it for the cut before: "b".
        EditRow { action: "yankPop (alt+y)", before: "a b", keys: "\x17\x17\x19\x1by", after: "b" },
        // The cut undone, then typing: only a real undo gives "one two!" (every step before
        // differs from it).
        EditRow { action: "undo (ctrl+-)", before: "one two", keys: "\x17\x1f!", after: "one two!" },
        EditRow { action: "clear (ctrl+c)", before: "abc", keys: "\x03", after: "" },
    ];
    for row in rows {
        tui.keys(row.before);
        editor(&mut tui, row.before);
        tui.keys(row.keys);
        editor(&mut tui, row.after);
        // Cleared for the next row (Ctrl+C clears the editor: every line of it).
        tui.keys("\x03");
        tui.wait_for(&format!("{}: the editor cleared", row.action), |s| {
            s.lines().any(|l| l.trim_end() == ">") && !s.lines().any(|l| l.starts_with("  ") && l.contains("two"))
        });
    }
    // newLine (ctrl+j): a second editor line.
    tui.keys("one\ntwo");
    tui.wait_for("a second editor line", |s| {
        let lines: Vec<&str> = s.lines().map(str::trim_end).collect();
        lines.windows(2).any(|w| w == ["> one", "  two"])
    });
    // newLine (shift+enter): pi asks the terminal for kitty's keyboard protocol, in which
    // Shift+Enter is told apart from Enter.
    tui.keys("\x03");
    assert!(String::from_utf8_lossy(&tui.raw).contains("\x1b[>1u"), "the protocol was asked for");
    tui.keys("three\x1b[13;2ufour");
    tui.wait_for("Shift+Enter's new line", |s| {
        let lines: Vec<&str> = s.lines().map(str::trim_end).collect();
        lines.windows(2).any(|w| w == ["> three", "  four"])
    });
    tui.keys("\x03\x04");
    assert_eq!(tui.exit_code(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn application_keybindings_switch_models_show_more_and_restore_the_queue() {
    let dir = scratch("keys-app");
    let output: String = (1..=20).map(|i| format!("echo line-{i:02}; ")).collect();
    let script = json!([
        {"thinking": "A DEEP THOUGHT about it.", "text": "Thought.", "tools": [{"name": "bash", "arguments": {"command": output}}]},
        {"text": "Listed."},
        // Long enough that queueing and Alt+Up land mid-answer on a loaded machine; Ctrl+C ends it.
        {"text": "Slow answer, streamed one chunk every second until someone aborts it.", "chunkDelayMs": 1000},
        {"text": "After."}
    ]);
    // A second faux model, one that reasons: Ctrl+P goes to it, Shift+Tab sets its level.
    let models = dir.join("models.json");
    std::fs::write(
        &models,
        json!([{"id": "faux-think", "provider": "faux", "api": "faux", "contextWindow": 64000, "maxTokens": 4096,
                "reasoning": true}])
        .to_string(),
    )
    .unwrap();
    let mut tui = Tui::start(&dir, &script, &["--models-file", models.to_str().unwrap()]);
    tui.enter("go");
    tui.shows("Listed.");
    let shown = |s: &str| s.lines().filter(|l| l.trim_start().starts_with('│') && l.contains("line-")).count();
    let screen = tui.contents();
    assert!(shown(&screen) < 10 && screen.contains("│ line-20"), "tool output collapsed:\n{screen}");
    assert!(!screen.contains("A DEEP THOUGHT"), "thinking collapsed:\n{screen}");
    tui.keys("\x0f"); // Ctrl+O: app.tools.expand
    tui.wait_for("every output line", |s| shown(s) == 20);
    tui.keys("\x14"); // Ctrl+T: app.thinking.toggle
    tui.shows("A DEEP THOUGHT about it.");
    tui.keys("\x10"); // Ctrl+P: app.model.cycleForward
    tui.shows("model: faux/faux-think");
    tui.keys("\x1b[Z"); // Shift+Tab: app.thinking.cycle
    tui.shows("thinking level: minimal");
    tui.keys("\x0c"); // Ctrl+L: app.model.select — the selector, narrowed by typing
    tui.shows("› faux/faux-think");
    tui.keys("faux-1");
    tui.shows("1 of");
    tui.keys("\r");
    tui.shows("model: faux/faux-1");
    // Alt+Up: app.message.dequeue — a message queued while the agent works comes back.
    tui.enter("slow please");
    tui.shows("Slow");
    tui.enter("queued words");
    tui.keys("\x1b[1;3A");
    editor(&mut tui, "queued words");
    // Ctrl+C aborts the slow answer, then clears the editor; Ctrl+D on it empty exits.
    tui.keys("\x03");
    tui.shows("aborted");
    tui.keys("\x03");
    editor(&mut tui, "");
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `keybindings.json` moves an action to another key (the old one is free again); Ctrl+G opens
/// `$EDITOR` on the message and takes back what it saved.
#[test]
fn keybindings_json_rebinds_and_ctrl_g_opens_the_editor() {
    let dir = scratch("keys-json");
    std::fs::create_dir_all(dir.join("agent")).unwrap();
    std::fs::write(dir.join("agent/keybindings.json"), r#"{"tui.editor.cursorLineStart": ["f5"]}"#).unwrap();
    let editor_script = dir.join("ed.sh");
    std::fs::write(&editor_script, "#!/bin/sh\nprintf 'from the editor: %s' \"$(cat \"$1\")\" > \"$1\"\n").unwrap();
    std::process::Command::new("chmod").arg("+x").arg(&editor_script).status().unwrap();
    let env = [("EDITOR", editor_script.to_str().unwrap()), ("VISUAL", "")];
    let mut tui = Tui::start_with_env(&dir, &json!([]), &[], &env);
    tui.shows("/help for commands");
    tui.keys("abc");
    editor(&mut tui, "abc");
    tui.keys("\x1b[15~X"); // F5: rebound cursorLineStart
    editor(&mut tui, "Xabc");
    tui.keys("\x01Y"); // Ctrl+A: no longer bound, types nothing
    editor(&mut tui, "XYabc");
    tui.keys("\x07"); // Ctrl+G
    editor(&mut tui, "from the editor: XYabc");
    tui.keys("\x03\x04");
    assert_eq!(tui.exit_code(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Ctrl+V (app.clipboard.pasteImage): the clipboard's image, read with `xclip` here, goes with
/// the next message to the model.
#[test]
fn ctrl_v_attaches_the_clipboards_image_to_the_next_message() {
    let dir = scratch("keys-paste-image");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(bin.join("xclip"), "#!/bin/sh\nprintf '\\211PNG\\r\\n\\032\\n\\0\\0\\0\\rIHDR'\n").unwrap();
    std::process::Command::new("chmod").arg("+x").arg(bin.join("xclip")).status().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let script = json!([{"text": "A PNG indeed.", "expect": ["what is this", "\"type\":\"image\"", "iVBORw0KGgo"]}]);
    let mut tui = Tui::start_with_env(&dir, &script, &[], &[("PATH", path.as_str()), ("WAYLAND_DISPLAY", "")]);
    tui.shows("/help for commands");
    tui.keys("\x16"); // Ctrl+V
    tui.shows("1 image(s) attached");
    tui.enter("what is this");
    tui.shows("A PNG indeed.");
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}
