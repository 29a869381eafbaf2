//! Errors: a room that cannot be built, a store that cannot answer.

use thiserror::Error;

/// Why a room (or one of its parts) could not be built. The message says what to change.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// A setting is out of range or inconsistent.
    #[error("invalid setting `{setting}`: {reason}")]
    Invalid {
        /// The setting's builder name.
        setting: &'static str,
        /// What is wrong and what would be right.
        reason: String,
    },
    /// The store could not be reached or initialised.
    #[error("the store could not be initialised: {0}")]
    Store(String),
}

impl ConfigError {
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
