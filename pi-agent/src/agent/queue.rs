//! Messages typed while the agent works (upstream pi's two queues): **steering** messages are
//! delivered after the current turn — its tool calls finished — before the next provider
//! request; **follow-up** messages only when the agent would otherwise stop. Each queue delivers
//! `all` its messages at once or `one-at-a-time` (the default). Every change is a
//! `pi.agent.queue_update` point event on the running prompt's span.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use pi_observe_core::{Payload, Span, names};

/// Which queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueKind {
    /// Delivered after the current turn.
    Steer,
    /// Delivered when the agent would stop.
    FollowUp,
}

impl QueueKind {
    /// `steer` or `followUp` (upstream's `streamingBehavior` values).
    pub fn as_str(self) -> &'static str {
        match self {
            QueueKind::Steer => "steer",
            QueueKind::FollowUp => "followUp",
        }
    }
}

/// How many queued messages one delivery takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueueMode {
    /// Every queued message at the next delivery point.
    All,
    /// One message per delivery point.
    #[default]
    OneAtATime,
}

impl QueueMode {
    /// `all` or `one-at-a-time`.
    pub fn parse(text: &str) -> Option<QueueMode> {
        match text {
            "all" => Some(QueueMode::All),
            "one-at-a-time" => Some(QueueMode::OneAtATime),
            _ => None,
        }
    }

    /// `all` or `one-at-a-time`.
    pub fn as_str(self) -> &'static str {
        match self {
            QueueMode::All => "all",
            QueueMode::OneAtATime => "one-at-a-time",
        }
    }
}

/// The queued messages, in the order they were typed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pending {
    /// Steering messages.
    pub steering: Vec<String>,
    /// Follow-up messages.
    pub follow_up: Vec<String>,
}

impl Pending {
    /// Messages in both queues.
    pub fn len(&self) -> usize {
        self.steering.len() + self.follow_up.len()
    }

    /// Both queues are empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[derive(Debug, Default)]
struct Inner {
    steering: VecDeque<String>,
    follow_up: VecDeque<String>,
    steering_mode: QueueMode,
    follow_up_mode: QueueMode,
    /// The running prompt's span (queue updates are events on it).
    span: Option<Span>,
}

/// A handle on the agent's queues, shared by the agent loop and whoever takes input while it
/// runs (clones share the queues).
#[derive(Debug, Clone, Default)]
pub struct MessageQueue(Arc<Mutex<Inner>>);

impl MessageQueue {
    /// Queues `text`; returns the messages now pending in both queues.
    pub fn push(&self, kind: QueueKind, text: impl Into<String>) -> usize {
        let mut inner = self.lock();
        match kind {
            QueueKind::Steer => inner.steering.push_back(text.into()),
            QueueKind::FollowUp => inner.follow_up.push_back(text.into()),
        }
        record(&inner, "queued", kind)
    }

    /// Sets how a queue delivers.
    pub fn set_mode(&self, kind: QueueKind, mode: QueueMode) {
        let mut inner = self.lock();
        match kind {
            QueueKind::Steer => inner.steering_mode = mode,
            QueueKind::FollowUp => inner.follow_up_mode = mode,
        }
    }

    /// How a queue delivers.
    pub fn mode(&self, kind: QueueKind) -> QueueMode {
        let inner = self.lock();
        match kind {
            QueueKind::Steer => inner.steering_mode,
            QueueKind::FollowUp => inner.follow_up_mode,
        }
    }

    /// What is queued.
    pub fn pending(&self) -> Pending {
        let inner = self.lock();
        Pending {
            steering: inner.steering.iter().cloned().collect(),
            follow_up: inner.follow_up.iter().cloned().collect(),
        }
    }

    /// Empties both queues (an abort: the typed messages go back to the user), returning them.
    pub fn clear(&self) -> Pending {
        let mut inner = self.lock();
        let pending =
            Pending { steering: inner.steering.drain(..).collect(), follow_up: inner.follow_up.drain(..).collect() };
        if !pending.is_empty() {
            record(&inner, "cleared", QueueKind::Steer);
        }
        pending
    }

    /// Takes what a delivery point of `kind` delivers (per the queue's mode).
    pub(crate) fn take(&self, kind: QueueKind) -> Vec<String> {
        let mut inner = self.lock();
        let inner_ref = &mut *inner;
        let (queue, mode) = match kind {
            QueueKind::Steer => (&mut inner_ref.steering, inner_ref.steering_mode),
            QueueKind::FollowUp => (&mut inner_ref.follow_up, inner_ref.follow_up_mode),
        };
        let taken: Vec<String> = match mode {
            QueueMode::All => queue.drain(..).collect(),
            QueueMode::OneAtATime => queue.pop_front().into_iter().collect(),
        };
        if !taken.is_empty() {
            record(&inner, "delivered", kind);
        }
        taken
    }

    /// The prompt whose span records queue updates (`None` when it ends).
    pub(crate) fn attach(&self, span: Option<Span>) {
        self.lock().span = span;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A `pi.agent.queue_update` event on the running prompt (numbers and fixed words only: the
/// messages are content and stay in the session); returns the messages pending.
fn record(inner: &Inner, action: &'static str, kind: QueueKind) -> usize {
    let length = inner.steering.len() + inner.follow_up.len();
    if let Some(span) = &inner.span {
        let (steering, follow_up) = (inner.steering.len(), inner.follow_up.len());
        span.add_event(names::AGENT_QUEUE_UPDATE, || {
            Payload::new()
                .safe(names::QUEUE_LENGTH, length)
                .safe("steeringCount", steering)
                .safe("followUpCount", follow_up)
                .safe("action", action)
                .safe("queue", kind.as_str())
        });
    }
    length
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_at_a_time_delivers_in_order_and_all_drains() {
        let queue = MessageQueue::default();
        queue.push(QueueKind::Steer, "a");
        queue.push(QueueKind::Steer, "b");
        assert_eq!(queue.push(QueueKind::FollowUp, "c"), 3);
        assert_eq!(queue.take(QueueKind::Steer), ["a"]);
        queue.set_mode(QueueKind::Steer, QueueMode::All);
        queue.push(QueueKind::Steer, "d");
        assert_eq!(queue.take(QueueKind::Steer), ["b", "d"]);
        assert!(queue.take(QueueKind::Steer).is_empty());
        assert_eq!(queue.clear(), Pending { steering: vec![], follow_up: vec!["c".into()] });
        assert!(queue.pending().is_empty());
        assert_eq!(QueueMode::parse("one-at-a-time"), Some(QueueMode::OneAtATime));
        assert_eq!(QueueMode::parse("each"), None);
    }
}
