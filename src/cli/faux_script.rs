//! Scripted responses for the faux provider, from a JSON file:
//!
//! ```json
//! [
//!   {"thinking": "…", "text": "Let me look.", "tools": [{"name": "read", "arguments": {"path": "a.txt"}}]},
//!   {"error": {"status": 429, "message": "slow down", "retryAfterSecs": 0}},
//!   {"text": "Done.", "chunkDelayMs": 50}
//! ]
//! ```

use std::path::Path;
use std::time::Duration;

use pi_agent::provider::{FauxBlock, FauxResponse, ProviderError};
use serde::Deserialize;

use super::CliError;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Step {
    #[serde(default)]
    thinking: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    tools: Vec<ToolStep>,
    #[serde(default)]
    error: Option<ErrorStep>,
    /// Text the request this step answers must contain (checks what the model was sent).
    #[serde(default)]
    expect: Vec<String>,
    /// Text the request must not contain.
    #[serde(default)]
    reject: Vec<String>,
    /// Milliseconds before each streamed chunk of this step (a slow model, e.g. to abort).
    #[serde(default)]
    chunk_delay_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolStep {
    name: String,
    #[serde(default)]
    arguments: serde_json::Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ErrorStep {
    status: u16,
    #[serde(default)]
    message: String,
    #[serde(default)]
    retry_after_secs: Option<f64>,
}

/// Reads a script; errors name the file.
pub fn load(path: &Path) -> Result<Vec<FauxResponse>, CliError> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| CliError::Usage(format!("--faux-script {shown}: {e}")))?;
    let steps: Vec<Step> = serde_json::from_str(&text)
        .map_err(|e| CliError::Usage(format!("--faux-script {shown}: not a script ({e})")))?;
    Ok(steps.into_iter().map(response).collect())
}

fn response(step: Step) -> FauxResponse {
    let mut blocks = Vec::new();
    blocks.extend(step.thinking.map(FauxBlock::Thinking));
    blocks.extend(step.text.map(FauxBlock::Text));
    blocks.extend(step.tools.into_iter().map(|t| FauxBlock::ToolCall { name: t.name, arguments: t.arguments }));
    let error = step.error.map(|e| {
        if e.status == 401 || e.status == 403 {
            ProviderError::Auth { status: e.status, message: e.message }
        } else {
            ProviderError::Http {
                status: e.status,
                message: e.message,
                retry_after: e.retry_after_secs.filter(|s| s.is_finite() && *s >= 0.0).map(Duration::from_secs_f64),
            }
        }
    });
    FauxResponse {
        blocks,
        error,
        fail_after_chunks: 0,
        expect: step.expect,
        reject: step.reject,
        chunk_delay: step.chunk_delay_ms.map(Duration::from_millis),
    }
}
