//! Extension UI over the process protocol: an extension's `ctx.ui` calls arrive as
//! `{"type":"ui","method":…}` lines (with an `id` for the dialogs, which wait for an answer) and
//! go to the [`ExtensionUi`] of the mode pi runs in — upstream's `extension_ui_request`
//! sub-protocol in RPC mode, dialogs in the interactive mode. Without one, dialogs are cancelled
//! at once (upstream's headless answers) and the rest is dropped.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Value, json};

/// A dialog's answer, as upstream's `extension_ui_response` carries it: `{"value": …}`,
/// `{"confirmed": bool}` or `{"cancelled": true}`.
pub type UiAnswer = Pin<Box<dyn Future<Output = Value> + Send>>;

/// Where an extension's `ctx.ui` calls go.
pub trait ExtensionUi: Send + Sync {
    /// A dialog (`select`, `confirm`, `input`, `editor`) in upstream's request fields (`method`,
    /// `title`, `options`, `message`, `placeholder`, `prefill`, `timeout`); resolves to the answer.
    fn dialog(&self, request: Value) -> UiAnswer;

    /// A call that needs no answer (`notify`, `setStatus`, `setWidget`, `setTitle`,
    /// `set_editor_text`; a custom component's `custom_render` and `custom_close`), in
    /// upstream's request fields.
    fn show(&self, request: Value);

    /// A custom component (`ctx.ui.custom`): `request` has its `customId` and first `lines`;
    /// later frames come through [`ExtensionUi::show`] (`custom_render`, `custom_close`). Keys
    /// go to the extension through `input` as `{"data": "<terminal bytes>"}`, the width as
    /// `{"width": n}`. Resolves when the component closes (or is cancelled). A UI without
    /// components cancels it at once.
    fn custom(&self, request: Value, input: tokio::sync::mpsc::UnboundedSender<Value>) -> UiAnswer {
        let _ = (request, input);
        Box::pin(async { json!({"cancelled": true}) })
    }

    /// Fields this UI adds to `hello`: `"components": true` where what extensions render is
    /// drawn (the terminal: they then render their tools' calls and results, `tool_render` calls
    /// through [`ExtensionUi::show`]); `themes` (each `name`, `path` and `colors` as SGR
    /// parameters) and `theme` (the one in use) where the UI has themes.
    fn hello(&self) -> serde_json::Map<String, Value> {
        serde_json::Map::new()
    }
}

/// A shared [`ExtensionUi`] for a [`ProcessSpec`](super::ProcessSpec).
#[derive(Clone)]
pub struct UiHandle(pub Arc<dyn ExtensionUi>);

impl std::fmt::Debug for UiHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UiHandle")
    }
}

/// The dialogs of upstream's sub-protocol (everything else needs no answer).
pub const DIALOGS: [&str; 4] = ["select", "confirm", "input", "editor"];

/// A `ui` line from an extension: a call that needs no answer is shown now (when a UI is
/// attached) and gives `None`; a dialog gives its `id`, the answer to wait for (cancelled at
/// once when no UI is attached), and whether it waits for the user (a dialog or a component they
/// close) rather than standing for as long as the session (an editor in pi's place, an
/// autocomplete provider, a terminal input listener) — only the first keeps the extension's reply deadlines from running.
pub(super) fn dialog(
    ui: Option<&UiHandle>,
    mut request: Value,
    input: impl FnOnce(&Value) -> tokio::sync::mpsc::UnboundedSender<Value>,
) -> Option<(Value, UiAnswer, bool)> {
    let method = request.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
    let id = request.as_object_mut().and_then(|object| {
        object.remove("type");
        object.remove("id")
    });
    if method == "custom" {
        let id = id?;
        request["customId"] = id.clone();
        let standing =
            ["editor", "autocomplete", "terminalInput"].iter().any(|k| request.get(*k) == Some(&Value::Bool(true)));
        let answer = match ui {
            Some(ui) => ui.0.custom(request, input(&id)),
            None => Box::pin(async { json!({"cancelled": true}) }),
        };
        return Some((id, answer, !standing));
    }
    match (DIALOGS.contains(&method.as_str()), id, ui) {
        (false, _, Some(ui)) => {
            ui.0.show(request);
            None
        }
        (false, _, None) | (true, None, _) => None,
        (true, Some(id), Some(ui)) => Some((id, ui.0.dialog(request), true)),
        (true, Some(id), None) => Some((id, Box::pin(async { json!({"cancelled": true}) }), true)),
    }
}
