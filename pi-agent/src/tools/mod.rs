//! The built-in tools: read, write, edit, bash, ls, grep, find.

pub mod bash;
mod diff;
mod edit;
mod fs;
mod search;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use pi_observe_core::ContentKind;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use bash::{BashTool, child_environment};
pub use edit::EditTool;
pub use fs::{LsTool, ReadTool, WriteTool};
pub use search::{FindTool, GrepTool, project_entries};

use crate::provider::ToolSpec;

/// Largest tool output returned to the model, in bytes.
pub const MAX_OUTPUT_BYTES: usize = 50 * 1024;

/// The session facts exposed to child processes (`PI_*` variables).
#[derive(Debug, Clone, Default)]
pub struct SessionEnv {
    /// Set the variables (and `TRACEPARENT`); when false, also strip inherited ones.
    pub expose: bool,
    /// `PI_SESSION_ID`.
    pub session_id: Option<String>,
    /// `PI_SESSION_FILE`.
    pub session_file: Option<String>,
    /// `PI_PROVIDER`.
    pub provider: String,
    /// `PI_MODEL`.
    pub model: String,
    /// `PI_REASONING_LEVEL`.
    pub reasoning: Option<String>,
}

/// What a tool runs with.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// Working directory; relative paths resolve against it.
    pub cwd: PathBuf,
    /// Fires when the run is aborted.
    pub cancel: CancellationToken,
    /// Session environment for child processes.
    pub env: SessionEnv,
    /// Receives partial output while the tool runs (`tool_execution_update`), if someone listens.
    pub updates: Option<tokio::sync::mpsc::UnboundedSender<String>>,
    /// The model's id of this call (empty outside a turn).
    pub call_id: String,
}

impl ToolContext {
    /// Reports partial output (ignored when nobody listens).
    pub fn update(&self, output: impl Into<String>) {
        if let Some(updates) = &self.updates {
            let _ = updates.send(output.into());
        }
    }

    /// `path` resolved against the working directory.
    pub fn resolve(&self, path: &str) -> PathBuf {
        let p = Path::new(path);
        if p.is_absolute() { p.to_owned() } else { self.cwd.join(p) }
    }
}

/// A tool's result.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// Text for the model.
    pub content: String,
    /// Tool-specific metadata (kept in the session, not sent to the model).
    pub details: Option<Value>,
    /// Model usage the tool caused (a tool that calls a model itself reports it here); kept on
    /// the session's tool result, traced with `pi.call_kind=tool` and billed once.
    pub usage: Option<crate::message::Usage>,
    /// Upstream's `terminate`: when every tool of a turn says so, the agent ends on these
    /// results instead of asking the model again (a final structured-output tool).
    pub terminate: bool,
}

impl ToolOutput {
    /// Text only.
    pub fn text(content: impl Into<String>) -> Self {
        ToolOutput { content: content.into(), details: None, usage: None, terminate: false }
    }
}

/// Why a tool failed; the message goes back to the model as an error result.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// Arguments missing or of the wrong type.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// A file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// `edit` found no exact match.
    #[error("{path}: oldText not found (it must match exactly, including whitespace)")]
    EditNoMatch {
        /// The file.
        path: String,
    },
    /// `edit` found several matches.
    #[error("{path}: oldText matches {count} times; add context so it matches exactly once")]
    EditAmbiguous {
        /// The file.
        path: String,
        /// How many matches.
        count: usize,
    },
    /// The command ran too long and was killed.
    #[error("command timed out after {0} s and was killed")]
    Timeout(u64),
    /// The run was aborted.
    #[error("aborted")]
    Aborted,
    /// The tool is unknown.
    #[error("unknown tool {0:?}")]
    UnknownTool(String),
    /// Something else.
    #[error("{0}")]
    Other(String),
}

impl ToolError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        ToolError::Io { path: path.display().to_string(), source }
    }
}

/// The boxed future a tool returns.
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send + 'a>>;

/// The `name`, `description` and `parameters` (a `json!` schema, or the name of a constant
/// holding one as JSON text) of a built-in tool's [`Tool`] impl.
macro_rules! describe {
    ($name:literal, $description:expr, $schema:ident) => {
        describe!(@parts $name, $description, serde_json::from_str($schema).unwrap_or_default());
    };
    ($name:literal, $description:literal, $parameters:tt) => {
        describe!(@parts $name, $description, json!($parameters));
    };
    (@parts $name:literal, $description:expr, $parameters:expr) => {
        fn name(&self) -> &'static str {
            $name
        }
        fn description(&self) -> &'static str {
            $description
        }
        fn parameters(&self) -> Value {
            $parameters
        }
    };
}
pub(crate) use describe;

/// A tool the model can call.
pub trait Tool: Send + Sync {
    /// Name the model uses.
    fn name(&self) -> &str;
    /// What it does (sent to the model).
    fn description(&self) -> &str;
    /// JSON Schema of the arguments.
    fn parameters(&self) -> Value;
    /// Runs the tool.
    fn execute<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> ToolFuture<'a>;
    /// The content kind of this tool's output in telemetry: `shell_output` for bash,
    /// `file_content` for read, `tool_result` otherwise. A narrow `--capture` relies on it.
    fn output_kind(&self) -> ContentKind {
        ContentKind::ToolResult
    }
}

/// The payload key the contract uses for tool output of `kind`.
pub fn output_key(kind: ContentKind) -> &'static str {
    match kind {
        ContentKind::ShellOutput => pi_observe_core::names::SHELL_OUTPUT,
        ContentKind::FileContent => pi_observe_core::names::FILE_CONTENT,
        _ => pi_observe_core::names::TOOL_RESULT,
    }
}

/// Names of the built-in tools.
pub const BUILTIN_TOOLS: [&str; 7] = ["read", "write", "edit", "bash", "ls", "grep", "find"];

/// A registered tool's name as the contract exports it: a built-in tool's name (pi's own
/// vocabulary, also when an extension's tool overrides it) as is, without a copy; any other name
/// (an extension's) itself when identifier-shaped and not a secret, else `invalid`.
pub fn exported_tool_name(name: &str) -> std::borrow::Cow<'static, str> {
    match BUILTIN_TOOLS.iter().find(|builtin| **builtin == name) {
        Some(builtin) => std::borrow::Cow::Borrowed(builtin),
        None => std::borrow::Cow::Owned(pi_observe_core::identifier_or_invalid(name)),
    }
}

/// The tools an agent offers.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
    /// The tools offered and run (upstream's `setActiveTools`); `None`: all of them.
    active: Option<Arc<std::collections::BTreeSet<String>>>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.tools.iter().map(|t| t.name())).finish()
    }
}

impl ToolRegistry {
    /// No tools.
    pub fn empty() -> Self {
        Self::default()
    }

    /// The named built-in tools; an unknown name is an error naming it.
    pub fn builtin(names: &[&str]) -> Result<Self, ToolError> {
        let mut registry = ToolRegistry::empty();
        for name in names {
            let tool: Arc<dyn Tool> = match *name {
                "read" => Arc::new(ReadTool),
                "write" => Arc::new(WriteTool),
                "edit" => Arc::new(EditTool),
                "bash" => Arc::new(BashTool::default()),
                "ls" => Arc::new(LsTool),
                "grep" => Arc::new(GrepTool),
                "find" => Arc::new(FindTool),
                other => return Err(ToolError::UnknownTool(other.to_owned())),
            };
            registry.tools.push(tool);
        }
        Ok(registry)
    }

    /// All built-in tools.
    pub fn all_builtin() -> Self {
        Self::builtin(&BUILTIN_TOOLS).unwrap_or_default()
    }

    /// Adds a tool.
    pub fn with(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// Adds a tool, replacing one of the same name (an extension's tool overrides a built-in
    /// one, as upstream).
    pub fn with_override(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.retain(|t| t.name() != tool.name());
        self.tools.push(tool);
        self
    }

    /// Only the tools named are offered and run from now on (unknown names are ignored).
    pub fn with_active(mut self, names: &[String]) -> Self {
        self.active = Some(Arc::new(names.iter().cloned().collect()));
        self
    }

    fn is_active(&self, tool: &Arc<dyn Tool>) -> bool {
        self.active.as_ref().is_none_or(|active| active.contains(tool.name()))
    }

    /// Every tool's name and description, active or not (upstream's `getAllTools`).
    pub fn all(&self) -> Vec<(String, String)> {
        self.tools.iter().map(|t| (t.name().to_owned(), t.description().to_owned())).collect()
    }

    /// The active tools' names (upstream's `getActiveTools`).
    pub fn active_names(&self) -> Vec<String> {
        self.tools.iter().filter(|t| self.is_active(t)).map(|t| t.name().to_owned()).collect()
    }

    /// The active tool with this name.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.name() == name && self.is_active(t))
    }

    /// Specs of the active tools, for the provider.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools
            .iter()
            .filter(|t| self.is_active(t))
            .map(|t| ToolSpec {
                name: t.name().to_owned(),
                description: t.description().to_owned(),
                parameters: t.parameters(),
            })
            .collect()
    }
}

/// A required string argument.
pub(crate) fn str_arg<'a>(args: &'a Value, key: &str) -> Result<&'a str, ToolError> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::InvalidArguments(format!("`{key}` (string) is required")))
}

/// An optional non-negative integer argument.
pub(crate) fn u64_arg(args: &Value, key: &str) -> Result<Option<u64>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| ToolError::InvalidArguments(format!("`{key}` must be a non-negative integer"))),
    }
}

/// Cuts text to [`MAX_OUTPUT_BYTES`], keeping the head, with a note.
pub(crate) fn cap_head(mut text: String) -> String {
    if text.len() > MAX_OUTPUT_BYTES {
        let total = text.len();
        let mut cut = MAX_OUTPUT_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str(&format!("\n[output truncated: {total} bytes, showing the first {cut}]"));
    }
    text
}
