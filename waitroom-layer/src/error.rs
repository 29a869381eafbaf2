//! Errors: a room that cannot be built, a store that cannot answer.

use thiserror::Error;

/// Why a room (or one of its parts) could not be built. The message says what to change.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
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
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// The store is unreachable or answered with an error.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The store answered with something the room cannot read.
    #[error("store data corrupt: {0}")]
    Corrupt(String),
}
