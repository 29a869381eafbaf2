//! A session's way through the line: join, locate (answered from memory when it can be), claim the pass,
//! finish; and the finishes read back from the store into the token deny list.

use tracing::Instrument as _;
use waitroom_verify::fingerprint;

use super::WaitingRoom;
use super::lifecycle::RoomEventKind;
use crate::error::StoreError;

/// Most finishes kept while the store is out of reach (see [`WaitingRoom::finish`]); past it the oldest stay and
/// new ones are given up (those sessions idle out), counted by `waitroom_finishes_dropped`.
pub(crate) const MAX_PENDING_FINISHES: usize = 10_000;
use crate::store::{Join, Placement, Reclaim, Redeem, Return, SessionState, Ticket};

impl WaitingRoom {
    /// Joins the line (idempotent). With an `account`, the account holds one place whichever session asks; the
    /// returned placement names the session that holds it.
    ///
    /// # Errors
    /// When the store cannot be reached; nothing changed then.
    pub async fn join(
        &self,
        session: &str,
        account: Option<&str>,
    ) -> Result<Placement, StoreError> {
        self.inner.metrics.joins.inc();
        let span = tracing::debug_span!("waitroom.join", event = %self.event(), session = %fingerprint(session));
        async move {
            let join = Join {
                session: session.to_owned(),
                account: account.map(str::to_owned),
                now_ms: self.now_ms(),
                draw_key: rand::random(),
            };
            let mut p = self
                .call(|| self.inner.store.join(self.event(), &join))
                .await?;
            if p.state == SessionState::Missed {
                // Its turn came while it was away: it comes back (or, after the window, joins again at the back).
                let holder = p.session.clone();
                if let (Some(back), _) = self.come_back(&holder).await? {
                    p = back;
                }
                if p.state.is_terminal() {
                    p = self
                        .call(|| self.inner.store.join(self.event(), &join))
                        .await?;
                }
            }
            if let Some(n) = p.number {
                self.note_number(n);
            }
            self.remember(&p, false);
            tracing::debug!(
                holder = %fingerprint(&p.session),
                state = ?p.state,
                number = p.number,
                "joined"
            );
            if matches!(p.state, SessionState::Waiting | SessionState::PreQueue) {
                self.emit(RoomEventKind::Joined {
                    session: p.session.clone(),
                    number: p.number,
                });
            }
            Ok(p)
        }
        .instrument(span)
        .await
    }

    /// Lets a session that just joined in at once when the door would let it in now: the room has a free place
    /// for its position, nobody waits in the returning queue, the door is open (not paused, opened, seats
    /// available) and the on-sale is neither closed nor sold out, as the last snapshot tells. Then it runs the
    /// admission tick now rather than at the next interval; the tick decides, in the store, within every rule of
    /// the door (capacity, per-minute cap, seats, the hold after a restore, whoever is ahead: the front lane, the
    /// reclaimed, the returning queue and the line go first), so many instances doing this at once never let in
    /// more than the capacity. Returns the placement, admitted, when the tick let this session in.
    ///
    /// A crowd never takes this path: with people ahead beyond the free places the snapshot says no. At most one
    /// such tick runs at a time on an instance; a newcomer arriving while one runs waits for the next tick (its
    /// page asks again within a second or two).
    pub(crate) async fn let_in_at_once(&self, p: &Placement) -> Option<Placement> {
        use std::sync::atomic::Ordering;
        let (SessionState::Waiting, Some(number), true) =
            (p.state, p.number, self.inner.config.straight_in)
        else {
            return None;
        };
        let snap = self.inner.snap.load();
        let s = &snap.settings;
        let free = s.capacity.saturating_sub(snap.active);
        let may = s.door_open(self.now_ms())
            && !s.turning_away()
            && snap.drawn
            && snap.returning == 0
            && free > 0
            && number <= snap.served.saturating_add(free);
        if !may || self.inner.early_tick.swap(true, Ordering::AcqRel) {
            return None;
        }
        // Cleared however this ends (a request dropped mid-tick included).
        struct Running<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for Running<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        let _running = Running(&self.inner.early_tick);
        let report = self.run_once(false).await;
        let admitted = report.ok()?.admitted.contains(&p.session);
        admitted.then(|| Placement {
            session: p.session.clone(),
            state: SessionState::Admitted,
            number: p.number,
        })
    }

    /// A first contact's place, written nowhere: a ticket (see "Tickets" in [`crate::store`]). Returns the place
    /// it stands for (waiting with the next number; before the draw, the pre-queue; closed or sold out, turned
    /// away with no place) and when the ticket was given out (seconds since the Unix epoch), to seal in the
    /// session's cookie: the place is written when the ticket comes back within the abandon grace
    /// ([`locate`](Self::locate) with it). `None` for the time: the session was joined for real, when there is a
    /// free place for everyone waiting and this one too (the next tick lets it in; a ticket would hold it back
    /// until its first poll), or before a draw whose opening is within the grace (a pre-queue ticket could come
    /// back after the draw).
    ///
    /// # Errors
    /// When the store cannot be reached; nothing changed then.
    pub async fn ticket(&self, session: &str) -> Result<(Placement, Option<u64>), StoreError> {
        let now = self.now_ms();
        let snap = self.inner.snap.load();
        let grace = self.ticket_grace_ms();
        let draw_near = !snap.drawn
            && snap.settings.random_draw
            && snap
                .settings
                .opens_at_ms
                .is_none_or(|t| t <= now.saturating_add(grace));
        // A free place for everyone in line and this one: the next tick lets it in, so it joins now (a ticket
        // would only hold it back until its first poll). A flood fills the free places (each such join is let in
        // and, if it never comes, its place frees after the arrival window); from then on first contacts get tickets.
        let room_now = snap.drawn
            && snap.settings.door_open(now)
            && snap.waiting() + snap.active < snap.settings.capacity;
        if draw_near || room_now {
            return Ok((self.join(session, None).await?, None));
        }
        // Before the draw and far from it, with the pre-queue taking people: a pre-queue ticket holds no number,
        // so a room whose store asks for batches (a store a round trip away) gives it from its snapshot with no
        // store call, and the store counts it with the next flush (`Touches::tickets`). The ticket comes back
        // within the grace, before the draw (`draw_near` above); one given just as the on-sale closed or sold out
        // takes no place when it comes back.
        let prequeue_here = self.inner.batches.max > 1
            && !snap.drawn
            && snap.settings.random_draw
            && !snap.settings.turning_away();
        drop(snap);
        // Gathered with the other first contacts of this moment into one store call when the store asks for that
        // (see `batch.rs`); else one call of its own.
        let t = if prequeue_here {
            self.inner.batches.add_unsent(1);
            Ticket::PreQueue
        } else if self.inner.batches.max > 1 {
            self.batched_ticket().await?
        } else {
            self.call(|| self.inner.store.ticket(self.event(), now))
                .await?
        };
        let (state, number) = match t {
            Ticket::Number(n) => (SessionState::Waiting, Some(n)),
            Ticket::PreQueue => (SessionState::PreQueue, None),
            Ticket::TurnedAway => (SessionState::TurnedAway, None),
        };
        if let Some(n) = number {
            self.note_number(n);
        }
        let issued = (state != SessionState::TurnedAway).then(|| {
            self.inner.metrics.tickets_issued.inc();
            now / 1000
        });
        let p = Placement {
            session: session.to_owned(),
            state,
            number,
        };
        Ok((p, issued))
    }

    /// How long a ticket stays good: the abandon grace, and at least two poll intervals (the holding page's
    /// first poll comes within 1.2 poll intervals).
    pub(crate) fn ticket_grace_ms(&self) -> u64 {
        let c = &self.inner.config;
        c.abandon_after.max(2 * c.poll_interval).as_millis() as u64
    }

    /// A ticket comes back (see [`ticket`](Self::ticket)): its place is written, or `None` (nothing written) when
    /// it is older than the abandon grace or cannot take a place now; the caller then gives it a new ticket.
    async fn redeem(
        &self,
        session: &str,
        number: Option<u64>,
        issued_s: u64,
    ) -> Result<Option<Placement>, StoreError> {
        let redeem = Redeem {
            session: session.to_owned(),
            number,
            // In the session's favour: the ticket was given out at the end of its second.
            issued_ms: issued_s.saturating_mul(1000).saturating_add(999),
            now_ms: self.now_ms(),
            grace_ms: self.ticket_grace_ms(),
            draw_key: rand::random(),
        };
        let p = self
            .call(|| self.inner.store.redeem(self.event(), &redeem))
            .await?;
        match &p {
            Some(p) => {
                self.inner.metrics.tickets_redeemed.inc();
                self.remember(p, true);
                if matches!(p.state, SessionState::Waiting | SessionState::PreQueue) {
                    self.emit(RoomEventKind::Joined {
                        session: p.session.clone(),
                        number: p.number,
                    });
                }
            }
            None => {
                self.inner.metrics.tickets_expired.inc();
            }
        }
        Ok(p)
    }

    /// Where a session stands. The hot path: a waiting session whose line number is known (from its signed cookie,
    /// `number_hint`, or from the local cache) is answered from local memory with no store call; its liveness is
    /// recorded for the next batch. Others are looked up once in the store; a session whose turn passed (finished,
    /// expired, abandoned, turned away) is then answered from the local cache on later polls. While the on-sale
    /// is closed or sold out, a `number_hint` the head has passed is answered [`SessionState::TurnedAway`] without
    /// a store call.
    ///
    /// # Errors
    /// When the store must be asked and cannot be reached.
    pub async fn locate(
        &self,
        session: &str,
        number_hint: Option<u64>,
    ) -> Result<Option<Placement>, StoreError> {
        self.locate_marked(session, number_hint, false).await
    }

    /// [`locate`](Self::locate) for a session known to have joined the pre-queue (`prequeue_hint`: the pre-queue
    /// mark the HTTP layer's signed cookie carries; a caller that keeps its people's places itself, as the
    /// rehearsal does, passes what its join answered). Before the draw such a session is answered from local
    /// memory, in the pre-queue, with no store call; after it, from this instance's copy of the draw's numbers
    /// once read (see [`Store::drawn_numbers`](crate::store::Store::drawn_numbers)), or in the pre-queue with its
    /// number to come while that read is under way and past the head (ask again later for the number). Without
    /// the mark, every pre-queued session's first poll before the draw and again after it is a store call. Trust
    /// the mark as the number hint is trusted: from a signed cookie or the caller's own records.
    ///
    /// # Errors
    /// When the store must be asked and cannot be reached.
    pub async fn locate_marked(
        &self,
        session: &str,
        number_hint: Option<u64>,
        prequeue_hint: bool,
    ) -> Result<Option<Placement>, StoreError> {
        Ok(self
            .locate_counted(session, number_hint, prequeue_hint, None)
            .await?
            .0)
    }

    /// [`locate_marked`](Self::locate_marked), and whether this look counted a return (a missed session came
    /// back: in time, or too late, which is told once). With `ticket` (when the cookie's ticket was given out,
    /// seconds since the Unix epoch), the ticket is redeemed: see [`ticket`](Self::ticket).
    pub(crate) async fn locate_counted(
        &self,
        session: &str,
        number_hint: Option<u64>,
        prequeue_hint: bool,
        ticket: Option<u64>,
    ) -> Result<(Option<Placement>, Option<Return>), StoreError> {
        if let Some(issued) = ticket {
            // A ticket this instance redeemed already comes back (a client that kept only its first cookie, or a
            // copy of the ticket): answered as its session stands here, from local memory, while that holds;
            // else the store redeems it again, which changes nothing for a session it knows.
            if self.inner.cache.contains_key(session)
                && let Some((state, number)) = self.locate_local(session, number_hint, false)
            {
                let p = Placement {
                    session: session.to_owned(),
                    state,
                    number,
                };
                return Ok((Some(p), None));
            }
            return Ok((self.redeem(session, number_hint, issued).await?, None));
        }
        if let Some((state, number)) = self.locate_local(session, number_hint, prequeue_hint) {
            let p = Placement {
                session: session.to_owned(),
                state,
                number,
            };
            return Ok((Some(p), None));
        }
        // The store's answer: where it has the session (one that missed its turn while away comes back). A session
        // it does not know, with a number (or, after a restore, a pre-queue mark) from its signed cookie, asks for
        // its place back: taken back if the store forgot it (see "When the store forgets" in `crate::store`);
        // `None` when it cannot be (the caller joins it).
        let found = self.come_back(session).await?;
        let restored = self.inner.snap.load().reclaim_upto.is_some();
        if found.0.is_none() && (number_hint.is_some() || (prequeue_hint && restored)) {
            let reclaim = Reclaim {
                session: session.to_owned(),
                // A drawn person whose cookie has no number yet: the one this instance kept from the draw.
                number: number_hint.or_else(|| {
                    prequeue_hint
                        .then(|| self.inner.drawn.get(session))
                        .flatten()
                }),
                now_ms: self.now_ms(),
                draw_key: rand::random(),
            };
            let p = self
                .call(|| self.inner.store.reclaim(self.event(), &reclaim))
                .await?;
            if let Some(p) = &p {
                self.remember(p, true);
            }
            return Ok((p, None));
        }
        Ok(found)
    }

    /// Asks the store where a session that is here now stands: one that missed its turn while away comes back
    /// (within the return window: into the returning queue; after it: told its turn passed).
    async fn come_back(
        &self,
        session: &str,
    ) -> Result<(Option<Placement>, Option<Return>), StoreError> {
        let window = self.inner.config.return_window.as_millis() as u64;
        let now = self.now_ms();
        let (p, counted) = self
            .call(|| {
                self.inner
                    .store
                    .come_back(self.event(), session, now, window)
            })
            .await?;
        if let Some(p) = &p {
            self.remember(p, true);
        }
        if let Some(counted) = counted {
            let session = session.to_owned();
            tracing::debug!(event = %self.event(), session = %fingerprint(&session), ?counted, "came back");
            self.emit(match counted {
                Return::InTime => RoomEventKind::Returned { session },
                Return::TooLate => RoomEventKind::ReturnedLate { session },
            });
        }
        Ok((p, counted))
    }

    /// [`locate`](Self::locate)'s answer when local memory has it, as (state, line number): a session waiting behind
    /// the head (its line number from `number_hint` or the local cache) or in the pre-queue before the draw
    /// (`prequeue_hint`, from its signed cookie, or the local cache); its liveness is recorded for the next batch.
    /// A session whose turn passed (finished, expired, abandoned, turned away) and that the store was asked about
    /// once is answered from the cache too. `None`: only the store knows.
    pub(crate) fn locate_local(
        &self,
        session: &str,
        number_hint: Option<u64>,
        prequeue_hint: bool,
    ) -> Option<(SessionState, Option<u64>)> {
        let snap = self.inner.snap.load();
        if let Some(n) = number_hint {
            self.note_number(n);
        }
        // Moved to the front by an operator: ahead of the number its cookie carries; only the store knows.
        if !snap.moved.is_empty() && snap.moved.iter().any(|s| s == session) {
            return None;
        }
        // After the store forgot the on-sale and was restored: a session it may not know asks the store once (its
        // place is taken back, then remembered here).
        if let Some(upto) = snap.reclaim_upto
            && (number_hint.is_some_and(|n| n <= upto) || (prequeue_hint && number_hint.is_none()))
            && !self.inner.cache.contains_key(session)
        {
            return None;
        }
        if let Some(n) = number_hint
            && n > snap.served
        {
            self.mark_waiting(session, Some(n), &snap);
            return Some((SessionState::Waiting, Some(n)));
        }
        // After the draw, a drawn person whose cookie has no number yet: its number from the draw's index read
        // by this instance (see `drawn.rs`), while the head has not reached it and the door still lets people in.
        // Asked before the cache of people let in lately, as a number in the cookie is: nobody beyond the head was
        // let in (most polls after the draw are these, and the index answers them with one lookup).
        // Whether a drawn person not kept yet is behind the head is read before the lookup: a miss after it means
        // the person was not kept when that frontier was published, so their number is the frontier or beyond (a
        // page landing between the two cannot stand in for them).
        let drawn_lookup =
            prequeue_hint && number_hint.is_none() && snap.drawn && !snap.settings.turning_away();
        let unread_behind = drawn_lookup && self.inner.drawn.unread_are_behind(snap.served);
        let kept = if drawn_lookup {
            self.inner.drawn.get(session)
        } else {
            None
        };
        if let Some(n) = kept
            && n > snap.served
        {
            self.note_number(n);
            self.mark_waiting(session, Some(n), &snap);
            return Some((SessionState::Waiting, Some(n)));
        }
        // Let in lately, as this instance heard (its tick, or another's through the snapshot): admitted, its pass
        // to claim (see `claim`), while the door still lets people in.
        if !snap.settings.turning_away()
            && let Some(number) = self.admitted_lately(session)
        {
            return Some((SessionState::Admitted, number_hint.or(number)));
        }
        // While the on-sale is closed or sold out, the line only leaves by being turned away: a session the head
        // has passed, or in the pre-queue, is answered as turned away without a store call, so the whole line can
        // hear "sold out" at its next poll without a lookup each. One the head passed because it was let in just
        // before hears the same: an unclaimed admission is not let in any more (see `status`), and a claimed pass
        // keeps working on its token.
        if snap.settings.turning_away() && (number_hint.is_some() || prequeue_hint) {
            return Some((SessionState::TurnedAway, number_hint));
        }
        // Before the draw, the signed pre-queue mark is the place, unless sessions were turned away since (a
        // sell-out withdrawn before the draw): then the store says whether this one still has it.
        if prequeue_hint && !snap.drawn && snap.counters.turned_away == 0 {
            self.mark_waiting(session, None, &snap);
            return Some((SessionState::PreQueue, None));
        }
        // After the draw, a drawn person this instance has not read yet while it reads the draw's numbers (in
        // number order, already past the head): their number lies beyond, so they are still in line; answered from
        // memory as in line with their number to come (their cookie keeps its pre-queue mark), instead of a store
        // call each while the read lasts (seconds, with hundreds of thousands drawn).
        // Only for someone not kept: a kept person the head reached was let in or passed over, whatever the read.
        if unread_behind && kept.is_none() {
            self.mark_waiting(session, None, &snap);
            return Some((SessionState::PreQueue, None));
        }
        let (state, number) = self.inner.cache.get(session)?;
        // A session whose turn passed (finished, expired, abandoned, turned away) stays so until it joins again
        // (which replaces the entry here): answered from the cache, no store call per poll, no liveness mark. A
        // cookie with another number joined again elsewhere (another instance): the store says where it stands.
        if state.is_terminal() {
            return (number_hint.is_none() || number_hint == number).then_some((state, number));
        }
        let fresh = match state {
            SessionState::Waiting => number.is_some_and(|n| n > snap.served),
            SessionState::PreQueue => !snap.drawn && snap.counters.turned_away == 0,
            _ => false,
        };
        if fresh {
            self.mark_waiting(session, number, &snap);
            Some((state, number))
        } else {
            None
        }
    }

    /// An admitted session comes for its pass: it turns active (its idle deadline starts). Returns its placement.
    ///
    /// # Errors
    /// When the store cannot be reached.
    pub async fn claim(&self, session: &str) -> Result<Option<Placement>, StoreError> {
        // Let in lately, as this instance heard, and the store takes claims with the touches: active now, its claim
        // sent with the next flush (the store's arrival window holds the place until then), no call.
        if let Some(number) = self.admitted_lately(session) {
            self.inner.admits.invalidate(session);
            self.inner.cache.invalidate(session);
            self.touch_active(session);
            self.inner.metrics.claims_in_touches.inc();
            return Ok(Some(Placement {
                session: session.to_owned(),
                state: SessionState::Active,
                number,
            }));
        }
        let idle = self.inner.config.idle_timeout.as_millis() as u64;
        let p = self
            .call(|| {
                self.inner
                    .store
                    .claim(self.event(), session, self.now_ms(), idle)
            })
            .await?;
        self.inner.cache.invalidate(session);
        Ok(p)
    }

    /// Marks a session finished: it leaves the active count at once and the next tick lets the next person in.
    /// `seats` is what its order bought (0 when it left without buying). Returns whether it was active.
    ///
    /// The seats feed the measured share of buyers and their average order (the reach estimate), and move from
    /// held to sold in the room's inventory. An app that also reports absolute counts with
    /// [`set_inventory`](Self::set_inventory) must not count an order as sold there before its finish has reached
    /// the room, or the order is counted twice (report its seats as held until then, as the demo's `Shop` does).
    ///
    /// A finish the store cannot take (it is out of reach) is not lost: the session's tokens are refused at once
    /// by this instance's deny list, and the finish is kept (in order, at most 10,000) and
    /// retried before every tick and every later finish until the store takes it; the metric
    /// `waitroom_finishes_pending` counts them. Only finishes get this: a join or a claim that fails is made again
    /// by the browser's next request, and liveness marks are kept and flushed again by the tick already.
    ///
    /// # Errors
    /// When the store cannot be reached (the finish is kept and retried, as above).
    pub async fn finish(&self, session: &str, seats: u32) -> Result<bool, StoreError> {
        // Not to be claimed from what this instance heard any more.
        self.inner.admits.invalidate(session);
        // Behind the finishes still waiting for the store, in order.
        if let Err(e) = self.retry_finishes().await {
            self.keep_finish(session, seats);
            return Err(e);
        }
        match self.record_finish(session, seats).await {
            Err(e @ StoreError::Unavailable { .. }) => {
                self.keep_finish(session, seats);
                Err(e)
            }
            r => r,
        }
    }

    /// Finishes kept because the store could not take them, waiting to be retried.
    pub fn finishes_pending(&self) -> usize {
        self.pending_finishes().len()
    }

    fn pending_finishes(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::VecDeque<(String, u32)>> {
        self.inner
            .pending_finishes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps a finish the store did not take: its tokens are refused here at once, and it is retried later.
    fn keep_finish(&self, session: &str, seats: u32) {
        self.inner.tokens.deny(session);
        let mut q = self.pending_finishes();
        if q.len() >= MAX_PENDING_FINISHES {
            self.inner.metrics.finishes_dropped.inc();
            tracing::warn!(event = %self.event(), "the queue of pending finishes is full; this session will idle out");
        } else {
            q.push_back((session.to_owned(), seats));
        }
        self.inner.metrics.finishes_pending.set(q.len() as i64);
    }

    /// Records the kept finishes, oldest first, until the queue is empty or the store fails again.
    pub(super) async fn retry_finishes(&self) -> Result<(), StoreError> {
        loop {
            let Some((session, seats)) = self.pending_finishes().front().cloned() else {
                return Ok(());
            };
            self.record_finish(&session, seats).await?;
            let mut q = self.pending_finishes();
            if q.front().is_some_and(|(s, n)| *s == session && *n == seats) {
                q.pop_front();
            }
            self.inner.metrics.finishes_pending.set(q.len() as i64);
        }
    }

    async fn record_finish(&self, session: &str, seats: u32) -> Result<bool, StoreError> {
        let span = tracing::debug_span!("waitroom.finish", event = %self.event(), session = %fingerprint(session), seats);
        let now = self.now_ms();
        let r = self
            .call(|| {
                self.inner
                    .store
                    .finish(self.event(), session, seats, now)
                    .instrument(span.clone())
            })
            .await?;
        span.in_scope(|| tracing::debug!(was_active = r, "finished"));
        if r {
            self.emit(RoomEventKind::Finished {
                session: session.to_owned(),
                seats,
            });
        }
        self.inner.cache.invalidate(session);
        if r {
            self.inner.tokens.deny(session);
            self.remember_finish(session, seats, now);
        }
        self.forget_active(session);
        self.refresh().await.ok();
        Ok(r)
    }

    /// Keeps a recorded finish for [`reapply_finishes`](Self::reapply_finishes).
    fn remember_finish(&self, session: &str, seats: u32, now: u64) {
        let keep_ms = self.inner.config.idle_timeout.as_millis() as u64;
        let mut q = self
            .inner
            .recent_finishes
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        while q
            .front()
            .is_some_and(|(_, _, at)| *at + keep_ms < now || q.len() >= MAX_PENDING_FINISHES)
        {
            q.pop_front();
        }
        q.push_back((session.to_owned(), seats, now));
    }

    /// Records again the finishes this instance made lately, for a store found behind its view: a finish the store
    /// lost is applied again (the place frees, the session stays finished); one it kept changes nothing. Returns
    /// how many it applied again.
    pub(super) async fn reapply_finishes(&self) -> usize {
        let recent: Vec<(String, u32)> = self
            .inner
            .recent_finishes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(s, n, _)| (s.clone(), *n))
            .collect();
        let now = self.now_ms();
        let mut applied = 0;
        for (session, seats) in recent {
            if let Ok(true) = self
                .inner
                .store
                .finish(self.event(), &session, seats, now)
                .await
            {
                applied += 1;
            }
        }
        applied
    }

    /// Whether `session` finished lately (within the idle timeout), through this room or through anything sharing
    /// its store (another instance, a verifier's finish sink): a layer must not renew its token. Local: no store
    /// call; finishes recorded elsewhere arrive within a tick or two.
    pub fn finished_recently(&self, session: &str) -> bool {
        self.inner.tokens.verifier.is_denied(session)
    }

    /// Reads the finishes recorded since this instance's cursor into the token deny list; returns how many it read.
    /// The first read (empty cursor) reaches back over the deny TTL (the tokens' longest life plus twice the
    /// leeway), so an instance started mid-sale refuses the tokens of sessions finished before it started.
    /// Notes that `session` (line number `number`) was let in, as a snapshot named it, when the store takes claims
    /// with the touches ([`Store::claims_in_touches`]); otherwise nothing.
    ///
    /// [`Store::claims_in_touches`]: crate::store::Store::claims_in_touches
    pub(super) fn note_admitted(&self, session: String, number: Option<u64>) {
        if self.inner.store.claims_in_touches() {
            self.inner.admits.insert(session, (self.now_ms(), number));
        }
    }

    /// Its line number (`Some(None)` for none) when this instance heard lately that `session` was let in: within
    /// half the arrival window of hearing it (so a claim sent with the next flush reaches the store well before
    /// the store would let the place go).
    fn admitted_lately(&self, session: &str) -> Option<Option<u64>> {
        let half = self.inner.config.arrival_window.as_millis() as u64 / 2;
        self.inner
            .admits
            .get(session)
            .filter(|(heard, _)| heard.saturating_add(half) > self.now_ms())
            .map(|(_, number)| number)
    }

    pub(super) async fn read_finished(&self) -> Result<usize, StoreError> {
        let cursor = self
            .inner
            .finished_cursor
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let lookback_ms = self.inner.tokens.verifier.deny_ttl().as_millis() as u64;
        let (ids, next) = self
            .call(|| {
                self.inner
                    .store
                    .finished_since(self.event(), &cursor, self.now_ms(), lookback_ms)
            })
            .await?;
        let read = ids.len();
        for s in ids {
            self.inner.cache.invalidate(&s);
            self.inner.admits.invalidate(&s);
            self.inner.tokens.deny(&s);
        }
        *self
            .inner
            .finished_cursor
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = next;
        Ok(read)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, UNIX_EPOCH};

    use crate::{Fairness, ManualClock, SessionState, WaitingRoom};

    #[tokio::test]
    async fn a_drawn_person_the_head_let_in_is_not_told_to_wait_while_the_draw_is_read() {
        // 20 drawn, 5 let in at the opening; this instance reads the draw (all 20 kept, the read not done) and has
        // not heard of the admissions (another instance's tick): a person let in is asked of the store, not
        // answered "in line" from the read's frontier.
        let t0 = 1_700_000_000_000;
        let c = ManualClock::new(t0);
        let room = WaitingRoom::builder("kept-draw")
            .fairness(Fairness::RandomAtOpen {
                opens_at: UNIX_EPOCH + Duration::from_millis(t0 + 60_000),
            })
            .capacity(5)
            .clock(Arc::new(c.clone()))
            .background(false)
            .build()
            .await
            .unwrap();
        let ids: Vec<String> = (0..20).map(|_| WaitingRoom::new_session_id()).collect();
        for id in &ids {
            assert_eq!(
                room.join(id, None).await.unwrap().state,
                SessionState::PreQueue
            );
        }
        c.set_ms(t0 + 60_000);
        assert!(room.tick_now().await.unwrap().drew);
        room.refresh().await.unwrap();
        let mut page = Vec::new();
        for id in &ids {
            let p = room.locate(id, None).await.unwrap().unwrap();
            page.push((id.clone(), p.number.unwrap()));
        }
        page.sort_by_key(|&(_, n)| n);
        let snap = room.inner.snap.load();
        assert!(snap.drawn && snap.served == 5, "{snap:?}");
        drop(snap);
        room.inner.drawn.keep_while_loading(page.clone());
        for (id, n) in &page {
            room.inner.admits.invalidate(id);
            room.inner.cache.invalidate(id);
            let local = room.locate_local(id, None, true);
            if *n <= 5 {
                assert_eq!(local, None, "{n}: let in, only the store knows");
            } else {
                assert_eq!(local, Some((SessionState::Waiting, Some(*n))), "{n}");
            }
        }
    }
}
