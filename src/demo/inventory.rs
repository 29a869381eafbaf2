//! [`SeatInventory`]: the seats, holds that expire, and the conditional writes that decide between two people
//! clicking the same seat.
//!
//! Every change is one step under one lock, the in-memory stand-in for a database row update such as
//! `UPDATE seats SET holder = $me, until = $t WHERE id = ANY($ids) AND (holder IS NULL OR holder = $me OR until <= $now)`
//! that must touch every requested row or none. A seat someone else holds is refused, never overwritten; a
//! hold past its time counts as free. Time comes in as an argument, so tests need no clock.
//!
//! A payment buys exactly the hold it checked, or nothing: each hold has an id, a new one for every change
//! ([`SeatInventory::hold`]), and [`SeatInventory::purchase`] takes the [`Hold`] the payment started from and
//! refuses ([`PurchaseError::Changed`]) when the session's hold is no longer that one. A sale is a [`Sale`] until
//! its finish has reached the room ([`SeatInventory::confirm`] takes it by value, once); the counts the room is
//! told ([`SeatInventory::room_view`]) are computed from the sales still open under the same lock, so no counter
//! is ever decremented past what was added.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;
use waitroom_layer::Inventory;

/// A seat's number, `0..total`.
pub type SeatId = u32;

/// How the seats are laid out: sections of rows of seats. Only used for labels and for paging the seat map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Seats in one row.
    pub seats_per_row: u32,
    /// Rows in one section (at most 26: rows are lettered).
    pub rows_per_section: u32,
}

impl Default for Layout {
    /// 25 seats a row, 20 rows a section: 500 seats per page of the seat map.
    fn default() -> Self {
        Layout {
            seats_per_row: 25,
            rows_per_section: 20,
        }
    }
}

impl Layout {
    /// Seats in one section.
    pub fn section_size(&self) -> u32 {
        self.seats_per_row * self.rows_per_section
    }

    /// The section a seat is in (0-based).
    pub fn section_of(&self, seat: SeatId) -> u32 {
        seat / self.section_size()
    }

    /// `Section 3, Row F, Seat 14`.
    pub fn label(&self, seat: SeatId) -> String {
        let in_section = seat % self.section_size();
        let row = in_section / self.seats_per_row;
        let row = char::from(b'A' + (row % 26) as u8);
        format!(
            "Section {}, Row {row}, Seat {}",
            self.section_of(seat) + 1,
            in_section % self.seats_per_row + 1
        )
    }
}

/// What one seat looks like to one person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SeatState {
    /// Nobody holds it.
    Free,
    /// Held by the person asking.
    Mine,
    /// Held by someone else at checkout (it comes back if their hold expires).
    Held,
    /// Sold.
    Sold,
}

/// A hold: the seats one session set aside, until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Hold {
    /// This hold's id: every hold (and every change of a session's hold) gets a new one, so a payment can tell
    /// the hold it checked from one made since.
    #[serde(default)]
    pub id: u64,
    /// The seats, in ascending order.
    pub seats: Vec<SeatId>,
    /// When the hold lapses, ms since the Unix epoch.
    pub until_ms: u64,
}

/// Why a hold was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldError {
    /// No seat was asked for.
    Empty,
    /// More seats than the purchase limit.
    TooMany {
        /// The limit.
        limit: u32,
    },
    /// A seat number outside the venue.
    NoSuchSeat(SeatId),
    /// The conditional write failed: these seats are held by someone else or sold. Nothing changed.
    Taken(Vec<SeatId>),
}

impl std::fmt::Display for HoldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Empty => write!(f, "choose at least one seat"),
            Self::TooMany { limit } => write!(f, "you can hold at most {limit} seats"),
            Self::NoSuchSeat(s) => write!(f, "there is no seat {s}"),
            Self::Taken(s) => write!(f, "{} of those seats were just taken", s.len()),
        }
    }
}

impl std::error::Error for HoldError {}

/// Why a purchase was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PurchaseError {
    /// The session holds no seats.
    NoHold,
    /// The hold lapsed before the payment went through; its seats went back on sale.
    Expired,
    /// The session's hold changed (new seats chosen, or a lapsed seat taken by someone else) after the payment
    /// checked it: nothing was sold, and the new hold stands.
    Changed,
}

/// Seats sold whose finish has not reached the room yet: made only by [`SeatInventory::purchase`], consumed by
/// [`SeatInventory::confirm`] (not `Clone`, so it is confirmed at most once).
#[derive(Debug, PartialEq, Eq)]
pub struct Sale {
    id: u64,
    seats: Vec<SeatId>,
}

impl Sale {
    /// The seats sold.
    pub fn seats(&self) -> &[SeatId] {
        &self.seats
    }
}

impl std::fmt::Display for PurchaseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoHold => write!(f, "you hold no seats"),
            Self::Expired => write!(f, "your hold expired and the seats went back on sale"),
            Self::Changed => write!(
                f,
                "your seats changed while the payment was going through; nothing was bought"
            ),
        }
    }
}

impl std::error::Error for PurchaseError {}

#[derive(Debug, Clone)]
enum Seat {
    Free,
    Held { by: Arc<str>, until_ms: u64 },
    Sold,
}

#[derive(Debug)]
struct State {
    seats: Vec<Seat>,
    holds: HashMap<Arc<str>, Hold>,
    sold: u64,
    held: u64,
    /// Seats neither sold nor held, per section (expired holds count as held until swept).
    free_in_section: Vec<u32>,
    /// Seat changes so far (the shop's file is written again when this moves).
    changes: u64,
    /// The id of the next hold.
    next_hold: u64,
    /// Sales whose finish has not reached the room yet: sale id -> seats (see [`Sale`]).
    open_sales: HashMap<u64, u64>,
    /// The id of the next sale.
    next_sale: u64,
}

impl State {
    /// The one place a seat changes, so the counters cannot drift.
    fn set(&mut self, layout: &Layout, seat: SeatId, to: Seat) {
        let section = layout.section_of(seat) as usize;
        self.changes += 1;
        let from = std::mem::replace(&mut self.seats[seat as usize], to);
        match from {
            Seat::Free => self.free_in_section[section] -= 1,
            Seat::Held { .. } => self.held -= 1,
            Seat::Sold => self.sold -= 1,
        }
        match &self.seats[seat as usize] {
            Seat::Free => self.free_in_section[section] += 1,
            Seat::Held { .. } => self.held += 1,
            Seat::Sold => self.sold += 1,
        }
    }

    /// Frees the seats of `session`'s hold that it still holds.
    fn drop_hold(&mut self, layout: &Layout, session: &str) -> usize {
        let Some(hold) = self.holds.remove(session) else {
            return 0;
        };
        let mut freed = 0;
        for s in hold.seats {
            if matches!(&self.seats[s as usize], Seat::Held { by, .. } if &**by == session) {
                self.set(layout, s, Seat::Free);
                freed += 1;
            }
        }
        freed
    }
}

/// The venue's seats. Cheap to clone (one `Arc`); every clone sees the same seats.
#[derive(Debug, Clone)]
pub struct SeatInventory {
    layout: Layout,
    state: Arc<Mutex<State>>,
}

impl SeatInventory {
    /// `total` free seats in the default [`Layout`].
    pub fn new(total: u32) -> Self {
        Self::with_layout(total, Layout::default())
    }

    /// `total` free seats laid out by `layout`.
    ///
    /// # Panics
    /// When the layout has a zero dimension or more than 26 rows per section.
    pub fn with_layout(total: u32, layout: Layout) -> Self {
        assert!(
            layout.seats_per_row > 0 && (1..=26).contains(&layout.rows_per_section),
            "a layout needs seats in a row and 1 to 26 rows per section"
        );
        let sections = total.div_ceil(layout.section_size()) as usize;
        let mut free_in_section = vec![layout.section_size(); sections];
        if let Some(last) = free_in_section.last_mut() {
            *last = total - (sections as u32 - 1) * layout.section_size();
        }
        SeatInventory {
            layout,
            state: Arc::new(Mutex::new(State {
                seats: vec![Seat::Free; total as usize],
                holds: HashMap::new(),
                sold: 0,
                held: 0,
                free_in_section,
                changes: 0,
                next_hold: 1,
                open_sales: HashMap::new(),
                next_sale: 1,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The layout.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Seats in the venue.
    pub fn total(&self) -> u32 {
        self.lock().seats.len() as u32
    }

    /// The counts the room listens to: total, sold, held.
    pub fn counts(&self) -> Inventory {
        let st = self.lock();
        Inventory {
            total: st.seats.len() as u64,
            sold: st.sold,
            held: st.held,
        }
    }

    /// The counts as the room should see them: the seats of a sale whose finish has not reached the room yet
    /// ([`Sale`]) still count as held, since the finish itself moves them from held to sold in the room's counts
    /// (`WaitingRoom::finish`). Reporting them as sold before would count them twice and could tell the line
    /// "sold out" early. Available seats come out the same either way; read under one lock with the counts.
    pub fn room_view(&self) -> Inventory {
        let st = self.lock();
        // Every open sale's seats are among the sold ones (a sold seat stays sold), so this is at most `sold`.
        let open: u64 = st.open_sales.values().sum();
        Inventory {
            total: st.seats.len() as u64,
            sold: st.sold.saturating_sub(open),
            held: st.held + open.min(st.sold),
        }
    }

    /// A sale's finish reached the room: its seats count as sold in [`room_view`](Self::room_view) from now on.
    pub fn confirm(&self, sale: Sale) {
        self.lock().open_sales.remove(&sale.id);
    }

    /// How many sections the seat map has.
    pub fn sections(&self) -> u32 {
        self.lock().free_in_section.len() as u32
    }

    /// Seats neither sold nor held, per section.
    pub fn free_per_section(&self) -> Vec<u32> {
        self.lock().free_in_section.clone()
    }

    /// The seats of `section` as `session` sees them (its own hold as [`SeatState::Mine`]; lapsed holds free).
    pub fn section(&self, section: u32, session: &str, now_ms: u64) -> Vec<(SeatId, SeatState)> {
        let st = self.lock();
        let size = self.layout.section_size();
        let start = section.saturating_mul(size).min(st.seats.len() as u32);
        let end = start.saturating_add(size).min(st.seats.len() as u32);
        (start..end)
            .map(|id| {
                let s = match &st.seats[id as usize] {
                    Seat::Free => SeatState::Free,
                    Seat::Sold => SeatState::Sold,
                    Seat::Held { until_ms, .. } if *until_ms <= now_ms => SeatState::Free,
                    Seat::Held { by, .. } if &**by == session => SeatState::Mine,
                    Seat::Held { .. } => SeatState::Held,
                };
                (id, s)
            })
            .collect()
    }

    /// `session`'s hold, if it has one that has not lapsed.
    pub fn hold_of(&self, session: &str, now_ms: u64) -> Option<Hold> {
        self.lock()
            .holds
            .get(session)
            .filter(|h| h.until_ms > now_ms)
            .cloned()
    }

    /// Holds `seats` for `session` until `now_ms + hold_ms`, all or none: each seat must be free, held by this
    /// session already, or held by a hold that has lapsed. The new hold replaces the session's previous one
    /// (seats it no longer asks for go back on sale).
    ///
    /// # Errors
    /// [`HoldError::Taken`] names the seats someone else holds or bought (nothing changed); the other variants
    /// for requests that are wrong whoever asks.
    pub fn hold(
        &self,
        session: &str,
        seats: &[SeatId],
        limit: u32,
        now_ms: u64,
        hold_ms: u64,
    ) -> Result<Hold, HoldError> {
        let mut wanted = seats.to_vec();
        wanted.sort_unstable();
        wanted.dedup();
        if wanted.is_empty() {
            return Err(HoldError::Empty);
        }
        if wanted.len() > limit as usize {
            return Err(HoldError::TooMany { limit });
        }
        let mut st = self.lock();
        if let Some(&bad) = wanted.iter().find(|&&s| s as usize >= st.seats.len()) {
            return Err(HoldError::NoSuchSeat(bad));
        }
        // The condition, checked for every seat before any is written.
        let taken: Vec<SeatId> = wanted
            .iter()
            .copied()
            .filter(|&s| match &st.seats[s as usize] {
                Seat::Free => false,
                Seat::Sold => true,
                Seat::Held { by, until_ms } => &**by != session && *until_ms > now_ms,
            })
            .collect();
        if !taken.is_empty() {
            return Err(HoldError::Taken(taken));
        }
        st.drop_hold(&self.layout, session);
        let me: Arc<str> = Arc::from(session);
        let until_ms = now_ms + hold_ms;
        for &s in &wanted {
            if let Seat::Held { by, .. } = &st.seats[s as usize] {
                // A lapsed hold of someone else: it loses this seat.
                let other = by.clone();
                let id = st.next_hold;
                st.next_hold += 1;
                if let Some(h) = st.holds.get_mut(&other) {
                    // It is another hold now: a payment that checked the old one is refused.
                    h.id = id;
                    h.seats.retain(|&x| x != s);
                    if h.seats.is_empty() {
                        st.holds.remove(&other);
                    }
                }
            }
            st.set(
                &self.layout,
                s,
                Seat::Held {
                    by: me.clone(),
                    until_ms,
                },
            );
        }
        let id = st.next_hold;
        st.next_hold += 1;
        let hold = Hold {
            id,
            seats: wanted,
            until_ms,
        };
        st.holds.insert(me, hold.clone());
        Ok(hold)
    }

    /// Puts `session`'s held seats back on sale; returns how many.
    pub fn release(&self, session: &str) -> usize {
        self.lock().drop_hold(&self.layout, session)
    }

    /// Sells exactly the hold `checked` (what the payment was for): its seats turn sold if it is still
    /// `session`'s hold and has not lapsed (a lapsed hold is released). The [`Sale`] stays open until
    /// [`confirm`](Self::confirm)ed.
    ///
    /// # Errors
    /// [`PurchaseError::NoHold`], [`PurchaseError::Expired`], or [`PurchaseError::Changed`] when the session's
    /// hold is no longer `checked` (nothing sold, the hold left as it is).
    pub fn purchase(
        &self,
        session: &str,
        checked: &Hold,
        now_ms: u64,
    ) -> Result<Sale, PurchaseError> {
        let mut st = self.lock();
        let Some(hold) = st.holds.get(session) else {
            return Err(PurchaseError::NoHold);
        };
        if hold.until_ms <= now_ms {
            st.drop_hold(&self.layout, session);
            return Err(PurchaseError::Expired);
        }
        if hold.id != checked.id || hold.seats != checked.seats {
            return Err(PurchaseError::Changed);
        }
        let Some(hold) = st.holds.remove(session) else {
            return Err(PurchaseError::NoHold);
        };
        for &s in &hold.seats {
            st.set(&self.layout, s, Seat::Sold);
        }
        let id = st.next_sale;
        st.next_sale += 1;
        st.open_sales.insert(id, hold.seats.len() as u64);
        Ok(Sale {
            id,
            seats: hold.seats,
        })
    }

    /// The sold seats, the holds (by session) and the count of changes so far, to save.
    pub(crate) fn saved(&self) -> (Vec<SeatId>, Vec<(String, Hold)>, u64) {
        let st = self.lock();
        let sold = (0..st.seats.len() as SeatId)
            .filter(|&s| matches!(st.seats[s as usize], Seat::Sold))
            .collect();
        let holds = st
            .holds
            .iter()
            .map(|(s, h)| (s.to_string(), h.clone()))
            .collect();
        (sold, holds, st.changes)
    }

    /// Sells `sold` and holds `holds` again, on a fresh inventory (what [`saved`](Self::saved) returned before a
    /// restart). Returns `None` when a seat is out of range or in two places.
    pub(crate) fn restore(&self, sold: &[SeatId], holds: &[(String, Hold)]) -> Option<()> {
        let mut st = self.lock();
        let total = st.seats.len();
        let free = |st: &State, s: SeatId| {
            (s as usize) < total && matches!(st.seats[s as usize], Seat::Free)
        };
        for &s in sold {
            if !free(&st, s) {
                return None;
            }
            st.set(&self.layout, s, Seat::Sold);
        }
        for (session, hold) in holds {
            let by: Arc<str> = Arc::from(session.as_str());
            for &s in &hold.seats {
                if !free(&st, s) {
                    return None;
                }
                let seat = Seat::Held {
                    by: by.clone(),
                    until_ms: hold.until_ms,
                };
                st.set(&self.layout, s, seat);
            }
            st.holds.insert(by, hold.clone());
            // New holds get ids after the saved ones (a payment that checked a saved hold still matches it).
            st.next_hold = st.next_hold.max(hold.id + 1);
        }
        st.changes = 0;
        Some(())
    }

    /// Puts every lapsed hold's seats back on sale; returns how many seats came back.
    pub fn expire(&self, now_ms: u64) -> usize {
        let mut st = self.lock();
        let lapsed: Vec<Arc<str>> = st
            .holds
            .iter()
            .filter(|(_, h)| h.until_ms <= now_ms)
            .map(|(s, _)| s.clone())
            .collect();
        lapsed.iter().map(|s| st.drop_hold(&self.layout, s)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: u64 = 60_000;

    #[test]
    fn a_held_seat_is_refused_to_others_until_the_hold_lapses() {
        let inv = SeatInventory::new(12);
        let a = inv.hold("a", &[0, 1, 2], 4, 0, 5 * MIN).unwrap();
        assert_eq!(a.seats, vec![0, 1, 2]);
        assert_eq!(
            inv.hold("b", &[2, 3], 4, 1_000, 5 * MIN),
            Err(HoldError::Taken(vec![2]))
        );
        assert_eq!(
            inv.counts(),
            Inventory {
                total: 12,
                sold: 0,
                held: 3
            },
            "a refused hold changes nothing"
        );
        // After the hold lapses, b may take the seat even before the sweep; a's hold shrinks.
        inv.hold("b", &[2, 3], 4, 5 * MIN, 5 * MIN).unwrap();
        assert_eq!(inv.counts().held, 4);
        assert_eq!(inv.purchase("a", &a, 5 * MIN), Err(PurchaseError::Expired));
        assert_eq!(inv.counts().held, 2, "a's lapsed seats went back");
        let b = inv.hold_of("b", 6 * MIN).unwrap();
        assert_eq!(inv.purchase("b", &b, 6 * MIN).unwrap().seats(), [2, 3]);
        assert_eq!(inv.counts().sold, 2);
        assert_eq!(
            inv.hold("c", &[3], 4, 6 * MIN, MIN),
            Err(HoldError::Taken(vec![3]))
        );
    }

    #[test]
    fn a_new_hold_replaces_the_old_and_limits_hold() {
        let inv = SeatInventory::new(600);
        inv.hold("a", &[1, 2], 2, 0, MIN).unwrap();
        inv.hold("a", &[2, 3], 2, 10, MIN).unwrap();
        assert_eq!(inv.hold_of("a", 20).unwrap().seats, vec![2, 3]);
        assert_eq!(inv.counts().held, 2);
        assert_eq!(inv.section(0, "b", 20)[1].1, SeatState::Free);
        assert_eq!(inv.section(0, "a", 20)[2].1, SeatState::Mine);
        assert_eq!(inv.section(0, "b", 20)[2].1, SeatState::Held);
        assert_eq!(
            inv.hold("a", &[1, 2, 3], 2, 0, MIN),
            Err(HoldError::TooMany { limit: 2 })
        );
        assert_eq!(inv.hold("a", &[], 2, 0, MIN), Err(HoldError::Empty));
        assert_eq!(
            inv.hold("a", &[600], 2, 0, MIN),
            Err(HoldError::NoSuchSeat(600))
        );
        assert_eq!(inv.free_per_section(), vec![498, 100]);
        assert_eq!(inv.expire(MIN + 10), 2);
        assert_eq!(inv.counts().held, 0);
        assert_eq!(inv.free_per_section(), vec![500, 100]);
        assert_eq!(inv.release("a"), 0);
        let gone = Hold {
            id: 0,
            seats: vec![2],
            until_ms: MIN,
        };
        assert_eq!(inv.purchase("a", &gone, 0), Err(PurchaseError::NoHold));
    }

    #[test]
    fn labels_name_section_row_and_seat() {
        let l = Layout::default();
        assert_eq!(l.label(0), "Section 1, Row A, Seat 1");
        assert_eq!(l.label(5 * 25 + 13), "Section 1, Row F, Seat 14");
        assert_eq!(l.label(500), "Section 2, Row A, Seat 1");
        assert_eq!(SeatInventory::new(48_000).sections(), 96);
    }
}
