//! edit: exact-match replacement.

use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput, describe, str_arg};

/// Replaces one exact occurrence of `oldText` with `newText`.
#[derive(Debug, Clone, Copy, Default)]
pub struct EditTool;

impl Tool for EditTool {
    describe!(
        "edit",
        "Replace `oldText` with `newText` in the file at `path`. `oldText` must match exactly once.",
        {"type": "object", "properties": {
            "path": {"type": "string"}, "oldText": {"type": "string"}, "newText": {"type": "string"}
        }, "required": ["path", "oldText", "newText"]}
    );
    fn execute<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let path = ctx.resolve(str_arg(args, "path")?);
            let old = str_arg(args, "oldText")?;
            let new = str_arg(args, "newText")?;
            if old.is_empty() {
                return Err(ToolError::InvalidArguments("`oldText` must not be empty".into()));
            }
            let text = tokio::fs::read_to_string(&path).await.map_err(|e| ToolError::io(&path, e))?;
            let shown = path.display().to_string();
            match text.matches(old).count() {
                0 => Err(ToolError::EditNoMatch { path: shown }),
                1 => {
                    let updated = text.replacen(old, new, 1);
                    tokio::fs::write(&path, &updated).await.map_err(|e| ToolError::io(&path, e))?;
                    let line = text[..text.find(old).unwrap_or(0)].lines().count().max(1);
                    // Upstream's details: the diff and the first changed line, for renderers.
                    let (diff, first) = super::diff::diff(&text, &updated);
                    Ok(ToolOutput {
                        content: format!("Edited {shown} at line {line}"),
                        details: Some(json!({"path": shown, "line": line, "diff": diff, "firstChangedLine": first})),
                        usage: None,
                        terminate: false,
                    })
                }
                count => Err(ToolError::EditAmbiguous { path: shown, count }),
            }
        })
    }
}
