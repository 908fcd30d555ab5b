//! The settings keys read outside the sinks (each sink declares its own next to its settings
//! type), each a [`Key`]: its path for messages and `pi config`, and its typed read.

use super::Key;
use crate::cli::settings::{Ratio, SamplerName};

/// `defaultProvider`.
pub const DEFAULT_PROVIDER: Key<String> = Key { path: &["defaultProvider"], read: |f| f.doc.default_provider.clone() };

/// `defaultModel`.
pub const DEFAULT_MODEL: Key<String> = Key { path: &["defaultModel"], read: |f| f.doc.default_model.clone() };

/// `sessionDir`: where new sessions are written.
pub const SESSION_DIR: Key<String> = Key { path: &["sessionDir"], read: |f| f.doc.session_dir.clone() };

/// `extensions.onLoadError`: `"stop"` (the default) or `"warn"`.
pub const EXTENSIONS_ON_LOAD_ERROR: Key<crate::cli::settings::OnLoadError> =
    Key { path: &["extensions", "onLoadError"], read: |f| f.doc.extensions.as_ref()?.on_load_error };

/// `telemetry.traceDetail`: `"storage"` traces session storage as spans.
pub const TRACE_DETAIL: Key<crate::cli::settings::TraceDetail> =
    Key { path: &["telemetry", "traceDetail"], read: |f| f.doc.telemetry.as_ref()?.trace_detail };

/// `telemetry.metrics.dimensions`: what metrics are split by.
pub const METRIC_DIMENSIONS: Key<Vec<String>> = Key {
    path: &["telemetry", "metrics", "dimensions"],
    read: |f| f.doc.telemetry.as_ref()?.metrics.as_ref()?.dimensions.clone(),
};

/// `telemetry.sampler`: the trace sampler (below `OTEL_TRACES_SAMPLER[_ARG]`).
pub mod sampler {
    use super::*;

    /// `telemetry.sampler.name`.
    pub const NAME: Key<SamplerName> =
        Key { path: &["telemetry", "sampler", "name"], read: |f| f.doc.telemetry.as_ref()?.sampler.as_ref()?.name };

    /// `telemetry.sampler.arg`: a ratio (0..1).
    pub const ARG: Key<f64> = Key {
        path: &["telemetry", "sampler", "arg"],
        read: |f| f.doc.telemetry.as_ref()?.sampler.as_ref()?.arg.map(|Ratio(arg)| arg),
    };
}

/// `telemetry.spool`: where undelivered batches wait (below `PI_SPOOL_*` and `--spool-dir`).
pub mod spool {
    use super::*;
    use crate::cli::settings::{Count, Number, SettingsFile, Spool};

    fn spool(file: &SettingsFile) -> Option<&Spool> {
        file.doc.telemetry.as_ref()?.spool.as_ref()
    }

    /// `telemetry.spool.enabled`.
    pub const ENABLED: Key<bool> = Key { path: &["telemetry", "spool", "enabled"], read: |f| spool(f)?.enabled };

    /// `telemetry.spool.dir`.
    pub const DIR: Key<String> = Key { path: &["telemetry", "spool", "dir"], read: |f| spool(f)?.dir.clone() };

    /// `telemetry.spool.maxBytes`.
    pub const MAX_BYTES: Key<u64> =
        Key { path: &["telemetry", "spool", "maxBytes"], read: |f| spool(f)?.max_bytes.map(|Count(n)| n) };

    /// `telemetry.spool.maxAgeDays`.
    pub const MAX_AGE_DAYS: Key<f64> =
        Key { path: &["telemetry", "spool", "maxAgeDays"], read: |f| spool(f)?.max_age_days.map(|Number(n)| n) };
}
