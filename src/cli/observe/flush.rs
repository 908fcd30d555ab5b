//! `pi observe flush`: deliver the spool now.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use pi_observe::spool::Spool;

use crate::cli::config::Config;
use crate::cli::sinks::SinkArgs;
use crate::cli::sinks::{Delivered, SinkSetup};
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
    let deadline = Instant::now() + Duration::from_secs(args.timeout);
    let mut failed = false;
    let mut all_stats = Vec::new();
    for (kind, sink) in setup.sinks() {
        let Some(Delivered { destination, result, stats }) = sink.deliver_spooled(deadline)? else { continue };
        failed |= result.kept > 0 && result.last_error.is_some();
        output::line(format_args!(
            "{} {destination}: {} batches delivered ({} items), {} held for other credentials, {} rejected, {} removed over the capture cap, {} kept{}",
            kind.name,
            result.delivered_batches,
            result.delivered_items,
            result.held,
            result.rejected,
            result.over_cap,
            result.kept,
            result.last_error.map(|e| format!(" (last error: {e})")).unwrap_or_default(),
        ));
        all_stats.push(stats);
    }
    if !setup.has_remote() {
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
    all_stats.insert(0, spool.stats());
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
