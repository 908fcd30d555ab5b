//! The pickers and completions of the interactive mode in a real pseudo-terminal: `pi -r` opens
//! the session picker at start (the chosen session's conversation comes back; outside the
//! interactive mode `-r` is a one-line usage error); `@` lists the project's files — never an
//! ignored one — and Tab completes paths.

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
    tui.shows("Resume Session (Current Folder)");
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

/// The session picker's own keys (upstream's `app.session.*`): Tab shows every project's
/// sessions, Ctrl+R renames, Ctrl+N shows only named ones, Ctrl+P shows paths, Ctrl+S cycles the
/// sort, Ctrl+D deletes after a confirmation.
#[test]
fn the_session_picker_renames_filters_sorts_and_deletes() {
    let dir = scratch("pickers-sessions");
    let other = dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(dir.join("script.json"), json!([{"text": "Noted."}]).to_string()).unwrap();
    for (cwd, prompt) in [(&dir, "alpha question"), (&dir, "beta question"), (&other, "gamma elsewhere")] {
        let out = pi()
            .args(["-p", prompt, "--cwd"])
            .arg(cwd)
            .flag("--faux-script", dir.join("script.json"))
            .env("PI_CODING_AGENT_DIR", dir.join("agent"))
            .env("PI_CODING_AGENT_SESSION_DIR", dir.join("sessions"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let mut tui = Tui::start(&dir, &json!([]), &["-r"]);
    let screen =
        tui.wait_for("this folder's two", |s| s.contains("│› beta question") && s.contains("│  alpha question"));
    assert!(!screen.contains("gamma elsewhere"), "{screen}");
    tui.keys("\t");
    tui.shows("Resume Session (All)");
    tui.shows("gamma elsewhere");
    tui.keys("\t");
    tui.shows("Resume Session (Current Folder)");
    // Ctrl+R: the selected (newest) session named; it shows by its name.
    tui.keys("\x12");
    tui.shows("Rename Session");
    tui.keys("release notes\r");
    tui.shows("│› release notes");
    tui.keys("\x0e"); // Ctrl+N: named only
    tui.shows("Name: Named");
    tui.wait_for("only the named one", |s| !s.contains("alpha question"));
    tui.keys("\x0e\x10"); // all again; Ctrl+P: paths
    tui.shows("path (on)");
    tui.shows(".jsonl");
    tui.keys("\x13"); // Ctrl+S
    tui.shows("Sort: Recent");
    tui.keys("\x1b[B\x04"); // the older one; Ctrl+D
    tui.shows("Delete session?");
    tui.keys("\r");
    tui.wait_for("alpha's session gone", |s| s.contains("Session deleted") && !s.contains("alpha question"));
    tui.keys("\x1b");
    tui.wait_for("the picker closed", |s| !s.contains("Resume Session"));
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);
    let sessions = dir.join("sessions");
    let texts: Vec<String> = std::fs::read_dir(&sessions)
        .unwrap()
        .flatten()
        .flat_map(|d| std::fs::read_dir(d.path()).unwrap().flatten())
        .map(|f| std::fs::read_to_string(f.path()).unwrap())
        .filter(|t| t.contains(r#""type":"message""#))
        .collect();
    assert_eq!(texts.len(), 2, "alpha's file deleted (the others: beta's, gamma's)");
    assert!(texts.iter().any(|t| t.contains("beta question") && t.contains(r#""name":"release notes""#)));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn at_references_list_project_files_but_not_ignored_ones_and_tab_completes_paths() {
    let dir = scratch("pickers-complete");
    for file in ["src/main.rs", "src/lib.rs", "build/main.rs"] {
        std::fs::create_dir_all(dir.join(file).parent().unwrap()).unwrap();
        std::fs::write(dir.join(file), "fn main() {}").unwrap();
    }
    std::fs::write(dir.join(".gitignore"), "build/\n").unwrap();
    let mut tui = Tui::start(&dir, &json!([]), &[]);
    tui.shows("/help for commands");
    tui.keys("look at @mai");
    let screen = tui.shows("› @src/main.rs");
    assert!(!screen.contains("build/main.rs"), "an ignored file is offered:\n{screen}");
    tui.keys("\t");
    tui.wait_for("the reference taken", |s| s.lines().any(|l| l.trim_end() == "> look at @src/main.rs"));
    // Tab on a path: one fits, so it is completed at once; two share a start, so they are listed.
    tui.keys("and src/l\t");
    tui.wait_for("the path completed", |s| s.lines().any(|l| l.trim_end() == "> look at @src/main.rs and src/lib.rs"));
    tui.keys("src/\t");
    tui.shows("› src/lib.rs");
    tui.keys("\x1b[B\r");
    tui.wait_for("the second taken", |s| s.lines().any(|l| l.trim_end().ends_with("src/lib.rs src/main.rs")));
    // Tab after `/word`: a command name, at once when one fits, else listed.
    tui.keys("\x03/scop\t");
    tui.wait_for("the command completed", |s| s.lines().any(|l| l.trim_end() == "> /scoped-models"));
    tui.keys("\x03/se\t");
    tui.shows("› /session");
    tui.keys("\x1b[B\t");
    tui.wait_for("the second command taken", |s| s.lines().any(|l| l.trim_end() == "> /settings"));
    tui.keys("\x03\x04");
    assert_eq!(tui.exit_code(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `/settings` lists the common options with their values; Enter moves one to its next value in
/// `~/.pi/agent/settings.json` (other keys kept) and the session takes it.
#[test]
fn settings_are_changed_in_the_global_settings_file() {
    let dir = scratch("pickers-settings");
    std::fs::create_dir_all(dir.join("agent")).unwrap();
    std::fs::write(dir.join("agent/settings.json"), r#"{"defaultModel": "faux-1"}"#).unwrap();
    let mut tui = Tui::start(&dir, &json!([]), &[]);
    tui.shows("/help for commands");
    tui.enter("/settings");
    tui.shows("compaction.enabled");
    tui.keys("compac");
    tui.shows("1 of 7");
    tui.keys("\r");
    tui.shows("settings: compaction.enabled = false (now)");
    tui.shows("compaction.enabled           false");
    tui.keys("\x1b");
    tui.wait_for("the list closed", |s| !s.contains("Settings ·"));
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("agent/settings.json")).unwrap()).unwrap();
    assert_eq!(written, json!({"defaultModel": "faux-1", "compaction": {"enabled": false}}));
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `/scoped-models` is upstream's selector: Enter enables a model for Ctrl+P in this session at
/// once, Ctrl+S saves the scope to the settings' `enabledModels` (Esc alone keeps it to the
/// session). `--models PATTERNS` sets the scope for one run (upstream's meaning).
#[test]
fn scoped_models_are_what_ctrl_p_cycles_through() {
    let dir = scratch("pickers-scope");
    let models = dir.join("models.json");
    let think =
        |id: &str| json!({"id": id, "provider": "faux", "api": "faux", "contextWindow": 64000, "maxTokens": 4096});
    std::fs::write(&models, json!([think("faux-think"), think("faux-other")]).to_string()).unwrap();
    let mut tui = Tui::start(&dir, &json!([]), &["--models-file", models.to_str().unwrap()]);
    tui.shows("/help for commands");
    tui.enter("/scoped-models");
    tui.shows("Model Configuration");
    tui.shows("all enabled");
    tui.keys("faux-other");
    tui.shows("→ faux-other [faux]");
    tui.keys("\r");
    let screen = tui.shows("1/3 enabled");
    assert!(screen.contains("faux-other [faux] ✓") && screen.contains("(unsaved)"), "{screen}");
    tui.keys("\x1b");
    tui.wait_for("the list closed", |s| !s.contains("Model Configuration"));
    assert!(!dir.join("agent/settings.json").exists(), "session-only until saved");
    tui.keys("\x10"); // Ctrl+P: into the scope
    tui.shows("model: faux/faux-other");
    tui.keys("\x10"); // the only one in it
    tui.shows("no other model to cycle to");
    // Ctrl+S saves it; Ctrl+A then enables all (only for the session).
    tui.enter("/scoped-models");
    tui.shows("1/3 enabled");
    tui.keys("\x13");
    tui.shows("model scope saved to");
    tui.keys("\x01");
    tui.shows("all enabled");
    tui.keys("\x1b");
    tui.wait_for("the selector closed", |s| !s.contains("Model Configuration"));
    let written = std::fs::read_to_string(dir.join("agent/settings.json")).unwrap();
    assert!(written.contains("\"enabledModels\": [\n    \"faux/faux-other\"\n  ]"), "{written}");
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);

    // --models for one run: a pattern.
    let mut tui = Tui::start(&dir, &json!([]), &["--models-file", models.to_str().unwrap(), "--models", "faux-th*"]);
    tui.shows("/help for commands");
    tui.keys("\x10");
    tui.shows("model: faux/faux-think");
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `ctx.ui.addAutocompleteProvider`: the extension's provider is asked as the user types; its
/// suggestions (label and description shown) replace the prefix it names; for other words it
/// hands over to pi's own completions (it answers nothing).
#[test]
fn an_extensions_autocomplete_provider_suggests_as_the_user_types() {
    let dir = scratch("pickers-autocomplete");
    let extension = dir.join("issues.mjs");
    std::fs::write(
        &extension,
        r##"export default function (pi) {
  pi.on("session_start", (_e, ctx) => { ctx.ui.addAutocompleteProvider((current) => ({
    async getSuggestions(lines, line, col, options) {
      const token = lines[line].slice(0, col).match(/#(\d*)$/);
      if (!token) return current.getSuggestions(lines, line, col, options);
      const issues = [{ value: "#12", label: "#12", description: "Fix the parser" }, { value: "#7", label: "#7", description: "Write the docs" }];
      return { items: issues.filter((i) => i.value.startsWith(`#${token[1]}`)), prefix: `#${token[1]}` };
    },
    applyCompletion: (...args) => current.applyCompletion(...args),
  })); ctx.ui.setStatus("issues", "issues ready"); });
}
"##,
    )
    .unwrap();
    let mut tui = Tui::start(&dir, &json!([]), &["-e", extension.to_str().unwrap()]);
    tui.shows("issues ready");
    tui.keys("see #");
    tui.shows("› #12  Fix the parser");
    tui.shows("#7  Write the docs");
    tui.keys("\x1b[B\r");
    tui.wait_for("the chosen issue", |s| s.lines().any(|l| l.trim_end() == "> see #7"));
    // Typing on narrows; another word asks again and gets nothing.
    tui.keys(" and #1");
    tui.wait_for("the narrowed list", |s| s.contains("› #12  Fix the parser") && !s.contains("Write the docs"));
    tui.keys("\x1b");
    tui.wait_for("the list closed", |s| !s.contains("Fix the parser"));
    tui.keys("\x15\x04");
    assert_eq!(tui.exit_code(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}
