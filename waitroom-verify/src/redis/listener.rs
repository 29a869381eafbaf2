//! The listener: finishes made on other replicas, refused here.

use super::*;

/// Reads an on-sale's finish stream and denies every session in it on a [`Verifier`], so a verifier replica
/// refuses a session finished on another replica (or by the room) within about one poll interval (default
/// 250 ms).
///
/// It polls with `XRANGE <key> (<last id> + COUNT 10000` on its own connection (4 commands a second by default,
/// whatever the traffic). On start it reads back over the verifier's deny TTL (the longest a finished session's
/// token can still be valid), so a replica that starts late still refuses the sessions finished before it. Redis
/// being down is logged at most once per 10 s; reading resumes where it stopped.
///
/// The task stops when the listener is dropped (or [`stop`](Self::stop)ped).
#[derive(Debug)]
pub struct RedisFinishListener {
    task: tokio::task::JoinHandle<()>,
    state: Arc<ListenerState>,
}

#[derive(Debug, Default)]
struct ListenerState {
    denied: AtomicU64,
    connected: AtomicBool,
    caught_up: AtomicBool,
}

/// Builds a [`RedisFinishListener`]. Start from [`RedisFinishListener::builder`].
#[must_use = "a builder does nothing until `spawn` is called"]
#[derive(Clone)]
pub struct RedisFinishListenerBuilder {
    conn: Conn,
    event: String,
    poll_interval: Duration,
    lookback: Option<Duration>,
}

impl fmt::Debug for RedisFinishListenerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisFinishListenerBuilder")
            .field("url", &"<redacted>")
            .field("event", &self.event)
            .field("key_prefix", &self.conn.key_prefix)
            .field("poll_interval", &self.poll_interval)
            .field("lookback", &self.lookback)
            .finish()
    }
}

impl RedisFinishListenerBuilder {
    /// The key prefix, the room store's (default `wr`). Must not contain `{` or `}`.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.conn.key_prefix = prefix.into();
        self
    }

    /// How often to read the stream (default 250 ms, the room's tick): the longest a finish elsewhere takes to be
    /// refused here, plus one round trip.
    pub fn poll_interval(mut self, d: Duration) -> Self {
        self.poll_interval = d;
        self
    }

    /// How far back to read at start (default: the verifier's deny TTL).
    pub fn lookback(mut self, d: Duration) -> Self {
        self.lookback = Some(d);
        self
    }

    /// How long one read may take (default 1 s).
    pub fn timeout(mut self, d: Duration) -> Self {
        self.conn.timeout = d;
        self
    }

    /// How long one attempt to (re)connect may take (default 1 s).
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.conn.connect_timeout = d;
        self
    }

    /// Starts the listener on the current Tokio runtime; it connects in the background (and keeps trying while
    /// Redis is down), so a replica can start before Redis.
    ///
    /// # Errors
    /// [`RedisFinishError::Invalid`] for a malformed URL, a brace in the prefix or event id, or a zero timeout or
    /// interval.
    ///
    /// # Panics
    /// Outside a Tokio runtime.
    pub fn spawn(self, verifier: Verifier) -> Result<RedisFinishListener, RedisFinishError> {
        self.conn.check()?;
        let key = finished_stream_key(&self.conn.key_prefix, &self.event)?;
        if self.poll_interval.is_zero() {
            return Err(RedisFinishError::Invalid(
                "the poll interval must be longer than zero".into(),
            ));
        }
        let lookback = self.lookback.unwrap_or_else(|| verifier.deny_ttl());
        let state = Arc::new(ListenerState::default());
        let run = Run {
            conn: self.conn,
            key,
            every: self.poll_interval,
            lookback,
            verifier,
            state: Arc::clone(&state),
            log: LogGate::default(),
        };
        let task = tokio::spawn(run.run());
        Ok(RedisFinishListener { task, state })
    }
}

impl RedisFinishListener {
    /// Starts a listener with the defaults (prefix `wr`, 250 ms, 1 s timeouts): every session finished in
    /// `event`'s stream at the Redis at `url` is denied on `verifier`.
    ///
    /// # Errors
    /// See [`RedisFinishListenerBuilder::spawn`].
    ///
    /// # Panics
    /// Outside a Tokio runtime.
    pub fn spawn(
        verifier: Verifier,
        url: impl Into<RedisTarget>,
        event: &str,
    ) -> Result<Self, RedisFinishError> {
        Self::builder(url, event).spawn(verifier)
    }

    /// Starts building a listener for `event`'s finish stream at the Redis at `url`.
    pub fn builder(
        url: impl Into<RedisTarget>,
        event: impl Into<String>,
    ) -> RedisFinishListenerBuilder {
        RedisFinishListenerBuilder {
            conn: Conn::new(url.into()),
            event: event.into(),
            poll_interval: Duration::from_millis(250),
            lookback: None,
        }
    }

    /// Sessions denied so far (each entry read counts once).
    #[must_use]
    pub fn denied(&self) -> u64 {
        self.state.denied.load(Ordering::Relaxed)
    }

    /// Whether the last read succeeded.
    #[must_use]
    pub fn is_connected(&self) -> bool {
        self.state.connected.load(Ordering::Relaxed)
    }

    /// Whether the listener has read everything that was in the stream at some point (it is then at most one poll
    /// interval behind).
    #[must_use]
    pub fn is_caught_up(&self) -> bool {
        self.state.caught_up.load(Ordering::Relaxed)
    }

    /// Stops the listener.
    pub fn stop(self) {
        self.task.abort();
    }
}

impl Drop for RedisFinishListener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Run {
    conn: Conn,
    key: String,
    every: Duration,
    lookback: Duration,
    verifier: Verifier,
    state: Arc<ListenerState>,
    log: LogGate,
}

impl Run {
    fn failed(&self, e: &RedisFinishError) {
        self.state.connected.store(false, Ordering::Relaxed);
        if self.log.due() {
            tracing::warn!(stream = %self.key, error = %e,
                "cannot read finishes from Redis; sessions finished on other replicas are not refused meanwhile");
        }
    }

    async fn run(self) {
        let mut interval = tokio::time::interval(self.every);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first read is inclusive from the lookback; later ones exclusive from the last id.
        let mut cursor = format!(
            "{}-0",
            wall_ms().saturating_sub(self.lookback.as_millis() as u64)
        );
        let mut inclusive = true;
        let mut conn = None;
        loop {
            interval.tick().await;
            let c = match &conn {
                Some(c) => c,
                None => match self.conn.connect().await {
                    Ok(c) => conn.insert(c),
                    Err(e) => {
                        self.failed(&e);
                        continue;
                    }
                },
            };
            // Read until a batch comes back short: catching up after start or an outage takes one tick.
            loop {
                let start = if inclusive {
                    cursor.clone()
                } else {
                    format!("({cursor}")
                };
                let mut cmd = ::redis::cmd("XRANGE");
                cmd.arg(&self.key)
                    .arg(start)
                    .arg("+")
                    .arg("COUNT")
                    .arg(READ_BATCH);
                match send(c, &cmd, self.conn.timeout).await.and_then(entries) {
                    Ok(batch) => {
                        if !self.state.connected.swap(true, Ordering::Relaxed) {
                            tracing::debug!(stream = %self.key, "reading finishes from Redis");
                        }
                        let read = batch.len() as u64;
                        if let Some((last, _)) = batch.last() {
                            cursor.clone_from(last);
                            inclusive = false;
                        }
                        for session in batch.iter().filter_map(|(_, s)| s.as_deref()) {
                            self.verifier.deny_session(session);
                            self.state.denied.fetch_add(1, Ordering::Relaxed);
                        }
                        if read < READ_BATCH {
                            self.state.caught_up.store(true, Ordering::Relaxed);
                            break;
                        }
                    }
                    Err(e) => {
                        self.failed(&e);
                        break;
                    }
                }
            }
        }
    }
}

/// Parses an `XRANGE` reply into (entry id, session) pairs; an entry without an `s` field has no session.
type Entries = Vec<(String, Option<String>)>;

fn entries(v: Value) -> Result<Entries, RedisFinishError> {
    let bad =
        |what: &str| RedisFinishError::Unavailable(format!("unexpected XRANGE reply: {what}"));
    let Value::Array(items) = v else {
        return Err(bad("not an array"));
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let Value::Array(pair) = item else {
            return Err(bad("an entry that is not an array"));
        };
        let [id, fields] = pair.as_slice() else {
            return Err(bad("an entry of the wrong length"));
        };
        let id = text(id).ok_or_else(|| bad("an entry id that is not text"))?;
        let fields = match fields {
            Value::Array(f) => f.as_slice(),
            _ => return Err(bad("entry fields that are not an array")),
        };
        let session = fields.chunks(2).find_map(|kv| match kv {
            [k, v] if text(k).as_deref() == Some("s") => text(v),
            _ => None,
        });
        // The cursor moves past every entry, even one without a session.
        out.push((id, session));
    }
    Ok(out)
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}
