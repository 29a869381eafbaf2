//! A time-compressed rehearsal of an on-sale, driving the real room (the same `WaitingRoom` the layer uses) with a
//! manual clock.
//!
//! The crowd is simulated person by person: arrivals (most before the opening, a tail after), a random draw or FIFO,
//! people in line giving up (they stop polling and are skipped at the head), admitted people who hold seats after a
//! minute, pay at the end of a visit of varying length (gamma-distributed, mean 4 minutes) or leave without buying
//! (their holds expire; a few close the tab and idle out), and an inventory that feeds the room every second. Ten
//! minutes of on-sale run in seconds. A share of people may step away for a while ([`Params::step_away_share`]):
//! their page stops polling, and polls at once when they come back; the report says how many of them missed their
//! turn, how many came back within the return window, and how long those waited from their return to the door.
//!
//! What is simplified, and why it changes nothing the room decides: a waiting session's poll only matters to the
//! room through its liveness mark, which is read when the session reaches the head. So the rehearsal sends the polls
//! of sessions within a window ahead of the head (larger than the head moves in an abandon grace period) through
//! `WaitingRoom::locate`, and skips the polls of people further back. Two kinds of poll are sent wherever the person
//! is: a followed person's polls until the page first shows them an estimate (the estimate at join), and, once the
//! room is sold out, every poll of everyone still in line until each has heard it. The cost of a poll itself is
//! measured by the benchmarks, not here.
//!
//! Enabled by the `rehearsal` feature (the `rehearsal` example and the tests turn it on). The files:
//! - this one: what a rehearsal can vary ([`Params`]) and how to run one ([`run`], [`run_on`]);
//! - `crowd.rs`: the people, drawn once from the seed (when each arrives, gives up, buys, how many seats);
//! - `simulation.rs`: the on-sale second by second through the room, one method per step of a second, and the
//!   agenda of what is due for each admitted person (a hold, the end of the visit);
//! - `report.rs`: what the rehearsal found ([`Report`], a [`Minute`] per row of its table) and the figures made
//!   from the followed people at the end.

mod crowd;
mod report;
mod simulation;

use std::sync::Arc;

use waitroom_layer::store::Store;
use waitroom_layer::{MemoryStore, StoreError};

pub use crate::numbers::grouped;
pub use report::{Minute, Report};
use simulation::Simulation;

/// Everything a rehearsal can vary. [`Params::default`] is the seed's on-sale.
#[derive(Debug, Clone)]
pub struct Params {
    /// People who come for the on-sale (before `scale`).
    pub crowd: u64,
    /// Multiplies the crowd, the seats, the capacity and `admit_per_minute` together, so the ratios (people per
    /// seat, seats per place inside) and the minutes (when seats run out) stay those of the unscaled sale.
    pub scale: f64,
    /// Seats on sale.
    pub seats: u64,
    /// Most sessions active at once.
    pub capacity: u64,
    /// A cap on admissions per minute (before `scale`), on top of the capacity: smooths the opening, when the whole
    /// capacity would otherwise go in at once. `None` (the seed's room): the capacity alone.
    pub admit_per_minute: Option<u64>,
    /// Minutes from the first arrival to the opening (the pre-queue window).
    pub prequeue_minutes: f64,
    /// Share of the crowd that arrives before the opening.
    pub early_share: f64,
    /// Mean minutes after the opening at which the late share arrives (exponential).
    pub late_mean_minutes: f64,
    /// A random draw at the opening (else first come, first served).
    pub random_draw: bool,
    /// Mean visit length in minutes (gamma-distributed, shape 4).
    pub visit_minutes: f64,
    /// Share of admitted people who buy.
    pub buy_share: f64,
    /// Shares of orders of 1, 2, 3 and 4 seats (they need not add up to one: they are taken relative to their
    /// sum). The seed's: 10%, 15%, 40%, 35%, three seats an order on average.
    pub order_sizes: [f64; 4],
    /// Share of admitted people who close the tab without finishing (they idle out after `idle_minutes`).
    pub tab_close_share: f64,
    /// Share of non-buyers who hold seats before leaving (the holds expire).
    pub non_buyer_hold_share: f64,
    /// Seconds into a visit at which seats are held.
    pub hold_after_seconds: u64,
    /// Share of people in line who give up per minute of waiting.
    pub give_up_per_minute: f64,
    /// Seconds between polls of the holding page.
    pub poll_seconds: u64,
    /// Share of people who step away once while in line (a background tab, a locked phone, a train's lost
    /// signal), at a random moment in their first `step_away_within_minutes` after the opening (or their
    /// arrival), for an exponential time of mean `away_minutes`. Their page does not poll meanwhile, and polls at
    /// once when they come back. 0 (the default): nobody steps away. Drawn apart from the rest of the crowd, so
    /// the same seed makes the same crowd whatever the share.
    pub step_away_share: f64,
    /// Mean minutes away of those who step away.
    pub away_minutes: f64,
    /// One-shot visitors (bots, crawlers, uptime checks, link previews: one request each, never back), as a share
    /// of the crowd (after `scale`; above 1 for a flood), arriving evenly from the first arrival until ten minutes
    /// after the opening. Each takes a ticket ([`WaitingRoom::ticket`](waitroom_layer::WaitingRoom::ticket)) and
    /// never redeems it. 0 (the default): none. Drawn apart from the crowd, so the same seed makes the same crowd
    /// whatever the share.
    pub one_shot_share: f64,
    /// The span, in minutes from the opening (or the arrival, if later), in which people step away.
    pub step_away_within_minutes: f64,
    /// The room's return window, in minutes ([`RoomBuilder::return_window`]).
    ///
    /// [`RoomBuilder::return_window`]: waitroom_layer::RoomBuilder::return_window
    pub return_window_minutes: f64,
    /// Idle timeout of an active session, in minutes.
    pub idle_minutes: f64,
    /// Stop this many minutes after the opening at the latest.
    pub max_minutes_after_open: u64,
    /// Seed of the random generator (runs are repeatable).
    pub seed: u64,
    /// Every this many sessions, one is followed for the estimate-accuracy and fairness figures.
    pub sample_every: u64,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            crowd: 600_000,
            scale: 1.0,
            seats: 48_000,
            capacity: 8_000,
            admit_per_minute: None,
            prequeue_minutes: 30.0,
            early_share: 0.85,
            late_mean_minutes: 3.0,
            random_draw: true,
            visit_minutes: 4.0,
            buy_share: 0.9,
            order_sizes: [0.10, 0.15, 0.40, 0.35],
            tab_close_share: 0.02,
            non_buyer_hold_share: 0.5,
            hold_after_seconds: 60,
            give_up_per_minute: 0.01,
            poll_seconds: 20,
            step_away_share: 0.0,
            away_minutes: 5.0,
            one_shot_share: 0.0,
            step_away_within_minutes: 10.0,
            return_window_minutes: 10.0,
            idle_minutes: 10.0,
            max_minutes_after_open: 45,
            seed: 2026,
            sample_every: 25,
        }
    }
}

/// Runs a rehearsal on the embedded store.
///
/// # Errors
/// Never with the embedded store; see [`run_on`].
pub async fn run(p: &Params) -> Result<Report, StoreError> {
    run_on(p, Arc::new(MemoryStore::new()), "rehearsal").await
}

/// Runs a rehearsal on `store` (an on-sale id `event` not used before in that store).
///
/// # Errors
/// When the store fails; also (as [`StoreError::Config`], naming the reason) when the parameters make no room
/// or no order size.
pub async fn run_on(p: &Params, store: Arc<dyn Store>, event: &str) -> Result<Report, StoreError> {
    let mut simulation = Simulation::start(p, store, event).await?;
    simulation.run().await?;
    Ok(simulation.report())
}
