//! [`ProviderError`]: why a request failed, as the retry loop and the telemetry see it.

use std::time::Duration;

use pi_observe_core::names;

/// Why a request failed. `is_retryable` says which ones the retry loop repeats.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    /// The server answered with an error status.
    #[error("HTTP {status}: {message}")]
    Http {
        /// Status code.
        status: u16,
        /// Error text from the body (truncated).
        message: String,
        /// Parsed `Retry-After`.
        retry_after: Option<Duration>,
    },
    /// 401 / 403: the key is missing or wrong.
    #[error("HTTP {status} (authentication): {message}")]
    Auth {
        /// Status code.
        status: u16,
        /// Error text.
        message: String,
    },
    /// Could not connect, or the connection broke.
    #[error("network error: {0}")]
    Network(String),
    /// No response, or the stream stalled, within the timeout.
    #[error("timeout: {0}")]
    Timeout(String),
    /// The stream ended early or carried malformed SSE/JSON.
    #[error("bad stream: {0}")]
    Stream(String),
    /// The provider reported an error inside the stream.
    #[error("provider error: {0}")]
    Provider(String),
    /// The request was cancelled.
    #[error("aborted")]
    Aborted,
    /// The faux provider has no scripted response left.
    #[error("faux provider: no more responses")]
    NoMoreResponses,
    /// Misconfiguration (missing key, bad URL).
    #[error("configuration: {0}")]
    Config(String),
}

impl ProviderError {
    /// True for errors worth repeating: network, timeouts, 408, 429 and 5xx.
    pub fn is_retryable(&self) -> bool {
        match self {
            ProviderError::Http { status, .. } => *status == 408 || *status == 429 || *status >= 500,
            ProviderError::Network(_) | ProviderError::Timeout(_) => true,
            ProviderError::Auth { .. }
            | ProviderError::Stream(_)
            | ProviderError::Provider(_)
            | ProviderError::Aborted
            | ProviderError::NoMoreResponses
            | ProviderError::Config(_) => false,
        }
    }

    /// HTTP status, when there is one.
    pub fn status(&self) -> Option<u16> {
        match self {
            ProviderError::Http { status, .. } | ProviderError::Auth { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The error's type from pi's fixed vocabulary ([`names`]`::ERROR_*`): safe to export,
    /// unlike the message, which carries provider text.
    pub fn error_type(&self) -> &'static str {
        match self {
            ProviderError::Http { .. } => names::ERROR_HTTP_STATUS,
            ProviderError::Auth { .. } => names::ERROR_AUTH,
            ProviderError::Network(_) => names::ERROR_NETWORK,
            ProviderError::Timeout(_) => names::ERROR_TIMEOUT,
            ProviderError::Stream(_) => names::ERROR_INVALID_STREAM,
            ProviderError::Provider(_) => names::ERROR_PROVIDER,
            ProviderError::Aborted => names::ERROR_CANCELLED,
            ProviderError::NoMoreResponses => names::ERROR_NO_MORE_RESPONSES,
            ProviderError::Config(_) => names::ERROR_CONFIG,
        }
    }

    /// The contract's error record: the type, and the message as error text (content).
    pub fn error_info(&self) -> pi_observe_core::ErrorInfo {
        pi_observe_core::ErrorInfo::new(self.error_type(), self.to_string())
    }

    /// How long the server asked to wait before the next attempt.
    pub(super) fn retry_after(&self) -> Option<Duration> {
        match self {
            ProviderError::Http { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}
