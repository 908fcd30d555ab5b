//! A provider an extension serves (upstream's `pi.registerProvider` with its own
//! `streamSimple`): pi sends the request as a `provider` message; the extension streams the
//! model's answer back as `stream` lines (`text`, `thinking`, `toolcall_start`,
//! `toolcall_delta`, `toolcall_end`) and ends with the final message. Retries, tracing and
//! pricing happen around it like for pi's own providers ([`crate::provider::request`]).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::ProcessExtension;
use super::protocol::Request;
use crate::message::{AssistantMessage, ContentBlock, StopReason, Usage};
use crate::model::{Api, ModelInfo, Pricing};
use crate::provider::{Attempt, AttemptFuture, AttemptOutcome, Provider, ProviderError, ProviderRequest, StreamEvent};

/// Longest one model request of an extension's provider may take.
const PROVIDER_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// A provider an extension registered.
#[derive(Debug, Clone)]
pub struct ProcessProvider {
    extension: ProcessExtension,
    name: String,
    /// Its models as the extension registered them (upstream's shape), by id.
    models: Vec<Value>,
}

impl ProcessExtension {
    /// The provider `name` it serves, with its models; `None` when it registered none by that
    /// name.
    pub fn provider(&self, name: &str) -> Option<(Vec<ModelInfo>, Arc<dyn Provider>)> {
        let spec = self.registration().providers.iter().find(|p| p.name == name)?;
        let models = spec.models.iter().filter_map(|m| model_info(name, m)).collect();
        let provider = ProcessProvider { extension: self.clone(), name: name.to_owned(), models: spec.models.clone() };
        Some((models, Arc::new(provider)))
    }
}

impl ProcessExtension {
    /// The models of every provider it registered (`/model`, RPC `get_available_models`).
    pub fn provider_models(&self) -> Vec<ModelInfo> {
        let registration = self.registration();
        let providers = registration.providers.iter();
        providers.flat_map(|p| p.models.iter().filter_map(|m| model_info(&p.name, m))).collect()
    }
}

/// A registered model as pi's [`ModelInfo`] (its price when it gave one).
fn model_info(provider: &str, model: &Value) -> Option<ModelInfo> {
    let number = |key: &str| model.get(key).and_then(Value::as_u64);
    let cost = model.get("cost").and_then(|c| serde_json::from_value::<Pricing>(c.clone()).ok());
    let mut info = ModelInfo::unknown(provider, model.get("id")?.as_str()?, Api::Extension);
    info.name = model.get("name").and_then(Value::as_str).map(str::to_owned);
    info.context_window = number("contextWindow").unwrap_or(info.context_window);
    info.max_tokens = number("maxTokens").unwrap_or(info.max_tokens);
    info.reasoning = model.get("reasoning").and_then(Value::as_bool).unwrap_or(false);
    info.cost = cost;
    if let Some(input) = model.get("input").and_then(|i| serde_json::from_value(i.clone()).ok()) {
        info.input = input;
    }
    Some(info)
}

impl Provider for ProcessProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn payload(&self, request: &ProviderRequest) -> Value {
        json!({
            "systemPrompt": request.system_prompt,
            "messages": request.messages,
            "tools": request.tools.iter().map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters})).collect::<Vec<_>>(),
        })
    }

    fn attempt<'a>(&'a self, Attempt { request, cancel, sink }: Attempt<'a>) -> AttemptFuture<'a> {
        Box::pin(async move {
            let model = self.models.iter().find(|m| m["id"] == request.model.id.as_str()).cloned();
            let model = model.unwrap_or_else(|| json!({"id": request.model.id}));
            let context = request.control.payload.clone().unwrap_or_else(|| self.payload(request));
            let options = json!({"reasoning": request.reasoning});
            let message = Request::Provider { provider: &self.name, model, context, options }.to_json();
            let (events_tx, mut events) = tokio::sync::mpsc::unbounded_channel::<Value>();
            let reply = self.extension.request_streaming(message, PROVIDER_TIMEOUT, Some(events_tx));
            tokio::pin!(reply);
            request.control.observe_response(200, Vec::new()).await;
            sink(StreamEvent::Start);
            let reply = loop {
                tokio::select! {
                    reply = &mut reply => break reply,
                    Some(event) = events.recv() => forward(&event, sink),
                    () = cancel.cancelled() => return Err(ProviderError::Aborted),
                }
            };
            // What was streamed before the reply.
            while let Ok(event) = events.try_recv() {
                forward(&event, sink);
            }
            let reply = reply.map_err(|e| {
                ProviderError::Provider(format!(
                    "extension {}: {e}",
                    crate::extensions::Extension::name(&self.extension)
                ))
            })?;
            let message = final_message(&reply, request).map_err(ProviderError::Provider)?;
            sink(StreamEvent::Done { stop_reason: message.stop_reason });
            Ok(AttemptOutcome { message, status: None })
        })
    }
}

/// One `stream` event as pi's stream event.
fn forward(event: &Value, sink: &mut (dyn FnMut(StreamEvent) + Send)) {
    let text = |key: &str| event.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    let index = event.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
    match event.get("kind").and_then(Value::as_str) {
        Some("text") => sink(StreamEvent::TextDelta(text("delta"))),
        Some("thinking") => sink(StreamEvent::ThinkingDelta(text("delta"))),
        Some("toolcall_start") => sink(StreamEvent::ToolCallStart { index, id: text("id"), name: text("name") }),
        Some("toolcall_delta") => sink(StreamEvent::ToolCallDelta { index, delta: text("delta") }),
        Some("toolcall_end") => sink(StreamEvent::ToolCallEnd { index }),
        _ => {}
    }
}

/// The extension's final message (`content`, `usage`, `stopReason`, `errorMessage`) as pi's.
fn final_message(reply: &Value, request: &ProviderRequest) -> Result<AssistantMessage, String> {
    let message = reply.get("message").unwrap_or(reply);
    let content: Vec<ContentBlock> = serde_json::from_value(message.get("content").cloned().unwrap_or(json!([])))
        .map_err(|e| format!("the provider's message has content pi cannot read: {e}"))?;
    let usage = message.get("usage").cloned().unwrap_or_default();
    let number = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    let stop_reason = match message.get("stopReason").and_then(Value::as_str) {
        Some("toolUse") => StopReason::ToolUse,
        Some("length") => StopReason::Length,
        Some("error") => {
            let why = message.get("errorMessage").and_then(Value::as_str).unwrap_or("the provider failed");
            return Err(why.to_owned());
        }
        Some("aborted") => return Err("aborted".into()),
        _ => StopReason::Stop,
    };
    Ok(AssistantMessage {
        content,
        api: message.get("api").and_then(Value::as_str).unwrap_or("extension").to_owned(),
        provider: request.model.provider.clone(),
        model: request.model.id.clone(),
        usage: Usage::tokens(number("input"), number("output"), number("cacheRead"), number("cacheWrite")),
        stop_reason,
        error_message: None,
        timestamp: crate::time::now_millis(),
    })
}
