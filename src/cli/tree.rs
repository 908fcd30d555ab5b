//! Renders contract events as span trees and a cost table (for `pi demo`).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

use pi_observe::core::{EventKind, ObsEvent, SpanId, TraceId, Value, names};

struct Node<'a> {
    start: &'a ObsEvent,
    end: Option<&'a ObsEvent>,
    children: Vec<SpanId>,
}

fn number(event: &ObsEvent, key: &str) -> Option<f64> {
    event.payload.get(key).and_then(Value::as_f64)
}

fn text<'a>(event: &'a ObsEvent, key: &str) -> Option<&'a str> {
    event.payload.get(key).and_then(Value::as_str)
}

fn label(node: &Node<'_>) -> String {
    let last = node.end.unwrap_or(node.start);
    let mut out = node.start.name.to_string();
    let detail = match node.start.name.as_ref() {
        names::AGENT_TURN => number(last, names::TURN_INDEX).map(|i| format!("#{i}")),
        names::PROVIDER_REQUEST => text(last, names::MODEL).map(str::to_owned),
        names::AGENT_TOOL_CALL => text(last, names::TOOL_NAME).map(str::to_owned),
        names::AGENT_SESSION_APPEND_ENTRY => text(last, names::ENTRY_TYPE).map(str::to_owned),
        _ => None,
    };
    if let Some(detail) = detail {
        let _ = write!(out, " {detail}");
    }
    if let Some(end) = node.end.and_then(|e| e.duration) {
        let _ = write!(out, "  {:.1} ms", end.as_secs_f64() * 1e3);
    }
    if (node.start.name == names::PROVIDER_REQUEST || node.start.name == names::AGENT_PROMPT)
        && let (Some(input), Some(output), Some(cost)) =
            (number(last, names::INPUT_TOKENS), number(last, names::OUTPUT_TOKENS), number(last, names::COST_TOTAL))
    {
        let _ = write!(out, "  tokens in {input} out {output}  ${cost:.6}");
    }
    if let Some(error) = node.end.and_then(|e| e.error.as_ref()) {
        let _ = write!(out, "  ✗ {}", error.name);
        if !error.message.is_empty() {
            let _ = write!(out, ": {}", error.message);
        }
    }
    out
}

/// One tree per trace, roots in start order; `pi.session.write` children are folded into their
/// append span to keep the tree readable.
pub fn render_trees(events: &[ObsEvent]) -> String {
    let mut nodes: HashMap<SpanId, Node<'_>> = HashMap::new();
    let mut order: Vec<SpanId> = Vec::new();
    for event in events {
        let Some(span) = event.span_id else { continue };
        match event.kind {
            EventKind::Start => {
                nodes.insert(span, Node { start: event, end: None, children: Vec::new() });
                order.push(span);
            }
            EventKind::End | EventKind::Error => {
                if let Some(node) = nodes.get_mut(&span) {
                    node.end = Some(event);
                }
            }
            EventKind::Event => {}
        }
    }
    let mut roots: Vec<SpanId> = Vec::new();
    for span in &order {
        let parent = nodes[span].start.parent_span_id.filter(|p| nodes.contains_key(p));
        match parent {
            Some(parent) => {
                if let Some(p) = nodes.get_mut(&parent) {
                    p.children.push(*span);
                }
            }
            None => roots.push(*span),
        }
    }
    let mut out = String::new();
    let mut last_trace: Option<TraceId> = None;
    for root in roots {
        let node = &nodes[&root];
        if last_trace != Some(node.start.trace_id) {
            last_trace = Some(node.start.trace_id);
            let who: Vec<String> = node.start.context.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = writeln!(out, "\ntrace {}  {}", node.start.trace_id, who.join(" "));
        }
        render_node(&nodes, root, 1, &mut out);
    }
    out
}

fn render_node(nodes: &HashMap<SpanId, Node<'_>>, id: SpanId, depth: usize, out: &mut String) {
    let node = &nodes[&id];
    let _ = writeln!(out, "{}{}", "  ".repeat(depth), label(node));
    for child in &node.children {
        if nodes[child].start.name != names::SESSION_WRITE {
            render_node(nodes, *child, depth + 1, out);
        }
    }
}

#[derive(Default)]
struct Totals {
    prompts: u64,
    requests: u64,
    input: f64,
    output: f64,
    tokens: f64,
    cost: f64,
}

/// Tokens and estimated cost per user and org, from provider-request end records.
pub fn render_costs(events: &[ObsEvent]) -> String {
    let mut rows: BTreeMap<(String, String), Totals> = BTreeMap::new();
    for event in events {
        let key = (
            event.context.get(names::CTX_USER_ID).unwrap_or("-").to_owned(),
            event.context.get(names::CTX_ORG_ID).unwrap_or("-").to_owned(),
        );
        match (event.kind, event.name.as_ref()) {
            (EventKind::Start, names::AGENT_PROMPT) => rows.entry(key).or_default().prompts += 1,
            (EventKind::End | EventKind::Error, names::PROVIDER_REQUEST) => {
                let row = rows.entry(key).or_default();
                row.requests += 1;
                row.input += number(event, names::INPUT_TOKENS).unwrap_or(0.0);
                row.output += number(event, names::OUTPUT_TOKENS).unwrap_or(0.0);
                row.tokens += number(event, names::TOTAL_TOKENS).unwrap_or(0.0);
                row.cost += number(event, names::COST_TOTAL).unwrap_or(0.0);
            }
            _ => {}
        }
    }
    let mut out = format!(
        "{:<10} {:<10} {:>7} {:>8} {:>8} {:>8} {:>8} {:>12}\n",
        "user", "org", "prompts", "requests", "input", "output", "total", "cost (USD)"
    );
    for ((user, org), t) in rows {
        let _ = writeln!(
            out,
            "{user:<10} {org:<10} {:>7} {:>8} {:>8} {:>8} {:>8} {:>12.6}",
            t.prompts, t.requests, t.input, t.output, t.tokens, t.cost
        );
    }
    out.push_str("Costs are estimates from the model price table (faux-1 has nominal prices).\n");
    out
}
