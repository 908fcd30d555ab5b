//! How sensitive a payload field is: [`Class`], and the [`ContentKind`]s a policy can capture.

use std::borrow::Cow;
use std::fmt;

/// The kinds of content a policy can opt in to capturing, one by one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ContentKind {
    /// User prompts and system prompts.
    Prompt,
    /// Model completions (assistant text).
    Completion,
    /// Model thinking / reasoning text.
    Thinking,
    /// Tool call arguments.
    ToolArgs,
    /// Tool results.
    ToolResult,
    /// Output of shell commands.
    ShellOutput,
    /// File contents read or written by tools.
    FileContent,
    /// Provider request payloads and response bodies.
    ProviderPayload,
    /// HTTP header values.
    Header,
    /// Error and retry text that came from outside pi: a tool's or provider's message, a file
    /// path in an I/O error, an extension's error. Errors are content: by default an error
    /// record carries only its type name from pi's own vocabulary.
    ErrorText,
}

impl ContentKind {
    /// Every content kind, in declaration order.
    pub const ALL: [ContentKind; 10] = [
        ContentKind::Prompt,
        ContentKind::Completion,
        ContentKind::Thinking,
        ContentKind::ToolArgs,
        ContentKind::ToolResult,
        ContentKind::ShellOutput,
        ContentKind::FileContent,
        ContentKind::ProviderPayload,
        ContentKind::Header,
        ContentKind::ErrorText,
    ];

    /// True for the kinds a conversation sent to a model carries (its earlier prompts, replies,
    /// reasoning, tool calls and tool outputs): what a captured `provider_payload` holds besides
    /// itself.
    pub fn in_conversation(self) -> bool {
        !matches!(self, ContentKind::ProviderPayload | ContentKind::Header | ContentKind::ErrorText)
    }

    /// The snake_case name used in JSON, the CLI (`--capture`) and settings.
    pub fn as_str(self) -> &'static str {
        match self {
            ContentKind::Prompt => "prompt",
            ContentKind::Completion => "completion",
            ContentKind::Thinking => "thinking",
            ContentKind::ToolArgs => "tool_args",
            ContentKind::ToolResult => "tool_result",
            ContentKind::ShellOutput => "shell_output",
            ContentKind::FileContent => "file_content",
            ContentKind::ProviderPayload => "provider_payload",
            ContentKind::Header => "header",
            ContentKind::ErrorText => "error_text",
        }
    }

    /// Parses a kind name in its singular or plural spelling (`prompt`/`prompts`,
    /// `tool_arg`/`tool_args`); [`ContentKind::as_str`] is the one printed.
    pub fn parse(name: &str) -> Option<ContentKind> {
        // Singular and plural spellings alike: `tool_arg`/`tool_args`, `prompt`/`prompts`.
        let stem = |s: &str| s.strip_suffix('s').unwrap_or(s).to_owned();
        let name = stem(name.trim());
        ContentKind::ALL.into_iter().find(|kind| stem(kind.as_str()) == name)
    }

    pub(crate) fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

impl fmt::Display for ContentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How sensitive a field is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    /// Metadata that is always exported: ids, names, counts, sizes, costs, durations.
    Safe,
    /// User or model content: exported only when the policy captures this kind.
    Content(ContentKind),
    /// Credentials: never exported, not even with capture on.
    Secret,
}

impl Class {
    /// `safe`, `secret`, or `content:<kind>`.
    pub fn label(self) -> Cow<'static, str> {
        match self {
            Class::Safe => Cow::Borrowed("safe"),
            Class::Secret => Cow::Borrowed("secret"),
            Class::Content(kind) => Cow::Owned(format!("content:{kind}")),
        }
    }

    /// Parses [`Class::label`] output.
    pub fn parse(label: &str) -> Option<Class> {
        match label {
            "safe" => Some(Class::Safe),
            "secret" => Some(Class::Secret),
            other => other.strip_prefix("content:").and_then(ContentKind::parse).map(Class::Content),
        }
    }
}
