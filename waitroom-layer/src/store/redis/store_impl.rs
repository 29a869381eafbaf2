//! [`Store`] for [`RedisStore`]: each operation one script call (the liveness marks one pipeline), its reply
//! checked by [`super::reply`].

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::reply::opt_int;
use super::reply::{array, corrupt, flag, int, placement, settings, strings, text};
use super::{
    ACTIVE_CHUNK, FINISHED_BATCH, FINISHED_CAP, MARK_CHUNK, RedisStore, SEEN_SLOT_MS, TOUCH_CHUNK,
    live, pseen_shard, seen_keep_ms, store_error,
};
use crate::error::StoreError;
use crate::store::{
    AUDIT_KEEP, AuditEntry, Counters, DrawCursor, DrawnPage, Join, MAX_MOVED, MAX_RECLAIM_GAP,
    Placement, Reclaim, Redeem, Restore, Return, SessionDetail, Settings, SettingsChange, Snapshot,
    Store, TURN_AWAY_PER_TICK, Tick, TickReport, Ticket, Touches,
};

/// Session records read per `HSCAN` call of [`Store::find_sessions`].
const SCAN_BATCH: u64 = 10_000;

fn opt_arg(o: Option<u64>) -> String {
    o.map(|v| v.to_string()).unwrap_or_default()
}

/// The settings as the `INIT` script's first seven arguments.
fn settings_args(s: &Settings) -> [String; 7] {
    let opt = |o: Option<u64>| o.map(|v| v.to_string()).unwrap_or_default();
    let b = |x: bool| if x { "1" } else { "0" }.to_owned();
    [
        s.capacity.to_string(),
        opt(s.admit_per_minute),
        b(s.paused),
        b(s.closed),
        opt(s.opens_at_ms),
        b(s.random_draw),
        s.inventory
            .map(|i| format!("{}:{}:{}", i.total, i.sold, i.held))
            .unwrap_or_default(),
    ]
}

#[async_trait]
impl Store for RedisStore {
    async fn init(&self, event: &str, defaults: &Settings) -> Result<Settings, StoreError> {
        let mut cmd = self.evalsha(&self.scripts.init, event)?;
        for a in settings_args(defaults) {
            cmd.arg(a);
        }
        cmd.arg(self.draw_bits)
            .arg(opt_arg(defaults.prequeue_opens_at_ms))
            .arg(opt_arg(defaults.closes_at_ms));
        settings(&array(self.run(&self.scripts.init, &cmd).await?)?)
    }

    async fn join(&self, event: &str, join: &Join) -> Result<Placement, StoreError> {
        let mut cmd = self.evalsha(&self.scripts.join, event)?;
        // Scores are doubles: the top 53 bits of the draw key keep it exact.
        cmd.arg(&join.session)
            .arg(join.account.as_deref().unwrap_or(""))
            .arg(join.now_ms)
            .arg(format!("{:016x}", join.draw_key));
        placement(self.run(&self.scripts.join, &cmd).await?)?
            .ok_or_else(|| corrupt("join answered nothing"))
    }

    async fn ticket(&self, event: &str, now_ms: u64) -> Result<Ticket, StoreError> {
        let mut one = self.tickets(event, 1, now_ms).await?;
        Ok(one.pop().expect("one ticket asked, one given"))
    }

    async fn tickets(
        &self,
        event: &str,
        count: usize,
        now_ms: u64,
    ) -> Result<Vec<Ticket>, StoreError> {
        if count == 0 {
            return Ok(Vec::new());
        }
        let mut cmd = {
            let mut cached = self.ticket_cmd.lock().unwrap_or_else(|e| e.into_inner());
            match cached.as_ref() {
                Some((ev, cmd)) if ev == event => cmd.clone(),
                _ => {
                    let cmd = self.evalsha(&self.scripts.ticket, event)?;
                    *cached = Some((event.to_owned(), cmd.clone()));
                    cmd
                }
            }
        };
        cmd.arg(now_ms).arg(count);
        let v = self.run(&self.scripts.ticket, &cmd).await?;
        let n = count as u64;
        Ok(match v {
            ::redis::Value::Int(last) if last > 0 && last as u64 >= n => {
                let first = last as u64 - n + 1;
                (first..=last as u64).map(Ticket::Number).collect()
            }
            ::redis::Value::Int(0) => vec![Ticket::PreQueue; count],
            ::redis::Value::Int(-1) => vec![Ticket::TurnedAway; count],
            other => return Err(corrupt(format_args!("{count} tickets of {other:?}"))),
        })
    }

    async fn line_tickets(
        &self,
        event: &str,
        count: usize,
        known_last: u64,
    ) -> Result<Option<u64>, StoreError> {
        // One command for the batch (no script: `TICKET` reads the settings, which the room's snapshot already
        // says). See "Tickets" in the module docs.
        let meta = self.meta_key(event)?;
        let n = count as u64;
        let mut add = ::redis::cmd("HINCRBY");
        add.arg(&meta).arg("last").arg(n);
        let last = match self.send(&add).await.map_err(store_error)? {
            ::redis::Value::Int(v) if v >= 0 && v as u64 >= n => v as u64,
            other => return Err(corrupt(format_args!("{count} line tickets of {other:?}"))),
        };
        if last - n < known_last {
            // The counter is behind what this instance saw given out, so these numbers may be ones given out
            // before: none is handed on (they stay unused). A Redis that lost the on-sale: the `HINCRBY` made a
            // meta hash of `last` alone, which every script takes for an unknown on-sale and `RESTORE` builds on
            // (keeping that `last` as a floor, so a number given from it is never given again); the room restores
            // and asks again. One that knows it but lost its latest writes (a failover to a replica that lagged):
            // the room gives it the floor back and asks again.
            let mut known = ::redis::cmd("HEXISTS");
            known.arg(&meta).arg("cap");
            if self.send(&known).await.map_err(store_error)? == ::redis::Value::Int(0) {
                return Err(StoreError::Forgotten(
                    "the on-sale was not initialised".into(),
                ));
            }
            return Err(StoreError::Behind {
                store_last: last - n,
            });
        }
        Ok(Some(last))
    }

    fn ticket_batch(&self) -> usize {
        super::TICKET_BATCH
    }

    fn claims_in_touches(&self) -> bool {
        true
    }

    async fn redeem(&self, event: &str, r: &Redeem) -> Result<Option<Placement>, StoreError> {
        let mut cmd = self.evalsha(&self.scripts.redeem, event)?;
        cmd.arg(&r.session)
            .arg(r.number.map(|n| n.to_string()).unwrap_or_default())
            .arg(r.issued_ms)
            .arg(r.now_ms)
            .arg(r.grace_ms)
            .arg(format!("{:016x}", r.draw_key))
            .arg(MAX_RECLAIM_GAP);
        placement(self.run(&self.scripts.redeem, &cmd).await?)
    }

    async fn lookup(&self, event: &str, session: &str) -> Result<Option<Placement>, StoreError> {
        let mut cmd = self.evalsha(&self.scripts.lookup, event)?;
        cmd.arg(session);
        placement(self.run(&self.scripts.lookup, &cmd).await?)
    }

    async fn drawn_numbers(
        &self,
        event: &str,
        from: &DrawCursor,
        most: usize,
    ) -> Result<Option<DrawnPage>, StoreError> {
        let mut cmd = self.evalsha(&self.scripts.drawn, event)?;
        let (score, member) = from.after.clone().unwrap_or_default();
        cmd.arg(from.bucket).arg(score).arg(member).arg(most.max(1));
        let mut a = array(self.run(&self.scripts.drawn, &cmd).await?)?.into_iter();
        let next = match a.next() {
            Some(::redis::Value::Int(-2)) => return Ok(None),
            Some(::redis::Value::Int(-1)) => None,
            Some(::redis::Value::Int(b)) if b >= 0 => Some(b as u64),
            other => return Err(corrupt(format_args!("a draw page starting {other:?}"))),
        };
        let (score, member) = match (a.next(), a.next()) {
            (Some(s), Some(m)) => (text(&s)?, text(&m)?),
            other => return Err(corrupt(format_args!("a draw page's cursor {other:?}"))),
        };
        // Runs: a first number, a count, then that many members joined by newlines, the k-th (from 0) holding the
        // first number plus k; an empty member, or one starting with a zero byte (the old number of someone moved to
        // the front), holds a number nobody is kept at.
        let rest: Vec<::redis::Value> = a.collect();
        let mut numbers = Vec::with_capacity(most.clamp(1, 1 << 16));
        for run in rest.chunks(3) {
            match run {
                [
                    ::redis::Value::Int(from),
                    ::redis::Value::Int(count),
                    ::redis::Value::BulkString(members),
                ] if *from > 0 && *count > 0 => {
                    let mut pieces = 0;
                    for (k, id) in members.split(|b| *b == b'\n').enumerate() {
                        pieces += 1;
                        if id.first().is_some_and(|b| *b != 0) {
                            let id = std::str::from_utf8(id)
                                .map_err(|_| corrupt("a drawn session not UTF-8"))?;
                            numbers.push((id.to_owned(), *from as u64 + k as u64));
                        }
                    }
                    if pieces != *count as usize {
                        // A member holding a newline (no session id of the room's does): the numbers after it
                        // would be off by one, so none of the page is kept (those people are asked of the store).
                        return Err(corrupt(format_args!(
                            "a drawn run of {count} members split in {pieces} (a session id holding a newline)"
                        )));
                    }
                }
                other => return Err(corrupt(format_args!("a drawn run {other:?}"))),
            }
        }
        let next = next.map(|bucket| DrawCursor {
            bucket,
            after: (!score.is_empty()).then_some((score, member)),
        });
        Ok(Some(DrawnPage { numbers, next }))
    }

    async fn come_back(
        &self,
        event: &str,
        session: &str,
        now_ms: u64,
        return_window_ms: u64,
    ) -> Result<(Option<Placement>, Option<Return>), StoreError> {
        let mut cmd = self.evalsha(&self.scripts.come_back, event)?;
        cmd.arg(session).arg(now_ms).arg(return_window_ms);
        let v = self.run(&self.scripts.come_back, &cmd).await?;
        if v == ::redis::Value::Nil {
            return Ok((None, None));
        }
        let mut a = array(v)?;
        let counted = match a.pop().map(|c| text(&c)).transpose()?.as_deref() {
            Some("") => None,
            Some("r") => Some(Return::InTime),
            Some("l") => Some(Return::TooLate),
            other => return Err(corrupt(format_args!("a return of {other:?}"))),
        };
        Ok((placement(::redis::Value::Array(a))?, counted))
    }

    async fn claim(
        &self,
        event: &str,
        session: &str,
        now_ms: u64,
        idle_timeout_ms: u64,
    ) -> Result<Option<Placement>, StoreError> {
        let mut cmd = self.evalsha(&self.scripts.claim, event)?;
        cmd.arg(session).arg(now_ms).arg(idle_timeout_ms);
        placement(self.run(&self.scripts.claim, &cmd).await?)
    }

    async fn touch(&self, event: &str, touches: &Touches) -> Result<(), StoreError> {
        // Liveness marks are not scripted: a numbered waiting session sets one bit in this slot's `seen` bitmap
        // (`BITFIELD`, up to MARK_CHUNK bits per command), a pre-queued one writes its time into `pseen` (`HSET`,
        // up to TOUCH_CHUNK fields per command); each key then gets its expiry; the active sessions' touches are
        // script calls of up to ACTIVE_CHUNK sessions. One pipeline, one round trip, no session record rewritten:
        // many short commands, so Redis serves others in between.
        let keys = self.keys(event)?;
        let keep_ms = seen_keep_ms(touches.abandon_after_ms);
        let numbers: Vec<u64> = touches.waiting.iter().filter_map(|m| m.number).collect();
        let mut pipe = ::redis::pipe();
        if !numbers.is_empty() {
            let key = format!("{}:{}", keys[9], touches.now_ms / SEEN_SLOT_MS);
            for chunk in numbers.chunks(MARK_CHUNK) {
                let cmd = pipe.cmd("BITFIELD").arg(&key);
                for n in chunk {
                    cmd.arg("SET").arg("u1").arg(*n).arg(1);
                }
                cmd.ignore();
            }
            pipe.cmd("PEXPIRE").arg(&key).arg(keep_ms).ignore();
        }
        // The pre-queue's marks, each in its `pseen` hash (of PSEEN_SHARDS).
        let mut shards: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
        for m in touches.waiting.iter().filter(|m| m.number.is_none()) {
            shards
                .entry(pseen_shard(&m.session))
                .or_default()
                .push(&m.session);
        }
        for (shard, sessions) in shards {
            let key = format!("{}:{shard}", keys[10]);
            for chunk in sessions.chunks(TOUCH_CHUNK) {
                let cmd = pipe.cmd("HSET").arg(&key);
                for s in chunk {
                    cmd.arg(*s).arg(touches.now_ms);
                }
                cmd.ignore();
            }
            pipe.cmd("PEXPIRE").arg(&key).arg(keep_ms).ignore();
        }
        // The tickets no call counted (`line_tickets`' numbers, pre-queue tickets from the room's snapshot) are
        // counted by the first script call (one with no session when none is active), so a Redis that forgot the
        // on-sale gets no meta hash of `tickets` alone.
        let mut tickets = touches.tickets;
        let none: &[String] = &[];
        let chunks = touches.active.chunks(ACTIVE_CHUNK);
        let first = (tickets > 0 && touches.active.is_empty()).then_some(none);
        for chunk in first.into_iter().chain(chunks) {
            let mut cmd = self.evalsha(&self.scripts.touch, event)?;
            cmd.arg(touches.now_ms)
                .arg(touches.idle_timeout_ms)
                .arg(std::mem::take(&mut tickets));
            for s in chunk {
                cmd.arg(s);
            }
            pipe.add_command(cmd).ignore();
        }
        if pipe.cmd_iter().next().is_none() {
            return Ok(());
        }
        match self.send_pipe(&pipe).await {
            // Redis lost the touch script (a restart, say): loaded again, and the whole pipeline sent again (every
            // command in it may run twice: a mark, an expiry and a touch are the same done twice).
            Err(e)
                if e.kind() == ::redis::ErrorKind::Server(::redis::ServerErrorKind::NoScript) =>
            {
                self.load(&self.scripts.touch).await?;
                self.send_pipe(&pipe).await.map_err(store_error)
            }
            r => r.map_err(store_error),
        }
    }

    async fn tick(&self, event: &str, tick: &Tick) -> Result<TickReport, StoreError> {
        let mut cmd = self.evalsha(&self.scripts.tick, event)?;
        cmd.arg(tick.now_ms)
            .arg(tick.arrival_window_ms)
            .arg(tick.abandon_after_ms)
            .arg(tick.max_scan)
            .arg(SEEN_SLOT_MS)
            .arg(TURN_AWAY_PER_TICK)
            .arg(tick.return_window_ms);
        let a: [::redis::Value; 7] = array(self.run(&self.scripts.tick, &cmd).await?)?
            .try_into()
            .map_err(|_| corrupt("a tick report of the wrong length"))?;
        let [
            drew,
            admitted,
            missed,
            abandoned,
            expired,
            turned_away,
            more,
        ] = a;
        Ok(TickReport {
            drew: flag(&drew)?,
            admitted: strings(admitted)?,
            missed: strings(missed)?,
            abandoned: strings(abandoned)?,
            expired: strings(expired)?,
            turned_away: strings(turned_away)?,
            more: flag(&more)?,
        })
    }

    async fn finish(
        &self,
        event: &str,
        session: &str,
        seats: u32,
        now_ms: u64,
    ) -> Result<bool, StoreError> {
        let mut cmd = self.evalsha(&self.scripts.finish, event)?;
        cmd.arg(session).arg(seats).arg(now_ms).arg(FINISHED_CAP);
        flag(&self.run(&self.scripts.finish, &cmd).await?)
    }

    async fn finished_since(
        &self,
        event: &str,
        cursor: &str,
        _now_ms: u64,
        lookback_ms: u64,
    ) -> Result<(Vec<String>, String), StoreError> {
        // An empty cursor reads back over the lookback on Redis's clock (the stream's ids are `<ms>-<seq>` of that
        // clock, whatever the room's clock says): `XRANGE key <now - lookback>-0 + COUNT n`, in a script for the
        // time. Later calls continue after the cursor.
        let (mut last, entries) = if cursor.is_empty() {
            let mut cmd = self.evalsha(&self.scripts.finished_recent, event)?;
            cmd.arg(lookback_ms).arg(FINISHED_BATCH);
            let mut a = array(self.run(&self.scripts.finished_recent, &cmd).await?)?.into_iter();
            match (a.next(), a.next(), a.next()) {
                (Some(start), Some(entries), None) => (text(&start)?, entries),
                _ => return Err(corrupt("a finished read of the wrong length")),
            }
        } else {
            let key = self.keys(event)?[8].clone();
            let mut cmd = ::redis::cmd("XRANGE");
            cmd.arg(&key)
                .arg(format!("({cursor}"))
                .arg("+")
                .arg("COUNT")
                .arg(FINISHED_BATCH);
            let v = self.send(&cmd).await.map_err(store_error)?;
            (cursor.to_owned(), v)
        };
        let mut ids = Vec::new();
        for entry in array(entries)? {
            let mut e = array(entry)?.into_iter();
            let (Some(id), Some(fields), None) = (e.next(), e.next(), e.next()) else {
                return Err(corrupt("a stream entry of the wrong shape"));
            };
            last = text(&id)?;
            let fields = array(fields)?;
            for pair in fields.chunks(2) {
                if let [k, v] = pair
                    && text(k)? == "s"
                {
                    ids.push(text(v)?);
                }
            }
        }
        Ok((ids, last))
    }

    async fn snapshot(&self, event: &str) -> Result<Snapshot, StoreError> {
        // One script call; the live line's blocks this instance holds go with it, and only the blocks that changed
        // come back (read again whole when the copy cannot be trusted, see `LiveCache::update`).
        let mut caches = self.live.lock().await;
        let cache = caches.entry(event.to_owned()).or_default();
        for _ in 0..2 {
            let mut cmd = self.evalsha(&self.scripts.snapshot, event)?;
            let (from, skip) = cache.admitted_from;
            cmd.arg(from).arg(skip);
            for (b, v) in cache.known() {
                cmd.arg(b).arg(v);
            }
            let a = array(self.run(&self.scripts.snapshot, &cmd).await?)?;
            if a.len() != 36 {
                return Err(corrupt(format_args!(
                    "expected a snapshot of 36, got {}",
                    a.len()
                )));
            }
            let mut it = a.into_iter();
            let a: Vec<_> = it.by_ref().take(30).collect();
            let (
                Some(lver),
                Some(dbase),
                Some(dcount),
                Some(moved_drawn),
                Some(blocks),
                Some(admitted),
                None,
            ) = (
                it.next(),
                it.next(),
                it.next(),
                it.next(),
                it.next(),
                it.next(),
                it.next(),
            )
            else {
                return Err(corrupt("a snapshot of the wrong shape"));
            };
            if !cache.update(int(&lver)?, live::blocks(array(blocks)?)?) {
                continue;
            }
            let admitted_lately = cache.admitted(array(admitted)?)?;
            // The settings (9), then the line and the counters (`n(i)`: the i-th entry after 7 settings), the
            // reclaim floor, the returning queue's length, the return counters, and the sessions moved to the front.
            let n = |i: usize| int(&a[i + 2]);
            let served = n(10)?;
            // Moved out of the drawn segment: `[session, old number, ...]`.
            let moved: Vec<u64> = array(moved_drawn)?
                .chunks(2)
                .map(|p| p.get(1).map_or(Err(corrupt("a moved entry")), int))
                .collect::<Result<_, _>>()?;
            let live = cache.live(served, int(&dbase)?, int(&dcount)?, &moved);
            return Ok(Snapshot {
                settings: settings(&a[..9])?,
                drawn: flag(&a[9])?,
                prequeue: n(8)?,
                last_number: n(9)?,
                served,
                active: n(11)?,
                returning: n(21)?,
                counters: Counters {
                    joined: n(12)?,
                    admitted: n(13)?,
                    finished: n(14)?,
                    expired: n(15)?,
                    abandoned: n(16)?,
                    turned_away: n(17)?,
                    orders: n(18)?,
                    seats_bought: n(19)?,
                    missed: n(22)?,
                    returned: n(23)?,
                    returned_late: n(24)?,
                    tickets: int(&a[28])?,
                    redeemed: int(&a[29])?,
                },
                reclaim_upto: opt_int(&a[22])?,
                live: Some(live),
                moved: strings(a[27].clone())?,
                admitted_lately,
            });
        }
        Err(corrupt(
            "the live line's blocks changed under two snapshots",
        ))
    }

    async fn restore(&self, event: &str, r: &Restore) -> Result<Settings, StoreError> {
        let mut cmd = self.evalsha(&self.scripts.restore, event)?;
        for a in settings_args(&r.settings) {
            cmd.arg(a);
        }
        let c = &r.counters;
        cmd.arg(self.draw_bits)
            .arg(u8::from(r.drawn || !r.settings.random_draw))
            .arg(r.last_number)
            .arg(r.served);
        for v in [
            c.joined,
            c.admitted,
            c.finished,
            c.expired,
            c.abandoned,
            c.turned_away,
            c.orders,
            c.seats_bought,
        ] {
            cmd.arg(v);
        }
        cmd.arg(r.now_ms.saturating_add(r.hold_ms))
            .arg(r.now_ms.saturating_add(r.late_ms))
            .arg(u8::from(r.behind))
            .arg(MAX_RECLAIM_GAP)
            .arg(opt_arg(r.settings.prequeue_opens_at_ms))
            .arg(opt_arg(r.settings.closes_at_ms));
        settings(&array(self.run(&self.scripts.restore, &cmd).await?)?)
    }

    async fn reclaim(&self, event: &str, r: &Reclaim) -> Result<Option<Placement>, StoreError> {
        let mut cmd = self.evalsha(&self.scripts.reclaim, event)?;
        cmd.arg(&r.session)
            .arg(r.number.map(|n| n.to_string()).unwrap_or_default())
            .arg(r.now_ms)
            .arg(format!("{:016x}", r.draw_key))
            .arg(MAX_RECLAIM_GAP);
        placement(self.run(&self.scripts.reclaim, &cmd).await?)
    }

    async fn update(&self, event: &str, change: &SettingsChange) -> Result<Settings, StoreError> {
        let (op, value) = match *change {
            SettingsChange::Capacity { capacity } => ("cap", capacity.to_string()),
            SettingsChange::AdmitPerMinute { per_minute } => {
                ("apm", per_minute.map(|v| v.to_string()).unwrap_or_default())
            }
            SettingsChange::Pause => ("pause", String::new()),
            SettingsChange::Resume => ("resume", String::new()),
            SettingsChange::OpenNow { now_ms } => ("open", now_ms.to_string()),
            SettingsChange::Close => ("close", String::new()),
            SettingsChange::Inventory { inventory } => (
                "inv",
                format!("{}:{}:{}", inventory.total, inventory.sold, inventory.held),
            ),
            SettingsChange::Schedule { opens_at_ms, .. } => ("sched", opt_arg(opens_at_ms)),
        };
        let mut cmd = self.evalsha(&self.scripts.update, event)?;
        cmd.arg(op).arg(value);
        if let SettingsChange::Schedule {
            prequeue_opens_at_ms,
            closes_at_ms,
            ..
        } = *change
        {
            cmd.arg(opt_arg(prequeue_opens_at_ms))
                .arg(opt_arg(closes_at_ms));
        }
        settings(&array(self.run(&self.scripts.update, &cmd).await?)?)
    }

    async fn inspect(
        &self,
        event: &str,
        session: &str,
    ) -> Result<Option<SessionDetail>, StoreError> {
        let mut cmd = self.evalsha(&self.scripts.inspect, event)?;
        cmd.arg(session);
        let v = self.run(&self.scripts.inspect, &cmd).await?;
        if v == ::redis::Value::Nil {
            return Ok(None);
        }
        let mut a = array(v)?;
        let Some(at) = a.pop().filter(|_| a.len() == 3) else {
            return Err(corrupt("an inspect reply of the wrong length"));
        };
        let placement = placement(::redis::Value::Array(a))?
            .ok_or_else(|| corrupt("inspect answered no placement"))?;
        let at = int(&at)?;
        Ok(Some(SessionDetail {
            placement,
            admitted_at_ms: (at > 0).then_some(at),
        }))
    }

    async fn find_sessions(
        &self,
        event: &str,
        matches: &(dyn for<'s> Fn(&'s str) -> bool + Send + Sync),
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        // The live sessions, then those that ended within the keep time (the slot hashes lookups read, by the
        // last tick's clock; a record older than the keep time in the oldest slot is left out, as lookups do).
        let keys = self.keys(event)?;
        let mut hashes = vec![(keys[1].clone(), None)];
        let mut clock = ::redis::cmd("HMGET");
        clock.arg(&keys[0]).arg("tnow").arg("keep");
        if let [tnow, keep] = array(self.send(&clock).await.map_err(store_error)?)?.as_slice()
            && let (Some(tnow), Some(keep)) = (opt_int(tnow)?, opt_int(keep)?)
        {
            let since = Some(tnow.saturating_sub(keep));
            hashes.extend(
                ended_keys(&keys[1], tnow, keep)
                    .into_iter()
                    .map(|k| (k, since)),
            );
        }
        let mut found = Vec::new();
        let mut listed = std::collections::HashSet::new();
        for (key, ended_after) in hashes {
            // `HSCAN` in batches: each call is short, so Redis serves the room in between.
            let mut cursor = "0".to_owned();
            loop {
                let mut scan = ::redis::cmd("HSCAN");
                scan.arg(&key).arg(&cursor).arg("COUNT").arg(SCAN_BATCH);
                let mut reply = array(self.send(&scan).await.map_err(store_error)?)?.into_iter();
                let (Some(next), Some(fields), None) = (reply.next(), reply.next(), reply.next())
                else {
                    return Err(corrupt(
                        "HSCAN answered something else than [cursor, fields]",
                    ));
                };
                cursor = text(&next)?;
                for pair in array(fields)?.chunks(2) {
                    let [field, record] = pair else {
                        return Err(corrupt("HSCAN answered a field without its value"));
                    };
                    if let Some(after) = ended_after
                        && record_time(record)? <= after
                    {
                        continue;
                    }
                    let id = text(field)?;
                    if found.len() < limit && !listed.contains(&id) && matches(&id) {
                        listed.insert(id.clone());
                        found.push(id);
                    }
                }
                if found.len() >= limit {
                    return Ok(found);
                }
                if cursor == "0" {
                    break;
                }
            }
        }
        Ok(found)
    }

    async fn move_to_front(
        &self,
        event: &str,
        session: &str,
        now_ms: u64,
    ) -> Result<Option<Placement>, StoreError> {
        let mut cmd = self.evalsha(&self.scripts.move_front, event)?;
        cmd.arg(session).arg(now_ms).arg(MAX_MOVED);
        placement(self.run(&self.scripts.move_front, &cmd).await?)
    }

    async fn audit(&self, event: &str, entry: &AuditEntry) -> Result<(), StoreError> {
        let key = self.audit_key(event)?;
        let json = serde_json::to_string(entry).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let mut pipe = ::redis::pipe();
        pipe.atomic()
            .cmd("LPUSH")
            .arg(&key)
            .arg(json)
            .ignore()
            .cmd("LTRIM")
            .arg(&key)
            .arg(0)
            .arg(AUDIT_KEEP - 1)
            .ignore();
        self.send_pipe(&pipe).await.map_err(store_error)
    }

    async fn audit_log(&self, event: &str, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut cmd = ::redis::cmd("LRANGE");
        cmd.arg(self.audit_key(event)?).arg(0).arg(limit - 1);
        strings(self.send(&cmd).await.map_err(store_error)?)?
            .iter()
            .map(|s| {
                serde_json::from_str(s).map_err(|e| corrupt(format_args!("an audit entry: {e}")))
            })
            .collect()
    }
}

/// The hashes of the sessions that ended within `keep` ms before `tnow` (the last tick's clock and keep time,
/// `meta.tnow` and `meta.keep`), newest first: the slots the scripts' `rec` reads (see `ended` in
/// `waitroom_verify::redis::FINISH_LUA`): a quarter of `keep` long, at least 1 s, named by their start in ms, from
/// the slot after `tnow`'s back to the one holding `tnow - keep`.
fn ended_keys(sessions: &str, tnow: u64, keep: u64) -> Vec<String> {
    let len = keep.div_ceil(4).max(1_000);
    let (lo, hi) = (tnow.saturating_sub(keep) / len, tnow / len + 1);
    (lo..=hi)
        .rev()
        .map(|s| format!("{sessions}:{}", s * len))
        .collect()
}

/// The time in a 12-byte session record (its last 6 bytes, big-endian): for an ended record, when it ended.
fn record_time(v: &::redis::Value) -> Result<u64, StoreError> {
    match v {
        ::redis::Value::BulkString(b) if b.len() == 12 => {
            Ok(b[6..].iter().fold(0, |t, &x| t << 8 | u64::from(x)))
        }
        _ => Err(corrupt("a session record that is not 12 bytes")),
    }
}
