//! One pass over the spool: claim each batch a sink can deliver, send it, settle it.

use std::time::{Duration, Instant};

use crate::{BatchMeta, Claimed, Spool};

/// What one try at sending a spooled batch came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// Accepted: the batch is removed.
    Delivered,
    /// 401/403: the batch stays, waiting for other credentials.
    Unauthorized(String),
    /// Refused for good (a 4xx retrying cannot fix): the batch is removed and counted.
    Rejected(String),
    /// Down, stalled, 408/429/5xx: the batch stays and the pass ends (the receiver is down).
    Failed(String),
}

/// What one pass over the spool delivered and left.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpoolDelivery {
    /// Batches delivered (and removed from the spool).
    pub delivered_batches: u64,
    /// Items in them.
    pub delivered_items: u64,
    /// Batches kept because the receiver refused the current credentials (401/403), or
    /// refused them before and they have not changed since.
    pub held: u64,
    /// Batches the receiver refused for good (other 4xx): removed.
    pub rejected: u64,
    /// Batches spooled under a wider capture than the cap in force: removed unsent.
    pub over_cap: u64,
    /// Batches left for later: the receiver failed, or the pass stopped first.
    pub kept: u64,
    /// Why the last batch that was not delivered was not.
    pub last_error: Option<String>,
}

impl Spool {
    /// Delivers the batches `accept` wants, oldest first, until `deadline` or until `stop`
    /// says so: each is claimed (skipped when another process holds it), left alone when it
    /// waits for other credentials than `credentials` (a [`fingerprint`](crate::fingerprint)),
    /// and otherwise given to `send` with the time left. The first [`Attempt::Failed`] ends the
    /// pass.
    pub fn deliver(
        &self,
        accept: impl Fn(&BatchMeta) -> bool,
        credentials: &str,
        deadline: Instant,
        stop: &dyn Fn() -> bool,
        mut send: impl FnMut(&Claimed, Duration) -> Attempt,
    ) -> SpoolDelivery {
        // Nothing past the limits is delivered: expired batches go first.
        self.enforce_limits();
        let pending = self.pending(accept);
        let mut result = SpoolDelivery { kept: pending.len() as u64, ..SpoolDelivery::default() };
        for batch in &pending {
            let left = deadline.saturating_duration_since(Instant::now());
            if stop() || left.is_zero() {
                break;
            }
            let Some(claimed) = self.claim(batch) else {
                result.kept -= 1; // another process has it
                continue;
            };
            if claimed.meta.exceeds(self.config().capture_cap.as_deref()) {
                result.kept -= 1;
                result.over_cap += 1;
                self.over_cap(claimed);
                continue;
            }
            if claimed.meta.held_for(credentials) {
                result.kept -= 1;
                result.held += 1;
                continue;
            }
            match send(&claimed, left) {
                Attempt::Delivered => {
                    result.delivered_batches += 1;
                    result.delivered_items += claimed.meta.items;
                    self.delivered(claimed);
                }
                Attempt::Unauthorized(why) => {
                    result.held += 1;
                    result.last_error = Some(why);
                    // If the mark cannot be written it is simply tried again next time.
                    let _ = self.refused(claimed, credentials);
                }
                Attempt::Rejected(why) => {
                    result.rejected += 1;
                    result.last_error = Some(why);
                    self.rejected(claimed);
                }
                Attempt::Failed(why) => {
                    result.last_error = Some(why);
                    break;
                }
            }
            result.kept -= 1;
        }
        result
    }
}
