//! [`ResponseFuture`]: the room's decision, then the inner service, then the finish, as one named future.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use http::header::SET_COOKIE;
use http::{HeaderName, HeaderValue, Request, Response};
use pin_project::pin_project;
use tower::Service;
use waitroom_verify::{Claims, FINISH_HEADER, parse_finish_command};

use crate::http::body::RoomBody;
use crate::http::gate::Decision;
use crate::http::layer::Shared;
use crate::http::respond::{Reply, STATE_HEADER};
use crate::room::cookie::Carrier;

/// The room's asynchronous checks (store lookups, joins, claims) are boxed: they are `async fn`s over the room
/// whose types cannot be named, and they run only off the hot path (polls, joins, one renewal per half token
/// life). A request with a valid token goes straight to [`State::Call`] without one.
pub(crate) type CheckFuture = Pin<Box<dyn Future<Output = Decision> + Send + 'static>>;
type FinishFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// What to do with the inner service's response.
pub(crate) enum After {
    /// Nothing at all (bypassed requests never see the room).
    Untouched,
    /// Remove any finish command (an unprotected path: no session was checked).
    Strip,
    /// A session with a valid admission: add `headers` (`Set-Cookie` lines, or the values for a client without
    /// cookies); a finish command ends `session`.
    Track {
        session: Tracked,
        headers: Vec<(HeaderName, HeaderValue)>,
        carrier: Carrier,
    },
}

/// The session a response is tracked for.
pub(crate) enum Tracked {
    /// Its id.
    Id(String),
    /// The claims of the token it passed with (their subject is the session).
    Token(Arc<Claims>),
}

impl Tracked {
    pub(crate) fn id(&self) -> &str {
        match self {
            Tracked::Id(id) => id,
            Tracked::Token(claims) => &claims.sub,
        }
    }
}

/// The response future of [`WaitingRoomService`](crate::WaitingRoomService).
#[pin_project]
pub struct ResponseFuture<S, B>
where
    S: Service<Request<B>>,
{
    #[pin]
    state: State<S, B>,
    shared: Arc<Shared>,
}

#[pin_project(project = StateProj)]
enum State<S, B>
where
    S: Service<Request<B>>,
{
    /// The room decides; the ready inner service and the body wait for the decision.
    Check {
        fut: CheckFuture,
        inner: Option<S>,
        body: Option<B>,
    },
    /// The inner service answers.
    Call {
        #[pin]
        fut: S::Future,
        after: After,
    },
    /// The response carried a finish: the room records it before the response leaves.
    Finish {
        fut: FinishFuture,
        response: Option<S::Response>,
    },
    /// The room's own response.
    Reply { reply: Option<Reply> },
}

impl<S, B> ResponseFuture<S, B>
where
    S: Service<Request<B>>,
{
    pub(crate) fn check(shared: Arc<Shared>, fut: CheckFuture, inner: S, body: B) -> Self {
        Self {
            state: State::Check {
                fut,
                inner: Some(inner),
                body: Some(body),
            },
            shared,
        }
    }

    /// The room answers by itself after `fut` (which never passes the request on): the body went into `fut`.
    pub(crate) fn reply_later(shared: Arc<Shared>, fut: CheckFuture) -> Self {
        Self {
            state: State::Check {
                fut,
                inner: None,
                body: None,
            },
            shared,
        }
    }

    /// The room answers at once.
    pub(crate) fn reply(shared: Arc<Shared>, reply: Reply) -> Self {
        Self {
            state: State::Reply { reply: Some(reply) },
            shared,
        }
    }

    pub(crate) fn call(shared: Arc<Shared>, fut: S::Future, after: After) -> Self {
        Self {
            state: State::Call { fut, after },
            shared,
        }
    }
}

impl<S, B, ResBody> Future for ResponseFuture<S, B>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
{
    type Output = Result<Response<RoomBody<ResBody>>, S::Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            let mut this = self.as_mut().project();
            match this.state.as_mut().project() {
                StateProj::Check { fut, inner, body } => {
                    let next = match ready!(fut.as_mut().poll(cx)) {
                        Decision::Reply(reply) => State::Reply { reply: Some(reply) },
                        Decision::PassOpen { parts } => {
                            let (Some(mut inner), Some(body)) = (inner.take(), body.take()) else {
                                unreachable!(
                                    "the check state is left once, and a reply-only check never passes"
                                );
                            };
                            State::Call {
                                fut: inner.call(Request::from_parts(parts, body)),
                                after: After::Strip,
                            }
                        }
                        Decision::Pass {
                            parts,
                            session,
                            headers,
                            carrier,
                        } => {
                            let (Some(mut inner), Some(body)) = (inner.take(), body.take()) else {
                                unreachable!(
                                    "the check state is left once, and a reply-only check never passes"
                                );
                            };
                            State::Call {
                                fut: inner.call(Request::from_parts(parts, body)),
                                after: After::Track {
                                    session: Tracked::Id(session),
                                    headers,
                                    carrier,
                                },
                            }
                        }
                    };
                    this.state.set(next);
                }
                StateProj::Call { fut, after } => {
                    let mut res = ready!(fut.poll(cx))?;
                    match std::mem::replace(after, After::Untouched) {
                        After::Untouched => return Poll::Ready(Ok(res.map(RoomBody::inner))),
                        After::Strip => {
                            res.headers_mut().remove(FINISH_HEADER);
                            return Poll::Ready(Ok(res.map(RoomBody::inner)));
                        }
                        After::Track {
                            session,
                            headers,
                            carrier,
                        } => {
                            let command = res.headers_mut().remove(FINISH_HEADER);
                            let Some(seats) = command.as_ref().and_then(parse_finish_command)
                            else {
                                if command.is_some() {
                                    tracing::debug!("ignored a malformed finish command");
                                }
                                add_headers(res.headers_mut(), headers);
                                return Poll::Ready(Ok(res.map(RoomBody::inner)));
                            };
                            // Finished: no renewed token; the token cookie goes (a client without cookies is told
                            // `Waitroom-State: finished`), and the room and its verifier learn of it before the
                            // response leaves.
                            let room = this.shared.room.clone();
                            room.tokens().deny(session.id());
                            if carrier == Carrier::Cookie {
                                add_headers(
                                    res.headers_mut(),
                                    [(SET_COOKIE, room.cookies().clear_token())],
                                );
                            } else {
                                add_headers(
                                    res.headers_mut(),
                                    [(STATE_HEADER, HeaderValue::from_static("finished"))],
                                );
                            }
                            let fut: FinishFuture = Box::pin(async move {
                                if let Err(e) = room.finish(session.id(), seats).await {
                                    tracing::warn!(error = %e, "could not record a finish yet; it is kept and retried");
                                }
                            });
                            this.state.set(State::Finish {
                                fut,
                                response: Some(res),
                            });
                        }
                    }
                }
                StateProj::Finish { fut, response } => {
                    ready!(fut.as_mut().poll(cx));
                    let res = response.take().expect("the finish state is left once");
                    return Poll::Ready(Ok(res.map(RoomBody::inner)));
                }
                StateProj::Reply { reply } => {
                    let reply = reply.take().expect("a reply is given once");
                    return Poll::Ready(Ok(reply.map(RoomBody::room)));
                }
            }
        }
    }
}

/// Adds the room's headers (`Set-Cookie` lines, a session value or a token for a client without cookies) to the
/// inner service's response. A response carrying a person's pass must not be stored by a shared cache and handed
/// to someone else, whatever the app said: it becomes `no-store`.
fn add_headers(
    headers: &mut http::HeaderMap,
    add: impl IntoIterator<Item = (HeaderName, HeaderValue)>,
) {
    let mut any = false;
    for (name, value) in add {
        if name == SET_COOKIE {
            headers.append(name, value);
        } else {
            headers.insert(name, value);
        }
        any = true;
    }
    if any {
        headers.insert(
            http::header::CACHE_CONTROL,
            http::HeaderValue::from_static("no-store"),
        );
    }
}
