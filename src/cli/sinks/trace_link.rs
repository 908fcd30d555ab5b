//! `PI_TRACE_URL_TEMPLATE`: a link for each printed trace id.

use crate::cli::CliError;

/// Variable with a link template for printed trace ids, e.g. `http://localhost:16686/trace/{trace_id}`.
pub const TRACE_URL_TEMPLATE: &str = "PI_TRACE_URL_TEMPLATE";

/// The placeholders a trace link template may use for the trace id (the second as the contract
/// spells the field).
const TRACE_ID_PLACEHOLDERS: [&str; 2] = ["{trace_id}", "{traceId}"];

/// A validated `PI_TRACE_URL_TEMPLATE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceLink(String);

impl TraceLink {
    /// The link to `trace`.
    pub fn to(&self, trace: &pi_observe::core::TraceId) -> String {
        let id = trace.to_string();
        TRACE_ID_PLACEHOLDERS.iter().fold(self.0.clone(), |link, placeholder| link.replace(placeholder, &id))
    }
}

/// `PI_TRACE_URL_TEMPLATE`, when set: it must contain `{trace_id}` (or `{traceId}`).
pub fn trace_url_template() -> Result<Option<TraceLink>, CliError> {
    match std::env::var(TRACE_URL_TEMPLATE) {
        Ok(t) if t.trim().is_empty() => Ok(None),
        Ok(t) if TRACE_ID_PLACEHOLDERS.iter().any(|p| t.contains(p)) => Ok(Some(TraceLink(t))),
        Ok(_) => Err(CliError::Usage(format!("{TRACE_URL_TEMPLATE}: has no {{trace_id}} placeholder"))),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => {
            Err(CliError::Usage(format!("{TRACE_URL_TEMPLATE}: not valid UTF-8")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_link_fills_either_placeholder() {
        let trace = pi_observe::core::TraceId::random();
        let id = trace.to_string();
        assert_eq!(TraceLink("http://j/trace/{trace_id}".into()).to(&trace), format!("http://j/trace/{id}"));
        assert_eq!(TraceLink("http://p/{traceId}?x={trace_id}".into()).to(&trace), format!("http://p/{id}?x={id}"));
    }
}
