//! The crowd, drawn once from the seed: when each person arrives and gives up, whether they buy and how many seats,
//! how long their visit lasts. The simulation then only reads these draws, so a seed is one crowd.

use rand::rngs::StdRng;
use rand::{RngExt as _, SeedableRng as _};
use waitroom_layer::{EtaBasis, Status, StoreError};

use super::Params;

/// The crowd's random draws, from a seeded generator ([`StdRng`]): a seed is one crowd, on every platform (for one
/// version of `rand`, which pins its algorithm until its next breaking release).
struct Draws(StdRng);

impl Draws {
    fn new(seed: u64) -> Self {
        Self(StdRng::seed_from_u64(seed))
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        self.0.random()
    }
    /// Exponential with the given mean.
    fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.unit()).ln()
    }
    /// Gamma with shape `k` (an integer) and the given mean: the sum of `k` exponentials.
    fn gamma(&mut self, k: u32, mean: f64) -> f64 {
        (0..k).map(|_| self.exp(mean / f64::from(k))).sum()
    }
}

/// An estimate of the wait shown to a followed person.
#[derive(Debug, Clone, Copy)]
pub(super) struct Shown {
    /// The second it was shown.
    pub at_s: u64,
    /// The estimated wait, in seconds.
    pub seconds: u64,
    /// Where the estimate came from.
    pub basis: EtaBasis,
}

impl Shown {
    /// The estimate `status` shows at second `t`, if it shows one.
    pub fn of(t: u64, status: &Status) -> Option<Self> {
        match (status.eta_seconds, status.eta_basis) {
            (Some(seconds), Some(basis)) => Some(Self {
                at_s: t,
                seconds,
                basis,
            }),
            _ => None,
        }
    }
}

/// One person of the crowd: what was drawn for them, then what happened to them.
#[derive(Debug, Clone)]
pub(super) struct Person {
    pub sid: String,
    pub arrive_s: u64,
    pub give_up_s: u64,
    pub buys: bool,
    pub tab_close: bool,
    pub holds_anyway: bool,
    pub qty: u64,
    pub visit_s: u64,
    /// When this person steps away and comes back, if they do (seconds since the first arrival).
    pub away: Option<(u64, u64)>,
    /// When they came back after missing their turn (their first poll then), if they did.
    pub returned_s: Option<u64>,
    /// The line number, once known (0 before).
    pub number: u64,
    /// When the door let them in (the latest time, for one let in again after a lapse).
    pub admitted_s: Option<u64>,
    /// Let in while away and not back within the arrival window: the room kept their turn for the return window
    /// (until they are let in again, or give up).
    pub lapsed: bool,
    /// Let in again after such a lapse.
    pub let_in_again: bool,
    pub bought: u64,
    pub held: u64,
    /// Estimates shown to a followed person.
    pub followed: Vec<Shown>,
    /// The first estimate a followed person was shown (at join, or at the first poll with a place in line).
    pub first_shown: Option<Shown>,
    /// When their own poll told them "sold out", if it did.
    pub told_sold_out_s: Option<u64>,
    /// The position a followed person was shown with their first estimate.
    pub first_position: Option<u64>,
}

/// The crowd of `size` people for an on-sale opening `open_s` seconds after the first arrival.
///
/// # Errors
/// When the order sizes' shares add up to nothing.
pub(super) fn crowd(p: &Params, size: u64, open_s: u64) -> Result<Vec<Person>, StoreError> {
    let mut rng = Draws::new(p.seed);
    let order_total: f64 = p.order_sizes.iter().map(|s| s.max(0.0)).sum();
    if !(order_total > 0.0 && order_total.is_finite()) {
        return Err(StoreError::config(
            "the order sizes' shares must add up to more than zero",
        ));
    }
    // Who steps away, when and for how long: a stream of its own, so the rest of the crowd is the same for a seed
    // whatever the share.
    let mut away_rng = Draws::new(p.seed ^ 0x57e9_a3a7);
    let order_cumulative: [f64; 3] =
        std::array::from_fn(|k| p.order_sizes[..=k].iter().map(|s| s.max(0.0)).sum::<f64>());
    Ok((0..size)
        .map(|i| {
            let arrive_s = if rng.unit() < p.early_share {
                (rng.unit() * open_s as f64) as u64
            } else {
                open_s + rng.exp(p.late_mean_minutes * 60.0) as u64
            };
            let give_up_after = if p.give_up_per_minute > 0.0 {
                rng.exp(60.0 / p.give_up_per_minute)
            } else {
                f64::MAX
            };
            // Orders of 1 to 4 seats (the seed's: three on average).
            let u = rng.unit() * order_total;
            let qty = 1 + order_cumulative.iter().filter(|&&c| u >= c).count() as u64;
            let buys = rng.unit() < p.buy_share;
            let away = (away_rng.unit() < p.step_away_share).then(|| {
                let from = arrive_s.max(open_s)
                    + (away_rng.unit() * p.step_away_within_minutes * 60.0) as u64;
                (from, from + 1 + away_rng.exp(p.away_minutes * 60.0) as u64)
            });
            Person {
                sid: format!("r{i:021}"),
                arrive_s,
                // People give up only once the line is moving (after the opening).
                give_up_s: arrive_s
                    .max(open_s)
                    .saturating_add(give_up_after.min(1e12) as u64),
                buys,
                tab_close: !buys && rng.unit() < p.tab_close_share / (1.0 - p.buy_share).max(1e-9),
                holds_anyway: rng.unit() < p.non_buyer_hold_share,
                qty,
                visit_s: (rng.gamma(4, p.visit_minutes * 60.0) as u64)
                    .max(p.hold_after_seconds + 5),
                away,
                returned_s: None,
                number: 0,
                admitted_s: None,
                lapsed: false,
                let_in_again: false,
                bought: 0,
                held: 0,
                followed: Vec::new(),
                first_shown: None,
                told_sold_out_s: None,
                first_position: None,
            }
        })
        .collect())
}

/// When each of the `count` one-shot visitors sends its one request (seconds since the first arrival, in order):
/// evenly from the first arrival until ten minutes after the opening, from a stream of their own.
pub(super) fn one_shots(seed: u64, count: u64, open_s: u64) -> Vec<u64> {
    let mut rng = Draws::new(seed ^ 0x0e5_4071);
    let span = (open_s + 600) as f64;
    let mut at: Vec<u64> = (0..count).map(|_| (rng.unit() * span) as u64).collect();
    at.sort_unstable();
    at
}

impl Person {
    /// Whether this person is away at second `t` (their page does not poll).
    pub fn away_at(&self, t: u64) -> bool {
        self.away
            .is_some_and(|(from, until)| from <= t && t < until)
    }
}
