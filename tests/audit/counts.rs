//! Items 10, 11, 13, 14: counts that never lie, a full disk, a large models.json, older upstream usage.

use super::*;
use crate::support::Flag;

/// An upstream-shaped `models.json` of `providers` providers with `per` models each.
fn big_models_json(providers: usize, per: usize) -> String {
    let mut out = String::from("{\"providers\": {");
    for p in 0..providers {
        if p > 0 {
            out.push(',');
        }
        out.push_str(&format!(
            "\"prov{p}\": {{\"baseUrl\": \"http://127.0.0.1:9/v1\", \"api\": \"openai-completions\", \"models\": ["
        ));
        for m in 0..per {
            if m > 0 {
                out.push(',');
            }
            out.push_str(&format!(
                "{{\"id\": \"model-{p}-{m}\", \"name\": \"Model {p}/{m} with a longer display name\", \"contextWindow\": 128000, \"maxTokens\": 8192, \"cost\": {{\"input\": 1.5, \"output\": 6, \"cacheRead\": 0.1, \"cacheWrite\": 2}}}}"
            ));
        }
        out.push_str("]}");
    }
    out.push_str("}}");
    out
}

#[test]
fn item_13_a_20_mb_models_json_loads_in_linear_time() {
    // 20,000 providers of 1 model and 1 provider of 100,000 models (each file ≈ 20 MB): the old
    // registry scanned every model per model added (minutes); a hang guard, not a timing assert.
    for (providers, per) in [(100_000, 1), (1, 100_000)] {
        let d = scratch("audit-models");
        let agent = d.join("agent");
        std::fs::create_dir_all(&agent).unwrap();
        let json = big_models_json(providers, per);
        assert!(json.len() > 15_000_000, "{} bytes", json.len());
        std::fs::write(agent.join("models.json"), json).unwrap();
        let mut child = pi()
            .env("PI_CODING_AGENT_DIR", &agent)
            .args(["-p", "hi", "--provider", "faux", "--no-session"])
            .flag("--cwd", &d)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        assert_eq!(exit_of(&mut child).0, Some(0), "{providers}×{per}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}

#[test]
fn item_14_upstream_usage_without_total_tokens_is_counted_and_unreadable_usage_is_named() {
    let d = scratch("audit-usage");
    let header = r#"{"type":"session","version":3,"id":"0a1b2c3d-1111-2222-3333-444455556666","timestamp":"2025-10-01T10:00:00.000Z","cwd":"/tmp"}"#;
    let user = r#"{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2025-10-01T10:00:01.000Z","message":{"role":"user","content":"Hello","timestamp":1}}"#;
    // Older upstream files: usage without `totalTokens`.
    let old = r#"{"type":"message","id":"b1b2c3d4","parentId":"a1b2c3d4","timestamp":"2025-10-01T10:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"hi"}],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":1000,"output":200,"cacheRead":50,"cacheWrite":0,"cost":{"input":0.003,"output":0.003,"cacheRead":0.000015,"cacheWrite":0,"total":0.006015}},"stopReason":"stop","timestamp":2}}"#;
    let file = d.join("old.jsonl");
    std::fs::write(&file, format!("{header}\n{user}\n{old}\n")).unwrap();
    let out = pi().args(["report", "--format", "json"]).arg(&file).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows[0]["totalTokens"], 1250, "{rows}");
    assert!((rows[0]["costUsd"].as_f64().unwrap() - 0.006015).abs() < 1e-9, "{rows}");

    // Usage pi cannot read: named with a count, the report exits 1 unless --allow-partial.
    let strange = r#"{"type":"message","id":"c1b2c3d4","parentId":"b1b2c3d4","timestamp":"2025-10-01T10:00:03.000Z","message":{"role":"assistant","content":[],"provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":"many"},"stopReason":"stop","timestamp":3}}"#;
    let partial = d.join("partial.jsonl");
    std::fs::write(&partial, format!("{header}\n{user}\n{old}\n{strange}\n")).unwrap();
    let out = pi().args(["report"]).arg(&partial).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("partial.jsonl: 1 entries with usage"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("1250"), "the readable entries are still reported");
    let out = pi().args(["report", "--allow-partial"]).arg(&partial).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::remove_dir_all(&d).unwrap();
}

/// Items of each signal in the spool folder (from the batch headers).
fn spooled_items(spool: &Path, signal: &str) -> u64 {
    let mut items = 0;
    for entry in std::fs::read_dir(spool).into_iter().flatten().flatten() {
        if entry.path().extension().is_none_or(|x| x != "batch") {
            continue;
        }
        let bytes = std::fs::read(entry.path()).unwrap();
        let header = String::from_utf8_lossy(&bytes[..bytes.iter().position(|b| *b == b'\n').unwrap()]).into_owned();
        let meta: serde_json::Value = serde_json::from_str(header.split_once(' ').map_or(&header, |(_, m)| m))
            .or_else(|_| serde_json::from_str(&header))
            .unwrap_or_default();
        let meta = if meta.get("meta").is_some() { &meta["meta"] } else { &meta };
        if header.contains(&format!("\"signal\":\"{signal}\"")) {
            items += meta["items"].as_u64().unwrap_or(0);
        }
    }
    items
}

#[test]
fn item_10_spooled_counts_match_the_disk_when_the_folder_goes_mid_run() {
    let d = scratch("audit-spool-gone");
    // `pi -p` to a collector that is down, spooling into `spool`, on faux `steps`; its stderr.
    let run = |spool: &Path, steps: serde_json::Value, env: &[(&str, &str)]| {
        let script = d.join("script.json");
        std::fs::write(&script, steps.to_string()).unwrap();
        let out = pi_in(&d)
            .args(["-p", "go", "--provider", "faux", "--no-session", "--otlp", &Receiver::down_endpoint()])
            .flag("--spool-dir", spool)
            .flag("--cwd", &d)
            .flag("--faux-script", &script)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // Batches go out every 50 ms; a tool removes the spool folder after the first ones were
    // written, and the run goes on (the rest are spooled at exit).
    let spool = d.join("spool");
    let err = run(
        &spool,
        serde_json::json!([
            {"text": "One.", "tools": [{"name": "bash", "arguments": {"command": "sleep 0.6"}}]},
            {"text": "Two.", "tools": [{"name": "bash", "arguments": {"command": format!("rm -rf {}", spool.display())}}]},
            {"text": "Done."}
        ]),
        &[("OTEL_BSP_SCHEDULE_DELAY", "50")],
    );
    let on_disk = spooled_items(&spool, "traces");
    assert!(on_disk > 0, "the folder was made again for the later batches: {err}");
    let claimed = count_before(&err, "pi: otlp:", "for the next run").expect("a spooled count");
    assert_eq!(claimed, on_disk, "the exit line's count is what the disk holds: {err}");
    assert!(err.contains("no longer in the spool folder"), "{err}");

    // A folder replaced by a file: nothing can be spooled, and nothing is said to be.
    let blocked = d.join("blocked");
    let err = run(
        &blocked,
        serde_json::json!([
            {"text": "One.", "tools": [{"name": "bash", "arguments": {"command": format!("rm -rf {b}; touch {b}", b = blocked.display())}}]},
            {"text": "Done."}
        ]),
        &[],
    );
    assert!(!err.contains("for the next run"), "{err}");
    assert!(err.contains("cannot write a batch"), "the reason is named: {err}");
    let lost = count_before(&err, "pi: otlp:", "not delivered").unwrap();
    assert!(lost > 0, "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn item_10_the_spans_line_names_the_last_error_of_traces() {
    let d = scratch("audit-last-error");
    let down = Receiver::down_endpoint();
    let out = pi_in(&d)
        .args(["-p", "go", "--provider", "faux", "--no-session", "--no-spool", "--otlp-logs", "--otlp", &down])
        .flag("--cwd", &d)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let line = err.lines().find(|l| l.starts_with("pi: otlp:")).expect("the otlp line");
    assert!(line.contains("/v1/traces"), "{line}");
    assert!(!line.contains("/v1/metrics") && !line.contains("/v1/logs"), "{line}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// A small tmpfs mounted on a fresh directory, unmounted when dropped; `None` (with the reason
/// printed) where this test cannot mount one (not root, no mount permission).
struct SmallFs(std::path::PathBuf);

impl SmallFs {
    fn mount(name: &str, size: &str) -> Option<SmallFs> {
        let dir = scratch(name);
        let out =
            Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"]).arg(&dir).output();
        match out {
            Ok(out) if out.status.success() => Some(SmallFs(dir)),
            Ok(out) => {
                eprintln!("skipped: cannot mount a tmpfs ({})", String::from_utf8_lossy(&out.stderr).trim());
                None
            }
            Err(e) => {
                eprintln!("skipped: no mount command ({e})");
                None
            }
        }
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn item_11_a_full_disk_keeps_whole_session_lines_and_every_writer_says_so() {
    let Some(fs) = SmallFs::mount("audit-disk-full", "48k") else { return };
    let d = scratch("audit-disk-full-work");
    let script = d.join("script.json");
    let turn =
        serde_json::json!({"text": "x".repeat(3000), "tools": [{"name": "bash", "arguments": {"command": "echo hi"}}]});
    let mut steps = vec![turn; 30];
    steps.push(serde_json::json!({"text": "done"}));
    std::fs::write(&script, serde_json::Value::Array(steps).to_string()).unwrap();
    let session = fs.0.join("s.jsonl");
    let out = pi_in(&d)
        .args(["-p", "go", "--provider", "faux"])
        .flag("--cwd", &d)
        .flag("--faux-script", &script)
        .flag("--session", &session)
        .flag("--events-jsonl", fs.0.join("events.jsonl"))
        .flag("--log-json", fs.0.join("log.jsonl"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_ne!(out.status.code(), Some(0), "{err}");
    // The session: whole lines only, each one JSON; the error says disk full.
    let text = std::fs::read_to_string(&session).unwrap();
    assert!(text.ends_with('\n'), "the session ends in half a line");
    for line in text.lines() {
        serde_json::from_str::<serde_json::Value>(line).expect("a whole JSON line");
    }
    let session_line = err.lines().find(|l| l.starts_with("pi: session:")).unwrap_or_else(|| panic!("{err}"));
    assert!(session_line.contains("disk full"), "{session_line}");
    // The events file and the log name the cause and what was lost.
    let events_line = err.lines().find(|l| l.starts_with("pi: events-jsonl:")).unwrap_or_else(|| panic!("{err}"));
    assert!(events_line.contains("not written") && events_line.contains("disk full"), "{events_line}");
    let log_line = err.lines().find(|l| l.starts_with("pi: log-json:")).unwrap_or_else(|| panic!("{err}"));
    assert!(log_line.contains("lost") && log_line.contains("disk full"), "{log_line}");
    std::fs::remove_dir_all(&d).unwrap();
}
