//! A tool an extension registered: offered to the model with the extension's JSON schema, run by
//! a `tool` request to the extension process.

use std::time::Duration;

use serde_json::{Value, json};

use super::ProcessExtension;
use super::protocol::{Request, ToolContent, ToolReply, ToolSpec};
use crate::extensions::Extension;
use crate::message::joined_text;
use crate::tools::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};

/// Longest a tool of an extension may run (its own work, e.g. a nested agent, can be long).
pub const TOOL_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// An extension's tool.
#[derive(Debug, Clone)]
pub struct ProcessTool {
    pub(super) extension: ProcessExtension,
    pub(super) spec: ToolSpec,
}

impl Tool for ProcessTool {
    fn name(&self) -> &str {
        &self.spec.name
    }

    fn description(&self) -> &str {
        &self.spec.description
    }

    fn parameters(&self) -> Value {
        self.spec.parameters.clone()
    }

    fn execute<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            // The call's trace context: a tool that runs a nested `pi` passes `traceparent` as
            // `TRACEPARENT`, so the nested run's spans hang under this tool span, with the same
            // attribution.
            let current = pi_observe_core::current();
            let attribution: serde_json::Map<String, Value> =
                current.attribution().iter().map(|(k, v)| (k.to_owned(), Value::from(v))).collect();
            let traceparent = ctx.env.expose.then(|| current.traceparent().map(|tp| tp.to_string())).flatten();
            let ctx_json = json!({"hasUI": self.extension.has_ui(), "cwd": ctx.cwd, "sessionId": ctx.env.session_id, "sessionFile": ctx.env.session_file, "traceparent": traceparent,
                                  "attribution": attribution, "piExecutable": std::env::current_exe().ok()});
            let message =
                Request::Tool { name: &self.spec.name, params: args, ctx: ctx_json, tool_call_id: &ctx.call_id }
                    .to_json();
            let reply = tokio::select! {
                reply = self.extension.request_within(message, TOOL_TIMEOUT) => reply,
                () = ctx.cancel.cancelled() => return Err(ToolError::Aborted),
            };
            let reply = reply.map_err(|e| ToolError::Other(format!("extension {}: {e}", self.extension.name())))?;
            output(&reply).map_err(|why| ToolError::Other(format!("extension {}: {why}", self.extension.name())))?
        })
    }
}

/// `{"content": [...] | "text", "details"?: …, "isError"?: bool, "usage"?: {…}, "terminate"?: bool}`; an error
/// result is the tool failing with its text.
fn output(reply: &Value) -> Result<Result<ToolOutput, ToolError>, String> {
    let reply: ToolReply = serde_json::from_value(reply.clone()).map_err(|e| format!("tool reply: {e}"))?;
    let content = match reply.content {
        Some(ToolContent::Text(text)) => text,
        Some(ToolContent::Blocks(blocks)) => joined_text(&blocks),
        None => String::new(),
    };
    if reply.is_error {
        return Ok(Err(ToolError::Other(content)));
    }
    let details = reply.details.filter(|d| !d.is_null());
    Ok(Ok(ToolOutput { content, details, usage: reply.usage, terminate: reply.terminate }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_become_outputs_with_usage_or_errors() {
        let ok = output(&json!({"content": [{"type": "text", "text": "42"}], "usage": {"input": 3, "output": 2,
            "cacheRead": 0, "cacheWrite": 0, "totalTokens": 5, "cost": {"input": 0, "output": 0, "cacheRead": 0,
            "cacheWrite": 0, "total": 0.01}}}))
        .unwrap()
        .unwrap();
        assert_eq!((ok.content.as_str(), ok.usage.map(|u| u.total_tokens)), ("42", Some(5)));
        assert!(output(&json!({"content": "nope", "isError": true})).unwrap().is_err());
        assert!(output(&json!({"content": 7})).is_err());
    }
}
