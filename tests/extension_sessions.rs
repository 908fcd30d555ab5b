//! What an extension's command may do to the session, as upstream's command context offers it
//! (`ctx.fork` before or at an entry, `ctx.switchSession`, `ctx.navigateTree`, `ctx.waitForIdle`),
//! driven over RPC: each runs after the command, as the user's own would, and `withSession`
//! hears the new one; RPC's `clone`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod support;

use serde_json::json;
use support::rpc::Rpc;
use support::scratch;

#[test]
fn commands_fork_switch_and_move_in_the_tree() {
    let dir = scratch("ext-sessions");
    let extension = dir.join("sessions.mjs");
    std::fs::write(
        &extension,
        r#"export default function (pi) {
  const firstUser = (ctx) => ctx.sessionManager.getEntries().find((e) => e.type === "message" && e.message.role === "user");
  pi.registerCommand("fork-first", { description: "Forks before the first prompt", handler: async (_a, ctx) => {
    await ctx.waitForIdle();
    const result = await ctx.fork(firstUser(ctx).id, { withSession: async (next) => next.ui.notify(`forked-ready ${next.sessionManager.getEntries().filter((e) => e.type === "message").length}`) });
    ctx.ui.notify(`fork asked ${result.cancelled}`);
  } });
  pi.registerCommand("switch-to", { description: "Continues a session file", handler: async (args, ctx) => {
    await ctx.switchSession(args.trim(), { withSession: async (next) => next.ui.notify(`switched-ready ${next.sessionManager.getSessionFile()}`) });
  } });
  pi.registerCommand("fork-at", { description: "Forks at an entry", handler: async (args, ctx) => {
    await ctx.fork(args.trim(), { position: "at", withSession: async (next) => next.ui.notify(`forked-at ${next.sessionManager.getEntries().filter((e) => e.type === "message").length}`) });
  } });
  pi.registerCommand("go-to", { description: "Moves the leaf", handler: async (args, ctx) => {
    await ctx.navigateTree(args.trim(), { summarize: false });
  } });
}
"#,
    )
    .unwrap();
    let script = json!([{"text": "First answer."}, {"text": "Second answer."}]);
    let mut rpc = Rpc::start(&dir, &script, &["-e", extension.to_str().unwrap()]);
    for message in ["first prompt", "second prompt"] {
        rpc.call(json!({"type": "prompt", "message": message}));
        rpc.event("agent_end");
    }
    let original = rpc.call(json!({"type": "get_state"}))["sessionFile"].as_str().unwrap().to_owned();
    // The first answer's entry, from the session file.
    let entries: Vec<serde_json::Value> =
        std::fs::read_to_string(&original).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let first_answer = entries
        .iter()
        .find(|e| e["type"] == "message" && e["message"]["role"] == "assistant")
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .unwrap();

    // Fork before the first prompt: a new file holding nothing before it.
    rpc.call(json!({"type": "prompt", "message": "/fork-first"}));
    rpc.seen_or_wait("the command's notice", |l| l["message"] == "fork asked false");
    rpc.seen_or_wait("withSession in the fork", |l| l["message"] == "forked-ready 0");
    let forked = rpc.call(json!({"type": "get_state"}))["sessionFile"].as_str().unwrap().to_owned();
    assert_ne!(forked, original);

    // Back to the original file: its four messages.
    rpc.call(json!({"type": "prompt", "message": format!("/switch-to {original}")}));
    let switched = format!("switched-ready {original}");
    rpc.seen_or_wait("withSession after the switch", |l| l["message"] == switched);
    let back = rpc.call(json!({"type": "get_messages"}))["messages"].as_array().unwrap().len();
    assert_eq!(back, 4);

    // The leaf moved to the first answer: the conversation is the first exchange.
    rpc.call(json!({"type": "prompt", "message": format!("/go-to {first_answer}")}));
    let deadline = std::time::Instant::now() + support::rpc::PATIENCE;
    loop {
        let now = rpc.call(json!({"type": "get_messages"}))["messages"].as_array().unwrap().len();
        if now == 2 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the leaf never moved ({now} messages)");
        std::thread::yield_now();
    }
    // A fork at the first answer: the first exchange, in a new file.
    rpc.call(json!({"type": "prompt", "message": format!("/fork-at {first_answer}")}));
    rpc.seen_or_wait("withSession at the fork", |l| l["message"] == "forked-at 2");
    // RPC `clone` (upstream's): the branch as it is, in a new file.
    let before = rpc.call(json!({"type": "get_state"}))["sessionFile"].clone();
    assert_eq!(rpc.call(json!({"type": "clone"})), json!({"cancelled": false}));
    let after = rpc.call(json!({"type": "get_state"}))["sessionFile"].clone();
    assert_ne!(before, after);
    assert_eq!(rpc.call(json!({"type": "get_messages"}))["messages"].as_array().unwrap().len(), 2);
    let (status, stderr, _) = rpc.close();
    assert!(status.success(), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}
