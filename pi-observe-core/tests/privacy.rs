//! Canary tests for the content policy: what each sink may see, checked on the serialized events
//! (what an exporter would write), for presence and absence.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::sync::Arc;

use pi_observe_core::testing::CaptureSubscriber;
use pi_observe_core::{
    ContentKind, ContentPolicy, FieldRef, ObsEvent, Observability, Payload, REDACTED, Redaction, Scrubber, Span, names,
    trace_operation_with,
};

const CANARY: &str = "CANARY-91b2";

/// One sample of every credential format the built-in scrubber knows, and the part of it that
/// must never be exported.
const SECRETS: &[(&str, &str)] = &[
    ("sk-proj-Zx81kLmN0pQrStUvWxYz12", "Zx81kLmN0pQrStUvWxYz12"),
    ("sk-ant-api03-Q9w8e7r6t5y4u3i2o1p0", "Q9w8e7r6t5y4u3i2o1p0"),
    ("AKIAZ7Q3K9D2M5N8P4R6", "AKIAZ7Q3K9D2M5N8P4R6"),
    ("ghp_R4nd0mT0k3nV4lu3F0rT3st1ngXyZ", "R4nd0mT0k3nV4lu3F0rT3st1ngXyZ"),
    ("github_pat_11AAAAAAA0abcdefghijklmnopqrstuv", "abcdefghijklmnopqrstuv"),
    ("xoxb-2222222222-SlackSecretValue", "SlackSecretValue"),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjYW5hcnkifQ.c2lnbmF0dXJlLXNlY3JldA", "c2lnbmF0dXJlLXNlY3JldA"),
    ("Authorization: Bearer tok.BearerSecret123", "BearerSecret123"),
    ("-----BEGIN PRIVATE KEY-----\nMIIPrivKeyBody\n-----END PRIVATE KEY-----", "MIIPrivKeyBody"),
    ("https://deploy:UrlPassw0rd@git.example.com/x.git", "UrlPassw0rd"),
    ("password=PlainPassw0rd", "PlainPassw0rd"),
    ("api_key: ApiKeyValue77", "ApiKeyValue77"),
];

fn all_secrets() -> String {
    SECRETS.iter().map(|(sample, _)| *sample).collect::<Vec<_>>().join(" | ")
}

fn loaded_text(kind: ContentKind) -> String {
    format!("{CANARY} {kind} {}", all_secrets())
}

fn payload() -> Payload {
    ContentKind::ALL
        .into_iter()
        .fold(Payload::new().safe(names::MODEL, "faux-1"), |p, kind| {
            p.content(kind, format!("field_{kind}"), loaded_text(kind))
        })
        .secret(names::API_KEY, "sk-live-NeverEverExport0001")
        .secret(names::AUTHORIZATION, CANARY)
}

#[derive(Debug)]
struct LeakyError(String);

impl std::fmt::Display for LeakyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Runs one failing provider request carrying every content kind, every secret format, and an
/// error message full of secrets, with three sinks of different width on one hub.
fn run() -> (String, String, String) {
    let hub = Observability::new();
    let default = CaptureSubscriber::new();
    let wide = CaptureSubscriber::new();
    let narrow = CaptureSubscriber::new();
    let _d = hub.subscribe(default.clone());
    let _w = hub.subscribe_with_policy(wide.clone(), ContentPolicy::default().capture_all());
    let _n = hub.subscribe_with_policy(narrow.clone(), ContentPolicy::default().capture(ContentKind::Prompt));
    let out = tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(hub.scope(trace_operation_with(
        names::PROVIDER_REQUEST,
        payload,
        |span: Span| async move {
            span.add_event(names::PROVIDER_FIRST_TOKEN, payload);
            span.record(payload);
            Err::<(), _>(LeakyError(format!("request failed: {}", all_secrets())))
        },
    )));
    assert!(out.is_err());
    let dump = |c: &CaptureSubscriber| c.take().iter().map(ObsEvent::to_json).collect::<Vec<_>>().join("\n");
    (dump(&default), dump(&wide), dump(&narrow))
}

fn assert_no_secret(sink: &str, dump: &str) {
    for (sample, secret) in SECRETS {
        assert!(!dump.contains(secret), "{sink}: secret from {sample:?} leaked:\n{dump}");
    }
    assert!(!dump.contains("NeverEverExport"), "{sink}: Secret-class field leaked");
    assert!(!dump.contains(names::API_KEY), "{sink}: Secret-class key exported");
}

#[test]
fn default_policy_sink_sees_no_content_and_no_secret() {
    let (default, _, _) = run();
    assert_no_secret("default", &default);
    assert!(!default.contains(CANARY), "content reached the default sink:\n{default}");
    assert!(default.contains("faux-1"), "safe fields must still arrive");
    assert!(!default.contains("request failed"), "error text is content: withheld by default");
    assert!(default.contains(r#""error":{"name":"LeakyError"}"#), "the error type still arrives:\n{default}");
}

#[test]
fn capture_all_sink_sees_every_content_kind_with_secrets_scrubbed() {
    let (_, wide, _) = run();
    assert_no_secret("wide", &wide);
    for kind in ContentKind::ALL {
        assert!(wide.contains(&format!("{CANARY} {kind}")), "wide sink misses {kind}");
    }
    assert!(wide.contains(REDACTED));
    // The secret-class authorization field carries the canary: even capture-all never exports it.
    assert!(!wide.contains(&format!("\"{}\"", names::AUTHORIZATION)));
}

#[test]
fn a_narrower_sink_gets_less_than_a_wider_one_in_the_same_run() {
    let (default, wide, narrow) = run();
    assert_no_secret("narrow", &narrow);
    assert!(narrow.contains(&format!("{CANARY} prompt")));
    for kind in ContentKind::ALL.into_iter().filter(|k| *k != ContentKind::Prompt) {
        assert!(!narrow.contains(&format!("{CANARY} {kind}")), "narrow sink got {kind}");
    }
    assert!(default.len() < narrow.len() && narrow.len() < wide.len());
}

#[test]
fn redaction_hooks_see_scrubbed_text_and_can_drop_or_rewrite() {
    let hub = Observability::new();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let policy = ContentPolicy::default()
        .capture_all()
        .scrubber(Scrubber::default().with_pattern(r"CUST-\d{4}").unwrap())
        .redactor(move |field: FieldRef<'_>, value: &str| {
            log.lock().unwrap().push(value.to_owned());
            match field.kind {
                ContentKind::FileContent => Redaction::Drop,
                _ => Redaction::Replace(value.replace("alice", "<user>")),
            }
        });
    let sink = CaptureSubscriber::new();
    let _s = hub.subscribe_with_policy(sink.clone(), policy);
    hub.in_scope(|| {
        pi_observe_core::trace_operation_sync(
            names::AGENT_TOOL_CALL,
            Payload::new()
                .content(ContentKind::ToolArgs, names::TOOL_ARGS, "alice CUST-1234 sk-abcdefghijklmnopqrstuv")
                .content(ContentKind::FileContent, names::FILE_CONTENT, "secret file"),
            |_| (),
        )
    });
    let events = sink.take();
    let args = events[0].payload.get(names::TOOL_ARGS).unwrap().as_str().unwrap();
    assert_eq!(args, format!("<user> {REDACTED} {REDACTED}"));
    assert!(events[0].payload.get(names::FILE_CONTENT).is_none());
    assert!(
        seen.lock().unwrap().iter().all(|v| !v.contains("CUST-1234") && !v.contains("sk-abc")),
        "hooks saw unscrubbed text"
    );
    assert!(hub.stats().fields_dropped >= 1);
}

#[test]
fn no_known_format_secret_survives_the_scrubber_wherever_it_sits() {
    let samples = pi_observe_core::testing::secret_samples();
    assert!(samples.len() >= 20);
    let mut cases = 0;
    for sample in &samples {
        for (placement, text) in pi_observe_core::testing::placements(sample) {
            let out = Scrubber::default().scrub(&text).into_owned();
            assert!(!out.contains(&sample.secret), "{} ({placement}) survived: {out}", sample.format);
            assert!(out.contains(REDACTED), "{} ({placement}): {out}", sample.format);
            cases += 1;
        }
    }
    assert!(cases >= 40, "{cases} cases");
}

#[test]
fn scrubber_rules_that_would_disable_scrubbing_are_refused() {
    for pattern in ["", "^", "a*", "(?:x)?", r"\b"] {
        let error = Scrubber::default().with_pattern(pattern).unwrap_err();
        assert!(error.to_string().contains("matches the empty string"), "{pattern:?}: {error}");
    }
    let error = Scrubber::default().with_pattern("(").unwrap_err();
    assert!(error.to_string().starts_with("pattern \"(\" is not a valid regex"), "{error}");
    // Two valid patterns that are too big together: an error naming them, never an empty set.
    let big = r"\w{60}[a-z]{60}\w{60}";
    let one = Scrubber::default().with_pattern(big);
    let error = match one.and_then(|s| s.with_pattern(&format!("{big}x"))) {
        Err(error) => error,
        Ok(scrubber) => {
            // Still fits: then every built-in rule must still work.
            assert_eq!(scrubber.scrub("ghp_abcdefghijklmnopqrstuvwxyz0123456789").as_ref(), REDACTED);
            return;
        }
    };
    assert!(error.to_string().contains(big), "{error}");
}

#[test]
fn ordinary_text_is_not_scrubbed() {
    for text in [
        "let token_count = 3;",
        r#"{"input_tokens": 12, "max_tokens": 100, "cacheWriteTokens": 0}"#,
        "a basic understanding of the bearer of bad news",
        "the desk-1234567890abcdefghij ticket",
        "fn secret_sauce() {}",
        "Task-abcdefghijklmnopqrstuvwxyz",
    ] {
        assert_eq!(Scrubber::default().scrub(text).as_ref(), text);
    }
}

#[test]
fn consecutive_escaped_secret_lines_are_each_scrubbed() {
    // A file of `NAME=value` lines inside a JSON string (a captured provider payload).
    let escaped =
        serde_json::to_string("DB_PASSWORD=first1\naws_secret_access_key = second2\nAPI_TOKEN=third3").unwrap();
    let out = Scrubber::default().scrub(&escaped).into_owned();
    for secret in ["first1", "second2", "third3"] {
        assert!(!out.contains(secret), "{secret} survived: {out}");
    }
    assert!(out.contains(r"aws_secret_access_key = [REDACTED]"), "{out}");
}
