//! The session lifecycle extensions see: switching to a new or resumed session and forking,
//! each asked first (`session_before_switch`, `session_before_fork`: the first cancel wins),
//! then `session_start` with its reason and the session it replaced.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Log;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use pi_agent::events::AgentEvent;
use pi_agent::extensions::{BeforeResult, extension, hooks};
use pi_agent::message::Message;
use pi_agent::model::Registry;
use pi_agent::provider::{FauxProvider, FauxResponse};
use pi_agent::session::{EntryKind, SessionWriter, read_session};
use pi_agent::tools::ToolRegistry;
use pi_agent::{Agent, AgentConfig, SwitchReason};
use tokio_util::sync::CancellationToken;

fn scratch(name: &str) -> PathBuf {
    common::scratch("lifecycle", name)
}

#[test]
fn switching_and_forking_ask_extensions_first_and_restart_the_session_with_its_reason() {
    let dir = scratch("switch");
    let log = Log::default();
    let seen = log.clone();
    let vetoes = Arc::new(Mutex::new(1)); // the first switch is cancelled
    let watcher = extension("watcher", move |api| {
        let (log, vetoes) = (seen.clone(), vetoes.clone());
        api.on(hooks::SessionBeforeSwitch, move |event, _ctx| {
            let (log, vetoes) = (log.clone(), vetoes.clone());
            async move {
                log.push(format!("before_switch {}", event.reason));
                let mut left = vetoes.lock().unwrap();
                Ok((*left > 0).then(|| {
                    *left -= 1;
                    BeforeResult::cancel()
                }))
            }
        });
        let log = seen.clone();
        api.on(hooks::SessionBeforeFork, move |event, _ctx| {
            let log = log.clone();
            async move {
                log.push(format!("before_fork {}", event.entry_id));
                Ok(None)
            }
        });
        let log = seen.clone();
        api.on(hooks::Notify::SessionStart, move |event, _ctx| {
            let log = log.clone();
            async move {
                if let AgentEvent::SessionStart { reason, previous_session_file, .. } = event {
                    let previous = previous_session_file
                        .map(|p| Path::new(&p).file_name().unwrap().to_string_lossy().into_owned());
                    log.push(format!("session_start {reason} {}", previous.unwrap_or_default()));
                }
                Ok(None)
            }
        });
    });
    let faux = Arc::new(FauxProvider::new());
    faux.push([FauxResponse::text("first answer")]);
    let model = Registry::builtin().find("faux", "faux-1").unwrap().clone();
    let session = SessionWriter::create(&dir.join("session.jsonl"), &dir).unwrap();
    let mut agent = Agent::new(faux, model, ToolRegistry::empty(), Some(session), AgentConfig::default(), dir.clone());
    agent.add_extension(&watcher);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut sink = |_: AgentEvent| {};
    runtime.block_on(agent.prompt("hello", &CancellationToken::new(), &mut sink)).unwrap();
    let fresh = || SessionWriter::create(&dir.join("second.jsonl"), &dir).unwrap();
    runtime.block_on(async {
        assert!(!agent.switch_session(SwitchReason::New, Some(fresh()), &mut sink).await.unwrap(), "cancelled");
        assert_eq!(agent.messages().len(), 2, "the conversation stays");
        let _ = std::fs::remove_file(dir.join("second.jsonl"));
        assert!(agent.switch_session(SwitchReason::New, Some(fresh()), &mut sink).await.unwrap());
        assert!(agent.messages().is_empty(), "a new session starts empty");
        let resumed = SessionWriter::open_or_create(&dir.join("session.jsonl"), &dir).unwrap();
        assert!(agent.switch_session(SwitchReason::Resume, Some(resumed), &mut sink).await.unwrap());
        assert_eq!(agent.messages().len(), 2, "the resumed conversation is back");
    });
    let first_user = read_session(&dir.join("session.jsonl"))
        .unwrap()
        .entries
        .iter()
        .find(|e| matches!(&e.kind, EntryKind::Message { message: Message::User(_) }))
        .unwrap()
        .id
        .clone();
    runtime.block_on(async {
        assert!(agent.fork(&first_user, &dir.join("fork.jsonl"), &mut sink).await.unwrap());
    });
    assert_eq!(agent.messages().len(), 1, "the fork keeps the branch up to the entry");
    let fork = read_session(&dir.join("fork.jsonl")).unwrap();
    assert_eq!(fork.header.parent_session.as_deref(), Some(dir.join("session.jsonl").to_str().unwrap()));
    assert_eq!(fork.entries.last().unwrap().id, first_user, "same ids as the original");
    assert_eq!(
        log.lines(),
        [
            "session_start startup ",
            "before_switch new",
            "before_switch new",
            "session_start new session.jsonl",
            "before_switch resume",
            "session_start resume second.jsonl",
            &format!("before_fork {first_user}"),
            "session_start fork session.jsonl",
        ]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
