//! Building a room: every setting with its unit in its name, defaults from the seed's on-sale.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use waitroom_verify::{CookieNames, SharedClock, SigningKey, SystemClock, VerifyingKey};

use crate::error::BuildError;
use crate::room::WaitingRoom;
use crate::store::{MemoryStore, Settings, Store};

/// The order people leave the line in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fairness {
    /// First come, first served: the line number is the join order.
    #[default]
    Fifo,
    /// Everyone who joins before `opens_at` waits in a pre-queue; at `opens_at` they are put in line in the order of
    /// a secret random draw. Later arrivals queue behind them in arrival order. Arriving at 9:31 or at 9:59 makes no
    /// difference.
    RandomAtOpen {
        /// When the draw happens and the door opens.
        opens_at: SystemTime,
    },
}

/// What the room does on a protected path while its store cannot be reached (a Redis outage). Whichever is
/// chosen, people already admitted keep passing on their tokens (checked locally), the status poll says the status
/// is temporarily unknown, and the door lets nobody new in from the line: the store holds the line. What differs is
/// a request to a protected path without a valid token: held, or let through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StoreOutage {
    /// A request without a valid token is held (the default): a newcomer gets the holding page (a JSON client a
    /// `503` with `store_ok: false`), and nobody gets in beyond what the store last allowed. The checkout sees no
    /// more people than its capacity, at the price of a stalled line for the outage.
    #[default]
    FailClosed,
    /// A request without a valid token passes to the inner service as if no room were there, as commercial
    /// rooms' "fail open" does. **This unprotects the checkout for the outage**: anyone, in line or not, reaches
    /// it, however many they are, and gets no token (no [`Verified`](waitroom_verify::Verified) marker, so a
    /// [`VerifyLayer`](waitroom_verify::VerifyLayer) further in, or an order service behind one, still refuses
    /// them). Their finishes are ignored. Only a store that cannot be reached opens it (one that answers with
    /// something unreadable does not), and it ends by itself: once the store answers again (the background task
    /// tries it every tick; a room built without it has no one to try), requests without a token are held and
    /// queued as before.
    FailOpen,
}

/// The room's fixed configuration (the shared, changeable part lives in the store's [`Settings`]).
#[derive(Debug, Clone)]
pub struct RoomConfig {
    /// The on-sale's id (the token's audience, the store's key).
    pub event: String,
    /// The on-sale's name, shown on the holding page.
    pub display_name: String,
    /// How long an active session may idle before its place frees (and its token lapses).
    pub idle_timeout: Duration,
    /// How often the holding page polls.
    pub poll_interval: Duration,
    /// A waiting session not seen for this long is skipped when it reaches the head (it misses its turn, and keeps
    /// it for the return window).
    pub abandon_after: Duration,
    /// How long a session whose turn came while it was away keeps that turn: back within it, it is let in at the
    /// next free place, ahead of the head of the line.
    pub return_window: Duration,
    /// How long an admitted session has to come and claim its place.
    pub arrival_window: Duration,
    /// How often the door ticks and the shared numbers are refreshed.
    pub tick_interval: Duration,
    /// How long a visit is expected to take, for wait estimates before anything is measured.
    pub expected_visit: Duration,
    /// The fairness policy.
    pub fairness: Fairness,
    /// The most sessions one tick looks at from the head.
    pub max_scan_per_tick: u64,
    /// The most sessions one store call of the tick looks at (see [`RoomBuilder::admit_chunk`]).
    pub admit_chunk: u64,
    /// How many sessions' places the room keeps in local memory.
    pub session_cache_capacity: u64,
    /// How many lifecycle events the room buffers for slow subscribers (see [`WaitingRoom::subscribe`]).
    pub event_buffer: usize,
    /// What protected paths do while the store cannot be reached.
    pub store_outage: StoreOutage,
    /// A newcomer with a free place and nobody ahead goes in on its first request, without the holding page
    /// (see [`RoomBuilder::straight_in`]).
    pub straight_in: bool,
    /// The most first contacts numbered in one store call (see [`RoomBuilder::ticket_batch`]); `None`: what the
    /// store asks for ([`Store::ticket_batch`]).
    pub ticket_batch: Option<usize>,
}

/// Builds a [`WaitingRoom`]. Start from [`WaitingRoom::builder`].
#[must_use = "a builder does nothing until `build` is called"]
#[derive(Debug)]
pub struct RoomBuilder {
    pub(crate) config: RoomConfig,
    pub(crate) capacity: u64,
    pub(crate) admit_per_minute: Option<u64>,
    pub(crate) opens_at: Option<SystemTime>,
    pub(crate) clock: SharedClock,
    pub(crate) store: Arc<dyn Store>,
    /// Whether `store` was given (a data directory then keeps only the keys).
    pub(crate) store_given: bool,
    pub(crate) data_dir: Option<PathBuf>,
    pub(crate) spawn_background: bool,
    pub(crate) pass: PassConfig,
}

/// What the room needs to hand out passes: the token key and claims, and the session cookie.
pub(crate) struct PassConfig {
    pub(crate) signing_key: Option<SigningKey>,
    pub(crate) also_publish: Vec<VerifyingKey>,
    pub(crate) issuer: String,
    pub(crate) max_qty: Option<u32>,
    pub(crate) cookie_secret: Option<Vec<u8>>,
    pub(crate) secure_cookies: bool,
    pub(crate) cookie_names: CookieNames,
    pub(crate) session_cookie_max_age: Duration,
    /// Prefix the names with `__Host-` (or `__Secure-` with a domain) when the cookies are secure.
    pub(crate) cookie_prefix: bool,
    /// The cookies' `Domain` attribute, if any (default none: host-only cookies).
    pub(crate) cookie_domain: Option<String>,
}

impl PassConfig {
    /// The cookie names in force: the configured names, prefixed `__Host-` behind HTTPS (secure cookies, no
    /// domain), `__Secure-` with a domain, unchanged without `Secure`, with the prefix turned off, or when the
    /// names carry one already.
    pub(crate) fn effective_cookie_names(&self) -> CookieNames {
        let prefix = match (
            self.secure_cookies && self.cookie_prefix,
            &self.cookie_domain,
        ) {
            (false, _) => "",
            (true, None) => "__Host-",
            (true, Some(_)) => "__Secure-",
        };
        let name = |n: &str| {
            if n.starts_with("__Host-") || n.starts_with("__Secure-") {
                n.to_owned()
            } else {
                format!("{prefix}{n}")
            }
        };
        CookieNames {
            session: name(&self.cookie_names.session),
            token: name(&self.cookie_names.token),
        }
    }
}

impl std::fmt::Debug for PassConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PassConfig")
            .field("signing_key", &self.signing_key)
            .field("also_publish", &self.also_publish.len())
            .field("issuer", &self.issuer)
            .field("max_qty", &self.max_qty)
            .field(
                "cookie_secret",
                &self.cookie_secret.as_ref().map(|_| "[redacted]"),
            )
            .field("secure_cookies", &self.secure_cookies)
            .field("cookie_names", &self.cookie_names)
            .field("cookie_prefix", &self.cookie_prefix)
            .field("cookie_domain", &self.cookie_domain)
            .finish()
    }
}

/// The shortest default abandon grace (see [`RoomBuilder::abandon_after`]): a background tab that a browser wakes
/// once a minute is never counted absent.
pub const MIN_DEFAULT_GRACE: Duration = Duration::from_secs(180);

/// The default return window (see [`RoomBuilder::return_window`]).
pub const DEFAULT_RETURN_WINDOW: Duration = Duration::from_secs(600);

/// The default abandon grace for a poll interval: three intervals, and at least [`MIN_DEFAULT_GRACE`].
fn default_grace(poll: Duration) -> Duration {
    (poll * 3).max(MIN_DEFAULT_GRACE)
}

/// The default [`RoomBuilder::admit_chunk`]: the most sessions one store call of the admission tick looks at.
/// Sized so that one call of the Redis store's tick script holds Redis for well under 5 ms (128 a call measured 3.1
/// ms at the median and 5.2 ms at the longest in an opening of 8,000 places on a quiet machine; 64 halves both; see
/// "Every call short" in `RedisStore`'s docs).
pub const DEFAULT_ADMIT_CHUNK: u64 = 64;

/// The smallest [`RoomBuilder::admit_chunk`] accepted: below it an opening takes more round trips than it saves
/// Redis time (a call costs a round trip and the script's fixed part, about as much as 10 to 20 sessions).
pub const MIN_ADMIT_CHUNK: u64 = 16;

/// The shortest cookie secret accepted, in bytes.
pub const MIN_COOKIE_SECRET_BYTES: usize = 32;

impl RoomBuilder {
    pub(crate) fn new(event: impl Into<String>) -> Self {
        let event = event.into();
        let poll = Duration::from_secs(20);
        Self {
            config: RoomConfig {
                display_name: event.clone(),
                event,
                idle_timeout: Duration::from_secs(600),
                poll_interval: poll,
                abandon_after: default_grace(poll),
                return_window: DEFAULT_RETURN_WINDOW,
                arrival_window: Duration::from_secs(60),
                tick_interval: Duration::from_millis(250),
                expected_visit: Duration::from_secs(240),
                fairness: Fairness::Fifo,
                max_scan_per_tick: 20_000,
                admit_chunk: DEFAULT_ADMIT_CHUNK,
                session_cache_capacity: 1_000_000,
                event_buffer: crate::room::lifecycle::DEFAULT_EVENT_BUFFER,
                store_outage: StoreOutage::FailClosed,
                straight_in: true,
                ticket_batch: None,
            },
            capacity: 8_000,
            admit_per_minute: None,
            opens_at: None,
            clock: Arc::new(SystemClock),
            store: Arc::new(MemoryStore::new()),
            store_given: false,
            data_dir: None,
            spawn_background: true,
            pass: PassConfig {
                signing_key: None,
                also_publish: Vec::new(),
                issuer: "waitroom".into(),
                max_qty: None,
                cookie_secret: None,
                secure_cookies: true,
                cookie_names: CookieNames::default(),
                session_cookie_max_age: Duration::from_secs(24 * 3600),
                cookie_prefix: true,
                cookie_domain: None,
            },
        }
    }

    /// The key admission tokens are signed with (default: a fresh random Ed25519 key, kid `waitroom-<random>`).
    ///
    /// Several instances of one room (behind a load balancer, sharing a Redis store) must share one key: load it
    /// from PEM on each (`SigningKey::from_ed25519_pem`), or every instance refuses the others' tokens. The order
    /// service trusts the public half, published at `{base}/jwks.json`.
    pub fn signing_key(mut self, key: SigningKey) -> Self {
        self.pass.signing_key = Some(key);
        self
    }

    /// Also accept and publish `key` (a public key), e.g. the previous signing key during a rotation, so tokens
    /// it signed keep working until they expire.
    pub fn publish_key(mut self, key: VerifyingKey) -> Self {
        self.pass.also_publish.push(key);
        self
    }

    /// The tokens' issuer, `iss` (default `waitroom`). The order service's verifier must accept it.
    pub fn issuer(mut self, issuer: impl Into<String>) -> Self {
        self.pass.issuer = issuer.into();
        self
    }

    /// A purchase limit written into every token (`max_qty`, seats per order; default: none).
    pub fn max_qty(mut self, seats: u32) -> Self {
        self.pass.max_qty = Some(seats);
        self
    }

    /// The secret the session cookie is signed with (HMAC-SHA256; at least 32 bytes; default: 32 random bytes).
    ///
    /// Several instances of one room must share it, or a browser that lands on another instance loses its place.
    pub fn cookie_secret(mut self, secret: impl AsRef<[u8]>) -> Self {
        self.pass.cookie_secret = Some(secret.as_ref().to_vec());
        self
    }

    /// Whether the room's cookies carry `Secure` (default true: sent over HTTPS only). Turn it off only for
    /// plain-HTTP development and tests.
    pub fn secure_cookies(mut self, secure: bool) -> Self {
        self.pass.secure_cookies = secure;
        self
    }

    /// The cookie names (default `waitroom_session` and `waitroom_token`), before the prefix (see
    /// [`cookie_prefix`](Self::cookie_prefix)). The order service's verifier must read the names in force:
    /// [`WaitingRoom::cookie_names`](crate::WaitingRoom::cookie_names) (a default `VerifyLayer` also finds the
    /// `__Host-` and `__Secure-` forms of its names).
    pub fn cookie_names(mut self, names: CookieNames) -> Self {
        self.pass.cookie_names = names;
        self
    }

    /// Whether secure cookies get a name prefix (default true). Behind HTTPS (with
    /// [`secure_cookies`](Self::secure_cookies), the default) the cookies are `__Host-waitroom_session` and
    /// `__Host-waitroom_token`: a browser accepts a `__Host-` cookie only from the host itself, with `Secure`,
    /// `Path=/` and no `Domain`, so a sibling subdomain (`blog.example.com` beside `shop.example.com`) or a plain
    /// HTTP page cannot set one (cookie tossing), and the room reads only those names. With a
    /// [`cookie_domain`](Self::cookie_domain) the prefix is `__Secure-` (a domain cookie cannot be `__Host-`: the
    /// hosts of that domain can then set it too). Turn it off only to keep the plain names (a verifier that cannot
    /// be configured, say); nothing else changes.
    pub fn cookie_prefix(mut self, on: bool) -> Self {
        self.pass.cookie_prefix = on;
        self
    }

    /// Shares the cookies with every host of `domain` (`Domain=example.com`), for the rare app whose room and order
    /// service live on different hosts of one domain and cannot route them through one host. Default: none, the
    /// cookies are the host's alone (and `__Host-` behind HTTPS). With a domain, any host of that domain can set
    /// cookies the room reads: the signature still refuses forged values, but a host that can run code can plant
    /// a session of its own (session fixation). Prefer one host.
    pub fn cookie_domain(mut self, domain: impl Into<String>) -> Self {
        self.pass.cookie_domain = Some(domain.into());
        self
    }

    /// How long the browser keeps the session cookie (default 24 hours).
    pub fn session_cookie_max_age(mut self, d: Duration) -> Self {
        self.pass.session_cookie_max_age = d;
        self
    }

    /// The on-sale's name on the holding page (default: the event id).
    pub fn display_name(mut self, name: impl Into<String>) -> Self {
        self.config.display_name = name.into();
        self
    }

    /// Most sessions active at once (default 8,000: 2,000 orders a minute times 4-minute visits).
    pub fn capacity(mut self, sessions: u64) -> Self {
        self.capacity = sessions;
        self
    }

    /// Most new admissions in any sliding minute, on top of the capacity (default: none).
    pub fn admit_per_minute(mut self, sessions: u64) -> Self {
        self.admit_per_minute = Some(sessions);
        self
    }

    /// How long an active session may idle before its place frees (default 10 minutes). Also the token lifetime.
    pub fn idle_timeout(mut self, d: Duration) -> Self {
        self.config.idle_timeout = d;
        self
    }

    /// Whether a newcomer who finds a free place and nobody ahead goes straight in (default `true`): its first
    /// request joins, the admission tick runs at once instead of at its interval, and the request passes with its
    /// pass, within every rule of the door (capacity, per-minute cap, seats, pause, the opening, closed or sold
    /// out). On a quiet day nobody sees the holding page. With `false` every newcomer gets the holding page and
    /// goes in at the door's next tick (what a site wants that shows a notice on the holding page first).
    pub fn straight_in(mut self, yes: bool) -> Self {
        self.config.straight_in = yes;
        self
    }

    /// The most first contacts this instance numbers in one store call (default: what the store asks for,
    /// [`Store::ticket_batch`]: 1 for the embedded store, where each first contact asks the store itself, and
    /// 1,024 for the Redis store). Above 1, the first contacts that arrive while the previous call is under way
    /// go to the store together in one [`Store::tickets`] call, numbered in the order they arrived here; one that
    /// finds no call under way goes at once. FIFO order across instances is then the order of their calls: two
    /// people who reach two instances within about one store round trip of each other may be numbered in either
    /// order (see "Tickets" in [`crate::store`]).
    pub fn ticket_batch(mut self, most: usize) -> Self {
        self.config.ticket_batch = Some(most.max(1));
        self
    }

    /// How often the holding page polls (default 20 s). Also sets the abandon grace to its default for this
    /// interval (the longer of three intervals and [`MIN_DEFAULT_GRACE`]) unless
    /// [`abandon_after`](Self::abandon_after) is called afterwards.
    pub fn poll_interval(mut self, d: Duration) -> Self {
        self.config.poll_interval = d;
        self.config.abandon_after = default_grace(d);
        self
    }

    /// A waiting session not seen for this long is skipped when it reaches the head: it misses its turn, the
    /// next present person goes in, and it keeps its turn for the [`return_window`](Self::return_window).
    ///
    /// Default: the longer of three poll intervals and [`MIN_DEFAULT_GRACE`] (3 minutes). Browsers slow down the
    /// timers of a page in a background tab: Chrome lets the chained timers of a page hidden for five minutes wake
    /// up once a minute at most, so a holding page that asks to poll every 20 s polls about once a minute there,
    /// and a little later still when the wake-up's request is slow. A grace of one minute (three polls at the
    /// seed's 20 s) would count such a tab absent at the moment its turn comes; three minutes is three of those
    /// wake-ups. The cost of a long grace is small: a person who really left is skipped once the grace has passed
    /// since their last poll, and the door never waits for them (it admits the next present person at once).
    pub fn abandon_after(mut self, d: Duration) -> Self {
        self.config.abandon_after = d;
        self
    }

    /// The most sessions one admission tick looks at from the head (let in or skipped as away; default 20,000):
    /// bounds one store call's work. Numbers nobody holds (tickets never redeemed) are not looked at on a store
    /// that counts the living (the embedded one), so a flood of one-shot requests does not use it up.
    pub fn max_scan_per_tick(mut self, n: u64) -> Self {
        self.config.max_scan_per_tick = n.max(1);
        self
    }

    /// The most sessions one store call of the admission tick looks at (default [`DEFAULT_ADMIT_CHUNK`], at least
    /// [`MIN_ADMIT_CHUNK`]): let in, skipped as away, turned away, expired or ended. A tick that has more to do
    /// calls the store again, chunk after chunk, up to [`max_scan_per_tick`](Self::max_scan_per_tick) (a chunk
    /// above it is that). An opening with 8,000 free places is then about 63 short calls, not one long one: a store in
    /// another process (Redis runs one command at a time) answers every instance's joins, polls and finishes in
    /// between. Each call reads the capacity afresh, so instances ticking at once never let in more than the
    /// capacity, and people go in in line order (the draw's order after a draw).
    ///
    /// # Errors (at [`build`](Self::build))
    /// [`BuildError::Invalid`] for a chunk below [`MIN_ADMIT_CHUNK`].
    pub fn admit_chunk(mut self, n: u64) -> Self {
        self.config.admit_chunk = n;
        self
    }

    /// How long a session whose turn came while it was away keeps that turn (default 10 minutes; zero: it does
    /// not, and a missed turn is lost at once, as before the return window existed).
    ///
    /// The door does not wait for the absent person: it skips them and lets the next present person in, so
    /// nobody present waits for someone who is not there. When the absent person polls again (the holding page
    /// polls at once when its tab becomes visible again, is restored from the back-forward cache, or the network
    /// comes back) within the window, they are let in at the next free place, ahead of the head of the line,
    /// within the capacity and every other rule of the door (pause, per-minute cap, inventory, sold out, closed):
    /// their first status answer says `returning`, and the next admission tick lets them in when there is room.
    /// After the window the status says `missed` (the turn passed while they were away) and their next protected
    /// request joins the line again, at the back. Every instance sharing a store must use the same window.
    pub fn return_window(mut self, d: Duration) -> Self {
        self.config.return_window = d;
        self
    }

    /// How long an admitted session has to come and claim its place before the place frees (default 60 s). One
    /// that does not come keeps its turn for the [return window](Self::return_window), as one away when its turn
    /// came does: back within it, it is let in at the next free place.
    pub fn arrival_window(mut self, d: Duration) -> Self {
        self.config.arrival_window = d;
        self
    }

    /// How often the door ticks and the shared numbers refresh (default 250 ms).
    pub fn tick_interval(mut self, d: Duration) -> Self {
        self.config.tick_interval = d;
        self
    }

    /// How long a visit is expected to take, used for wait estimates until the room has measured (default 4 min).
    pub fn expected_visit(mut self, d: Duration) -> Self {
        self.config.expected_visit = d;
        self
    }

    /// The fairness policy (default [`Fairness::Fifo`]).
    pub fn fairness(mut self, f: Fairness) -> Self {
        self.config.fairness = f;
        self
    }

    /// Keeps the door shut until `at` (with [`Fairness::Fifo`], people queue in arrival order before then).
    pub fn opens_at(mut self, at: SystemTime) -> Self {
        self.opens_at = Some(at);
        self
    }

    /// The clock (default: the system clock). Tests and rehearsals pass a [`waitroom_verify::ManualClock`].
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// The store (default: a fresh [`MemoryStore`], or a durable one with [`data_dir`](Self::data_dir)).
    pub fn store(mut self, store: impl Store) -> Self {
        self.store = Arc::new(store);
        self.store_given = true;
        self
    }

    /// The store, already shared.
    pub fn shared_store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = store;
        self.store_given = true;
        self
    }

    /// Keeps the room in the directory `dir` (created, mode 0700, if missing), so a restart, a crash included,
    /// takes it back where it was:
    /// - the line: unless a [`store`](Self::store) is given, a durable [`MemoryStore`] opened there
    ///   ([`MemoryStore::open`]: the line, the served count, the active sessions with their deadlines, the
    ///   finishes, the settings and the seats, up to the last 100 ms before a crash; see its Durability section);
    /// - the token signing key ([`SIGNING_KEY_FILE`](crate::SIGNING_KEY_FILE), with a `kid` derived from its
    ///   public half) and the cookie secret ([`COOKIE_SECRET_FILE`](crate::COOKIE_SECRET_FILE)), unless given:
    ///   created (mode 0600) on the first start and read on every later one, so cookies and passes issued before
    ///   a restart stay valid after it.
    ///
    /// A key given with [`signing_key`](Self::signing_key) wins over the file: to rotate, sign with the new key
    /// and publish the file's ([`load_or_create_signing_key`](crate::load_or_create_signing_key)`(..)
    /// .verifying_key()` to [`publish_key`](Self::publish_key)) until its last token has expired, then put the new
    /// key's PEM in the file. `build` refuses a data file it cannot read (corrupt, or open in another process)
    /// with an error naming it, rather than start an empty line.
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.data_dir = Some(dir.into());
        self
    }

    /// How many sessions' places to keep in local memory (default 1,000,000).
    pub fn session_cache_capacity(mut self, n: u64) -> Self {
        self.config.session_cache_capacity = n;
        self
    }

    /// How many lifecycle events to buffer for subscribers of [`WaitingRoom::subscribe`] (default 4,096): a
    /// subscriber that falls further behind loses the oldest ones.
    pub fn event_buffer(mut self, events: usize) -> Self {
        self.config.event_buffer = events;
        self
    }

    /// What protected paths do while the store cannot be reached (default [`StoreOutage::FailClosed`]: nobody
    /// without a token gets past the room). [`StoreOutage::FailOpen`] lets every request through for as long as
    /// the store is down, which unprotects the checkout for that time; see [`StoreOutage`].
    pub fn store_outage(mut self, policy: StoreOutage) -> Self {
        self.config.store_outage = policy;
        self
    }

    /// Whether `build` starts the background task (tick, refresh, flush). Default true; tests that drive the room by
    /// hand with [`WaitingRoom::tick_now`] turn it off.
    pub fn background(mut self, spawn: bool) -> Self {
        self.spawn_background = spawn;
        self
    }

    pub(crate) fn validate(&self) -> Result<Settings, BuildError> {
        let c = &self.config;
        if c.event.is_empty()
            || c.event.len() > 64
            || !c
                .event
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
        {
            return Err(BuildError::invalid(
                "event",
                format!(
                    "`{}` must be 1 to 64 characters of letters, digits, `-`, `_`, `.`, `:`",
                    c.event
                ),
            ));
        }
        if c.event_buffer == 0 || c.event_buffer > 1 << 20 {
            return Err(BuildError::invalid(
                "event_buffer",
                "must be between 1 and 1,048,576 events",
            ));
        }
        if c.admit_chunk < MIN_ADMIT_CHUNK {
            return Err(BuildError::invalid(
                "admit_chunk",
                format!(
                    "{} is below the floor of {MIN_ADMIT_CHUNK} sessions a store call (the default is \
                     {DEFAULT_ADMIT_CHUNK})",
                    c.admit_chunk
                ),
            ));
        }
        if self.capacity == 0 {
            return Err(BuildError::invalid(
                "capacity",
                "must be at least 1 (pause the door instead of a zero capacity)",
            ));
        }
        if self.admit_per_minute == Some(0) {
            return Err(BuildError::invalid(
                "admit_per_minute",
                "must be at least 1 (pause the door to stop admitting)",
            ));
        }
        for (name, d) in [
            ("idle_timeout", c.idle_timeout),
            ("poll_interval", c.poll_interval),
            ("abandon_after", c.abandon_after),
            ("arrival_window", c.arrival_window),
            ("tick_interval", c.tick_interval),
            ("expected_visit", c.expected_visit),
        ] {
            if d.is_zero() {
                return Err(BuildError::invalid(name, "must be longer than zero"));
            }
        }
        if c.abandon_after < c.poll_interval {
            return Err(BuildError::invalid(
                "abandon_after",
                format!(
                    "{:?} is shorter than the poll interval {:?}: people who poll on time would be skipped",
                    c.abandon_after, c.poll_interval
                ),
            ));
        }
        if let Some(secret) = &self.pass.cookie_secret
            && secret.len() < MIN_COOKIE_SECRET_BYTES
        {
            return Err(BuildError::invalid(
                "cookie_secret",
                format!(
                    "{} bytes is too short; use at least {MIN_COOKIE_SECRET_BYTES} random bytes",
                    secret.len()
                ),
            ));
        }
        if self.pass.cookie_names.validate().is_err() {
            return Err(BuildError::invalid(
                "cookie_names",
                "names must be distinct RFC 6265 tokens of 1 to 64 characters",
            ));
        }
        if let Some(d) = &self.pass.cookie_domain {
            let ok = !d.is_empty()
                && d.len() <= 253
                && d.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
            if !ok {
                return Err(BuildError::invalid(
                    "cookie_domain",
                    format!("`{d}` is not a domain name (letters, digits, `.` and `-`)"),
                ));
            }
        }
        if self.pass.issuer.is_empty() {
            return Err(BuildError::invalid("issuer", "must not be empty"));
        }
        if self.pass.max_qty == Some(0) {
            return Err(BuildError::invalid("max_qty", "must be at least 1"));
        }
        if c.idle_timeout < Duration::from_secs(2) {
            return Err(BuildError::invalid(
                "idle_timeout",
                "must be at least 2 s (it is also the token lifetime, in whole seconds)",
            ));
        }
        let to_ms = |t: SystemTime| {
            t.duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0)
        };
        let (random_draw, opens_at_ms) = match c.fairness {
            Fairness::Fifo => (false, self.opens_at.map(to_ms)),
            Fairness::RandomAtOpen { opens_at } => {
                if self.opens_at.is_some_and(|o| o != opens_at) {
                    return Err(BuildError::invalid(
                        "opens_at",
                        "differs from the opening time given in Fairness::RandomAtOpen; give it once",
                    ));
                }
                (true, Some(to_ms(opens_at)))
            }
        };
        Ok(Settings {
            capacity: self.capacity,
            admit_per_minute: self.admit_per_minute,
            paused: false,
            closed: false,
            opens_at_ms,
            random_draw,
            inventory: None,
            prequeue_opens_at_ms: None,
            closes_at_ms: None,
        })
    }

    /// Builds the room: checks the settings, writes them to the store unless the on-sale already has settings there
    /// (a restarted instance keeps what operators changed), reads the shared numbers, and starts the background task
    /// (when inside a Tokio runtime and [`background`](Self::background) is on).
    ///
    /// # Errors
    /// [`BuildError::Invalid`] names the setting and the reason; [`BuildError::Store`] when the store cannot be
    /// reached at start.
    pub async fn build(self) -> Result<WaitingRoom, BuildError> {
        let defaults = self.validate()?;
        WaitingRoom::from_builder(self, defaults).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn refuses_bad_settings_with_a_reason() {
        let e = WaitingRoom::builder("x")
            .capacity(0)
            .build()
            .await
            .unwrap_err();
        assert!(e.to_string().contains("capacity"), "{e}");
        let e = WaitingRoom::builder("bad id!").build().await.unwrap_err();
        assert!(e.to_string().contains("event"), "{e}");
        let e = WaitingRoom::builder("x")
            .poll_interval(Duration::from_secs(20))
            .abandon_after(Duration::from_secs(5))
            .build()
            .await
            .unwrap_err();
        assert!(e.to_string().contains("abandon_after"), "{e}");
    }

    /// The tick's chunk is a setting: 64 sessions a store call by default (a few milliseconds of Redis at the
    /// measured tens of µs a session), refused below its floor with the setting named, taken as given at it.
    #[tokio::test]
    async fn the_admit_chunk_has_a_default_and_a_floor() {
        assert_eq!(
            RoomBuilder::new("x").config.admit_chunk,
            DEFAULT_ADMIT_CHUNK
        );
        assert_eq!(DEFAULT_ADMIT_CHUNK, 64);
        let e = WaitingRoom::builder("x")
            .admit_chunk(MIN_ADMIT_CHUNK - 1)
            .build()
            .await
            .unwrap_err();
        assert!(
            matches!(
                e,
                BuildError::Invalid {
                    setting: "admit_chunk",
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("floor of 16"), "{e}");
        let room = WaitingRoom::builder("x")
            .admit_chunk(MIN_ADMIT_CHUNK)
            .background(false)
            .build()
            .await
            .unwrap();
        assert_eq!(room.inner.config.admit_chunk, MIN_ADMIT_CHUNK);
    }

    /// A background tab that a browser wakes once a minute is never counted absent: the default grace is at least
    /// three of those wake-ups, and three poll intervals when they are longer; the return window is 10 minutes.
    #[test]
    fn the_default_grace_outlasts_a_throttled_tab() {
        let grace = |poll: u64| {
            RoomBuilder::new("x")
                .poll_interval(Duration::from_secs(poll))
                .config
                .abandon_after
        };
        assert_eq!(
            RoomBuilder::new("x").config.abandon_after,
            Duration::from_secs(180)
        );
        assert_eq!(grace(1), Duration::from_secs(180));
        assert_eq!(grace(20), Duration::from_secs(180));
        assert_eq!(grace(90), Duration::from_secs(270));
        assert_eq!(
            RoomBuilder::new("x").config.return_window,
            Duration::from_secs(600)
        );
    }
}
