//! Process extensions run as a user runs them: `pi -p -e PATH` on the faux provider, with an
//! extension written in Python (stdlib only) and one in plain sh — every reply shape the
//! fixtures use, chaining between two extensions, and each way an extension can misbehave
//! (crash, hang, garbage, error reply, exit before registering).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod support;

use support::Flag;

use support::Succeeds;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};
use support::{pi, scratch};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/extensions").join(name)
}

/// A faux script: one turn asking for `rm -rf …` and `echo hi` in bash, then an answer.
fn script(dir: &Path) -> PathBuf {
    let path = dir.join("script.json");
    let steps = json!([
        {"text": "Working.", "tools": [
            {"name": "bash", "arguments": {"command": "rm -rf /tmp/pi-test-nothing-here"}},
            {"name": "bash", "arguments": {"command": "echo hi"}}]},
        {"text": "Done."}
    ]);
    std::fs::write(&path, steps.to_string()).unwrap();
    path
}

struct Run {
    out: Output,
    /// The tool results' texts, in order.
    results: Vec<(bool, String)>,
    audit: Vec<String>,
}

fn run(dir: &Path, extensions: &[&Path], env: &[(&str, &str)]) -> Run {
    let audit = dir.join("audit.txt");
    let _ = std::fs::remove_file(&audit);
    let mut cmd = pi();
    cmd.args(["-p", "go", "--no-session", "--mode", "json", "--faux-script"])
        .arg(script(dir))
        .env("PI_CODING_AGENT_DIR", dir.join("agent"))
        .env("PY_EXT_AUDIT", &audit);
    for extension in extensions {
        cmd.arg("-e").arg(extension);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let results = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "message_end" && e["message"]["role"] == "toolResult")
        .map(|e| {
            let text = e["message"]["content"].as_array().unwrap().iter().filter_map(|b| b["text"].as_str()).collect();
            (e["message"]["isError"].as_bool().unwrap(), text)
        })
        .collect();
    let audit = std::fs::read_to_string(&audit).unwrap_or_default().lines().map(str::to_owned).collect();
    Run { out, results, audit }
}

fn stderr(run: &Run) -> String {
    String::from_utf8_lossy(&run.out.stderr).into_owned()
}

#[test]
fn a_python_extension_blocks_mutates_patches_and_sees_the_session_start_and_end() {
    let d = scratch("ext-python");
    let r = run(&d, &[&fixture("gate.py")], &[]);
    assert!(r.out.status.success(), "{}", stderr(&r));
    assert_eq!(r.results.len(), 2, "{:?}", r.results);
    assert_eq!(r.results[0], (true, "[py] py-gate: rm -rf is not allowed".to_owned()), "blocked, with the reason");
    assert_eq!(r.results[1], (false, "[py] mutated\n".to_owned()), "input mutated, result patched");
    assert_eq!(
        r.audit,
        [
            "session_start",
            "input",
            "tool_call bash",
            "tool_call bash",
            "tool_result",
            "tool_result",
            "session_shutdown",
            "shutdown"
        ]
    );
    let log = std::fs::read_to_string(d.join("agent/logs/extensions/gate.log")).unwrap();
    assert!(log.contains("hello from stderr"), "stderr goes to the log file");
    assert!(!stderr(&r).contains("hello from stderr"), "never into pi's output");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_shell_extension_and_a_python_one_chain_the_first_block_wins() {
    let d = scratch("ext-chain");
    // sh first: its block wins and the Python gate never sees the first call's block decision.
    let r = run(&d, &[&fixture("gate.sh"), &fixture("gate.py")], &[]);
    assert!(r.out.status.success(), "{}", stderr(&r));
    assert!(r.results[0].0);
    assert!(r.results[0].1.contains("sh-gate says no"), "{:?}", r.results);
    assert_eq!(r.results[1], (false, "[py] mutated\n".to_owned()));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_crashing_extension_fails_closed_is_restarted_and_said_once() {
    let d = scratch("ext-crash");
    let r = run(&d, &[&fixture("gate.py")], &[("PY_EXT_MODE", "crash")]);
    assert!(r.out.status.success(), "the run goes on: {}", stderr(&r));
    assert!(r.results.iter().all(|(error, text)| *error && text.contains("py-gate")), "{:?}", r.results);
    let err = stderr(&r);
    assert_eq!(err.matches("extension py-gate failed in tool_call").count(), 1, "{err}");
    // Each crash was followed by a restart for the next call: two tool_calls reached it.
    assert_eq!(r.audit.iter().filter(|l| l.starts_with("tool_call")).count(), 2, "{:?}", r.audit);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_hanging_extension_costs_its_timeout_and_blocks_the_tool() {
    let d = scratch("ext-hang");
    let folder = d.join("hang-ext");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("pi-extension.json"),
        json!({"command": ["python3", fixture("gate.py")], "timeoutMs": 300, "maxRestarts": 1}).to_string(),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let r = run(&d, &[&folder], &[("PY_EXT_MODE", "hang")]);
    assert!(r.out.status.success(), "{}", stderr(&r));
    assert!(r.results.iter().all(|(error, _)| *error), "{:?} {}", r.results, stderr(&r));
    assert!(stderr(&r).contains("no reply within 300 ms"), "{}", stderr(&r));
    // The hook span says what happened and where the extension came from.
    let hook_end = String::from_utf8_lossy(&r.out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["type"] == "observability")
        .map(|l| l["event"].clone())
        .find(|e| e["name"] == "pi.agent.hook" && e["type"] == "error" && e["payload"]["hookName"] == "tool_call")
        .unwrap();
    assert_eq!(hook_end["payload"]["outcome"], "timeout", "{hook_end}");
    assert_eq!(hook_end["payload"]["extensionOrigin"], "flag");
    assert_eq!(hook_end["payload"]["extensionName"], "py-gate");
    // Two calls at 300 ms each, then the restart budget is spent: far below the 5 s default.
    assert!(started.elapsed() < std::time::Duration::from_secs(4), "{:?}", started.elapsed());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn garbage_error_replies_are_failures_and_a_gate_that_does_not_load_stops_the_run() {
    let d = scratch("ext-garbage");
    for (mode, said) in [("garbage", "not JSON"), ("error", "refused to think")] {
        let r = run(&d, &[&fixture("gate.py")], &[("PY_EXT_MODE", mode)]);
        assert!(r.out.status.success(), "{mode}: {}", stderr(&r));
        assert!(r.results.iter().all(|(error, _)| *error), "{mode}: fail closed: {:?}", r.results);
        assert!(stderr(&r).contains(said), "{mode}: {}", stderr(&r));
    }
    // A listed gate that does not load stops the run before the model is asked: no tool runs.
    let r = run(&d, &[&fixture("gate.py")], &[("PY_EXT_MODE", "early")]);
    assert_eq!(r.out.status.code(), Some(2), "{}", stderr(&r));
    assert_eq!(stderr(&r).trim_end().lines().count(), 1, "one line: {}", stderr(&r));
    assert!(stderr(&r).contains("gate.py") && stderr(&r).contains("exited before registering"), "{}", stderr(&r));
    assert!(r.results.is_empty() && r.out.stdout.is_empty(), "nothing ran: {:?}", r.results);
    // `extensions.onLoadError: "warn"` is upstream's way: said, and the run goes on without it.
    std::fs::create_dir_all(d.join("agent")).unwrap();
    std::fs::write(d.join("agent/settings.json"), r#"{"extensions": {"onLoadError": "warn"}}"#).unwrap();
    let r = run(&d, &[&fixture("gate.py")], &[("PY_EXT_MODE", "early")]);
    assert!(r.out.status.success(), "{}", stderr(&r));
    assert!(stderr(&r).contains("exited before registering; not loaded"), "{}", stderr(&r));
    assert_eq!(r.results[1], (false, "hi\n".to_owned()), "without the extension the tools just run");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn extensions_load_from_the_global_folder_and_a_trusted_project_only() {
    let d = scratch("ext-discovery");
    let project = d.join("project");
    std::fs::create_dir_all(project.join(".pi/extensions")).unwrap();
    std::fs::copy(fixture("gate.sh"), project.join(".pi/extensions/gate.sh")).unwrap();
    let go = || {
        pi().args(["-p", "go", "--no-session", "--mode", "json", "--faux-script"])
            .arg(script(&d))
            .env("PI_CODING_AGENT_DIR", d.join("agent"))
            .current_dir(&project)
            .output()
            .unwrap()
    };
    let blocked = |out: &Output| String::from_utf8_lossy(&out.stdout).contains("sh-gate says no");
    let out = go();
    assert!(out.status.success());
    assert!(!blocked(&out), "an untrusted project's extension does not load");
    assert!(String::from_utf8_lossy(&out.stderr).contains(".pi/extensions"));
    let trust = pi().arg("trust").env("PI_CODING_AGENT_DIR", d.join("agent")).current_dir(&project).output().unwrap();
    assert!(trust.status.success());
    assert!(blocked(&go()), "after pi trust it does");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn an_extension_tool_is_offered_runs_and_its_usage_is_billed_once() {
    let d = scratch("ext-tool");
    let script = d.join("tool-script.json");
    std::fs::write(
        &script,
        json!([{"text": "Asking.", "tools": [{"name": "answer", "arguments": {"question": "life"}}]}, {"text": "It is 42."}])
            .to_string(),
    )
    .unwrap();
    let session = d.join("s.jsonl");
    let out = pi()
        .args(["-p", "go", "--mode", "json", "--session"])
        .arg(&session)
        .flag("--faux-script", &script)
        .flag("-e", fixture("gate.py"))
        .env("PI_CODING_AGENT_DIR", d.join("agent"))
        .succeeds();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let result = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["type"] == "message_end" && e["message"]["role"] == "toolResult")
        .unwrap();
    assert_eq!(result["message"]["toolName"], "answer");
    assert_eq!(result["message"]["content"][0]["text"], "[py] 42", "the tool ran, and tool_result patched it");
    assert_eq!(result["message"]["usage"]["totalTokens"], 42, "the nested usage is on the tool result");
    // The faux provider's two turns plus the tool's nested call, each counted once.
    let report = pi().args(["report", "--format", "json"]).arg(&session).output().unwrap();
    let rows: Vec<Value> = serde_json::from_slice(&report.stdout).unwrap();
    let tool_tokens: u64 = rows.iter().map(|r| r["totalTokens"].as_u64().unwrap()).sum();
    let turns: u64 = rows.iter().map(|r| r["turns"].as_u64().unwrap()).sum();
    let faux_tokens: u64 = std::fs::read_to_string(&session)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["message"]["role"] == "assistant")
        .map(|e| e["message"]["usage"]["totalTokens"].as_u64().unwrap())
        .sum();
    assert_eq!(turns, 2);
    assert_eq!(tool_tokens, faux_tokens + 42);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn project_trust_reaches_a_global_extension_before_project_resources_load() {
    let d = scratch("ext-trust");
    let project = d.join("project");
    std::fs::create_dir_all(project.join(".pi/extensions")).unwrap();
    std::fs::copy(fixture("gate.sh"), project.join(".pi/extensions/gate.sh")).unwrap();
    std::fs::create_dir_all(d.join("agent/extensions")).unwrap();
    std::fs::copy(fixture("trust.py"), d.join("agent/extensions/trust.py")).unwrap();
    let skills = d.join("ext-skills/deploy");
    std::fs::create_dir_all(&skills).unwrap();
    std::fs::write(skills.join("SKILL.md"), "---\nname: deploy\ndescription: Ships it.\n---\nRun make ship.\n")
        .unwrap();
    let audit = d.join("audit.txt");
    let go = |answer: &str, remember: bool| {
        let _ = std::fs::remove_file(&audit);
        let mut cmd = pi();
        cmd.args(["-p", "/skill:deploy now", "--no-session", "--mode", "json", "--faux-script"])
            .arg(script(&d))
            .env("PI_CODING_AGENT_DIR", d.join("agent"))
            .env("PY_TRUST", answer)
            .env("PY_EXT_AUDIT", &audit)
            .env("PY_SKILLS", d.join("ext-skills"))
            .current_dir(&project);
        if remember {
            cmd.env("PY_TRUST_REMEMBER", "1");
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let blocked = stdout.contains("sh-gate says no");
        // The skill from the extension's folder was found and expanded.
        assert!(stdout.contains("\"pi.agent.skill\""), "resources_discover added the skill folder");
        (blocked, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (blocked, err) = go("undecided", false);
    assert!(!blocked && err.contains("is not trusted"), "{err}");
    let (blocked, err) = go("yes", false);
    assert!(blocked, "the extension trusted the project: its extension loaded: {err}");
    assert!(err.contains("trusts project") && err.contains("for this run"), "{err}");
    let seen = std::fs::read_to_string(&audit).unwrap();
    assert!(seen.starts_with("project_trust\nresources_discover\nsession_start"), "{seen}");
    // Not remembered: the next undecided run is untrusted again; remembered: trusted from now on.
    assert!(!go("undecided", false).0);
    assert!(go("yes", true).0);
    assert!(go("undecided", false).0, "the decision was kept in the trust store");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_policy_that_forbids_other_extensions_keeps_only_its_own() {
    let d = scratch("ext-policy");
    let policy = d.join("managed.json");
    std::fs::write(
        &policy,
        json!({"extensions": [fixture("gate.sh")], "policy": {"allowNonManagedExtensions": false}}).to_string(),
    )
    .unwrap();
    let r = {
        let mut cmd = pi();
        cmd.args(["-p", "go", "--no-session", "--mode", "json", "--faux-script"])
            .arg(script(&d))
            .flag("-e", fixture("gate.py"))
            .env("PI_CODING_AGENT_DIR", d.join("agent"))
            .env("PI_MANAGED_SETTINGS", &policy);
        cmd.output().unwrap()
    };
    let (stdout, stderr) = (String::from_utf8_lossy(&r.stdout), String::from_utf8_lossy(&r.stderr));
    assert!(r.status.success(), "{stderr}");
    assert!(stderr.contains("allows only its own extensions") && stderr.contains("gate.py"), "{stderr}");
    assert!(stdout.contains("sh-gate says no"), "the managed extension runs");
    assert!(!stdout.contains("[py]"), "the user's does not");
    std::fs::remove_dir_all(&d).unwrap();
}

/// As upstream: in print mode the session has started (`session_start`) before a command runs.
#[test]
fn a_command_runs_after_session_start() {
    let d = scratch("ext-command-after-start");
    let ext = d.join("started.mjs");
    std::fs::write(
        &ext,
        "let started = false;\nexport default function (pi) {\n  pi.on(\"session_start\", async () => { started = true; });\n  pi.registerCommand(\"check\", { handler: async () => `started=${started}` });\n}\n",
    )
    .unwrap();
    let out = pi()
        .args(["-p", "/check", "--no-session"])
        .arg("-e")
        .arg(&ext)
        .env("PI_CODING_AGENT_DIR", d.join("agent"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "started=true");
    std::fs::remove_dir_all(&d).unwrap();
}
