//! Upstream's extension UI sub-protocol (`docs/rpc.md`, "Extension UI Protocol"): an extension's
//! `ctx.ui` dialog (`select`, `confirm`, `input`, `editor`) becomes an `extension_ui_request`
//! on stdout and waits for the client's `extension_ui_response` with the same `id`; `notify`,
//! `setStatus`, `setWidget`, `setTitle` and `set_editor_text` are requests that expect no
//! response. A dialog's `timeout` is kept by the extension's side, so the client need not.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use pi_agent::extensions::process::{ExtensionUi, UiAnswer};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::Out;

/// The RPC client as the extensions' UI.
pub struct RpcUi {
    /// Until [`RpcUi::disconnect`]: stdout's writer ends when every sender is gone.
    out: Mutex<Option<Out>>,
    waiting: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    next: AtomicU64,
}

impl RpcUi {
    /// Requests go to `out` (stdout's line writer).
    pub fn new(out: Out) -> Arc<RpcUi> {
        Arc::new(RpcUi { out: Mutex::new(Some(out)), waiting: Mutex::default(), next: AtomicU64::new(1) })
    }

    /// The session is over: later requests go nowhere (and dialogs are cancelled), so stdout's
    /// writer can finish.
    pub fn disconnect(&self) {
        self.out.lock().unwrap_or_else(|e| e.into_inner()).take();
        self.waiting.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// An `extension_ui_response` from the client: handed to the dialog waiting for its `id`.
    /// False when none waits (an unknown id, or one already answered or timed out).
    pub fn respond(&self, mut response: Value) -> bool {
        let Some(id) = response.get("id").and_then(Value::as_str).map(str::to_owned) else { return false };
        let Some(waiting) = self.waiting.lock().unwrap_or_else(|e| e.into_inner()).remove(&id) else { return false };
        if let Some(object) = response.as_object_mut() {
            object.remove("type");
            object.remove("id");
        }
        waiting.send(response).is_ok()
    }

    fn next_id(&self) -> String {
        format!("ui-{}", self.next.fetch_add(1, Ordering::Relaxed))
    }

    /// Writes `request` as an `extension_ui_request` with `id`.
    fn write(&self, id: &str, request: Value) {
        let mut line = json!({"type": "extension_ui_request", "id": id});
        if let (Some(line), Value::Object(fields)) = (line.as_object_mut(), request) {
            for (key, value) in fields {
                line.entry(key).or_insert(value);
            }
        }
        if let Some(out) = self.out.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            let _ = out.send(line.to_string());
        }
    }
}

impl ExtensionUi for RpcUi {
    fn dialog(&self, request: Value) -> UiAnswer {
        let (tx, rx) = oneshot::channel();
        let id = self.next_id();
        self.waiting.lock().unwrap_or_else(|e| e.into_inner()).insert(id.clone(), tx);
        self.write(&id, request);
        // A client that never answers leaves the dialog to the extension's timeout or abort.
        Box::pin(async move { rx.await.unwrap_or_else(|_| json!({"cancelled": true})) })
    }

    /// Upstream's fire-and-forget methods go to the client; what only a terminal shows (the
    /// working line, custom components' frames) is dropped.
    fn show(&self, request: Value) {
        const SHOWN: [&str; 5] = ["notify", "setStatus", "setWidget", "setTitle", "set_editor_text"];
        if request.get("method").and_then(Value::as_str).is_some_and(|m| SHOWN.contains(&m)) {
            self.write(&self.next_id(), request);
        }
    }
}
