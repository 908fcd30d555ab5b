//! The `pi` command end to end: the demo and its privacy guarantees, the bash tool's
//! environment and a loopback OpenAI-compatible server (bad input: `tests/safety.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)] // test helpers

mod support;

use support::{Flag, pi};

use support::Succeeds;

use std::path::{Path, PathBuf};
use std::process::Output;

use pi_observe::core::{EventKind, ObsEvent, Value, names};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pi-cli-{name}-{}", pi_observe::core::SpanId::random()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn events(path: &Path) -> Vec<ObsEvent> {
    std::fs::read_to_string(path).unwrap().lines().map(|l| ObsEvent::from_json(l).unwrap()).collect()
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn demo_runs_two_users_and_prints_tree_and_costs() {
    let d = scratch("demo");
    let out = pi().args(["demo", "--dir"]).arg(&d).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("pi.agent.prompt") && stdout.contains("pi.agent.tool_call bash"), "{stdout}");
    let rows: Vec<&str> = stdout.lines().filter(|l| l.starts_with("alice ") || l.starts_with("bob ")).collect();
    assert_eq!(rows.len(), 2, "{stdout}");
    assert!(rows[0].contains("acme") && rows[1].contains("globex"));
    // The tools really ran in the scratch workspace.
    assert!(std::fs::read_to_string(d.join("workspace/alice/src/lib.rs")).unwrap().contains("a + b"));
    assert!(d.join("workspace/bob/CHANGELOG.md").exists());
    let evs = events(&d.join("events.jsonl"));
    pi_observe::core::testing::assert_paired(&evs);
    let users: std::collections::BTreeSet<_> = evs.iter().filter_map(|e| e.context.get(names::CTX_USER_ID)).collect();
    assert_eq!(users.into_iter().collect::<Vec<_>>(), ["alice", "bob"]);
    std::fs::remove_dir_all(&d).unwrap();
}

const DEMO_TEXTS: [&str; 6] = [
    "The add() function in src/lib.rs is wrong", // a prompt
    "Summarize the open notes",                  // a prompt
    "check-ok",                                  // shell output
    "TODO: fix add()",                           // grep output / file content
    "deploy key for staging",                    // file content
    "a - b",                                     // file content
];
const DEMO_SECRET: &str = "sk-demo-DoNotLeakThis0123456789";

#[test]
fn demo_events_contain_no_content_by_default_and_only_scrubbed_captured_kinds_otherwise() {
    let d = scratch("privacy");
    assert!(pi().args(["demo", "--dir"]).arg(&d).output().unwrap().status.success());
    let default = std::fs::read_to_string(d.join("events.jsonl")).unwrap();
    for text in DEMO_TEXTS.iter().chain([&DEMO_SECRET]) {
        assert!(!default.contains(text), "default policy leaked {text:?}");
    }

    let d2 = scratch("privacy-capture");
    let out = pi()
        .args(["demo", "--capture", "prompts,tool_results,file_contents,shell_output", "--dir"])
        .arg(&d2)
        .output()
        .unwrap();
    assert!(out.status.success());
    let captured = std::fs::read_to_string(d2.join("events.jsonl")).unwrap();
    for text in DEMO_TEXTS {
        assert!(captured.contains(text), "captured run misses {text:?}");
    }
    assert!(!captured.contains(DEMO_SECRET), "the sk- key read from a file must arrive scrubbed");
    assert!(captured.contains("deploy key for staging: [REDACTED]"));
    for absent in [
        format!("\"{}\"", names::COMPLETION_TEXT),
        format!("\"{}\"", names::HEADERS),
        "Let me look at the project first".to_owned(),
        "Fixed: add() now returns".to_owned(),
    ] {
        assert!(!captured.contains(&absent), "captured run has {absent:?} without capturing it");
    }
    std::fs::remove_dir_all(&d).unwrap();
    std::fs::remove_dir_all(&d2).unwrap();
}

fn faux_script(dir: &Path, command: &str) -> PathBuf {
    let script = dir.join("script.json");
    let steps = serde_json::json!([
        {"tools": [{"name": "bash", "arguments": {"command": command}}]},
        {"text": "done"}
    ]);
    std::fs::write(&script, steps.to_string()).unwrap();
    script
}

fn env_file(path: &Path) -> std::collections::HashMap<String, String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
        .collect()
}

#[test]
fn bash_children_get_the_session_environment_and_traceparent_but_no_credentials() {
    let d = scratch("bash-env");
    let script = faux_script(&d, "env > child.env");
    pi().args(["-p", "dump the environment", "--provider", "faux", "--user", "u1", "--org", "acme"])
        .flag("--cwd", &d)
        .flag("--faux-script", &script)
        .flag("--session", d.join("s.jsonl"))
        .flag("--events-jsonl", d.join("events.jsonl"))
        .env("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer otel-secret")
        .env("OPENAI_API_KEY", "sk-parent-secret-0123456789")
        .env("SENTRY_DSN", "https://key@sentry.invalid/1")
        .env("PI_MODEL", "inherited-model")
        .succeeds();
    let env = env_file(&d.join("child.env"));
    let evs = events(&d.join("events.jsonl"));
    let tool = evs.iter().find(|e| e.kind == EventKind::Start && e.name == names::AGENT_TOOL_CALL).unwrap();
    assert_eq!(env["TRACEPARENT"], format!("00-{}-{}-01", tool.trace_id, tool.span_id.unwrap()));
    let header: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(d.join("s.jsonl")).unwrap().lines().next().unwrap()).unwrap();
    assert_eq!(env["PI_SESSION_ID"], header["id"].as_str().unwrap());
    assert_eq!(env["PI_SESSION_FILE"], d.join("s.jsonl").display().to_string());
    assert_eq!(env["PI_PROVIDER"], "faux");
    assert_eq!(env["PI_MODEL"], "faux-1");
    for absent in ["OTEL_EXPORTER_OTLP_HEADERS", "OPENAI_API_KEY", "SENTRY_DSN"] {
        assert!(!env.contains_key(absent), "{absent} reached the child");
    }
    assert!(env.contains_key("PATH"), "ordinary variables are kept");

    // --no-session-env: no session variables, and inherited ones are stripped.
    let d2 = scratch("bash-env-off");
    let script = faux_script(&d2, "env > child.env");
    pi().args(["-p", "x", "--provider", "faux", "--no-session", "--no-session-env"])
        .flag("--cwd", &d2)
        .flag("--faux-script", &script)
        .env("PI_MODEL", "inherited-model")
        .env("TRACEPARENT", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
        .succeeds();
    let env = env_file(&d2.join("child.env"));
    for absent in ["PI_MODEL", "PI_SESSION_ID", "PI_PROVIDER", "TRACEPARENT"] {
        assert!(!env.contains_key(absent), "{absent} reached the child with the session env off");
    }
    std::fs::remove_dir_all(&d).unwrap();
    std::fs::remove_dir_all(&d2).unwrap();
}

#[test]
fn print_mode_talks_to_a_loopback_openai_compatible_server() {
    let d = scratch("loopback");
    let (base, server) = support::one_shot_openai_server();
    let out = pi()
        .args(["-p", "say hello", "--model", "llama-local", "--no-session", "--tools", "none", "--base-url", &base])
        .flag("--events-jsonl", d.join("events.jsonl"))
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout.trim(), "Hello from loopback");
    let request = server.join().unwrap();
    assert!(request.starts_with("POST /v1/chat/completions"));
    assert!(request.to_ascii_lowercase().contains("traceparent: 00-"));
    let evs = events(&d.join("events.jsonl"));
    let end = evs.iter().find(|e| e.kind == EventKind::End && e.name == names::PROVIDER_REQUEST).unwrap();
    assert_eq!(end.payload.get(names::INPUT_TOKENS), Some(&Value::I64(12)));
    assert_eq!(end.payload.get(names::PROVIDER), Some(&Value::from("openai")));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn an_incoming_traceparent_becomes_the_parent_of_the_prompt_root() {
    let d = scratch("traceparent");
    let out = pi()
        .args(["-p", "hi", "--no-session", "--tools", "none"])
        .flag("--events-jsonl", d.join("events.jsonl"))
        .env("TRACEPARENT", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
        .output()
        .unwrap();
    assert!(out.status.success());
    let evs = events(&d.join("events.jsonl"));
    let root = evs.iter().find(|e| e.kind == EventKind::Start && e.name == names::AGENT_PROMPT).unwrap();
    assert_eq!(root.trace_id.to_string(), "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(root.parent_span_id.unwrap().to_string(), "b7ad6b7169203331");
    assert!(evs.iter().all(|e| e.trace_id == root.trace_id));
    pi_observe::core::testing::assert_paired_allowing_remote(&evs);

    // With an extension the session starts before the prompt: the parent is still the prompt's.
    let ext = d.join("ext.mjs");
    std::fs::write(&ext, "export default function (pi) { pi.on(\"session_start\", async () => {}); }\n").unwrap();
    pi().args(["-p", "hi", "--no-session", "--tools", "none"])
        .flag("-e", &ext)
        .flag("--events-jsonl", d.join("with-ext.jsonl"))
        .env("TRACEPARENT", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
        .succeeds();
    let evs = events(&d.join("with-ext.jsonl"));
    let root = evs.iter().find(|e| e.kind == EventKind::Start && e.name == names::AGENT_PROMPT).unwrap();
    assert_eq!(root.parent_span_id.unwrap().to_string(), "b7ad6b7169203331");

    let out =
        pi().args(["-p", "hi", "--no-session", "--tools", "none"]).env("TRACEPARENT", "garbage").output().unwrap();
    assert!(out.status.success(), "a malformed TRACEPARENT is ignored, not fatal");
    assert!(text(&out).1.contains("TRACEPARENT"), "…but the user is told");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_closed_stdout_is_not_a_panic() {
    let d = scratch("closed-stdout");
    for args in [vec!["demo", "--dir", d.to_str().unwrap()], vec!["-p", "hi", "--no-session", "--mode", "json"]] {
        let mut child =
            pi().args(&args).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
        drop(child.stdout.take()); // the reader goes away, like `pi demo | head -1`
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(out.status.success(), "{args:?}: {stderr}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn skills_and_templates_load_from_flags_and_bad_files_are_named_on_stderr() {
    let d = scratch("skills");
    let skills = d.join("skills");
    std::fs::create_dir_all(skills.join("greet")).unwrap();
    std::fs::write(skills.join("greet/SKILL.md"), "---\nname: greet\ndescription: Greets.\n---\nSay hello.\n").unwrap();
    std::fs::create_dir_all(skills.join("bad")).unwrap();
    std::fs::write(skills.join("bad/SKILL.md"), "---\nname: bad\n").unwrap();
    let out = pi()
        .args(["-p", "/skill:greet Ada", "--no-session", "--tools", "none", "--mode", "json", "--cwd"])
        .arg(&d)
        .flag("--skills", &skills)
        .flag("--events-jsonl", d.join("events.jsonl"))
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.starts_with("pi: skipped")).collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(warnings[0].contains("bad/SKILL.md") && warnings[0].contains("not closed"), "{}", warnings[0]);
    assert!(stdout.contains("User: Ada"), "the expanded skill is the user message");
    let evs = events(&d.join("events.jsonl"));
    assert!(evs.iter().any(|e| e.name == names::AGENT_SKILL && e.kind == EventKind::End));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn every_builtin_secret_rule_is_active_in_this_build() {
    // The `regex` features this binary is built with must support every built-in pattern
    // (a missing `unicode-case` once silently disabled the `password=` and `Bearer` rules).
    let scrubber = pi_observe::core::Scrubber::default();
    let active: Vec<&str> = scrubber.rule_names().collect();
    let builtin: Vec<&str> = pi_observe::core::Scrubber::builtin_rule_names().collect();
    assert_eq!(active, builtin);
}

#[test]
fn an_unreachable_sentry_dsn_neither_changes_the_answer_nor_holds_the_exit() {
    // Accepts connections (kernel backlog) and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dsn = format!("http://public@127.0.0.1:{}/1", silent.local_addr().unwrap().port());
    let plain = pi().args(["-p", "hello", "--no-session", "--tools", "none"]).output().unwrap();
    let started = std::time::Instant::now();
    let out = pi().args(["-p", "hello", "--no-session", "--tools", "none", "--sentry", &dsn]).output().unwrap();
    let took = started.elapsed();
    assert!(out.status.success(), "{}", text(&out).1);
    assert_eq!(out.stdout, plain.stdout, "the answer is the same with a dead Sentry");
    // The exit waits at most the 5 s flush deadline (plus process start-up and slack).
    assert!(took < std::time::Duration::from_secs(8), "exit took {took:?}");
    drop(silent);
}

#[test]
fn report_sums_each_session_once_per_user_org_model_and_day() {
    let d = scratch("report");
    let sessions = d.join("sessions");
    let prompt = |session: &Path, who: &[&str], message: &str| {
        pi().args(["-p", message, "--tools", "none"]).args(who).flag("--cwd", &d).flag("--session", session).succeeds();
    };
    let alice = sessions.join("alice.jsonl");
    let bob = sessions.join("team/bob.jsonl");
    let (as_alice, as_bob): (&[&str], &[&str]) =
        (&["--user", "alice", "--org", "acme"], &["--user", "bob", "--org", "globex"]);
    prompt(&alice, as_alice, "first question");
    prompt(&alice, as_alice, "second question");
    prompt(&alice, as_alice, "/compact keep the questions");
    prompt(&bob, as_bob, "a question from bob");
    // Nobody named: not attributed to alice, whose prompts came before on this branch.
    prompt(&alice, &[], "an anonymous question");
    std::fs::write(sessions.join("events.jsonl"), "{\"type\":\"start\"}\n").unwrap(); // not a session: skipped

    let out = pi().args(["report", "--format", "json", "--by", "user,org"]).arg(&sessions).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let rows: Vec<serde_json::Value> = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(rows.len(), 3, "{stdout}");
    // Rows sort by user: "-" (none) first. Anonymous + alice = alice's file; bob = bob's file.
    assert_eq!((&rows[0]["user"], &rows[0]["org"]), (&serde_json::Value::Null, &serde_json::Value::Null));
    assert_eq!(rows[0]["turns"], 1);
    let mut alice_and_anonymous = rows[1].clone();
    for key in ["turns", "input", "output", "totalTokens"] {
        alice_and_anonymous[key] = (rows[0][key].as_u64().unwrap() + rows[1][key].as_u64().unwrap()).into();
    }
    alice_and_anonymous["costUsd"] =
        (rows[0]["costUsd"].as_f64().unwrap() + rows[1]["costUsd"].as_f64().unwrap()).into();
    for (row, file, user, org) in [(&alice_and_anonymous, &alice, "alice", "acme"), (&rows[2], &bob, "bob", "globex")] {
        let session = pi_observe::agent::session::read_session(file).unwrap();
        let totals = session.totals();
        assert_eq!((row["user"].as_str(), row["org"].as_str()), (Some(user), Some(org)));
        assert_eq!(row["turns"], totals.assistant_messages as u64, "{row}");
        assert_eq!(row["input"], totals.usage.input, "{row}");
        assert_eq!(row["output"], totals.usage.output, "{row}");
        assert_eq!(row["totalTokens"], totals.usage.total_tokens, "{row}");
        assert!((row["costUsd"].as_f64().unwrap() - totals.usage.cost.total).abs() < 1e-12, "{row}");
    }
    // The compaction's usage is in alice's totals (counted once, not as a turn).
    let alice_session = pi_observe::agent::session::read_session(&alice).unwrap();
    let compactions = alice_session
        .entries
        .iter()
        .filter(|e| matches!(e.kind, pi_observe::agent::session::EntryKind::Compaction { .. }))
        .filter_map(|e| e.kind.usage())
        .count();
    assert_eq!(compactions, 1, "the /compact prompt wrote a compaction with usage");

    // Table and CSV carry the same numbers; a corrupt session is named, the rest still reported.
    std::fs::write(
        sessions.join("broken.jsonl"),
        "{\"type\":\"session\",\"version\":3,\"id\":\"x\",\"timestamp\":\"t\"}\nnot json\n{}\n",
    )
    .unwrap();
    let out = pi().args(["report", "--by", "user"]).arg(&sessions).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.trim().lines().count() == 1 && stderr.contains("broken.jsonl:2"), "{stderr}");
    assert!(stdout.lines().any(|l| l.starts_with("alice ")) && stdout.lines().any(|l| l.starts_with("total ")));
    // `pi export` with nowhere to send: one line naming what is missing, exit 2; to a file: the
    // corrupt session is named and the exit is 1, the others are replayed.
    let out = pi().arg("export").arg(&sessions).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).1.starts_with("pi: export: nothing to export to"), "{}", text(&out).1);
    let out = pi().arg("export").arg(&sessions).arg("--events-jsonl").arg(d.join("replay.jsonl")).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).1.contains("broken.jsonl:2"), "{}", text(&out).1);
    assert!(events(&d.join("replay.jsonl")).iter().any(|e| e.context.get(names::CTX_USER_ID) == Some("bob")));
    let csv = pi().args(["report", "--format", "csv", "--by", "model"]).arg(&alice).output().unwrap();
    let csv = text(&csv).0;
    assert!(csv.starts_with("model,turns,input,output,"), "{csv}");
    assert_eq!(csv.lines().count(), 2, "{csv}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_resumed_sessions_read_reaches_the_sinks() {
    let d = scratch("resume-read");
    let session = d.join("s.jsonl");
    for round in ["first", "second"] {
        pi().args(["-p", round, "--tools", "none"])
            .flag("--session", &session)
            .flag("--events-jsonl", d.join(format!("{round}.jsonl")))
            .succeeds();
    }
    let reads = |name: &str| events(&d.join(name)).iter().filter(|e| e.name == names::SESSION_READ).count();
    assert_eq!(reads("first.jsonl"), 0, "a new session is not read");
    assert_eq!(reads("second.jsonl"), 1, "the resumed session's read is one event record (no root trace)");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn session_storage_is_events_on_the_work_unless_trace_detail_asks_for_spans() {
    let d = scratch("trace-detail");
    let run = |name: &str| {
        pi().args(["-p", "hello", "--tools", "none"])
            .env("PI_CODING_AGENT_DIR", d.join("agent"))
            .flag("--session", d.join(format!("{name}.jsonl")))
            .flag("--events-jsonl", d.join(format!("{name}-events.jsonl")))
            .succeeds();
        events(&d.join(format!("{name}-events.jsonl")))
    };
    let default = run("default");
    let starts = |evs: &[pi_observe::core::ObsEvent], name: &str| {
        evs.iter().filter(|e| e.kind == EventKind::Start && e.name == name).count()
    };
    assert_eq!(starts(&default, names::SESSION_WRITE), 0, "no storage spans");
    assert!(
        default.iter().any(|e| e.kind == EventKind::Event && e.name == names::AGENT_SESSION_APPEND_ENTRY),
        "each entry is an event on the operation that wrote it"
    );
    support::global_settings(&d, r#"{"telemetry":{"traceDetail":"storage"}}"#);
    let storage = run("storage");
    assert!(starts(&storage, names::SESSION_WRITE) >= 2, "traceDetail storage: spans again");
    assert_eq!(starts(&storage, names::AGENT_SESSION_APPEND_ENTRY), starts(&storage, names::SESSION_WRITE));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn report_ranges_weeks_months_and_a_self_contained_html_page() {
    let d = scratch("report-html");
    let sessions = d.join("sessions");
    for (user, team) in [("alice", "core"), ("<b>mallory</b>", "web")] {
        pi().args(["-p", "hello", "--tools", "none", "--org", "acme", "--user", user])
            .args(["--context", &format!("teamId={team}")])
            .flag("--session", sessions.join(format!("{}.jsonl", user.len())))
            .succeeds();
    }
    let report = |args: &[&str]| {
        let out = pi().arg("report").args(args).arg(&sessions).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let json: Vec<serde_json::Value> = serde_json::from_str(&report(&["--format", "json", "--by", "org"])).unwrap();
    let cost = json[0]["costUsd"].as_f64().unwrap();
    let today = pi_agent::time::date(pi_agent::time::now_millis());
    let week = pi_agent::time::iso_week(&today).unwrap();
    let by_period = report(&["--by", "week,month", "--format", "csv"]);
    assert!(by_period.contains(&format!("{week},{}", &today[..7])), "{by_period}");
    assert!(report(&["--since", "1d", "--until", &today, "--by", "org"]).contains("acme"));
    assert!(!report(&["--since", "2999-01-01", "--by", "org"]).contains("acme"), "nothing after the range start");
    let bad = pi().args(["report", "--since", "2026-13-01"]).arg(&sessions).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    // Any recorded attribution key is a dimension; one no usage carries is refused by name.
    let teams: Vec<serde_json::Value> =
        serde_json::from_str(&report(&["--format", "json", "--by", "teamId,user"])).unwrap();
    let team_of = |user: &str| teams.iter().find(|r| r["user"] == user).map(|r| r["teamId"].clone());
    assert_eq!(team_of("alice"), Some("core".into()), "{teams:?}");
    assert_eq!(team_of("<b>mallory</b>"), Some("web".into()), "{teams:?}");
    let team_cost: f64 = teams.iter().map(|r| r["costUsd"].as_f64().unwrap()).sum();
    assert!((team_cost - cost).abs() < 1e-9, "the same usage, split another way");
    let typo = pi().args(["report", "--by", "team"]).arg(&sessions).output().unwrap();
    assert_eq!(typo.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&typo.stderr);
    assert!(stderr.contains("\"team\"") && stderr.contains("orgId, teamId, userId"), "{stderr}");

    let html = report(&["--format", "html"]);
    assert!(html.starts_with("<!doctype html>") && html.trim_end().ends_with("</html>"));
    assert!(html.contains(&format!("cost ${cost:.6}")), "the page's total is the JSON report's");
    assert!(html.contains("&lt;b&gt;mallory&lt;/b&gt;") && !html.contains("<b>mallory"), "names are escaped");
    assert!(html.contains("<svg") && html.contains("Top sessions") && html.contains("By model"));
    for outside in ["<script", "http://", "https://", "<link", "@import"] {
        assert!(!html.contains(outside), "self-contained: no {outside}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// Headless Chromium (Debian's `chromium`, or `PI_CHROMIUM`) on `page`: the console messages it
/// logged, the DOM it rendered, and a screenshot at `shot`.
fn open_in_chromium(page: &Path, shot: &Path) -> (Vec<String>, String) {
    let chromium = std::env::var("PI_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let profile = page.with_extension("profile");
    // Flags that keep a headless Chromium off the network and out of the sandbox root cannot use.
    let flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--enable-logging=stderr",
        "--v=0",
        "--window-size=1280,1600",
    ];
    let url = format!("file://{}", page.display());
    let run = |extra: &str| {
        let out = std::process::Command::new(&chromium)
            .args(flags)
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg(extra)
            .arg(&url)
            .output()
            .unwrap_or_else(|e| panic!("{chromium}: {e} (install Debian's chromium: scripts/test does)"));
        assert!(out.status.success(), "{chromium}: {}", text(&out).1);
        text(&out)
    };
    let (_, stderr) = run(&format!("--screenshot={}", shot.display()));
    let console = stderr.lines().filter(|l| l.contains(":CONSOLE")).map(str::to_owned).collect();
    let (dom, _) = run("--dump-dom");
    (console, dom)
}

/// `page` in Chromium must log nothing and draw something (its screenshot kept under the
/// target folder as `shot`); returns the DOM it rendered.
fn clean_page_dom(page: &Path, shot: &str) -> String {
    let artifacts = Path::new(env!("CARGO_TARGET_TMPDIR")).join("artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let shot = artifacts.join(shot);
    let (console, dom) = open_in_chromium(page, &shot);
    assert!(console.is_empty(), "the page logs nothing: {console:?}");
    assert!(std::fs::metadata(&shot).unwrap().len() > 10_000, "a screenshot with something on it");
    dom
}

#[test]
#[ignore = "needs Debian's chromium: run scripts/test"]
fn the_html_report_opens_in_a_browser_without_errors_and_shows_the_json_totals() {
    let d = scratch("report-chromium");
    let sessions = d.join("sessions");
    for (user, org) in [("alice", "acme"), ("bob", "globex")] {
        pi().args(["-p", "hello", "--tools", "none", "--org", org, "--user", user])
            .flag("--session", sessions.join(format!("{user}.jsonl")))
            .succeeds();
    }
    let report = |format: &str| {
        let out = pi().args(["report", "--by", "org", "--format", format]).arg(&sessions).output().unwrap();
        assert!(out.status.success(), "{}", text(&out).1);
        out.stdout
    };
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&report("json")).unwrap();
    let total: f64 = rows.iter().map(|r| r["costUsd"].as_f64().unwrap()).sum();
    let page = d.join("report.html");
    std::fs::write(&page, report("html")).unwrap();

    // The check sees a console error when there is one.
    let broken = d.join("broken.html");
    std::fs::write(&broken, "<!doctype html><p>x</p><script>console.error('boom')</script>").unwrap();
    let (console, _) = open_in_chromium(&broken, &d.join("broken.png"));
    assert!(console.iter().any(|l| l.contains("boom")), "{console:?}");

    let dom = clean_page_dom(&page, "report.png");
    assert!(dom.contains(&format!("cost ${total:.6}")), "the rendered total is the JSON report's ({total})");
    for org in ["acme", "globex"] {
        let cost = rows.iter().find(|r| r["org"] == org).unwrap()["costUsd"].as_f64().unwrap();
        assert!(dom.contains(&format!("${cost:.6}")), "{org}'s cost is on the page");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// Two prompts with tools in one session, and its `pi report` JSON row.
fn exported_session(d: &Path) -> (PathBuf, serde_json::Value) {
    let session = d.join("s.jsonl");
    let script = support::faux_script(d);
    for prompt in ["first **prompt**", "second <b>prompt</b>"] {
        pi().args(["-p", prompt, "--user", "alice", "--org", "acme", "--cwd"])
            .arg(d)
            .flag("--faux-script", &script)
            .flag("--session", &session)
            .succeeds();
    }
    let out = pi().args(["report", "--format", "json", "--by", "org"]).arg(&session).succeeds();
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    (session, rows[0].clone())
}

/// `pi --export SESSION [OUT]`: one self-contained page with the conversation, the tool calls
/// and their output, the totals `pi report` gives, and each prompt's trace linked.
#[test]
fn export_writes_the_session_as_one_self_contained_page() {
    let d = scratch("export-html");
    let (session, row) = exported_session(&d);
    let traces: Vec<String> = std::fs::read_to_string(&session)
        .unwrap()
        .lines()
        .filter(|l| l.contains("pi-observe.trace"))
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["data"]["traceId"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(traces.len(), 2, "one trace id recorded per prompt");
    // The default name, in the working directory.
    let out = pi()
        .arg("--export")
        .arg(&session)
        .current_dir(&d)
        .env("PI_TRACE_URL_TEMPLATE", "http://localhost:16686/trace/{trace_id}")
        .succeeds();
    let page = d.join("pi-session-s.html");
    assert!(String::from_utf8_lossy(&out.stdout).contains("Exported to:"));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!doctype html>") && html.trim_end().ends_with("</html>"));
    assert!(html.contains(&format!("cost ${:.6}", row["costUsd"].as_f64().unwrap())), "the report's cost");
    assert!(html.contains(&format!("total tokens {}", row["totalTokens"])), "the report's tokens");
    for trace in &traces {
        assert!(html.contains(&format!("href=\"http://localhost:16686/trace/{trace}\"")), "{trace} linked");
    }
    assert!(html.contains("first <strong>prompt</strong>"), "markdown rendered");
    assert!(html.contains("second &lt;b&gt;prompt&lt;/b&gt;"), "raw HTML shown as text");
    assert!(html.contains("calls bash") && html.contains("echo hi") && html.contains("All good."));
    assert!(html.contains("attributed to orgId=acme userId=alice"));
    for outside in ["<script", "<link", "@import", "<img", "src="] {
        assert!(!html.contains(outside), "self-contained: no {outside}");
    }
    // An output path as the next argument; a missing session is a one-line error.
    pi().arg("--export").arg(&session).arg(d.join("named.html")).succeeds();
    assert!(d.join("named.html").is_file());
    let out = pi().arg("--export").arg(d.join("missing.jsonl")).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("pi: --export:") && stderr.trim_end().lines().count() == 1, "{stderr}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
#[ignore = "needs Debian's chromium: run scripts/test"]
fn the_exported_session_opens_in_a_browser_without_errors_and_shows_the_report_totals() {
    let d = scratch("export-chromium");
    let (session, row) = exported_session(&d);
    let page = d.join("session.html");
    pi().arg("--export").arg(&session).arg(&page).succeeds();
    let dom = clean_page_dom(&page, "session-export.png");
    assert!(dom.contains(&format!("cost ${:.6}", row["costUsd"].as_f64().unwrap())), "the report's total");
    assert!(dom.contains("All good."));
    std::fs::remove_dir_all(&d).unwrap();
}
