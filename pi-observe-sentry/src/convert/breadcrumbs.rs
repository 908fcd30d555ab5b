//! Point records as Sentry breadcrumbs: the typed [`Breadcrumb`] (for error events) and the JSON
//! a transaction carries, written straight from each record as it comes.

use std::collections::VecDeque;

use pi_observe_core::ObsEvent;
use sentry::protocol::{self, Breadcrumb};
use serde_json::json;

use super::data::{DataEntry, DataOut, DataValue};
use super::{Seconds, json_value};

/// A point `event` record as a breadcrumb (its span in `data.span_id`).
pub fn breadcrumb(event: &ObsEvent) -> Breadcrumb {
    Breadcrumb {
        timestamp: event.timestamp.to_system_time(),
        ty: "default".into(),
        category: Some(event.name.to_string()),
        level: protocol::Level::Info,
        message: Some(event.name.to_string()),
        data: event
            .exportable_fields()
            .map(|f| (f.key.to_string(), json_value(&f.value)))
            .chain(event.span_id.map(|id| ("span_id".to_owned(), json!(id.to_string()))))
            .collect(),
    }
}

/// The breadcrumbs of one trace, the newest `max` kept: each written as JSON when its record
/// comes, so that a transaction (sent as the root ends, on the exit's path in `pi`) only joins
/// them. The JSON is written straight from the record (the [`breadcrumb`] it would make, as
/// `sentry` serializes it); the typed breadcrumb is only built for an error event.
#[derive(Debug)]
pub struct Breadcrumbs {
    max: usize,
    items: VecDeque<(ObsEvent, Box<[u8]>)>,
}

impl Breadcrumbs {
    /// None yet; at most `max` are kept (the oldest goes first).
    pub fn new(max: usize) -> Self {
        Breadcrumbs { max, items: VecDeque::new() }
    }

    /// Adds the breadcrumb of the point `event` record.
    pub fn push(&mut self, event: &ObsEvent) {
        let mut json = Vec::with_capacity(256);
        if serde_json::to_writer(&mut json, &BreadcrumbOut(event)).is_err() {
            return;
        }
        if self.items.len() >= self.max {
            self.items.pop_front();
        }
        self.items.push_back((event.clone(), json.into_boxed_slice()));
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The breadcrumbs, oldest first (for an error event).
    pub fn to_vec(&self) -> Vec<Breadcrumb> {
        self.items.iter().map(|(event, _)| breadcrumb(event)).collect()
    }

    /// Appends `{"values":[…]}` from the JSON written as they came.
    pub(super) fn write_values(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(br#"{"values":["#);
        for (i, (_, json)) in self.items.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(json);
        }
        out.extend_from_slice(b"]}");
    }
}

/// The JSON `sentry` writes for the [`breadcrumb`] of `event`, written from the record: the
/// same members in the same order (`type` and `level` are the defaults, which it leaves out),
/// the data sorted by key.
struct BreadcrumbOut<'a>(&'a ObsEvent);

impl serde::Serialize for BreadcrumbOut<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let event = self.0;
        let span_id = event.span_id.map(|id| id.hex());
        let mut data: Vec<DataEntry<'_>> =
            event.exportable_fields().map(|f| DataEntry::new("", &f.key, DataValue::Field(&f.value))).collect();
        if let Some(id) = &span_id {
            data.push(DataEntry::new("", "span_id", DataValue::Str(id)));
        }
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("timestamp", &Seconds(event.timestamp.to_system_time()))?;
        map.serialize_entry("category", &*event.name)?;
        map.serialize_entry("message", &*event.name)?;
        if !data.is_empty() {
            map.serialize_entry("data", &DataOut(data))?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::tests::record;
    use pi_observe_core::{EventKind, Payload, SpanId, TraceId, names};
    use serde_json::Value as Json;

    #[test]
    fn breadcrumbs_written_from_records_are_the_bytes_sentry_writes() {
        // Every kind of value, text to escape, a key sorting after `span_id`, a whole-second
        // time, and a record with neither fields nor span.
        let (trace, span) = (TraceId::random(), SpanId::random());
        let mut varied = record(EventKind::Event, "pi.ai.provider.retry", trace, span, None, 1_796_323_362_000_000_000);
        varied.payload = Payload::new()
            .safe("zeta", "line one\nline \"two\" \u{e9}")
            .safe(names::COST_TOTAL, 0.000315)
            .safe("whole", 2.0)
            .safe("nan", f64::NAN)
            .safe(names::ABORTED, false)
            .safe("list", vec!["a", "b"])
            .safe("attempt", -3);
        let mut bare = record(EventKind::Event, "pi.session.saved", trace, span, None, 1_796_323_362_400_000_000);
        bare.span_id = None;
        let mut crumbs = Breadcrumbs::new(10);
        crumbs.push(&varied);
        crumbs.push(&bare);
        let mut written = Vec::new();
        crumbs.write_values(&mut written);
        let written = String::from_utf8(written).unwrap();
        let typed = serde_json::to_string(&crumbs.to_vec()).unwrap();
        assert_eq!(written, format!(r#"{{"values":{typed}}}"#));
        assert!(written.contains(r#""nan":"NaN""#) && written.contains(r#""timestamp":1796323362,"#), "{written}");
        // The bare record's breadcrumb has no data, and neither has a type or level (defaults).
        let bare_json = &written[written.rfind(r#"{"timestamp""#).unwrap()..];
        assert!(
            !bare_json.contains("data") && !written.contains(r#""type""#) && !written.contains("level"),
            "{written}"
        );
    }

    #[test]
    fn breadcrumbs_keep_the_newest_and_write_what_the_typed_ones_serialize_to() {
        let (trace, span) = (TraceId::random(), SpanId::random());
        let mut crumbs = Breadcrumbs::new(3);
        assert!(crumbs.is_empty());
        for i in 0..5u64 {
            let mut point = record(EventKind::Event, names::PROVIDER_USAGE, trace, span, None, 1_000_000_000 * (i + 1));
            point.payload = Payload::new().safe(names::INPUT_TOKENS, i as i64);
            crumbs.push(&point);
        }
        let typed = crumbs.to_vec();
        assert_eq!(typed.len(), 3);
        let mut written = Vec::new();
        crumbs.write_values(&mut written);
        let written: Json = serde_json::from_slice(&written).unwrap();
        assert_eq!(written, json!({ "values": typed }));
        // The oldest two went.
        let seconds: Vec<f64> =
            typed.iter().map(|c| c.timestamp.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64()).collect();
        assert_eq!(seconds, [3.0, 4.0, 5.0]);
    }
}
