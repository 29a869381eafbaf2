//! waitroom-verify: offline checks of waitroom admission tokens, for the order service.
//!
//! The room admits a session by signing an admission token ([`Claims`], signed with a [`SigningKey`]). The order
//! service checks it without calling the room: [`Verifier`] checks the signature against a [`KeySet`] (EdDSA by
//! default, ES256 or HS256; keys pinned to one algorithm and chosen by `kid`), the issuer, the audience, the time
//! (from a [`Clock`]) and the session binding; [`VerifyLayer`] does it for every request and gives handlers an
//! [`Admission`]. When the order goes through, `admission.finish_with_seats(n)` ends the session: the verifier
//! refuses its token from then on, and a [`FinishSink`] tells the room (by default through the
//! [`FINISH_HEADER`] response header, `Waitroom-Command: finish; seats=<n>`).
//!
//! Refusals are responses, not errors: browsers (an `Accept` naming `text/html`) are redirected (`303`) to the
//! room's join URL; everyone else, `Accept: */*` (curl) included, gets `401` with an `application/problem+json` body
//! whose `reason` is a [`Refusal::code`]. The room answers by the same rule ([`negotiate`]).
//!
//! # Example
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use axum::{Extension, Router, routing::post};
//! use tower::ServiceExt;
//! use waitroom_verify::{Admission, Claims, Clock, FINISH_HEADER, ManualClock, SigningKey, Verifier, VerifyLayer};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // The room's key; the order service only needs its public half (or the JWKS document).
//! let key = SigningKey::generate_ed25519("2025-01")?;
//! let clock = ManualClock::starting_now();
//! let verifier = Verifier::builder()
//!     .keys(&key)
//!     .issuer("room")
//!     .audience("concert-2025")
//!     .clock(Arc::new(clock.clone()))
//!     .build()?;
//!
//! async fn checkout(Extension(admission): Extension<Admission>) -> String {
//!     admission.finish_with_seats(2); // the order bought two seats
//!     format!("thanks, {}", admission.session_id())
//! }
//! let app = Router::new()
//!     .route("/checkout", post(checkout))
//!     .layer(VerifyLayer::new(verifier).join_url("/waitroom/join"));
//!
//! // What the room does when it admits session `s`:
//! let s = "session-0123456789ab";
//! let token = key.sign(&Claims::new("room", "concert-2025", s, clock.now_secs(), Duration::from_secs(600)))?;
//!
//! let request = || {
//!     http::Request::post("/checkout")
//!         .header("cookie", format!("waitroom_session={s}; waitroom_token={token}"))
//!         .body(axum::body::Body::empty())
//!         .unwrap()
//! };
//! let res = app.clone().oneshot(request()).await?;
//! assert_eq!(res.status(), 200);
//! assert_eq!(res.headers()[FINISH_HEADER], "finish; seats=2");
//! // Finished: the same token no longer gets in.
//! assert_eq!(app.oneshot(request()).await?.status(), 401);
//! # Ok(())
//! # }
//! ```
//!
//! # Parts
//! - [`claims`]: the token's claims, one definition for signer and verifier.
//! - [`keys`]: [`SigningKey`], [`VerifyingKey`], [`KeySet`] (PEM, JWK, JWKS).
//! - [`verifier`]: [`Verifier`] and its builder; the order of checks; the verified-token cache; the deny list.
//! - [`session`]: cookie names, the session-cookie contract, reading token and session from a request.
//! - [`verified`]: [`Verified`], a token the room layer already checked, so the layer does not check it twice.
//! - [`admission`]: [`Admission`], finishing, [`FinishSink`], [`HeaderSink`], the finish header.
//! - [`layer`], [`service`], [`future`]: the Tower middleware; [`response`]: the refusal responses.
//! - [`negotiate`]: the one `Accept` rule both layers follow (HTML when `text/html` is named, JSON otherwise, `*/*`
//!   included).
//! - [`error`]: [`Refusal`] and the configuration, key and signing errors.
//! - [`clock`]: where time comes from.
//!
//! # Features
//! - `redis`: the `redis` module. `redis::RedisFinishSink` finishes sessions in the room's Redis store (the place
//!   frees at once; the room refuses the token from its next tick), and `redis::RedisFinishListener` lets every
//!   verifier replica refuse a session finished on another one. Needs a Tokio runtime.
//! - `jwks`: the `jwks` module. `jwks::JwksSource` fetches the room's keys from its JWKS URL at start (retrying
//!   until the room answers), builds the [`Verifier`] with them and keeps them fresh: on a period, and when a
//!   token names a `kid` the verifier lacks (rate limited). The refresh task stops when its `jwks::JwksHandle`
//!   is dropped. Needs a Tokio runtime.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod admission;
pub mod claims;
pub mod clock;
pub mod error;
pub mod future;
#[cfg(feature = "jwks")]
pub mod jwks;
pub mod keys;
pub mod layer;
#[doc(hidden)]
pub mod log_gate;
pub mod negotiate;
pub mod origin;
#[doc(hidden)]
pub mod percent;
#[cfg(feature = "redis")]
pub mod redis;
pub mod response;
pub mod service;
pub mod session;
pub mod verified;
pub mod verifier;

pub use admission::{
    Admission, FINISH_HEADER, Finish, FinishFuture, FinishSink, HeaderSink, finish_command,
    parse_finish_command,
};
pub use claims::Claims;
pub use clock::{Clock, ManualClock, SharedClock, SystemClock};
pub use error::{ConfigError, KeyError, Refusal, SignError};
pub use future::ResponseFuture;
pub use keys::{Algorithm, KeySet, SigningKey, VerifyingKey};
pub use layer::{DEFAULT_JOIN_URL, VerifyLayer};
pub use origin::OriginCheck;
pub use service::VerifyService;
pub use session::{
    CookieNames, Fingerprint, SESSION_HEADER, fingerprint, session_id_from_cookie_value,
};
pub use verified::Verified;
pub use verifier::{Accepted, Verifier, VerifierBuilder};
