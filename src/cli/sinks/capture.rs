//! `--capture [SINK=]KIND[,KIND…]`, `--redact` and their settings: one content policy per sink.

use pi_observe::core::{ContentKind, ContentPolicy, Scrubber};

use super::flags::ContentArgs;
use crate::cli::CliError;
use crate::cli::config::Config;

use super::sink::SinkKind;

/// The sinks a `--capture` SINK word stands for: a sink's name, or a group (`local`, `remote`,
/// `all`).
fn sink_group(word: &str, sinks: &'static [SinkKind]) -> Option<Vec<&'static SinkKind>> {
    let group: Vec<&'static SinkKind> = match word {
        "local" => sinks.iter().filter(|k| !k.remote).collect(),
        "remote" => sinks.iter().filter(|k| k.remote).collect(),
        "all" => sinks.iter().collect(),
        name => sinks.iter().filter(|k| k.name == name).collect(),
    };
    (!group.is_empty()).then_some(group)
}

/// The sinks a `--capture` value applies to, and its list of kinds: `SINK=KINDS`, or a bare
/// `KINDS` for the local sinks (opting in for a local audit file never ships content away).
fn split<'v>(value: &'v str, sinks: &'static [SinkKind]) -> Result<(Vec<&'static SinkKind>, &'v str), String> {
    match value.split_once('=') {
        Some((word, list)) => match sink_group(word.trim(), sinks) {
            Some(group) => Ok((group, list)),
            None => {
                let names: Vec<&str> = sinks.iter().map(|k| k.name).collect();
                Err(format!(
                    "--capture: unknown sink {:?} (expected {}, local, remote or all)",
                    word.trim(),
                    names.join(", ")
                ))
            }
        },
        None => Ok((sink_group("local", sinks).unwrap_or_default(), value)),
    }
}

/// True when the `--capture` value `value` sets what sink `name` (one of `sinks`) captures — by
/// name, by group, or as a bare value (`local`).
pub fn names_sink(value: &str, name: &str, sinks: &'static [SinkKind]) -> bool {
    split(value, sinks).is_ok_and(|(named, _)| named.iter().any(|k| k.name == name))
}

/// One content policy per sink, from `--capture [SINK=]KINDS` and `--redact` (which applies to
/// every sink). Sinks not named capture nothing.
#[derive(Debug, Clone)]
pub struct SinkPolicies {
    /// Safe-only, with the scrubber: for anything not a named sink.
    pub base: ContentPolicy,
    /// Each sink's, by name, in the order of the list of sinks.
    by_sink: Vec<(&'static str, ContentPolicy)>,
}

impl SinkPolicies {
    /// The policy of the sink `name` (the base policy for a name no sink has).
    pub fn of(&self, name: &str) -> &ContentPolicy {
        self.by_sink.iter().find(|(n, _)| *n == name).map_or(&self.base, |(_, p)| p)
    }
}

/// One content policy per sink. Per sink, the kinds are the settings files' `capture`, replaced
/// by the `--capture` flags that name the sink, then cut to the managed policy's cap (what a cap
/// removes is said once on stderr). Redaction rules add up: the built-in ones, every file's
/// `telemetry.redact`, and `--redact`.
pub fn policies(args: &ContentArgs, config: &Config, sinks: &'static [SinkKind]) -> Result<SinkPolicies, CliError> {
    let mut scrubber = Scrubber::default();
    for (pattern, source) in config.redact_rules() {
        scrubber =
            scrubber.with_pattern(&pattern).map_err(|e| CliError::Usage(format!("{source}: telemetry.redact: {e}")))?;
    }
    for pattern in &args.redact {
        scrubber = scrubber.with_pattern(pattern).map_err(|e| CliError::Usage(format!("--redact: {e}")))?;
    }
    let mut kinds: Vec<(&'static str, Vec<ContentKind>)> = Vec::new();
    for kind in sinks {
        let from_files = config.capture_in_files(kind.name)?.map(|(kinds, _)| kinds).unwrap_or_default();
        kinds.push((kind.name, from_files));
    }
    let mut flagged: Vec<&str> = Vec::new();
    for value in &args.capture {
        let (named, list) = split(value, sinks).map_err(CliError::Usage)?;
        let list = capture_kinds(list)?;
        for sink in named {
            let Some((_, captured)) = kinds.iter_mut().find(|(name, _)| *name == sink.name) else { continue };
            if !flagged.contains(&sink.name) {
                flagged.push(sink.name);
                captured.clear();
            }
            captured.extend(list.iter().copied());
        }
    }
    for (name, captured) in &mut kinds {
        if let Some(cap) = config.capture_cap(name)? {
            let mut removed: Vec<&str> = captured.iter().filter(|k| !cap.contains(k)).map(|k| k.as_str()).collect();
            if !removed.is_empty() {
                removed.dedup();
                config.notice(format!(
                    "the managed policy caps what the {name} sink may capture: {} not captured",
                    removed.join(", ")
                ));
            }
            captured.retain(|k| cap.contains(k));
        }
    }
    let base = ContentPolicy::default().scrubber(scrubber);
    let by_sink = kinds.into_iter().map(|(name, kinds)| (name, base.clone().capture_kinds(kinds))).collect();
    Ok(SinkPolicies { base, by_sink })
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
