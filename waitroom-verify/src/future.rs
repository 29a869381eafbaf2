//! [`ResponseFuture`]: the future of a [`VerifyService`](crate::VerifyService) call.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use http::Response;
use pin_project::pin_project;

use crate::admission::{FinishCell, FinishFuture};

#[pin_project(project = StateProj)]
enum State<F, B> {
    /// The inner service is handling an admitted request.
    Call {
        #[pin]
        fut: F,
        cell: Arc<FinishCell>,
    },
    /// The handler finished the session; the sink's work completes before the response leaves.
    Sink {
        fut: FinishFuture,
        response: Option<Response<B>>,
    },
    /// A refusal, ready at once.
    Reply { response: Option<Response<B>> },
}

/// The response of a [`VerifyService`](crate::VerifyService): the inner service's response (after handing a
/// finish to the sink) or a refusal.
#[pin_project]
pub struct ResponseFuture<F, B> {
    #[pin]
    state: State<F, B>,
}

impl<F, B> ResponseFuture<F, B> {
    pub(crate) fn call(fut: F, cell: Arc<FinishCell>) -> Self {
        ResponseFuture {
            state: State::Call { fut, cell },
        }
    }

    pub(crate) fn reply(response: Response<B>) -> Self {
        ResponseFuture {
            state: State::Reply {
                response: Some(response),
            },
        }
    }
}

impl<F, B, E> Future for ResponseFuture<F, B>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Call { fut, cell } => {
                    let mut response = ready!(fut.poll(cx))?;
                    match cell.on_response(response.headers_mut()) {
                        None => return Poll::Ready(Ok(response)),
                        Some(fut) => state.set(State::Sink {
                            fut,
                            response: Some(response),
                        }),
                    }
                }
                StateProj::Sink { fut, response } => {
                    ready!(fut.as_mut().poll(cx));
                    return Poll::Ready(Ok(response
                        .take()
                        .expect("ResponseFuture polled after completion")));
                }
                StateProj::Reply { response } => {
                    return Poll::Ready(Ok(response
                        .take()
                        .expect("ResponseFuture polled after completion")));
                }
            }
        }
    }
}
