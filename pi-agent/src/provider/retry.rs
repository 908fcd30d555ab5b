//! Exponential backoff with a cap, honouring `Retry-After`.

use std::time::Duration;

/// How retries are spaced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// Delay before the first retry.
    pub base_delay: Duration,
    /// No delay is longer than this (also caps `Retry-After`).
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { max_retries: 3, base_delay: Duration::from_millis(500), max_delay: Duration::from_secs(30) }
    }
}

impl RetryPolicy {
    /// The delay before retry number `retry` (0-based): the server's `Retry-After` if given,
    /// else `base * 2^retry`; always capped.
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        let backoff = self.base_delay.saturating_mul(2u32.saturating_pow(retry));
        retry_after.unwrap_or(backoff).min(self.max_delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped_and_retry_after_wins() {
        let p =
            RetryPolicy { max_retries: 5, base_delay: Duration::from_millis(100), max_delay: Duration::from_secs(1) };
        assert_eq!(p.delay(0, None), Duration::from_millis(100));
        assert_eq!(p.delay(2, None), Duration::from_millis(400));
        assert_eq!(p.delay(10, None), Duration::from_secs(1));
        assert_eq!(p.delay(0, Some(Duration::from_millis(7))), Duration::from_millis(7));
        assert_eq!(p.delay(0, Some(Duration::from_secs(60))), Duration::from_secs(1));
    }
}
