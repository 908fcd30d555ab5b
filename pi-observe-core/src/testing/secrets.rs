//! Where secrets sit in text, for tests over the canary corpus ([`crate::canary`]).

use crate::canary::SecretSample;

/// The ways a secret sits in text that pi sees: mid-line, at the start of a line, inside a
/// JSON-escaped string (as in a captured provider payload), and as an `.env` / `env` dump line.
pub fn placements(sample: &SecretSample) -> [(&'static str, String); 4] {
    let escaped = serde_json::to_string(&format!("first line\n{}\nlast line", sample.text)).unwrap_or_default();
    [
        ("mid-line", format!("the value is {} and that is all", sample.text)),
        ("line start", format!("intro\n{}\nnext line", sample.text)),
        ("JSON-escaped", format!(r#"{{"messages":[{{"content":{escaped}}}]}}"#)),
        ("env dump", format!("HOME=/home/user\n{}\nPATH=/usr/bin", sample.env_line)),
    ]
}
