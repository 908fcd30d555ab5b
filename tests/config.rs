//! Configuration a team can govern, run as a user runs `pi`: settings files in the agent
//! directory and the project, each precedence step, project trust, and every power of the
//! managed policy — checked against a loopback OTLP receiver where content could leave.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use pi_observe::otel::testing::Receiver;
use serde_json::{Value, json};
use support::scratch;

/// A user: an agent directory, a project folder, and optionally a managed policy file.
struct User {
    agent: PathBuf,
    project: PathBuf,
    managed: Option<PathBuf>,
}

impl User {
    fn new(name: &str) -> User {
        let root = scratch(name);
        let user = User { agent: root.join("agent"), project: root.join("project"), managed: None };
        std::fs::create_dir_all(&user.agent).unwrap();
        std::fs::create_dir_all(user.project.join(".pi")).unwrap();
        user
    }

    fn global(&self, settings: Value) -> &Self {
        std::fs::write(self.agent.join("settings.json"), settings.to_string()).unwrap();
        self
    }

    fn project(&self, settings: Value) -> &Self {
        std::fs::write(self.project.join(".pi/settings.json"), settings.to_string()).unwrap();
        self
    }

    fn managed(&mut self, policy: Value) -> &mut Self {
        let path = self.agent.parent().unwrap().join("managed-settings.json");
        std::fs::write(&path, policy.to_string()).unwrap();
        self.managed = Some(path);
        self
    }

    /// `pi ARGS` in the project folder, with this user's agent directory and policy.
    fn pi(&self, args: &[&str]) -> Command {
        let mut cmd = support::pi();
        cmd.env("PI_CODING_AGENT_DIR", &self.agent).current_dir(&self.project).args(args);
        for var in ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "PI_USER_ID", "PI_ORG_ID", "SENTRY_DSN"] {
            cmd.env_remove(var);
        }
        if let Some(path) = &self.managed {
            cmd.env("PI_MANAGED_SETTINGS", path);
        }
        cmd
    }

    fn trust(&self) {
        let out = self.pi(&["trust"]).output().unwrap();
        assert!(out.status.success(), "{out:?}");
    }

    /// `pi config --json` (extra args and env applied by `f`).
    fn config(&self, f: impl FnOnce(&mut Command)) -> Value {
        let mut cmd = self.pi(&["config", "--json"]);
        f(&mut cmd);
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The OTLP sink of a `pi config --json` document.
fn otlp(config: &Value) -> &Value {
    config["resolved"]["telemetry"]["sinks"].as_array().unwrap().iter().find(|s| s["sink"] == "otlp").unwrap()
}

#[test]
fn each_precedence_step_wins_over_the_one_below_it() {
    let mut user = User::new("precedence");
    user.global(json!({"telemetry": {"sinks": {"otlp": {"endpoint": "http://global:4318", "conventions": "both"}}}}));
    user.project(json!({"telemetry": {"sinks": {"otlp": {"endpoint": "http://project:4318"}}}}));

    // Untrusted: the project file is not read.
    let c = user.config(|_| {});
    assert_eq!(otlp(&c)["endpoint"], "http://global:4318/v1/traces");
    assert!(otlp(&c)["sources"]["endpoint"].as_str().unwrap().starts_with("global "), "{c}");
    assert_eq!(c["project"]["trusted"], false);

    user.trust();
    let c = user.config(|_| {});
    assert_eq!(otlp(&c)["endpoint"], "http://project:4318/v1/traces");
    assert!(otlp(&c)["sources"]["endpoint"].as_str().unwrap().starts_with("project "));
    // Nested objects merge key by key: conventions still comes from the global file.
    assert_eq!(otlp(&c)["conventions"], "both");
    assert!(otlp(&c)["sources"]["conventions"].as_str().unwrap().starts_with("global "));

    let c = user.config(|cmd| {
        cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318");
    });
    assert_eq!(otlp(&c)["endpoint"], "http://env:4318/v1/traces");
    assert_eq!(otlp(&c)["sources"]["endpoint"], "env OTEL_EXPORTER_OTLP_ENDPOINT");

    let c = user.config(|cmd| {
        cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318").args(["--otlp", "http://flag:4318"]);
    });
    assert_eq!(otlp(&c)["endpoint"], "http://flag:4318/v1/traces");
    assert_eq!(otlp(&c)["sources"]["endpoint"], "flag --otlp");

    user.managed(json!({"telemetry": {"sinks": {"otlp": {"endpoint": "http://managed:4318"}}}}));
    let c = user.config(|cmd| {
        cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318").args(["--otlp", "http://flag:4318"]);
    });
    assert_eq!(otlp(&c)["endpoint"], "http://managed:4318/v1/traces");
    assert!(otlp(&c)["sources"]["endpoint"].as_str().unwrap().starts_with("managed "));
    assert_eq!(otlp(&c)["pinned"], true);
}

#[test]
fn upstream_keys_choose_the_model_and_the_session_folder_and_unknown_keys_are_warned_once() {
    let user = User::new("upstream-keys");
    let sessions = user.agent.parent().unwrap().join("my-sessions");
    user.global(json!({
        "defaultProvider": "faux", "defaultModel": "faux-1", "sessionDir": sessions,
        "theme": "dark", "compaction": {"enabled": true}, "defaultThinkinLevel": "high"
    }));
    let out = user.pi(&["-p", "hello", "--tools", "none"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.matches("unknown setting \"defaultThinkinLevel\"").count(), 1, "{err}");
    assert!(!err.contains("\"theme\""), "upstream keys are known: {err}");
    let written: Vec<_> = walk(&sessions);
    assert_eq!(written.len(), 1, "one session file under sessionDir: {written:?}");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() { out.extend(walk(&path)) } else { out.push(path) }
    }
    out
}

#[test]
fn malformed_files_name_file_line_and_column_or_the_key_path() {
    let user = User::new("malformed");
    std::fs::write(user.agent.join("settings.json"), "{\n  \"defaultModel\": \"x\",\n  \"retry\": {,}\n}").unwrap();
    let out = user.pi(&["-p", "hi"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("settings.json:3:13: "), "{err}");

    user.global(json!({"telemetry": {"sinks": {"otlp": {"endpoint": "not a url"}}}}));
    let out = user.pi(&["-p", "hi"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("telemetry.sinks.otlp.endpoint: "), "{}", stderr(&out));

    user.global(json!({"telemetry": {"spool": {"maxBytes": "lots"}}}));
    let out = user.pi(&["-p", "hi"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("telemetry.spool.maxBytes: expected a whole number"), "{}", stderr(&out));
}

#[test]
fn a_broken_managed_policy_stops_every_command() {
    let mut user = User::new("managed-broken");
    user.managed(json!({}));
    std::fs::write(user.managed.as_ref().unwrap(), "{ \"policy\": ").unwrap();
    for args in [&["-p", "hi"][..], &["report"][..], &["config"][..]] {
        let out = user.pi(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = stderr(&out);
        assert!(err.contains("managed policy") && err.contains("managed-settings.json:1:"), "{err}");
    }
    let mut missing = User::new("managed-missing");
    missing.managed = Some(PathBuf::from("/nonexistent/managed.json"));
    let out = missing.pi(&["-p", "hi"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "a named policy that is missing fails closed");
}

#[test]
fn untrusted_project_resources_load_only_after_pi_trust() {
    let user = User::new("trust");
    std::fs::create_dir_all(user.project.join(".pi/skills/deploy")).unwrap();
    std::fs::write(
        user.project.join(".pi/skills/deploy/SKILL.md"),
        "---\nname: deploy\ndescription: Deploys the project.\n---\nRun make deploy.\n",
    )
    .unwrap();
    std::fs::create_dir_all(user.project.join(".pi/prompts")).unwrap();
    std::fs::write(user.project.join(".pi/prompts/review.md"), "Review $1 carefully.").unwrap();
    user.project(json!({"telemetry": {"attribution": {"orgId": "from-project"}}}));
    let events = user.project.join("events.jsonl");

    let run = |prompt: &str| {
        let _ = std::fs::remove_file(&events);
        let out = user
            .pi(&["-p", prompt, "--tools", "none", "--no-session", "--capture", "events=prompt", "--events-jsonl"])
            .arg(&events)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        (stderr(&out), support::events(&events))
    };
    // The skills block of the system prompt (captured as prompt content in the events file).
    let skill_offered = || std::fs::read_to_string(&events).unwrap().contains("Deploys the project.");
    let (err, evs) = run("/review main.rs");
    assert_eq!(err.matches("is not trusted").count(), 1, "{err}");
    assert!(err.contains(".pi/settings.json") && err.contains(".pi/skills"), "{err}");
    let org = |evs: &[pi_observe::core::ObsEvent]| evs.iter().find_map(|e| e.context.get("orgId").map(str::to_owned));
    assert_eq!(org(&evs), None);
    let expanded = |evs: &[pi_observe::core::ObsEvent]| evs.iter().any(|e| e.name == "pi.agent.prompt_template");
    assert!(!expanded(&evs), "an untrusted template is not expanded");
    assert!(!skill_offered(), "an untrusted skill is not offered to the model");

    user.trust();
    let (err, evs) = run("/review main.rs");
    assert!(!err.contains("not trusted"), "{err}");
    assert_eq!(org(&evs).as_deref(), Some("from-project"));
    assert!(expanded(&evs), "{:?}", evs.iter().map(|e| e.name.as_ref()).collect::<Vec<_>>());
    assert!(skill_offered(), "the trusted project's skill is in the system prompt");

    let out = user.pi(&["trust", "--revoke"]).output().unwrap();
    assert!(out.status.success());
    let (err, _) = run("hi");
    assert!(err.contains("is not trusted"), "{err}");
}

#[test]
fn a_managed_capture_cap_keeps_content_from_otlp_whatever_the_user_asks() {
    let receiver = Receiver::start(vec![]);
    let mut user = User::new("cap");
    user.managed(json!({"telemetry": {"sinks": {"otlp": {"capture": []}}}}));
    user.global(json!({"telemetry": {"sinks": {"otlp": {"endpoint": receiver.endpoint, "capture": ["all"]}}}}));
    let out = user
        .pi(&["-p", "CANARY-PROMPT-7731", "--tools", "none", "--no-session", "--capture", "otlp=prompt,completion"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.matches("caps what the otlp sink may capture").count(), 1, "{err}");
    let spans = receiver.spans();
    assert!(!spans.is_empty());
    let wire = format!("{:?}", receiver.requests().iter().map(|r| &r.request).collect::<Vec<_>>());
    assert!(!wire.contains("CANARY-PROMPT-7731"), "the prompt reached OTLP");
    assert!(!wire.contains("offline faux provider"), "no completion text either");
}

#[test]
fn a_pinned_sink_receives_everything_when_the_user_points_elsewhere_or_disables_otel() {
    let pinned = Receiver::start(vec![]);
    let elsewhere = Receiver::start(vec![]);
    let mut user = User::new("pinned");
    user.managed(json!({"telemetry": {"sinks": {"otlp": {"endpoint": pinned.endpoint,
        "headers": {"x-team": "core"}}}}}));
    let out = user
        .pi(&[
            "-p",
            "one",
            "--tools",
            "none",
            "--no-session",
            "--otlp",
            &elsewhere.endpoint,
            "--otlp-header",
            "x-team=other",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.matches("pins the OTLP sink").count(), 1, "reported once: {err}");
    assert!(err.contains("--otlp") && err.contains("--otlp-header"), "{err}");
    let out =
        user.pi(&["-p", "two", "--tools", "none", "--no-session"]).env("OTEL_SDK_DISABLED", "true").output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("OTEL_SDK_DISABLED"), "{}", stderr(&out));

    assert!(elsewhere.spans().is_empty(), "nothing went where the user pointed");
    let roots = pinned.spans().iter().filter(|s| s.parent_span_id.is_empty()).count();
    assert_eq!(roots, 2, "both runs reached the pinned collector");
    assert!(pinned.requests().iter().all(|r| r.header("x-team") == Some("core")));
}

#[test]
fn required_attribution_refuses_a_run_without_it_and_a_command_can_supply_it() {
    let mut user = User::new("required");
    user.managed(json!({"telemetry": {"attribution": {"required": ["userId", "orgId"], "orgId": "acme"}}}));
    let out = user.pi(&["-p", "hi", "--tools", "none", "--no-session"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("attribution key userId is required"), "{err}");

    let events = user.project.join("events.jsonl");
    user.global(json!({"telemetry": {"attribution": {"userIdCommand": "echo alice@example.com"}}}));
    let out = user
        .pi(&["-p", "hi", "--tools", "none", "--no-session", "--org", "other", "--events-jsonl"])
        .arg(&events)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stderr(&out).matches("--org ignored").count(), 1, "{}", stderr(&out));
    let evs = support::events(&events);
    let prompt = evs.iter().find(|e| e.name == "pi.agent.prompt").unwrap();
    assert_eq!(prompt.context.get("userId"), Some("alice@example.com"));
    assert_eq!(prompt.context.get("orgId"), Some("acme"), "the managed value wins over --org");
}

#[test]
fn the_policy_restricts_models_and_redaction_rules_add_up() {
    let mut user = User::new("models");
    user.managed(json!({"policy": {"allowedProviders": ["openai"]}, "telemetry": {"redact": ["ACME-[0-9]+"]}}));
    let out = user.pi(&["-p", "hi", "--tools", "none", "--no-session"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("provider \"faux\" is not allowed by the managed policy"), "{}", stderr(&out));

    user.managed(json!({"telemetry": {"redact": ["ACME-[0-9]+"]}}));
    user.global(json!({"telemetry": {"redact": ["TEAM-[a-z]+"]}}));
    let events = user.project.join("events.jsonl");
    let out = user
        .pi(&[
            "-p",
            "ticket ACME-4411 for TEAM-blue",
            "--tools",
            "none",
            "--no-session",
            "--capture",
            "prompt",
            "--events-jsonl",
        ])
        .arg(&events)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&events).unwrap();
    assert!(text.contains("ticket"), "the prompt is captured");
    assert!(!text.contains("ACME-4411") && !text.contains("TEAM-blue"), "both files' rules apply");
}

#[test]
fn upstream_models_json_adds_a_provider_with_its_credentials_and_prices() {
    let (base, server) = support::one_shot_openai_server();
    let user = User::new("models-json");
    std::fs::write(
        user.agent.join("models.json"),
        json!({"providers": {"local": {
            "baseUrl": base, "api": "openai-completions", "apiKey": "!echo sk-from-command-1234",
            "headers": {"x-team": "TEAM_FOR_TEST"},
            "models": [{"id": "llama-local", "name": "Llama", "cost": {"input": 1000000, "output": 0}}]}}})
        .to_string(),
    )
    .unwrap();
    user.global(json!({"defaultProvider": "local", "defaultModel": "llama-local", "defaultThinkingLevel": "high"}));
    let events = user.project.join("events.jsonl");
    let out = user
        .pi(&["-p", "hi", "--tools", "none", "--no-session", "--events-jsonl"])
        .arg(&events)
        .env("TEAM_FOR_TEST", "core")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let request = server.join().unwrap().to_ascii_lowercase();
    assert!(request.contains("authorization: bearer sk-from-command-1234"), "{request}");
    assert!(request.contains("x-team: core"), "the header named a variable: {request}");
    assert!(!request.contains("reasoning_effort"), "a thinking level only goes to a model that reasons");
    let evs = support::events(&events);
    let end = evs.iter().find(|e| e.name == "pi.ai.provider.request" && e.kind == pi_observe::core::EventKind::End);
    let cost = end.and_then(|e| e.payload.get("costInput")).cloned();
    assert_eq!(cost, Some(pi_observe::core::Value::F64(12.0)), "12 input tokens at $1 each");

    // The same model marked as reasoning gets the level.
    let (base, server) = support::one_shot_openai_server();
    std::fs::write(
        user.agent.join("models.json"),
        json!({"providers": {"local": {"baseUrl": base, "api": "openai-completions", "apiKey": "k",
            "models": [{"id": "llama-local", "reasoning": true}]}}})
        .to_string(),
    )
    .unwrap();
    let out = user.pi(&["-p", "hi", "--tools", "none", "--no-session"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(server.join().unwrap().contains(r#""reasoning_effort":"high""#));

    std::fs::write(user.agent.join("models.json"), "{\"providers\": {\"x\": {\"api\": 7}}}").unwrap();
    let out = user.pi(&["-p", "hi", "--no-session"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("models.json:providers.x.api: expected a string"), "{}", stderr(&out));
}

#[test]
fn pi_config_shows_sources_but_no_secret_and_says_what_the_policy_overrides() {
    let mut user = User::new("show");
    user.global(json!({"defaultModel": "faux-1", "telemetry": {"sinks": {
        "otlp": {"endpoint": "http://user:pw@collector:4318", "headers": {"authorization": "Bearer ${SHOW_TOKEN}"}},
        "sentry": {"dsn": "http://k3y@127.0.0.1:9/1"}}}}));
    user.managed(json!({"telemetry": {"sinks": {"otlp": {"endpoint": "http://managed:4318", "capture": ["prompt"]}}}}));
    let mut cmd = user.pi(&["config", "--json"]);
    let out = cmd.env("SHOW_TOKEN", "tok-s3cr3t-value").output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    for secret in ["tok-s3cr3t-value", "Bearer", "k3y", "pw@"] {
        assert!(!text.contains(secret), "{secret} printed: {text}");
    }
    let c: Value = serde_json::from_slice(&out.stdout).unwrap();
    // The user's value of a key (the managed policy's own values are listed too).
    let setting = |key: &str| {
        let from_user = |s: &&Value| s["key"] == key && s["source"].as_str().unwrap().starts_with("global ");
        c["settings"].as_array().unwrap().iter().find(from_user).cloned().unwrap()
    };
    assert_eq!(setting("telemetry.sinks.otlp.headers.authorization")["value"], "<set>");
    assert_eq!(setting("telemetry.sinks.otlp.endpoint")["overriddenByManagedPolicy"], true);
    assert_eq!(c["managedPolicy"]["pinnedSinks"], json!(["otlp"]));
    assert_eq!(c["managedPolicy"]["captureCaps"]["otlp"], json!(["prompt"]));
    assert_eq!(c["resolved"]["model"]["value"], "faux-1");
    let err = stderr(&out);
    assert_eq!(err.matches("sets telemetry.sinks.otlp.endpoint: the value in").count(), 1, "{err}");
}

/// The settings' `steeringMode` / `followUpMode` (upstream's delivery of queued messages) are
/// what a session starts with: RPC's `get_state` reports them.
#[test]
fn queue_delivery_modes_come_from_the_settings() {
    let user = User::new("config-queue-modes");
    user.global(json!({"steeringMode": "all", "followUpMode": "one-at-a-time"}));
    let mut child = user
        .pi(&["--mode", "rpc", "--no-session"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child.stdin.take().unwrap().write_all(b"{\"type\":\"get_state\",\"id\":\"s\"}\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let state: Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|m| m["type"] == "response" && m["id"] == "s")
        .unwrap_or_else(|| panic!("no get_state response:\n{stdout}"));
    assert_eq!(state["data"]["steeringMode"], "all", "{state}");
    assert_eq!(state["data"]["followUpMode"], "one-at-a-time", "{state}");
    std::fs::remove_dir_all(user.agent.parent().unwrap()).unwrap();
}
