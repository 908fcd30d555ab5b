//! `pi observe`: the telemetry pipeline's own controls — its status and the last run's
//! counters (`status`), a probe through each sink (`test`), and delivering the spool now
//! (`flush`), and the canary kit (`canary`).

mod canary;
mod flush;
mod probe;
pub mod status;

use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::cli::CliError;

/// `pi observe …`.
#[derive(Debug, Args)]
pub struct ObserveCommand {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, Subcommand)]
enum Action {
    /// Deliver what earlier runs spooled (undelivered OTLP / Sentry batches) now, to the sinks
    /// configured by these flags and the environment, and say what went where.
    Flush(flush::FlushArgs),
    /// The resolved telemetry pipeline (each sink, endpoint without secrets, protocol, capture,
    /// sampler, metric dimensions, and where each value came from), the last run's counters,
    /// and the spool.
    Status(status::StatusArgs),
    /// Send one probe trace (and a metric point) through each configured remote sink and say,
    /// per sink, whether it was reachable, its status, latency and whether the credentials were
    /// accepted. Exit 1 when any sink failed.
    Test(probe::TestArgs),
    /// Plant canaries (every built-in secret format, and a marker per kind of content) in a
    /// scripted faux session run through this configuration, with every remote sink's
    /// transport replaced by a local capture; report per sink what would leave. Exit 1 when a
    /// secret would, or content would reach a sink not opted in to it.
    Canary(canary::CanaryArgs),
}

/// Runs the chosen action.
pub async fn run(command: &ObserveCommand, cfg: &crate::cli::config::Config) -> Result<ExitCode, CliError> {
    match &command.action {
        Action::Canary(args) => canary::run(args, cfg).await,
        Action::Flush(args) => flush::run(args, cfg),
        Action::Status(args) => status::run(args, cfg),
        Action::Test(args) => probe::run(args, cfg),
    }
}
