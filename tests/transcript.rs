//! How the interactive transcript draws what the model says and does, in a real pseudo-terminal:
//! its markdown (no `**`, code blocks behind a gutter) and an edit as a coloured diff.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod support;

use serde_json::json;
use support::scratch;
use support::tui::Tui;

#[test]
fn markdown_is_rendered_and_edits_show_as_a_coloured_diff() {
    let dir = scratch("transcript-draw");
    std::fs::write(dir.join("notes.txt"), "alpha\nbeta\ngamma\n").unwrap();
    let script = json!([
        {"tools": [{"name": "edit", "arguments": {"path": "notes.txt", "oldText": "beta", "newText": "BETA two"}}]},
        {"text": "## Done\n\nChanged **one** line:\n\n```text\nBETA two\n```\n\n- see `notes.txt`"}
    ]);
    let mut tui = Tui::start(&dir, &script, &[]);
    tui.enter("edit it");
    let screen = tui.shows("see notes.txt");
    for line in ["-2 beta", "+2 BETA two", " 1 alpha", "Changed one line:", "│ BETA two", "• see notes.txt"] {
        assert!(screen.lines().any(|l| l.trim_start().starts_with(line.trim_start())), "{line:?}:\n{screen}");
    }
    assert!(!screen.contains("**") && !screen.contains("```") && !screen.contains("## Done"), "{screen}");
    // The removed line is red, the added one green.
    assert_eq!(tui.colour_of("-2 beta"), vt100::Color::Idx(1), "red");
    assert_eq!(tui.colour_of("+2 BETA two"), vt100::Color::Idx(2), "green");
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A tool's own drawing (upstream's `renderCall` / `renderResult`): its call line (the status
/// after it) and its result — collapsed, and expanded with Ctrl+O — in place of pi's; a renderer
/// that throws leaves that part to pi.
#[test]
fn an_extensions_tool_draws_its_call_and_result() {
    let dir = scratch("transcript-tool-render");
    let extension = dir.join("drawn.mjs");
    std::fs::write(
        &extension,
        r#"const text = (t) => ({ render: (width) => t.split("\n").map((l) => l.padEnd(width)) });
export default function (pi) {
  pi.registerTool({
    name: "weigh", description: "Weighs a thing",
    parameters: { type: "object", properties: { thing: { type: "string" } } },
    async execute(_id, params) { return { content: [{ type: "text", text: `${params.thing}: 3 kg` }], details: { kg: 3 } }; },
    renderCall: (args) => text(`WEIGHING ${args.thing}`),
    renderResult: (result, { expanded, isPartial }) =>
      text(isPartial ? "on the scale" : expanded ? `FULL ${result.content[0].text} (${result.details.kg})` : "WEIGHED"),
  });
  pi.registerTool({
    name: "broken", description: "Draws badly",
    parameters: { type: "object", properties: {} },
    async execute() { return { content: [{ type: "text", text: "broken output" }] }; },
    renderCall: () => { throw new Error("no drawing"); },
    renderResult: () => text("BROKEN RESULT"),
  });
}
"#,
    )
    .unwrap();
    let script = json!([
        {"tools": [{"name": "weigh", "arguments": {"thing": "anvil"}}, {"name": "broken", "arguments": {}}]},
        {"text": "Weighed it."}
    ]);
    let mut tui = Tui::start(&dir, &script, &["-e", extension.to_str().unwrap()]);
    tui.enter("weigh it");
    tui.shows("Weighed it.");
    let screen = tui.wait_for("both results drawn", |s| s.contains("WEIGHED") && s.contains("BROKEN RESULT"));
    assert!(screen.lines().any(|l| l.trim_end() == "WEIGHING anvil ✓"), "{screen}");
    assert!(screen.lines().any(|l| l.trim_end() == "⚙ broken {} ✓"), "pi's own call line:\n{screen}");
    assert!(!screen.contains("anvil: 3 kg"), "pi's output is not drawn:\n{screen}");
    tui.keys("\x0f");
    tui.shows("FULL anvil: 3 kg (3)");
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Upstream's themes: a theme file given with `--theme` and named by the settings' `theme`
/// colours the screen (here the user's message); `/settings` moves to the next theme at once.
#[test]
fn a_theme_colours_the_screen_and_settings_switch_it() {
    let dir = scratch("transcript-theme");
    let mut ocean: serde_json::Value =
        serde_json::from_str(include_str!("../src/cli/modes/interactive/themes/dark.json")).unwrap();
    ocean["name"] = json!("ocean");
    ocean["colors"]["userMessageText"] = json!("#123456");
    std::fs::write(dir.join("ocean.json"), ocean.to_string()).unwrap();
    std::fs::create_dir_all(dir.join("agent")).unwrap();
    std::fs::write(dir.join("agent/settings.json"), r#"{"theme": "ocean"}"#).unwrap();
    let mut tui = Tui::start(&dir, &json!([{"text": "Answered."}, {"text": "Again."}]), &["--theme", "ocean.json"]);
    tui.enter("colour me");
    tui.shows("Answered.");
    assert_eq!(tui.colour_of("colour me"), vt100::Color::Rgb(0x12, 0x34, 0x56));
    // `/settings`, `theme` found by typing, Enter: the next theme (after ocean: dark).
    tui.enter("/settings");
    tui.shows("Settings");
    tui.keys("theme");
    tui.wait_for("theme selected", |s| s.lines().any(|l| l.contains("› theme")));
    tui.keys("\r");
    tui.shows("settings: theme = dark (now)");
    tui.keys("\x1b");
    tui.wait_for("the picker closed", |s| !s.contains("Settings ·") && s.contains("colour me"));
    assert_eq!(tui.colour_of("colour me"), vt100::Color::Idx(6), "dark's user message colour");
    let settings = std::fs::read_to_string(dir.join("agent/settings.json")).unwrap();
    assert!(settings.contains(r#""theme": "dark""#), "{settings}");
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Themes for extensions (the interactive mode): `ctx.ui.theme` colours with the theme in use,
/// `getAllThemes` lists pi's, `setTheme` switches pi's screen at once and keeps it in the settings.
#[test]
fn extensions_draw_with_the_theme_and_switch_it() {
    let dir = scratch("transcript-ext-theme");
    let extension = dir.join("paint.mjs");
    std::fs::write(
        &extension,
        r#"export default function (pi) {
  pi.on("session_start", (_e, ctx) => ctx.ui.setStatus("paint", ctx.ui.theme.fg("error", "ERRORCOLOURED")));
  pi.registerCommand("switch", { description: "Light theme", handler: async (_a, ctx) => {
    const names = ctx.ui.getAllThemes().map((t) => t.name).join(",");
    const result = ctx.ui.setTheme("light");
    const missing = ctx.ui.setTheme("no-such-theme");
    ctx.ui.notify(`themes ${names} switched ${result.success} missing ${missing.success} now ${ctx.ui.theme.name}`);
  } });
}
"#,
    )
    .unwrap();
    let mut tui = Tui::start(&dir, &json!([{"text": "Answered."}]), &["-e", extension.to_str().unwrap()]);
    tui.shows("ERRORCOLOURED");
    assert_eq!(tui.colour_of("ERRORCOLOURED"), vt100::Color::Idx(1), "dark's error colour");
    tui.enter("first prompt");
    tui.shows("Answered.");
    tui.enter("/switch");
    tui.shows("themes dark,light switched true missing false now light");
    assert_eq!(tui.colour_of("first prompt"), vt100::Color::Rgb(0x00, 0x70, 0x7a), "light's user colour");
    let settings = std::fs::read_to_string(dir.join("agent/settings.json")).unwrap();
    assert!(settings.contains(r#""theme": "light""#), "{settings}");
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}
