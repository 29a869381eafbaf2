//! The room's public keys from its JWKS URL, kept fresh (feature `jwks`).
//!
//! An order service in another process than the room reads the room's keys from the room's JWKS document (the
//! room layer serves it at `/waitroom/jwks.json`). [`JwksSource`] fetches it at start, retrying with backoff
//! until the room answers or a deadline passes, builds the [`Verifier`], and then keeps the keys fresh from a
//! background task:
//! - every [`refresh_every`](JwksSource::refresh_every) (default 5 min), and
//! - when the verifier meets a token whose `kid` is not in its key set (the room rotated its key), at most once
//!   per [`min_refetch_interval`](JwksSource::min_refetch_interval) (default 10 s), so tokens naming made-up
//!   `kid`s cannot make it hammer the room.
//!
//! A fetch that fails or brings an unusable document keeps the current keys (and is logged); an unchanged
//! document changes nothing (the verified-token cache stays warm). The task belongs to the [`JwksHandle`]: it stops
//! when the handle is dropped, so keep the handle as long as the service runs.
//!
//! The verifier's cost: a refusal for an unknown `kid` wakes the task (one atomic operation); accepted tokens
//! cost nothing more.
//!
//! The requests go through `reqwest` with the features this build enables: plain HTTP out of the box. For an
//! `https` URL enable a TLS feature of `reqwest` in your own manifest (e.g. `reqwest = { version = "0.13",
//! features = ["rustls"] }`: features unify) or hand over a client with [`JwksSource::client`].
//!
//! # Example
//! ```no_run
//! use std::time::Duration;
//! use waitroom_verify::jwks::JwksSource;
//! use waitroom_verify::{Verifier, VerifyLayer};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let keys = JwksSource::new("http://gateway.internal:3000/waitroom/jwks.json")
//!     .start_timeout(Duration::from_secs(120)) // wait this long for the room at start
//!     .refresh_every(Duration::from_secs(300))
//!     .start(Verifier::builder().issuer("waitroom").audience("concert-2025"))
//!     .await?;
//! let layer = VerifyLayer::new(keys.verifier().clone()).join_url("/waitroom/join");
//! // ... serve with `layer`, holding `keys` until the server stops: dropping it stops the refreshes.
//! # drop(layer);
//! # Ok(())
//! # }
//! ```

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until};

use crate::error::{ConfigError, KeyError};
use crate::keys::{KeySet, MAX_JWKS_BYTES};
use crate::verifier::{Verifier, VerifierBuilder};

/// Default period between two fetches of the document.
pub const DEFAULT_REFRESH_EVERY: Duration = Duration::from_secs(300);
/// Default least time between two fetches, whatever asks for them (an unknown `kid`, a failed refresh).
pub const DEFAULT_MIN_REFETCH_INTERVAL: Duration = Duration::from_secs(10);
/// Default time [`JwksSource::start`] waits for a usable document.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(30);
/// Default limit on one request.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Where the keys come from and how often to look: see the [module docs](self).
#[must_use]
#[derive(Clone)]
pub struct JwksSource {
    url: String,
    refresh_every: Duration,
    min_refetch_interval: Duration,
    start_timeout: Duration,
    first_retry: Duration,
    max_retry: Duration,
    request_timeout: Duration,
    client: Option<reqwest::Client>,
}

impl fmt::Debug for JwksSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JwksSource")
            .field("url", &redacted(&self.url))
            .field("refresh_every", &self.refresh_every)
            .field("min_refetch_interval", &self.min_refetch_interval)
            .field("start_timeout", &self.start_timeout)
            .finish_non_exhaustive()
    }
}

impl JwksSource {
    /// The JWKS document at `url` (`http://` or, with a TLS-enabled client, `https://`), with the defaults.
    pub fn new(url: impl Into<String>) -> Self {
        JwksSource {
            url: url.into(),
            refresh_every: DEFAULT_REFRESH_EVERY,
            min_refetch_interval: DEFAULT_MIN_REFETCH_INTERVAL,
            start_timeout: DEFAULT_START_TIMEOUT,
            first_retry: Duration::from_millis(250),
            max_retry: Duration::from_secs(5),
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            client: None,
        }
    }

    /// The period between two fetches (default 5 min; must be above zero).
    pub fn refresh_every(mut self, period: Duration) -> Self {
        self.refresh_every = period;
        self
    }

    /// The least time between two fetches (default 10 s): an unknown `kid` seen sooner after the last fetch waits
    /// for it, and a failed refresh is tried again after it.
    pub fn min_refetch_interval(mut self, interval: Duration) -> Self {
        self.min_refetch_interval = interval;
        self
    }

    /// How long [`start`](Self::start) tries before it gives up (default 30 s).
    pub fn start_timeout(mut self, timeout: Duration) -> Self {
        self.start_timeout = timeout;
        self
    }

    /// The waits between failed attempts at start: `first`, doubling up to `max` (default 250 ms to 5 s).
    pub fn start_retry(mut self, first: Duration, max: Duration) -> Self {
        self.first_retry = first;
        self.max_retry = max.max(first);
        self
    }

    /// The limit on one request (default 5 s).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// The HTTP client to fetch with (default: a new `reqwest::Client`), e.g. one with TLS or a proxy.
    pub fn client(mut self, client: reqwest::Client) -> Self {
        self.client = Some(client);
        self
    }

    /// Fetches the keys (retrying until [`start_timeout`](Self::start_timeout)), builds the verifier from
    /// `builder` with them, and starts the refresh task. Call it on a Tokio runtime.
    ///
    /// # Errors
    /// [`JwksError::StartTimeout`] (with the last failure as its source) when no usable document came in time;
    /// [`JwksError::Config`] when `builder` is refused; [`JwksError::ZeroRefresh`]; a [`JwksError::Fetch`] that
    /// retrying cannot mend (a URL reqwest cannot use).
    pub async fn start(self, builder: VerifierBuilder) -> Result<JwksHandle, JwksError> {
        let first = self.fetch_at_start().await?;
        let verifier = builder.keys(first.keys).build()?;
        Ok(self.spawn(verifier, first.body, first.at))
    }

    /// As [`start`](Self::start) for a verifier already built (with keys of its own, replaced by the fetched ones).
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub async fn start_with(self, verifier: Verifier) -> Result<JwksHandle, JwksError> {
        let first = self.fetch_at_start().await?;
        verifier.replace_keys(first.keys)?;
        Ok(self.spawn(verifier, first.body, first.at))
    }

    async fn fetch_at_start(&self) -> Result<Fetched, JwksError> {
        if self.refresh_every.is_zero() {
            return Err(JwksError::ZeroRefresh);
        }
        let client = self.client.clone().unwrap_or_default();
        let deadline = Instant::now() + self.start_timeout;
        let mut wait = self.first_retry;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let e = match self.fetch(&client, self.request_timeout.min(left)).await {
                Ok(fetched) => return Ok(fetched),
                Err(e) if !e.is_worth_retrying() => return Err(e),
                Err(e) => e,
            };
            if Instant::now() + wait >= deadline {
                return Err(JwksError::StartTimeout {
                    url: redacted(&self.url),
                    waited: self.start_timeout,
                    last: Box::new(e),
                });
            }
            tracing::info!(error = %Chain(&e), retry_in = ?wait, "waiting for the room's keys");
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(self.max_retry);
        }
    }

    /// One fetch: the document, parsed, and its bytes (to tell an unchanged document).
    async fn fetch(
        &self,
        client: &reqwest::Client,
        timeout: Duration,
    ) -> Result<Fetched, JwksError> {
        let url = || redacted(&self.url);
        let fetch_error = |source: reqwest::Error| JwksError::Fetch {
            url: url(),
            source: source.without_url(),
        };
        let at = Instant::now();
        let mut res = client
            .get(&self.url)
            .header(http::header::ACCEPT, "application/json")
            .timeout(timeout)
            .send()
            .await
            .map_err(fetch_error)?;
        let status = res.status();
        if !status.is_success() {
            return Err(JwksError::Status { url: url(), status });
        }
        let too_large = || JwksError::TooLarge { url: url() };
        if res
            .content_length()
            .is_some_and(|n| n > MAX_JWKS_BYTES as u64)
        {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = res.chunk().await.map_err(fetch_error)? {
            if body.len() + chunk.len() > MAX_JWKS_BYTES {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        let doc: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|source| JwksError::Json { url: url(), source })?;
        let keys =
            KeySet::from_jwks(&doc).map_err(|source| JwksError::Keys { url: url(), source })?;
        if keys.is_empty() {
            return Err(ConfigError::NoKeys.into());
        }
        Ok(Fetched { keys, body, at })
    }

    fn spawn(self, verifier: Verifier, body: Vec<u8>, at: Instant) -> JwksHandle {
        let task = tokio::spawn(self.refresh(verifier.clone(), body, at));
        JwksHandle { verifier, task }
    }

    /// The refresh task: fetches on the period and on an unknown `kid`, never two fetches closer than the
    /// minimum interval. Runs until its handle aborts it.
    async fn refresh(self, verifier: Verifier, mut body: Vec<u8>, mut last: Instant) {
        let client = self.client.clone().unwrap_or_default();
        let mut next = last + self.refresh_every;
        loop {
            tokio::select! {
                () = sleep_until(next) => {}
                () = verifier.unknown_kid().notified() => {
                    sleep_until(next.min(last + self.min_refetch_interval)).await;
                }
            }
            let fetched = self.fetch(&client, self.request_timeout).await;
            last = Instant::now();
            next = last + self.refresh_every;
            match fetched {
                Ok(f) if f.body == body => {}
                Ok(f) => {
                    let kids = f.keys.kids().map(str::to_owned).collect::<Vec<_>>();
                    match verifier.replace_keys(f.keys) {
                        Ok(()) => {
                            tracing::info!(?kids, url = %redacted(&self.url), "the room's keys changed");
                            body = f.body;
                        }
                        Err(e) => tracing::warn!(error = %e, "refused the room's new keys"),
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %Chain(&e), "could not refresh the room's keys; keeping the current ones");
                    next = next.min(last + self.min_refetch_interval.max(self.first_retry));
                }
            }
        }
    }
}

struct Fetched {
    keys: KeySet,
    body: Vec<u8>,
    at: Instant,
}

/// The verifier a [`JwksSource`] keeps fresh, and the task doing it: dropping the handle stops the task (the
/// verifier and its clones keep the keys they have).
#[must_use = "the keys stop refreshing when the handle is dropped"]
#[derive(Debug)]
pub struct JwksHandle {
    verifier: Verifier,
    task: JoinHandle<()>,
}

impl JwksHandle {
    /// The verifier (clone it for the layer: clones share the keys the task replaces).
    pub fn verifier(&self) -> &Verifier {
        &self.verifier
    }
}

impl Drop for JwksHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Why the keys could not be had.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JwksError {
    /// The refresh period is zero.
    #[error("refresh_every must be above zero")]
    ZeroRefresh,
    /// The request failed (connection, timeout, or a URL reqwest cannot use).
    #[error("could not fetch the JWKS from {url}")]
    Fetch {
        /// The URL, without credentials or query.
        url: String,
        /// What reqwest said.
        #[source]
        source: reqwest::Error,
    },
    /// The server answered with an error status.
    #[error("the JWKS URL {url} answered {status}")]
    Status {
        /// The URL, without credentials or query.
        url: String,
        /// The status.
        status: http::StatusCode,
    },
    /// The document is over [`MAX_JWKS_BYTES`].
    #[error("the JWKS from {url} is over {MAX_JWKS_BYTES} bytes")]
    TooLarge {
        /// The URL, without credentials or query.
        url: String,
    },
    /// The document is not JSON.
    #[error("the JWKS from {url} is not JSON")]
    Json {
        /// The URL, without credentials or query.
        url: String,
        /// Where the JSON broke.
        #[source]
        source: serde_json::Error,
    },
    /// The document is JSON but not a usable key set.
    #[error("the JWKS from {url} is not a usable key set")]
    Keys {
        /// The URL, without credentials or query.
        url: String,
        /// Which key, and why.
        #[source]
        source: KeyError,
    },
    /// The verifier refused its configuration or the keys (an empty key set).
    #[error("the verifier cannot be built with these keys")]
    Config(#[from] ConfigError),
    /// No usable document within the start timeout.
    #[error("no keys from {url} within {waited:?}")]
    StartTimeout {
        /// The URL, without credentials or query.
        url: String,
        /// The start timeout.
        waited: Duration,
        /// The last attempt's failure.
        #[source]
        last: Box<JwksError>,
    },
}

impl JwksError {
    /// Whether trying again can help: not for a request reqwest cannot build (a bad URL, or `https` without TLS)
    /// nor for a configuration the verifier refuses.
    fn is_worth_retrying(&self) -> bool {
        match self {
            JwksError::Fetch { source, .. } => !source.is_builder(),
            JwksError::ZeroRefresh => false,
            JwksError::Config(e) => *e == ConfigError::NoKeys,
            _ => true,
        }
    }
}

/// An error and its sources, `a: b: c`, for the logs.
struct Chain<'a>(&'a (dyn StdError + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(s) = source {
            write!(f, ": {s}")?;
            source = s.source();
        }
        Ok(())
    }
}

/// `url` without user info, query or fragment, for errors and logs (the URL may carry a credential).
fn redacted(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            u.to_string()
        }
        Err(_) => "<not a URL>".to_owned(),
    }
}
