//! First contacts' tickets in batches: the first contacts that reach this instance while its previous ticket call
//! is under way go to the store together, in one [`Store::tickets`](crate::store::Store::tickets) call that
//! numbers them in the order they arrived here.
//!
//! One task per room does the calls, one at a time. A first contact hands it a place to answer and waits; the
//! task takes every first contact waiting (up to the store's [`ticket_batch`](crate::store::Store::ticket_batch)),
//! lets the other ready tasks run (a wave of requests read in the same turn of the event loop goes together) for
//! as long as each turn brings more, at most [`WINDOW`] after the first, and makes the call. A first contact that
//! finds the task idle goes after one turn of the scheduler: nobody waits for a timer, and a lone first contact
//! waits for no one. Under load the batch is whatever arrived during the previous call (about one round trip to
//! the store) and the window, so the batches grow with the load and the store's work per first contact shrinks. A failed call answers everyone in its batch with the error (the room answers each the holding page with
//! the status unknown); an asker that went away before its batch left takes no number.
//!
//! While the room's snapshot shows the line numbered and open (drawn or first come first served, neither closed nor
//! sold out), the call is [`Store::line_tickets`](crate::store::Store::line_tickets): the numbers alone (on Redis
//! one `HINCRBY`, not a script that reads the settings), counted in the store with the next flush of liveness
//! marks. Otherwise, and with a store that does not offer it, [`Store::tickets`](crate::store::Store::tickets).
//! Before the draw and far from it, a pre-queue ticket (no number) needs no call at all: the room gives it from its
//! snapshot (`WaitingRoom::ticket`) and counts it with the next flush too.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use super::{Inner, WaitingRoom};
use crate::error::StoreError;
use crate::store::Ticket;

type Answer = oneshot::Sender<Result<Ticket, StoreError>>;

/// The longest a batch waits for more first contacts once its first has arrived, and only while more keep arriving:
/// the task lets the other ready tasks run and takes the first contacts they bring, until a turn brings none, the
/// batch is full, or this window has passed since its first arrived. A lone first contact waits one turn of the
/// scheduler, no timer.
pub(crate) const WINDOW: Duration = Duration::from_millis(1);

/// The way to the room's ticket task.
#[derive(Debug)]
pub(crate) struct TicketBatches {
    /// The most first contacts in one store call; 1: no batches, each asks the store itself.
    pub(crate) max: usize,
    /// The task's queue, in arrival order; `None` before the first batched ticket, and the task is started again
    /// when it has ended (the runtime it ran on shut down). Unbounded: each entry is a request waiting for its
    /// answer, so the queue holds at most the requests in flight.
    queue: Mutex<Option<mpsc::UnboundedSender<Answer>>>,
    /// Tickets not yet counted in the store (numbers from
    /// [`Store::line_tickets`](crate::store::Store::line_tickets), pre-queue tickets from the snapshot): sent with
    /// the next flush ([`Touches::tickets`](crate::store::Touches::tickets)).
    unsent: AtomicU64,
}

impl TicketBatches {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            max: max.max(1),
            queue: Mutex::new(None),
            unsent: AtomicU64::new(0),
        }
    }

    /// The tickets to count with this flush (taken: [`add_unsent`](Self::add_unsent) if the flush failed).
    pub(crate) fn take_unsent(&self) -> u64 {
        self.unsent.swap(0, Ordering::AcqRel)
    }

    /// Tickets given out with no count in the store (numbers alone, pre-queue tickets from the snapshot), or that
    /// a failed flush did not count: counted with the next flush.
    pub(crate) fn add_unsent(&self, n: u64) {
        self.unsent.fetch_add(n, Ordering::AcqRel);
    }
}

impl WaitingRoom {
    /// One first contact's ticket, in the next batch (see the module docs).
    pub(super) async fn batched_ticket(&self) -> Result<Ticket, StoreError> {
        let (answer, answered) = oneshot::channel();
        {
            let b = &self.inner.batches;
            let mut queue = b.queue.lock().unwrap_or_else(|e| e.into_inner());
            let answer = match queue.as_ref() {
                Some(q) => q.send(answer).err().map(|mpsc::error::SendError(a)| a),
                None => Some(answer),
            };
            if let Some(answer) = answer {
                let (tx, rx) = mpsc::unbounded_channel();
                let _ = tx.send(answer);
                tokio::spawn(run(std::sync::Arc::downgrade(&self.inner), rx, b.max));
                *queue = Some(tx);
            }
        }
        answered
            .await
            .unwrap_or_else(|_| Err(StoreError::unavailable("the batch of tickets was dropped")))
    }

    /// One store call for `n` first contacts (see the module docs for which).
    async fn batch_of_tickets(&self, n: usize) -> Result<Vec<Ticket>, StoreError> {
        let store = &self.inner.store;
        let snap = self.inner.snap.load();
        // A numbered line open to first contacts; the highest number seen given out lets the store tell a counter
        // that went back with its data.
        let known_last = snap
            .last_number
            .max(self.inner.max_number.load(Ordering::Relaxed));
        let open = snap.drawn && !snap.settings.turning_away() && known_last > 0;
        drop(snap);
        if open {
            let r = self
                .call(|| store.line_tickets(self.event(), n, known_last))
                .await?;
            if let Some(last) = r {
                self.inner.batches.add_unsent(n as u64);
                let first = last + 1 - n as u64;
                return Ok((first..=last).map(Ticket::Number).collect());
            }
        }
        let now = self.now_ms();
        self.call(|| store.tickets(self.event(), n, now)).await
    }
}

/// Takes whatever waits in the queue, up to `max` in all.
fn gather(rx: &mut mpsc::UnboundedReceiver<Answer>, batch: &mut Vec<Answer>, max: usize) {
    while batch.len() < max {
        match rx.try_recv() {
            Ok(a) => batch.push(a),
            Err(_) => return,
        }
    }
}

/// The room's ticket task: one store call per batch, until the room is dropped (its queue closes with it).
async fn run(room: Weak<Inner>, mut rx: mpsc::UnboundedReceiver<Answer>, max: usize) {
    let mut batch = Vec::with_capacity(max.min(1024));
    while let Some(first) = rx.recv().await {
        batch.push(first);
        let opened = Instant::now();
        gather(&mut rx, &mut batch, max);
        // While more keep coming (each turn of the scheduler brings some), for at most the window.
        while batch.len() < max && opened.elapsed() < WINDOW {
            tokio::task::yield_now().await;
            let before = batch.len();
            gather(&mut rx, &mut batch, max);
            if batch.len() == before {
                break;
            }
        }
        // Those who went away (their request was dropped) take no number.
        batch.retain(|a| !a.is_closed());
        if batch.is_empty() {
            continue;
        }
        let Some(inner) = room.upgrade() else { return };
        let room = WaitingRoom { inner };
        let n = batch.len();
        let r = room.batch_of_tickets(n).await;
        room.inner.metrics.ticket_batches.inc();
        drop(room);
        match r {
            Ok(tickets) if tickets.len() == n => {
                for (a, t) in batch.drain(..).zip(tickets) {
                    let _ = a.send(Ok(t));
                }
            }
            r => {
                let e = r.err().unwrap_or_else(|| {
                    StoreError::Corrupt(format!(
                        "the store gave the wrong number of tickets for {n}"
                    ))
                });
                for a in batch.drain(..) {
                    let _ = a.send(Err(e.clone()));
                }
            }
        }
    }
}
