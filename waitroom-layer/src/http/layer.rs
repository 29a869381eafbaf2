//! [`WaitingRoomLayer`]: the room as Tower middleware, and its builder.

use std::sync::Arc;

use http::request::Parts;
use tower::Layer;

use crate::error::BuildError;
use crate::http::admin::{AdminTokens, BearerGuard};
use crate::http::endpoints::RoomEndpoints;
use crate::http::hooks::{AccountKeyFn, BypassFn, JoinGuard};
use crate::http::page::PageTemplate;
use crate::http::page_text::{PageText, PageTexts};
use crate::http::paths::Paths;
use crate::http::service::WaitingRoomService;
use crate::room::WaitingRoom;
use waitroom_verify::OriginCheck;

/// What every service made by one layer shares (one `Arc`, built once by [`WaitingRoomLayerBuilder::build`]).
pub(crate) struct Shared {
    pub(crate) room: WaitingRoom,
    pub(crate) paths: Paths,
    pub(crate) page: PageTemplate,
    /// The page's words, one set per language.
    pub(crate) texts: PageTexts,
    pub(crate) bypass: Option<BypassFn>,
    pub(crate) account_key: Option<AccountKeyFn>,
    pub(crate) join_guard: Option<Arc<dyn JoinGuard>>,
    /// The admin API and its tokens, when on.
    pub(crate) admin: Option<AdminTokens>,
    /// The bearer secret the metrics endpoint asks for, when set.
    pub(crate) metrics_auth: Option<BearerGuard>,
    /// Refuses cross-origin unsafe-method requests to protected paths and the room's endpoints; `None` when off.
    pub(crate) origin_check: Option<OriginCheck>,
}

impl Shared {
    /// The 403 for an unsafe-method request from another origin, when the origin check is on and refuses it.
    pub(crate) fn cross_origin(&self, parts: &Parts) -> Option<crate::http::respond::Reply> {
        let check = self.origin_check.as_ref()?;
        if check.allows(&parts.method, &parts.uri, &parts.headers) {
            return None;
        }
        Some(crate::http::respond::problem_coded(
            http::StatusCode::FORBIDDEN,
            crate::room::ViewState::NotInLine.as_str(),
            waitroom_verify::origin::CROSS_ORIGIN_CODE,
            "Cross-origin request refused",
            "This request changes something and did not come from this site's own pages.",
        ))
    }
}

/// Where metrics are served by default once they are on.
pub const DEFAULT_METRICS_PATH: &str = "/waitroom/metrics";

/// The waiting room as a Tower [`Layer`]: guards the protected paths, answers the room's endpoints, passes the
/// rest untouched. Cheap to clone; every service it makes shares one room and one configuration, so
/// `Router::layer` (which calls [`Layer::layer`] once per route) still gives one line.
///
/// - `.layer(room_layer)` on a whole axum app: requests under the base path (`/waitroom`) are answered by the room,
///   requests to protected paths need an admission, everything else passes untouched.
/// - `.route_layer(room_layer)` on a sub-router of protected routes: build it with no protected paths (then every
///   path it sees is protected) and mount [`WaitingRoomLayer::endpoints`] for the base path, because a route layer
///   only sees requests that matched one of the sub-router's routes.
/// - Around the whole router, before axum's routing (what the on-sale demo does): every request meets one room
///   service, the room's endpoints (the status poll) never reach the router, and no per-route copy of the room
///   service is made per request. axum serves a service whose body is its own, hence the `map_response`:
///
/// ```no_run
/// # async fn run(room: waitroom_layer::WaitingRoom, app: axum::Router) -> Result<(), Box<dyn std::error::Error>> {
/// use axum::body::Body;
/// use waitroom_layer::{RoomBody, WaitingRoomLayer};
/// let app = tower::ServiceBuilder::new()
///     .map_response(|res: http::Response<RoomBody<Body>>| res.map(Body::new))
///     .layer(WaitingRoomLayer::builder(room).protect_prefix("/seats").build()?)
///     .service(app);
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
/// axum::serve(listener, axum::ServiceExt::<axum::extract::Request>::into_make_service(app)).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct WaitingRoomLayer {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for WaitingRoomLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitingRoomLayer")
            .field("room", &self.shared.room)
            .field("paths", &self.shared.paths)
            .finish_non_exhaustive()
    }
}

impl WaitingRoomLayer {
    /// A layer with the defaults: base path `/waitroom`, every other path protected, the default page, no hooks.
    pub fn new(room: WaitingRoom) -> Self {
        Self::builder(room)
            .build()
            .expect("the default configuration is valid")
    }

    /// Starts configuring a layer over `room`.
    pub fn builder(room: WaitingRoom) -> WaitingRoomLayerBuilder {
        WaitingRoomLayerBuilder {
            room,
            base_path: "/waitroom".into(),
            prefixes: Vec::new(),
            patterns: Vec::new(),
            page: None,
            texts: PageTexts::default(),
            bypass: None,
            account_key: None,
            join_guard: None,
            metrics_path: None,
            admin: Vec::new(),
            metrics_auth: None,
            origin_check: Some(OriginCheck::same_origin()),
        }
    }

    /// The room behind this layer.
    pub fn room(&self) -> &WaitingRoom {
        &self.shared.room
    }

    /// The base path of the room's endpoints (default `/waitroom`).
    pub fn base_path(&self) -> &str {
        self.shared.paths.base()
    }

    /// A stand-alone service answering the room's endpoints (`{base}/status`, `{base}/jwks.json`,
    /// `{base}/join`, `{base}/holding.js`), for apps that put the layer on a sub-router with `route_layer`:
    ///
    /// ```no_run
    /// # async fn run(room: waitroom_layer::WaitingRoom) -> Result<(), Box<dyn std::error::Error>> {
    /// use axum::{Router, routing::get};
    /// use waitroom_layer::WaitingRoomLayer;
    /// // No protected paths: every route the route layer wraps is protected.
    /// let room_layer = WaitingRoomLayer::builder(room).build()?;
    /// let protected = Router::new().route("/seats", get(|| async { "seat map" }));
    /// let app: Router = Router::new()
    ///     .route("/", get(|| async { "the event page, never queued" }))
    ///     .merge(protected.route_layer(room_layer.clone()))
    ///     .route_service("/waitroom/{*rest}", room_layer.endpoints());
    /// # let _ = app; Ok(()) }
    /// ```
    ///
    /// It also answers `/status`, `/jwks.json`, `/join` and `/holding.js` when mounted with `nest_service` (which strips the
    /// prefix).
    pub fn endpoints(&self) -> RoomEndpoints {
        RoomEndpoints::new(self.shared.clone())
    }
}

impl<S> Layer<S> for WaitingRoomLayer {
    type Service = WaitingRoomService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        WaitingRoomService::new(inner, self.shared.clone())
    }
}

/// Configures a [`WaitingRoomLayer`]. Start from [`WaitingRoomLayer::builder`].
#[must_use = "a builder does nothing until `build` is called"]
pub struct WaitingRoomLayerBuilder {
    room: WaitingRoom,
    base_path: String,
    prefixes: Vec<String>,
    patterns: Vec<String>,
    page: Option<PageTemplate>,
    texts: PageTexts,
    bypass: Option<BypassFn>,
    account_key: Option<AccountKeyFn>,
    join_guard: Option<Arc<dyn JoinGuard>>,
    metrics_path: Option<String>,
    /// The admin tokens by name, already digested (the builder never holds a secret in the clear).
    admin: Vec<(String, Result<BearerGuard, BuildError>)>,
    /// The metrics secret, digested the same way.
    metrics_auth: Option<Result<BearerGuard, BuildError>>,
    origin_check: Option<OriginCheck>,
}

impl std::fmt::Debug for WaitingRoomLayerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitingRoomLayerBuilder")
            .field("base_path", &self.base_path)
            .field("prefixes", &self.prefixes)
            .field("patterns", &self.patterns)
            .field("metrics_path", &self.metrics_path)
            .field(
                "admin",
                &self
                    .admin
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>(),
            )
            .field("metrics_auth", &self.metrics_auth.is_some())
            .finish_non_exhaustive()
    }
}

impl WaitingRoomLayerBuilder {
    /// Serves the room's figures in the Prometheus (OpenMetrics) text format at [`DEFAULT_METRICS_PATH`]
    /// (`/waitroom/metrics`) with `true`; off by default. The endpoint asks for no credentials unless
    /// [`metrics_token`](Self::metrics_token) is set: then keep it off the public internet some other way (a path
    /// your edge does not route), or serve [`WaitingRoom::metrics_text`] yourself on an internal port. See the [`metrics`](crate::metrics) module for
    /// the figures.
    pub fn metrics(mut self, on: bool) -> Self {
        self.metrics_path = on.then(|| DEFAULT_METRICS_PATH.to_owned());
        self
    }

    /// Serves metrics at `path` (an absolute path, inside or outside the base path); turns metrics on.
    pub fn metrics_path(mut self, path: impl Into<String>) -> Self {
        self.metrics_path = Some(path.into());
        self
    }

    /// Turns the admin API on under `{base}/admin/`, guarded by `Authorization: Bearer <secret>` (at least 16
    /// bytes; use a random one). Off by default. The secret is kept only as its SHA-256 digest, compared in
    /// constant time, and never appears in `Debug` output or logs. See the [`admin`](crate::admin) module for
    /// the calls.
    ///
    /// The token is named `admin` in the audit log; for several operators, give each a token of their own with
    /// [`admin_token_named`](Self::admin_token_named).
    pub fn admin_token(self, secret: impl AsRef<[u8]>) -> Self {
        self.admin_token_named("admin", secret)
    }

    /// Adds an admin token named `name` (1 to 32 letters, digits, `-`, `_` or `@`; distinct): the admin API and
    /// the status page take any of the layer's tokens, and the audit log records the name of the one used. Turns
    /// the admin API on, like [`admin_token`](Self::admin_token).
    pub fn admin_token_named(mut self, name: impl Into<String>, secret: impl AsRef<[u8]>) -> Self {
        self.admin.push((
            name.into(),
            BearerGuard::new("admin_token", secret.as_ref()),
        ));
        self
    }

    /// Asks the metrics endpoint's callers for `Authorization: Bearer <secret>` (at least 16 bytes), compared in
    /// constant time like the admin token, and answers `401` without it; turns metrics on at the default path if
    /// no path was given. Prometheus sends it with `authorization: { credentials: <secret> }` in the scrape config.
    pub fn metrics_token(mut self, secret: impl AsRef<[u8]>) -> Self {
        self.metrics_auth = Some(BearerGuard::new("metrics_token", secret.as_ref()));
        if self.metrics_path.is_none() {
            self.metrics_path = Some(DEFAULT_METRICS_PATH.to_owned());
        }
        self
    }

    /// Where the room's endpoints live (default `/waitroom`).
    pub fn base_path(mut self, path: impl Into<String>) -> Self {
        self.base_path = path.into();
        self
    }

    /// Guards `prefix` and everything below it (`/checkout` guards `/checkout` and `/checkout/pay`, not
    /// `/checkouts`). With no prefix and no pattern, every path is guarded.
    pub fn protect_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefixes.push(prefix.into());
        self
    }

    /// Guards paths matching `pattern`: `*` is one segment, a final `**` any number of segments
    /// (`/events/*/seats/**`).
    pub fn protect_pattern(mut self, pattern: impl Into<String>) -> Self {
        self.patterns.push(pattern.into());
        self
    }

    /// Adds a language for the holding page's words (the default template's, and a custom template's
    /// placeholders): each request reads the set its `Accept-Language` asks for first (by its tag, or the primary
    /// tag: `de-AT` reads `de`), else the first set. English is there from the start; a set tagged `en` replaces
    /// it (and stays first).
    ///
    /// ```
    /// # async fn demo() -> Result<(), waitroom_layer::BuildError> {
    /// use waitroom_layer::{PageText, WaitingRoom, WaitingRoomLayer};
    /// let room = WaitingRoom::builder("tour-2026").build().await?;
    /// let layer = WaitingRoomLayer::builder(room).page_text(PageText::german()).build()?;
    /// # Ok(()) }
    /// ```
    pub fn page_text(mut self, text: PageText) -> Self {
        self.texts.add(text);
        self
    }

    /// The holding page (default: [`PageTemplate::default`]).
    pub fn page(mut self, page: PageTemplate) -> Self {
        self.page = Some(page);
        self
    }

    /// Requests for which `bypass` returns true never see the room: no cookie read, no header added or removed
    /// (health checks, monitoring, static assets).
    pub fn bypass(mut self, bypass: impl Fn(&Parts) -> bool + Send + Sync + 'static) -> Self {
        self.bypass = Some(Arc::new(bypass));
        self
    }

    /// The account a request belongs to, when the app knows it: an account holds one place in line whichever
    /// browser it uses (a second browser of the same account takes over the first one's place). Only trust what
    /// your app authenticated (a verified session, not a raw header).
    pub fn account_key(
        mut self,
        key: impl Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.account_key = Some(Arc::new(key));
        self
    }

    /// An asynchronous check run before a request takes a new place in line; it may refuse with its own response.
    /// See [`JoinGuard`].
    pub fn join_guard(mut self, guard: impl JoinGuard) -> Self {
        self.join_guard = Some(Arc::new(guard));
        self
    }

    /// Which origins may send unsafe-method requests (`POST`, `PUT`, `DELETE`...) to protected paths and the
    /// room's endpoints. On by default with [`OriginCheck::same_origin`]: a request whose `Sec-Fetch-Site` is not
    /// `same-origin` (or, without it, whose `Origin`/`Referer` is not the request's own origin) gets a 403 with
    /// the code `cross_origin`. `SameSite=Lax` alone lets a page on a sibling subdomain post with the person's
    /// cookies; see [`waitroom_verify::origin`]. Add origins with [`OriginCheck::allow_origin`].
    pub fn origin_check(mut self, check: OriginCheck) -> Self {
        self.origin_check = Some(check);
        self
    }

    /// Turns the cross-origin refusal off (for an app with its own CSRF defence).
    pub fn no_origin_check(mut self) -> Self {
        self.origin_check = None;
        self
    }

    /// Builds the layer.
    ///
    /// # Errors
    /// [`BuildError::Invalid`] for a base path, prefix, pattern or metrics path that is not an absolute path (or a
    /// pattern with `**` anywhere but at its end), a protected path under the base path, or an admin token shorter
    /// than 16 bytes.
    pub fn build(self) -> Result<WaitingRoomLayer, BuildError> {
        let mut paths = Paths::new(&self.base_path)?;
        if let Some(m) = &self.metrics_path {
            paths.set_metrics(m)?;
        }
        let admin = if self.admin.is_empty() {
            None
        } else {
            let mut tokens = Vec::with_capacity(self.admin.len());
            for (name, guard) in self.admin {
                tokens.push((name, guard?));
            }
            Some(AdminTokens::new(tokens)?)
        };
        let metrics_auth = self.metrics_auth.transpose()?;
        for p in &self.prefixes {
            paths.add_prefix(p)?;
        }
        for p in &self.patterns {
            paths.add_pattern(p)?;
        }
        Ok(WaitingRoomLayer {
            shared: Arc::new(Shared {
                room: self.room,
                paths,
                page: self.page.unwrap_or_default(),
                texts: self.texts,
                bypass: self.bypass,
                account_key: self.account_key,
                join_guard: self.join_guard,
                admin,
                metrics_auth,
                origin_check: self.origin_check,
            }),
        })
    }
}
