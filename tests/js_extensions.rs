//! JavaScript extensions in upstream pi's shape (`export default function (pi) { … }`), run by
//! pi's JavaScript host under `node`: the example extensions in `examples/extensions/`, through
//! `pi -p` on the faux provider and against a loopback OpenAI-compatible server.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod support;

use support::Flag;

use support::Succeeds;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use support::{pi, scratch};

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/extensions").join(name)
}

#[test]
fn the_example_extensions_gate_audit_and_number_lines_in_print_mode() {
    let d = scratch("js-examples");
    std::fs::write(d.join("notes.txt"), "alpha\nbeta\n").unwrap();
    let script = d.join("script.json");
    std::fs::write(
        &script,
        json!([
            {"text": "Working.", "tools": [
                {"name": "bash", "arguments": {"command": "rm -rf /tmp/pi-js-nothing-here"}},
                {"name": "read", "arguments": {"path": "notes.txt"}},
                {"name": "bash", "arguments": {"command": "echo hi"}}]},
            // The faux model checks what it was sent: the numbered lines.
            {"text": "Done.", "expect": ["   1  alpha\n   2  beta"]}
        ])
        .to_string(),
    )
    .unwrap();
    let audit = d.join("audit.jsonl");
    let out = pi()
        .args(["-p", "go", "--no-session", "--mode", "json", "--faux-script"])
        .arg(&script)
        .args(["--cwd"])
        .arg(&d)
        // The audit log first: handlers after a block do not run, and it should see every call.
        .flag("-e", example("audit-log.mjs"))
        .flag("-e", example("permission-gate.mjs"))
        .flag("-e", example("line-numbers.mjs"))
        .env("PI_CODING_AGENT_DIR", d.join("agent"))
        .env("PI_AUDIT_LOG", &audit)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let results: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "message_end" && e["message"]["role"] == "toolResult")
        .map(|e| e["message"].clone())
        .collect();
    assert_eq!(results.len(), 3, "{stderr}");
    assert_eq!(results[0]["isError"], true);
    assert!(results[0]["content"][0]["text"].as_str().unwrap().contains("no UI to confirm"), "{:?}", results[0]);
    assert_eq!(results[1]["content"][0]["text"], "   1  alpha\n   2  beta", "read output numbered");
    assert_eq!(results[2]["content"][0]["text"], "hi\n", "a harmless command runs");
    let lines: Vec<Value> =
        std::fs::read_to_string(&audit).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let events: Vec<&str> = lines.iter().map(|l| l["event"].as_str().unwrap()).collect();
    assert_eq!(events, ["session_start", "tool_call", "tool_call", "tool_call", "session_shutdown"]);
    assert_eq!(lines[0]["reason"], "startup");
    // Without the patch the model would have seen plain lines: the script's check fails.
    let plain = pi()
        .args(["-p", "go", "--no-session", "--faux-script"])
        .arg(&script)
        .flag("--cwd", &d)
        .env("PI_CODING_AGENT_DIR", d.join("agent"))
        .output()
        .unwrap();
    assert!(!plain.status.success());
    assert!(
        String::from_utf8_lossy(&plain.stderr).contains("does not contain"),
        "{}",
        String::from_utf8_lossy(&plain.stderr)
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn the_trace_header_example_reaches_the_provider() {
    let d = scratch("js-header");
    let (base, server) = support::one_shot_openai_server();
    pi().args(["-p", "hi", "--tools", "none", "--model", "llama-local", "--base-url", &base, "--session"])
        .arg(d.join("s.jsonl"))
        .flag("-e", example("trace-header.mjs"))
        .env("PI_CODING_AGENT_DIR", d.join("agent"))
        .succeeds();
    let request = server.join().unwrap().to_ascii_lowercase();
    let session: Value =
        serde_json::from_str(std::fs::read_to_string(d.join("s.jsonl")).unwrap().lines().next().unwrap()).unwrap();
    let id = session["id"].as_str().unwrap();
    assert!(request.contains(&format!("x-pi-session-id: {id}")), "{request}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_broken_javascript_extension_stops_the_run_naming_it_and_why() {
    let d = scratch("js-broken");
    let file = d.join("broken.mjs");
    std::fs::write(&file, "export default 42;\n").unwrap();
    let out = pi()
        .args(["-p", "hi", "--no-session", "--tools", "none", "-e"])
        .arg(&file)
        .env("PI_CODING_AGENT_DIR", d.join("agent"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("broken.mjs") && stderr.contains("default export is not a function"), "{stderr}");
    assert!(out.stdout.is_empty(), "the model was not asked");
    let log = std::fs::read_to_string(d.join("agent/logs/extensions/broken.log")).unwrap();
    assert!(log.contains("default export is not a function"), "{log}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// TypeScript needs nothing installed: pi compiles it.
#[test]
fn a_typescript_extension_runs_unmodified() {
    let d = scratch("js-ts");
    let script = d.join("script.json");
    std::fs::write(
        &script,
        json!([{"text": "Writing.", "tools": [
            {"name": "write", "arguments": {"path": ".env", "content": "KEY=1"}},
            {"name": "write", "arguments": {"path": "ok.txt", "content": "fine"}}]},
            {"text": "Done."}])
        .to_string(),
    )
    .unwrap();
    let source = std::fs::read_to_string(example("protected-paths.ts")).unwrap();
    assert!(source.contains("import type {") && source.contains(": ToolCallEvent"), "the example really is TypeScript");
    pi().args(["-p", "go", "--no-session", "--faux-script"])
        .arg(&script)
        .flag("--cwd", &d)
        .flag("-e", example("protected-paths.ts"))
        .env("PI_CODING_AGENT_DIR", d.join("agent"))
        .succeeds();
    assert!(!d.join(".env").exists(), "the protected write was blocked");
    assert_eq!(std::fs::read_to_string(d.join("ok.txt")).unwrap(), "fine");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn commands_run_as_slash_commands_and_may_hand_back_a_prompt() {
    let d = scratch("js-commands");
    let file = d.join("commands.mjs");
    std::fs::write(
        &file,
        r#"export default function (pi) {
  pi.registerCommand("greet", { description: "Says hello", handler: async (args) => `Hello ${args}!` });
  pi.registerCommand("ask", { description: "Asks the model politely", handler: async (args) => { pi.sendUserMessage(`Please ${args}`); } });
  pi.on("input", async (event) => { console.log(`INPUT-SOURCE ${event.source}`); });
}
"#,
    )
    .unwrap();
    let session = d.join("s.jsonl");
    let run = |prompt: &str| {
        let _ = std::fs::remove_file(&session);
        pi().args(["-p", prompt, "--tools", "none", "--session"])
            .arg(&session)
            .flag("-e", &file)
            .env("PI_CODING_AGENT_DIR", d.join("agent"))
            .output()
            .unwrap()
    };
    // What the model was asked: the user message in the session.
    let asked = || -> Vec<String> {
        std::fs::read_to_string(&session)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["message"]["role"] == "user")
            .map(|e| e["message"]["content"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let out = run("/greet Ada");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.trim(), "Hello Ada!", "the command's text, and no model call");
    assert!(asked().is_empty());
    let out = run("/ask review the diff");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(asked(), ["Please review the diff"]);
    let log = std::fs::read_to_string(d.join("agent/logs/extensions/commands.log")).unwrap();
    assert!(log.contains("INPUT-SOURCE extension"), "a prompt an extension sent has source extension: {log}");
    run("/unknown thing");
    assert_eq!(asked(), ["/unknown thing"], "not a command: the prompt as typed");
    let log = std::fs::read_to_string(d.join("agent/logs/extensions/commands.log")).unwrap();
    assert!(log.contains("INPUT-SOURCE interactive"), "typed on the command line: interactive, as upstream");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn the_subagent_example_nests_the_child_trace_under_the_tool_span_and_bills_it_once() {
    let d = scratch("js-subagent");
    let receiver = pi_observe::otel::testing::Receiver::start(vec![]);
    let base = receiver.endpoint.trim_end_matches("/v1/traces").to_owned();
    let parent = d.join("parent.json");
    std::fs::write(
        &parent,
        json!([{"text": "Delegating.", "tools": [{"name": "subagent", "arguments": {"task": "count the files"}}]},
               {"text": "The sub-agent says 3."}])
        .to_string(),
    )
    .unwrap();
    let child = d.join("child.json");
    std::fs::write(&child, json!([{"text": "There are 3 files."}]).to_string()).unwrap();
    let session = d.join("s.jsonl");
    pi().args(["-p", "go", "--user", "ada", "--org", "acme", "--session"])
        .arg(&session)
        .flag("--faux-script", &parent)
        .flag("-e", example("subagent.mjs"))
        .env("PI_CODING_AGENT_DIR", d.join("agent"))
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &base)
        .env("SUBAGENT_FAUX_SCRIPT", &child)
        .succeeds();
    let spans = receiver.spans();
    let tool = spans.iter().find(|s| s.name == "execute_tool subagent").expect("the tool span");
    let roots: Vec<_> = spans.iter().filter(|s| s.name.starts_with("invoke_agent")).collect();
    assert_eq!(roots.len(), 2, "the parent's prompt and the child's");
    // One trace for both prompts (session start/end hooks outside a prompt have their own).
    let in_prompts =
        spans.iter().filter(|s| ["invoke_agent", "chat", "execute_tool"].iter().any(|p| s.name.starts_with(p)));
    assert!(in_prompts.clone().count() >= 5, "{:?}", spans.iter().map(|s| &s.name).collect::<Vec<_>>());
    assert!(in_prompts.into_iter().all(|s| s.trace_id == tool.trace_id), "one trace");
    let child_root =
        roots.iter().find(|s| s.parent_span_id == tool.span_id).expect("the child's root under the tool span");
    let user = |s: &opentelemetry_proto::tonic::trace::v1::Span| {
        support::attr(s, "user.id").and_then(|v| match v {
            opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(s) => Some(s.clone()),
            _ => None,
        })
    };
    assert_eq!(user(child_root).as_deref(), Some("ada"), "the child runs for the same user");
    // The child's usage is on the tool result and counted once: parent turns + child turn.
    let lines: Vec<Value> =
        std::fs::read_to_string(&session).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let tool_usage = lines
        .iter()
        .find(|e| e["message"]["role"] == "toolResult")
        .map(|e| e["message"]["usage"]["totalTokens"].as_u64().unwrap())
        .unwrap();
    assert!(tool_usage > 0);
    let parent_usage: u64 = lines
        .iter()
        .filter(|e| e["message"]["role"] == "assistant")
        .map(|e| e["message"]["usage"]["totalTokens"].as_u64().unwrap())
        .sum();
    let report = pi().args(["report", "--format", "json"]).arg(&session).output().unwrap();
    let rows: Vec<Value> = serde_json::from_slice(&report.stdout).unwrap();
    let billed: u64 = rows.iter().map(|r| r["totalTokens"].as_u64().unwrap()).sum();
    assert_eq!(billed, parent_usage + tool_usage);
    std::fs::remove_dir_all(&d).unwrap();
}

/// A TypeScript extension importing its siblings as TypeScript spells them (`./x.js` for `x.ts`),
/// a package in its own `node_modules`, with an enum and a parameter property; a syntax error
/// stops the run naming the file and line.
#[test]
fn typescript_modules_resolve_from_the_extensions_own_folder() {
    let d = scratch("js-ts-folder");
    let ext = d.join("ext");
    std::fs::create_dir_all(ext.join("node_modules/shout")).unwrap();
    std::fs::write(
        ext.join("node_modules/shout/package.json"),
        r#"{"name":"shout","type":"module","main":"index.js"}"#,
    )
    .unwrap();
    std::fs::write(ext.join("node_modules/shout/index.js"), "export const shout = (s) => s.toUpperCase();\n").unwrap();
    std::fs::write(
        ext.join("limits.ts"),
        "export enum Verdict { Allow = \"allow\", Block = \"block\" }\n\
         export class Limit { constructor(private readonly words: string[]) {}\n\
           judge(command: string): Verdict { return this.words.some((w) => command.includes(w)) ? Verdict.Block : Verdict.Allow; } }\n",
    )
    .unwrap();
    std::fs::write(
        ext.join("gate.ts"),
        "import type { ExtensionAPI } from \"@mariozechner/pi-coding-agent\";\n\
         import { Limit, Verdict } from \"./limits.js\";\n\
         import { shout } from \"shout\";\n\
         export default function (pi: ExtensionAPI) {\n\
           const limit = new Limit([\"rm -rf\"]);\n\
           pi.on(\"tool_call\", async (event: any) => limit.judge(String(event.input.command ?? \"\")) === Verdict.Block\n\
             ? { block: true, reason: shout(\"blocked by the gate\") } : undefined);\n\
         }\n",
    )
    .unwrap();
    let script = d.join("script.json");
    std::fs::write(
        &script,
        json!([{"text": "Working.", "tools": [
            {"name": "bash", "arguments": {"command": "rm -rf ./important"}},
            {"name": "bash", "arguments": {"command": "echo fine"}}]},
            {"text": "Done."}])
        .to_string(),
    )
    .unwrap();
    std::fs::create_dir_all(d.join("important")).unwrap();
    let out = pi()
        .args(["-p", "go", "--no-session", "--mode", "json", "--faux-script"])
        .arg(&script)
        .flag("--cwd", &d)
        .flag("-e", ext.join("gate.ts"))
        .env("PI_CODING_AGENT_DIR", d.join("agent"))
        .succeeds();
    assert!(d.join("important").exists(), "the gate blocked rm -rf");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("BLOCKED BY THE GATE") && stdout.contains("fine"), "{stdout}");

    std::fs::write(ext.join("broken.ts"), "export default function (pi: any) {\n  const x: number = ;\n}\n").unwrap();
    let out = pi()
        .args(["-p", "go", "--no-session", "--tools", "none"])
        .flag("-e", ext.join("broken.ts"))
        .env("PI_CODING_AGENT_DIR", d.join("agent"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("broken.ts:2:") && stderr.lines().count() == 1, "{stderr}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// Upstream's three extension styles in the global folder: a single file, a folder with
/// `index.ts` and a helper, and a package whose `package.json` lists `pi.extensions`; each one's
/// command answers. A `-e` folder that runs nothing is refused by name.
#[test]
fn single_files_index_folders_and_packages_load_from_the_extensions_folder() {
    let d = scratch("js-folders");
    let folder = d.join("agent/extensions");
    std::fs::create_dir_all(folder.join("multi")).unwrap();
    std::fs::create_dir_all(folder.join("packaged/src")).unwrap();
    std::fs::create_dir_all(folder.join("notes")).unwrap();
    let command = |name: &str, reply: &str| {
        format!(
            "export default function (pi: any) {{ pi.registerCommand(\"{name}\", {{ handler: async () => {reply} }}); }}\n"
        )
    };
    std::fs::write(folder.join("single.ts"), command("single", "\"from a file\"")).unwrap();
    std::fs::write(folder.join("multi/words.ts"), "export const words: string = \"from index.ts\";\n").unwrap();
    std::fs::write(
        folder.join("multi/index.ts"),
        format!("import {{ words }} from \"./words\";\n{}", command("multi", "words")),
    )
    .unwrap();
    std::fs::write(
        folder.join("packaged/package.json"),
        r#"{"name": "packaged", "type": "module", "pi": {"extensions": ["./src/main.ts"]}}"#,
    )
    .unwrap();
    std::fs::write(folder.join("packaged/src/main.ts"), command("packaged", "\"from package.json\"")).unwrap();
    std::fs::write(folder.join("notes/README.md"), "not an extension\n").unwrap();
    for (name, reply) in [("single", "from a file"), ("multi", "from index.ts"), ("packaged", "from package.json")] {
        let out = pi()
            .args(["-p", &format!("/{name}"), "--no-session", "--tools", "none"])
            .env("PI_CODING_AGENT_DIR", d.join("agent"))
            .succeeds();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), reply, "{name}");
    }
    let out = pi()
        .args(["-p", "hi", "--no-session", "-e"])
        .arg(folder.join("notes"))
        .env("PI_CODING_AGENT_DIR", d.join("agent"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("notes: not an extension"));
    std::fs::remove_dir_all(&d).unwrap();
}
