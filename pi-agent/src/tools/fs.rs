//! read, write, ls.

use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput, cap_head, describe, str_arg, u64_arg};

/// Reads a text file, optionally a line range.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadTool;

/// Default number of lines `read` returns.
pub const DEFAULT_READ_LINES: u64 = 2000;

impl Tool for ReadTool {
    describe!(
        "read",
        "Read a text file. `offset` is the 1-based first line, `limit` the number of lines (default 2000).",
        {"type": "object", "properties": {
            "path": {"type": "string"}, "offset": {"type": "integer", "minimum": 1}, "limit": {"type": "integer", "minimum": 1}
        }, "required": ["path"]}
    );
    fn output_kind(&self) -> pi_observe_core::ContentKind {
        pi_observe_core::ContentKind::FileContent
    }
    fn execute<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let path = ctx.resolve(str_arg(args, "path")?);
            let offset = u64_arg(args, "offset")?.unwrap_or(1).max(1);
            let limit = u64_arg(args, "limit")?.unwrap_or(DEFAULT_READ_LINES);
            let bytes = tokio::fs::read(&path).await.map_err(|e| ToolError::io(&path, e))?;
            let text = String::from_utf8_lossy(&bytes);
            let lines: Vec<&str> = text.lines().collect();
            let start = (offset - 1) as usize;
            if start > lines.len() {
                return Err(ToolError::InvalidArguments(format!(
                    "offset {offset} is past the end ({} lines)",
                    lines.len()
                )));
            }
            let end = (start + limit as usize).min(lines.len());
            let mut out = lines[start..end].join("\n");
            if end < lines.len() {
                out.push_str(&format!("\n[{} more lines; continue with offset={}]", lines.len() - end, end + 1));
            }
            Ok(ToolOutput {
                content: cap_head(out),
                details: Some(
                    json!({"path": path.display().to_string(), "lines": end - start, "totalLines": lines.len()}),
                ),
                usage: None,
                terminate: false,
            })
        })
    }
}

/// Writes a file (creating parent directories), replacing its content.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteTool;

impl Tool for WriteTool {
    describe!(
        "write",
        "Write `content` to the file at `path`, creating parent directories and replacing any existing content.",
        {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}
    );
    fn execute<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let path = ctx.resolve(str_arg(args, "path")?);
            let content = str_arg(args, "content")?;
            if let Some(dir) = path.parent() {
                tokio::fs::create_dir_all(dir).await.map_err(|e| ToolError::io(dir, e))?;
            }
            tokio::fs::write(&path, content).await.map_err(|e| ToolError::io(&path, e))?;
            Ok(ToolOutput {
                content: format!("Wrote {} bytes to {}", content.len(), path.display()),
                details: Some(json!({"path": path.display().to_string(), "bytes": content.len()})),
                usage: None,
                terminate: false,
            })
        })
    }
}

/// Lists a directory.
#[derive(Debug, Clone, Copy, Default)]
pub struct LsTool;

impl Tool for LsTool {
    describe!(
        "ls",
        "List the entries of a directory (default: the working directory) that ignore files (`.gitignore`, `.ignore`) do not hide; directories end with `/`.",
        {"type": "object", "properties": {"path": {"type": "string"}}}
    );
    fn execute<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let path = ctx.resolve(args.get("path").and_then(Value::as_str).unwrap_or("."));
            // A path that is not a readable directory is said as such.
            drop(tokio::fs::read_dir(&path).await.map_err(|e| ToolError::io(&path, e))?);
            let listed = path.clone();
            let mut names = tokio::task::spawn_blocking(move || {
                let entries = super::search::walker(&listed).max_depth(Some(1)).build().flatten();
                entries
                    .filter(|entry| entry.depth() == 1)
                    .map(|entry| {
                        let name = entry.file_name().to_string_lossy().into_owned();
                        if entry.file_type().is_some_and(|t| t.is_dir()) { format!("{name}/") } else { name }
                    })
                    .collect::<Vec<_>>()
            })
            .await
            .map_err(|e| ToolError::Other(e.to_string()))?;
            names.sort();
            let content = if names.is_empty() { "(empty directory)".to_owned() } else { names.join("\n") };
            Ok(ToolOutput {
                content: cap_head(content),
                details: Some(json!({"entries": names.len()})),
                usage: None,
                terminate: false,
            })
        })
    }
}
