//! AWS's binary event-stream framing (`application/vnd.amazon.eventstream`, what Bedrock's
//! ConverseStream answers with), decoded by `aws-smithy-eventstream` (prelude, headers, payload
//! and both CRCs checked) into the same [`SseEvent`]s the other APIs produce: the event's name
//! is its `:event-type` header (`exception:<:exception-type>` for an exception), its data the
//! JSON payload.

use aws_smithy_eventstream::frame::{DecodedFrame, MessageFrameDecoder};
use aws_smithy_types::event_stream::{HeaderValue, Message};

use super::sse::SseEvent;

/// Feeds bytes in, gets complete messages out as events.
#[derive(Debug, Default)]
pub struct EventStreamParser {
    buffer: bytes::BytesMut,
    decoder: MessageFrameDecoder,
}

impl EventStreamParser {
    /// Adds bytes; returns the events completed by them. A corrupt frame (bad length or CRC) is
    /// an error naming it.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, String> {
        self.buffer.extend_from_slice(bytes);
        let mut events = Vec::new();
        loop {
            match self.decoder.decode_frame(&mut self.buffer).map_err(|e| format!("event-stream frame: {e}"))? {
                DecodedFrame::Complete(message) => events.push(event_of(&message)?),
                DecodedFrame::Incomplete => return Ok(events),
            }
        }
    }

    /// Bytes received after the last complete message (a truncated stream leaves some).
    pub fn pending(&self) -> bool {
        !self.buffer.is_empty()
    }
}

fn event_of(message: &Message) -> Result<SseEvent, String> {
    let header = |name: &str| {
        message.headers().iter().find(|h| h.name().as_str() == name).and_then(|h| match h.value() {
            HeaderValue::String(value) => Some(value.as_str().to_owned()),
            _ => None,
        })
    };
    let event = match header(":message-type").as_deref() {
        Some("exception") => format!("exception:{}", header(":exception-type").unwrap_or_default()),
        Some("error") => format!("exception:{}", header(":error-code").unwrap_or_default()),
        _ => header(":event-type").unwrap_or_default(),
    };
    let data =
        String::from_utf8(message.payload().to_vec()).map_err(|_| "event-stream payload is not UTF-8".to_owned())?;
    Ok(SseEvent { event, data })
}

/// Test support: `payload` framed as one event-stream message with these string headers.
#[cfg(test)]
pub(crate) fn frame(headers: &[(&str, &str)], payload: &str) -> Vec<u8> {
    use aws_smithy_types::event_stream::Header;
    let mut message = Message::new(payload.as_bytes().to_vec());
    for (name, value) in headers {
        message = message.add_header(Header::new(name.to_string(), HeaderValue::String(value.to_string().into())));
    }
    let mut out = Vec::new();
    aws_smithy_eventstream::frame::write_message_to(&message, &mut out).unwrap_or_default();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_anywhere_decode_the_same_and_corruption_is_an_error() {
        let mut stream =
            frame(&[(":message-type", "event"), (":event-type", "messageStart")], r#"{"role":"assistant"}"#);
        stream.extend(frame(
            &[(":message-type", "exception"), (":exception-type", "throttlingException")],
            r#"{"message":"slow down"}"#,
        ));
        let whole = EventStreamParser::default().push(&stream).unwrap();
        assert_eq!(whole[0], SseEvent { event: "messageStart".into(), data: r#"{"role":"assistant"}"#.into() });
        assert_eq!(whole[1].event, "exception:throttlingException");
        for split in 0..stream.len() {
            let mut p = EventStreamParser::default();
            let mut got = p.push(&stream[..split]).unwrap();
            got.extend(p.push(&stream[split..]).unwrap());
            assert_eq!(got, whole, "split at {split}");
            assert!(!p.pending());
        }
        let mut corrupt = stream.clone();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 0xff;
        assert!(EventStreamParser::default().push(&corrupt).is_err(), "a bad CRC is refused");
        let mut cut = EventStreamParser::default();
        assert!(cut.push(&stream[..10]).unwrap().is_empty());
        assert!(cut.pending());
    }
}
