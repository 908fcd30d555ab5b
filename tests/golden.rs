//! The product's outputs, held to committed copies (issue 25: the restructuring of the `pi`
//! binary must not change what a user sees): `pi demo`, `pi -p --mode json`, `pi observe status
//! --json` and `pi config --json`, each normalized for what legitimately differs between runs —
//! ids, times, durations, temporary paths, and the order of sibling spans that ran in parallel.
//!
//! After an intended change of output, regenerate with `PI_GOLDEN_UPDATE=1 cargo test --test
//! golden` and review the diff of `tests/golden/` like code.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod support;

use support::global_settings;

use support::Flag;

use std::path::Path;
use std::process::Command;

use regex::Regex;
use support::scratch;

/// Runs `cmd` (which must succeed) and returns its stdout.
fn stdout(mut cmd: Command) -> String {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// `text` with what differs between runs replaced by placeholders.
fn normalize(text: &str, dir: &Path) -> String {
    let mut text = text.replace(&dir.display().to_string(), "<dir>");
    let rules = [
        (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>"),
        (r"\b[0-9a-f]{32}\b", "<trace>"),
        (r"\b[0-9a-f]{16}\b", "<span>"),
        (r"\d{4}-\d\d-\d\dT\d\d[-:]\d\d[-:]\d\d[.-]\d{3}Z", "<time>"),
        (r#""(id|parentId|leafId|entryId|oldLeafId|newLeafId)":"[0-9a-f]{8}""#, r#""$1":"<entry>""#),
        // Times and durations, whatever the key: `timestamp`, `timeUnixNano`, `durationMs`,
        // `durationNs`, `timeToFirstTokenMs`, …
        (r#""([A-Za-z]*(?:[Tt]imestamp|[Dd]uration[A-Za-z]*|Ms|Ns|UnixNano))":[0-9.e+]+"#, r#""$1":<n>"#),
        (r"\b\d+(\.\d+)? ?(ms|µs|s)\b", "<dur>"),
    ];
    for (pattern, replacement) in rules {
        text = Regex::new(pattern).unwrap().replace_all(&text, replacement).into_owned();
    }
    text
}

/// The demo's span trees in a canonical order, and the children of every span too: users and
/// tools run in parallel, so their order is the order they happened to start or finish in.
fn canonical_trees(text: &str) -> String {
    fn depth(line: &str) -> usize {
        line.len() - line.trim_start().len()
    }
    /// The block starting at `lines[0]` (the line and everything indented deeper), sorted.
    fn blocks(lines: &[&str], at: usize) -> Vec<String> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < lines.len() {
            let mut end = i + 1;
            while end < lines.len() && depth(lines[end]) > at {
                end += 1;
            }
            let mut block = lines[i].to_owned();
            let mut children = blocks(&lines[i + 1..end], depth(lines.get(i + 1).copied().unwrap_or("")));
            children.sort();
            for child in children {
                block.push('\n');
                block.push_str(&child);
            }
            out.push(block);
            i = end;
        }
        out
    }
    // The users run at once: their traces come in the order they finished.
    let mut out = Vec::new();
    let mut traces = Vec::new();
    for paragraph in text.split("\n\n") {
        if paragraph.starts_with("trace ") {
            let lines: Vec<&str> = paragraph.lines().collect();
            traces.push(blocks(&lines, 0).join("\n"));
            continue;
        }
        if !traces.is_empty() {
            traces.sort();
            out.append(&mut traces);
        }
        out.push(paragraph.to_owned());
    }
    traces.sort();
    out.append(&mut traces);
    out.join("\n\n")
}

/// Print mode's JSON lines as two streams, each in its own order: the agent events, then the
/// contract records (printed by a sink as they are emitted, they interleave with the agent
/// events differently from run to run).
fn two_streams(text: &str) -> String {
    let (records, events): (Vec<&str>, Vec<&str>) =
        text.lines().partition(|line| line.starts_with(r#"{"type":"observability""#));
    format!("{}\n\n{}\n", events.join("\n"), records.join("\n"))
}

/// Compares `actual` with `tests/golden/NAME`, or writes it there with `PI_GOLDEN_UPDATE=1`.
fn golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    if std::env::var_os("PI_GOLDEN_UPDATE").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (PI_GOLDEN_UPDATE=1 writes it)", path.display()));
    if expected != actual {
        let first = expected.lines().zip(actual.lines()).position(|(e, a)| e != a);
        let line = first.unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
        panic!(
            "{name} differs from tests/golden/{name} at line {}:\n  expected: {:?}\n  actual:   {:?}",
            line + 1,
            expected.lines().nth(line).unwrap_or("<end>"),
            actual.lines().nth(line).unwrap_or("<end>")
        );
    }
}

/// `pi` in `dir`, with its agent directory there too.
fn pi_in(dir: &Path) -> Command {
    let mut cmd = support::pi();
    cmd.current_dir(dir).env("PI_CODING_AGENT_DIR", dir.join("agent"));
    cmd
}

#[test]
fn the_outputs_users_see_stay_what_they_are() {
    // Under /tmp wherever the temporary folder is: the working directory is in the system
    // prompt, whose length the faux provider counts in its tokens.
    let d = Path::new("/tmp").join(format!("pi-golden-{}", pi_observe::core::SpanId::random()));
    std::fs::create_dir_all(&d).unwrap();
    // The offline demo: replies, span trees, the cost table, where it wrote. Its folder's path
    // has the same length wherever the temporary folder is (tool output quotes it, and the faux
    // provider counts its tokens).
    let demo_dir = Path::new("/tmp").join(format!("pi-golden-demo-{}", pi_observe::core::SpanId::random()));
    let mut demo = pi_in(&d);
    demo.arg("demo").arg("--dir").arg(&demo_dir);
    let shown = stdout(demo).replace(&demo_dir.display().to_string(), "<demo>");
    golden("demo.txt", &canonical_trees(&normalize(&shown, &d)));
    let _ = std::fs::remove_dir_all(&demo_dir);

    // Print mode's JSON lines: agent events and contract records of a tool-calling prompt.
    let script = d.join("script.json");
    std::fs::write(
        &script,
        r#"[{"text": "Checking.", "tools": [{"name": "ls", "arguments": {}}]}, {"text": "All good."}]"#,
    )
    .unwrap();
    std::fs::write(d.join("a.txt"), "a\n").unwrap();
    let mut print = pi_in(&d);
    print
        .args(["-p", "check", "--provider", "faux", "--mode", "json", "--user", "u1", "--org", "o1"])
        .flag("--faux-script", &script)
        .flag("--session", d.join("s.jsonl"));
    golden("print-json.txt", &two_streams(&normalize(&stdout(print), &d)));

    // What the last run left for `pi observe status`, and the effective configuration.
    let mut status = pi_in(&d);
    status.args(["observe", "status", "--json"]);
    golden("observe-status.json", &normalize(&stdout(status), &d));
    let mut config = pi_in(&d);
    config.args(["config", "--json"]);
    golden("config.json", &normalize(&stdout(config), &d));
    std::fs::remove_dir_all(&d).unwrap();
}

/// Runs `cmd` (whatever its exit) and returns "exit N", its stdout and its stderr.
fn everything(mut cmd: Command) -> String {
    let out = cmd.output().unwrap();
    format!(
        "exit {}\n--- stdout\n{}--- stderr\n{}",
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn every_sink_says_what_it_said() {
    let d = scratch("golden-sinks");
    // Every sink on, from each kind of source: flags, variables and a settings file; the remote
    // ones point at a closed loopback port so what they report does not depend on a backend.
    global_settings(
        &d,
        r#"{"telemetry": {"sinks": {"events": {"path": "events.jsonl", "capture": ["prompt"]},
            "otlp": {"conventions": "both", "metricDims": ["orgId", "userId"]},
            "sentry": {"environment": "golden", "sampleRate": 1}},
            "spool": {"maxBytes": 1048576}}}"#,
    );
    let sinks = |cmd: &mut Command| {
        cmd.args(["--otlp", "http://127.0.0.1:9/", "--otlp-header", "x-team=golden", "--log-json"])
            .arg(d.join("log.jsonl"))
            .args(["--capture", "otlp=prompt,completion", "--redact", "golden-[0-9]+"])
            .env("SENTRY_DSN", "http://public@127.0.0.1:9/42")
            .env("OTEL_EXPORTER_OTLP_TIMEOUT", "300")
            .env("PI_SPOOL_DIR", d.join("spool"));
    };
    let mut print = pi_in(&d);
    print.args(["-p", "check", "--provider", "faux", "--user", "u1", "--org", "o1"]);
    sinks(&mut print);
    let mut shown = normalize(&everything(print), &d);
    for verb in [
        &["observe", "status", "--json"][..],
        &["observe", "status"],
        &["config", "--json"],
        &["observe", "flush"],
        &["observe", "test"],
        &["observe", "canary"],
    ] {
        let mut cmd = pi_in(&d);
        cmd.args(verb);
        sinks(&mut cmd);
        shown.push_str(&format!("\n=== pi {}\n", verb.join(" ")));
        shown.push_str(&normalize(&everything(cmd), &d));
    }
    // The spool's size in bytes depends on the length of the times written in it.
    let bytes = Regex::new(r#"("bytes":|bytes +)\d+"#).unwrap();
    let shown = bytes.replace_all(&shown, "$1<n>");
    golden("sinks.txt", &shown);
    std::fs::remove_dir_all(&d).unwrap();
}
