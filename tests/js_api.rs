//! JavaScript extensions and upstream's ExtensionAPI: upstream's npm packages installed on first
//! use (and named when offline), upstream's own `RpcClient` answering an extension's dialog,
//! `terminate`, `appendEntry`, session names and labels.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod support;

use std::path::Path;

use serde_json::json;
use support::{Flag, Succeeds, pi, scratch};

/// An extension importing values from upstream's packages (TypeBox's `Type` through `pi-ai`,
/// `@sinclair/typebox`, pi-tui's `truncateToWidth`): pi installs the pinned npm packages into
/// its JS folder on first use (one stderr line) and the tool runs with its schema. Needs the npm
/// registry (as `scripts/test` has); the agent folder is kept in `target/` so later runs reuse it.
#[test]
#[ignore = "installs upstream's npm packages once: run by scripts/test"]
fn upstream_packages_are_installed_once_and_resolve_for_extensions() {
    let d = scratch("js-upstream");
    let agent = Path::new(env!("CARGO_TARGET_TMPDIR")).join("upstream-agent");
    let ext = d.join("greet.ts");
    std::fs::write(
        &ext,
        r#"import { Type } from "@mariozechner/pi-ai";
import { Type as Box } from "@sinclair/typebox";
import { truncateToWidth } from "@mariozechner/pi-tui";
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";
export default function (pi: ExtensionAPI) {
  pi.registerTool({
    name: "greet",
    label: "Greet",
    description: "Greets someone",
    parameters: Type.Object({ name: Type.String({ description: "who" }), loud: Type.Optional(Box.Boolean()) }),
    async execute(_id: string, params: { name: string }) {
      return { content: [{ type: "text", text: truncateToWidth(`Hello, ${params.name}!`, 40) }], details: {} };
    },
  });
}
"#,
    )
    .unwrap();
    let script = d.join("script.json");
    std::fs::write(
        &script,
        json!([{"text": "Greeting.", "tools": [{"name": "greet", "arguments": {"name": "pi"}}]}, {"text": "Done."}])
            .to_string(),
    )
    .unwrap();
    let out = pi()
        .args(["-p", "greet", "--no-session", "--mode", "json", "--faux-script"])
        .arg(&script)
        .flag("-e", &ext)
        .env("PI_CODING_AGENT_DIR", &agent)
        .succeeds();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.lines().filter(|l| l.contains("installing upstream's extension packages")).count() <= 1, "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Hello, pi!"), "{stdout}");
    assert!(agent.join("js/node_modules/@mariozechner/pi-tui/package.json").is_file());
    // Installed now: a second run says nothing about installing.
    let again = pi()
        .args(["-p", "greet", "--no-session", "--faux-script"])
        .arg(&script)
        .flag("-e", &ext)
        .env("PI_CODING_AGENT_DIR", &agent)
        .succeeds();
    assert!(!String::from_utf8_lossy(&again.stderr).contains("installing"), "installed once");
    std::fs::remove_dir_all(&d).unwrap();
}

/// Offline (a registry nobody answers): the extension fails to load, naming the one command that
/// installs upstream's packages.
#[test]
fn without_the_registry_an_extension_needing_upstreams_packages_names_the_install_command() {
    let d = scratch("js-upstream-offline");
    let ext = d.join("schema.ts");
    std::fs::write(
        &ext,
        "import { Type } from \"@sinclair/typebox\";\nexport default function (pi: any) { Type.Object({}); }\n",
    )
    .unwrap();
    let out = pi()
        .args(["-p", "hi", "--no-session", "--tools", "none"])
        .flag("-e", &ext)
        .env("PI_CODING_AGENT_DIR", d.join("agent"))
        .env("npm_config_registry", "http://127.0.0.1:9/")
        .env("npm_config_fetch_retries", "0")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let error = stderr.lines().last().unwrap_or("");
    assert!(error.contains("schema.ts") && error.contains("install them with: npm install --prefix"), "{stderr}");
    assert!(out.stdout.is_empty(), "the model was not asked");
    std::fs::remove_dir_all(&d).unwrap();
}

/// Upstream's `terminate: true`: a turn whose every tool says so ends the run on the results; a
/// turn where only some do asks the model again.
#[test]
fn a_tool_result_that_terminates_ends_the_run_when_every_tool_of_the_turn_says_so() {
    let d = scratch("js-terminate");
    let ext = d.join("final.mjs");
    std::fs::write(
        &ext,
        r#"export default function (pi) {
  pi.registerTool({ name: "final", description: "Ends the run", parameters: { type: "object", properties: {} },
    async execute() { return { content: [{ type: "text", text: "saved" }], terminate: true }; } });
}
"#,
    )
    .unwrap();
    let run = |steps: serde_json::Value| {
        let script = d.join("script.json");
        std::fs::write(&script, steps.to_string()).unwrap();
        pi().args(["-p", "go", "--no-session", "--mode", "json", "--faux-script"])
            .arg(&script)
            .flag("--cwd", &d)
            .flag("-e", &ext)
            .env("PI_CODING_AGENT_DIR", d.join("agent"))
            .output()
            .unwrap()
    };
    // One step only: a second model call would find none and fail the run.
    let out = run(json!([{"text": "Finishing.", "tools": [{"name": "final", "arguments": {}}]}]));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = run(json!([
        {"text": "Both.", "tools": [{"name": "final", "arguments": {}}, {"name": "ls", "arguments": {}}]},
        {"text": "Asked again.", "expect": ["saved"]}
    ]));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Asked again."));
    std::fs::remove_dir_all(&d).unwrap();
}

/// Upstream's own `RpcClient` (from its npm package) drives `pi --mode rpc` and answers an
/// extension's `ctx.ui.confirm` — an `extension_ui_request` — with an `extension_ui_response`.
#[test]
#[ignore = "needs upstream's npm packages: run by scripts/test"]
fn upstreams_rpc_client_answers_an_extension_ui_request() {
    let agent = support::upstream_agent();
    let d = scratch("js-rpc-client");
    std::fs::write(
        d.join("ask.mjs"),
        r#"export default function (pi) {
  pi.on("tool_call", async (event, ctx) => {
    const ok = await ctx.ui.confirm("Allow bash?", event.input.command);
    return ok ? undefined : { block: true, reason: "refused" };
  });
}
"#,
    )
    .unwrap();
    std::fs::write(
        d.join("script.json"),
        json!([{"text": "Running.", "tools": [{"name": "bash", "arguments": {"command": "echo via-rpc-client"}}]},
               {"text": "Done.", "expect": ["via-rpc-client"]}])
        .to_string(),
    )
    .unwrap();
    // RpcClient runs `node CLI_PATH --mode rpc …`: the shim hands that to pi.
    std::fs::write(
        d.join("shim.mjs"),
        r#"import { spawn } from "node:child_process";
const child = spawn(process.env.PI_BIN, process.argv.slice(2), { stdio: "inherit" });
process.on("SIGTERM", () => child.kill("SIGTERM"));
child.on("exit", (code) => process.exit(code ?? 1));
"#,
    )
    .unwrap();
    // Next to upstream's packages, so `@mariozechner/pi-coding-agent` resolves.
    let client = agent.join("js").join(format!("rpc-client-{}.mjs", std::process::id()));
    std::fs::write(
        &client,
        r#"import { RpcClient } from "@mariozechner/pi-coding-agent";
const [dir] = process.argv.slice(2);
const client = new RpcClient({ cliPath: `${dir}/shim.mjs`, cwd: dir,
  args: ["--no-session", "--faux-script", `${dir}/script.json`, "-e", `${dir}/ask.mjs`] });
await client.start();
const asked = [];
client.onEvent((event) => {
  if (event.type === "extension_ui_request" && event.method === "confirm") {
    asked.push(`${event.title} ${event.message}`);
    client.process.stdin.write(JSON.stringify({ type: "extension_ui_response", id: event.id, confirmed: true }) + "\n");
  }
});
const events = await client.promptAndWait("go", undefined, 30000);
const ended = events.find((e) => e.type === "tool_execution_end");
console.log(JSON.stringify({ asked, output: ended?.result?.content?.[0]?.text, error: ended?.isError }));
await client.stop();
"#,
    )
    .unwrap();
    let out = std::process::Command::new("node")
        .arg(&client)
        .arg(&d)
        .env("PI_BIN", env!("CARGO_BIN_EXE_pi"))
        .env("PI_CODING_AGENT_DIR", &agent)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&client);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(out.stdout.trim_ascii()).unwrap();
    assert_eq!(report["asked"], json!(["Allow bash? echo via-rpc-client"]), "{report}");
    assert_eq!(report["output"], "via-rpc-client\n", "the answer let the tool run: {report}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// `pi.appendEntry` keeps data in the session as a `custom` entry, written at pi's next write.
#[test]
fn append_entry_writes_a_custom_session_entry() {
    let d = scratch("js-append-entry");
    let ext = d.join("keep.mjs");
    std::fs::write(
        &ext,
        r#"export default function (pi) {
  pi.on("tool_call", async (event) => { pi.appendEntry("audit-note", { tool: event.toolName }); });
}
"#,
    )
    .unwrap();
    let script = d.join("script.json");
    std::fs::write(
        &script,
        json!([{"text": "Listing.", "tools": [{"name": "ls", "arguments": {}}]}, {"text": "Done."}]).to_string(),
    )
    .unwrap();
    let session = d.join("s.jsonl");
    pi().args(["-p", "go", "--faux-script"])
        .arg(&script)
        .flag("--cwd", &d)
        .flag("--session", &session)
        .flag("-e", &ext)
        .env("PI_CODING_AGENT_DIR", d.join("agent"))
        .succeeds();
    let entries: Vec<serde_json::Value> =
        std::fs::read_to_string(&session).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let kept: Vec<_> = entries.iter().filter(|e| e["type"] == "custom" && e["customType"] == "audit-note").collect();
    assert_eq!(kept.len(), 1, "{entries:?}");
    assert_eq!(kept[0]["data"], json!({"tool": "ls"}));
    std::fs::remove_dir_all(&d).unwrap();
}

/// `pi.setSessionName` and `pi.setLabel` are session entries (`session_info`, `label`) written
/// by pi; the name is known to the extension at once.
#[test]
fn session_names_and_labels_are_written_to_the_session() {
    let d = scratch("js-session-name");
    let ext = d.join("name.mjs");
    std::fs::write(
        &ext,
        r#"export default function (pi) {
  pi.registerCommand("name", { handler: async (args, ctx) => {
    pi.setSessionName(args);
    const leaf = ctx.sessionManager.getLeafId();
    if (leaf) pi.setLabel(leaf, "named-here");
    return `named: ${pi.getSessionName()}`;
  } });
}
"#,
    )
    .unwrap();
    let session = d.join("s.jsonl");
    let run = |prompt: &str| {
        pi().args(["-p", prompt, "--tools", "none"])
            .flag("--session", &session)
            .flag("-e", &ext)
            .env("PI_CODING_AGENT_DIR", d.join("agent"))
            .succeeds()
    };
    run("hello");
    let out = run("/name Feature X");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "named: Feature X");
    let entries: Vec<serde_json::Value> =
        std::fs::read_to_string(&session).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(entries.iter().any(|e| e["type"] == "session_info" && e["name"] == "Feature X"), "{entries:?}");
    assert!(entries.iter().any(|e| e["type"] == "label" && e["label"] == "named-here"), "{entries:?}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// `pi.getAllTools` / `getActiveTools` from session_start on; `setActiveTools` narrows what the
/// model is offered from pi's next write (here: the prompt's start).
#[test]
fn extensions_read_the_tools_and_narrow_the_active_ones() {
    let d = scratch("js-active-tools");
    let ext = d.join("narrow.mjs");
    std::fs::write(
        &ext,
        r#"export default function (pi) {
  pi.on("session_start", async () => {
    const all = pi.getAllTools().map((t) => t.name);
    if (!all.includes("bash") || !pi.getActiveTools().includes("ls")) throw new Error(`tools: ${all}`);
    pi.setActiveTools(["read", "ls"]);
  });
  pi.on("before_agent_start", async () => ({ message: { customType: "tools", content: `active: ${pi.getActiveTools().join(",")}` } }));
}
"#,
    )
    .unwrap();
    let script = d.join("script.json");
    // The request must carry the note and offer only read and ls: a call to bash is refused.
    std::fs::write(
        &script,
        json!([{"text": "Trying.", "expect": ["active: read,ls"], "tools": [{"name": "bash", "arguments": {"command": "echo no"}}]},
               {"text": "Done.", "expect": ["unknown tool"]}])
        .to_string(),
    )
    .unwrap();
    let out = pi()
        .args(["-p", "go", "--no-session", "--mode", "json", "--faux-script"])
        .arg(&script)
        .flag("--cwd", &d)
        .flag("-e", &ext)
        .env("PI_CODING_AGENT_DIR", d.join("agent"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    std::fs::remove_dir_all(&d).unwrap();
}

/// `pi.sendMessage`: a `custom_message` entry that the model gets in its context.
#[test]
fn send_message_reaches_the_model_as_a_custom_message() {
    let d = scratch("js-send-message");
    let ext = d.join("send.mjs");
    std::fs::write(
        &ext,
        r#"export default function (pi) {
  pi.on("session_start", async () => { pi.sendMessage({ customType: "hint", content: "remember the hint-token", display: true }); });
}
"#,
    )
    .unwrap();
    let script = d.join("script.json");
    std::fs::write(&script, json!([{"text": "Seen.", "expect": ["remember the hint-token"]}]).to_string()).unwrap();
    let session = d.join("s.jsonl");
    pi().args(["-p", "go", "--tools", "none", "--faux-script"])
        .arg(&script)
        .flag("--session", &session)
        .flag("-e", &ext)
        .env("PI_CODING_AGENT_DIR", d.join("agent"))
        .succeeds();
    let written = std::fs::read_to_string(&session).unwrap();
    assert!(written.contains(r#""type":"custom_message""#) && written.contains("hint-token"), "{written}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// Upstream's `pi.registerFlag`: `pi --name value` reaches the extension's `getFlag` (an option
/// neither pi nor a loaded extension takes is refused by name); a tool registered after start
/// (here in `session_start`) is offered and runs from the next prompt.
#[test]
fn extension_flags_and_tools_registered_after_start() {
    let d = scratch("js-flags-late-tools");
    let ext = d.join("late.mjs");
    std::fs::write(
        &ext,
        r#"export default function (pi) {
  pi.registerFlag("greeting", { type: "string", default: "hello" });
  pi.registerFlag("loud", { type: "boolean", default: false });
  pi.on("session_start", async () => {
    pi.registerTool({ name: "late", description: "Registered late", parameters: { type: "object", properties: {} },
      async execute() { return { content: [{ type: "text", text: `${pi.getFlag("greeting")} loud=${pi.getFlag("loud")}` }] }; } });
  });
}
"#,
    )
    .unwrap();
    let script = d.join("script.json");
    std::fs::write(
        &script,
        json!([{"tools": [{"name": "late", "arguments": {}}]}, {"text": "Done.", "expect": ["hola loud=true"]}])
            .to_string(),
    )
    .unwrap();
    let run = |extra: &[&str]| {
        pi().args(["-p", "go", "--no-session", "--faux-script"])
            .arg(&script)
            .flag("-e", &ext)
            .args(extra)
            .env("PI_CODING_AGENT_DIR", d.join("agent"))
            .output()
            .unwrap()
    };
    let ok = run(&["--greeting", "hola", "--loud"]);
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    let refused = run(&["--greeting=hola", "--nope"]);
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("'--nope'") && stderr.lines().count() == 1, "{stderr}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// Upstream's `ctx.model` and `ctx.modelRegistry`: the model in upstream's `Model` shape, the
/// table (`find`), and the credentials pi would send it (a `models.json` key, resolved).
#[test]
fn extensions_read_the_model_table_and_credentials() {
    let d = scratch("js-model-registry");
    let ext = d.join("key.mjs");
    std::fs::write(
        &ext,
        r#"export default function (pi) {
  pi.registerCommand("key", { description: "Shows the model's credentials", handler: async (_a, ctx) => {
    const auth = await ctx.modelRegistry.getApiKeyAndHeaders(ctx.model);
    const found = ctx.modelRegistry.find("loop", "loop-1");
    const missing = await ctx.modelRegistry.getApiKeyAndHeaders({ provider: "nope", id: "x" });
    return `${ctx.model.api} ${ctx.model.baseUrl} ${auth.ok} ${auth.apiKey} ${auth.headers["x-team"]} ${found?.contextWindow} ${missing.ok} ${missing.error}`;
  } });
}
"#,
    )
    .unwrap();
    let models = d.join("models.json");
    std::fs::write(
        &models,
        json!({"providers": {"loop": {"baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions",
            "apiKey": "LOOP_TEST_KEY", "headers": {"x-team": "red"},
            "models": [{"id": "loop-1", "contextWindow": 32000, "maxTokens": 4096}]}}})
        .to_string(),
    )
    .unwrap();
    let out = pi()
        .args(["-p", "/key", "--no-session", "--provider", "loop", "--model", "loop-1"])
        .flag("--models-file", &models)
        .flag("-e", &ext)
        .env("LOOP_TEST_KEY", "sk-from-env")
        .env("PI_CODING_AGENT_DIR", d.join("agent"))
        .succeeds();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.trim(),
        "openai-completions http://127.0.0.1:9/v1 true sk-from-env red 32000 false no model nope/x"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// `pi.setModel` resolves true for a model pi has (and a key for), false otherwise; print mode
/// takes what extensions chose at session start before its prompt (`model_select` follows).
#[test]
fn set_model_chooses_among_pis_models() {
    let d = scratch("js-set-model");
    let ext = d.join("pick.mjs");
    std::fs::write(
        &ext,
        r#"export default function (pi) {
  pi.on("session_start", async (_e, ctx) => {
    const ok = await pi.setModel(ctx.modelRegistry.find("faux", "faux-1"));
    const unknown = await pi.setModel({ provider: "nope", id: "x" });
    pi.appendEntry("picked", { ok, unknown, level: pi.getThinkingLevel() });
  });
  pi.on("model_select", async (event) => pi.appendEntry("selected", { id: event.model.id, source: event.source }));
}
"#,
    )
    .unwrap();
    let script = d.join("script.json");
    std::fs::write(&script, json!([{"text": "Hi."}]).to_string()).unwrap();
    let session = d.join("s.jsonl");
    pi().args(["-p", "go", "--faux-script"])
        .arg(&script)
        .flag("--session", &session)
        .flag("-e", &ext)
        .env("PI_CODING_AGENT_DIR", d.join("agent"))
        .succeeds();
    let written = std::fs::read_to_string(&session).unwrap();
    assert!(written.contains(r#""data":{"ok":true,"unknown":false,"level":"off"}"#), "{written}");
    assert!(written.contains(r#""data":{"id":"faux-1","source":"set"}"#), "{written}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// Upstream's `pi.registerProvider` with its own `streamSimple`: `--provider NAME` runs the
/// extension's provider (its models, its key from the environment variable it names), streamed
/// into pi and priced from the registered costs; a provider nobody serves is still refused.
/// An extension serving provider `echo-llm` (model `echo-1`): it answers with what it was sent.
const ECHO_PROVIDER: &str = r#"export default function (pi) {
  pi.registerProvider("echo-llm", {
    api: "echo-api", baseUrl: "http://127.0.0.1:9", apiKey: "ECHO_KEY",
    models: [{ id: "echo-1", name: "Echo", reasoning: false, input: ["text"],
               cost: { input: 1, output: 2, cacheRead: 0, cacheWrite: 0 }, contextWindow: 1000, maxTokens: 100 }],
    streamSimple(model, context, options) {
      const last = context.messages.at(-1);
      const said = typeof last.content === "string" ? last.content : last.content.map((c) => c.text).join("");
      const text = `echo(${model.id},${options.apiKey}): ${said}`;
      const message = { role: "assistant", content: [{ type: "text", text }], api: model.api, provider: model.provider,
        model: model.id, usage: { input: 7, output: 3, cacheRead: 0, cacheWrite: 0, totalTokens: 10 }, stopReason: "stop" };
      return (async function* () {
        yield { type: "start", partial: message };
        yield { type: "text_delta", contentIndex: 0, delta: text, partial: message };
        yield { type: "done", reason: "stop", message };
      })();
    },
  });
}
"#;

#[test]
fn a_provider_an_extension_registers_answers_prompts() {
    let d = scratch("js-provider");
    let ext = d.join("echo.mjs");
    std::fs::write(&ext, ECHO_PROVIDER).unwrap();
    let session = d.join("s.jsonl");
    let out = pi()
        .args(["-p", "hello there", "--provider", "echo-llm"])
        .flag("--session", &session)
        .flag("-e", &ext)
        .env("ECHO_KEY", "sk-echo")
        .env("PI_CODING_AGENT_DIR", d.join("agent"))
        .succeeds();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "echo(echo-1,sk-echo): hello there");
    let written = std::fs::read_to_string(&session).unwrap();
    assert!(written.contains(r#""provider":"echo-llm","model":"echo-1""#), "{written}");
    assert!(written.contains(r#""input":7,"output":3"#) && written.contains(r#""total":0.000013"#), "{written}");
    let refused = pi()
        .args(["-p", "hi", "--no-session", "--provider", "nobody-serves"])
        .flag("-e", &ext)
        .env("PI_CODING_AGENT_DIR", d.join("agent"))
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("nobody-serves"));
    std::fs::remove_dir_all(&d).unwrap();
}

/// `ctx.getContextUsage()` (tokens of the context as the next request sends them, the model's
/// window, the percentage) and `ctx.hasPendingMessages()`, as pi sent them with the event.
#[test]
fn extensions_read_the_context_usage() {
    let d = scratch("js-context-usage");
    let ext = d.join("usage.mjs");
    std::fs::write(
        &ext,
        r#"export default function (pi) {
  pi.on("turn_end", async (_e, ctx) => {
    const u = ctx.getContextUsage();
    pi.appendEntry("usage", { positive: u.tokens > 0, window: u.contextWindow, percentOk: u.percent > 0 && u.percent < 100, pending: ctx.hasPendingMessages() });
  });
}
"#,
    )
    .unwrap();
    let script = d.join("script.json");
    std::fs::write(&script, json!([{"text": "One."}, {"text": "Two."}]).to_string()).unwrap();
    let session = d.join("s.jsonl");
    for prompt in ["first", "second"] {
        pi().args(["-p", prompt, "--faux-script"])
            .arg(&script)
            .flag("--session", &session)
            .flag("-e", &ext)
            .env("PI_CODING_AGENT_DIR", d.join("agent"))
            .succeeds();
    }
    let written = std::fs::read_to_string(&session).unwrap();
    assert!(
        written.contains(r#""data":{"positive":true,"window":128000,"percentOk":true,"pending":false}"#),
        "{written}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// Upstream's `pi.events` is one bus for all extensions: what one emits, another hears.
#[test]
fn the_event_bus_is_shared_between_extensions() {
    let d = scratch("js-event-bus");
    let heard = d.join("heard.json");
    std::fs::write(
        d.join("speaker.mjs"),
        r#"export default function (pi) {
  pi.registerCommand("ping", { description: "Emits", handler: async () => pi.events.emit("greeting", { from: "speaker", n: 1 }) });
}
"#,
    )
    .unwrap();
    std::fs::write(
        d.join("listener.mjs"),
        format!(
            r#"import {{ writeFileSync }} from "node:fs";
export default function (pi) {{
  pi.events.on("greeting", (data) => writeFileSync({:?}, JSON.stringify(data)));
}}
"#,
            heard.to_str().unwrap()
        ),
    )
    .unwrap();
    let mut rpc = std::process::Command::new(env!("CARGO_BIN_EXE_pi"));
    rpc.args(["--mode", "rpc", "--no-session", "-e"])
        .arg(d.join("speaker.mjs"))
        .arg("-e")
        .arg(d.join("listener.mjs"))
        .env("PI_CODING_AGENT_DIR", d.join("agent"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = rpc.spawn().unwrap();
    {
        use std::io::Write as _;
        let stdin = child.stdin.as_mut().unwrap();
        stdin.write_all(br#"{"type":"prompt","message":"/ping","id":"1"}"#).unwrap();
        stdin.write_all(b"\n").unwrap();
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !heard.exists() {
        assert!(std::time::Instant::now() < deadline, "the listener never heard the greeting");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    assert_eq!(std::fs::read_to_string(&heard).unwrap(), r#"{"from":"speaker","n":1}"#);
    std::fs::remove_dir_all(&d).unwrap();
}

/// Upstream's subagent re-runs the current script (`process.argv[1]`: pi's host here) with pi's
/// command line: the host stands in for pi, and the child's JSON events come back.
#[test]
fn an_extension_that_reruns_its_script_runs_pi() {
    let d = scratch("js-rerun-pi");
    let ext = d.join("rerun.mjs");
    std::fs::write(
        &ext,
        r#"import { spawnSync } from "node:child_process";
export default function (pi) {
  pi.registerTool({ name: "delegate", description: "Runs pi", parameters: { type: "object", properties: {} },
    async execute() {
      const run = spawnSync(process.execPath, [process.argv[1], "--mode", "json", "-p", "--no-session", "--tools", "read", "Task: CHILD-TASK"], { encoding: "utf8" });
      const ends = run.stdout.split("\n").filter((l) => l.includes('"message_end"')).map((l) => JSON.parse(l));
      const answer = ends.map((e) => e.message).filter((m) => m.role === "assistant").pop();
      return { content: [{ type: "text", text: `exit ${run.status}: ${answer.content[0].text}` }] };
    } });
}
"#,
    )
    .unwrap();
    let script = d.join("script.json");
    std::fs::write(
        &script,
        json!([{"tools": [{"name": "delegate", "arguments": {}}]},
               {"text": "Done.", "expect": ["exit 0: (faux) This is the offline faux provider", "Your prompt had 16 characters"]}])
        .to_string(),
    )
    .unwrap();
    pi().args(["-p", "go", "--no-session", "--faux-script"])
        .arg(&script)
        .flag("-e", &ext)
        .current_dir(&d)
        .env("PI_CODING_AGENT_DIR", d.join("agent"))
        .succeeds();
    std::fs::remove_dir_all(&d).unwrap();
}

/// Over RPC, an extension's provider is among `get_available_models` and `set_model` switches to
/// it (the next prompt is answered by the extension).
#[test]
fn rpc_offers_and_switches_to_an_extensions_provider() {
    use std::io::{BufRead, Write};
    let d = scratch("js-provider-rpc");
    let ext = d.join("echo.mjs");
    std::fs::write(&ext, ECHO_PROVIDER).unwrap();
    let mut child = pi()
        .args(["--mode", "rpc", "--no-session"])
        .flag("-e", &ext)
        .env("ECHO_KEY", "sk-echo")
        .env("PI_CODING_AGENT_DIR", d.join("agent"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for command in [
        json!({"id": "m", "type": "get_available_models"}),
        json!({"id": "s", "type": "set_model", "provider": "echo-llm", "modelId": "echo-1"}),
        json!({"id": "p", "type": "prompt", "message": "over rpc"}),
    ] {
        writeln!(stdin, "{command}").unwrap();
    }
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        let end = line["type"] == "agent_end";
        seen.push(line);
        if end {
            break;
        }
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let reply = |id: &str| seen.iter().find(|l| l["id"] == id).cloned().unwrap();
    let models = reply("m")["data"]["models"].as_array().unwrap().clone();
    assert!(models.iter().any(|m| m["provider"] == "echo-llm" && m["id"] == "echo-1"), "{models:?}");
    assert_eq!(reply("s")["data"]["provider"], "echo-llm", "{:?}", reply("s"));
    let end = seen.last().unwrap();
    let answer = end["messages"].as_array().unwrap().iter().rev().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(answer["content"][0]["text"], "echo(echo-1,sk-echo): over rpc", "{end}");
    std::fs::remove_dir_all(&d).unwrap();
}
