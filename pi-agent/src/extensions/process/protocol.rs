//! The handshake of the process protocol (`docs/extension-protocol.md`): what an extension says
//! about itself before any event is sent.

use serde::Deserialize;
use serde_json::Value;

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
}

impl Register {
    /// Parses and checks the handshake line.
    pub fn parse(line: &str) -> Result<Register, String> {
        let shown: String = line.chars().take(80).collect();
        let value: Value = serde_json::from_str(line).map_err(|_| format!("its handshake is not JSON: {shown:?}"))?;
        if value.get("type").and_then(Value::as_str) != Some("register") {
            return Err(format!("its first message is not a register message: {shown:?}"));
        }
        let register: Register =
            serde_json::from_value(value).map_err(|e| format!("its register message is malformed: {e}"))?;
        if register.protocol != PROTOCOL_VERSION {
            return Err(format!("speaks protocol {}, pi speaks {PROTOCOL_VERSION}", register.protocol));
        }
        if register.name.trim().is_empty() {
            return Err("registered without a name".into());
        }
        if let Some(unknown) = register.events.iter().find(|e| !super::EVENTS.contains(&e.as_str())) {
            return Err(format!("registered for an unknown event {unknown:?}"));
        }
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
            (r#"{"type":"register","protocol":2,"name":"x"}"#, "protocol 2"),
            (r#"{"type":"register","protocol":1,"name":" "}"#, "without a name"),
            (r#"{"type":"register","protocol":1,"name":"x","events":["tool_cal"]}"#, "unknown event"),
        ] {
            assert!(Register::parse(line).unwrap_err().contains(why), "{line}");
        }
    }
}
