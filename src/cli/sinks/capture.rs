//! `--capture [SINK=]KIND[,KIND…]` and `--redact`: one content policy per sink.

use pi_observe::core::{ContentKind, ContentPolicy, Scrubber};

use crate::cli::CliError;
use crate::cli::args::ContentArgs;

/// A sink `--capture SINK=` can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sink {
    Events,
    Log,
    Json,
    Otlp,
    Sentry,
}

use Sink::{Events, Json, Log, Otlp, Sentry};

/// The sinks a `--capture` SINK word stands for (a sink or a group).
fn sink_group(word: &str) -> Option<&'static [Sink]> {
    Some(match word {
        "events" => &[Events],
        "log" => &[Log],
        "json" => &[Json],
        "otlp" => &[Otlp],
        "sentry" => &[Sentry],
        "local" => LOCAL,
        "remote" => &[Otlp, Sentry],
        "all" => &[Events, Log, Json, Otlp, Sentry],
        _ => return None,
    })
}

/// What a bare `--capture KINDS` applies to.
const LOCAL: &[Sink] = &[Events, Log, Json];

/// One content policy per sink, from `--capture [SINK=]KINDS` and `--redact` (which applies to
/// every sink). Sinks not named capture nothing.
#[derive(Debug, Clone)]
pub struct SinkPolicies {
    /// Safe-only, with the scrubber: for anything not a named sink.
    pub base: ContentPolicy,
    /// `--events-jsonl`.
    pub events: ContentPolicy,
    /// `--log-json`.
    pub log: ContentPolicy,
    /// `--mode json` on stdout.
    pub json: ContentPolicy,
    /// OTLP.
    pub otlp: ContentPolicy,
    /// Sentry.
    pub sentry: ContentPolicy,
}

impl SinkPolicies {
    fn sink_mut(&mut self, sink: Sink) -> &mut ContentPolicy {
        match sink {
            Events => &mut self.events,
            Log => &mut self.log,
            Json => &mut self.json,
            Otlp => &mut self.otlp,
            Sentry => &mut self.sentry,
        }
    }
}

/// `--capture` and `--redact` as one content policy per sink.
pub fn policies(args: &ContentArgs) -> Result<SinkPolicies, CliError> {
    let mut scrubber = Scrubber::default();
    for pattern in &args.redact {
        scrubber = scrubber.with_pattern(pattern).map_err(|e| CliError::Usage(format!("--redact: {e}")))?;
    }
    let base = ContentPolicy::default().scrubber(scrubber);
    let mut policies = SinkPolicies {
        events: base.clone(),
        log: base.clone(),
        json: base.clone(),
        otlp: base.clone(),
        sentry: base.clone(),
        base,
    };
    for value in &args.capture {
        let (sinks, kinds) = match value.split_once('=') {
            Some((sink, kinds)) => (
                sink_group(sink.trim()).ok_or_else(|| {
                    CliError::Usage(format!(
                        "--capture: unknown sink {:?} (expected events, log, json, otlp, sentry, local, remote or all)",
                        sink.trim()
                    ))
                })?,
                kinds,
            ),
            None => (LOCAL, value.as_str()),
        };
        let kinds = capture_kinds(kinds)?;
        for sink in sinks {
            let policy = policies.sink_mut(*sink);
            *policy = policy.clone().capture_kinds(kinds.iter().copied());
        }
    }
    Ok(policies)
}

/// `KIND[,KIND…]` or `all`; singular and plural spellings; an empty list is an error.
fn capture_kinds(list: &str) -> Result<Vec<ContentKind>, CliError> {
    let mut kinds = Vec::new();
    for word in list.split(',').map(str::trim) {
        match word {
            "" => return Err(CliError::Usage(format!("--capture: {list:?} has an empty kind"))),
            "all" => kinds.extend(ContentKind::ALL),
            other => kinds.push(ContentKind::parse(other).ok_or_else(|| {
                let known: Vec<_> = ContentKind::ALL.iter().map(|k| k.as_str()).collect();
                CliError::Usage(format!("--capture: unknown kind {other:?} (expected {} or all)", known.join(", ")))
            })?),
        }
    }
    Ok(kinds)
}
