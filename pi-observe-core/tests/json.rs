//! JSON form of events: round-trips exactly, and bad input is an error, never a panic.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::time::Duration;

use pi_observe_core::{
    Attribution, Class, ContentKind, ErrorInfo, EventKind, Field, ObsEvent, Payload, SpanId, Timestamp, TraceId, Value,
};
use proptest::prelude::*;

fn value() -> impl Strategy<Value = Value> {
    let finite = prop::num::f64::NORMAL | prop::num::f64::ZERO | prop::num::f64::SUBNORMAL;
    prop_oneof![
        ".*".prop_map(Value::from),
        any::<i64>().prop_map(Value::I64),
        finite.prop_map(Value::F64),
        any::<bool>().prop_map(Value::Bool),
        prop::collection::vec(".*", 1..4).prop_map(Value::StrArray),
        prop::collection::vec(any::<i64>(), 1..4).prop_map(Value::I64Array),
        prop::collection::vec(finite, 1..4).prop_map(Value::F64Array),
        prop::collection::vec(any::<bool>(), 1..4).prop_map(Value::BoolArray),
    ]
}

fn class() -> impl Strategy<Value = Class> {
    prop_oneof![
        Just(Class::Safe),
        Just(Class::Secret),
        prop::sample::select(ContentKind::ALL.to_vec()).prop_map(Class::Content)
    ]
}

fn event() -> impl Strategy<Value = ObsEvent> {
    (
        prop::sample::select(vec![EventKind::Start, EventKind::End, EventKind::Error, EventKind::Event]),
        "[a-z._]{0,30}",
        any::<[u8; 16]>(),
        prop::option::of(any::<[u8; 8]>()),
        prop::option::of(any::<[u8; 8]>()),
        any::<u64>(),
        prop::option::of(any::<u64>()),
        prop::collection::btree_map("[a-zA-Z]{1,8}", ".*", 0..4),
        prop::collection::vec(("[a-zA-Z_.]{1,12}", value(), class()), 0..6),
        prop::option::of((".*", ".*")),
    )
        .prop_map(|(kind, name, trace, span, parent, ts, dur, ctx, fields, error)| {
            let mut e = ObsEvent::new(kind, name, TraceId::from_bytes(trace).unwrap_or_else(TraceId::random));
            e.span_id = span.and_then(SpanId::from_bytes);
            e.parent_span_id = parent.and_then(SpanId::from_bytes);
            e.timestamp = Timestamp::from_unix_nanos(ts);
            e.duration = dur.map(Duration::from_nanos);
            e.context = ctx.into_iter().collect::<Attribution>();
            e.payload = fields
                .into_iter()
                .map(|(key, value, class)| Field { key: key.into(), value, class })
                .collect::<Payload>();
            e.error = error.map(|(n, m)| ErrorInfo::new(n, m));
            e
        })
}

proptest! {
    #[test]
    fn events_round_trip_through_json(e in event()) {
        let text = e.to_json();
        prop_assert!(!text.contains('\n'), "one event is one line");
        prop_assert_eq!(ObsEvent::from_json(&text).unwrap(), e);
    }

    #[test]
    fn arbitrary_input_is_an_error_not_a_panic(s in ".{0,200}") {
        let _ = ObsEvent::from_json(&s);
    }
}

#[test]
fn malformed_events_name_what_is_wrong() {
    let ok = r#"{"type":"start","name":"n","traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331","timestamp":1}"#;
    assert!(ObsEvent::from_json(ok).is_ok());
    for (bad, needle) in [
        (ok.replace("start", "begin"), "unknown variant"),
        (ok.replace("0af7651916cd43dd8448eb211c80319c", "00000000000000000000000000000000"), "all zero"),
        (ok.replace("b7ad6b7169203331", "b7ad"), "wrong length"),
        (ok.replace(r#""timestamp":1"#, r#""timestamp":1,"payload":{"x":null}"#), "payload.x"),
        (
            ok.replace(r#""timestamp":1"#, r#""timestamp":1,"payload":{"x":1},"payloadClasses":{"x":"weird"}"#),
            "unknown class",
        ),
    ] {
        let err = ObsEvent::from_json(&bad).unwrap_err().to_string();
        assert!(err.contains(needle), "{bad}: {err}");
    }
}
