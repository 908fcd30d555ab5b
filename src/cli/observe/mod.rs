//! `pi observe`: the telemetry pipeline's own controls — deliver the spool now (`flush`),
//! and (next) its status, a probe through each sink, and the canary kit.

mod flush;

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
}

/// Runs the chosen action.
pub fn run(command: &ObserveCommand) -> Result<ExitCode, CliError> {
    match &command.action {
        Action::Flush(args) => flush::run(args),
    }
}
