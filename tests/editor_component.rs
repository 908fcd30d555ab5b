//! An extension's components in a real pseudo-terminal: `ctx.ui.setEditorComponent` (an
//! extension's editor takes the place of pi's — drawn from its own lines, given the keys, its
//! Enter sending the message, its text in step with pi's — and `undefined` gives pi's editor
//! back; upstream's own vim-like `modal-editor` example, unmodified, switches modes and sends
//! prompts), and a component handing the terminal to a full-screen program.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod support;

use serde_json::json;
use support::scratch;
use support::tui::Tui;

/// An editor of the extension's own (no upstream package): pi draws its lines, sends it the keys
/// and the width, sends its Enter's text as the prompt and gives it the text pi puts in the
/// editor; a shortcut puts pi's editor back, with the text.
#[test]
fn an_extensions_editor_replaces_pis() {
    let dir = scratch("editor-component-own");
    let extension = dir.join("mine.mjs");
    std::fs::write(
        &extension,
        r#"class Mine {
  constructor(tui) { this.tui = tui; this.text = ""; }
  getText() { return this.text; }
  setText(text) { this.text = text; this.onChange?.(text); }
  handleInput(data) {
    if (data === "\r") {
      const text = this.text;
      this.setText("");
      this.onSubmit?.(text);
    } else if (data.length === 1 && data >= " ") {
      this.setText(this.text + data);
    } else {
      this.setText(this.text + `<${JSON.stringify(data).slice(1, -1)}>`);
    }
  }
  render(width) { return [`+- mine ${width} -+`, `| ${this.text}_`, "+------+"]; }
  invalidate() {}
}
export default function (pi) {
  pi.on("session_start", (_event, ctx) => ctx.ui.setEditorComponent((tui) => new Mine(tui)));
  pi.registerCommand("fill", { description: "Fills the editor", handler: async (_args, ctx) => ctx.ui.setEditorText("filled by pi") });
  pi.registerShortcut("ctrl+alt+p", { description: "pi's editor back", handler: async (ctx) => ctx.ui.setEditorComponent(undefined) });
}
"#,
    )
    .unwrap();
    let script = json!([{"text": "The answer to the typed prompt."}]);
    let mut tui = Tui::start(&dir, &script, &["-e", extension.to_str().unwrap()]);
    tui.shows("+- mine 120 -+");
    // Typed keys reach it; Alt+B as the terminal bytes it reads.
    tui.keys("hi there");
    tui.shows("| hi there_");
    tui.keys("\x1bb");
    tui.shows("| hi there<\\u001bb>_");
    tui.keys("\r");
    let screen = tui.shows("The answer to the typed prompt.");
    assert!(screen.contains("hi there<\\u001bb>"), "the message sent was its text:\n{screen}");
    tui.wait_for("its emptied editor", |s| s.contains("| _"));
    tui.enter("/fill");
    tui.shows("| filled by pi_");
    // Ctrl+Alt+P (the extension's shortcut): pi's editor is back, the text with it.
    tui.keys("\x1b\x10");
    let screen = tui.wait_for("pi's own editor", |s| s.lines().any(|l| l.starts_with("> filled by pi")));
    assert!(!screen.contains("mine 120"), "{screen}");
    tui.keys("\x15");
    tui.wait_for("an empty editor", |s| !s.contains("filled by pi"));
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Upstream's `modal-editor` example (its npm package's copy, unmodified): built on upstream's
/// `CustomEditor` with its keybindings, it starts in insert mode, Esc switches to normal mode
/// (its label in the bottom border), `h` moves left there, `i` inserts again, Enter sends the
/// prompt, Up recalls it, Ctrl+C (upstream's `app.clear`, carried out by pi) clears it, pi's slash
/// commands complete in it, and Ctrl+D on the empty editor exits.
#[test]
#[ignore = "needs upstream's npm packages: run by scripts/test"]
fn upstreams_modal_editor_edits_and_sends() {
    let dir = scratch("editor-component-modal");
    let agent = support::upstream_agent();
    let example = agent.join("js/node_modules/@mariozechner/pi-coding-agent/examples/extensions/modal-editor.ts");
    let copy = dir.join("modal-editor.ts");
    std::fs::copy(&example, &copy).unwrap();
    let script = json!([{"text": "Modal answer."}]);
    let agent_env = agent.to_str().unwrap();
    let mut tui =
        Tui::start_with_env(&dir, &script, &["-e", copy.to_str().unwrap()], &[("PI_CODING_AGENT_DIR", agent_env)]);
    tui.shows(" INSERT ");
    tui.keys("hello world");
    tui.shows("hello world");
    tui.keys("\x1b");
    tui.shows(" NORMAL ");
    tui.keys("hhhhh");
    tui.keys("i");
    tui.shows(" INSERT ");
    tui.keys("big ");
    tui.shows("hello big world");
    tui.keys("\r");
    let screen = tui.shows("Modal answer.");
    assert!(screen.contains("hello big world"), "{screen}");
    tui.keys("\x1b[A");
    tui.wait_for("the message recalled", |s| s.matches("hello big world").count() == 2);
    tui.keys("\x03");
    tui.wait_for("the editor cleared", |s| s.matches("hello big world").count() == 1);
    // The app's completions, as upstream gives a custom editor: pi's slash commands.
    tui.keys("/hotk");
    tui.shows("→ hotkeys");
    tui.keys("\t");
    tui.wait_for("the completed command", |s| s.lines().any(|l| l.trim_end() == "/hotkeys"));
    tui.keys("\x03");
    tui.wait_for("the editor cleared", |s| !s.contains("/hotkeys"));
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Upstream's way to run a full-screen program from a component (its `interactive-shell`
/// example): `tui.stop()` hands the terminal over, `spawnSync(…, {stdio: "inherit"})` runs on it
/// — reading the user's keys — and `tui.start()` gives it back to pi's screen.
#[test]
fn a_component_hands_the_terminal_to_a_program_and_takes_it_back() {
    let dir = scratch("editor-component-handoff");
    let extension = dir.join("full.mjs");
    std::fs::write(
        &extension,
        r#"import { spawnSync } from "node:child_process";
export default function (pi) {
  pi.registerCommand("full", { description: "A full-screen program", handler: async (_a, ctx) => {
    const code = await ctx.ui.custom((tui, _theme, _kb, done) => {
      tui.stop();
      const run = spawnSync("sh", ["-c", "printf 'PROGRAM-ON-TTY\\n'; read answer; test \"$answer\" = yes"], { stdio: "inherit" });
      tui.start();
      done(run.status);
      return { render: () => [], invalidate() {} };
    });
    ctx.ui.notify(`program exited ${code}`);
  } });
}
"#,
    )
    .unwrap();
    let mut tui = Tui::start(&dir, &json!([]), &["-e", extension.to_str().unwrap()]);
    tui.shows("/help for commands");
    tui.enter("/full");
    tui.shows("PROGRAM-ON-TTY");
    tui.keys("yes\r");
    tui.shows("program exited 0");
    tui.shows("/help for commands");
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `ctx.ui.onTerminalInput`: the extension hears each key the terminal reads (as its bytes),
/// while the keys still do what they do in pi; unsubscribing stops it.
#[test]
fn an_extension_hears_the_terminals_input() {
    let dir = scratch("editor-component-input");
    let extension = dir.join("listen.mjs");
    std::fs::write(
        &extension,
        r#"export default function (pi) {
  const heard = [];
  let stop;
  pi.on("session_start", (_e, ctx) => { stop = ctx.ui.onTerminalInput((data) => { heard.push(data); }); ctx.ui.setStatus("l", "listening"); });
  pi.registerCommand("heard", { description: "What was heard", handler: async (_a, ctx) => {
    ctx.ui.notify(`heard ${JSON.stringify(heard.slice(0, 4))}`);
    stop();
  } });
}
"#,
    )
    .unwrap();
    let mut tui = Tui::start(&dir, &json!([]), &["-e", extension.to_str().unwrap()]);
    tui.shows("listening");
    tui.keys("xy\x1b[D\x1b[C");
    tui.wait_for("the typed text", |s| s.lines().any(|l| l.trim_end() == "> xy"));
    tui.keys("\x15");
    tui.wait_for("the cleared editor", |s| s.lines().any(|l| l.trim_end() == ">"));
    tui.enter("/heard");
    tui.shows(r#"heard ["x","y","\u001b[D","\u001b[C"]"#);
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}
