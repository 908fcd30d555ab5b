//! Events as upstream pi's JSON payloads, and extensions' JSON replies as hook results — pure
//! functions, the whole meaning of the process protocol's `event` / `result` messages
//! (`docs/extension-protocol.md`). A reply of the wrong shape is an error naming what was
//! expected; the caller treats it as a failing handler.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::events::AgentEvent;
use crate::extensions::{
    BeforeAgentStartEvent, BeforeAgentStartResult, BeforeCompactEvent, BeforeForkEvent, BeforeResult,
    BeforeSwitchEvent, BeforeTreeEvent, ContextEvent, HeaderPatch, InjectedMessage, InputAction, InputEvent,
    MessageEndEvent, ProviderHeadersEvent, ProviderRequestEvent, ProviderResponseEvent, ToolCallEvent, ToolCallResult,
    ToolResultEvent, ToolResultPatch, UserBashEvent, UserBashResult,
};
use crate::message::{ContentBlock, Message};

/// A reply that does not fit its event.
pub type WireError = String;

/// An event sent to a handler, as upstream pi's payload: `{"type": NAME, ...the event's fields}`.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum HookEvent<'a> {
    Input(&'a InputEvent),
    BeforeAgentStart(&'a BeforeAgentStartEvent),
    Context(&'a ContextEvent),
    #[serde(rename = "before_provider_headers")]
    ProviderHeaders(&'a ProviderHeadersEvent),
    #[serde(rename = "before_provider_request")]
    ProviderRequest(&'a ProviderRequestEvent),
    #[serde(rename = "after_provider_response")]
    ProviderResponse(&'a ProviderResponseEvent),
    ToolCall(&'a ToolCallEvent),
    ToolResult(&'a ToolResultEvent),
    MessageEnd(&'a MessageEndEvent),
    #[serde(rename = "session_before_compact")]
    BeforeCompact(&'a BeforeCompactEvent),
    #[serde(rename = "session_before_tree")]
    BeforeTree(&'a BeforeTreeEvent),
    #[serde(rename = "session_before_switch")]
    BeforeSwitch(&'a BeforeSwitchEvent),
    #[serde(rename = "session_before_fork")]
    BeforeFork(&'a BeforeForkEvent),
    UserBash(&'a UserBashEvent),
}

impl HookEvent<'_> {
    fn to_value(&self) -> Value {
        // Plain data (strings, numbers, JSON values): serializing it cannot fail.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// `input`.
pub fn input(e: &InputEvent) -> Value {
    HookEvent::Input(e).to_value()
}

/// `before_agent_start`.
pub fn before_agent_start(e: &BeforeAgentStartEvent) -> Value {
    HookEvent::BeforeAgentStart(e).to_value()
}

/// `context`.
pub fn context(e: &ContextEvent) -> Value {
    HookEvent::Context(e).to_value()
}

/// `before_provider_headers`.
pub fn provider_headers(e: &ProviderHeadersEvent) -> Value {
    HookEvent::ProviderHeaders(e).to_value()
}

/// `before_provider_request`.
pub fn provider_request(e: &ProviderRequestEvent) -> Value {
    HookEvent::ProviderRequest(e).to_value()
}

/// `after_provider_response`.
pub fn provider_response(e: &ProviderResponseEvent) -> Value {
    HookEvent::ProviderResponse(e).to_value()
}

/// `tool_call`.
pub fn tool_call(e: &ToolCallEvent) -> Value {
    HookEvent::ToolCall(e).to_value()
}

/// `tool_result`.
pub fn tool_result(e: &ToolResultEvent) -> Value {
    HookEvent::ToolResult(e).to_value()
}

/// `message_end`.
pub fn message_end(e: &MessageEndEvent) -> Value {
    HookEvent::MessageEnd(e).to_value()
}

/// `session_before_compact`, with upstream's `preparation` (what to summarize, the previous
/// summary; pi keeps the recent messages itself, so `firstKeptEntryId` is null and no turn is
/// split) and `customInstructions`.
pub fn before_compact(e: &BeforeCompactEvent) -> Value {
    let mut value = HookEvent::BeforeCompact(e).to_value();
    value["preparation"] = serde_json::json!({
        "firstKeptEntryId": null,
        "messagesToSummarize": e.messages_to_summarize,
        "turnPrefixMessages": [],
        "isSplitTurn": false,
        "tokensBefore": e.tokens_before,
        "previousSummary": e.previous_summary,
        "fileOps": {"read": [], "written": [], "edited": []},
    });
    value["branchEntries"] = Value::Array(Vec::new());
    value
}

/// `session_before_tree`.
pub fn before_tree(e: &BeforeTreeEvent) -> Value {
    HookEvent::BeforeTree(e).to_value()
}

/// `session_before_switch`.
pub fn before_switch(e: &BeforeSwitchEvent) -> Value {
    HookEvent::BeforeSwitch(e).to_value()
}

/// `user_bash`.
pub fn user_bash(e: &UserBashEvent) -> Value {
    HookEvent::UserBash(e).to_value()
}

/// A `user_bash` reply: `{"result": {"output", "exitCode", "cancelled", "truncated"}}` when the
/// extension ran the command itself, else nothing.
pub fn user_bash_result(reply: &Value) -> Result<Option<UserBashResult>, WireError> {
    let Some(result) = reply.get("result").filter(|r| !r.is_null()) else { return Ok(None) };
    let o = object(result, "as the command's result")?;
    Ok(Some(UserBashResult {
        output: text_field(o, "output")?.unwrap_or_default(),
        exit_code: o.get("exitCode").and_then(Value::as_i64),
        cancelled: o.get("cancelled").and_then(Value::as_bool).unwrap_or(false),
        truncated: o.get("truncated").and_then(Value::as_bool).unwrap_or(false),
    }))
}

/// `session_before_fork`.
pub fn before_fork(e: &BeforeForkEvent) -> Value {
    HookEvent::BeforeFork(e).to_value()
}

/// A notification (`session_start`, `turn_end`, …): the agent event as `--mode json` prints it.
pub fn notification(e: &AgentEvent) -> Value {
    serde_json::to_value(e).unwrap_or(Value::Null)
}

fn object<'a>(reply: &'a Value, what: &str) -> Result<&'a serde_json::Map<String, Value>, WireError> {
    reply.as_object().ok_or_else(|| format!("expected an object {what}, found {}", kind(reply)))
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn text_field(o: &serde_json::Map<String, Value>, key: &str) -> Result<Option<String>, WireError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!("{key}: expected a string, found {}", kind(other))),
    }
}

/// `{"action": "continue" | "transform" (+ "text") | "handled"}`.
pub fn input_action(reply: &Value) -> Result<Option<InputAction>, WireError> {
    if reply.is_null() {
        return Ok(None);
    }
    let o = object(reply, r#"like {"action": "continue"}"#)?;
    match o.get("action").and_then(Value::as_str) {
        Some("continue") => Ok(Some(InputAction::Continue)),
        Some("handled") => Ok(Some(InputAction::Handled)),
        Some("transform") => match text_field(o, "text")? {
            Some(text) => Ok(Some(InputAction::Transform { text })),
            None => Err("transform: expected a \"text\"".into()),
        },
        _ => Err(r#"action: expected "continue", "transform" or "handled""#.into()),
    }
}

/// `{"message"?: {customType, content, display}, "messages"?: […], "systemPrompt"?: "…"}`.
pub fn before_agent_start_result(reply: &Value) -> Result<Option<BeforeAgentStartResult>, WireError> {
    if reply.is_null() {
        return Ok(None);
    }
    let o = object(reply, "with message(s) or systemPrompt")?;
    let mut result = BeforeAgentStartResult { system_prompt: text_field(o, "systemPrompt")?, ..Default::default() };
    let one = o.get("message").filter(|m| !m.is_null()).into_iter();
    let many = o.get("messages").and_then(Value::as_array).into_iter().flatten();
    for m in one.chain(many) {
        let m = object(m, "as an injected message")?;
        let content = match m.get("content") {
            Some(Value::String(s)) => s.clone(),
            Some(blocks @ Value::Array(_)) => serde_json::from_value::<Vec<ContentBlock>>(blocks.clone())
                .map(|b| crate::message::joined_text(&b))
                .map_err(|e| format!("message.content: {e}"))?,
            _ => return Err("message.content: expected a string or content blocks".into()),
        };
        result.messages.push(InjectedMessage {
            custom_type: text_field(m, "customType")?.unwrap_or_else(|| "extension".into()),
            content,
            display: m.get("display").and_then(Value::as_bool).unwrap_or(true),
        });
    }
    Ok(Some(result))
}

/// `{"messages": […]}`: the replacement context.
pub fn context_result(reply: &Value) -> Result<Option<Vec<Message>>, WireError> {
    if reply.is_null() {
        return Ok(None);
    }
    let messages = object(reply, r#"like {"messages": [...]}"#)?.get("messages").cloned().unwrap_or(Value::Null);
    if messages.is_null() {
        return Ok(None);
    }
    serde_json::from_value(messages).map(Some).map_err(|e| format!("messages: {e}"))
}

/// `{"headers": {name: value | null}}` (or the map itself).
pub fn header_patch(reply: &Value) -> Result<Option<HeaderPatch>, WireError> {
    if reply.is_null() {
        return Ok(None);
    }
    let o = object(reply, "of headers")?;
    let map = match o.get("headers") {
        Some(Value::Object(inner)) => inner,
        _ => o,
    };
    let mut patch = HeaderPatch::new();
    for (name, value) in map {
        match value {
            Value::String(s) => patch.insert(name.clone(), Some(s.clone())),
            Value::Null => patch.insert(name.clone(), None),
            other => return Err(format!("headers.{name}: expected a string or null, found {}", kind(other))),
        };
    }
    Ok(Some(patch))
}

/// `{"payload": …}`: the replacement request body.
pub fn request_payload(reply: &Value) -> Result<Option<Value>, WireError> {
    if reply.is_null() {
        return Ok(None);
    }
    Ok(object(reply, r#"like {"payload": {...}}"#)?.get("payload").filter(|p| !p.is_null()).cloned())
}

/// `{"block"?: true, "reason"?: "…", "input"?: {…}}`.
pub fn tool_call_result(reply: &Value) -> Result<Option<ToolCallResult>, WireError> {
    #[derive(Deserialize)]
    struct Reply {
        block: Option<bool>,
        reason: Option<String>,
        input: Option<Value>,
    }
    let Some(Reply { block, reason, input }) = typed(reply, "with block/reason/input")? else { return Ok(None) };
    if input.as_ref().is_some_and(|i| !i.is_object()) {
        return Err("input: expected an object".into());
    }
    Ok(Some(ToolCallResult { block: block.unwrap_or(false), reason, input }))
}

/// `{"content"?: […], "details"?: …, "isError"?: bool}`.
pub fn tool_result_patch(reply: &Value) -> Result<Option<ToolResultPatch>, WireError> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Reply {
        content: Option<Vec<ContentBlock>>,
        details: Option<Value>,
        is_error: Option<bool>,
    }
    let Some(Reply { content, details, is_error }) = typed(reply, "with content/details/isError")? else {
        return Ok(None);
    };
    Ok(Some(ToolResultPatch { content, details, is_error }))
}

/// A reply as `T` (`what` says the shape expected of an object); `None` for `null`.
fn typed<T: serde::de::DeserializeOwned>(reply: &Value, what: &str) -> Result<Option<T>, WireError> {
    if reply.is_null() {
        return Ok(None);
    }
    object(reply, what)?;
    serde_json::from_value(reply.clone()).map(Some).map_err(|e| e.to_string())
}

/// `{"message": {…}}`: the replacement message.
pub fn message_replacement(reply: &Value) -> Result<Option<Message>, WireError> {
    if reply.is_null() {
        return Ok(None);
    }
    match object(reply, r#"like {"message": {...}}"#)?.get("message") {
        None | Some(Value::Null) => Ok(None),
        Some(m) => serde_json::from_value(m.clone()).map(Some).map_err(|e| format!("message: {e}")),
    }
}

/// `{"cancel"?: true, "summary"?: "…"}` (upstream's `compaction.summary` also accepted).
pub fn before_result(reply: &Value) -> Result<Option<BeforeResult>, WireError> {
    if reply.is_null() {
        return Ok(None);
    }
    let o = object(reply, "with cancel or summary")?;
    let cancel = o.get("cancel").and_then(Value::as_bool).unwrap_or(false);
    let summary = match text_field(o, "summary")? {
        Some(s) => Some(s),
        None => o.get("compaction").and_then(|c| c.get("summary")).and_then(Value::as_str).map(str::to_owned),
    };
    Ok(Some(BeforeResult { cancel, summary }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extensions::PromptSource;
    use serde_json::json;

    #[test]
    fn replies_map_to_results_and_wrong_shapes_say_what_was_expected() {
        assert_eq!(input_action(&json!(null)).unwrap(), None);
        assert_eq!(
            input_action(&json!({"action": "transform", "text": "x"})).unwrap(),
            Some(InputAction::Transform { text: "x".into() })
        );
        assert!(input_action(&json!({"action": "nope"})).unwrap_err().contains("continue"));
        assert!(input_action(&json!("continue")).unwrap_err().contains("found a string"));

        let blocked = tool_call_result(&json!({"block": true, "reason": "no"})).unwrap().unwrap();
        assert!(blocked.block && blocked.reason.as_deref() == Some("no"));
        let mutated = tool_call_result(&json!({"input": {"command": "ls"}})).unwrap().unwrap();
        assert_eq!(mutated.input, Some(json!({"command": "ls"})));
        assert!(tool_call_result(&json!({"block": "yes"})).is_err());

        let patch = tool_result_patch(&json!({"content": [{"type": "text", "text": "1: a"}], "isError": false}))
            .unwrap()
            .unwrap();
        assert_eq!(patch.content, Some(vec![ContentBlock::text("1: a")]));
        let headers = header_patch(&json!({"headers": {"x-trace": "1", "x-old": null}})).unwrap().unwrap();
        assert_eq!(headers.get("x-old"), Some(&None));
        let start =
            before_agent_start_result(&json!({"message": {"customType": "t", "content": "hi"}, "systemPrompt": "s"}))
                .unwrap()
                .unwrap();
        assert_eq!((start.messages.len(), start.system_prompt.as_deref()), (1, Some("s")));
        assert_eq!(
            before_result(&json!({"compaction": {"summary": "S"}})).unwrap().unwrap().summary.as_deref(),
            Some("S")
        );
    }

    #[test]
    fn events_carry_upstream_field_names() {
        let e = input(&InputEvent { text: "hi".into(), images: 0, source: PromptSource::Interactive });
        assert_eq!(e, json!({"type": "input", "text": "hi", "images": 0, "source": "interactive"}));
        let e = tool_call(&ToolCallEvent { tool_call_id: "c".into(), tool_name: "bash".into(), input: json!({}) });
        assert_eq!(e, json!({"type": "tool_call", "toolCallId": "c", "toolName": "bash", "input": {}}));
        let headers = vec![("retry-after".to_owned(), "2".to_owned())];
        let e = provider_response(&ProviderResponseEvent { status: 429, headers });
        assert_eq!(e, json!({"type": "after_provider_response", "status": 429, "headers": {"retry-after": "2"}}));
        let e = before_tree(&BeforeTreeEvent { old_leaf_id: None, target_id: "t".into(), summarize: true });
        assert_eq!(e, json!({"type": "session_before_tree", "oldLeafId": null, "targetId": "t", "summarize": true}));
        let e = before_switch(&BeforeSwitchEvent { reason: "new".into(), target_session_file: None });
        assert_eq!(e, json!({"type": "session_before_switch", "reason": "new", "targetSessionFile": null}));
        assert_eq!(notification(&AgentEvent::AgentStart)["type"], "agent_start");
    }
}
