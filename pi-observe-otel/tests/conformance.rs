//! The core conformance suite against the OTel adapter: what arrives at an OTLP receiver,
//! normalized back to contract terms, must satisfy every case.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use pi_observe_core::testing::conformance::{self, ConformanceFixture};
use pi_observe_core::testing::{RecordedEvent, RecordedSpan};
use pi_observe_core::{ErrorInfo, SpanId, Subscriber, Timestamp, TraceId, Value};
use pi_observe_otel::testing::Receiver;
use pi_observe_otel::{OtelSubscriber, OtlpConfig};

struct OtelFixture {
    receiver: Receiver,
}

fn value(v: &AnyValue) -> Option<Value> {
    Some(match v.value.as_ref()? {
        any_value::Value::StringValue(s) => Value::Str(s.clone().into()),
        any_value::Value::IntValue(i) => Value::I64(*i),
        any_value::Value::DoubleValue(f) => Value::F64(*f),
        any_value::Value::BoolValue(b) => Value::Bool(*b),
        any_value::Value::ArrayValue(a) => Value::StrArray(
            a.values
                .iter()
                .filter_map(|v| match v.value.as_ref()? {
                    any_value::Value::StringValue(s) => Some(s.clone()),
                    _ => None,
                })
                .collect(),
        ),
        _ => return None,
    })
}

/// `pi.<key>` attributes back to payload keys.
fn payload(attributes: &[KeyValue]) -> BTreeMap<String, Value> {
    attributes
        .iter()
        .filter(|kv| kv.key.starts_with("pi.") && !kv.key.starts_with("pi.context.") && kv.key != "pi.operation")
        .filter_map(|kv| Some((kv.key["pi.".len()..].to_owned(), value(kv.value.as_ref()?)?)))
        .collect()
}

impl ConformanceFixture for OtelFixture {
    fn subscriber(&mut self) -> Arc<dyn Subscriber> {
        let config = OtlpConfig {
            traces_endpoint: Some(self.receiver.endpoint.clone()),
            schedule_delay: Some(Duration::from_millis(20)),
            metrics: Some(false),
            ..OtlpConfig::default()
        };
        OtelSubscriber::new(config).unwrap()
    }

    fn finished_spans(&mut self) -> Vec<RecordedSpan> {
        let mut spans: Vec<RecordedSpan> = self
            .receiver
            .spans()
            .into_iter()
            .map(|s| {
                let error = (s.status.as_ref().map(|st| st.code) == Some(2)).then(|| {
                    let message = s.status.as_ref().map(|st| st.message.clone()).unwrap_or_default();
                    match message.split_once(": ") {
                        Some((name, msg)) => ErrorInfo::new(name, msg),
                        None => ErrorInfo::new(message, ""),
                    }
                });
                let context = s
                    .attributes
                    .iter()
                    .filter_map(|kv| {
                        let key = kv.key.strip_prefix("pi.context.")?;
                        match value(kv.value.as_ref()?)? {
                            Value::Str(v) => Some((key.to_owned(), v.into_owned())),
                            _ => None,
                        }
                    })
                    .collect();
                RecordedSpan {
                    name: pi_observe_otel::testing::operation(&s),
                    trace_id: TraceId::from_bytes(s.trace_id.clone().try_into().unwrap()).unwrap(),
                    span_id: SpanId::from_bytes(s.span_id.clone().try_into().unwrap()).unwrap(),
                    parent_span_id: s.parent_span_id.clone().try_into().ok().and_then(SpanId::from_bytes),
                    start: Timestamp::from_unix_nanos(s.start_time_unix_nano),
                    end: Some(Timestamp::from_unix_nanos(s.end_time_unix_nano)),
                    error,
                    attributes: payload(&s.attributes),
                    context,
                    events: s
                        .events
                        .iter()
                        .map(|e| RecordedEvent {
                            name: e.name.clone(),
                            timestamp: Timestamp::from_unix_nanos(e.time_unix_nano),
                            attributes: payload(&e.attributes),
                        })
                        .collect(),
                }
            })
            .collect();
        spans.sort_by_key(|s| s.start);
        spans
    }
}

#[test]
fn the_otel_adapter_passes_the_core_conformance_suite() {
    pi_observe_core::testing::silence_expected_panics(&[
        "conformance panic",
        "payload builder failed",
        "record failed",
        "event payload failed",
    ]);
    conformance::run_all(|| Box::new(OtelFixture { receiver: Receiver::start(vec![]) }));
}
