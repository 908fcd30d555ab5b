//! Usage a tool reports (model work it did itself) is kept on the session's tool result, traced
//! on its tool span with `pi.call_kind=tool`, and counted once in the session totals; provider
//! requests carry their call kind (turn, compaction).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::sync::Arc;

use pi_agent::message::{Message, Usage};
use pi_agent::model::Registry;
use pi_agent::provider::{FauxProvider, FauxResponse};
use pi_agent::session::{SessionWriter, read_session};
use pi_agent::tools::{Tool, ToolContext, ToolFuture, ToolOutput, ToolRegistry};
use pi_agent::{Agent, AgentConfig};
use pi_observe_core::testing::{CaptureSubscriber, assert_paired, span_named};
use pi_observe_core::{Observability, Value, names};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// A tool that "asked a model" and reports what it cost.
#[derive(Debug)]
struct Summarizer;

impl Tool for Summarizer {
    fn execute<'a>(&'a self, _: &'a serde_json::Value, _: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async {
            let mut usage = Usage::tokens(100, 20, 0, 0);
            usage.cost.input = 0.0003;
            usage.cost.output = 0.0002;
            usage.cost.total = 0.0005;
            Ok(ToolOutput { content: "a summary".into(), details: None, usage: Some(usage), terminate: false })
        })
    }
    fn parameters(&self) -> serde_json::Value {
        json!({"type": "object", "properties": {}})
    }
    fn name(&self) -> &'static str {
        "summarize"
    }
    fn description(&self) -> &'static str {
        "Summarizes with a model of its own."
    }
}

#[test]
fn usage_a_tool_reports_is_persisted_traced_as_a_tool_call_kind_and_counted_once() {
    let dir = std::env::temp_dir().join(format!("pi-usage-{}", pi_observe_core::SpanId::random()));
    std::fs::create_dir_all(&dir).unwrap();
    let faux = Arc::new(FauxProvider::new());
    faux.push([FauxResponse::tools(None, vec![("summarize", json!({}))]), FauxResponse::text("done")]);
    let model = Registry::builtin().find("faux", "faux-1").unwrap().clone();
    let session = SessionWriter::create(&dir.join("s.jsonl"), &dir).unwrap();
    let tools = ToolRegistry::empty().with(Arc::new(Summarizer));
    let mut agent = Agent::new(faux, model, tools, Some(session), AgentConfig::default(), dir.clone());
    let hub = Observability::new();
    let (capture, _sub) = CaptureSubscriber::attach(&hub);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let result = runtime.block_on(hub.scope(async {
        let mut ignore = |_| {};
        agent.prompt("summarize it", &CancellationToken::new(), &mut ignore).await.unwrap()
    }));
    assert!(result.error.is_none());

    // The tool's usage is on its result message, in the prompt's total and in the session's,
    // once: the session totals equal the prompt's, which is the turns' plus the tool's.
    let tool_usage = agent.messages().iter().find_map(|m| if let Message::ToolResult(r) = m { r.usage } else { None });
    assert_eq!(tool_usage.map(|u| u.cost.total), Some(0.0005));
    let turns: f64 = agent
        .messages()
        .iter()
        .filter_map(|m| if let Message::Assistant(a) = m { Some(a.usage.cost.total) } else { None })
        .sum();
    assert!((result.usage.cost.total - (turns + 0.0005)).abs() < 1e-12, "{:?}", result.usage);
    let persisted = read_session(&dir.join("s.jsonl")).unwrap().totals().usage.cost.total;
    assert!((persisted - result.usage.cost.total).abs() < 1e-12, "persisted as upstream pi does, counted once");

    let events = capture.take();
    let spans = assert_paired(&events);
    let tool = span_named(&spans, names::AGENT_TOOL_CALL);
    assert_eq!(tool.attributes.get(names::CALL_KIND), Some(&Value::from(names::CALL_KIND_TOOL)));
    assert_eq!(tool.attributes.get(names::COST_TOTAL), Some(&Value::F64(0.0005)));
    let requests: Vec<_> = spans.iter().filter(|s| s.name == names::PROVIDER_REQUEST).collect();
    assert_eq!(requests.len(), 2, "two turns");
    for request in requests {
        assert_eq!(request.attributes.get(names::CALL_KIND), Some(&Value::from(names::CALL_KIND_TURN)));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
