//! The interactive mode driven through a real pseudo-terminal (expectrl), its screen read back
//! with a terminal emulator (vt100): prompts with tool calls, the footer against the session's
//! totals, Esc aborting a stream and a running tool, slash commands, `!cmd`, queued messages,
//! and every way out (Ctrl+D, Ctrl+C twice, SIGTERM) with `session_shutdown` exactly once.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod support;

use support::Flag;

use support::Succeeds;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::{Value, json};
use support::tui::{COLS, PATIENCE, ROWS, Tui, gate};
use support::{all_gone, contract_shape, running, scratch, wait_for_line_in};

/// The session file pi wrote under `dir/sessions`.
fn session_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for project in std::fs::read_dir(dir.join("sessions")).unwrap().flatten() {
        for file in std::fs::read_dir(project.path()).unwrap().flatten() {
            files.push(file.path());
        }
    }
    files.sort();
    files
}

/// Input/output/cache tokens and cost of every usage-carrying entry.
fn totals(file: &Path) -> (u64, u64, u64, u64, f64) {
    let mut t = (0, 0, 0, 0, 0.0);
    for line in std::fs::read_to_string(file).unwrap().lines() {
        let entry: Value = serde_json::from_str(line).unwrap();
        let usage = &entry["message"]["usage"];
        if entry["type"] == "message" && usage.is_object() {
            t.0 += usage["input"].as_u64().unwrap();
            t.1 += usage["output"].as_u64().unwrap();
            t.2 += usage["cacheRead"].as_u64().unwrap();
            t.3 += usage["cacheWrite"].as_u64().unwrap();
            t.4 += usage["cost"]["total"].as_f64().unwrap();
        }
    }
    t
}

fn audit(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("audit.txt")).unwrap_or_default().lines().map(str::to_owned).collect()
}

fn count(lines: &[String], what: &str) -> usize {
    lines.iter().filter(|l| *l == what).count()
}

#[test]
fn a_prompt_with_tool_calls_renders_the_session_is_written_and_the_footer_adds_up() {
    let dir = scratch("tui-prompt");
    let script = json!([
        {"thinking": "The user wants files.", "text": "Let me look.", "tools": [{"name": "bash", "arguments": {"command": "printf 'one\\ntwo\\n'"}}]},
        {"text": "There are two lines."}
    ]);
    let mut tui = Tui::start(&dir, &script, &["show me"]);
    let screen = tui.shows("There are two lines.");
    // Changed lines are written whole: the answer is in the byte stream itself, not only on
    // the emulated screen (what `expect`-style tools read).
    let raw = String::from_utf8_lossy(&tui.raw).into_owned();
    assert!(raw.contains("There are two lines.") && raw.contains("› show me"), "{raw:?}");
    assert!(screen.contains("› show me"), "{screen}");
    assert!(screen.contains("∴ thinking (21 characters)"), "thinking is collapsed:\n{screen}");
    assert!(screen.contains("⚙ bash printf"), "{screen}");
    assert!(screen.lines().any(|l| l.starts_with("⚙ bash") && l.trim_end().ends_with('✓')), "{screen}");
    assert!(screen.contains("│ two"), "{screen}");
    // The footer's figures are the session's totals.
    let files = session_files(&dir);
    assert_eq!(files.len(), 1);
    let (input, output, read, write, cost) = totals(&files[0]);
    let footer = format!("tokens in {input} out {output} cache {read}/{write} · ${cost:.6}");
    tui.wait_for(&footer, |s| s.contains(&footer));
    tui.enter("/session");
    let screen = tui.shows("session file:");
    assert!(screen.contains(&files[0].display().to_string()) || screen.contains("session id:"), "{screen}");
    assert!(screen.contains(&format!("tokens: in {input} out {output}")), "{screen}");
    // Ctrl+D on the empty editor exits; the session shut down once.
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);
    let written = std::fs::read_to_string(&files[0]).unwrap();
    assert!(written.contains("There are two lines.") && written.contains("show me"));
    let audit = audit(&dir);
    assert_eq!((count(&audit, "session_start"), count(&audit, "session_shutdown")), (1, 1), "{audit:?}");
}

#[test]
fn esc_aborts_a_streaming_turn_and_a_running_tool_without_orphans() {
    let dir = scratch("tui-abort");
    let pid = dir.join("tool.pid");
    let script = json!([
        {"text": "streaming very slowly, one chunk at a time, until someone presses escape", "chunkDelayMs": 300},
        {"text": "Sleeping.", "tools": [{"name": "bash", "arguments": {"command": format!("(sleep 60 & echo $! > {0}.child; wait) & echo $$ > {0}; wait", pid.display())}}]},
        {"text": "Back again."}
    ]);
    let mut tui = Tui::start(&dir, &script, &[]);
    tui.shows("/help for commands");
    tui.enter("stream please");
    tui.shows("streaming");
    tui.wait_for("working", |s| s.contains("working"));
    tui.keys("\x1b");
    let screen = tui.wait_for("aborted", |s| s.lines().any(|l| l.trim() == "aborted"));
    assert!(!screen.contains("until someone presses escape"), "the stream went on:\n{screen}");
    tui.wait_for("idle", |s| s.contains("/help for commands"));

    tui.enter("run the tool");
    let (shell, child) = (wait_for_line_in(&pid), wait_for_line_in(&dir.join("tool.pid.child")));
    assert!(running(&shell) && running(&child));
    tui.keys("\x1b");
    tui.wait_for("tool aborted", |s| s.lines().filter(|l| l.trim() == "aborted").count() == 2);
    assert!(all_gone(&[&shell, &child]), "the tool's process group outlived Esc");
    // The session goes on.
    tui.enter("and now?");
    tui.shows("Back again.");
    tui.enter("/quit");
    assert_eq!(tui.exit_code(), 0);
}

#[test]
fn slash_commands_and_shell_commands() {
    let dir = scratch("tui-commands");
    std::fs::create_dir_all(dir.join("agent")).unwrap();
    std::fs::write(dir.join("agent/settings.json"), r#"{"compaction": {"keepRecentTokens": 1}}"#).unwrap();
    let script = json!([
        {"text": "First answer."},
        {"text": "Second answer.", "expect": ["echo from-the-shell"]},
        {"text": "A summary of the talk."},
        {"text": "In the new session."}
    ]);
    let mut tui = Tui::start(&dir, &script, &[]);
    // A bracketed paste with newlines lands in the editor whole; Ctrl+U clears the line.
    tui.keys("\x1b[200~pasted one\npasted two\x1b[201~");
    tui.wait_for("a two-line paste", |s| s.contains("> pasted one") && s.contains("  pasted two"));
    tui.keys("\x15\x7f\x15");
    tui.wait_for("an empty editor", |s| !s.contains("pasted"));
    tui.enter("first");
    tui.shows("First answer.");
    // `!cmd` runs in the shell and goes into the next request's context.
    tui.enter("!echo from-the-shell");
    let screen = tui.shows("(exit 0)");
    assert!(screen.contains("$ echo from-the-shell") && screen.contains("  from-the-shell"), "{screen}");
    tui.enter("second");
    tui.shows("Second answer.");
    let first_file = session_files(&dir).pop().unwrap();
    let written = std::fs::read_to_string(&first_file).unwrap();
    assert!(written.contains(r#""role":"bashExecution""#) && written.contains("from-the-shell"), "{written}");

    tui.enter("/compact keep it short");
    tui.shows("A summary of the talk.");
    assert!(std::fs::read_to_string(&first_file).unwrap().contains(r#""type":"compaction""#));

    tui.enter("/tree");
    tui.shows("Session Tree");
    tui.wait_for("the branch listed", |s| s.contains("• user: first") && s.contains("• [compaction:"));
    tui.keys("\x1b");
    tui.wait_for("the tree closed", |s| !s.contains("Session Tree"));

    tui.enter("/new");
    tui.shows("new session: ");
    tui.enter("in the new one");
    tui.shows("In the new session.");
    assert_eq!(session_files(&dir).len(), 2);

    // The picker: this folder's sessions by their first message, count and age; typing narrows
    // it.
    tui.enter("/resume");
    tui.shows("Resume Session (Current Folder)");
    tui.wait_for("both sessions", |s| s.contains("│› in the new one") && s.contains("│  first"));
    let name = first_file.file_name().unwrap().to_str().unwrap().to_owned();
    tui.keys("firs");
    tui.wait_for("one left", |s| s.contains("│› first") && !s.contains("│  in the new one"));
    tui.keys("\r");
    let screen = tui.shows("resumed: ");
    // The resumed conversation (its context: the compaction summary, then what was kept) is on
    // screen again.
    assert!(screen.contains("A summary of the talk.") && screen.contains("Second answer."), "{screen}");
    tui.enter("/session");
    let screen = tui.shows("session file:");
    assert!(screen.contains(&name[name.len() - 9..]) && screen.contains("messages:"), "{screen}");
    assert!(!screen.contains("messages: 0"), "{screen}");

    tui.enter("/observe");
    tui.shows("traces this session: 3");
    tui.enter("/help");
    tui.shows("/compact [FOCUS]");
    tui.enter("/quit");
    assert_eq!(tui.exit_code(), 0);
    let audit = audit(&dir);
    assert_eq!(count(&audit, "session_shutdown"), 1, "{audit:?}");
}

#[test]
fn messages_typed_while_the_agent_works_are_queued_and_delivered() {
    let dir = scratch("tui-queue");
    let go = dir.join("go");
    let script = json!([
        {"text": "Waiting.", "tools": [{"name": "bash", "arguments": {"command": format!("while [ ! -f {} ]; do sleep 0.02; done", go.display())}}]},
        {"text": "Steered as asked.", "expect": ["turn left"]},
        {"text": "Followed up too.", "expect": ["then stop"]}
    ]);
    let mut tui = Tui::start(&dir, &script, &[]);
    tui.enter("go");
    tui.shows("⚙ bash");
    tui.enter("turn left");
    tui.shows("queued steer: turn left");
    tui.keys("then stop");
    tui.shows("then stop");
    tui.keys("\x1b\r"); // Alt+Enter
    tui.shows("queued follow-up: then stop");
    std::fs::write(&go, "").unwrap();
    tui.shows("Followed up too.");
    let screen = tui.contents();
    assert!(screen.contains("Steered as asked.") && !screen.contains("queued"), "{screen}");
    tui.keys("\x03");
    tui.shows("Ctrl+C again");
    tui.keys("\x03");
    assert_eq!(tui.exit_code(), 0);
}

#[test]
fn sigterm_ends_the_session_once_and_restores_the_terminal() {
    let dir = scratch("tui-sigterm");
    let mut tui = Tui::start(&dir, &json!([{"text": "slow", "chunkDelayMs": 1000}]), &[]);
    tui.shows("/help for commands");
    tui.enter("hi");
    tui.shows("working");
    assert!(Command::new("kill").args(["-TERM", &tui.pid().to_string()]).status().unwrap().success());
    assert_eq!(tui.exit_code(), 128 + 15);
    let audit = audit(&dir);
    assert_eq!(count(&audit, "session_shutdown"), 1, "{audit:?}");
}

#[test]
fn without_a_terminal_it_says_what_to_use_instead() {
    let out = support::pi().stdin(std::process::Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("-p") && stderr.contains("--mode rpc"), "{stderr}");
}

#[test]
fn a_listed_extension_that_fails_to_load_is_a_dialog_to_dismiss_before_anything_else() {
    let dir = scratch("tui-load-error");
    let script = json!([{"text": "Answered without the gate."}]);
    // The gate extension exits before registering.
    let mut tui = Tui::start_with_env(&dir, &script, &[], &[("PY_EXT_MODE", "early")]);
    let screen = tui.shows("Extension not loaded");
    assert!(screen.contains("gate.py") && screen.contains("Enter or Esc to dismiss"), "{screen}");
    // Typing goes nowhere while it shows; Enter dismisses it, and then the editor works.
    tui.keys("ignored");
    tui.keys("\r");
    tui.wait_for("the dialog gone", |s| !s.contains("Extension not loaded"));
    assert!(!tui.contents().contains("ignored"), "{}", tui.contents());
    tui.enter("hello");
    tui.shows("Answered without the gate.");
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_interactive_mode_emits_the_same_contract_events_as_print_mode() {
    let dir = scratch("tui-parity");
    let script = json!([
        {"text": "Checking.", "tools": [{"name": "bash", "arguments": {"command": "echo parity"}}]},
        {"text": "All good."}
    ]);
    std::fs::write(dir.join("print-script.json"), script.to_string()).unwrap();
    let print_events = dir.join("print.jsonl");
    support::pi()
        .args(["-p", "go", "--faux-script"])
        .arg(dir.join("print-script.json"))
        .flag("-e", gate())
        .flag("--session", dir.join("print-session.jsonl"))
        .flag("--events-jsonl", &print_events)
        .succeeds();

    let tui_events = dir.join("tui.jsonl");
    let mut tui = Tui::start(&dir, &script, &["--events-jsonl", tui_events.to_str().unwrap(), "go"]);
    tui.shows("All good.");
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);
    let skip = ["pi.session.read"];
    let (print, interactive) = (contract_shape(&print_events, &skip), contract_shape(&tui_events, &skip));
    assert!(print.iter().any(|(name, _, parent)| name == "pi.agent.tool_call" && parent == "pi.agent.turn"));
    assert_eq!(print, interactive);
}

#[test]
fn the_footer_and_observe_show_export_health_live() {
    let dir = scratch("tui-observe");
    let receiver = pi_observe::otel::testing::Receiver::start(vec![]);
    let script = json!([{"text": "Exported answer."}]);
    let env = [("OTEL_BSP_SCHEDULE_DELAY", "50"), ("PI_TRACE_URL_TEMPLATE", "http://traces.example/{trace_id}")];
    let mut tui = Tui::start_with_env(&dir, &script, &["--otlp", &receiver.endpoint, "hello"], &env);
    tui.shows("Exported answer.");
    // The footer follows the exporter while the session stays open.
    let screen = tui.wait_for("spans exported", |s| {
        s.lines().any(|l| l.starts_with("telemetry otlp · 1 traces · exported ") && !l.contains("exported 0 "))
    });
    assert!(screen.contains("dropped 0"), "{screen}");
    tui.enter("/observe");
    let screen = tui.shows("traces this session: 1");
    assert!(screen.contains("telemetry sinks: otlp") && screen.contains("dropped: 0"), "{screen}");
    let line = screen.lines().find(|l| l.starts_with("last trace: ")).unwrap().trim_end();
    let trace = line["last trace: ".len()..].split_whitespace().next().unwrap();
    assert!(line.ends_with(&format!("http://traces.example/{trace}")), "{line}");
    // It is the trace the receiver gets for the prompt (its batch may still be on its way).
    let deadline = Instant::now() + PATIENCE;
    while receiver.spans().iter().filter(|s| hex(&s.trace_id) == trace).count() < 3 {
        assert!(Instant::now() < deadline, "the prompt's trace {trace} was not exported");
        std::thread::yield_now();
    }
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn reload_reads_skills_again_and_restarts_the_extensions_and_skills_run_as_prompts() {
    let dir = scratch("tui-reload");
    let skills = dir.join("skills");
    std::fs::create_dir_all(&skills).unwrap();
    let script = json!([{"text": "Greeted.", "expect": ["Say hello in French."]}]);
    let mut tui = Tui::start(&dir, &script, &["--skills", skills.to_str().unwrap()]);
    tui.shows("/help for commands");
    std::fs::create_dir_all(skills.join("greet")).unwrap();
    std::fs::write(
        skills.join("greet/SKILL.md"),
        "---\nname: greet\ndescription: Greets.\n---\nSay hello in French.\n",
    )
    .unwrap();
    tui.enter("/reload");
    tui.shows("reloaded: 1 extensions, 1 skills, 0 prompt templates");
    tui.enter("/skill:greet");
    tui.shows("Greeted.");
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);
    let audit = audit(&dir);
    let lifecycle: Vec<&str> =
        audit.iter().map(String::as_str).filter(|l| l.starts_with("session_") || *l == "shutdown").collect();
    // The first process: started, shut down by the reload; the second: started, shut down at exit.
    assert_eq!(
        lifecycle,
        ["session_start", "session_shutdown", "shutdown", "session_start", "session_shutdown", "shutdown"],
        "{audit:?}"
    );
}

/// An extension's `ctx.ui.confirm` is a dialog in the terminal: `y` lets the tool run, `n`
/// blocks it; `notify` lands in the transcript and `setStatus` above the editor.
#[test]
fn an_extensions_confirm_dialog_is_answered_yes_and_no_in_the_terminal() {
    let dir = scratch("tui-confirm");
    let extension = dir.join("ask.mjs");
    std::fs::write(
        &extension,
        r#"export default function (pi) {
  pi.on("tool_call", async (event, ctx) => {
    ctx.ui.setStatus("ask", "asking-status");
    ctx.ui.notify("about to ask", "info");
    const ok = await ctx.ui.confirm("Run this?", event.input.command);
    return ok ? undefined : { block: true, reason: "Refused in the dialog" };
  });
}
"#,
    )
    .unwrap();
    let script = json!([
        {"text": "Running.", "tools": [{"name": "bash", "arguments": {"command": "echo yes-ran"}}]},
        {"text": "First done.", "expect": ["yes-ran"]},
        {"text": "Again.", "tools": [{"name": "bash", "arguments": {"command": "echo no-ran"}}]},
        {"text": "Second done.", "expect": ["Refused in the dialog"]}
    ]);
    let mut tui = Tui::start(&dir, &script, &["-e", extension.to_str().unwrap()]);
    tui.enter("first");
    let screen = tui.shows("Run this?");
    assert!(screen.contains("echo yes-ran") && screen.contains("Yes") && screen.contains("No"), "{screen}");
    assert!(screen.contains("asking-status") && screen.contains("about to ask"), "{screen}");
    tui.keys("y");
    tui.shows("First done.");
    tui.enter("second");
    tui.wait_for("the second dialog", |s| s.contains("Run this?") && s.contains("echo no-ran"));
    tui.keys("n");
    tui.shows("Second done.");
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `ctx.ui.custom`: a component the extension renders is drawn over the screen, gets the keys
/// (as terminal bytes) and the width, redraws on `requestRender`, and closes with `done`.
#[test]
fn an_extensions_custom_component_is_drawn_and_driven_by_keys() {
    let dir = scratch("tui-custom");
    let extension = dir.join("counter.mjs");
    std::fs::write(
        &extension,
        r#"export default function (pi) {
  pi.registerCommand("counter", {
    description: "A counter",
    handler: async (_args, ctx) => {
      const result = await ctx.ui.custom((tui, theme, _kb, done) => {
        let count = 0;
        return {
          render: (width) => [theme.fg("accent", `counter=${count}`), `width-ok=${width > 20}`, "up adds, esc closes"],
          handleInput: (data) => {
            if (data === "\x1b[A") count += 1;
            if (data === "\x1b") done(`closed at ${count}`);
            tui.requestRender();
          },
        };
      });
      ctx.ui.notify(`custom returned: ${result}`, "info");
    },
  });
}
"#,
    )
    .unwrap();
    let mut tui = Tui::start(&dir, &json!([]), &["-e", extension.to_str().unwrap()]);
    tui.enter("/counter");
    tui.wait_for("the component", |s| s.contains("counter=0") && s.contains("width-ok=true"));
    tui.keys("\x1b[A");
    tui.shows("counter=1");
    tui.keys("\x1b[A");
    tui.shows("counter=2");
    tui.keys("\x1b");
    tui.shows("custom returned: closed at 2");
    assert!(!tui.contents().contains("up adds, esc closes"), "closed: {}", tui.contents());
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Upstream's own snake (its npm package's example, unmodified): drawn in pi's screen, driven by
/// keys; Esc pauses it (it saves its state with `appendEntry`), `/snake` again resumes it paused
/// from the session, `q` quits.
#[test]
#[ignore = "needs upstream's npm packages: run by scripts/test"]
fn upstreams_snake_is_drawn_driven_and_resumed() {
    let dir = scratch("tui-upstream-snake");
    let agent = support::upstream_agent();
    let snake = agent.join("js/node_modules/@mariozechner/pi-coding-agent/examples/extensions/snake.ts");
    let copy = dir.join("snake.ts");
    std::fs::copy(&snake, &copy).unwrap();
    let agent_env = agent.to_str().unwrap();
    let mut tui =
        Tui::start_with_env(&dir, &json!([]), &["-e", copy.to_str().unwrap()], &[("PI_CODING_AGENT_DIR", agent_env)]);
    tui.enter("/snake");
    tui.wait_for("the game", |s| s.contains("SNAKE") && s.contains("Score: 0"));
    tui.keys("\x1b[A");
    tui.keys("\x1b");
    tui.wait_for("the game to close", |s| !s.contains("Score: 0"));
    tui.enter("/snake");
    tui.shows("PAUSED");
    tui.keys("q");
    tui.wait_for("the game to end", |s| !s.contains("SNAKE"));
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `pi.registerShortcut`: the key (Ctrl+Alt+K, written as upstream's id in any modifier order)
/// runs the extension's handler with a ctx whose UI is the screen's; other keys still type.
#[test]
fn an_extensions_shortcut_runs_its_handler() {
    let dir = scratch("tui-shortcut");
    let extension = dir.join("keys.mjs");
    std::fs::write(
        &extension,
        r#"export default function (pi) {
  let presses = 0;
  pi.registerShortcut("alt+ctrl+k", { description: "Counts", handler: async (ctx) => {
    presses += 1;
    ctx.ui.notify(`shortcut pressed ${presses}`);
  } });
}
"#,
    )
    .unwrap();
    let mut tui = Tui::start(&dir, &json!([]), &["-e", extension.to_str().unwrap()]);
    tui.shows("/help for commands");
    tui.keys("\x1b\x0b");
    tui.shows("shortcut pressed 1");
    tui.keys("\x1b\x0b");
    tui.shows("shortcut pressed 2");
    tui.keys("k");
    tui.wait_for("the typed key in the editor", |s| s.lines().any(|l| l.starts_with("> k")));
    tui.keys("\x7f");
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Overlays (`ctx.ui.custom(…, { overlay: true, overlayOptions })`) go where pi-tui puts them
/// (here the top-left and bottom-right corners) and stack: both are drawn, the last opened gets
/// the keys and closes first.
#[test]
fn overlays_are_placed_and_stacked() {
    let dir = scratch("tui-overlays");
    let extension = dir.join("overlays.mjs");
    std::fs::write(
        &extension,
        r#"export default function (pi) {
  const panel = (label) => (_tui, _theme, _kb, done) => ({
    render: (width) => [`[${label} ${width}]`],
    handleInput: (data) => { if (data === "\r") done(label); },
  });
  pi.registerCommand("two", { description: "Two overlays", handler: async (_a, ctx) => {
    const first = ctx.ui.custom(panel("corner-a"), { overlay: true, overlayOptions: { anchor: "top-left", width: 20 } });
    const second = ctx.ui.custom(panel("corner-b"), { overlay: true, overlayOptions: { anchor: "bottom-right", width: "25%" } });
    const closed = [];
    await Promise.all([first.then((r) => closed.push(r)), second.then((r) => closed.push(r))]);
    ctx.ui.notify(`closed ${closed.join(" then ")}`);
  } });
}
"#,
    )
    .unwrap();
    let mut tui = Tui::start(&dir, &json!([]), &["-e", extension.to_str().unwrap()]);
    tui.enter("/two");
    let screen = tui.wait_for("both overlays", |s| s.contains("[corner-a 20]") && s.contains("[corner-b"));
    let lines: Vec<&str> = screen.lines().collect();
    assert!(lines[0].starts_with("[corner-a 20]"), "top-left: {screen}");
    let width_b = usize::from(COLS) / 4;
    let last = lines.iter().rev().find(|l| l.contains("[corner-b")).unwrap();
    let column = last.find("[corner-b").map(|at| last[..at].chars().count());
    assert_eq!(column, Some(usize::from(COLS) - width_b), "bottom-right: {screen}");
    tui.keys("\r");
    tui.wait_for("the top one closed", |s| !s.contains("[corner-b") && s.contains("[corner-a"));
    tui.keys("\r");
    tui.shows("closed corner-b then corner-a");
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `!!cmd` runs like `!cmd` but its output stays out of the model's context (upstream's `!!`):
/// recorded with `excludeFromContext`, not in the next request.
#[test]
fn double_bang_commands_stay_out_of_the_context() {
    let dir = scratch("tui-double-bang");
    let script = json!([{"text": "Seen.", "expect": ["shown-out"]}]);
    let mut tui = Tui::start(&dir, &script, &[]);
    tui.enter("!!echo hidden-out");
    tui.shows("hidden-out");
    tui.enter("!echo shown-out");
    tui.shows("shown-out");
    tui.enter("go");
    tui.shows("Seen.");
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);
    let sessions: Vec<_> = walk(&dir.join("sessions"));
    let written = std::fs::read_to_string(sessions.first().expect("a session file")).unwrap();
    let hidden = written.lines().find(|l| l.contains("hidden-out")).unwrap();
    assert!(hidden.contains(r#""excludeFromContext":true"#), "{hidden}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every `.jsonl` file under `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            found.push(path);
        }
    }
    found
}

/// An unknown `/word` is said as such and costs no model call; a path is still a prompt.
#[test]
fn unknown_slash_commands_are_not_sent_to_the_model() {
    let dir = scratch("tui-unknown-command");
    let script = json!([{"text": "A path prompt.", "expect": ["/usr/bin/env is"]}]);
    let mut tui = Tui::start(&dir, &script, &[]);
    tui.enter("/frobnicate now");
    tui.shows("unknown command: /frobnicate (see /help)");
    tui.enter("/usr/bin/env is what?");
    tui.shows("A path prompt.");
    assert!(!tui.contents().contains("faux provider:"), "{}", tui.contents());
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Upstream's everyday slash commands, each as typed: what each shows (and `/copy` writes the last
/// answer to the terminal's clipboard as OSC 52; `/name` names the session; `/export` writes it).
#[test]
fn everyday_slash_commands_do_what_upstream_does() {
    use base64::Engine as _;
    let dir = scratch("tui-slash");
    let mut tui = Tui::start(&dir, &json!([{"text": "Answer to copy."}]), &[]);
    tui.enter("hello");
    tui.shows("Answer to copy.");
    let rows = [
        ("/hotkeys", "tui.editor.undo"),
        ("/changelog", "### Still different from upstream"),
        ("/login", "pi offers no subscription logins"),
        ("/logout", "pi offers no subscription logins"),
        ("/share", "pi does not upload sessions"),
        ("/name release prep", "session name: release prep"),
        ("/copy", "copied 15 characters"),
    ];
    for (typed, shown) in rows {
        tui.enter(typed);
        tui.shows(shown);
    }
    // /export writes the session as a page.
    let page = dir.join("exported.html");
    tui.enter(&format!("/export {}", page.display()));
    tui.shows("exported to");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("Answer to copy.") && html.contains("release prep"), "{html}");
    let clip = base64::engine::general_purpose::STANDARD.encode("Answer to copy.");
    let osc = format!("\x1b]52;c;{clip}\x07");
    assert!(String::from_utf8_lossy(&tui.raw).contains(&osc), "no OSC 52 with the answer");
    tui.enter("/name");
    tui.shows("session name: release prep");
    // /clone: the branch as it is, in a new session file.
    let files = |dir: &Path| {
        std::fs::read_dir(dir.join("sessions"))
            .unwrap()
            .flatten()
            .flat_map(|p| std::fs::read_dir(p.path()).unwrap().flatten())
            .count()
    };
    let before = files(&dir);
    tui.enter("/clone");
    tui.shows("cloned: ");
    assert_eq!(files(&dir), before + 1, "a new session file");
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Upstream's editing keys in a real terminal: Ctrl+W and Alt+Backspace cut a word, Ctrl+Y
/// yanks it back, Alt+B / Ctrl+Left move by words, Ctrl+K cuts to the end, Ctrl+_ undoes; a
/// Ctrl letter nothing is bound to types nothing.
#[test]
fn editing_keys_move_cut_yank_and_undo() {
    let dir = scratch("tui-editing-keys");
    let mut tui = Tui::start(&dir, &json!([]), &[]);
    let editor = |tui: &mut Tui, want: &str| {
        let line = format!("> {want}");
        tui.wait_for(&line, |s| s.lines().any(|l| l.trim_end() == line.trim_end()));
    };
    tui.keys("alpha beta gamma");
    editor(&mut tui, "alpha beta gamma");
    tui.keys("\x17"); // Ctrl+W
    editor(&mut tui, "alpha beta");
    tui.keys("\x1b\x7f"); // Alt+Backspace
    editor(&mut tui, "alpha");
    tui.keys("\x19"); // Ctrl+Y: the last cut
    editor(&mut tui, "alpha beta");
    tui.keys("\x1bb\x0b"); // Alt+B, Ctrl+K
    editor(&mut tui, "alpha");
    tui.keys("\x1f"); // Ctrl+_ (undo)
    editor(&mut tui, "alpha beta");
    tui.keys("\x07"); // Ctrl+G: nothing bound here, nothing typed
    tui.keys("\x1b[1;5D"); // Ctrl+Left
    tui.keys("X");
    editor(&mut tui, "Xalpha beta");
    tui.keys("\x15\x04");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// What was sent is in the editor's history in the next run: `pi -c` continues the latest
/// session and Up brings back its prompts (as upstream fills the history from the session).
#[test]
fn history_carries_over_to_the_next_run() {
    let dir = scratch("tui-history");
    let mut first = Tui::start(&dir, &json!([{"text": "One."}]), &[]);
    first.enter("first prompt from run one");
    first.shows("One.");
    first.keys("\x04");
    assert_eq!(first.exit_code(), 0);
    let mut second = Tui::start(&dir, &json!([]), &["-c"]);
    second.shows("resumed ");
    second.keys("\x1b[A");
    second.wait_for("the earlier prompt", |s| s.lines().any(|l| l.trim_end() == "> first prompt from run one"));
    second.keys("\x15\x04");
    // Gone before its folder is removed (it writes there until it exits).
    assert_eq!(second.exit_code(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Ctrl+Z hands the terminal back (main screen, cooked) and stops pi as job control expects;
/// the shell's `fg` continues it, back on its screen, taking keys again.
#[test]
fn ctrl_z_suspends_and_fg_resumes() {
    let dir = scratch("tui-suspend");
    std::fs::write(dir.join("script.json"), "[]").unwrap();
    let mut cmd = Command::new("bash");
    cmd.args(["--norc", "--noprofile", "-i"])
        .current_dir(&dir)
        .env("PI_CODING_AGENT_DIR", dir.join("agent"))
        .env("PI_CODING_AGENT_SESSION_DIR", dir.join("sessions"))
        .env("TERM", "xterm-256color")
        .env("PS1", "$ ");
    let mut session = expectrl::session::Session::spawn(cmd).unwrap();
    session.get_process_mut().set_window_size(COLS, ROWS).unwrap();
    let mut tui = Tui { session, screen: vt100::Parser::new(ROWS, COLS, 0), raw: Vec::new() };
    tui.shows("$ ");
    tui.keys(&format!("{} --no-session --faux-script script.json\r", env!("CARGO_BIN_EXE_pi")));
    tui.shows("/help for commands");
    tui.keys("before");
    tui.wait_for("the typed text", |s| s.lines().any(|l| l.trim_end() == "> before"));
    tui.keys("\x1a");
    tui.shows("Stopped");
    // This bash does not echo what is typed at its prompt: the keys go without waiting for it.
    tui.keys("fg\r");
    tui.shows("/help for commands");
    tui.keys(" after");
    tui.wait_for("the editor again", |s| s.lines().any(|l| l.trim_end() == "> before after"));
    tui.keys("\x15\x04");
    tui.keys("exit\r");
    std::fs::remove_dir_all(&dir).unwrap();
}
