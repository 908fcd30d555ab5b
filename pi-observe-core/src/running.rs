//! Operations that run without having emitted their start record ([`crate::Starts::Only`]):
//! the hub keeps them here until they settle, so that it can still tell subscribers about
//! those that are running when a subscriber leaves or the hub shuts down.
//!
//! One list per shard, each behind its own mutex; a thread adds to the shard it was given
//! when it first started such an operation, so emitting threads do not share a lock. A slot
//! keeps its place until the operation settles (a free list, no moves), and the operation
//! remembers its slot.

use std::cell::Cell;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

use crate::shared::SpanInner;

const SHARDS: usize = 8;

/// A slot as one number (`shard << 32 | index`); [`Running::NONE`] for an operation that is
/// not in the list.
pub(crate) type Slot = u64;

#[derive(Default)]
struct Shard {
    spans: Vec<Option<Arc<SpanInner>>>,
    free: Vec<u32>,
}

/// The running operations whose start was not emitted.
#[derive(Default)]
pub(crate) struct Running {
    shards: [Mutex<Shard>; SHARDS],
}

/// Hands each thread a shard, round robin.
static NEXT_SHARD: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static SHARD: Cell<Option<usize>> = const { Cell::new(None) };
}

fn this_threads_shard() -> usize {
    SHARD
        .try_with(|shard| match shard.get() {
            Some(index) => index,
            None => {
                let index = (NEXT_SHARD.fetch_add(1, Relaxed) % SHARDS as u64) as usize;
                shard.set(Some(index));
                index
            }
        })
        .unwrap_or(0)
}

impl Running {
    /// The slot of an operation that is not listed.
    pub(crate) const NONE: Slot = u64::MAX;

    /// Lists `span` and returns its slot.
    pub(crate) fn insert(&self, span: &Arc<SpanInner>) -> Slot {
        let shard_index = this_threads_shard();
        let mut shard = self.shards[shard_index].lock().unwrap_or_else(|e| e.into_inner());
        let index = match shard.free.pop() {
            Some(index) => {
                shard.spans[index as usize] = Some(span.clone());
                index
            }
            None => {
                let Ok(index) = u32::try_from(shard.spans.len()) else { return Self::NONE };
                shard.spans.push(Some(span.clone()));
                index
            }
        };
        ((shard_index as u64) << 32) | u64::from(index)
    }

    /// Takes the operation in `slot` off the list.
    pub(crate) fn remove(&self, slot: Slot) {
        let (shard_index, index) = ((slot >> 32) as usize, slot as u32);
        let Some(shard) = self.shards.get(shard_index) else { return };
        let gone = {
            let mut shard = shard.lock().unwrap_or_else(|e| e.into_inner());
            let gone = shard.spans.get_mut(index as usize).and_then(Option::take);
            if gone.is_some() {
                shard.free.push(index);
            }
            gone
        };
        // The operation is let go of outside the lock.
        drop(gone);
    }

    /// The operations listed now.
    pub(crate) fn snapshot(&self) -> Vec<Arc<SpanInner>> {
        let mut all = Vec::new();
        for shard in &self.shards {
            let shard = shard.lock().unwrap_or_else(|e| e.into_inner());
            all.extend(shard.spans.iter().flatten().cloned());
        }
        all
    }
}
