//! `--capture [SINK=]KIND[,KIND…]`, `--redact` and their settings: one content policy per sink.

use pi_observe::core::{ContentKind, ContentPolicy, Scrubber};

use crate::cli::CliError;
use crate::cli::args::ContentArgs;
use crate::cli::config::Config;

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

/// True when the `--capture` value `value` sets what sink `name` (`events`, `log`, `json`,
/// `otlp`, `sentry`) captures — by name, by group, or as a bare value (`local`).
pub fn names_sink(value: &str, name: &str) -> bool {
    let sinks = match value.split_once('=') {
        Some((group, _)) => sink_group(group.trim()).unwrap_or(&[]),
        None => LOCAL,
    };
    sinks.iter().any(|s| s.name() == name)
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

impl Sink {
    const ALL: [Sink; 5] = [Events, Log, Json, Otlp, Sentry];

    /// The name `--capture SINK=` and `telemetry.sinks` use.
    fn name(self) -> &'static str {
        match self {
            Events => "events",
            Log => "log",
            Json => "json",
            Otlp => "otlp",
            Sentry => "sentry",
        }
    }
}

/// One content policy per sink. Per sink, the kinds are the settings files' `capture`, replaced
/// by the `--capture` flags that name the sink, then cut to the managed policy's cap (what a cap
/// removes is said once on stderr). Redaction rules add up: the built-in ones, every file's
/// `telemetry.redact`, and `--redact`.
pub fn policies(args: &ContentArgs, config: &Config) -> Result<SinkPolicies, CliError> {
    let mut scrubber = Scrubber::default();
    for (pattern, source) in config.redact_rules() {
        scrubber =
            scrubber.with_pattern(&pattern).map_err(|e| CliError::Usage(format!("{source}: telemetry.redact: {e}")))?;
    }
    for pattern in &args.redact {
        scrubber = scrubber.with_pattern(pattern).map_err(|e| CliError::Usage(format!("--redact: {e}")))?;
    }
    let mut kinds: [Vec<ContentKind>; 5] = Default::default();
    for (i, sink) in Sink::ALL.iter().enumerate() {
        if let Some((from_files, _)) = config.capture_in_files(sink.name())? {
            kinds[i] = from_files;
        }
    }
    let mut flagged = [false; 5];
    for value in &args.capture {
        let (sinks, list) = match value.split_once('=') {
            Some((sink, list)) => (
                sink_group(sink.trim()).ok_or_else(|| {
                    CliError::Usage(format!(
                        "--capture: unknown sink {:?} (expected events, log, json, otlp, sentry, local, remote or all)",
                        sink.trim()
                    ))
                })?,
                list,
            ),
            None => (LOCAL, value.as_str()),
        };
        let list = capture_kinds(list)?;
        for sink in sinks {
            let i = Sink::ALL.iter().position(|s| s == sink).unwrap_or_default();
            if !std::mem::replace(&mut flagged[i], true) {
                kinds[i].clear();
            }
            kinds[i].extend(list.iter().copied());
        }
    }
    for (i, sink) in Sink::ALL.iter().enumerate() {
        if let Some(cap) = config.capture_cap(sink.name())? {
            let removed: Vec<&str> = kinds[i].iter().filter(|k| !cap.contains(k)).map(|k| k.as_str()).collect();
            if !removed.is_empty() {
                let mut removed = removed;
                removed.dedup();
                config.notice(format!(
                    "the managed policy caps what the {} sink may capture: {} not captured",
                    sink.name(),
                    removed.join(", ")
                ));
            }
            kinds[i].retain(|k| cap.contains(k));
        }
    }
    let base = ContentPolicy::default().scrubber(scrubber);
    let policy = |i: usize| base.clone().capture_kinds(kinds[i].iter().copied());
    Ok(SinkPolicies { events: policy(0), log: policy(1), json: policy(2), otlp: policy(3), sentry: policy(4), base })
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

#[cfg(test)]
mod tests {
    use super::names_sink;

    #[test]
    fn a_capture_value_names_its_sinks_and_no_others() {
        assert!(names_sink("prompt", "log") && names_sink("prompt", "events") && names_sink("prompt", "json"));
        assert!(!names_sink("prompt", "otlp"), "a bare value is local only");
        assert!(names_sink("remote=prompt", "sentry") && !names_sink("remote=prompt", "log"));
        assert!(names_sink("events=prompt", "events") && !names_sink("events=prompt", "log"));
        assert!(names_sink("all=prompt", "otlp"));
        assert!(!names_sink("nope=prompt", "otlp"));
    }
}
