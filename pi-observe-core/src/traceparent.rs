//! W3C Trace Context `traceparent` parsing and formatting.

use std::fmt;

use crate::ids::{SpanId, TraceId};

/// A parsed W3C `traceparent` header: `00-<trace id>-<parent span id>-<flags>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    /// The trace the remote parent belongs to.
    pub trace_id: TraceId,
    /// The remote parent's span id.
    pub parent_id: SpanId,
    /// Trace flags (bit 0: sampled).
    pub flags: u8,
}

impl TraceParent {
    /// Flag bit 0: the caller sampled this trace.
    pub const SAMPLED: u8 = 0x01;

    /// A traceparent with these parts.
    pub fn new(trace_id: TraceId, parent_id: SpanId, flags: u8) -> Self {
        Self { trace_id, parent_id, flags }
    }

    /// Parses a header value. Anything malformed (wrong length, uppercase or non-hex digits,
    /// version `ff`, all-zero ids, trailing data on version 00) is `None`, never a panic.
    pub fn parse(value: &str) -> Option<TraceParent> {
        let value = value.trim();
        let bytes = value.as_bytes();
        if bytes.len() < 55 || !bytes.is_ascii() {
            return None;
        }
        let version = lower_hex_byte(&value[0..2])?;
        if version == 0xff || (version == 0 && bytes.len() != 55) {
            return None;
        }
        // Future versions may append fields after a '-'.
        if bytes.len() > 55 && bytes[55] != b'-' {
            return None;
        }
        if bytes[2] != b'-' || bytes[35] != b'-' || bytes[52] != b'-' {
            return None;
        }
        let trace = &value[3..35];
        let span = &value[36..52];
        if !is_lower_hex(trace) || !is_lower_hex(span) {
            return None;
        }
        let flags = lower_hex_byte(&value[53..55])?;
        Some(TraceParent { trace_id: TraceId::from_hex(trace).ok()?, parent_id: SpanId::from_hex(span).ok()?, flags })
    }

    /// True when the sampled flag is set.
    pub fn is_sampled(&self) -> bool {
        self.flags & Self::SAMPLED != 0
    }
}

fn is_lower_hex(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn lower_hex_byte(s: &str) -> Option<u8> {
    if s.len() == 2 && is_lower_hex(s) { u8::from_str_radix(s, 16).ok() } else { None }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "00-{}-{}-{:02x}", self.trace_id, self.parent_id, self.flags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn valid_traceparent_round_trips() {
        let tp = TraceParent::parse(VALID).unwrap();
        assert!(tp.is_sampled());
        assert_eq!(tp.to_string(), VALID);
        let future = format!("cc{}-extra", &VALID[2..]);
        assert_eq!(TraceParent::parse(&future).unwrap().trace_id, tp.trace_id);
    }

    #[test]
    fn malformed_traceparents_are_rejected() {
        for bad in [
            "",
            "00",
            &VALID.replace("4bf9", "4BF9"),
            &VALID.replace("00-4bf9", "ff-4bf9"),
            &format!("{VALID}-x"),
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473é-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn arbitrary_strings_never_panic(s in ".{0,80}") {
            let _ = TraceParent::parse(&s);
        }

        #[test]
        fn mutated_valid_headers_never_panic(pos in 0usize..55, c in any::<char>()) {
            let mut s: Vec<char> = VALID.chars().collect();
            s[pos] = c;
            let s: String = s.into_iter().collect();
            if let Some(tp) = TraceParent::parse(&s) {
                prop_assert_eq!(&tp.to_string()[2..], &s[2..]);
            }
        }
    }
}
