//! Errors: a room that cannot be built, a store that cannot answer.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

use thiserror::Error;

/// Why a room (or one of its parts) could not be built. The message says what to change.
#[derive(Debug, Error, Clone)]
pub enum BuildError {
    /// A setting is out of range or inconsistent.
    #[error("invalid setting `{setting}`: {reason}")]
    Invalid {
        /// The setting's builder name.
        setting: &'static str,
        /// What is wrong and what would be right.
        reason: String,
    },
    /// A key setting could not be used: the signing key could not be made, or a key to publish clashes with the
    /// key set. The source is the key error.
    #[error("invalid setting `{setting}`: {source}")]
    Key {
        /// The setting's builder name.
        setting: &'static str,
        /// What is wrong with the key.
        #[source]
        source: waitroom_verify::KeyError,
    },
    /// The room's own token verifier refused its keys or settings (`signing_key`, `issuer`, `idle_timeout`). The
    /// source is the verifier's configuration error.
    #[error("invalid setting `{setting}`: {source}")]
    Verifier {
        /// The setting's builder name.
        setting: &'static str,
        /// What the verifier refused.
        #[source]
        source: waitroom_verify::ConfigError,
    },
    /// The store could not be reached or initialised at build. The source is the store's error.
    #[error("the store could not be initialised: {0}")]
    Store(#[source] StoreError),
}

impl BuildError {
    pub(crate) fn invalid(setting: &'static str, reason: impl Into<String>) -> Self {
        Self::Invalid {
            setting,
            reason: reason.into(),
        }
    }
}

/// A store operation failed. The room answers from its last snapshot and retries; it never turns this into a 5xx
/// storm.
///
/// The cause, when there is one (a Redis error, a timeout), is kept: [`Error::source`] returns it, and the message
/// repeats it after the context, so a log line with the error alone still says what happened. Neither carries
/// secrets: a Redis URL (with its password) never appears in either.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum StoreError {
    /// The store is unreachable, did not answer within its timeout, or answered with an error. The room treats
    /// this as an outage (see `StoreOutage`).
    Unavailable {
        /// What the store was doing, or what it said.
        context: String,
        /// The error underneath (for `RedisStore`, the `redis::RedisError`), if any.
        source: Option<Arc<dyn Error + Send + Sync>>,
    },
    /// The store answered with something the room cannot read.
    Corrupt(String),
    /// The store does not know the on-sale: it was never initialised, or the store lost it (a Redis restarted
    /// without persistence, a fresh replica). A room that meets this restores the on-sale from its own view
    /// ([`Store::restore`](crate::store::Store::restore)) and takes people back from their signed cookies
    /// ([`Store::reclaim`](crate::store::Store::reclaim)). Not an outage: the store answers.
    Forgotten(String),
    /// The store knows the on-sale but its line numbers are behind what the room has seen it give out (a
    /// failover to a replica that lagged lost the latest writes): it gave out numbers only up to `store_last`.
    /// The room gives it the floor back ([`Store::restore`](crate::store::Store::restore) with
    /// [`Restore::behind`](crate::store::Restore::behind)) and asks again. Not an outage: the store answers.
    Behind {
        /// The store's highest number given out, as it answered.
        store_last: u64,
    },
    /// The store was set up or asked wrongly: a brace in a key prefix or an event id, a draw size out of range, a
    /// zero timeout, a malformed URL. Retrying does not help; the configuration must change. Not an outage.
    Config {
        /// What is wrong and what would be right.
        reason: String,
        /// The error underneath (a URL that does not parse, say), if any.
        source: Option<Arc<dyn Error + Send + Sync>>,
    },
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (what, text, source) = match self {
            Self::Unavailable { context, source } => ("store unavailable", context, source),
            Self::Corrupt(what) => return write!(f, "store data corrupt: {what}"),
            Self::Forgotten(what) => return write!(f, "store forgot the on-sale: {what}"),
            Self::Behind { store_last } => {
                return write!(
                    f,
                    "store behind the room's view: it gave out numbers up to {store_last} only (writes lost in a failover?)"
                );
            }
            Self::Config { reason, source } => ("store misconfigured", reason, source),
        };
        write!(f, "{what}: {text}")?;
        match source {
            Some(e) => write!(f, ": {e}"),
            None => Ok(()),
        }
    }
}

impl Error for StoreError {
    // The error itself, not the `Arc` holding it, so callers can downcast it.
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Unavailable { source, .. } | Self::Config { source, .. } => {
                source.as_deref().map(|e| e as &(dyn Error + 'static))
            }
            Self::Corrupt(_) | Self::Forgotten(_) | Self::Behind { .. } => None,
        }
    }
}

impl StoreError {
    /// [`StoreError::Unavailable`] without an underlying error.
    pub fn unavailable(context: impl Into<String>) -> Self {
        Self::Unavailable {
            context: context.into(),
            source: None,
        }
    }

    /// [`StoreError::Unavailable`] caused by `source`.
    pub fn unavailable_because(
        context: impl Into<String>,
        source: impl Error + Send + Sync + 'static,
    ) -> Self {
        Self::Unavailable {
            context: context.into(),
            source: Some(Arc::new(source)),
        }
    }

    /// [`StoreError::Config`] without an underlying error.
    pub fn config(reason: impl Into<String>) -> Self {
        Self::Config {
            reason: reason.into(),
            source: None,
        }
    }

    /// [`StoreError::Config`] caused by `source`.
    pub fn config_because(
        reason: impl Into<String>,
        source: impl Error + Send + Sync + 'static,
    ) -> Self {
        Self::Config {
            reason: reason.into(),
            source: Some(Arc::new(source)),
        }
    }

    /// Whether the store does not know the on-sale ([`StoreError::Forgotten`]).
    pub fn is_forgotten(&self) -> bool {
        matches!(self, Self::Forgotten(_))
    }

    /// Whether this is an outage ([`StoreError::Unavailable`]): worth retrying, and what a fail-open room opens on.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Unavailable { .. })
    }
}
