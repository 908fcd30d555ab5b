//! OpenAI Responses (streaming): OpenAI's own models upstream (`openai-responses`) and Azure
//! OpenAI (`azure-openai-responses`), mapped the way upstream's `packages/ai` maps them —
//! reasoning items (with their encrypted content, carried back on the next turn), messages,
//! function calls (`call_id|item_id` ids), usage with cached tokens, and the response status as
//! the stop reason.
//!
//! Azure differs only at the edge: the key goes in an `api-key` header, the URL carries
//! `?api-version=` (`AZURE_OPENAI_API_VERSION`, default `v1`), the base URL comes from
//! `AZURE_OPENAI_BASE_URL` or `AZURE_OPENAI_RESOURCE_NAME` (else the model's), and the body's
//! `model` is the deployment (`AZURE_OPENAI_DEPLOYMENT_NAME_MAP`: `model=deployment,…`; else the
//! model id).

use serde_json::{Value, json};

use super::assemble::Assembled;
use super::http::HttpConfig;
use super::sse::SseEvent;
use super::wire::{HttpProvider, Sink, Stream, Wire, bearer};
use super::{ProviderError, ProviderRequest, StreamEvent};
use crate::message::{AssistantMessage, ContentBlock, Message, StopReason, Usage, joined_text};

const OPENAI_BASE: &str = "https://api.openai.com/v1";
/// Azure's API version when `AZURE_OPENAI_API_VERSION` is not set.
const AZURE_API_VERSION: &str = "v1";

/// Which service speaks the Responses API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// OpenAI (or a server speaking its Responses API): `Authorization: Bearer`.
    OpenAi,
    /// Azure OpenAI: `api-key`, `api-version`, deployments.
    Azure,
}

/// The Responses API's wire format, for OpenAI or Azure.
#[derive(Debug)]
pub struct ResponsesWire {
    flavor: Flavor,
    /// Azure: model id → deployment name.
    deployments: Vec<(String, String)>,
}

/// The OpenAI / Azure OpenAI Responses provider.
pub type ResponsesProvider = HttpProvider<ResponsesWire>;

impl ResponsesProvider {
    /// A provider named `name` on OpenAI's Responses API. Its key comes from the config (the
    /// caller reads the provider's variable, `OPENAI_API_KEY`); one is required unless a base
    /// URL is given.
    pub fn openai(config: HttpConfig, name: &str) -> Result<Self, ProviderError> {
        HttpProvider::keyed(config, name, ResponsesWire::new(Flavor::OpenAi), "OPENAI_API_KEY")
    }

    /// Azure OpenAI. The resource's base URL: the config's (`--base-url`), else
    /// `AZURE_OPENAI_BASE_URL`, else from `AZURE_OPENAI_RESOURCE_NAME`, else `model_base` (a
    /// `models.json` entry's); the key (`AZURE_OPENAI_API_KEY`) is the caller's to give.
    pub fn azure(mut config: HttpConfig, name: &str, model_base: Option<&str>) -> Result<Self, ProviderError> {
        if config.base_url.is_none() {
            config.base_url = azure_base_url().or_else(|| model_base.map(str::to_owned));
        }
        if config.base_url.is_none() {
            return Err(ProviderError::Config(
                "AZURE_OPENAI_BASE_URL or AZURE_OPENAI_RESOURCE_NAME is not set (where is your Azure OpenAI resource?)"
                    .into(),
            ));
        }
        HttpProvider::of(config, name, ResponsesWire::new(Flavor::Azure))
    }

    /// Azure's deployments as `AZURE_OPENAI_DEPLOYMENT_NAME_MAP` writes them
    /// (`model=deployment,…`); a model not named is deployed under its id.
    pub fn deployments(mut self, map: &str) -> Self {
        self.wire.deployments = parse_deployments(map);
        self
    }
}

impl ResponsesWire {
    fn new(flavor: Flavor) -> Self {
        let map = match flavor {
            Flavor::Azure => std::env::var("AZURE_OPENAI_DEPLOYMENT_NAME_MAP").unwrap_or_default(),
            Flavor::OpenAi => String::new(),
        };
        ResponsesWire { flavor, deployments: parse_deployments(&map) }
    }

    /// The model name the body carries: Azure's deployment, else the id.
    fn model_name(&self, id: &str) -> String {
        match self.flavor {
            Flavor::OpenAi => id.to_owned(),
            Flavor::Azure => self.deployments.iter().find(|(m, _)| m == id).map_or(id, |(_, d)| d).to_owned(),
        }
    }
}

/// `model=deployment,…` as pairs (malformed pairs left out).
fn parse_deployments(map: &str) -> Vec<(String, String)> {
    map.split(',')
        .filter_map(|pair| pair.split_once('='))
        .map(|(id, deployment)| (id.trim().to_owned(), deployment.trim().to_owned()))
        .filter(|(id, deployment)| !id.is_empty() && !deployment.is_empty())
        .collect()
}

/// `AZURE_OPENAI_BASE_URL`, else `https://RESOURCE.openai.azure.com/openai/v1` from
/// `AZURE_OPENAI_RESOURCE_NAME`.
fn azure_base_url() -> Option<String> {
    let var = |name: &str| std::env::var(name).ok().map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
    var("AZURE_OPENAI_BASE_URL")
        .or_else(|| var("AZURE_OPENAI_RESOURCE_NAME").map(|r| format!("https://{r}.openai.azure.com/openai/v1")))
}

impl Wire for ResponsesWire {
    type State = StreamState;
    const BASE: &'static str = OPENAI_BASE;

    fn path(&self, _: &ProviderRequest) -> String {
        match self.flavor {
            Flavor::OpenAi => "responses".to_owned(),
            Flavor::Azure => {
                let version = std::env::var("AZURE_OPENAI_API_VERSION")
                    .ok()
                    .filter(|v| !v.trim().is_empty())
                    .unwrap_or_else(|| AZURE_API_VERSION.to_owned());
                format!("responses?api-version={}", version.trim())
            }
        }
    }

    fn headers(&self, key: Option<&str>) -> Vec<(&'static str, String)> {
        match self.flavor {
            Flavor::OpenAi => bearer(key),
            Flavor::Azure => key.map(|key| ("api-key", key.to_owned())).into_iter().collect(),
        }
    }

    fn body(&self, request: &ProviderRequest) -> Value {
        request_body(request, &self.model_name(&request.model.id))
    }
}

/// The request as upstream builds it for `model_name`: `input` items, `store: false`, tools as
/// functions, reasoning (with its encrypted content returned) for reasoning models given a level.
fn request_body(request: &ProviderRequest, model_name: &str) -> Value {
    let model = &request.model;
    let mut input = Vec::new();
    if let Some(system) = &request.system_prompt {
        let role = if model.reasoning { "developer" } else { "system" };
        input.push(json!({"role": role, "content": system}));
    }
    for (index, message) in request.messages.iter().enumerate() {
        push_message(&mut input, index, message);
    }
    let mut body = json!({
        "model": model_name,
        "input": input,
        "stream": true,
        "store": false,
        "max_output_tokens": model.max_tokens,
    });
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "name": t.name, "description": t.description,
                       "parameters": t.parameters, "strict": false})
            })
            .collect();
    }
    if model.reasoning
        && let Some(level) = request.reasoning.as_deref().filter(|l| *l != "off")
    {
        body["reasoning"] = json!({"effort": level, "summary": "auto"});
        body["include"] = json!(["reasoning.encrypted_content"]);
    }
    body
}

/// One conversation message as Responses input items.
fn push_message(input: &mut Vec<Value>, index: usize, message: &Message) {
    match message {
        Message::User(m) => {
            let parts = m.content.parts(
                |text| json!({"type": "input_text", "text": text}),
                |data, mime| json!({"type": "input_image", "image_url": format!("data:{mime};base64,{data}")}),
            );
            let parts = parts.unwrap_or_else(|| vec![json!({"type": "input_text", "text": m.content.text()})]);
            input.push(json!({"role": "user", "content": parts}));
        }
        Message::Assistant(m) => {
            for block in &m.content {
                match block {
                    // The reasoning item as the API returned it (encrypted content included).
                    ContentBlock::Thinking { signature: Some(item), .. } => {
                        if let Ok(item) = serde_json::from_str::<Value>(item) {
                            input.push(item);
                        }
                    }
                    ContentBlock::Text { text } => input.push(json!({
                        "type": "message", "role": "assistant", "status": "completed", "id": format!("msg_{index}"),
                        "content": [{"type": "output_text", "text": text, "annotations": []}],
                    })),
                    ContentBlock::ToolCall { id, name, arguments } => {
                        let (call_id, item_id) = split_call_id(id);
                        let arguments = match arguments {
                            Value::String(raw) => raw.clone(),
                            other => other.to_string(),
                        };
                        let mut call = json!({"type": "function_call", "call_id": call_id, "name": name,
                                              "arguments": arguments});
                        if let Some(item_id) = item_id {
                            call["id"] = Value::String(item_id.to_owned());
                        }
                        input.push(call);
                    }
                    ContentBlock::Thinking { .. } | ContentBlock::Image { .. } => {}
                }
            }
        }
        Message::ToolResult(m) => {
            let (call_id, _) = split_call_id(&m.tool_call_id);
            let text = joined_text(&m.content);
            let output = if text.is_empty() { "(see attached image)".to_owned() } else { text };
            input.push(json!({"type": "function_call_output", "call_id": call_id, "output": output}));
        }
        other => {
            if let Some(text) = other.context_text() {
                input.push(json!({"role": "user", "content": [{"type": "input_text", "text": text}]}));
            }
        }
    }
}

/// Upstream's tool-call id `call_id|item_id` (a call from another API has no `|`).
fn split_call_id(id: &str) -> (&str, Option<&str>) {
    match id.split_once('|') {
        Some((call, item)) => (call, Some(item).filter(|i| !i.is_empty())),
        None => (id, None),
    }
}

/// What the current output item is.
enum Item {
    Reasoning { summary: String },
    Message,
    Call { index: usize },
}

#[derive(Default)]
pub(crate) struct StreamState {
    text: String,
    /// Reasoning summaries, and each reasoning item as returned (sent back next turn).
    thinking: Vec<(String, String)>,
    calls: Vec<(String, String, String)>,
    current: Option<Item>,
    usage: Usage,
    status: Option<String>,
    model: Option<String>,
}

impl Stream for StreamState {
    /// Handles one event (`data:` carries its `type`); `Ok(true)` at the response's end.
    fn on_event(&mut self, event: SseEvent, sink: Sink<'_>) -> Result<bool, ProviderError> {
        let data = event.data.as_str();
        let event: Value =
            serde_json::from_str(data).map_err(|e| ProviderError::Stream(format!("event is not JSON ({e})")))?;
        let text = |key: &str| event.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
        match event.get("type").and_then(Value::as_str).unwrap_or_default() {
            "response.output_item.added" => self.item_added(&event["item"], sink)?,
            "response.reasoning_summary_text.delta" => {
                if let Some(Item::Reasoning { summary }) = &mut self.current {
                    let delta = text("delta");
                    summary.push_str(&delta);
                    sink(StreamEvent::ThinkingDelta(delta));
                }
            }
            "response.reasoning_summary_part.done" => {
                if let Some(Item::Reasoning { summary }) = &mut self.current {
                    summary.push_str("\n\n");
                    sink(StreamEvent::ThinkingDelta("\n\n".into()));
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                if let Some(Item::Message) = self.current {
                    let delta = text("delta");
                    self.text.push_str(&delta);
                    sink(StreamEvent::TextDelta(delta));
                }
            }
            "response.function_call_arguments.delta" => {
                if let Some(Item::Call { index }) = self.current {
                    let delta = text("delta");
                    self.calls[index].2.push_str(&delta);
                    sink(StreamEvent::ToolCallDelta { index, delta });
                }
            }
            "response.function_call_arguments.done" => {
                if let Some(Item::Call { index }) = self.current {
                    self.calls[index].2 = text("arguments");
                }
            }
            "response.output_item.done" => self.item_done(&event["item"], sink),
            "response.completed" | "response.incomplete" => {
                self.completed(&event["response"]);
                for index in 0..self.calls.len() {
                    sink(StreamEvent::ToolCallEnd { index });
                }
                sink(StreamEvent::Done { stop_reason: self.stop_reason() });
                return Ok(true);
            }
            "error" => {
                return Err(ProviderError::Provider(format!("Error Code {}: {}", text("code"), text("message"))));
            }
            "response.failed" => {
                let response = &event["response"];
                let error = &response["error"];
                let why =
                    match (error.get("code").and_then(Value::as_str), error.get("message").and_then(Value::as_str)) {
                        (code, Some(message)) => format!("{}: {message}", code.unwrap_or("unknown")),
                        _ => match response.pointer("/incomplete_details/reason").and_then(Value::as_str) {
                            Some(reason) => format!("incomplete: {reason}"),
                            None => "Unknown error (no error details in response)".to_owned(),
                        },
                    };
                return Err(ProviderError::Provider(why));
            }
            _ => {}
        }
        Ok(false)
    }

    fn finish(self, request: &ProviderRequest, provider: &str, _: Sink<'_>) -> Result<AssistantMessage, ProviderError> {
        let stop_reason = self.stop_reason();
        let thinking = self.thinking.into_iter().map(|(text, item)| (text, Some(item))).collect();
        let assembled =
            Assembled { thinking, text: self.text, calls: self.calls, model: self.model, usage: self.usage };
        Ok(assembled.message(request, provider, stop_reason))
    }
}

impl StreamState {
    fn item_added(&mut self, item: &Value, sink: &mut (dyn FnMut(StreamEvent) + Send)) -> Result<(), ProviderError> {
        let text = |key: &str| item.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
        self.current = match text("type").as_str() {
            "reasoning" => Some(Item::Reasoning { summary: String::new() }),
            "message" => Some(Item::Message),
            "function_call" => {
                let index = self.calls.len();
                if index > 128 {
                    return Err(ProviderError::Stream("more than 128 function calls".into()));
                }
                let id = format!("{}|{}", text("call_id"), text("id"));
                let name = text("name");
                sink(StreamEvent::ToolCallStart { index, id: id.clone(), name: name.clone() });
                self.calls.push((id, name, text("arguments")));
                Some(Item::Call { index })
            }
            _ => None,
        };
        Ok(())
    }

    fn item_done(&mut self, item: &Value, _sink: &mut (dyn FnMut(StreamEvent) + Send)) {
        match (self.current.take(), item.get("type").and_then(Value::as_str)) {
            (Some(Item::Reasoning { summary }), Some("reasoning")) => {
                let parts: Vec<&str> = item
                    .get("summary")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|part| part.get("text").and_then(Value::as_str))
                    .collect();
                let thinking = if parts.is_empty() { summary.trim_end().to_owned() } else { parts.join("\n\n") };
                self.thinking.push((thinking, item.to_string()));
            }
            (Some(Item::Call { index }), Some("function_call")) => {
                if self.calls[index].2.is_empty()
                    && let Some(arguments) = item.get("arguments").and_then(Value::as_str)
                {
                    self.calls[index].2 = arguments.to_owned();
                }
            }
            _ => {}
        }
    }

    /// `response.completed`: usage (cached input read from the cache) and the status.
    fn completed(&mut self, response: &Value) {
        let number = |pointer: &str| response.pointer(pointer).and_then(Value::as_u64).unwrap_or(0);
        if response.get("usage").is_some_and(|u| !u.is_null()) {
            let cached = number("/usage/input_tokens_details/cached_tokens");
            let input = number("/usage/input_tokens").saturating_sub(cached);
            self.usage = Usage::tokens(input, number("/usage/output_tokens"), cached, 0);
        }
        self.status = response.get("status").and_then(Value::as_str).map(str::to_owned);
        self.model = response.get("model").and_then(Value::as_str).map(str::to_owned);
    }

    /// Upstream's mapping of the response status; function calls make a stop a tool use.
    fn stop_reason(&self) -> StopReason {
        match self.status.as_deref() {
            Some("incomplete") => StopReason::Length,
            Some("failed" | "cancelled") => StopReason::Error,
            _ if !self.calls.is_empty() => StopReason::ToolUse,
            _ => StopReason::Stop,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn images_are_input_image_parts() {
        let mut input = Vec::new();
        super::push_message(&mut input, 0, &crate::message::user_with_image());
        assert_eq!(
            input[0]["content"],
            serde_json::json!([{"type": "input_text", "text": "look"}, {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}])
        );
    }
}
