//! What every test of this crate needs: a fresh folder of its own.

#![allow(dead_code, clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pi_agent::extensions::{ExtensionApi, Hook};
use pi_agent::message::{Message, ToolResultMessage};
use pi_agent::session::{EntryKind, read_session};

/// A new empty folder under the temporary directory, named after the test file and case.
pub fn scratch(file: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "pi-{file}-{name}-{}-{}",
        std::process::id(),
        pi_observe_core::SpanId::random()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// What handlers saw, shared between a test and its extensions.
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    pub fn push(&self, line: impl Into<String>) {
        self.0.lock().unwrap().push(line.into());
    }

    pub fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// Registers a handler that only logs `label(event)` and returns no result.
pub fn log_on<H: Hook>(
    api: &mut ExtensionApi<'_>,
    hook: H,
    log: &Log,
    label: impl Fn(&H::Event) -> String + Send + Sync + 'static,
) {
    let (log, label) = (log.clone(), Arc::new(label));
    api.on(hook, move |event, _| {
        let (log, label) = (log.clone(), label.clone());
        async move {
            log.push(label(&event));
            Ok(None)
        }
    });
}

/// The tool results the session file at `path` holds, in order.
pub fn tool_results_in(path: &std::path::Path) -> Vec<ToolResultMessage> {
    read_session(path)
        .unwrap()
        .entries
        .into_iter()
        .filter_map(|e| match e.kind {
            EntryKind::Message { message: Message::ToolResult(r) } => Some(r),
            _ => None,
        })
        .collect()
}
