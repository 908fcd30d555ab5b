//! Sentry settings from code and the environment (`SENTRY_DSN`, `SENTRY_ENVIRONMENT`,
//! `SENTRY_RELEASE`, `SENTRY_TRACES_SAMPLE_RATE`); code wins.

use std::sync::Arc;
use std::time::Duration;

pub use pi_observe_core::ConfigError;

/// Everything the Sentry subscriber needs.
#[derive(Clone, Default)]
pub struct SentryConfig {
    /// The DSN (`https://KEY@HOST/PROJECT`).
    pub dsn: Option<String>,
    /// Where `dsn` came from, for error messages (`--sentry`, `SENTRY_DSN`, …).
    pub dsn_source: Option<String>,
    /// `environment` of every event.
    pub environment: Option<String>,
    /// `release` of every event.
    pub release: Option<String>,
    /// Fraction of traces sent as transactions (1.0 = all); error events are always sent.
    pub traces_sample_rate: Option<f64>,
    /// Attribution keys that become tags (default: every key but `userId`, which is the user).
    pub tag_keys: Option<Vec<String>>,
    /// Items the Sentry client queues before dropping (its transport queue; default 30).
    pub queue_capacity: Option<usize>,
    /// Longest one envelope upload may take (default 10 s), so a silent server cannot hold the
    /// transport forever.
    pub request_timeout: Option<Duration>,
    /// Transport override (tests use `sentry::test::TestTransport`).
    pub transport: Option<Arc<dyn sentry::TransportFactory>>,
    /// Where envelopes that could not be delivered are kept for a later run (`None`: they are
    /// counted as not delivered). Envelopes spooled by earlier runs for this DSN's project are
    /// delivered in the background when the subscriber starts.
    pub spool: Option<pi_observe_spool::SpoolConfig>,
    /// With a spool, how long shutdown waits for the server before spooling what is left
    /// (default 200 ms).
    pub exit_patience: Option<Duration>,
    /// A backfill (`pi export`): the caller can wait, so a full queue holds the caller back
    /// until there is room instead of dropping the envelope, and a server that has not
    /// answered its first envelope within [`FIRST_ANSWER_PATIENCE`](crate::FIRST_ANSWER_PATIENCE)
    /// (100 ms for a loopback server) is taken as stalled: that envelope and the ones after it
    /// for a while are spooled (or, without a spool, counted as not delivered) without trying.
    pub backfill: bool,
}

impl std::fmt::Debug for SentryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentryConfig")
            .field("dsn_set", &self.dsn.is_some())
            .field("environment", &self.environment)
            .field("release", &self.release)
            .field("traces_sample_rate", &self.traces_sample_rate)
            .field("tag_keys", &self.tag_keys)
            .field("spool", &self.spool)
            .finish()
    }
}

impl SentryConfig {
    /// Fills what code left unset from `var` (the process environment in [`SentryConfig::from_env`]).
    pub fn with_env(mut self, var: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |name: &str| var(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        if self.dsn.is_none() {
            self.dsn = get("SENTRY_DSN");
            self.dsn_source = self.dsn.as_ref().map(|_| "SENTRY_DSN".to_owned());
        }
        self.environment = self.environment.or_else(|| get("SENTRY_ENVIRONMENT"));
        self.release = self.release.or_else(|| get("SENTRY_RELEASE"));
        if self.traces_sample_rate.is_none()
            && let Some(rate) = get("SENTRY_TRACES_SAMPLE_RATE")
        {
            self.traces_sample_rate = Some(parse_rate("SENTRY_TRACES_SAMPLE_RATE", &rate)?);
        }
        self.validate()?;
        Ok(self)
    }

    /// [`SentryConfig::with_env`] on the process environment.
    pub fn from_env(self) -> Result<Self, ConfigError> {
        self.with_env(|name| std::env::var(name).ok())
    }

    fn dsn_setting(&self) -> String {
        self.dsn_source.clone().unwrap_or_else(|| "dsn".to_owned())
    }

    /// Checks the DSN and the sample rate.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let Some(dsn) = &self.dsn else {
            return Err(ConfigError {
                setting: "SENTRY_DSN".into(),
                message: "no DSN: pass --sentry DSN or set SENTRY_DSN".into(),
            });
        };
        dsn.parse::<sentry::types::Dsn>().map_err(|e| ConfigError {
            setting: self.dsn_setting(),
            message: format!("not a Sentry DSN ({e}); expected https://KEY@HOST/PROJECT"),
        })?;
        if let Some(rate) = self.traces_sample_rate
            && !(0.0..=1.0).contains(&rate)
        {
            return Err(ConfigError {
                setting: "traces_sample_rate".into(),
                message: format!("{rate} is not in 0..1"),
            });
        }
        Ok(())
    }

    /// The envelope URL of the DSN's project (no key), e.g. for display.
    pub fn envelope_url(&self) -> Option<String> {
        let dsn = self.dsn.as_deref()?.parse::<sentry::types::Dsn>().ok()?;
        Some(dsn.envelope_api_url().to_string())
    }

    /// The checked DSN.
    fn parsed_dsn(&self) -> Result<sentry::types::Dsn, ConfigError> {
        self.validate()?;
        self.dsn
            .as_deref()
            .and_then(|d| d.parse::<sentry::types::Dsn>().ok())
            .ok_or_else(|| ConfigError { setting: self.dsn_setting(), message: "not a Sentry DSN".into() })
    }

    /// The per-envelope timeout.
    pub(crate) fn timeout(&self) -> Duration {
        self.request_timeout.unwrap_or(Duration::from_secs(10))
    }

    pub(crate) fn client_options(
        &self,
        counters: Arc<crate::transport::DeliveryCounters>,
        spool: Option<Arc<pi_observe_spool::Spool>>,
        handle: Arc<crate::transport::TransportHandle>,
    ) -> Result<sentry::ClientOptions, ConfigError> {
        self.validate()?;
        let dsn = self.dsn.as_deref().and_then(|d| d.parse::<sentry::types::Dsn>().ok());
        let mut options = sentry::ClientOptions::new()
            // Transactions are built and sampled here; errors always go out.
            .traces_sample_rate(1.0)
            .sample_rate(1.0)
            .default_integrations(false)
            .send_default_pii(false)
            .shutdown_timeout(Duration::from_secs(2));
        options.dsn = dsn;
        options.environment = self.environment.clone().map(Into::into);
        options.release = self.release.clone().map(Into::into);
        options.transport_channel_capacity = self.queue_capacity.and_then(std::num::NonZeroUsize::new);
        options.transport = Some(match &self.transport {
            Some(transport) => transport.clone(),
            None => Arc::new(crate::transport::CountingHttp {
                timeout: self.timeout(),
                counters,
                spool,
                exit_patience: self.exit_patience.unwrap_or(Duration::from_millis(200)),
                backfill: self.backfill,
                handle,
            }),
        });
        Ok(options)
    }
}

/// Delivers what earlier runs spooled for `config`'s project now, until `deadline`, one try
/// per envelope; the first that fails for a retryable reason ends the pass. Blocks the calling
/// thread (which may be inside an async runtime).
pub fn deliver_spooled(
    config: &SentryConfig,
    spool: &pi_observe_spool::Spool,
    deadline: std::time::Instant,
) -> Result<pi_observe_spool::SpoolDelivery, ConfigError> {
    config.validate()?;
    let dsn = config
        .dsn
        .as_deref()
        .and_then(|d| d.parse::<sentry::types::Dsn>().ok())
        .ok_or_else(|| ConfigError { setting: config.dsn_setting(), message: "not a Sentry DSN".into() })?;
    Ok(crate::transport::deliver_spooled(&dsn, config.timeout(), spool, deadline))
}

/// Sends one probe transaction (`pi.observe.probe`, in `trace_id`) to `config`'s project, once
/// (`pi observe test`).
pub fn probe(
    config: &SentryConfig,
    trace_id: pi_observe_core::TraceId,
) -> Result<pi_observe_core::ProbeOutcome, ConfigError> {
    Ok(crate::transport::probe(&config.parsed_dsn()?, config.timeout(), trace_id))
}

fn parse_rate(name: &str, value: &str) -> Result<f64, ConfigError> {
    value
        .parse::<f64>()
        .ok()
        .filter(|r| (0.0..=1.0).contains(r))
        .ok_or_else(|| ConfigError { setting: name.into(), message: format!("{value:?} is not a number in 0..1") })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(vars: &[(&str, &str)]) -> Result<SentryConfig, ConfigError> {
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        SentryConfig::default().with_env(|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    #[test]
    fn environment_fills_what_code_left_unset_and_bad_values_name_their_variable() {
        let c = with(&[
            ("SENTRY_DSN", "https://abc@o1.ingest.sentry.io/42"),
            ("SENTRY_ENVIRONMENT", "prod"),
            ("SENTRY_RELEASE", "pi@1.2.3"),
            ("SENTRY_TRACES_SAMPLE_RATE", "0.25"),
        ])
        .unwrap();
        assert_eq!(c.environment.as_deref(), Some("prod"));
        assert_eq!(c.release.as_deref(), Some("pi@1.2.3"));
        assert_eq!(c.traces_sample_rate, Some(0.25));
        let err = with(&[("SENTRY_DSN", "not a dsn")]).unwrap_err();
        assert!(err.to_string().starts_with("SENTRY_DSN: not a Sentry DSN"), "{err}");
        let err = with(&[("SENTRY_DSN", "https://abc@h/1"), ("SENTRY_TRACES_SAMPLE_RATE", "2")]).unwrap_err();
        assert!(err.to_string().starts_with("SENTRY_TRACES_SAMPLE_RATE:"), "{err}");
        assert!(with(&[]).unwrap_err().to_string().contains("no DSN"));
        let code = SentryConfig { dsn: Some("http://k@127.0.0.1:9/1".into()), ..Default::default() };
        let c = code.with_env(|name| (name == "SENTRY_DSN").then(|| "https://ignored@h/2".into())).unwrap();
        assert_eq!(c.dsn.as_deref(), Some("http://k@127.0.0.1:9/1"), "code wins");
    }
}
