//! The room's HTTP face: the Tower layer and service, the endpoints under the base path, and the responses the
//! room writes. It reads the room (`crate::room`) and never the other way round.
//!
//! - [`layer`]: [`WaitingRoomLayer`](crate::WaitingRoomLayer) and its builder; the state every service shares.
//! - [`service`], [`future`], [`body`]: the Tower service, its response future (named readiness states) and body.
//! - [`endpoints`]: the endpoints service for `.route_service` (status, join, jwks.json, holding.js, admin).
//! - [`paths`]: which paths are protected, bypassed or the room's own (normalised before matching).
//! - [`gate`]: what the room decides for one request: pass, hold, admit, answer an endpoint.
//! - [`respond`]: the responses the room writes (`Cache-Control: no-store`, `Waitroom-State`).
//! - [`page`]: the holding page template; [`page_text`]: its words, per language. [`hooks`]: the join guard, bypass and account-key hooks.
//! - [`admin`]: the operator API.

pub mod admin;
pub(crate) mod body;
pub(crate) mod endpoints;
pub(crate) mod future;
pub(crate) mod gate;
pub(crate) mod hooks;
pub(crate) mod layer;
pub(crate) mod page;
pub(crate) mod page_text;
pub(crate) mod paths;
pub(crate) mod respond;
pub(crate) mod service;
