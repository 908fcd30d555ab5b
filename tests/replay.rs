//! Live and replay agree: the generation spans of a live `pi -p` run (prompt → turn → chat →
//! execute_tool, and a compaction) and the spans `pi export` rebuilds from its session file
//! match in names, parents, model, tool, billed tokens, cost and call kind.
//!
//! What cannot agree, in one place ([`NOT_COMPARED`]): ids (replay derives them from the session),
//! exact times (the session keeps milliseconds and entry times), hook and session-write spans
//! (not in the session), the prompt's own usage total (replay bills each call, not the sum), and a
//! manual `/compact` prompt (not a user message in the session: its compaction is replayed inside
//! the previous prompt, and its summary request is billed on the compaction span).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod support;

use support::{Flag, pi};

use support::Succeeds;

use std::path::{Path, PathBuf};

use pi_observe::core::{EventKind, ObsEvent, Value, names};

/// Span names that never appear in a replay (see the module doc).
const NOT_COMPARED: [&str; 5] = [
    names::AGENT_HOOK,
    names::AGENT_SESSION_APPEND_ENTRY,
    names::SESSION_WRITE,
    names::SESSION_READ,
    names::AGENT_SKILL,
];

fn events(path: &Path) -> Vec<ObsEvent> {
    std::fs::read_to_string(path).unwrap().lines().map(|l| ObsEvent::from_json(l).unwrap()).collect()
}

/// One comparable span: name, parent's name, model, tool, and for billed calls the call kind,
/// tokens and cost (to 1e-9).
type Shape = (String, String, String, String, String, i64, String);

fn shapes(evs: &[ObsEvent]) -> Vec<Shape> {
    let ended: Vec<&ObsEvent> = evs.iter().filter(|e| matches!(e.kind, EventKind::End | EventKind::Error)).collect();
    let name_of = |span: Option<pi_observe::core::SpanId>| {
        span.and_then(|id| ended.iter().find(|e| e.span_id == Some(id))).map(|e| e.name.to_string()).unwrap_or_default()
    };
    let text = |e: &ObsEvent, key: &str| e.payload.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    let mut out: Vec<Shape> = ended
        .iter()
        .filter(|e| !NOT_COMPARED.contains(&e.name.as_ref()))
        .map(|e| {
            let kind = text(e, names::CALL_KIND);
            let billed = !kind.is_empty();
            let tokens =
                if billed { e.payload.get(names::TOTAL_TOKENS).and_then(Value::as_i64).unwrap_or(0) } else { 0 };
            let cost = e.payload.get(names::COST_TOTAL).and_then(Value::as_f64).filter(|_| billed).unwrap_or(0.0);
            let model = if e.name == names::AGENT_TOOL_CALL { String::new() } else { text(e, names::MODEL) };
            (
                e.name.to_string(),
                name_of(e.parent_span_id),
                model,
                text(e, names::TOOL_NAME),
                kind,
                tokens,
                format!("{cost:.9}"),
            )
        })
        .collect();
    out.sort();
    out
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pi-replay-{name}-{}", pi_observe::core::SpanId::random()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn a_replayed_session_matches_its_live_run_in_generation_spans() {
    let d = scratch("live");
    let script = d.join("script.json");
    let steps = serde_json::json!([
        {"error": {"status": 503, "message": "busy", "retryAfterSecs": 0}},
        {"text": "Checking.", "tools": [{"name": "ls", "arguments": {}}, {"name": "bash", "arguments": {"command": "echo hi"}}]},
        {"text": "All good."}
    ]);
    std::fs::write(&script, steps.to_string()).unwrap();
    let session = d.join("s.jsonl");
    pi().args(["-p", "check the project", "--provider", "faux", "--user", "alice", "--org", "acme"])
        .flag("--cwd", &d)
        .flag("--faux-script", &script)
        .flag("--session", &session)
        .flag("--events-jsonl", d.join("live.jsonl"))
        .succeeds();
    let out = pi().arg("export").arg(&session).arg("--events-jsonl").arg(d.join("replay.jsonl")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let live = shapes(&events(&d.join("live.jsonl")));
    let replay = shapes(&events(&d.join("replay.jsonl")));
    assert_eq!(live, replay, "live and replayed generation spans differ");
    let names: Vec<&str> = live.iter().map(|s| s.0.as_str()).collect();
    for expected in [names::AGENT_PROMPT, names::AGENT_TURN, names::PROVIDER_REQUEST, names::AGENT_TOOL_CALL] {
        assert!(names.contains(&expected), "{expected} missing: {names:?}");
    }
    assert!(live.iter().any(|s| s.4 == names::CALL_KIND_TURN && s.5 > 0), "billed turns compared: {live:?}");
    // Attribution travels too.
    let replayed = events(&d.join("replay.jsonl"));
    assert!(replayed.iter().all(|e| e.context.get(names::CTX_USER_ID) == Some("alice")));
    std::fs::remove_dir_all(&d).unwrap();
}
