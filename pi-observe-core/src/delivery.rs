//! The emitting thread's view of a hub: the subscriber list it last delivered to and its own
//! delivery counters, so that an emit takes no lock and no locked instruction.
//!
//! Subscribing and unsubscribing give the hub a new *generation*, drawn from one process-wide
//! counter, so a generation names one subscriber list of one hub. A thread keeps the list it
//! last used with its generation; an emit compares that with the hub's (one plain load) and
//! takes the hub's read lock only when they differ. The counters `emitted` and `delivered` are
//! per thread ([`Shard`]): only their thread writes them (a load and a store, no `lock` prefix)
//! and [`crate::Observability::stats`] sums them.
//!
//! What a thread keeps holds the listed subscribers: after an unsubscribe, nothing more is
//! delivered to the subscriber (the generation changed), and the thread that unsubscribed lets
//! go of it at once; another thread that emitted on the hub lets go at its next emit or exit.
//!
//! A thread also knows whether it is delivering (running subscriber callbacks): what it emits
//! then is dropped as re-entrant ([`DeliveringGuard`]).

use std::cell::{Cell, RefCell};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};

use crate::shared::{Entry, HubInner};
use crate::stats::Stats;

/// Generations handed out so far, across every hub of the process.
static GENERATIONS: AtomicU64 = AtomicU64::new(0);

/// A generation (or hub id) no other list of any hub has had.
pub(crate) fn next_generation() -> u64 {
    GENERATIONS.fetch_add(1, Relaxed) + 1
}

/// A hub's subscriber list and its generation (changed together, under the hub's write lock).
pub(crate) struct Subscribers {
    pub(crate) generation: u64,
    pub(crate) entries: Arc<[Entry]>,
}

/// One thread's delivery counters for one hub. Written only by the thread that holds it
/// (`in_use`), read by anyone.
#[derive(Debug, Default)]
pub(crate) struct Shard {
    emitted: AtomicU64,
    delivered: AtomicU64,
    in_use: AtomicBool,
}

impl Shard {
    fn bump(counter: &AtomicU64, by: u64) {
        // Single writer: a plain load and store (an atomic add would lock the bus every event).
        counter.store(counter.load(Relaxed) + by, Relaxed);
    }
}

/// The counters of every thread that emitted on a hub; a thread's shard goes back to the pool
/// when it exits or moves to another hub, and the next thread continues its counts.
#[derive(Debug, Default)]
pub(crate) struct Shards(Mutex<Vec<Arc<Shard>>>);

impl Shards {
    fn acquire(&self) -> Arc<Shard> {
        let mut shards = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let free = shards.iter().find(|s| s.in_use.compare_exchange(false, true, Acquire, Relaxed).is_ok());
        if let Some(shard) = free {
            return shard.clone();
        }
        let shard = Arc::new(Shard { in_use: AtomicBool::new(true), ..Shard::default() });
        shards.push(shard.clone());
        shard
    }

    /// Events emitted and delivered, over all threads.
    pub(crate) fn totals(&self) -> (u64, u64) {
        let shards = self.0.lock().unwrap_or_else(|e| e.into_inner());
        shards.iter().fold((0, 0), |(e, d), s| (e + s.emitted.load(Relaxed), d + s.delivered.load(Relaxed)))
    }
}

/// Where an emit counts what it delivered.
pub(crate) enum Tally<'a> {
    /// This thread's shard (the common case).
    Shard(&'a Shard),
    /// The hub's shared counters (a thread whose locals are being torn down).
    Hub(&'a Stats),
}

impl Tally<'_> {
    pub(crate) fn emitted(&self) {
        match self {
            Tally::Shard(shard) => Shard::bump(&shard.emitted, 1),
            Tally::Hub(stats) => {
                stats.emitted.fetch_add(1, Relaxed);
            }
        }
    }

    pub(crate) fn delivered(&self) {
        match self {
            Tally::Shard(shard) => Shard::bump(&shard.delivered, 1),
            Tally::Hub(stats) => {
                stats.delivered.fetch_add(1, Relaxed);
            }
        }
    }
}

/// What this thread keeps of the hub it last emitted on.
struct Kept {
    hub: u64,
    generation: u64,
    entries: Arc<[Entry]>,
    shard: Arc<Shard>,
}

impl Drop for Kept {
    fn drop(&mut self) {
        self.shard.in_use.store(false, Release);
    }
}

thread_local! {
    static KEPT: RefCell<Option<Kept>> = const { RefCell::new(None) };
}

/// Calls `deliver` with `hub`'s current subscribers and this thread's counters. Gives the
/// closure back when this thread cannot keep anything (its locals are being torn down, or it
/// is already inside a delivery); the caller then reads the list under the lock.
pub(crate) fn with_subscribers<D: FnOnce(&[Entry], Tally<'_>)>(hub: &HubInner, deliver: D) -> Option<D> {
    let mut deliver = Some(deliver);
    with_kept(hub, |kept| {
        if let Some(deliver) = deliver.take() {
            deliver(&kept.entries, Tally::Shard(&kept.shard));
        }
    });
    deliver
}

/// `read(entries)` on `hub`'s current subscribers as this thread keeps them; `None` when this
/// thread cannot keep them (the caller then reads the list under the lock).
pub(crate) fn with_entries<R>(hub: &HubInner, read: impl FnOnce(&[Entry]) -> R) -> Option<R> {
    with_kept(hub, |kept| read(&kept.entries))
}

/// `f` on what this thread keeps of `hub`, brought up to date first.
fn with_kept<R>(hub: &HubInner, f: impl FnOnce(&Kept) -> R) -> Option<R> {
    KEPT.try_with(|kept| {
        let Ok(mut kept) = kept.try_borrow_mut() else { return None };
        let generation = hub.generation.load(Acquire);
        if kept.as_ref().is_none_or(|k| k.generation != generation) {
            // Let go of the previous hub's shard before taking this one's (it may be the same hub).
            *kept = None;
            let current = hub.subscribers.read().unwrap_or_else(|e| e.into_inner());
            let entries = current.entries.clone();
            let generation = current.generation;
            drop(current);
            *kept = Some(Kept { hub: hub.id, generation, entries, shard: hub.shards.acquire() });
        }
        kept.as_ref().map(f)
    })
    .ok()
    .flatten()
}

/// Forgets what this thread keeps of `hub` (after it unsubscribed someone: the subscriber is
/// let go of now, not at this thread's next emit).
pub(crate) fn forget(hub: &HubInner) {
    let _ = KEPT.try_with(|kept| {
        if let Ok(mut kept) = kept.try_borrow_mut()
            && kept.as_ref().is_some_and(|k| k.hub == hub.id)
        {
            *kept = None;
        }
    });
}

thread_local! {
    /// Set while this thread runs subscriber callbacks: events emitted then are dropped.
    static DELIVERING: Cell<bool> = const { Cell::new(false) };
}

/// True while this thread runs subscriber callbacks: what it emits then is dropped as
/// re-entrant.
pub(crate) fn delivering() -> bool {
    DELIVERING.with(Cell::get)
}

/// Marks this thread as delivering until dropped (also when unwinding).
pub(crate) struct DeliveringGuard;

impl DeliveringGuard {
    /// Marks this thread as delivering until the guard is dropped: what it emits meanwhile is
    /// dropped as re-entrant.
    pub(crate) fn enter() -> DeliveringGuard {
        DELIVERING.with(|d| d.set(true));
        DeliveringGuard
    }
}

impl Drop for DeliveringGuard {
    fn drop(&mut self) {
        DELIVERING.with(|d| d.set(false));
    }
}
