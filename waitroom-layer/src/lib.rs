//! waitroom-layer: a virtual waiting room as Tower middleware.
//!
//! The room keeps a line of sessions in a [`Store`] and lets people in at the pace the checkout can finish: it counts
//! active sessions and admits the next person whenever one ends, up to a capacity. [`WaitingRoomLayer`] puts it in
//! front of the routes that need it: the seat map, the holds, the payment.
//!
//! The line lives in this process by default ([`MemoryStore`]); [`RoomBuilder::data_dir`] keeps it, the signing
//! key and the cookie secret in a directory, so a restart (a crash included) resumes the sale with every place and
//! pass, up to the last 100 ms ([`MemoryStore`]'s Durability section says what those cost). With the `redis`
//! feature, `RedisStore` shares one line between many instances.
//!
//! # Wiring it on axum
//! ```no_run
//! use axum::{Router, routing::get};
//! use waitroom_layer::{WaitingRoom, WaitingRoomLayer};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let room = WaitingRoom::builder("tour-2026").display_name("The 2026 tour").capacity(8_000).build().await?;
//! let waitroom = WaitingRoomLayer::builder(room)
//!     .protect_prefix("/checkout")
//!     .bypass(|parts| parts.uri.path() == "/health")
//!     .build()?;
//! let app: Router = Router::new()
//!     .route("/", get(|| async { "home, never queued" }))
//!     .route("/checkout", get(|| async { "seat map" }))
//!     .route("/health", get(|| async { "ok" }))
//!     .layer(waitroom);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! axum::serve(listener, app).await?;
//! # Ok(()) }
//! ```
//! With `.route_layer()` on a sub-router of protected routes, build the layer with no protected paths (then every
//! route it wraps is protected) and mount [`WaitingRoomLayer::endpoints`] for the base path:
//! `.route_service("/waitroom/{*rest}", waitroom.endpoints())`.
//!
//! # What a browser sees
//! - First request to a protected path: a session cookie (`__Host-waitroom_session` behind HTTPS, the default:
//!   HttpOnly, SameSite=Lax, Secure, Path=/, no Domain, so a sibling subdomain cannot set one;
//!   `waitroom_session` with `secure_cookies(false)`; see [`RoomBuilder::cookie_prefix`]) and the holding page
//!   with its place in line. The cookie is `<session>.<mark>.<hmac>`,
//!   signed with the room's cookie secret (HMAC-SHA256, checked in constant time); a forged or garbled one is no
//!   cookie at all. It carries the line number (or `p` while in the pre-queue), so a poll is answered from memory.
//! - A newcomer who finds a free place and nobody ahead goes straight in on that first request (the door's tick
//!   runs at once; [`RoomBuilder::straight_in`]). Otherwise the page polls `GET {base}/status` (JSON) a second or
//!   two after it loads, then every `refresh_seconds` with jitter; without JavaScript it refreshes itself. When the session is let in, the poll claims the place, sets the admission token cookie
//!   (`__Host-waitroom_token`, a JWT signed by the room, lifetime = the idle timeout) and the page goes on to `next`.
//! - With a valid token for its own session a request passes to the inner service. The room counts it as
//!   activity (batched) and re-issues the token once more than half its life is gone.
//! - When the inner response carries `Waitroom-Command: finish; seats=<n>` (what the verify crate's
//!   `Admission::finish_with_seats` adds), the layer removes the header, marks the session finished, refuses its
//!   token from then on and clears the cookie. Coming back, the browser joins again at the back.
//! - `{base}/join?return_to=/path` joins and shows the holding page (the verify layer sends refused browsers
//!   here); `{base}/jwks.json` publishes the token keys for the order service; `{base}/holding.js` is the
//!   default holding page's script (the page itself runs no inline script and is sent with a strict
//!   `Content-Security-Policy`, [`DEFAULT_CSP`]).
//! - Everything the room writes carries `Cache-Control: no-store` and `Waitroom-State: <state>`. Pages go to
//!   clients whose `Accept` names `text/html` (a browser navigating); everyone else, `Accept: */*` (curl) and no
//!   `Accept` included, gets the JSON status instead of the page (`429` with `Retry-After` while in line on a
//!   protected path, `410` when sold out or closed). The verify crate's refusals follow the same rule
//!   ([`waitroom_verify::negotiate`]): a client gets the same kind of answer from both layers.
//!
//! # Apps and API clients (no cookie jar)
//! A client without cookies names its session with `X-Waitroom-Session: <session value>` ([`SESSION_HEADER`]) and
//! shows its pass as `Authorization: Bearer <token>`, on the endpoints and on protected routes. The contract:
//! - The header's value is the session cookie's value, checked the same way (HMAC, bounds); a forged, unsigned,
//!   oversized or duplicated header is no session. The header is read only when the request has **no** session
//!   cookie: with both, the cookie wins (as in the verify crate).
//! - The room hands values over in its answers, never in cookies, to a client that sent the header: `session` (when
//!   new or changed) and, once admitted, `token` in the JSON status, and the same in the [`SESSION_VALUE_HEADER`]
//!   (`Waitroom-Session`) and [`TOKEN_HEADER`] (`Waitroom-Token`) response headers; a token renewed on a protected
//!   request comes only in `Waitroom-Token`. A finish answers `Waitroom-State: finished`.
//! - A newcomer (no cookie, no header) is told its `session` in the JSON answer (and gets the cookie); never a
//!   token. A request with a session cookie (a browser) gets `Set-Cookie` only, as above: nothing secret in a body
//!   or header its page's script could read.
//! - Behind `tower-http`'s `CorsLayer`, allow the `x-waitroom-session` and `authorization` request headers and
//!   expose `waitroom-session`, `waitroom-token` and `waitroom-state`.
//!
//! # Keep your turn: the grace and the return window
//! A waiting session that has not polled for the grace ([`RoomBuilder::abandon_after`]; by default the longer of
//! three poll intervals and [`MIN_DEFAULT_GRACE`], 3 minutes) when its turn comes *misses* it
//! ([`SessionState::Missed`]): the door skips it and lets the next present person in, in the same tick, so nobody
//! present waits for someone who is not there. The 3 minutes are there because browsers slow down background tabs:
//! Chrome wakes the chained timers of a page hidden for five minutes once a minute at most, so a page asked to poll
//! every 20 s polls about once a minute, and a one-minute grace would count it absent just as its turn comes.
//!
//! A missed turn is kept for the return window ([`RoomBuilder::return_window`], default
//! [`DEFAULT_RETURN_WINDOW`], 10 minutes). A poll within it (the holding page polls at once when its tab becomes
//! visible again, is restored from the back-forward cache or the network comes back) answers
//! [`ViewState::Returning`] and puts the session in the returning queue, which every admission tick serves ahead of
//! the head of the line within every rule of the door (capacity, per-minute cap, pause, inventory; turned away
//! first when the on-sale is closed or sold out): with a free place, the next tick lets it in. After the window the
//! status says [`ViewState::Missed`] (the page: "Your turn passed while you were away") and the next protected
//! request joins at the back. The queue lives in the store, so a person may come back through any instance. Counted
//! in [`Counters`](store::Counters) (`missed`, `returned`, `returned_late`, `abandoned`) and reported as events
//! ([`RoomEventKind::Missed`], [`RoomEventKind::Returned`], [`RoomEventKind::ReturnedLate`],
//! [`RoomEventKind::Abandoned`]).
//!
//! # Several instances
//! The room's signing key and cookie secret default to fresh random values: fine for one process. Instances
//! sharing a store must share both ([`RoomBuilder::signing_key`] from PEM, [`RoomBuilder::cookie_secret`]).
//!
//! # When the store is down
//! While the store cannot be reached (a Redis outage), the room answers from its last snapshot: the status poll
//! says the status is temporarily unknown and the page keeps polling; admitted sessions keep passing on their
//! tokens (checked locally); the door lets nobody in beyond what the store last allowed. A request to a protected
//! path without a valid token is held by default, on the holding page ([`StoreOutage::FailClosed`]). [`RoomBuilder::store_outage`] with
//! [`StoreOutage::FailOpen`] lets such requests through to the inner service instead, which **unprotects the
//! checkout for the outage**; it ends by itself when the store answers again.
//!
//! # When the store forgets
//! A store that answers but no longer knows the on-sale ([`StoreError::Forgotten`]: a Redis restarted without
//! persistence, a fresh replica) is given it back at the next call, from the room's last snapshot (settings in
//! force, the line's numbers, the counters): nobody is let in for one poll interval (+20 % jitter, +1 s) while the
//! people in line come back with the number in their signed cookie and take it again; newcomers get numbers after
//! everyone's; then the door resumes in order. No 503 for it. The rules are in [`store`] ("When the store
//! forgets"); `tests/redis_faults.rs` kills a real Redis mid-sale and checks them over HTTP.
//!
//! # A per-client cap on joins with `tower_governor`
//! The room holds one place per session (and per account with [`WaitingRoomLayerBuilder::account_key`]), but a
//! script can make many sessions. Put a rate limiter keyed by client address in front of the room (the join guard
//! is the place for captcha checks). It counts every request of a client, polls included, so size it for a person:
//! one poll every `refresh_seconds` per tab, a few tabs behind one NAT.
//! ```no_run
//! # async fn run(room: waitroom_layer::WaitingRoom) -> Result<(), Box<dyn std::error::Error>> {
//! use std::net::SocketAddr;
//! use axum::{Router, routing::get};
//! use tower_governor::{GovernorLayer, governor::GovernorConfigBuilder, key_extractor::SmartIpKeyExtractor};
//! use waitroom_layer::WaitingRoomLayer;
//!
//! let governor = GovernorConfigBuilder::default()
//!     .key_extractor(SmartIpKeyExtractor) // X-Forwarded-For: only behind a proxy you trust to set it
//!     .period(std::time::Duration::from_secs(2)) // one more request allowed every 2 s per client...
//!     .burst_size(10) // ...after a burst of 10
//!     .finish()
//!     .ok_or("bad governor settings")?;
//! let app = Router::new()
//!     .route("/seats", get(|| async { "seat map" }))
//!     .layer(WaitingRoomLayer::builder(room).protect_prefix("/seats").build()?) // inner: the room
//!     .layer(GovernorLayer::new(governor)); // outer: over-eager clients get 429 before they reach the room
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! // The extractor falls back to the peer address, which `into_make_service_with_connect_info` provides.
//! axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
//! # Ok(()) }
//! ```
//!
//! # Operating a live on-sale
//! - **Metrics** (off by default): [`WaitingRoomLayerBuilder::metrics`] serves the figures in the Prometheus
//!   (OpenMetrics) text format at `/waitroom/metrics`, or wherever [`WaitingRoomLayerBuilder::metrics_path`] says;
//!   [`WaitingRoom::metrics_text`] gives the same text to serve elsewhere. See [`metrics`].
//! - **Admin API and status page** (off by default): [`WaitingRoomLayerBuilder::admin_token`] (or several named
//!   tokens, [`WaitingRoomLayerBuilder::admin_token_named`]) answers `{base}/admin/...` for callers with
//!   `Authorization: Bearer <secret>`: stats, capacity, per-minute cap, pause, resume, open now, close, inventory,
//!   the timetable (opening, pre-queue opening, closing), one session (look up, end, move to the front), the audit
//!   log; and serves a live status page at `{base}/admin/` behind a login. See [`admin`].
//! - **Events**: [`WaitingRoom::subscribe`] streams joins, admissions, finishes, expiries, missed turns, returns
//!   (in time and late), abandonments and sold out. See [`lifecycle`].
//! - **Tracing**: joins, admissions, token issues, refusals and finishes are `DEBUG` spans (`waitroom.join`,
//!   `waitroom.admit`, `waitroom.token`, `waitroom.refusal`, `waitroom.finish`; expiries, missed turns and
//!   abandonments `waitroom.expire`, `waitroom.miss`, `waitroom.abandon`), each with the on-sale id as its `event` field and the session as its
//!   `session` field, and each with one `DEBUG` event inside; polls are `TRACE` events; operator changes and the
//!   draw `INFO`; store outages `WARN`. Sessions appear only as a 6-hex-digit [`fingerprint`], never as the id or
//!   a token. A span's fields are computed only when `DEBUG` is enabled for the room, so at the default
//!   `RUST_LOG=waitroom_layer=info` a 30,000-poll-per-second room logs nothing per request: only operator actions
//!   and outages. The verify crate's `VerifyLayer` logs its refusals the same way (`waitroom.refusal`, with the
//!   `audience` it expects in place of `event`, and the session's fingerprint when the request names one).
//!
//! # Parts
//! [`WaitingRoom`] (the line; [`RoomBuilder`]), [`WaitingRoomLayer`] and [`WaitingRoomLayerBuilder`],
//! [`WaitingRoomService`], [`ResponseFuture`], [`RoomBody`] (the response body), [`RoomEndpoints`],
//! [`PageTemplate`] (the holding page), [`JoinGuard`], [`Store`] and [`MemoryStore`], [`RoomEvent`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod error;
mod http;
mod room;
pub mod store;

pub use http::admin;
/// The lifecycle stream's module under its old name (it is [`lifecycle`]; "event" is the on-sale's id).
#[doc(hidden)]
pub use room::lifecycle as events;
pub use room::{lifecycle, metrics};

pub use error::{BuildError, StoreError};
/// The old name of [`BuildError`] (the verify crate has its own `ConfigError`).
#[deprecated(note = "renamed `BuildError`")]
pub type ConfigError = BuildError;
pub use http::body::RoomBody;
pub use http::endpoints::RoomEndpoints;
pub use http::future::ResponseFuture;
pub use http::gate::{SESSION_VALUE_HEADER, TOKEN_HEADER};
pub use http::hooks::{GuardFuture, JoinGuard};
pub use http::layer::{DEFAULT_METRICS_PATH, WaitingRoomLayer, WaitingRoomLayerBuilder};
pub use http::page::{
    DEFAULT_CSP, DEFAULT_TEMPLATE, PLACEHOLDERS, PageContext, PageTemplate, escape_html, eta_words,
};
pub use http::page_text::{PageText, grouped_digits};
pub use http::respond::STATE_HEADER;
pub use http::service::WaitingRoomService;
pub use room::builder::{
    DEFAULT_ADMIT_CHUNK, DEFAULT_RETURN_WINDOW, Fairness, MIN_ADMIT_CHUNK, MIN_COOKIE_SECRET_BYTES,
    MIN_DEFAULT_GRACE, RoomBuilder, RoomConfig, StoreOutage,
};
pub use room::cookie::{SessionCookie, valid_session_id};
pub use room::estimate::{Eta, EtaBasis, reach as estimate_reach};
pub use room::key_files::{
    COOKIE_SECRET_FILE, SIGNING_KEY_FILE, load_or_create_cookie_secret, load_or_create_signing_key,
};
pub use room::lifecycle::{RoomEvent, RoomEventKind};
pub use room::metrics::METRICS_CONTENT_TYPE;
pub use room::{Door, RoomStats, Status, Stopped, ViewState, WaitingRoom};
/// The old name of [`RoomStats`] (it read too much like [`Status`]).
#[deprecated(note = "renamed `RoomStats`")]
pub type Stats = RoomStats;
pub use store::{
    AuditEntry, Inventory, MemoryStore, Placement, SessionDetail, SessionState, Settings, Snapshot,
    Store,
};
#[cfg(feature = "redis")]
pub use store::{RedisStore, RedisStoreBuilder};
pub use waitroom_verify::{
    Claims, Clock, CookieNames, FINISH_HEADER, Fingerprint, KeySet, ManualClock, Refusal,
    SESSION_HEADER, SharedClock, SigningKey, SystemClock, Verifier, VerifyingKey, fingerprint,
};
