//! `pi --mode rpc` driven as a client drives it: a subprocess, JSON commands on its stdin,
//! responses and events read from its stdout — a multi-prompt conversation on the faux provider
//! with abort (and a running tool's process group killed), steering and follow-up, a model and
//! thinking change, compaction, a new session and a fork; garbage lines; stdin closed.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod support;

use support::Flag;

use support::Succeeds;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use serde_json::{Value, json};
use support::rpc::{PATIENCE, Rpc, lines};
use support::{all_gone, contract_shape, events, pi, running, scratch, wait_for_line_in};

fn conversation_script(dir: &Path) -> Value {
    let pid = dir.join("tool.pid");
    let go = dir.join("go");
    json!([
        {"text": "Hello one."},
        // Aborted while the tool sleeps: its process group must go.
        {"text": "Running.", "tools": [{"name": "bash", "arguments": {"command": format!("(sleep 60 & echo $! > {0}.child; wait) & echo $$ > {0}; wait", pid.display())}}]},
        // A tool that waits for the test: steering and a follow-up are typed meanwhile.
        {"text": "Waiting.", "tools": [{"name": "bash", "arguments": {"command": format!("while [ ! -f {} ]; do sleep 0.02; done; echo released", go.display())}}]},
        {"text": "Steered.", "expect": ["change course"]},
        {"text": "Followed up.", "expect": ["and also this"]},
        // The compaction summary.
        {"text": "Summary: the user said hello and steered."},
        // After a model change.
        {"text": "From the thinking model.", "expect": ["after the change"]},
        // After the fork.
        {"text": "On the fork."}
    ])
}

#[test]
fn a_multi_prompt_conversation_with_abort_steering_model_change_compaction_new_session_and_fork() {
    let dir = scratch("rpc-conversation");
    std::fs::create_dir_all(dir.join("agent")).unwrap();
    // Compaction keeps almost nothing verbatim, so the conversation so far can be summarized.
    std::fs::write(dir.join("agent/settings.json"), r#"{"compaction": {"keepRecentTokens": 1}}"#).unwrap();
    let models = dir.join("models.json");
    std::fs::write(
        &models,
        json!([{"id": "faux-think", "provider": "faux", "api": "faux", "contextWindow": 64000, "maxTokens": 4096,
                "reasoning": true, "cost": {"input": 1.0, "output": 2.0}}])
        .to_string(),
    )
    .unwrap();
    let records = dir.join("events.jsonl");
    let mut rpc = Rpc::start(
        &dir,
        &conversation_script(&dir),
        &["--models-file", models.to_str().unwrap(), "--events-jsonl", records.to_str().unwrap()],
    );
    let start = rpc.event("session_start");
    assert_eq!(start["reason"], "startup");

    // 1. A prompt streams and settles.
    let state = rpc.call(json!({"type": "get_state"}));
    assert_eq!(state["isStreaming"], false);
    assert_eq!(state["model"]["id"], "faux-1");
    let first_file = state["sessionFile"].as_str().unwrap().to_owned();
    rpc.call(json!({"type": "prompt", "message": "one"}));
    let end = rpc.event("agent_end");
    assert_eq!(end["stopReason"], "stop");
    assert_eq!(end["messages"][1]["content"][0]["text"], "Hello one.");
    assert!(
        rpc.seen.iter().any(|l| l["type"] == "message_update" && l["assistantMessageEvent"]["type"] == "text_delta")
    );

    // 2. Abort while a tool runs: the turn ends aborted and the tool's processes are gone.
    rpc.call(json!({"type": "prompt", "message": "two"}));
    rpc.event("tool_execution_start");
    let pid = wait_for_line_in(&dir.join("tool.pid"));
    let child_pid = wait_for_line_in(&dir.join("tool.pid.child"));
    assert!(running(&pid) && running(&child_pid));
    let busy = rpc.call(json!({"type": "get_state"}));
    assert_eq!(busy["isStreaming"], true);
    rpc.call(json!({"type": "abort"}));
    let end = rpc.event("agent_end");
    assert_eq!(end["stopReason"], "aborted", "{end}");
    assert!(all_gone(&[&pid, &child_pid]), "the tool's process group outlived the abort");

    // 3. Steering and a follow-up typed while a tool runs; a plain prompt is refused then.
    rpc.call(json!({"type": "prompt", "message": "three"}));
    rpc.event("tool_execution_start");
    let id = rpc.send(json!({"type": "prompt", "message": "not now"}));
    let refused = rpc.response(&id);
    assert_eq!(refused["success"], false);
    assert!(refused["error"].as_str().unwrap().contains("streamingBehavior"), "{refused}");
    rpc.call(json!({"type": "prompt", "message": "change course", "streamingBehavior": "steer"}));
    rpc.call(json!({"type": "follow_up", "message": "and also this"}));
    let update =
        rpc.wait_for("queue_update", |l| l["type"] == "queue_update" && l["followUp"] == json!(["and also this"]));
    assert_eq!(update["steering"], json!(["change course"]));
    std::fs::write(dir.join("go"), "").unwrap();
    let end = rpc.event("agent_end");
    assert_eq!(end["stopReason"], "stop", "{end}");
    let texts: Vec<String> = end["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| format!("{}:{}", m["role"].as_str().unwrap(), text_of(m)))
        .collect();
    let steer_at = texts.iter().position(|t| t == "user:change course").expect("steering delivered");
    let follow_at = texts.iter().position(|t| t == "user:and also this").expect("follow-up delivered");
    assert!(
        texts[steer_at + 1] == "assistant:Steered." && texts[follow_at + 1] == "assistant:Followed up.",
        "{texts:?}"
    );
    assert!(steer_at < follow_at);
    assert_eq!(rpc.call(json!({"type": "get_state"}))["pendingMessageCount"], 0);

    // 4. Compaction.
    let compacted = rpc.call(json!({"type": "compact", "customInstructions": "focus on greetings"}));
    assert_eq!(compacted["summary"], "Summary: the user said hello and steered.");
    assert!(compacted["tokensBefore"].as_u64().unwrap() > 0);
    // The session as a page, where the client asks.
    let page = dir.join("rpc-export.html");
    let exported = rpc.call(json!({"type": "export_html", "outputPath": page.display().to_string()}));
    assert_eq!(exported["path"], page.display().to_string());
    assert!(std::fs::read_to_string(&page).unwrap().contains("Summary: the user said hello and steered."));
    // Upstream's compaction events around it.
    assert_eq!(rpc.seen_or_wait("compaction_start", |l| l["type"] == "compaction_start")["reason"], "manual");
    let end = rpc.seen_or_wait("compaction_end", |l| l["type"] == "compaction_end");
    assert_eq!((&end["reason"], &end["aborted"], &end["willRetry"]), (&json!("manual"), &json!(false), &json!(false)));
    assert_eq!(end["result"]["summary"], compacted["summary"]);
    assert_eq!(end["result"]["tokensBefore"], compacted["tokensBefore"]);

    // 5. Another model and thinking level.
    let models = rpc.call(json!({"type": "get_available_models"}));
    assert!(models["models"].as_array().unwrap().iter().any(|m| m["id"] == "faux-think" && m["reasoning"] == true));
    assert_eq!(rpc.call(json!({"type": "cycle_thinking_level"})), Value::Null, "faux-1 does not reason");
    let cycled = rpc.call(json!({"type": "cycle_model"}));
    assert_eq!(cycled["model"]["id"], "faux-think");
    assert_eq!(rpc.call(json!({"type": "cycle_thinking_level"})), json!({"level": "minimal"}));
    assert_eq!(rpc.call(json!({"type": "cycle_model"}))["model"]["id"], "faux-1");
    let id = rpc.send(json!({"type": "set_model", "provider": "faux", "modelId": "no-such-model"}));
    assert_eq!(rpc.response(&id)["success"], false);
    let model = rpc.call(json!({"type": "set_model", "provider": "faux", "modelId": "faux-think"}));
    assert_eq!(model["id"], "faux-think");
    rpc.call(json!({"type": "set_thinking_level", "level": "high"}));
    let id = rpc.send(json!({"type": "set_thinking_level", "level": "extreme"}));
    assert_eq!(rpc.response(&id)["success"], false);
    let state = rpc.call(json!({"type": "get_state"}));
    assert_eq!((state["model"]["id"].as_str(), state["thinkingLevel"].as_str()), (Some("faux-think"), Some("high")));
    rpc.call(json!({"type": "prompt", "message": "after the change"}));
    assert_eq!(rpc.event("agent_end")["stopReason"], "stop");
    let stats = rpc.call(json!({"type": "get_session_stats"}));
    assert!(stats["tokens"]["total"].as_u64().unwrap() > 0 && stats["cost"].as_f64().unwrap() > 0.0, "{stats}");

    // 6. Garbage lines are answered and the session goes on.
    rpc.send_raw("this is not json");
    let parse = rpc.wait_for("parse error", |l| l["command"] == "parse");
    assert_eq!(parse["success"], false);
    let error = parse["error"].as_str().unwrap();
    assert!(error.contains("Failed to parse command") && error.contains("this is not json"), "{parse}");
    rpc.send_raw(r#"{"no": "type"}"#);
    rpc.send_raw("[1, 2]");
    let id = rpc.send(json!({"type": "no_such_command"}));
    assert_eq!(rpc.response(&id)["error"], "unknown command: no_such_command");
    let id = rpc.send(json!({"type": "prompt"}));
    assert_eq!(rpc.response(&id)["success"], false);

    // 7. Fork before the second prompt: a new file holding what came before it.
    let fork_points = rpc.call(json!({"type": "get_fork_messages"}));
    let two = fork_points["messages"].as_array().unwrap().iter().find(|m| m["text"] == "after the change").unwrap();
    let forked = rpc.call(json!({"type": "fork", "entryId": two["entryId"]}));
    assert_eq!(forked, json!({"text": "after the change", "cancelled": false}));
    let start = rpc.seen_or_wait("fork start", |l| l["type"] == "session_start" && l["reason"] == "fork");
    assert_eq!(start["previousSessionFile"], first_file.as_str());
    let fork_file = rpc.call(json!({"type": "get_state"}))["sessionFile"].as_str().unwrap().to_owned();
    assert_ne!(fork_file, first_file);
    let header: Value =
        serde_json::from_str(std::fs::read_to_string(&fork_file).unwrap().lines().next().unwrap()).unwrap();
    assert_eq!(header["parentSession"], first_file.as_str());
    rpc.call(json!({"type": "prompt", "message": "on the fork"}));
    assert_eq!(rpc.event("agent_end")["stopReason"], "stop");

    // 8. A new session.
    assert_eq!(rpc.call(json!({"type": "new_session"})), json!({"cancelled": false}));
    rpc.seen_or_wait("new start", |l| l["type"] == "session_start" && l["reason"] == "new");
    let state = rpc.call(json!({"type": "get_state"}));
    assert_eq!(state["messageCount"], 0);
    assert_ne!(state["sessionFile"].as_str().unwrap(), fork_file);

    // 9. Back to the first session.
    assert_eq!(rpc.call(json!({"type": "switch_session", "sessionPath": first_file})), json!({"cancelled": false}));
    let resumed = rpc.seen_or_wait("resume start", |l| l["type"] == "session_start" && l["reason"] == "resume");
    assert_eq!(resumed["previousSessionFile"], state["sessionFile"]);
    let state = rpc.call(json!({"type": "get_state"}));
    assert_eq!(state["sessionFile"], first_file.as_str());
    assert!(state["messageCount"].as_u64().unwrap() > 0);
    let id = rpc.send(json!({"type": "switch_session", "sessionPath": dir.join("nope.jsonl")}));
    assert_eq!(rpc.response(&id)["success"], false);

    // 10. stdin closed: a clean exit with session_shutdown last.
    let (status, stderr, seen) = rpc.close();
    assert!(status.success(), "{status}: {stderr}");
    assert_eq!(seen.last().unwrap()["type"], "session_shutdown", "{}", lines(&seen));
    assert_eq!(seen.iter().filter(|l| l["type"] == "session_shutdown").count(), 1);
    // Every line is a response or an event.
    assert!(seen.iter().all(|l| l["type"].is_string()));
    // The queue changes are point events on the prompt that took them, numbers only.
    let records = events(&records);
    let updates: Vec<_> = records.iter().filter(|e| e.name == "pi.agent.queue_update").collect();
    assert!(updates.len() >= 4, "queued twice, delivered twice: {}", updates.len());
    assert!(updates.iter().all(|e| e.trace_id == updates[0].trace_id && e.span_id.is_some()));
    assert!(!records.iter().any(|e| e.to_json().contains("change course")), "queued text leaked into telemetry");
    // Every prompt is a trace of its own.
    let prompts: std::collections::HashSet<_> =
        records.iter().filter(|e| e.name == "pi.agent.prompt").map(|e| e.trace_id).collect();
    assert_eq!(prompts.len(), 5);
    // The first session file holds the conversation.
    let written = std::fs::read_to_string(&first_file).unwrap();
    for text in ["one", "Hello one.", "change course", "Followed up.", "after the change"] {
        assert!(written.contains(text), "{text} not in {first_file}");
    }
}

fn text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join(""),
        _ => String::new(),
    }
}

#[test]
fn rpc_emits_the_same_contract_events_as_print_mode() {
    let script = json!([
        {"text": "Checking.", "tools": [{"name": "bash", "arguments": {"command": "echo hi"}}]},
        {"text": "All good."}
    ]);
    let dir = scratch("rpc-parity");
    let print_events = dir.join("print.jsonl");
    std::fs::write(dir.join("script.json"), script.to_string()).unwrap();
    pi().args(["-p", "go", "--faux-script"])
        .arg(dir.join("script.json"))
        .flag("--session", dir.join("print-session.jsonl"))
        .flag("--events-jsonl", &print_events)
        .args(["--user", "alice", "--org", "acme"])
        .succeeds();

    let rpc_events = dir.join("rpc.jsonl");
    let session = dir.join("rpc-session.jsonl");
    let mut rpc = Rpc::start(
        &dir,
        &script,
        &[
            "--session",
            session.to_str().unwrap(),
            "--events-jsonl",
            rpc_events.to_str().unwrap(),
            "--user",
            "alice",
            "--org",
            "acme",
        ],
    );
    rpc.call(json!({"type": "prompt", "message": "go"}));
    rpc.event("agent_end");
    let (status, stderr, _) = rpc.close();
    assert!(status.success(), "{stderr}");
    let skip = ["pi.session.read"];
    let (print, rpc) = (contract_shape(&print_events, &skip), contract_shape(&rpc_events, &skip));
    assert!(print.iter().any(|(name, _, parent)| name == "pi.agent.tool_call" && parent == "pi.agent.turn"));
    assert_eq!(print, rpc);
    // Input source: print mode counts as interactive, RPC says rpc.
    let source = |path: &PathBuf| {
        events(path)
            .into_iter()
            .find(|e| e.name == "pi.agent.prompt")
            .and_then(|e| e.payload.get("source").map(|v| format!("{v:?}")))
            .unwrap_or_default()
    };
    assert!(source(&print_events).contains("interactive"), "{}", source(&print_events));
    assert!(source(&rpc_events).contains("rpc"), "{}", source(&rpc_events));
    // The prompt's records carry the attribution given by flags.
    let prompt = events(&rpc_events).into_iter().find(|e| e.name == "pi.agent.prompt").unwrap();
    assert_eq!((prompt.context.get("userId"), prompt.context.get("orgId")), (Some("alice"), Some("acme")));
}

#[test]
fn closing_stdin_at_once_still_starts_and_shuts_down_the_session() {
    let dir = scratch("rpc-eof");
    let rpc = Rpc::start(&dir, &json!([]), &["--no-session"]);
    let (status, stderr, seen) = rpc.close();
    assert!(status.success(), "{stderr}");
    let kinds: Vec<&str> = seen.iter().filter_map(|l| l["type"].as_str()).collect();
    assert_eq!(kinds, ["session_start", "session_shutdown"]);
}

#[test]
fn sigterm_aborts_the_running_prompt_and_shuts_down_once() {
    let dir = scratch("rpc-sigterm");
    let script = json!([{"text": "a very slow answer that takes its time", "chunkDelayMs": 1000}]);
    let mut rpc = Rpc::start(&dir, &script, &["--no-session"]);
    rpc.call(json!({"type": "prompt", "message": "slow"}));
    rpc.wait_for("streaming", |l| l["type"] == "message_update");
    let pid = rpc.child.id().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let end = rpc.event("agent_end");
    assert_eq!(end["stopReason"], "aborted");
    let (status, _, seen) = rpc.close();
    assert_eq!(status.code(), Some(128 + 15));
    assert_eq!(seen.iter().filter(|l| l["type"] == "session_shutdown").count(), 1);
}

#[test]
fn traceparent_is_the_parent_of_the_first_prompt_only() {
    let dir = scratch("rpc-traceparent");
    let records = dir.join("events.jsonl");
    let script = json!([{"text": "first"}, {"text": "second"}]);
    let parent_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let script_path = dir.join("script.json");
    std::fs::write(&script_path, script.to_string()).unwrap();
    let mut cmd = pi();
    cmd.args(["--mode", "rpc", "--no-session", "--faux-script"])
        .arg(&script_path)
        .flag("--events-jsonl", &records)
        .env("TRACEPARENT", format!("00-{parent_trace}-00f067aa0ba902b7-01"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for prompt in ["one", "two"] {
        writeln!(stdin, "{}", json!({"type": "prompt", "message": prompt})).unwrap();
        stdin.flush().unwrap();
        // Wait for this prompt to settle before the next.
        for line in lines.by_ref() {
            if line.unwrap().contains("\"agent_settled\"") {
                break;
            }
        }
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let prompts: Vec<_> = events(&records).into_iter().filter(|e| e.name == "pi.agent.prompt").collect();
    let starts: Vec<_> = prompts.iter().filter(|e| format!("{:?}", e.kind) == "Start").collect();
    assert_eq!(starts.len(), 2);
    assert_eq!(starts[0].trace_id.to_string(), parent_trace);
    assert_eq!(starts[0].parent_span_id.map(|s| s.to_string()).as_deref(), Some("00f067aa0ba902b7"));
    assert_ne!(starts[1].trace_id.to_string(), parent_trace);
    assert_eq!(starts[1].parent_span_id, None);
}

/// A Python extension that cancels every fork and every switch to a new session.
const CANCELLER: &str = r#"
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("type") == "hello":
        print(json.dumps({"type": "register", "protocol": 1, "name": "canceller",
                          "events": ["session_before_switch", "session_before_fork"]}), flush=True)
    elif m.get("type") == "event":
        p = m["payload"]
        cancel = m["event"] == "session_before_fork" or p.get("reason") == "new"
        print(json.dumps({"type": "result", "id": m["id"], "result": {"cancel": cancel}}), flush=True)
    elif m.get("type") == "shutdown":
        break
"#;

#[test]
fn extensions_may_cancel_a_new_session_and_a_fork() {
    let dir = scratch("rpc-cancel");
    let extension = dir.join("canceller.py");
    std::fs::write(&extension, format!("#!/usr/bin/env python3\n{CANCELLER}")).unwrap();
    let mut perms = std::fs::metadata(&extension).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&extension, perms).unwrap();
    let mut rpc = Rpc::start(&dir, &json!([{"text": "one"}, {"text": "two"}]), &["-e", extension.to_str().unwrap()]);
    rpc.call(json!({"type": "prompt", "message": "first"}));
    rpc.event("agent_end");
    rpc.call(json!({"type": "prompt", "message": "second"}));
    rpc.event("agent_end");
    let before = rpc.call(json!({"type": "get_state"}));
    assert_eq!(rpc.call(json!({"type": "new_session"})), json!({"cancelled": true}));
    let points = rpc.call(json!({"type": "get_fork_messages"}));
    let second = points["messages"][1]["entryId"].clone();
    assert_eq!(rpc.call(json!({"type": "fork", "entryId": second})), json!({"text": "second", "cancelled": true}));
    let after = rpc.call(json!({"type": "get_state"}));
    assert_eq!((&before["sessionFile"], &before["messageCount"]), (&after["sessionFile"], &after["messageCount"]));
    let (status, stderr, seen) = rpc.close();
    assert!(status.success(), "{stderr}");
    assert_eq!(seen.iter().filter(|l| l["type"] == "session_start").count(), 1, "no new session started");
}

/// Upstream's extension UI sub-protocol: an extension's `ctx.ui.confirm` becomes an
/// `extension_ui_request` the client answers with an `extension_ui_response`; `notify` is a
/// request that expects none; `ctx.hasUI` is true.
#[test]
fn extension_dialogs_are_extension_ui_requests_the_client_answers() {
    let dir = scratch("rpc-ui");
    let extension = dir.join("ask.mjs");
    std::fs::write(
        &extension,
        r#"export default function (pi) {
  pi.on("tool_call", async (event, ctx) => {
    if (event.toolName !== "bash") return undefined;
    ctx.ui.notify(`hasUI=${ctx.hasUI}`, "info");
    const ok = await ctx.ui.confirm("Run it?", event.input.command);
    return ok ? undefined : { block: true, reason: "Refused by the user" };
  });
}
"#,
    )
    .unwrap();
    let script = json!([
        {"text": "Running.", "tools": [{"name": "bash", "arguments": {"command": "echo allowed-run"}}]},
        {"text": "First done.", "expect": ["allowed-run"]},
        {"text": "Again.", "tools": [{"name": "bash", "arguments": {"command": "echo refused-run"}}]},
        {"text": "Second done.", "expect": ["Refused by the user"]}
    ]);
    let mut rpc = Rpc::start(&dir, &script, &["-e", extension.to_str().unwrap()]);
    for (prompt, confirmed) in [("first", true), ("second", false)] {
        rpc.call(json!({"type": "prompt", "message": prompt}));
        let notify =
            rpc.wait_for("a notify request", |l| l["type"] == "extension_ui_request" && l["method"] == "notify");
        assert_eq!(notify["message"], "hasUI=true");
        let ask =
            rpc.wait_for("a confirm request", |l| l["type"] == "extension_ui_request" && l["method"] == "confirm");
        assert_eq!(
            (&ask["title"], &ask["message"]),
            (&json!("Run it?"), &json!(format!("echo {}-run", if confirmed { "allowed" } else { "refused" })))
        );
        rpc.send_raw(&json!({"type": "extension_ui_response", "id": ask["id"], "confirmed": confirmed}).to_string());
        rpc.event("agent_end");
    }
    let (status, stderr, seen) = rpc.close();
    assert!(status.success(), "{stderr}");
    assert!(
        !seen.iter().any(|l| l["type"] == "response" && l["command"] == "extension_ui_response"),
        "no reply to an answer"
    );
}

/// What an extension asks of pi in RPC mode: `ctx.getSystemPrompt()` (the prompt
/// `before_agent_start` settled), `model_select` on `set_model`, `pi.getCommands()`,
/// `pi.sendUserMessage` from a tool (a follow-up prompt after the running one), and
/// `ctx.shutdown()` from a command (pi ends with stdin still open; a queued command is refused).
#[test]
fn extensions_read_the_system_prompt_and_commands_queue_prompts_and_end_pi() {
    let dir = scratch("rpc-ext-actions");
    let extension = dir.join("act.mjs");
    std::fs::write(
        &extension,
        r#"export default function (pi) {
  pi.on("before_agent_start", async () => ({ systemPrompt: "custom-sp-token" }));
  pi.on("agent_start", async (_event, ctx) => ctx.ui.notify(`sp=${ctx.getSystemPrompt()}`));
  pi.on("model_select", async (event, ctx) => ctx.ui.notify(`model=${event.model.id} source=${event.source}`));
  pi.registerTool({
    name: "later", description: "Queues a follow-up", parameters: { type: "object", properties: {} },
    async execute() { pi.sendUserMessage("follow-up-token"); return { content: [{ type: "text", text: "queued" }] }; },
  });
  pi.registerCommand("cmds", { description: "Lists commands", handler: async (_a, ctx) =>
    ctx.ui.notify(pi.getCommands().map((c) => `${c.source}:${c.name}`).join(",")) });
  pi.registerCommand("bye", { description: "Ends pi", handler: async (_a, ctx) => ctx.shutdown() });
}
"#,
    )
    .unwrap();
    let script = json!([
        {"text": "Queueing.", "tools": [{"name": "later", "arguments": {}}]},
        {"text": "Queued."},
        {"text": "Followed.", "expect": ["follow-up-token"]}
    ]);
    let mut rpc = Rpc::start(&dir, &script, &["-e", extension.to_str().unwrap()]);
    // The message of a notify request (read already or next) that starts with `prefix`.
    let notified = |rpc: &mut Rpc, prefix: &str| {
        let line = rpc.seen_or_wait(prefix, |l| {
            l["method"] == "notify" && l["message"].as_str().is_some_and(|m| m.starts_with(prefix))
        });
        line["message"].as_str().unwrap().to_owned()
    };
    rpc.call(json!({"type": "prompt", "message": "go"}));
    assert_eq!(notified(&mut rpc, "sp="), "sp=custom-sp-token");
    rpc.event("agent_end");
    // The tool's follow-up runs as the next prompt.
    rpc.wait_for("the follow-up's answer", |l| l["type"] == "message_end" && l.to_string().contains("Followed."));
    rpc.call(json!({"type": "set_model", "provider": "faux", "modelId": "faux-1"}));
    assert_eq!(notified(&mut rpc, "model="), "model=faux-1 source=set");
    rpc.call(json!({"type": "prompt", "message": "/cmds"}));
    assert_eq!(notified(&mut rpc, "extension:"), "extension:cmds,extension:bye");
    rpc.send(json!({"type": "prompt", "message": "/bye"}));
    let refused = rpc.send(json!({"type": "set_session_name", "name": "too late"}));
    let refused = rpc.response(&refused);
    assert_eq!(refused["success"], false, "{refused}");
    // pi ended by itself: stdout closed while stdin is still open.
    let deadline = Instant::now() + PATIENCE;
    while let Ok(line) = rpc.lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        rpc.seen.push(line);
    }
    let status = rpc.child.wait().unwrap();
    assert!(status.success(), "{}", lines(&rpc.seen));
    assert!(rpc.seen.iter().any(|l| l["type"] == "session_shutdown"), "{}", lines(&rpc.seen));
}

/// `pi.sendMessage(…, { triggerTurn: true })` asks the model again with the extension's message
/// as the latest; `ctx.newSession({ withSession })` starts a fresh session after the command and
/// then runs `withSession`.
#[test]
fn extensions_trigger_turns_and_start_sessions() {
    let dir = scratch("rpc-ext-turns");
    let extension = dir.join("nudge.mjs");
    std::fs::write(
        &extension,
        r#"export default function (pi) {
  pi.registerCommand("nudge", { description: "Nudges the model", handler: async () =>
    pi.sendMessage({ customType: "nudge", content: "nudge-token", display: true }, { triggerTurn: true }) });
  pi.registerCommand("fresh", { description: "A new session", handler: async (_a, ctx) => {
    await ctx.newSession({ withSession: async (next) => next.ui.notify("fresh-session-ready") });
  } });
}
"#,
    )
    .unwrap();
    let script = json!([{"text": "Nudged.", "expect": ["nudge-token"]}]);
    let mut rpc = Rpc::start(&dir, &script, &["-e", extension.to_str().unwrap()]);
    rpc.call(json!({"type": "prompt", "message": "/nudge"}));
    rpc.wait_for("the triggered turn's answer", |l| l["type"] == "message_end" && l.to_string().contains("Nudged."));
    rpc.event("agent_end");
    rpc.call(json!({"type": "prompt", "message": "/fresh"}));
    rpc.wait_for("the new session", |l| l["type"] == "session_start" && l["reason"] == "new");
    rpc.wait_for("withSession's notice", |l| l["message"] == "fresh-session-ready");
    let (status, stderr, _) = rpc.close();
    assert!(status.success(), "{stderr}");
}

/// Upstream's `user_bash`: an extension runs the user's shell command in pi's place, with its
/// own operations (here an `exec` that answers itself) or a whole result; RPC `bash` returns
/// what it produced.
#[test]
fn extensions_run_the_users_shell_commands_in_pis_place() {
    let dir = scratch("rpc-user-bash");
    let extension = dir.join("bash.mjs");
    std::fs::write(
        &extension,
        r#"export default function (pi) {
  pi.on("user_bash", async (event) => {
    if (event.command.startsWith("remote ")) {
      return { operations: { exec: async (command, cwd, { onData }) => {
        onData(Buffer.from(`ran ${command} in ${cwd.length > 0 ? "cwd" : "?"}`));
        return { exitCode: 3 };
      } } };
    }
    if (event.command === "canned") return { result: { output: "canned output", exitCode: 0, cancelled: false, truncated: false } };
  });
}
"#,
    )
    .unwrap();
    let mut rpc = Rpc::start(&dir, &json!([]), &["-e", extension.to_str().unwrap()]);
    let remote = rpc.call(json!({"type": "bash", "command": "remote uptime"}));
    assert_eq!((&remote["output"], &remote["exitCode"]), (&json!("ran remote uptime in cwd"), &json!(3)));
    let canned = rpc.call(json!({"type": "bash", "command": "canned"}));
    assert_eq!(canned["output"], "canned output");
    let local = rpc.call(json!({"type": "bash", "command": "echo local-run"}));
    assert_eq!(local["output"].as_str().map(str::trim), Some("local-run"));
    let (status, stderr, _) = rpc.close();
    assert!(status.success(), "{stderr}");
}

/// `ctx.abort()` aborts the running prompt at once (here from the extension's own tool).
#[test]
fn an_extension_aborts_the_running_prompt() {
    let dir = scratch("rpc-ext-abort");
    let extension = dir.join("abort.mjs");
    std::fs::write(
        &extension,
        r#"export default function (pi) {
  pi.registerTool({ name: "stopper", description: "Stops the run", parameters: { type: "object", properties: {} },
    async execute(_id, _params, signal, _update, ctx) {
      ctx.abort();
      await new Promise((resolve) => setTimeout(resolve, 200));
      return { content: [{ type: "text", text: "stopped" }] };
    } });
}
"#,
    )
    .unwrap();
    let script = json!([
        {"text": "Stopping.", "tools": [{"name": "stopper", "arguments": {}}]},
        {"text": "never-reached"}
    ]);
    let mut rpc = Rpc::start(&dir, &script, &["-e", extension.to_str().unwrap()]);
    rpc.call(json!({"type": "prompt", "message": "go"}));
    let end = rpc.event("agent_end");
    assert_eq!(end["stopReason"], "aborted", "{end}");
    let (status, stderr, seen) = rpc.close();
    assert!(status.success(), "{stderr}");
    assert!(!seen.iter().any(|l| l.to_string().contains("never-reached")), "the model was asked again");
}

/// A transient error is retried with upstream's `auto_retry_start` / `auto_retry_end` lines;
/// `abort_retry` stops a retry that waits, and the prompt ends with the error it had.
#[test]
fn retries_are_reported_and_abort_retry_stops_a_waiting_one() {
    let dir = scratch("rpc-retry");
    let script = json!([
        {"error": {"status": 429, "message": "slow down", "retryAfterSecs": 0}},
        {"text": "answered after a retry"},
        {"error": {"status": 503, "message": "overloaded", "retryAfterSecs": 25}},
        {"text": "never sent"}
    ]);
    let mut rpc = Rpc::start(&dir, &script, &[]);
    rpc.call(json!({"type": "prompt", "message": "first"}));
    let start = rpc.event("auto_retry_start");
    assert_eq!((&start["attempt"], &start["maxAttempts"]), (&json!(1), &json!(3)), "{start}");
    assert!(start["errorMessage"].as_str().unwrap().contains("slow down"), "{start}");
    let end = rpc.event("auto_retry_end");
    assert_eq!((&end["success"], &end["attempt"]), (&json!(true), &json!(1)), "{end}");
    assert!(end.get("finalError").is_none(), "{end}");
    rpc.event("agent_end");
    // The second prompt's retry would wait 25 s: abort_retry ends it now.
    rpc.call(json!({"type": "prompt", "message": "second"}));
    let start = rpc.event("auto_retry_start");
    assert_eq!(start["delayMs"], 25_000, "{start}");
    rpc.call(json!({"type": "abort_retry"}));
    let end = rpc.event("auto_retry_end");
    assert_eq!(end["success"], false, "{end}");
    assert!(end["finalError"].as_str().unwrap().contains("overloaded"), "{end}");
    let agent_end = rpc.event("agent_end");
    assert_eq!(agent_end["stopReason"], "error", "{agent_end}");
    let (status, stderr, _) = rpc.close();
    assert!(status.success(), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// RPC `images` on a prompt reach the model with the text (upstream's `ImageContent`); an image
/// that is not one is refused naming it.
#[test]
fn prompt_images_reach_the_model() {
    let dir = scratch("rpc-images");
    let script = json!([{"text": "I see a PNG.", "expect": ["look at this", "\"type\":\"image\""]}]);
    let mut rpc = Rpc::start(&dir, &script, &[]);
    let png = "iVBORw0KGgoAAAANSUhEUg==";
    let id = rpc.send(json!({"type": "prompt", "message": "look", "images": [{"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}]}));
    let refused = rpc.response(&id);
    assert!(refused["error"].as_str().unwrap().contains("images[0]: not a PNG"), "{refused}");
    rpc.call(json!({"type": "prompt", "message": "look at this", "images": [{"type": "image", "data": png, "mimeType": "image/png"}]}));
    let end = rpc.event("agent_end");
    assert_eq!(end["stopReason"], "stop", "{end}");
    let user = &end["messages"][0];
    assert_eq!(user["content"][1], json!({"type": "image", "data": png, "mimeType": "image/png"}), "{user}");
    let (status, stderr, _) = rpc.close();
    assert!(status.success(), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `ctx.compact({ onComplete, onError })`: the extension hears how its compaction went.
#[test]
fn an_extensions_compaction_calls_back_with_its_outcome() {
    let dir = scratch("rpc-ext-compact");
    std::fs::create_dir_all(dir.join("agent")).unwrap();
    std::fs::write(dir.join("agent/settings.json"), r#"{"compaction": {"keepRecentTokens": 1}}"#).unwrap();
    let extension = dir.join("compact.mjs");
    std::fs::write(
        &extension,
        r#"export default function (pi) {
  pi.registerCommand("squash", { description: "Compacts", handler: async (_a, ctx) => ctx.compact({
    customInstructions: "keep the names",
    onComplete: (r) => ctx.ui.notify(`compacted:${r.summary}:${r.tokensBefore > 0}`),
    onError: (e) => ctx.ui.notify(`not compacted:${e.message}`),
  }) });
}
"#,
    )
    .unwrap();
    let script = json!([{"text": "One."}, {"text": "Two."}, {"text": "The summary.", "expect": ["keep the names"]}]);
    let mut rpc = Rpc::start(&dir, &script, &["-e", extension.to_str().unwrap()]);
    rpc.call(json!({"type": "prompt", "message": "/squash"}));
    let failed = rpc.wait_for("onError", |l| l["method"] == "notify");
    assert!(failed["message"].as_str().unwrap().starts_with("not compacted:"), "{failed}");
    for prompt in ["first", "second"] {
        rpc.call(json!({"type": "prompt", "message": prompt}));
        rpc.event("agent_end");
    }
    rpc.call(json!({"type": "prompt", "message": "/squash"}));
    let done = rpc.wait_for("onComplete", |l| l["method"] == "notify");
    assert_eq!(done["message"], "compacted:The summary.:true", "{done}");
    let (status, stderr, _) = rpc.close();
    assert!(status.success(), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An automatic compaction (the context over the threshold) is `compaction_start` /
/// `compaction_end` with `reason: "threshold"`, and older upstream releases'
/// `auto_compaction_start` / `auto_compaction_end` as well.
#[test]
fn automatic_compaction_is_reported_under_both_upstream_names() {
    let dir = scratch("rpc-auto-compact");
    std::fs::create_dir_all(dir.join("agent")).unwrap();
    std::fs::write(
        dir.join("agent/settings.json"),
        r#"{"compaction": {"reserveTokens": 127990, "keepRecentTokens": 1}}"#,
    )
    .unwrap();
    let script = json!([{"text": "One, with enough words to pass the threshold."}, {"text": "The auto summary."},
                        {"text": "Two."}, {"text": "Again."}, {"text": "More."}]);
    let mut rpc = Rpc::start(&dir, &script, &[]);
    for prompt in ["first", "second"] {
        rpc.call(json!({"type": "prompt", "message": prompt}));
        rpc.event("agent_end");
    }
    let start = rpc.seen_or_wait("auto_compaction_start", |l| l["type"] == "auto_compaction_start");
    assert_eq!(start["reason"], "threshold", "{start}");
    let end = rpc.seen_or_wait("auto_compaction_end", |l| l["type"] == "auto_compaction_end");
    assert_eq!(end["result"]["summary"], "The auto summary.", "{end}");
    let new_end = rpc.seen_or_wait("compaction_end", |l| l["type"] == "compaction_end");
    assert_eq!(new_end["reason"], "threshold", "{new_end}");
    let (status, stderr, _) = rpc.close();
    assert!(status.success(), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}
