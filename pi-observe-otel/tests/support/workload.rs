//! What the wire tests share: an agent-shaped workload and a subscriber configuration for one
//! loopback receiver.

use std::time::Duration;

use pi_observe_core::{Attribution, Payload, names, trace_operation};
use pi_observe_otel::OtlpConfig;

/// What the workload's operations return.
pub type Res = Result<(), std::io::Error>;

/// A subscriber configuration sending traces to `endpoint`, quickly (50 ms schedule, 500 ms
/// timeout).
pub fn config(endpoint: &str) -> OtlpConfig {
    OtlpConfig {
        traces_endpoint: Some(endpoint.to_owned()),
        schedule_delay: Some(Duration::from_millis(50)),
        timeout: Some(Duration::from_millis(500)),
        ..OtlpConfig::default()
    }
}

/// A small agent-shaped tree for two users, with point events and an error.
pub async fn workload() {
    for (user, org) in [("alice", "acme"), ("bob", "globex")] {
        let who = Attribution::new().with(names::CTX_USER_ID, user).with(names::CTX_ORG_ID, org);
        let _ = pi_observe_core::run_with_context(
            who,
            trace_operation(names::AGENT_PROMPT, Payload::new().safe(names::MODEL, "faux-1"), async {
                trace_operation(names::AGENT_TURN, Payload::new().safe(names::TURN_INDEX, 0), async {
                    trace_operation(
                        names::PROVIDER_REQUEST,
                        Payload::new()
                            .safe(names::PROVIDER, "faux")
                            .safe(names::MODEL, "faux-1")
                            .safe(names::INPUT_TOKENS, 10)
                            .safe(names::OUTPUT_TOKENS, 5),
                        async {
                            pi_observe_core::record_event(
                                names::PROVIDER_FIRST_TOKEN,
                                Payload::new().safe(names::TIME_TO_FIRST_TOKEN_MS, 3),
                            );
                            Res::Ok(())
                        },
                    )
                    .await?;
                    trace_operation(names::AGENT_TOOL_CALL, Payload::new().safe(names::TOOL_NAME, "bash"), async {
                        Err::<(), _>(std::io::Error::other("exit 1"))
                    })
                    .await
                    .ok();
                    Res::Ok(())
                })
                .await
            }),
        )
        .await;
    }
}
