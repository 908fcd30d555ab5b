//! Context isolation under concurrency: operations running at the same time under different
//! users never see each other's attribution or parents — including work moved to spawned tasks
//! and threads. A sequential parent/child test would not catch a shared "current context".

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::collections::HashMap;

use pi_observe_core::testing::{CaptureSubscriber, assert_paired};
use pi_observe_core::{
    Attribution, ContextExt, EventKind, Observability, Payload, Value, current, names, record_event, run_with_context,
    spawn, spawn_blocking, trace_operation,
};

type Res = Result<(), std::io::Error>;

fn tag(user: &str, op: usize) -> Payload {
    Payload::new().safe("expectUser", user.to_owned()).safe("op", op as i64)
}

async fn user_work(user: String, op: usize, spawned: bool) -> Res {
    trace_operation(names::AGENT_PROMPT, tag(&user, op), async {
        tokio::task::yield_now().await;
        let (u1, u2) = (user.clone(), user.clone());
        let turn = trace_operation(names::AGENT_TURN, tag(&user, op), async move {
            tokio::task::yield_now().await;
            record_event(names::PROVIDER_FIRST_TOKEN, tag(&u1, op));
            trace_operation(names::AGENT_TOOL_CALL, tag(&u2, op), async {
                tokio::task::yield_now().await;
                Res::Ok(())
            })
            .await
        });
        if spawned {
            // Half of the operations do their work in a spawned task and a blocking thread.
            spawn(turn).await.map_err(std::io::Error::other)??;
            let seen = spawn_blocking(|| current().attribution().get(names::CTX_USER_ID).map(str::to_owned))
                .await
                .map_err(std::io::Error::other)?;
            assert_eq!(seen.as_deref(), Some(user.as_str()), "blocking thread lost the user");
        } else {
            turn.await?;
        }
        Res::Ok(())
    })
    .await
}

#[test]
fn concurrent_operations_never_see_another_tasks_context() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(4).build().unwrap();
    let hub = Observability::new();
    let (capture, _sub) = CaptureSubscriber::attach(&hub);
    runtime.block_on(hub.scope(async {
        let mut handles = Vec::new();
        for op in 0..1000 {
            let user = format!("user-{}", op % 50);
            let ctx = Attribution::new()
                .with(names::CTX_USER_ID, user.clone())
                .with(names::CTX_ORG_ID, format!("org-{}", op % 7));
            let work = run_with_context(ctx, user_work(user, op, op % 2 == 0));
            // `tokio::spawn` without our helper: the hub must come from the scope we give it.
            handles.push(tokio::spawn(work.in_current_context()));
        }
        for handle in handles {
            handle.await.unwrap().unwrap();
        }
    }));
    let events = capture.take();
    assert_eq!(events.iter().filter(|e| e.kind == EventKind::Start).count(), 3000);
    assert_eq!(events.iter().filter(|e| e.kind == EventKind::Event).count(), 1000);
    let spans = assert_paired(&events);

    let by_id: HashMap<_, _> = spans.iter().map(|s| (s.span_id, s)).collect();
    let mut wrong = 0;
    for event in &events {
        let Some(Value::Str(expected)) = event.payload.get("expectUser") else { panic!("untagged event {event}") };
        if event.context.get(names::CTX_USER_ID) != Some(expected.as_ref()) {
            wrong += 1;
        }
    }
    assert_eq!(wrong, 0, "events carrying another task's user");
    for span in &spans {
        match span.parent_span_id {
            None => assert_eq!(span.name, names::AGENT_PROMPT),
            Some(parent) => {
                let parent = by_id[&parent];
                assert_eq!(parent.attributes.get("op"), span.attributes.get("op"), "span under another task's parent");
                assert_eq!(parent.trace_id, span.trace_id);
            }
        }
    }
    let traces: std::collections::HashSet<_> = spans.iter().map(|s| s.trace_id).collect();
    assert_eq!(traces.len(), 1000, "each prompt is its own trace");
}

#[test]
fn tokio_spawn_without_the_helper_loses_context_and_the_helper_keeps_it() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    let (plain, helped) = runtime.block_on(run_with_context(Attribution::new().with("userId", "u1"), async {
        let plain = tokio::spawn(async { current().attribution().get("userId").map(str::to_owned) });
        let helped = spawn(async { current().attribution().get("userId").map(str::to_owned) });
        (plain.await.unwrap(), helped.await.unwrap())
    }));
    assert_eq!(plain, None, "task-locals are not inherited by tokio::spawn");
    assert_eq!(helped.as_deref(), Some("u1"));
}
