//! The response body of everything behind the layer: the inner service's body, or a page the room made.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project::pin_project;

/// The body of a response that went through the room: either the inner service's body, untouched, or a body the
/// room wrote itself (a holding page, a JSON status, a JWKS document), held in memory in one piece.
///
/// It implements [`http_body::Body`] with the inner body's data and error types, so axum (and hyper) take it as
/// they take the inner body. A body the room wrote never fails.
#[pin_project(project = RoomBodyProj)]
#[derive(Debug)]
pub struct RoomBody<B> {
    #[pin]
    kind: Kind<B>,
}

#[pin_project(project = KindProj)]
#[derive(Debug)]
enum Kind<B> {
    Inner(#[pin] B),
    Room(Option<Bytes>),
}

impl<B> RoomBody<B> {
    /// Wraps the inner service's body.
    pub fn inner(body: B) -> Self {
        Self {
            kind: Kind::Inner(body),
        }
    }

    /// A body the room wrote.
    pub fn room(bytes: impl Into<Bytes>) -> Self {
        let bytes = bytes.into();
        Self {
            kind: Kind::Room((!bytes.is_empty()).then_some(bytes)),
        }
    }

    /// An empty body the room wrote.
    pub fn empty() -> Self {
        Self {
            kind: Kind::Room(None),
        }
    }

    /// Whether the room wrote this body (rather than the inner service).
    pub fn is_room(&self) -> bool {
        matches!(self.kind, Kind::Room(_))
    }
}

impl<B> Body for RoomBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        match self.project().kind.project() {
            KindProj::Inner(b) => b.poll_frame(cx),
            KindProj::Room(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner(b) => b.is_end_stream(),
            Kind::Room(bytes) => bytes.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner(b) => b.size_hint(),
            Kind::Room(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Full};

    #[tokio::test]
    async fn room_and_inner_bodies_read_back() {
        let b: RoomBody<Full<Bytes>> = RoomBody::room("hello");
        assert_eq!(b.size_hint().exact(), Some(5));
        assert!(b.is_room());
        assert_eq!(b.collect().await.unwrap().to_bytes(), "hello");
        let b = RoomBody::inner(Full::new(Bytes::from_static(b"inner")));
        assert!(!b.is_room());
        assert_eq!(b.collect().await.unwrap().to_bytes(), "inner");
        let b: RoomBody<Full<Bytes>> = RoomBody::empty();
        assert!(b.is_end_stream());
    }
}
