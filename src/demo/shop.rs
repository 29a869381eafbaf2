//! [`Shop`]: the storefront and order service over a [`SeatInventory`], as an axum router.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::json;
use waitroom_layer::{Inventory, WaitingRoom};
use waitroom_verify::{
    Admission, Finish, FinishFuture, FinishSink, HeaderSink, SharedClock, SystemClock, VerifyLayer,
};

use super::inventory::{HoldError, PurchaseError, Sale, SeatId, SeatInventory};
use super::pages;

/// A completed order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Order {
    /// The order id: 128 random bits, so the confirmation URL is private to whoever holds it.
    pub id: String,
    /// The session that bought it.
    #[serde(skip)]
    pub session: String,
    /// The seats.
    pub seats: Vec<SeatId>,
    /// When it was paid, ms since the Unix epoch.
    pub at_ms: u64,
}

/// The shop's settings. Start from [`Shop::builder`].
#[must_use = "a builder does nothing until `build` is called"]
#[derive(Debug)]
pub struct ShopBuilder {
    seats: u32,
    name: String,
    max_per_order: u32,
    hold_for: Duration,
    payment_latency: Duration,
    opens_at_ms: Option<u64>,
    clock: SharedClock,
    room: Option<WaitingRoom>,
}

impl ShopBuilder {
    /// The on-sale's name on the pages (default `The 2026 Stadium Tour`).
    pub fn display_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Most seats one order may hold (default 4). A token's `max_qty`, when lower, wins.
    pub fn max_per_order(mut self, seats: u32) -> Self {
        self.max_per_order = seats;
        self
    }

    /// How long a hold lasts before its seats go back on sale (default 5 minutes).
    pub fn hold_for(mut self, d: Duration) -> Self {
        self.hold_for = d;
        self
    }

    /// How long the simulated payment provider takes (default 1.5 s).
    pub fn payment_latency(mut self, d: Duration) -> Self {
        self.payment_latency = d;
        self
    }

    /// When the on-sale opens (ms since the Unix epoch), for the event page.
    pub fn opens_at_ms(mut self, ms: Option<u64>) -> Self {
        self.opens_at_ms = ms;
        self
    }

    /// The clock holds are timed by (default: the system clock).
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// A room handle to report the seats to ([`WaitingRoom::set_inventory`]) whenever sold or held change, and to
    /// finish sessions through at once: the room itself (one process), or a handle over the room's shared store
    /// (an order service next to Redis). Without one, finishes travel back in the response header and the room's
    /// gateway reads the counts from `/api/inventory`.
    pub fn room(mut self, room: WaitingRoom) -> Self {
        self.room = Some(room);
        self
    }

    pub(crate) fn seats(&self) -> u32 {
        self.seats
    }

    /// The shop, with every seat on sale (see [`open`](Self::open) for one kept in a file).
    pub fn build(self) -> Shop {
        Shop {
            inner: Arc::new(Inner {
                inventory: SeatInventory::new(self.seats),
                orders: Mutex::new(HashMap::new()),
                name: self.name,
                max_per_order: self.max_per_order.max(1),
                hold_for: self.hold_for,
                payment_latency: self.payment_latency,
                opens_at_ms: self.opens_at_ms,
                clock: self.clock,
                room: self.room,
                feed: tokio::sync::Mutex::new(()),
                sales: Mutex::new(HashMap::new()),
                payments: tokio::sync::watch::Sender::new(0),
            }),
        }
    }
}

pub(crate) struct Inner {
    inventory: SeatInventory,
    orders: Mutex<HashMap<String, Order>>,
    name: String,
    max_per_order: u32,
    hold_for: Duration,
    payment_latency: Duration,
    opens_at_ms: Option<u64>,
    clock: SharedClock,
    room: Option<WaitingRoom>,
    /// Serialises reports to the room, so a stale count never overwrites a newer one.
    feed: tokio::sync::Mutex<()>,
    /// Sales whose finish has not reached the room yet, by session (see [`Shop::room_view`]).
    sales: Mutex<HashMap<String, Sale>>,
    /// Payments in progress (at the payment provider).
    payments: tokio::sync::watch::Sender<usize>,
}

/// How long after its response a finish sent back in the header is taken to have reached the room (the room layer
/// in the response path applies it as the response passes; this only has to outlast that).
const HEADER_FINISH_GRACE: Duration = Duration::from_secs(2);

/// The storefront and order service: the seats, the orders, the pages. Cheap to clone (one `Arc`).
///
/// [`Shop::router`] serves:
/// - `GET /`: the event page, the same for everyone (`Cache-Control: public, max-age=60`);
/// - `GET /seats?section=N`: the seat map with live availability (JSON with `Accept: application/json`);
/// - `POST /holds`: hold seats (form `seat=<id>` repeated, or JSON `{"seats":[..]}`); `409` names the seats
///   someone else holds;
/// - `POST /pay`: the simulated payment provider, then the order for exactly the hold the payment started from
///   (`409 hold_changed` if the hold changed meanwhile), and the session finishes
///   ([`Admission::finish_with_seats`]): `303` to the confirmation (JSON: the order);
/// - `POST /leave`: release the hold and finish without buying. A page's form is asked first: without
///   `confirm=yes` in the body, an HTML request gets the "Leave without buying?" page (whose button sends it);
///   a JSON request (an app confirms in its own way) leaves at once;
/// - `GET /api/me`: what the pass says (JSON; a light protected route for benchmarks);
/// - `GET /api/ping`: `ok` behind both layers, the same handler as `/healthz` (whether the pass still holds; the
///   HTTP benchmark's measure of what the layers alone cost);
/// - `GET /orders/{id}`: the confirmation; `GET /api/inventory`: the counts; `GET /healthz`: `ok`;
/// - `GET /assets/seat-map.js`: the seat map's script (public; the pages work without it).
///
/// The four order routes sit behind the [`VerifyLayer`] given to `router`; put the room in front of them with
/// [`room_layer`](super::room_layer).
#[derive(Clone)]
pub struct Shop {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Shop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shop")
            .field("name", &self.inner.name)
            .field("inventory", &self.inner.inventory.counts())
            .finish_non_exhaustive()
    }
}

/// JSON unless the client names HTML: the one `Accept` rule both layers follow ([`waitroom_verify::negotiate`]).
fn wants_json(headers: &HeaderMap) -> bool {
    !waitroom_verify::negotiate::wants_html(headers)
}

fn no_store(mut r: Response) -> Response {
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// Seat ids from a form body (`seat=1&seat=2`) or JSON (`{"seats":[1,2]}`), and the section to go back to.
fn parse_hold(headers: &HeaderMap, body: &[u8]) -> Option<(Vec<SeatId>, Option<u32>)> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if json {
        #[derive(Deserialize)]
        struct Req {
            seats: Vec<SeatId>,
        }
        return serde_json::from_slice::<Req>(body)
            .ok()
            .map(|r| (r.seats, None));
    }
    let text = std::str::from_utf8(body).ok()?;
    let mut seats = Vec::new();
    let mut section = None;
    for pair in text.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=')?;
        match k {
            "seat" => seats.push(v.parse().ok()?),
            "section" => section = v.parse().ok(),
            _ => {}
        }
        if seats.len() > 64 {
            return None;
        }
    }
    Some((seats, section))
}

#[derive(Debug, Deserialize)]
struct SeatQuery {
    section: Option<u32>,
}

impl Shop {
    /// A shop selling `seats` seats.
    pub fn builder(seats: u32) -> ShopBuilder {
        ShopBuilder {
            seats,
            name: "The 2026 Stadium Tour".into(),
            max_per_order: 4,
            hold_for: Duration::from_secs(300),
            payment_latency: Duration::from_millis(1500),
            opens_at_ms: None,
            clock: Arc::new(SystemClock),
            room: None,
        }
    }

    /// The seats.
    pub fn inventory(&self) -> &SeatInventory {
        &self.inner.inventory
    }

    /// The order with this id.
    pub fn order(&self, id: &str) -> Option<Order> {
        self.lock_orders().get(id).cloned()
    }

    pub(crate) fn lock_orders(&self) -> std::sync::MutexGuard<'_, HashMap<String, Order>> {
        self.inner.orders.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now_ms(&self) -> u64 {
        self.inner.clock.now_ms()
    }

    /// Reports the seat counts to the room in this process, if any (a failure is logged: the room keeps the last
    /// counts, and the next change or sweep reports again).
    pub async fn report_inventory(&self) {
        let Some(room) = &self.inner.room else { return };
        let _serial = self.inner.feed.lock().await;
        let counts = self.room_view();
        if let Err(e) = room.set_inventory(counts).await {
            tracing::warn!(error = %e, "could not report the seats to the room");
        }
    }

    /// The seat counts as the room should see them ([`SeatInventory::room_view`]). A finish carries its seats to
    /// the room, which moves them from held to sold itself ([`WaitingRoom::finish`]); so until a sale's finish has
    /// reached the room, its seats are reported as still held. Otherwise a report made between the sale and the
    /// finish would count them twice and could tell the line "sold out" early. Seats available come out the same
    /// either way.
    pub fn room_view(&self) -> Inventory {
        self.inner.inventory.room_view()
    }

    /// `session`'s sale's finish reached the room: its seats count as sold in reports from now on.
    async fn confirm(&self, session: &str) {
        let sale = self
            .inner
            .sales
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(session);
        if let Some(sale) = sale {
            self.inner.inventory.confirm(sale);
            self.report_inventory().await;
        }
    }

    /// The number of payments at the payment provider now, to watch (a test waits on it instead of sleeping).
    pub fn payments_in_progress(&self) -> tokio::sync::watch::Receiver<usize> {
        self.inner.payments.subscribe()
    }

    /// Puts lapsed holds back on sale now and reports the seats if any came back; returns how many.
    pub async fn expire_holds(&self) -> usize {
        let n = self.inner.inventory.expire(self.now_ms());
        if n > 0 {
            tracing::info!(seats = n, "holds lapsed; seats back on sale");
            self.report_inventory().await;
        }
        n
    }

    /// Sweeps lapsed holds every `every` on the current Tokio runtime, until the last handle to the shop drops.
    ///
    /// # Panics
    /// Outside a Tokio runtime.
    pub fn spawn_expiry(&self, every: Duration) {
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(inner) = weak.upgrade() else { break };
                Shop { inner }.expire_holds().await;
            }
        });
    }

    /// The purchase limit for this admission: the shop's, or the token's `max_qty` when lower.
    fn limit(&self, admission: &Admission) -> u32 {
        admission.max_qty().map_or(self.inner.max_per_order, |q| {
            q.min(self.inner.max_per_order)
        })
    }

    /// The whole app: public pages and, behind `verify`, the order routes. See the type's docs.
    ///
    /// The shop installs its own finish sink on `verify`: it adds the `Waitroom-Command` header (so a room layer in
    /// the response path consumes it and clears the browser's cookie) and, with a [`room`](ShopBuilder::room),
    /// finishes through the room before the response leaves.
    pub fn router(&self, verify: VerifyLayer) -> Router {
        let verify = verify.finish_sink(ShopFinishSink { shop: self.clone() });
        let orders = Router::new()
            .route("/seats", get(seat_map))
            .route("/api/me", get(me))
            .route("/api/ping", get(|| async { "ok" }))
            .route("/holds", post(hold))
            .route("/pay", post(pay))
            .route("/leave", post(leave))
            .route_layer(verify);
        Router::new()
            .route("/", get(event_page))
            .route("/orders/{id}", get(order_page))
            .route("/api/inventory", get(inventory_json))
            .route("/healthz", get(|| async { "ok" }))
            .route(pages::SEAT_MAP_SCRIPT_PATH, get(seat_map_script))
            .merge(orders)
            .with_state(self.clone())
    }

    fn seat_map(
        &self,
        admission: &Admission,
        section: Option<u32>,
        json: bool,
        error: Option<&str>,
        status: StatusCode,
    ) -> Response {
        let inv = &self.inner.inventory;
        let now = self.now_ms();
        let me = admission.session_id();
        let free = inv.free_per_section();
        let hold = inv.hold_of(me, now);
        let section = section
            .filter(|&s| (s as usize) < free.len())
            .or_else(|| hold.as_ref().map(|h| inv.layout().section_of(h.seats[0])))
            .or_else(|| free.iter().position(|&f| f > 0).map(|s| s as u32))
            .unwrap_or(0);
        let seats = inv.section(section, me, now);
        let counts: Inventory = inv.counts();
        let limit = self.limit(admission);
        if json {
            let body = json!({
                "section": section,
                "sections": free.len(),
                "total": counts.total,
                "sold": counts.sold,
                "held": counts.held,
                "available": counts.available(),
                "limit": limit,
                "hold": hold,
                "error": error,
                "seats": seats.iter().map(|(id, s)| json!({"id": id, "state": s})).collect::<Vec<_>>(),
            });
            return no_store((status, axum::Json(body)).into_response());
        }
        let view = pages::SeatMapView {
            name: &self.inner.name,
            layout: inv.layout(),
            section,
            free_per_section: &free,
            seats: &seats,
            hold: hold.as_ref(),
            limit,
            available: counts.available(),
            error,
            now_ms: now,
        };
        no_store((status, Html(pages::seat_map_page(&view))).into_response())
    }
}

async fn event_page(State(shop): State<Shop>) -> Response {
    let i = &shop.inner;
    let html = pages::event_page(
        &i.name,
        i.inventory.counts().total,
        i.max_per_order,
        i.opens_at_ms,
    );
    ([(header::CACHE_CONTROL, "public, max-age=60")], Html(html)).into_response()
}

/// The counts for the room's gateway: [`Shop::room_view`].
async fn inventory_json(State(shop): State<Shop>) -> Response {
    let c = shop.room_view();
    no_store(
        axum::Json(json!({
            "total": c.total, "sold": c.sold, "held": c.held, "available": c.available(),
        }))
        .into_response(),
    )
}

/// The body of `GET /api/me`.
#[derive(Serialize)]
struct Me<'a> {
    event: &'a str,
    expires_at: u64,
    max_qty: Option<u32>,
}

/// What the pass says: a light protected route (both layers, no inventory work), used by the HTTP benchmark.
async fn me(Extension(admission): Extension<Admission>) -> Response {
    no_store(
        axum::Json(Me {
            event: admission.event(),
            expires_at: admission.expires_at(),
            max_qty: admission.max_qty(),
        })
        .into_response(),
    )
}

async fn seat_map(
    State(shop): State<Shop>,
    Extension(admission): Extension<Admission>,
    Query(q): Query<SeatQuery>,
    headers: HeaderMap,
) -> Response {
    shop.seat_map(
        &admission,
        q.section,
        wants_json(&headers),
        None,
        StatusCode::OK,
    )
}

async fn hold(
    State(shop): State<Shop>,
    Extension(admission): Extension<Admission>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let json = wants_json(&headers);
    let Some((seats, section)) = parse_hold(&headers, &body) else {
        return shop.seat_map(
            &admission,
            None,
            json,
            Some("That request could not be read."),
            StatusCode::BAD_REQUEST,
        );
    };
    let now = shop.now_ms();
    let result = shop.inner.inventory.hold(
        admission.session_id(),
        &seats,
        shop.limit(&admission),
        now,
        shop.inner.hold_for.as_millis() as u64,
    );
    match result {
        Ok(hold) => {
            shop.report_inventory().await;
            if json {
                return no_store(axum::Json(json!({ "hold": hold })).into_response());
            }
            let to = match section {
                Some(s) => format!("/seats?section={s}"),
                None => "/seats".into(),
            };
            no_store(Redirect::to(&to).into_response())
        }
        Err(e) => {
            let status = match e {
                HoldError::Taken(_) => StatusCode::CONFLICT,
                _ => StatusCode::UNPROCESSABLE_ENTITY,
            };
            if json {
                let taken = match &e {
                    HoldError::Taken(s) => s.clone(),
                    _ => Vec::new(),
                };
                let code = if taken.is_empty() { "invalid" } else { "taken" };
                let body = json!({ "error": code, "message": e.to_string(), "seats": taken });
                return no_store((status, axum::Json(body)).into_response());
            }
            let layout = shop.inner.inventory.layout();
            let message = match &e {
                HoldError::Taken(s) => format!(
                    "Someone else got there first: {}. Nothing was held; choose again.",
                    s.iter()
                        .map(|&s| layout.label(s))
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
                other => format!("Nothing was held: {other}."),
            };
            shop.seat_map(&admission, section, false, Some(&message), status)
        }
    }
}

async fn pay(
    State(shop): State<Shop>,
    Extension(admission): Extension<Admission>,
    headers: HeaderMap,
) -> Response {
    let json = wants_json(&headers);
    let me = admission.session_id().to_owned();
    let result = match shop.inner.inventory.hold_of(&me, shop.now_ms()) {
        None => Err(PurchaseError::NoHold),
        Some(hold) => {
            // The payment provider takes its time; the hold keeps the seats meanwhile. The payment is for this
            // hold: if the session changes it meanwhile, nothing is sold (the provider would refund).
            shop.inner.payments.send_modify(|n| *n += 1);
            tokio::time::sleep(shop.inner.payment_latency).await;
            shop.inner.payments.send_modify(|n| *n -= 1);
            shop.inner.inventory.purchase(&me, &hold, shop.now_ms())
        }
    };
    let seats = match result {
        Ok(sale) => {
            let seats = sale.seats().to_vec();
            // Open until its finish reaches the room (`ShopFinishSink`).
            shop.inner
                .sales
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(me.clone(), sale);
            seats
        }
        Err(e) => {
            shop.report_inventory().await;
            if json {
                let code = match e {
                    PurchaseError::NoHold => "no_hold",
                    PurchaseError::Expired => "hold_expired",
                    PurchaseError::Changed => "hold_changed",
                };
                let body = json!({ "error": code, "message": e.to_string() });
                return no_store((StatusCode::CONFLICT, axum::Json(body)).into_response());
            }
            let message = format!("The payment did not go ahead: {e}.");
            return shop.seat_map(
                &admission,
                None,
                false,
                Some(&message),
                StatusCode::CONFLICT,
            );
        }
    };
    let order = Order {
        id: WaitingRoom::new_session_id(),
        session: me,
        seats,
        at_ms: shop.now_ms(),
    };
    shop.lock_orders().insert(order.id.clone(), order.clone());
    // The order is done: the session leaves the room's count and the next person in line takes its place. The
    // finish carries the seats to the room (see `ShopFinishSink`).
    admission.finish_with_seats(order.seats.len() as u32);
    let url = format!("/orders/{}", order.id);
    if json {
        return no_store(axum::Json(json!({ "order": order, "url": url })).into_response());
    }
    no_store(Redirect::to(&url).into_response())
}

/// The seat map's script ([`pages::SEAT_MAP_SCRIPT`]): the same for everyone.
async fn seat_map_script() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=300"),
        ],
        pages::SEAT_MAP_SCRIPT,
    )
        .into_response()
}

/// Whether a form body says `confirm=yes`.
fn confirmed(body: &[u8]) -> bool {
    std::str::from_utf8(body).is_ok_and(|b| b.split('&').any(|pair| pair == "confirm=yes"))
}

async fn leave(
    State(shop): State<Shop>,
    Extension(admission): Extension<Admission>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !wants_json(&headers) && !confirmed(&body) {
        let inv = &shop.inner.inventory;
        let hold = inv.hold_of(admission.session_id(), shop.now_ms());
        let html = pages::leave_page(&shop.inner.name, inv.layout(), hold.as_ref());
        return no_store(Html(html).into_response());
    }
    let released = shop.inner.inventory.release(admission.session_id());
    admission.finish();
    shop.report_inventory().await;
    if wants_json(&headers) {
        return no_store(axum::Json(json!({ "left": true, "released": released })).into_response());
    }
    no_store(Redirect::to("/").into_response())
}

async fn order_page(
    State(shop): State<Shop>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let Some(order) = shop.order(&id) else {
        let html = pages::message_page(
            "No such order",
            "There is no order with that id.",
            ("/", "The event"),
        );
        return no_store((StatusCode::NOT_FOUND, Html(html)).into_response());
    };
    if wants_json(&headers) {
        return no_store(axum::Json(json!({ "order": order })).into_response());
    }
    let html = pages::order_page(&shop.inner.name, shop.inner.inventory.layout(), &order);
    no_store(Html(html).into_response())
}

/// The shop's finish sink: the header for a room layer in the response path and, with a room handle, the finish
/// written through the room before the response leaves; then the sale's seats count as confirmed.
#[derive(Debug, Clone)]
struct ShopFinishSink {
    shop: Shop,
}

impl FinishSink for ShopFinishSink {
    fn finish(&self, finish: &Finish, response_headers: &mut HeaderMap) -> Option<FinishFuture> {
        let _ = HeaderSink.finish(finish, response_headers);
        let shop = self.shop.clone();
        let (session, seats) = (finish.session_id.clone(), finish.seats);
        // Started here rather than in the returned future, so it runs even if the response never leaves.
        let task = tokio::spawn(async move {
            match &shop.inner.room {
                Some(room) => {
                    if let Err(e) = room.finish(&session, seats).await {
                        tracing::warn!(error = %e, "could not finish the session through the room");
                    }
                }
                // The room layer applies the header as the response passes back through it.
                None => tokio::time::sleep(HEADER_FINISH_GRACE).await,
            }
            if seats > 0 {
                shop.confirm(&session).await;
            }
        });
        self.shop.inner.room.as_ref()?;
        Some(Box::pin(async move {
            let _ = task.await;
        }))
    }
}
