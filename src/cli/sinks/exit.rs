//! The wording the remote sinks' exit lines share: what was spooled, what an earlier run's spool
//! came to, and why something was not delivered.

use crate::cli::output;

/// ", N spooled for the next run", saying how many of them are no longer in the spool folder
/// (another run delivered them, or the folder was emptied) so the count never claims what the
/// disk does not hold.
pub fn spooled_note(spooled: u64, gone: u64) -> String {
    match gone.min(spooled) {
        0 => format!(", {spooled} spooled for the next run"),
        gone if gone == spooled => {
            format!(", {spooled} spooled but no longer in the spool folder (delivered by another run, or removed)")
        }
        gone => format!(
            ", {spooled} spooled ({} for the next run, {gone} no longer in the spool folder: delivered by another run, or removed)",
            spooled - gone
        ),
    }
}

/// What a sink delivered from the spool, when anything.
pub fn report_from_spool(sink: &str, earlier: &pi_observe::spool::SpoolDelivery) {
    if earlier.delivered_batches > 0 {
        output::error(format_args!(
            "pi: {sink}: delivered {} batches ({} items) spooled by earlier runs",
            earlier.delivered_batches, earlier.delivered_items
        ));
    }
    if earlier.over_cap > 0 {
        output::error(format_args!(
            "pi: {sink}: removed {} batches spooled by earlier runs under a wider capture than the managed policy now allows (not sent)",
            earlier.over_cap
        ));
    }
}

/// ` (last error: …)` when something was not delivered and the reason is known.
pub fn reason(not_delivered: u64, last_error: Option<&str>) -> String {
    match last_error {
        Some(why) if not_delivered > 0 => format!(" (last error: {why})"),
        _ => String::new(),
    }
}

/// Each spool diagnostic as a warning on stderr.
pub fn warnings(diagnostics: impl IntoIterator<Item = String>) {
    for diagnostic in diagnostics {
        output::error(format_args!("pi: warning: {diagnostic}"));
    }
}
