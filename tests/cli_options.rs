//! Upstream's command-line options, each run as a user would: the option, a faux (or loopback)
//! model that checks what it was sent, and what must hold after.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod support;

use serde_json::{Value, json};
use support::{Flag, Succeeds, pi, scratch};

/// One row: the options, the faux script, and a check of the run's stdout and stderr.
struct Row {
    name: &'static str,
    args: Vec<String>,
    script: Value,
    check: fn(&std::path::Path, &str, &str),
}

#[test]
fn upstreams_options_do_what_upstream_says() {
    let d = scratch("cli-options");
    std::fs::write(d.join("append.txt"), "APPENDED-FROM-FILE").unwrap();
    std::fs::write(d.join("notes.md"), "NOTES-TOKEN").unwrap();
    // A context file in the working directory (found walking up from it).
    std::fs::write(d.join("AGENTS.md"), "AGENTS-TOKEN").unwrap();
    let gate = d.join("gate.mjs");
    std::fs::write(
        &gate,
        r#"export default function (pi) {
  pi.registerTool({ name: "ext_tool", description: "An extension's tool", parameters: { type: "object", properties: {} },
    async execute() { return { content: [{ type: "text", text: "ext-tool-ran" }] }; } });
}
"#,
    )
    .unwrap();
    // A global extension that --no-extensions must not load: it would block every tool.
    let agent = d.join("agent");
    std::fs::create_dir_all(agent.join("extensions")).unwrap();
    std::fs::write(agent.join("APPEND_SYSTEM.md"), "GLOBAL-APPEND-TOKEN").unwrap();
    std::fs::write(
        agent.join("extensions/blocker.mjs"),
        r#"export default function (pi) { pi.on("tool_call", async () => ({ block: true, reason: "blocked-by-global" })); }"#,
    )
    .unwrap();
    let bash_writes =
        |file: &str| json!({"tools": [{"name": "bash", "arguments": {"command": format!("echo x > {file}")}}]});
    let path = |p: &std::path::Path| p.to_str().unwrap().to_owned();
    let rows = vec![
        Row {
            name: "--system-prompt replaces the default",
            args: vec!["--system-prompt".into(), "SYS-TOKEN".into()],
            script: json!([{"text": "ok", "expect": ["SYS-TOKEN"]}]),
            check: |_, _, _| {},
        },
        Row {
            name: "--append-system-prompt reads a file",
            args: vec!["--append-system-prompt".into(), "append.txt".into()],
            script: json!([{"text": "ok", "expect": ["APPENDED-FROM-FILE"], "reject": ["GLOBAL-APPEND-TOKEN"]}]),
            check: |_, _, _| {},
        },
        Row {
            name: "--no-tools offers no tool, built-in or extension's",
            args: vec!["--no-tools".into(), "-e".into(), path(&gate)],
            script: json!([bash_writes("no-tools.txt"), {"text": "done", "expect": ["bash"]}]),
            check: |d, _, _| assert!(!d.join("no-tools.txt").exists(), "bash ran"),
        },
        Row {
            name: "--no-builtin-tools keeps extensions' tools",
            args: vec!["--no-builtin-tools".into(), "--no-extensions".into(), "-e".into(), path(&gate)],
            script: json!([{"tools": [{"name": "ext_tool", "arguments": {}}]}, bash_writes("builtin.txt"),
                           {"text": "done", "expect": ["ext-tool-ran"]}]),
            check: |d, _, _| assert!(!d.join("builtin.txt").exists(), "bash ran"),
        },
        Row {
            name: "-nt is --no-tools",
            args: vec!["-nt".into()],
            script: json!([bash_writes("nt.txt"), {"text": "done", "expect": ["bash"]}]),
            check: |d, _, _| assert!(!d.join("nt.txt").exists(), "bash ran"),
        },
        Row {
            name: "-t is --tools",
            args: vec!["-t".into(), "read".into()],
            script: json!([bash_writes("t.txt"), {"text": "done", "expect": ["bash"]}]),
            check: |d, _, _| assert!(!d.join("t.txt").exists(), "bash ran"),
        },
        Row {
            name: "context files, the date and the working directory are in the system prompt",
            args: vec![],
            script: json!([{"text": "ok", "expect": ["# Project Context", "AGENTS-TOKEN", "Current date: ", "Current working directory: "]}]),
            check: |_, _, _| {},
        },
        Row {
            name: "~/.pi/agent/APPEND_SYSTEM.md is appended; --append-system-prompt takes its place",
            args: vec![],
            script: json!([{"text": "ok", "expect": ["GLOBAL-APPEND-TOKEN"]}]),
            check: |_, _, _| {},
        },
        Row {
            name: "-nc loads no context file",
            args: vec!["-nc".into()],
            script: json!([{"text": "ok", "expect": ["Current working directory: "], "reject": ["AGENTS-TOKEN"]}]),
            check: |_, _, _| {},
        },
        Row {
            name: "@file arguments go before the message; more messages follow in turn",
            args: vec!["@notes.md".into(), "second-message".into()],
            script: json!([{"text": "one", "expect": ["<file name=", "NOTES-TOKEN\n</file>\ngo"], "reject": ["second-message"]},
                           {"text": "two", "expect": ["second-message"]}]),
            check: |_, stdout, _| assert!(stdout.contains("one") && stdout.contains("two"), "{stdout}"),
        },
        Row {
            name: "--no-extensions loads only -e",
            args: vec!["--no-extensions".into()],
            script: json!([bash_writes("ran.txt"), {"text": "done"}]),
            check: |d, _, _| assert!(d.join("ran.txt").exists(), "the global extension blocked bash"),
        },
    ];
    for row in rows {
        let script = d.join("script.json");
        std::fs::write(&script, row.script.to_string()).unwrap();
        let out = pi()
            .args(["-p", "go", "--no-session", "--cwd"])
            .arg(&d)
            .flag("--faux-script", &script)
            .args(&row.args)
            .current_dir(&d)
            .env("PI_CODING_AGENT_DIR", &agent)
            .output()
            .unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{}: {stderr}", row.name);
        assert!(!stdout.contains("faux script:"), "{}: {stdout}", row.name);
        (row.check)(&d, &stdout, &stderr);
    }
    // Without --no-extensions the global extension is there (the row above is not vacuous).
    std::fs::write(
        d.join("script.json"),
        json!([bash_writes("blocked.txt"), {"text": "done", "expect": ["blocked-by-global"]}]).to_string(),
    )
    .unwrap();
    pi().args(["-p", "go", "--no-session", "--cwd"])
        .arg(&d)
        .flag("--faux-script", d.join("script.json"))
        .env("PI_CODING_AGENT_DIR", &agent)
        .output()
        .unwrap();
    assert!(!d.join("blocked.txt").exists());
    std::fs::remove_dir_all(&d).unwrap();
}

/// `--api-key` goes to the provider of the run (its server sees it), over its variable.
#[test]
fn api_key_reaches_the_providers_server() {
    let (base, request) = support::one_shot_openai_server();
    let out = pi()
        .args(["-p", "hi", "--no-session", "--model", "llama-local", "--tools", "none", "--api-key", "sk-from-flag"])
        .flag("--base-url", &base)
        .env("OPENAI_API_KEY", "sk-from-env")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let request = request.join().unwrap().to_lowercase();
    assert!(request.contains("authorization: bearer sk-from-flag"), "{request}");
}

/// `--thinking` takes upstream's levels only.
#[test]
fn thinking_levels_are_checked() {
    let out = pi().args(["-p", "hi", "--no-session", "--thinking", "loud"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--thinking"));
}

/// `--session-dir` keeps the sessions there; `-c` continues the most recent one of this folder;
/// `--fork` copies one into a new session.
#[test]
fn continue_takes_up_the_latest_session_of_the_folder() {
    let d = scratch("cli-continue");
    let sessions = d.join("sessions");
    let run = |prompt: &str, script: Value, extra: &[&str]| {
        std::fs::write(d.join("script.json"), script.to_string()).unwrap();
        let out = pi()
            .args(["-p", prompt, "--cwd"])
            .arg(&d)
            .flag("--session-dir", &sessions)
            .flag("--faux-script", d.join("script.json"))
            .args(extra)
            .env("PI_CODING_AGENT_DIR", d.join("agent"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    run("first-token", json!([{"text": "one"}]), &[]);
    run("second", json!([{"text": "two", "expect": ["first-token"]}]), &["-c"]);
    let files: Vec<_> = std::fs::read_dir(&sessions)
        .unwrap()
        .flatten()
        .flat_map(|folder| std::fs::read_dir(folder.path()).unwrap().flatten())
        .collect();
    assert_eq!(files.len(), 1, "continued, not a second session");
    // --fork by the start of the session's id: a new file that names the first as its parent
    // and holds its conversation, the original untouched.
    let original = files[0].path();
    let before = std::fs::read_to_string(&original).unwrap();
    let header: Value = serde_json::from_str(before.lines().next().unwrap()).unwrap();
    let id = header["id"].as_str().unwrap();
    run("third", json!([{"text": "three", "expect": ["first-token", "second"]}]), &["--fork", &id[..8]]);
    assert_eq!(std::fs::read_to_string(&original).unwrap(), before);
    let fork = std::fs::read_dir(original.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| *p != original)
        .expect("a forked session file");
    let forked = std::fs::read_to_string(&fork).unwrap();
    let fork_header: Value = serde_json::from_str(forked.lines().next().unwrap()).unwrap();
    assert_eq!(fork_header["parentSession"], original.display().to_string());
    assert!(forked.contains("first-token") && forked.contains("third"));
    // A missing one is a one-line error naming --fork.
    let out = pi().args(["-p", "x", "--fork", "nosuchid"]).flag("--session-dir", &sessions).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--fork: no session"));
    std::fs::remove_dir_all(&d).unwrap();
}

/// `--verbose` says at start what the run uses.
#[test]
fn verbose_says_what_the_run_uses() {
    let out = pi().args(["-p", "hi", "--no-session", "--tools", "read,ls", "--verbose"]).output().unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    for line in ["pi: model: faux/faux-1", "pi: tools: read, ls", "pi: session: none (--no-session)"] {
        assert!(stderr.contains(line), "{line}: {stderr}");
    }
}

/// Upstream's modes: `-p` is a switch, a piped stdin means print mode and goes before the
/// first message; `--mode json` prints without `-p`; `-v` is the version.
#[test]
fn print_mode_is_a_switch_and_reads_piped_stdin() {
    use std::io::Write;
    let d = scratch("cli-stdin");
    std::fs::write(
        d.join("script.json"),
        json!([{"text": "answered", "expect": ["PIPED-TOKENsummarize"]}]).to_string(),
    )
    .unwrap();
    let mut child = pi()
        .args(["summarize", "--no-session"])
        .flag("--faux-script", d.join("script.json"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"PIPED-TOKEN\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("answered"));
    // A pipe its parent leaves open and silent does not hold a run that has its own message.
    let mut idle = pi()
        .args(["-p", "hi", "--no-session"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let kept_open = idle.stdin.take();
    let out = idle.wait_with_output().unwrap();
    drop(kept_open);
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("faux"));
    // --mode json alone is print mode.
    let out = pi().args(["--mode", "json", "hi", "--no-session"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).lines().any(|l| l.contains(r#""type":"agent_end""#)));
    // Nothing to send: a one-line usage error.
    let out = pi().args(["-p", "--no-session"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
    // A missing @file names itself.
    let out = pi().args(["-p", "@no-such-file.md", "hi", "--no-session"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("@no-such-file.md: no such file"));
    let out = pi().arg("-v").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("pi "));
    std::fs::remove_dir_all(&d).unwrap();
}

/// `@image.png` attaches the image to the first message: sent to a model that takes images in
/// its API's shape, refused (one line, exit 2) for a text-only one.
#[test]
fn image_files_are_attached_for_models_that_take_images() {
    let d = scratch("cli-image");
    std::fs::write(d.join("shot.png"), b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").unwrap();
    let (base, request) = support::one_shot_openai_server();
    let models = d.join("models.json");
    std::fs::write(
        &models,
        json!({"providers": {"local": {"baseUrl": base, "api": "openai-completions", "apiKey": "k",
            "models": [{"id": "vision-local", "input": ["text", "image"]}]}}})
        .to_string(),
    )
    .unwrap();
    let out = pi()
        .args(["-p", "@shot.png", "what is this", "--no-session", "--provider", "local", "--model", "vision-local"])
        .args(["--tools", "none"])
        .flag("--models-file", &models)
        .current_dir(&d)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let request = request.join().unwrap();
    assert!(request.contains(r#""image_url":{"url":"data:image/png;base64,iVBORw0KGgoAAAANSUhEUg=="}"#), "{request}");
    assert!(request.contains("shot.png\\\"></file>\\nwhat is this"), "{request}");
    let out = pi()
        .args(["-p", "@shot.png", "what is this", "--no-session", "--model", "llama-local"])
        .args(["--base-url", "http://127.0.0.1:9/v1"])
        .current_dir(&d)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("takes no images") && stderr.trim_end().lines().count() == 1, "{stderr}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// `--offline` (upstream's): accepted; an extension that needs upstream's packages, not yet
/// installed, is not installed from npm but fails naming the command that installs them.
#[test]
fn offline_installs_nothing_and_names_the_install_command() {
    let d = scratch("cli-offline");
    let agent = d.join("agent");
    pi().args(["-p", "hi", "--no-session", "--offline"]).env("PI_CODING_AGENT_DIR", &agent).succeeds();
    let ext = d.join("typed.mjs");
    std::fs::write(
        &ext,
        "import { Type } from \"@sinclair/typebox\";\nexport default function () { Type.Object({}); }\n",
    )
    .unwrap();
    for (flag, env) in [(Some("--offline"), None), (None, Some("1"))] {
        let mut cmd = pi();
        cmd.args(["-p", "hi", "--no-session"]).flag("-e", &ext).env("PI_CODING_AGENT_DIR", &agent);
        cmd.args(flag);
        if let Some(value) = env {
            cmd.env("PI_OFFLINE", value);
        }
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag:?} {env:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("pi is offline") && stderr.contains("npm install --prefix"), "{stderr}");
        assert!(!agent.join("js/node_modules").exists(), "nothing installed");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// `--theme PATH` (repeatable) and `--no-themes`: a theme given that cannot be read is a usage
/// error naming it (in every mode); a readable one, or `--no-themes`, lets the run go on.
#[test]
fn themes_given_are_checked() {
    let d = scratch("cli-themes");
    std::fs::write(d.join("broken.json"), r##"{"name": "broken", "colors": {"accent": "#00ff00"}}"##).unwrap();
    let mut good: serde_json::Value =
        serde_json::from_str(include_str!("../src/cli/modes/interactive/themes/light.json")).unwrap();
    good["name"] = json!("mine");
    std::fs::create_dir_all(d.join("themes")).unwrap();
    std::fs::write(d.join("themes/good.json"), good.to_string()).unwrap();
    let run = |args: &[&str]| {
        pi().args(["-p", "hi", "--no-session", "--cwd"])
            .arg(&d)
            .args(args)
            .env("PI_CODING_AGENT_DIR", d.join("agent"))
            .output()
            .unwrap()
    };
    for (args, said) in [
        (&["--theme", "gone.json"][..], "--theme "),
        (&["--theme", "themes", "--theme", "broken.json"][..], "broken.json: colors missing: border, borderAccent"),
    ] {
        let out = run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(said) && stderr.trim().lines().count() == 1, "{args:?}: {stderr}");
    }
    for args in [&["--theme", "themes/good.json"][..], &["--no-themes"][..], &["--theme", "themes", "--no-themes"][..]]
    {
        let out = run(args);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// Upstream's own theme files (its npm package's `dark.json` and `light.json`) are read as they
/// are: given with `--theme`, the run goes on.
#[test]
#[ignore = "needs upstream's npm packages: run by scripts/test"]
fn upstreams_theme_files_are_read() {
    let themes =
        support::upstream_agent().join("js/node_modules/@mariozechner/pi-coding-agent/dist/modes/interactive/theme");
    for name in ["dark.json", "light.json"] {
        pi().args(["-p", "hi", "--no-session"]).flag("--theme", themes.join(name)).succeeds();
    }
}
