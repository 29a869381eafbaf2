//! The sink: finishes written to the room's Redis store.

use super::*;

/// A [`FinishSink`] that finishes the session in the room's Redis store and records it in the on-sale's finish
/// stream, in one script (see the module docs): the place is free and the seats count at once, the room instances
/// sharing that Redis refuse the session's token from their next tick, and [`RedisFinishListener`]s on other
/// verifier replicas refuse it too.
///
/// Cheap to clone: clones share the connection (multiplexed, reconnecting) and the counters. It adds no response
/// header; the write starts inside [`FinishSink::finish`] on the current Tokio runtime, and the response waits for
/// it (at most the timeout). A finish made after the response left is still written.
#[derive(Clone)]
pub struct RedisFinishSink {
    conn: RedisConnection,
    prefix: Arc<str>,
    timeout: Duration,
    counts: Arc<SinkCounts>,
    script: Arc<SinkScript>,
}

/// The sink's script: its code (for `SCRIPT LOAD`) and SHA1 (for `EVALSHA`).
#[derive(Debug)]
struct SinkScript {
    code: String,
    sha: String,
}

impl SinkScript {
    fn new() -> Self {
        let code = format!(
            "local KM, KS, KA, KF = KEYS[1], KEYS[2], KEYS[3], KEYS[4]\n{FINISH_LUA}\n{SINK_BODY}"
        );
        let sha = Script::new(&code).get_hash().to_owned();
        Self { code, sha }
    }
}

#[derive(Debug, Default)]
struct SinkCounts {
    recorded: AtomicU64,
    failed: AtomicU64,
    log: LogGate,
}

impl fmt::Debug for RedisFinishSink {
    // The connection is left out: its URL may carry a password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisFinishSink")
            .field("key_prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("recorded", &self.recorded())
            .field("failed", &self.failed())
            .finish_non_exhaustive()
    }
}

/// Builds a [`RedisFinishSink`]. Start from [`RedisFinishSink::builder`].
#[must_use = "a builder does nothing until `connect` is called"]
#[derive(Clone)]
pub struct RedisFinishSinkBuilder {
    conn: Conn,
}

impl fmt::Debug for RedisFinishSinkBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisFinishSinkBuilder")
            .field("url", &"<redacted>")
            .field("key_prefix", &self.conn.key_prefix)
            .field("timeout", &self.conn.timeout)
            .field("connect_timeout", &self.conn.connect_timeout)
            .finish()
    }
}

impl RedisFinishSinkBuilder {
    /// The key prefix, the room store's (default `wr`). Must not contain `{` or `}`.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.conn.key_prefix = prefix.into();
        self
    }

    /// How long one write may take before it counts as failed (default 1 s). The response waits at most this long.
    pub fn timeout(mut self, d: Duration) -> Self {
        self.conn.timeout = d;
        self
    }

    /// How long one attempt to (re)connect may take (default 1 s).
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.conn.connect_timeout = d;
        self
    }

    /// Connects.
    ///
    /// # Errors
    /// [`RedisFinishError::Invalid`] for a malformed URL, a brace in the prefix or a zero timeout;
    /// [`RedisFinishError::Unavailable`] when Redis cannot be reached within the timeouts.
    pub async fn connect(self) -> Result<RedisFinishSink, RedisFinishError> {
        self.conn.check()?;
        let conn = self.conn.connect().await?;
        let script = SinkScript::new();
        // Loaded once here; a Redis that forgets it (a restart) gets it again on the first `NOSCRIPT`.
        let mut load = ::redis::cmd("SCRIPT");
        load.arg("LOAD").arg(&script.code);
        send(&conn, &load, self.conn.timeout).await?;
        Ok(RedisFinishSink {
            conn,
            prefix: self.conn.key_prefix.into(),
            timeout: self.conn.timeout,
            counts: Arc::default(),
            script: Arc::new(script),
        })
    }
}

impl RedisFinishSink {
    /// Connects to `url` (`redis://[:password@]host:port/[db]`) with the defaults: prefix `wr`, 1 s timeouts.
    ///
    /// # Errors
    /// See [`RedisFinishSinkBuilder::connect`].
    pub async fn connect(url: impl Into<RedisTarget>) -> Result<Self, RedisFinishError> {
        Self::builder(url).connect().await
    }

    /// Starts building a sink for the Redis at `url`: a URL for one server, or any [`RedisTarget`] (a cluster, a
    /// primary under Sentinel).
    pub fn builder(url: impl Into<RedisTarget>) -> RedisFinishSinkBuilder {
        RedisFinishSinkBuilder {
            conn: Conn::new(url.into()),
        }
    }

    /// The key prefix.
    #[must_use]
    pub fn key_prefix(&self) -> &str {
        &self.prefix
    }

    /// Finishes written so far.
    #[must_use]
    pub fn recorded(&self) -> u64 {
        self.counts.recorded.load(Ordering::Relaxed)
    }

    /// Finishes that could not be written (Redis down or too slow, or an event id with a brace).
    #[must_use]
    pub fn failed(&self) -> u64 {
        self.counts.failed.load(Ordering::Relaxed)
    }

    /// Writes one finish now, with `<event>` the finish's on-sale: in one script, the session (when admitted or
    /// active in the store) turns finished, leaves the active count and its seats count, and the finish is
    /// appended to the stream (`XADD <prefix>:{<event>}:finished MAXLEN ~ 100000 * s <session> n <seats> t <ms>
    /// a 1`). [`FinishSink::finish`] calls this; call it directly to record a finish made outside the verify
    /// layer.
    ///
    /// # Errors
    /// [`RedisFinishError::Invalid`] when the event id contains a brace; [`RedisFinishError::Unavailable`] when
    /// Redis did not take the entry within the timeout. Either way the failure is counted in
    /// [`failed`](Self::failed) and logged (at most once per 10 s).
    pub async fn record(&self, finish: &Finish) -> Result<(), RedisFinishError> {
        let r = self.write(finish).await;
        match &r {
            Ok(()) => {
                self.counts.recorded.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.counts.failed.fetch_add(1, Ordering::Relaxed);
                if self.counts.log.due() {
                    tracing::warn!(session = %crate::session::fingerprint(&finish.session_id), event = %finish.event, error = %e,
                        "could not record a finish in Redis; the room frees the place when the session idles out");
                }
            }
        }
        r
    }

    async fn write(&self, finish: &Finish) -> Result<(), RedisFinishError> {
        let keys = finish_keys(&self.prefix, &finish.event)?;
        let mut cmd = ::redis::cmd("EVALSHA");
        cmd.arg(&self.script.sha).arg(keys.len());
        for k in &keys {
            cmd.arg(k);
        }
        cmd.arg(&finish.session_id)
            .arg(finish.seats)
            .arg(finish.at_ms)
            .arg(FINISHED_STREAM_CAP);
        let run = async {
            let mut conn = self.conn.clone();
            match cmd.query_async::<Value>(&mut conn).await {
                Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                    let mut load = ::redis::cmd("SCRIPT");
                    load.arg("LOAD").arg(&self.script.code);
                    load.query_async::<Value>(&mut conn).await?;
                    cmd.query_async::<Value>(&mut conn).await
                }
                r => r,
            }
        };
        // One bound for the whole write, a reload included.
        match tokio::time::timeout(self.timeout, run).await {
            Ok(r) => r.map(|_| ()).map_err(unavailable),
            Err(_) => Err(RedisFinishError::Unavailable(format!(
                "Redis did not answer within {:?}",
                self.timeout
            ))),
        }
    }
}

impl FinishSink for RedisFinishSink {
    fn finish(&self, finish: &Finish, _response_headers: &mut HeaderMap) -> Option<FinishFuture> {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.counts.failed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(session = %crate::session::fingerprint(&finish.session_id), "a Redis finish outside a Tokio runtime was dropped");
            return None;
        };
        // Spawned, so the write survives a response future that is dropped (see the sink contract).
        let sink = self.clone();
        let finish = finish.clone();
        let task = runtime.spawn(async move {
            let _ = sink.record(&finish).await;
        });
        Some(Box::pin(async move {
            let _ = task.await;
        }))
    }
}
