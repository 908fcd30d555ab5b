//! What a spooled batch is and where it was going: the header line of a spool file.

use serde::{Deserialize, Serialize};

/// Where a spooled batch was going and how its bytes are encoded. Written as the first line of
/// its file (JSON), followed by the body exactly as it would have been sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchMeta {
    /// The sink kind that spooled it (`otlp`, `sentry`): only that kind of sink delivers it.
    pub sink: String,
    /// What the body holds (`traces`, `metrics`, `logs`, `envelope`).
    pub signal: String,
    /// Where it was going: the full request URL (credentials are never part of it).
    pub url: String,
    /// The protocol it was encoded for (`http/protobuf`, `http/json`, `grpc`, `sentry`).
    pub protocol: String,
    /// `Content-Encoding` of the body (`gzip`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_encoding: Option<String>,
    /// How many telemetry items (spans, envelopes, …) the body holds, for counting.
    pub items: u64,
    /// When it was first spooled, in milliseconds since the Unix epoch (set by the spool).
    #[serde(default)]
    pub created_ms: u64,
    /// The [`fingerprint`](crate::fingerprint) of credentials the receiver refused (401/403)
    /// for this batch: it waits until the configured credentials differ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_refused: Option<String>,
    /// The content kinds the sink captured when the batch was made (stamped by the spool from
    /// [`SpoolConfig::capture`](crate::SpoolConfig::capture)); `None` for a batch of an older
    /// version, which recorded none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<Vec<String>>,
}

impl BatchMeta {
    /// A batch for `sink`/`signal` going to `url`, encoded for `protocol`.
    pub fn new(sink: &str, signal: &str, url: &str, protocol: &str, items: u64) -> Self {
        BatchMeta {
            sink: sink.to_owned(),
            signal: signal.to_owned(),
            url: url.to_owned(),
            protocol: protocol.to_owned(),
            content_encoding: None,
            items,
            created_ms: 0,
            auth_refused: None,
            capture: None,
        }
    }

    /// Sets the body's content encoding.
    pub fn with_content_encoding(mut self, encoding: Option<&str>) -> Self {
        self.content_encoding = encoding.map(str::to_owned);
        self
    }

    /// True when the batch may hold content `cap` does not allow: a kind outside it, or no
    /// record of what it captured (fail closed). `None` = no cap.
    pub fn exceeds(&self, cap: Option<&[String]>) -> bool {
        match (cap, &self.capture) {
            (None, _) => false,
            (Some(cap), Some(kinds)) => kinds.iter().any(|k| !cap.contains(k)),
            (Some(_), None) => true,
        }
    }

    /// True when the batch waits for other credentials than `current` (a fingerprint).
    pub fn held_for(&self, current: &str) -> bool {
        self.auth_refused.as_deref() == Some(current)
    }
}

/// The header line on disk: a version, the body length (a torn file is one whose body is not
/// that long), and the meta.
#[derive(Serialize, Deserialize)]
pub(crate) struct Header {
    pub(crate) v: u32,
    pub(crate) len: u64,
    #[serde(flatten)]
    pub(crate) meta: BatchMeta,
}

/// The only header version so far.
pub(crate) const VERSION: u32 = 1;

/// The header line (with its `\n`) for `meta` and a body of `len` bytes.
pub(crate) fn header_line(meta: &BatchMeta, len: u64) -> Vec<u8> {
    let header = Header { v: VERSION, len, meta: meta.clone() };
    // Serializing plain strings and numbers cannot fail.
    let mut line = serde_json::to_vec(&header).unwrap_or_default();
    line.push(b'\n');
    line
}

/// Reads a header line (with its `\n`) of a file whose body is `body_len` bytes; `Err` says why
/// the file is unreadable.
pub(crate) fn parse_header(line: &[u8], body_len: u64) -> Result<(BatchMeta, u64), String> {
    let line = line.strip_suffix(b"\n").ok_or("no header line")?;
    let header: Header = serde_json::from_slice(line).map_err(|e| format!("header is not valid ({e})"))?;
    if header.v != VERSION {
        return Err(format!("header version {} is not {VERSION}", header.v));
    }
    if body_len != header.len {
        return Err(format!("torn: body is {body_len} bytes, header says {}", header.len));
    }
    Ok((header.meta, header.len))
}

/// Splits a file's bytes into meta and body; `Err` says why it is unreadable.
pub(crate) fn parse(bytes: &[u8]) -> Result<(BatchMeta, &[u8]), String> {
    let end = bytes.iter().position(|b| *b == b'\n').ok_or("no header line")?;
    let (meta, _) = parse_header(&bytes[..=end], (bytes.len() - end - 1) as u64)?;
    Ok((meta, &bytes[end + 1..]))
}

/// A stable fingerprint (FNV-1a, 64 bits, hex) of credentials such as request headers: names
/// are compared case-insensitively and order does not matter. It lets a batch refused with
/// 401/403 wait until the credentials change without the credentials being written to disk.
pub fn fingerprint<'a>(parts: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut parts: Vec<(String, &str)> = parts.into_iter().map(|(k, v)| (k.to_ascii_lowercase(), v)).collect();
    parts.sort();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (k, v) in parts {
        for byte in k.bytes().chain([0]).chain(v.bytes()).chain([0]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_and_body_read_back_as_written() {
        let meta = BatchMeta::new("otlp", "traces", "http://h/v1/traces", "http/protobuf", 3)
            .with_content_encoding(Some("gzip"));
        let mut file = header_line(&meta, 4);
        file.extend_from_slice(b"\x00\n\x01\x02");
        let (back, body) = parse(&file).unwrap();
        assert_eq!(back, meta);
        assert_eq!(body, b"\x00\n\x01\x02");
    }

    #[test]
    fn a_short_body_is_torn() {
        let meta = BatchMeta::new("otlp", "traces", "u", "grpc", 1);
        let mut file = header_line(&meta, 10);
        file.extend_from_slice(b"abc");
        assert!(parse(&file).unwrap_err().starts_with("torn"));
        assert!(parse(b"{\"v\":1").is_err());
    }

    #[test]
    fn fingerprints_ignore_order_and_name_case_but_not_values() {
        let a = fingerprint([("Authorization", "Bearer x"), ("x-tenant", "t")]);
        assert_eq!(a, fingerprint([("x-tenant", "t"), ("authorization", "Bearer x")]));
        assert_ne!(a, fingerprint([("authorization", "Bearer y"), ("x-tenant", "t")]));
        assert_ne!(fingerprint([]), a);
        assert_eq!(a.len(), 16);
    }
}
