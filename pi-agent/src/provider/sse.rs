//! Incremental Server-Sent Events parsing (the subset LLM APIs use: `event:`, `data:`, comments,
//! blank-line dispatch; `id:`/`retry:` ignored). Bytes may split anywhere, even inside UTF-8.

/// One dispatched SSE event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` name, or `message`.
    pub event: String,
    /// The `data:` lines joined by `\n`.
    pub data: String,
}

/// Feeds bytes in, gets complete events out.
#[derive(Debug, Default)]
pub struct SseParser {
    buffer: Vec<u8>,
    event: Option<String>,
    data: Option<String>,
}

impl SseParser {
    /// Adds bytes; returns the events completed by them.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, String> {
        self.buffer.extend_from_slice(bytes);
        let mut events = Vec::new();
        while let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
            let mut line: Vec<u8> = self.buffer.drain(..=end).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let line = String::from_utf8(line).map_err(|_| "SSE line is not UTF-8".to_owned())?;
            if let Some(event) = self.line(&line) {
                events.push(event);
            }
        }
        Ok(events)
    }

    /// Bytes received after the last complete line (a truncated stream leaves some).
    pub fn pending(&self) -> bool {
        !self.buffer.iter().all(u8::is_ascii_whitespace) || self.data.is_some()
    }

    fn line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            let data = self.data.take()?;
            let event = self.event.take().unwrap_or_else(|| "message".to_owned());
            return Some(SseEvent { event, data });
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = Some(value.to_owned()),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_at_every_byte_parse_the_same() {
        let stream = "event: a\ndata: {\"x\":1}\n\n: comment\ndata: line1\r\ndata: line2\n\ndata: é\n\n";
        let whole = SseParser::default().push(stream.as_bytes()).unwrap();
        assert_eq!(whole.len(), 3);
        assert_eq!(whole[0], SseEvent { event: "a".into(), data: "{\"x\":1}".into() });
        assert_eq!(whole[1].data, "line1\nline2");
        assert_eq!(whole[2].data, "é");
        for split in 0..stream.len() {
            let mut p = SseParser::default();
            let mut got = p.push(&stream.as_bytes()[..split]).unwrap();
            got.extend(p.push(&stream.as_bytes()[split..]).unwrap());
            assert_eq!(got, whole, "split at {split}");
            assert!(!p.pending());
        }
    }

    #[test]
    fn truncated_streams_are_visible() {
        let mut p = SseParser::default();
        assert!(p.push(b"data: {\"partial\"").unwrap().is_empty());
        assert!(p.pending());
        assert!(SseParser::default().push(&[0xff, b'\n']).is_err());
    }
}
