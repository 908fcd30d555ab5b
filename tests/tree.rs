//! `/tree`, upstream's session tree navigator, in a real pseudo-terminal: Enter on a message of
//! yours continues from before it (its text back in the editor) after asking whether to
//! summarize the branch left; the branches then show with their connectors; Shift+L labels an
//! entry (written to the session), the filters (Ctrl+L labelled, Ctrl+U yours, Ctrl+T no tool
//! results, Ctrl+D default) narrow the tree, Shift+T shows label times, typing searches.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod support;

use serde_json::json;
use support::scratch;
use support::tui::Tui;

#[test]
fn the_tree_navigator_moves_labels_and_filters() {
    let dir = scratch("tree-nav");
    let script = json!([{"text": "First answer."}, {"text": "Second answer."}, {"text": "Other answer."}]);
    let mut tui = Tui::start(&dir, &script, &[]);
    tui.shows("/help for commands");
    tui.enter("first");
    tui.shows("First answer.");
    tui.enter("second");
    tui.shows("Second answer.");

    tui.enter("/tree");
    tui.shows("Session Tree");
    let screen = tui.wait_for("the branch", |s| s.contains("(4/4)"));
    for entry in ["• user: first", "• assistant: First answer.", "• user: second", "› • assistant: Second answer."]
    {
        assert!(screen.contains(entry), "{entry}:\n{screen}");
    }
    // Up to "second", Enter: asked, then continued from before it, its text in the editor.
    tui.keys("\x1b[A\r");
    tui.shows("Summarize branch?");
    tui.keys("\r");
    tui.shows("tree: ");
    tui.wait_for("the message back in the editor", |s| s.lines().any(|l| l.trim_end() == "> second"));
    tui.keys("\x03");
    tui.enter("other");
    tui.shows("Other answer.");

    tui.enter("/tree");
    let screen = tui.wait_for("two branches", |s| s.contains("(4/6)"));
    assert!(screen.contains("├⊟ • user: other") && screen.contains("└⊟ user: second"), "{screen}");
    // Shift+L on the selected entry (where the session is): a label, written to the session.
    tui.keys("L");
    tui.shows("Label (empty to remove):");
    tui.keys("keep\r");
    tui.shows("[keep] assistant: Other answer.");
    tui.keys("\x0c"); // Ctrl+L: labelled only
    tui.shows("(1/1) [labeled]");
    tui.keys("T"); // Shift+T: label times
    tui.shows("[+label time]");
    tui.keys("T\x15"); // Ctrl+U: your messages
    let screen = tui.shows("/3) [user]");
    assert!(!screen.contains("assistant:"), "{screen}");
    tui.keys("\x04\x14"); // Ctrl+D default, Ctrl+T no tool results
    tui.shows("/6) [no-tools]");
    tui.keys("\x04seco");
    tui.shows("Type to search: seco");
    tui.shows("/2)"); // "second" and "Second answer."
    tui.keys("\x1b"); // the search cleared
    tui.wait_for("all again", |s| s.contains("/6)") && !s.contains("Type to search: seco"));
    tui.keys("\x1b");
    tui.wait_for("the tree closed", |s| !s.contains("Session Tree"));
    tui.keys("\x04");
    assert_eq!(tui.exit_code(), 0);

    let sessions = dir.join("sessions");
    let file =
        std::fs::read_dir(&sessions).unwrap().flatten().flat_map(|d| std::fs::read_dir(d.path()).unwrap()).next();
    let text = std::fs::read_to_string(file.unwrap().unwrap().path()).unwrap();
    assert!(text.contains(r#""type":"label""#) && text.contains(r#""label":"keep""#), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}
