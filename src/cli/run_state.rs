//! The last run's telemetry counters, kept in a small file in the agent directory
//! (`observe-state.json`) so `pi observe status` can say what happened after the process is
//! gone. Written atomically (temporary file, rename) by every command that had sinks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use pi_observe::core::{DropReason, StatsSnapshot};
use pi_observe::spool::{SpoolDelivery, SpoolStats};
use serde::{Deserialize, Serialize};

/// The state file's name in the agent directory.
pub const STATE_FILE: &str = "observe-state.json";

/// The state file: `<agent dir>/observe-state.json`.
pub fn state_path() -> Option<PathBuf> {
    crate::cli::paths::agent_dir().map(|d| d.join(STATE_FILE))
}

/// What one run's telemetry did.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RunState {
    /// The format's version.
    pub version: u32,
    /// When the run finished (UTC, ISO 8601).
    pub finished_at: String,
    /// The command (`print`, `export`, `demo`).
    pub command: String,
    /// The hub: every record, before the sinks.
    pub hub: HubCounters,
    /// Each sink that keeps counters (`otlp`, `sentry`), by name, when it was on.
    #[serde(flatten)]
    pub sinks: BTreeMap<String, serde_json::Value>,
    /// The spool, when the run wrote to it or delivered from it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spool: Option<SpoolCounters>,
}

/// The hub's counters.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HubCounters {
    pub emitted: u64,
    pub delivered_to_subscribers: u64,
    pub dropped: BTreeMap<String, u64>,
    pub fields_withheld: u64,
    pub fields_redacted: u64,
    pub fields_dropped: u64,
    pub fields_truncated: u64,
    pub subscriber_panics: u64,
    pub subscriber_errors: u64,
    pub redactor_failures: u64,
    pub payload_failures: u64,
}

/// What the run did with the spool, in batches.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SpoolCounters {
    pub spooled: u64,
    pub delivered: u64,
    pub dropped_full: u64,
    pub dropped_expired: u64,
    pub rejected: u64,
    pub unreadable: u64,
    pub write_failed: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_delivery_error: Option<String>,
}

impl HubCounters {
    pub fn of(stats: &StatsSnapshot) -> Self {
        HubCounters {
            emitted: stats.emitted,
            delivered_to_subscribers: stats.delivered,
            dropped: DropReason::ALL
                .iter()
                .map(|r| (r.as_str().to_owned(), stats.dropped(*r)))
                .filter(|(_, n)| *n > 0)
                .collect(),
            fields_withheld: stats.fields_withheld,
            fields_redacted: stats.fields_redacted,
            fields_dropped: stats.fields_dropped,
            fields_truncated: stats.fields_truncated,
            subscriber_panics: stats.subscriber_panics,
            subscriber_errors: stats.subscriber_errors,
            redactor_failures: stats.redactor_failures,
            payload_failures: stats.payload_failures,
        }
    }
}

impl SpoolCounters {
    /// The sum over the sinks' spools (each sink has its own handle on the same directory).
    pub fn of(stats: &[SpoolStats], deliveries: &[SpoolDelivery]) -> Option<Self> {
        if stats.is_empty() {
            return None;
        }
        let sum = |f: fn(&SpoolStats) -> u64| stats.iter().map(f).sum();
        Some(SpoolCounters {
            spooled: sum(|s| s.spooled_batches),
            delivered: sum(|s| s.delivered_batches),
            dropped_full: sum(|s| s.dropped_full_batches),
            dropped_expired: sum(|s| s.dropped_expired_batches),
            rejected: sum(|s| s.rejected_batches),
            unreadable: sum(|s| s.unreadable),
            write_failed: sum(|s| s.write_failed),
            last_delivery_error: deliveries.iter().find_map(|d| d.last_error.clone()),
        })
    }
}

impl RunState {
    /// The current format version.
    pub const VERSION: u32 = 1;

    /// Writes the state to `path` atomically; a failure is returned (the caller warns).
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension(format!("json.{}.tmp", std::process::id()));
        let json = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(&tmp, json).and_then(|()| std::fs::rename(&tmp, path)).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
    }

    /// Reads the state at `path`: `Ok(None)` when there is none yet; a malformed file is an
    /// error naming it.
    pub fn load(path: &Path) -> Result<Option<RunState>, String> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| format!("{}: not a pi state file ({e})", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }
}
