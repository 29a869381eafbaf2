//! The admin API: operators read the figures and turn the knobs of a running on-sale over HTTP.
//!
//! Off unless the layer is built with [`WaitingRoomLayerBuilder::admin_token`](crate::WaitingRoomLayerBuilder::admin_token);
//! then it answers under `{base}/admin/`:
//!
//! | call | body | does |
//! | --- | --- | --- |
//! | `GET stats` | | the room's [`RoomStats`](crate::RoomStats) |
//! | `POST capacity` | `{"capacity": 9000}` | sets the capacity (at least 1) |
//! | `POST admit-per-minute` | `{"per_minute": 1500}` or `{"per_minute": null}` | sets or clears the per-minute cap |
//! | `POST pause` | | stops letting people in |
//! | `POST resume` | | lets people in again |
//! | `POST open-now` | | opens the door now (the draw runs at the next tick) |
//! | `POST close` | | closes the on-sale for good: nobody new joins or is let in, and everyone still in line is turned away |
//! | `POST inventory` | `{"total": 48000, "sold": 120, "held": 3000}` | reports the seats |
//!
//! Every call needs `Authorization: Bearer <secret>`; the secret is compared in constant time (as SHA-256 digests,
//! so not even its length shows). A missing or wrong secret gets `401` with a JSON problem body and changes nothing.
//! A successful call answers `200` with the stats after the change. Changes go through the store, so every
//! instance sharing it applies them at its next refresh (a few times a second). A bad body gets `400`, a store
//! that cannot be reached `503`; bodies over 4 KiB are refused.

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderValue, Method, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, Limited};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use waitroom_verify::log_gate::LogGate;

use crate::error::BuildError;
use crate::http::layer::Shared;
use crate::http::respond::{self, Reply};
use crate::store::Inventory;

/// The state header value of admin responses.
const STATE: &str = "admin";
/// The most an admin request body may hold.
const MAX_BODY_BYTES: usize = 4 * 1024;
/// The shortest admin secret accepted.
pub(crate) const MIN_ADMIN_TOKEN_BYTES: usize = 16;

/// One admin call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AdminOp {
    Stats,
    Capacity,
    AdmitPerMinute,
    Pause,
    Resume,
    OpenNow,
    Close,
    Inventory,
    Unknown,
}

impl AdminOp {
    /// The call named by the path after `{base}/admin/`.
    pub(crate) fn from_name(name: &str) -> Self {
        match name {
            "stats" => Self::Stats,
            "capacity" => Self::Capacity,
            "admit-per-minute" => Self::AdmitPerMinute,
            "pause" => Self::Pause,
            "resume" => Self::Resume,
            "open-now" => Self::OpenNow,
            "close" => Self::Close,
            "inventory" => Self::Inventory,
            _ => Self::Unknown,
        }
    }
}

/// A bearer secret guarding the admin API or the metrics (as its SHA-256 digest), and the refusal log's pace.
/// Never printed.
pub(crate) struct BearerGuard {
    digest: [u8; 32],
    refusal_log: LogGate,
}

impl std::fmt::Debug for BearerGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerGuard { digest: <redacted> }")
    }
}

impl BearerGuard {
    /// A bearer secret for the admin API, or for another endpoint guarded the same way (`field` names the builder
    /// method in the error).
    pub(crate) fn new(field: &'static str, secret: &[u8]) -> Result<Self, BuildError> {
        if secret.len() < MIN_ADMIN_TOKEN_BYTES {
            return Err(BuildError::invalid(
                field,
                format!(
                    "must be at least {MIN_ADMIN_TOKEN_BYTES} bytes (use a random secret, e.g. 32 bytes in base64)"
                ),
            ));
        }
        Ok(Self {
            digest: Sha256::digest(secret).into(),
            refusal_log: LogGate::default(),
        })
    }

    /// Whether the request carries the secret as `Authorization: Bearer <secret>`.
    pub(crate) fn authorised(&self, parts: &Parts) -> bool {
        let Some(value) = parts.headers.get(http::header::AUTHORIZATION) else {
            return false;
        };
        let value = value.as_bytes();
        if value.len() > 1024 || value.len() < 7 || !value[..7].eq_ignore_ascii_case(b"bearer ") {
            return false;
        }
        let presented: [u8; 32] = Sha256::digest(value[7..].trim_ascii()).into();
        presented.ct_eq(&self.digest).into()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CapacityBody {
    capacity: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PerMinuteBody {
    per_minute: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InventoryBody {
    total: u64,
    sold: u64,
    #[serde(default)]
    held: u64,
}

fn bad_request(detail: &str) -> Reply {
    respond::problem(StatusCode::BAD_REQUEST, STATE, "Bad request", detail)
}

/// The body as `T`, or the 400 detail.
fn parse<T: for<'de> Deserialize<'de>>(body: &[u8], example: &str) -> Result<T, String> {
    serde_json::from_slice(body).map_err(|e| format!("The body must be JSON like {example} ({e})."))
}

/// Answers one admin call. `admin` is `None` when the API is off (then everything under `{base}/admin/` is a 404,
/// as for any unknown path).
pub(crate) async fn handle<B>(shared: &Shared, op: AdminOp, parts: Parts, body: B) -> Reply
where
    B: Body + Send,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let Some(admin) = &shared.admin else {
        return respond::problem(
            StatusCode::NOT_FOUND,
            "not_in_line",
            "Not found",
            "The waiting room answers `status`, `jwks.json` and `join` here.",
        );
    };
    let room = &shared.room;
    if !admin.authorised(&parts) {
        if admin.refusal_log.due_at(room.clock().now_ms()) {
            tracing::warn!(
                event = %room.config().event,
                path = parts.uri.path(),
                "refused an admin call without the right token (logged at most every 10 s)"
            );
        }
        let mut r = respond::problem(
            StatusCode::UNAUTHORIZED,
            STATE,
            "Unauthorized",
            "Admin calls need `Authorization: Bearer <admin token>`.",
        );
        r.headers_mut().insert(
            http::header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"waitroom-admin\""),
        );
        return r;
    }
    let (get, post) = (parts.method == Method::GET, parts.method == Method::POST);
    let wrong_method = |allow: &'static str| {
        let mut r = respond::problem(
            StatusCode::METHOD_NOT_ALLOWED,
            STATE,
            "Method not allowed",
            &format!("Use {allow}."),
        );
        r.headers_mut()
            .insert(http::header::ALLOW, HeaderValue::from_static(allow));
        r
    };
    match op {
        AdminOp::Unknown => {
            return respond::problem(
                StatusCode::NOT_FOUND,
                STATE,
                "Not found",
                "Admin calls: GET stats; POST capacity, admit-per-minute, pause, resume, open-now, close, inventory.",
            );
        }
        AdminOp::Stats if !get => return wrong_method("GET"),
        AdminOp::Stats => return stats_reply(shared),
        _ if !post => return wrong_method("POST"),
        _ => {}
    }
    let body = match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return respond::problem(
                StatusCode::PAYLOAD_TOO_LARGE,
                STATE,
                "Body too large",
                "Admin bodies are at most 4 KiB of JSON.",
            );
        }
    };
    let result = match op {
        AdminOp::Capacity => {
            let b: CapacityBody = match parse(&body, r#"{"capacity": 9000}"#) {
                Ok(b) => b,
                Err(detail) => return bad_request(&detail),
            };
            if b.capacity == 0 {
                return bad_request("The capacity must be at least 1 (pause the door instead).");
            }
            room.set_capacity(b.capacity).await
        }
        AdminOp::AdmitPerMinute => {
            let b: PerMinuteBody =
                match parse(&body, r#"{"per_minute": 1500} or {"per_minute": null}"#) {
                    Ok(b) => b,
                    Err(detail) => return bad_request(&detail),
                };
            if b.per_minute == Some(0) {
                return bad_request(
                    "The per-minute cap must be at least 1 (pause the door to stop admitting).",
                );
            }
            room.set_admit_per_minute(b.per_minute).await
        }
        AdminOp::Inventory => {
            let b: InventoryBody =
                match parse(&body, r#"{"total": 48000, "sold": 120, "held": 3000}"#) {
                    Ok(b) => b,
                    Err(detail) => return bad_request(&detail),
                };
            if b.sold.saturating_add(b.held) > b.total {
                return bad_request("`sold` plus `held` cannot exceed `total`.");
            }
            room.set_inventory(Inventory {
                total: b.total,
                sold: b.sold,
                held: b.held,
            })
            .await
        }
        AdminOp::Pause => room.pause().await,
        AdminOp::Resume => room.resume().await,
        AdminOp::OpenNow => room.open_now().await,
        AdminOp::Close => room.close().await,
        AdminOp::Stats | AdminOp::Unknown => unreachable!("answered above"),
    };
    match result {
        Ok(_) => {
            tracing::debug!(event = %room.config().event, call = ?op, "admin call applied");
            stats_reply(shared)
        }
        Err(e) => respond::problem(
            StatusCode::SERVICE_UNAVAILABLE,
            STATE,
            "Store unavailable",
            &format!("Nothing changed: {e}"),
        ),
    }
}

fn stats_reply(shared: &Shared) -> Reply {
    let body = serde_json::to_vec(&shared.room.stats()).unwrap_or_else(|_| b"{}".to_vec());
    respond::reply(
        StatusCode::OK,
        STATE,
        "application/json",
        Bytes::from(body),
        Vec::new(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(auth: Option<&str>) -> Parts {
        let mut b = http::Request::post("/waitroom/admin/pause");
        if let Some(a) = auth {
            b = b.header(http::header::AUTHORIZATION, a);
        }
        b.body(()).unwrap().into_parts().0
    }

    #[test]
    fn the_secret_is_checked_and_never_printed() {
        assert!(BearerGuard::new("admin_token", b"short").is_err());
        let admin = BearerGuard::new("admin_token", b"0123456789abcdef-secret").unwrap();
        assert!(admin.authorised(&parts(Some("Bearer 0123456789abcdef-secret"))));
        assert!(admin.authorised(&parts(Some("bearer 0123456789abcdef-secret"))));
        assert!(!admin.authorised(&parts(Some("Bearer 0123456789abcdef-secreT"))));
        assert!(!admin.authorised(&parts(Some("Basic 0123456789abcdef-secret"))));
        assert!(!admin.authorised(&parts(Some("Bearer"))));
        assert!(!admin.authorised(&parts(None)));
        assert!(!format!("{admin:?}").contains("secret"));
        assert_eq!(AdminOp::from_name("open-now"), AdminOp::OpenNow);
        assert_eq!(AdminOp::from_name("open_now"), AdminOp::Unknown);
    }
}
