//! The process protocol's messages as types (`docs/extension-protocol.md`): the handshake (pi's
//! `hello`, the extension's `register`), the requests pi sends ([`Request`]), the messages an
//! extension writes back ([`Message`]), and the replies of commands, tools and the start-up
//! events. The hook events' payloads and replies are in `wire.rs`.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::message::{ContentBlock, Usage};

/// A message pi writes to an extension; requests get an `id` added when sent.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Request<'a> {
    /// The first message: the protocol pi speaks, the working directory, whether a UI is there.
    Hello {
        protocol: u32,
        cwd: &'a Path,
        #[serde(rename = "hasUI")]
        has_ui: bool,
        /// Every model pi knows, in upstream's `Model` shape (`ctx.modelRegistry`).
        #[serde(skip_serializing_if = "Option::is_none")]
        models: Option<Value>,
    },
    /// An event for a handler it registered.
    Event { event: &'a str, payload: Value, ctx: Value },
    /// A `/command` it registered.
    Command { name: &'a str, args: &'a str, ctx: Value },
    /// A model request for a provider it registered (upstream's `streamSimple`): `model` in
    /// upstream's shape, `context` (`systemPrompt`, `messages`, `tools`), `options`
    /// (`reasoning`). Stream events come as `stream` lines before the result.
    Provider { provider: &'a str, model: Value, context: Value, options: Value },
    /// A key shortcut it registered was pressed (`key`: upstream's key id, `ctrl+alt+p`).
    Shortcut { key: &'a str, ctx: Value },
    /// A call of a tool it registered (`toolCallId`: the model's id of the call).
    Tool {
        name: &'a str,
        params: &'a Value,
        ctx: Value,
        #[serde(rename = "toolCallId", skip_serializing_if = "str::is_empty")]
        tool_call_id: &'a str,
    },
    /// Stop now.
    Shutdown,
}

impl Request<'_> {
    /// The message as a JSON object.
    pub(crate) fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// A message an extension writes after its handshake.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Message {
    /// The answer to request `id`.
    Result {
        id: u64,
        #[serde(default)]
        result: Value,
    },
    /// Request `id` failed.
    Error { id: u64, message: Option<String> },
    /// A line for its own log (needs no answer).
    Log,
}

/// A command's reply: text to show, a prompt to run instead.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct CommandReply {
    pub text: Option<String>,
    pub prompt: Option<String>,
}

/// `project_trust`'s reply: `trusted` is `yes`, `no` or undecided.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct TrustReply {
    pub trusted: Option<String>,
    #[serde(default)]
    pub remember: bool,
}

/// `resources_discover`'s reply: folders relative to the working directory.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResourcesReply {
    #[serde(default)]
    pub skill_paths: Vec<String>,
    #[serde(default)]
    pub prompt_paths: Vec<String>,
}

/// A tool call's reply: `{"content": [...] | "text", "details"?, "isError"?, "usage"?}`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolReply {
    pub content: Option<ToolContent>,
    pub details: Option<Value>,
    #[serde(default)]
    pub is_error: bool,
    pub usage: Option<Usage>,
    /// Upstream's `terminate` (see `ToolOutput::terminate`).
    #[serde(default)]
    pub terminate: bool,
}

/// A tool's output: text, or content blocks.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum ToolContent {
    Text(String),
    Blocks(Vec<ContentBlock>),
}

/// The protocol version pi speaks; `hello` carries it and `register` must repeat it.
pub const PROTOCOL_VERSION: u32 = 1;

/// A tool an extension offers the model.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// What it does (shown to the model).
    #[serde(default)]
    pub description: String,
    /// JSON schema of its arguments.
    #[serde(default = "empty_schema")]
    pub parameters: Value,
}

fn empty_schema() -> Value {
    serde_json::json!({"type": "object", "properties": {}})
}

/// A `/command` an extension handles.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CommandSpec {
    /// The command's name (without `/`).
    pub name: String,
    /// What it does.
    #[serde(default)]
    pub description: String,
}

/// A provider an extension serves: its name and models (upstream's model fields: `id`, `name`,
/// `reasoning`, `input`, `cost`, `contextWindow`, `maxTokens`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ProviderSpec {
    /// The provider's name (`--provider NAME`).
    pub name: String,
    /// Its models.
    #[serde(default)]
    pub models: Vec<Value>,
}

/// A key an extension handles: upstream's key id (`ctrl+alt+p`, `ctrl+shift+u`, `alt+m`, `f5`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ShortcutSpec {
    /// The key id.
    pub key: String,
    /// What it does.
    #[serde(default)]
    pub description: String,
}

/// A command-line option an extension takes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct FlagSpec {
    /// The option's name (without `--`).
    pub name: String,
}

/// The extension's `register` message.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Register {
    /// Protocol version it speaks.
    pub protocol: u32,
    /// Its name (shown in hook spans and messages).
    pub name: String,
    /// The events it handles (upstream's names: `tool_call`, `session_start`, …).
    #[serde(default)]
    pub events: Vec<String>,
    /// Tools it registers.
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// Commands it registers.
    #[serde(default)]
    pub commands: Vec<CommandSpec>,
    /// Command-line options it takes (upstream's `pi.registerFlag`): `pi --name [value]`.
    #[serde(default)]
    pub flags: Vec<FlagSpec>,
    /// Keys it handles in the interactive mode (upstream's `pi.registerShortcut`).
    #[serde(default)]
    pub shortcuts: Vec<ShortcutSpec>,
    /// Providers it serves (upstream's `pi.registerProvider` with a `streamSimple`).
    #[serde(default)]
    pub providers: Vec<ProviderSpec>,
    /// Events it named that this pi does not know (a newer upstream's): left out of `events`,
    /// for one warning; they never reject the extension.
    #[serde(skip)]
    pub ignored_events: Vec<String>,
}

impl Register {
    /// Parses and checks the handshake line.
    pub fn parse(line: &str) -> Result<Register, String> {
        let shown: String = line.chars().take(80).collect();
        let value: Value = serde_json::from_str(line).map_err(|_| format!("its handshake is not JSON: {shown:?}"))?;
        if value.get("type").and_then(Value::as_str) == Some("error") {
            // An extension host that could not load the extension says why instead of registering.
            let message = value.get("message").and_then(Value::as_str).unwrap_or("no reason given");
            let first: String = message.lines().next().unwrap_or("").chars().take(300).collect();
            return Err(format!("failed to load: {first}"));
        }
        if value.get("type").and_then(Value::as_str) != Some("register") {
            return Err(format!("its first message is not a register message: {shown:?}"));
        }
        let mut register: Register =
            serde_json::from_value(value).map_err(|e| format!("its register message is malformed: {e}"))?;
        if register.protocol != PROTOCOL_VERSION {
            return Err(format!("speaks protocol {}, pi speaks {PROTOCOL_VERSION}", register.protocol));
        }
        if register.name.trim().is_empty() {
            return Err("registered without a name".into());
        }
        let (known, unknown) = register.events.into_iter().partition(|e| super::EVENTS.contains(&e.as_str()));
        (register.events, register.ignored_events) = (known, unknown);
        Ok(register)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshakes_are_checked() {
        let ok = Register::parse(r#"{"type":"register","protocol":1,"name":"gate","events":["tool_call"]}"#).unwrap();
        assert_eq!(ok.events, ["tool_call"]);
        for (line, why) in [
            ("hi", "not JSON"),
            (r#"{"type":"result"}"#, "not a register"),
            (
                r#"{"type":"error","message":"SyntaxError: Unexpected token\n  at x.ts:3"}"#,
                "failed to load: SyntaxError: Unexpected token",
            ),
            (r#"{"type":"register","protocol":2,"name":"x"}"#, "protocol 2"),
            (r#"{"type":"register","protocol":1,"name":" "}"#, "without a name"),
        ] {
            assert!(Register::parse(line).unwrap_err().contains(why), "{line}");
        }
        // An event of a newer upstream is left out and kept for a warning, not a failed start.
        let newer = r#"{"type":"register","protocol":1,"name":"x","events":["tool_call","session_switch_v9"]}"#;
        let newer = Register::parse(newer).unwrap();
        assert_eq!((newer.events, newer.ignored_events), (vec!["tool_call".into()], vec!["session_switch_v9".into()]));
    }
}
