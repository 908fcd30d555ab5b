//! Pairing invariants over random operation trees: whatever each operation does — returns Ok,
//! returns Err, panics, or is dropped part-way — every start has exactly one end/error, ids are
//! unique, parents start first, and the trace id is shared down the tree.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::Poll;

use pi_observe_core::testing::silence_expected_panics;
use pi_observe_core::testing::{CaptureSubscriber, assert_paired};
use pi_observe_core::{EventKind, Observability, Payload, Value, names, spawn, trace_operation};
use proptest::prelude::*;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Ending {
    Ok,
    Err,
    Panic,
    /// Dropped by its parent after this many polls.
    Cancel(u8),
}

#[derive(Debug, Clone)]
struct Node {
    ending: Ending,
    yields: u8,
    concurrent: bool,
    children: Vec<Node>,
}

fn node() -> impl Strategy<Value = Node> {
    let ending = prop_oneof![
        4 => Just(Ending::Ok),
        2 => Just(Ending::Err),
        1 => Just(Ending::Panic),
        1 => (0u8..4).prop_map(Ending::Cancel),
    ];
    let leaf = (ending.clone(), 0u8..3).prop_map(|(ending, yields)| Node {
        ending,
        yields,
        concurrent: false,
        children: vec![],
    });
    leaf.prop_recursive(4, 40, 4, move |inner| {
        (ending.clone(), 0u8..3, any::<bool>(), prop::collection::vec(inner, 1..4))
            .prop_map(|(ending, yields, concurrent, children)| Node { ending, yields, concurrent, children })
    })
}

#[derive(Debug)]
struct TestErr;

impl std::fmt::Display for TestErr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("test error")
    }
}

type BoxFut = Pin<Box<dyn Future<Output = Result<(), TestErr>> + Send>>;

/// Numbers nodes in pre-order so spans can be matched back to their node.
fn number(node: &Node, next: &mut i64, out: &mut Vec<(i64, Ending, Option<i64>)>, parent: Option<i64>) -> i64 {
    let id = *next;
    *next += 1;
    out.push((id, node.ending, parent));
    for child in &node.children {
        number(child, next, out, Some(id));
    }
    id
}

fn run(node: Node, id: i64) -> BoxFut {
    Box::pin(trace_operation("prop.op", Payload::new().safe("node", id), async move {
        let mut next = id + 1;
        let mut children = Vec::new();
        for child in node.children {
            let child_id = next;
            next += count(&child);
            children.push((child.ending, run(child, child_id)));
        }
        if node.concurrent {
            let handles: Vec<_> =
                children.into_iter().map(|(ending, fut)| (ending, spawn(supervise(ending, fut)))).collect();
            for (_, handle) in handles {
                let _ = handle.await;
            }
        } else {
            for (ending, fut) in children {
                // A panicking child runs in its own task so its panic stays contained.
                let _ = spawn(supervise(ending, fut)).await;
            }
        }
        for _ in 0..node.yields {
            tokio::task::yield_now().await;
        }
        match node.ending {
            Ending::Err => Err(TestErr),
            Ending::Panic => panic!("planned panic"),
            Ending::Ok | Ending::Cancel(_) => Ok(()),
        }
    }))
}

fn count(node: &Node) -> i64 {
    1 + node.children.iter().map(count).sum::<i64>()
}

/// Runs a child to completion, or polls it `n` times and drops it for `Cancel(n)`.
async fn supervise(ending: Ending, mut fut: BoxFut) {
    match ending {
        Ending::Cancel(polls) => {
            for _ in 0..polls {
                if poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await.is_ready() {
                    return;
                }
                tokio::task::yield_now().await;
            }
            drop(fut);
        }
        _ => {
            let _ = fut.await;
        }
    }
}

fn check_tree(root: Node, multi_thread: bool) -> Result<(), TestCaseError> {
    silence_expected_panics(&["planned panic"]);
    let hub = Observability::new();
    let (capture, _sub) = CaptureSubscriber::attach(&hub);
    let runtime = if multi_thread {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).build()
    } else {
        tokio::runtime::Builder::new_current_thread().build()
    }
    .unwrap();
    let mut plan = Vec::new();
    number(&root, &mut 0, &mut plan, None);
    let ending = root.ending;
    runtime.block_on(hub.scope(async move {
        let _ = spawn(supervise(ending, run(root, 0))).await;
    }));
    drop(runtime);
    let events = capture.take();
    let spans = assert_paired(&events);
    prop_assert!(!spans.is_empty() || matches!(plan[0].1, Ending::Cancel(0)));
    if let Some(first) = spans.first() {
        prop_assert!(spans.iter().all(|s| s.trace_id == first.trace_id), "trace id not shared");
    }
    for span in &spans {
        let Some(Value::I64(id)) = span.attributes.get("node") else { panic!("span without node id") };
        let (_, ending, parent) = plan[*id as usize];
        // Structure: the span's parent is the span of the node's parent.
        let parent_span = spans.iter().find(|p| Some(p.span_id) == span.parent_span_id);
        prop_assert_eq!(parent_span.and_then(|p| p.attributes.get("node").cloned()), parent.map(Value::I64));
        let cancelled_here_or_above = {
            let mut at = Some(*id);
            let mut hit = false;
            while let Some(n) = at {
                hit |= matches!(plan[n as usize].1, Ending::Cancel(_));
                at = plan[n as usize].2;
            }
            hit
        };
        match span.error.as_ref().map(|e| e.name.as_str()) {
            Some(names::ERROR_CANCELLED) => {
                prop_assert!(cancelled_here_or_above, "node {} cancelled without a cancel above", id);
                prop_assert_eq!(span.attributes.get(names::ABORTED), Some(&Value::Bool(true)));
            }
            Some("TestErr") => prop_assert_eq!(ending, Ending::Err),
            Some(names::ERROR_PANIC) => prop_assert_eq!(ending, Ending::Panic),
            None => prop_assert!(matches!(ending, Ending::Ok | Ending::Cancel(_))),
            Some(other) => prop_assert!(false, "unexpected error name {}", other),
        }
    }
    let starts = events.iter().filter(|e| e.kind == EventKind::Start).count();
    prop_assert_eq!(starts, spans.len());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn every_start_has_exactly_one_end_on_one_thread(root in node()) {
        check_tree(root, false)?;
    }

    #[test]
    fn every_start_has_exactly_one_end_across_threads(root in node()) {
        check_tree(root, true)?;
    }
}
