//! The pipeline's own health as metrics (`pi.observe.*`): what the hub emitted and dropped,
//! what the policy withheld or redacted, what this exporter delivered, spooled or dropped, and
//! what the spool did. Exported with the other metrics, so they arrive even when every trace
//! is sampled out.

use pi_observe_core::{DropReason, StatsSnapshot};
use pi_observe_spool::{SpoolDelivery, SpoolStats};

use crate::metrics::metric_names::{
    OBSERVE_FIELDS, OBSERVE_RECORDS, OBSERVE_REDACTOR_FAILURES, OBSERVE_SPOOL_BATCHES, OBSERVE_SUBSCRIBER_PANICS,
    PIPELINE_SPANS,
};

/// One cumulative sum: metric, attributes, value.
pub(crate) type Point = (&'static str, Vec<(String, String)>, f64);

/// Counts a health dashboard watches for "none so far" are sent at zero too (a series that reads
/// 0, not "no data"); the other outcomes appear once they happen.
fn watched(name: &'static str, attrs: Vec<(String, String)>, n: u64) -> Point {
    (name, attrs, n as f64)
}

fn point(name: &'static str, key: &str, value: &str, n: u64) -> Option<Point> {
    (n > 0).then(|| (name, vec![(key.to_owned(), value.to_owned())], n as f64))
}

/// The points for the hub's `stats`, this exporter's span outcomes, and its spool.
pub(crate) fn points(
    hub: Option<&StatsSnapshot>,
    spans: &[(&'static str, u64)],
    spool: Option<&SpoolStats>,
    from_spool: &SpoolDelivery,
) -> Vec<Point> {
    let mut points = Vec::new();
    for (outcome, n) in spans.iter().copied().chain([("delivered_from_spool", from_spool.delivered_items)]) {
        points.extend(point(PIPELINE_SPANS, "outcome", outcome, n));
    }
    if let Some(hub) = hub {
        points.extend(point(OBSERVE_RECORDS, "outcome", "emitted", hub.emitted));
        for reason in DropReason::ALL {
            let outcome = format!("dropped.{}", reason.as_str());
            points.extend(point(OBSERVE_RECORDS, "outcome", &outcome, hub.dropped(reason)));
        }
        for (outcome, n) in [
            ("withheld", hub.fields_withheld),
            ("redacted", hub.fields_redacted),
            ("dropped", hub.fields_dropped),
            ("truncated", hub.fields_truncated),
        ] {
            points.extend(point(OBSERVE_FIELDS, "outcome", outcome, n));
        }
        points.push(watched(OBSERVE_SUBSCRIBER_PANICS, vec![], hub.subscriber_panics));
        points.push(watched(OBSERVE_REDACTOR_FAILURES, vec![], hub.redactor_failures));
    }
    if let Some(spool) = spool {
        points.push(watched(OBSERVE_SPOOL_BATCHES, vec![("outcome".into(), "spooled".into())], spool.spooled_batches));
        for (outcome, n) in [
            ("delivered", spool.delivered_batches),
            ("rejected", spool.rejected_batches),
            ("dropped.full", spool.dropped_full_batches),
            ("dropped.expired", spool.dropped_expired_batches),
            ("unreadable", spool.unreadable),
            ("write_failed", spool.write_failed),
        ] {
            points.extend(point(OBSERVE_SPOOL_BATCHES, "outcome", outcome, n));
        }
    }
    points
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_zero_counts_and_the_watched_ones_become_points_each_with_its_outcome() {
        let spool = SpoolStats { spooled_batches: 2, dropped_full_batches: 1, ..SpoolStats::default() };
        let delivered = SpoolDelivery { delivered_items: 5, ..SpoolDelivery::default() };
        let points = points(None, &[("exported", 3), ("spooled", 0)], Some(&spool), &delivered);
        let has = |name: &str, outcome: &str, v: f64| {
            points.iter().any(|(n, a, x)| *n == name && a[0].1 == outcome && *x == v)
        };
        assert!(has(PIPELINE_SPANS, "exported", 3.0));
        assert!(has(PIPELINE_SPANS, "delivered_from_spool", 5.0));
        assert!(has(OBSERVE_SPOOL_BATCHES, "spooled", 2.0));
        assert!(has(OBSERVE_SPOOL_BATCHES, "dropped.full", 1.0));
        assert_eq!(points.len(), 4, "{points:?}");
        // With a hub: its panics and redactor failures at zero; with an idle spool, "spooled" at 0.
        let hub = pi_observe_core::Observability::new().stats();
        let idle = super::points(Some(&hub), &[], Some(&SpoolStats::default()), &SpoolDelivery::default());
        for name in [OBSERVE_SUBSCRIBER_PANICS, OBSERVE_REDACTOR_FAILURES, OBSERVE_SPOOL_BATCHES] {
            assert!(idle.iter().any(|(n, _, v)| *n == name && *v == 0.0), "{name}: {idle:?}");
        }
        assert_eq!(idle.len(), 3, "{idle:?}");
    }
}
