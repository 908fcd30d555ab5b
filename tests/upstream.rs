//! Session files written by upstream pi, read as they are: format v1 (linear, no ids), v2
//! (`hookMessage`) and v3 with every message role and entry type of upstream's
//! `session-format.md`, timestamps with offsets, and entries this version does not know. The
//! fixtures under `tests/fixtures/upstream/` are our own text in upstream's shape; the totals
//! below are counted by hand from them.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::{pi, scratch};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upstream").join(name)
}

/// (turns, input, output, cacheRead, cacheWrite, totalTokens, cost) over all rows of
/// `pi report --format json`.
fn report_totals(path: &Path) -> (u64, u64, u64, u64, u64, u64, f64) {
    let out = pi().args(["report", "--format", "json"]).arg(path).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let sum = |k: &str| rows.iter().map(|r| r[k].as_u64().unwrap()).sum::<u64>();
    let cost = rows.iter().map(|r| r["costUsd"].as_f64().unwrap()).sum::<f64>();
    (sum("turns"), sum("input"), sum("output"), sum("cacheRead"), sum("cacheWrite"), sum("totalTokens"), cost)
}

/// Hand counts: v3 has four assistant messages on two branches (1200/300/800/0 $0.0120,
/// 150/90/2000/100 $0.0030, 400/200/0/300 $0.0050, 50/25/0/0 $0.0005); v2 one (10/5, $0.001);
/// v1 two (20/10 $0.002, 30/20 $0.003).
const V3: (u64, u64, u64, u64, u64, u64, f64) = (4, 1800, 615, 2800, 400, 5615, 0.0205);
const V2: (u64, u64, u64, u64, u64, u64, f64) = (1, 10, 5, 0, 0, 15, 0.001);
const V1: (u64, u64, u64, u64, u64, u64, f64) = (2, 50, 30, 0, 0, 80, 0.005);

fn assert_totals(got: (u64, u64, u64, u64, u64, u64, f64), want: (u64, u64, u64, u64, u64, u64, f64)) {
    assert_eq!((got.0, got.1, got.2, got.3, got.4, got.5), (want.0, want.1, want.2, want.3, want.4, want.5));
    assert!((got.6 - want.6).abs() < 1e-9, "cost {} != {}", got.6, want.6);
}

#[test]
fn report_counts_every_version_as_a_hand_count_does() {
    assert_totals(report_totals(&fixture("v3-full.jsonl")), V3);
    assert_totals(report_totals(&fixture("v2.jsonl")), V2);
    assert_totals(report_totals(&fixture("v1.jsonl")), V1);
    // Days are UTC days, also for timestamps written with an offset.
    let out = pi().args(["report", "--format", "json"]).arg(fixture("v3-full.jsonl")).output().unwrap();
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let days: Vec<&str> = rows.iter().map(|r| r["day"].as_str().unwrap()).collect();
    assert_eq!(days, ["2024-12-03", "2024-12-04"]);
}

/// (provider requests, input tokens, cost) of the replayed `pi.ai.provider.request` spans.
fn export_totals(path: &Path, dir: &Path) -> (usize, u64, f64, Vec<String>, String) {
    let events = dir.join(format!("{}.events.jsonl", path.file_stem().unwrap().to_string_lossy()));
    let _ = std::fs::remove_file(&events);
    let out = pi().arg("export").arg(path).arg("--events-jsonl").arg(&events).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut requests = 0;
    let (mut input, mut cost, mut spans) = (0, 0.0, Vec::new());
    for line in std::fs::read_to_string(&events).unwrap().lines() {
        let event: Value = serde_json::from_str(line).unwrap();
        if event["type"] == "start" {
            spans.push(event["spanId"].as_str().unwrap().to_owned());
        }
        if event["type"] == "end" && event["name"] == "pi.ai.provider.request" {
            requests += 1;
            input += event["payload"]["inputTokens"].as_u64().unwrap();
            cost += event["payload"]["costTotal"].as_f64().unwrap();
        }
    }
    (requests, input, cost, spans, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn export_replays_every_version_with_the_hand_counted_usage_and_stable_ids() {
    let d = scratch("upstream-export");
    for (name, (turns, input, cost)) in
        [("v3-full.jsonl", (4, 1800, 0.0205)), ("v2.jsonl", (1, 10, 0.001)), ("v1.jsonl", (2, 50, 0.005))]
    {
        let (requests, got_input, got_cost, spans, stderr) = export_totals(&fixture(name), &d);
        assert_eq!((requests, got_input), (turns, input), "{name}");
        assert!((got_cost - cost).abs() < 1e-9, "{name}: {got_cost}");
        // A v1 file gets its ids in memory the same way every time: a second export is the same.
        let (_, _, _, again, _) = export_totals(&fixture(name), &d);
        assert_eq!(spans, again, "{name}: replay ids are deterministic");
        if name == "v3-full.jsonl" {
            assert!(stderr.contains("kept 2 entries this version does not understand"), "{stderr}");
        }
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn resuming_a_v3_file_appends_and_leaves_every_existing_byte_as_it_was() {
    let d = scratch("upstream-resume-v3");
    let session = d.join("s.jsonl");
    std::fs::copy(fixture("v3-full.jsonl"), &session).unwrap();
    let before = std::fs::read(&session).unwrap();
    let out = pi().args(["-p", "continue", "--tools", "none", "--session"]).arg(&session).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let after = std::fs::read(&session).unwrap();
    assert!(after.starts_with(&before), "the existing lines are untouched, unknown ones included");
    let appended: Vec<Value> =
        String::from_utf8_lossy(&after[before.len()..]).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(appended[0]["parentId"], "10000014", "the new entries continue from the last entry");
    let (turns, input, ..) = report_totals(&session);
    assert_eq!(turns, V3.0 + 1);
    assert!(input >= V3.1);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn resuming_a_v1_or_v2_file_migrates_it_to_v3_as_upstream_does_keeping_every_field() {
    let d = scratch("upstream-resume-old");
    for (name, totals) in [("v1.jsonl", V1), ("v2.jsonl", V2)] {
        let session = d.join(name);
        std::fs::copy(fixture(name), &session).unwrap();
        let out = pi().args(["-p", "continue", "--tools", "none", "--session"]).arg(&session).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(stderr.contains("migrated to v3"), "{stderr}");
        let lines: Vec<Value> =
            std::fs::read_to_string(&session).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines[0]["version"], 3);
        assert!(lines[1..].iter().all(|e| e["id"].is_string()), "every entry has an id");
        let original: Vec<Value> =
            std::fs::read_to_string(fixture(name)).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        for (old, new) in original.iter().zip(&lines).skip(1) {
            // Every field kept (a v1 compaction's index became an id; hookMessage became custom).
            for (key, value) in old.as_object().unwrap() {
                match key.as_str() {
                    "firstKeptEntryIndex" => assert_eq!(new["firstKeptEntryId"], lines[3]["id"]),
                    "message" if value["role"] == "hookMessage" => assert_eq!(new["message"]["role"], "custom"),
                    _ => assert_eq!(&new[key], value, "{name}: {key}"),
                }
            }
        }
        let (turns, ..) = report_totals(&session);
        assert_eq!(turns, totals.0 + 1, "{name}: old usage still counted, plus the new turn");
        // A second resume finds a v3 file: nothing more to migrate.
        let out = pi().args(["-p", "again", "--tools", "none", "--session"]).arg(&session).output().unwrap();
        assert!(!String::from_utf8_lossy(&out.stderr).contains("migrated"));
    }
    std::fs::remove_dir_all(&d).unwrap();
}
