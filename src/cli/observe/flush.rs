//! `pi observe flush`: deliver the spool now.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use pi_observe::spool::{Spool, SpoolDelivery};

use crate::cli::args::SinkArgs;
use crate::cli::config::Config;
use crate::cli::sinks::SinkSetup;
use crate::cli::{CliError, output};

/// `pi observe flush` arguments: the sinks (as for a run) and a deadline.
#[derive(Debug, Args)]
pub struct FlushArgs {
    /// Stop after this many seconds (what is left stays spooled).
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    timeout: u64,
    #[command(flatten)]
    sinks: SinkArgs,
}

/// Delivers each configured sink's spooled batches, one line per sink on stdout, plus one per
/// destination no configured sink delivers. Exit 1 when a receiver failed (its batches stay).
pub fn run(args: &FlushArgs, cfg: &Config) -> Result<ExitCode, CliError> {
    let setup = SinkSetup::resolve(&args.sinks, None, cfg)?;
    let Some((config, _)) = &setup.spool else {
        return Err(CliError::Usage("no spool to flush (--no-spool, or no home directory)".into()));
    };
    // Each sink delivers through a spool of its own configuration (its capture cap applies).
    let spool = Spool::new(config.clone());
    let otlp_spool = setup.otlp().and_then(|o| o.spool.clone()).map(Spool::new);
    let sentry_spool = setup.sentry().and_then(|s| s.spool.clone()).map(Spool::new);
    let deadline = Instant::now() + Duration::from_secs(args.timeout);
    let mut failed = false;
    let mut report = |sink: &str, url: String, result: SpoolDelivery| {
        failed |= result.kept > 0 && result.last_error.is_some();
        output::line(format_args!(
            "{sink} {url}: {} batches delivered ({} items), {} held for other credentials, {} rejected, {} removed over the capture cap, {} kept{}",
            result.delivered_batches,
            result.delivered_items,
            result.held,
            result.rejected,
            result.over_cap,
            result.kept,
            result.last_error.map(|e| format!(" (last error: {e})")).unwrap_or_default(),
        ));
    };
    if let (Some(otlp), Some(spool)) = (setup.otlp(), &otlp_spool) {
        let result = pi_observe::otel::deliver_spooled(otlp, spool, deadline)?;
        report("otlp", otlp_destinations(otlp), result);
    }
    if let (Some(sentry), Some(spool)) = (setup.sentry(), &sentry_spool) {
        let result = pi_observe::sentry::deliver_spooled(sentry, spool, deadline)?;
        report("sentry", sentry.envelope_url().unwrap_or_default(), result);
    }
    if setup.otlp().is_none() && setup.sentry().is_none() {
        output::error(format_args!(
            "pi: observe flush: no sink to deliver to (give --otlp or --sentry, or their variables); \
             listing what is spooled"
        ));
    }
    let mut others: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    for batch in spool.pending(|_| true) {
        let entry = others.entry((batch.meta.sink.clone(), batch.meta.url.clone())).or_default();
        entry.0 += 1;
        entry.1 += batch.meta.items;
    }
    for ((sink, url), (batches, items)) in others {
        output::line(format_args!("{sink} {url}: {batches} batches ({items} items) still spooled"));
    }
    let all_stats: Vec<_> =
        [Some(&spool), otlp_spool.as_ref(), sentry_spool.as_ref()].into_iter().flatten().map(Spool::stats).collect();
    let (expired, full) =
        all_stats.iter().fold((0, 0), |(e, f), s| (e + s.dropped_expired_batches, f + s.dropped_full_batches));
    if expired + full > 0 {
        output::line(format_args!("spool: {expired} batches removed past the age cap, {full} over the size cap"));
    }
    for diagnostic in all_stats.into_iter().flat_map(|s| s.diagnostics) {
        output::error(format_args!("pi: warning: {diagnostic}"));
    }
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// Where the OTLP sink delivers spooled batches of every signal, without secrets: the gRPC
/// collector address, or the HTTP URLs of traces, metrics and logs (`…/v1/{traces,metrics,logs}`
/// when they share a base).
fn otlp_destinations(otlp: &pi_observe::otel::OtlpConfig) -> String {
    use pi_observe::otel::{Protocol, url_without_secrets};
    let traces = url_without_secrets(&otlp.endpoint());
    if otlp.protocol == Some(Protocol::Grpc) {
        return traces;
    }
    let (metrics, logs) = (url_without_secrets(&otlp.metrics_endpoint()), url_without_secrets(&otlp.logs_endpoint()));
    match traces.strip_suffix("/v1/traces") {
        Some(base) if metrics == format!("{base}/v1/metrics") && logs == format!("{base}/v1/logs") => {
            format!("{base}/v1/{{traces,metrics,logs}}")
        }
        _ => format!("{traces}, {metrics}, {logs}"),
    }
}
