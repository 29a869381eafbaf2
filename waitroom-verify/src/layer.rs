//! [`VerifyLayer`]: wraps the order service's routes so that only admitted sessions reach them.

use std::fmt;
use std::sync::Arc;

use tower::Layer;

use crate::admission::{FinishSink, Finisher, HeaderSink};
use crate::error::ConfigError;
use crate::service::VerifyService;
use crate::session::CookieNames;
use crate::verifier::Verifier;

/// The default join URL refused browsers are sent to.
pub const DEFAULT_JOIN_URL: &str = "/waitroom/join";

/// Everything a [`VerifyService`] needs, built once and shared by every route the layer wraps.
#[derive(Clone)]
pub(crate) struct Shared {
    /// The verifier and the finish sink (the admissions the layer makes share it).
    pub(crate) finisher: Arc<Finisher>,
    pub(crate) join_url: String,
    pub(crate) cookie_names: CookieNames,
    /// Refuses cross-origin unsafe-method requests before the token is looked at, when set.
    pub(crate) origin_check: Option<crate::OriginCheck>,
}

/// Checks every request it wraps: a valid token bound to the request's session puts an
/// [`Admission`](crate::Admission) in the request extensions and lets the request through; anything else is
/// answered with a redirect to the join URL (browsers) or a 401 problem (API clients). See
/// [`VerifyService`] for the details.
///
/// The verifier (keys, cache, deny list) is shared: every route and every clone of this layer use the same one.
#[derive(Clone)]
pub struct VerifyLayer {
    shared: Arc<Shared>,
}

impl fmt::Debug for VerifyLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerifyLayer")
            .field("verifier", &self.shared.finisher.verifier)
            .field("join_url", &self.shared.join_url)
            .field("sink", &self.shared.finisher.sink)
            .field("cookie_names", &self.shared.cookie_names)
            .field("origin_check", &self.shared.origin_check)
            .finish()
    }
}

fn valid_join_url(url: &str) -> bool {
    let shape = (url.starts_with('/') && !url.starts_with("//"))
        || url.starts_with("https://")
        || url.starts_with("http://");
    shape && url.len() <= 1024 && url.bytes().all(|b| b.is_ascii_graphic())
}

impl VerifyLayer {
    /// A layer with the defaults: join URL [`DEFAULT_JOIN_URL`], [`HeaderSink`], default [`CookieNames`].
    #[must_use]
    pub fn new(verifier: Verifier) -> Self {
        VerifyLayer {
            shared: Arc::new(Shared {
                finisher: Arc::new(Finisher {
                    verifier,
                    sink: Arc::new(HeaderSink),
                }),
                join_url: DEFAULT_JOIN_URL.to_owned(),
                cookie_names: CookieNames::default(),
                origin_check: None,
            }),
        }
    }

    fn edit(mut self, f: impl FnOnce(&mut Shared)) -> Self {
        f(Arc::make_mut(&mut self.shared));
        self
    }

    /// Where refused browsers are sent (a path such as `/waitroom/join`, or an `http(s)://` URL).
    ///
    /// # Errors
    /// [`ConfigError::JoinUrl`] for anything else (protocol-relative `//host`, spaces, control characters).
    pub fn try_join_url(self, url: impl Into<String>) -> Result<Self, ConfigError> {
        let url = url.into();
        if !valid_join_url(&url) {
            return Err(ConfigError::JoinUrl(url));
        }
        Ok(self.edit(|s| s.join_url = url))
    }

    /// [`try_join_url`](Self::try_join_url) for URLs known at compile time.
    ///
    /// # Panics
    /// When the URL is not valid (see [`try_join_url`](Self::try_join_url)).
    #[must_use]
    #[track_caller]
    pub fn join_url(self, url: impl Into<String>) -> Self {
        match self.try_join_url(url) {
            Ok(layer) => layer,
            Err(e) => panic!("{e}"),
        }
    }

    /// Where finishes go (default [`HeaderSink`]).
    #[must_use]
    pub fn finish_sink(self, sink: impl FinishSink) -> Self {
        self.shared_finish_sink(Arc::new(sink))
    }

    /// [`finish_sink`](Self::finish_sink) with a sink already shared.
    #[must_use]
    pub fn shared_finish_sink(self, sink: Arc<dyn FinishSink>) -> Self {
        self.edit(|s| {
            s.finisher = Arc::new(Finisher {
                verifier: s.finisher.verifier.clone(),
                sink,
            });
        })
    }

    /// The cookie names (default `waitroom_session` / `waitroom_token`); build them with [`CookieNames::new`] to
    /// have them checked.
    #[must_use]
    pub fn cookie_names(self, names: CookieNames) -> Self {
        self.edit(|s| s.cookie_names = names)
    }

    /// Refuses unsafe-method requests (`POST`, `DELETE`...) from another origin with a 403 whose `code` is
    /// `cross_origin`, before the token is looked at: for an order service browsers reach directly, not through
    /// the room layer (which does this by default). Off by default here, since an order service behind the room
    /// layer or reached only by servers needs no second check. See [`crate::origin`] for the rule and why
    /// `SameSite=Lax` is not enough.
    #[must_use]
    pub fn origin_check(self, check: crate::OriginCheck) -> Self {
        self.edit(|s| s.origin_check = Some(check))
    }

    /// The verifier (to deny sessions or swap keys from elsewhere).
    #[must_use]
    pub fn verifier(&self) -> &Verifier {
        &self.shared.finisher.verifier
    }

    /// The join URL in use.
    #[must_use]
    pub fn join_url_str(&self) -> &str {
        &self.shared.join_url
    }
}

impl<S> Layer<S> for VerifyLayer {
    type Service = VerifyService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        VerifyService::new(inner, Arc::clone(&self.shared))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::SigningKey;

    fn verifier() -> Verifier {
        let key = SigningKey::generate_ed25519("k").unwrap();
        Verifier::builder()
            .keys(&key)
            .issuer("room")
            .audience("sale")
            .build()
            .unwrap()
    }

    #[test]
    fn join_url_is_checked() {
        let layer = VerifyLayer::new(verifier());
        assert_eq!(layer.join_url_str(), DEFAULT_JOIN_URL);
        for ok in ["/line", "/join?event=1", "https://queue.example.com/join"] {
            assert!(layer.clone().try_join_url(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "join",
            "//evil.example",
            "/a b",
            "/a\r\nSet-Cookie: x",
            "javascript:alert(1)",
        ] {
            assert!(
                matches!(
                    layer.clone().try_join_url(bad),
                    Err(ConfigError::JoinUrl(_))
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    #[should_panic(expected = "join_url")]
    fn join_url_panics_on_bad_input() {
        let _ = VerifyLayer::new(verifier()).join_url("//evil");
    }

    #[test]
    fn layer_shares_one_verifier() {
        let layer = VerifyLayer::new(verifier())
            .join_url("/j")
            .cookie_names(CookieNames::new("s", "t").unwrap());
        let a = layer.layer(());
        let b = layer.layer(());
        assert!(Arc::ptr_eq(&a.shared, &b.shared));
        assert!(format!("{layer:?}").contains("/j"));
    }
}
