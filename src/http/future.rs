//! [`ResponseFuture`]: the service's answer — the inner service's response with the quota
//! headers added, or a refusal, ready at once or after the configured delay; for a backend
//! whose decision is pending ([`Defer`]), first the decision. Its body is a [`ResponseBody`]:
//! the inner service's, or the refusal's bytes.

use core::future::Future;
use core::pin::Pin;
use core::task::{ready, Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use super::headers::Ready;
use super::refusal::{Answer, Ruling};
use crate::backend::{AtOnce, Pending, Remote, Settled};

/// What the middleware concludes from a decision, as the sealed [`Defer`] passes it: the
/// conclusion (never pending), and the `X-RateLimit-Source` value if the layer writes one.
pub struct Concluded(
    pub(crate) Judged<core::convert::Infallible>,
    pub(crate) Option<HeaderValue>,
);

/// What deciding a request came to: the quota headers an admission carries (if the style has
/// any) and its ruling (if the layer attaches it), the refusal (boxed: the rare answer, and
/// the admission's result stays small), or a decision still pending.
pub(crate) enum Judged<P> {
    Admit(Option<Box<Ready>>, Option<Box<Ruling>>),
    Refuse(Box<Answer>),
    Pending(P),
}

/// How the middleware concludes from a settled decision, given the request's headers.
pub type Conclude = Box<dyn FnOnce(Settled, &HeaderMap) -> Concluded + Send>;

/// The rest of a response whose decision was pending: boxed, as the decision is.
pub type Later<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// How a service waits for a decision its backend could not make at once (the backend's
/// [`Pending`]). [`AtOnce`] never waits, and asks nothing of the inner service. A [`Remote`]
/// decision holds the inner service, made ready, and the request until it settles (the
/// service is cloned to take its place, tower's way of calling a service later, so it must be
/// `Clone`, as axum's are).
pub trait Defer<S, Q, B>: Pending + sealed::Hold<S, Q, B>
where
    S: tower_service::Service<Request<Q>, Response = Response<B>>,
{
}

pub(crate) use sealed::Hold;

mod sealed {
    use super::{Conclude, Later, Request, Response, ResponseBody};

    /// What [`Defer`](super::Defer) does, out of users' sight.
    pub trait Hold<S: tower_service::Service<Request<Q>>, Q, B> {
        /// The response: the decision awaited, then the inner service's answer or the refusal.
        fn defer(
            self,
            inner: &mut S,
            request: Request<Q>,
            conclude: Conclude,
        ) -> Later<Result<Response<ResponseBody<B>>, S::Error>>;
    }
}

impl<S, Q, B> Defer<S, Q, B> for AtOnce where
    S: tower_service::Service<Request<Q>, Response = Response<B>>
{
}

impl<S, Q, B> Defer<S, Q, B> for Remote
where
    S: tower_service::Service<Request<Q>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send,
    Q: Send + 'static,
    B: Send + 'static,
{
}

impl<S, Q, B> sealed::Hold<S, Q, B> for AtOnce
where
    S: tower_service::Service<Request<Q>, Response = Response<B>>,
{
    fn defer(
        self,
        _: &mut S,
        _: Request<Q>,
        _: Conclude,
    ) -> Later<Result<Response<ResponseBody<B>>, S::Error>> {
        match self {}
    }
}

impl<S, Q, B> sealed::Hold<S, Q, B> for Remote
where
    S: tower_service::Service<Request<Q>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send,
    Q: Send + 'static,
    B: Send + 'static,
{
    fn defer(
        self,
        inner: &mut S,
        request: Request<Q>,
        conclude: Conclude,
    ) -> Later<Result<Response<ResponseBody<B>>, S::Error>> {
        let clone = inner.clone();
        let mut ready = core::mem::replace(inner, clone);
        Box::pin(async move {
            let settled = self.await;
            let source = settled.source;
            let Concluded(judged, header) = conclude(settled, request.headers());
            let mut response = match judged {
                Judged::Admit(headers, ruling) => {
                    let mut request = request;
                    request.extensions_mut().insert(source);
                    if let Some(ruling) = ruling {
                        let outer = request.extensions_mut().remove();
                        request.extensions_mut().insert(ruling.after(outer));
                    }
                    let mut response = ready.call(request).await?.map(ResponseBody::inner);
                    if let Some(headers) = headers {
                        headers.write(response.headers_mut());
                    }
                    response
                }
                Judged::Refuse(refused) => {
                    let (response, delay) = *refused;
                    if let Some(delay) = delay {
                        tokio::time::sleep(delay).await;
                    }
                    response.map(ResponseBody::refusal)
                }
                Judged::Pending(never) => match never {},
            };
            if let Some(header) = header {
                response
                    .headers_mut()
                    .insert(super::headers::X_RATELIMIT_SOURCE, header);
            }
            Ok(response)
        })
    }
}

pin_project! {
    /// The future of [`RateLimitService`](super::RateLimitService)'s response: `F` the inner
    /// service's future, which answers a `Response<B>` or an error `E`.
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct ResponseFuture<F, B, E> {
        #[pin]
        kind: Kind<F, B, E>,
    }
}

pin_project! {
    #[project = KindProjection]
    enum Kind<F, B, E> {
        // A decision that was pending, and the rest of the response after it (a remote
        // backend's), boxed so that the in-process kinds stay as small as they were.
        Later {
            // `None` once answered: polled again, it stays pending instead of resuming a
            // finished future (which panics).
            future: Option<Later<Result<Response<ResponseBody<B>>, E>>>,
        },
        Admitted {
            #[pin]
            future: F,
            // Boxed: prepared headers are about 100 bytes, and a future that carried them inline
            // was moved at a cost above tower_governor's whole overhead (`--bench http_paired`).
            headers: Option<Box<Ready>>,
            // Answered: polled again, it stays pending instead of polling a finished future
            // (a flag, not a state of its own: switching states dropped the finished future
            // in place, a cost the no-header case measurably paid; `--bench http_paired`).
            answered: bool,
        },
        Refused {
            // Boxed: refusals are the rare answer; the future stays the inner one's size.
            response: Option<Box<Response<Bytes>>>,
            // Boxed: a timer is large, and most refusals are not delayed.
            delay: Option<Pin<Box<tokio::time::Sleep>>>,
        },
    }
}

impl<F, B, E> ResponseFuture<F, B, E> {
    pub(crate) fn later(future: Later<Result<Response<ResponseBody<B>>, E>>) -> Self {
        Self {
            kind: Kind::Later {
                future: Some(future),
            },
        }
    }

    pub(crate) fn admitted(future: F, headers: Option<Box<Ready>>) -> Self {
        Self {
            kind: Kind::Admitted {
                future,
                headers,
                answered: false,
            },
        }
    }

    pub(crate) fn refused(response: Response<Bytes>, delay: Option<core::time::Duration>) -> Self {
        Self {
            kind: Kind::Refused {
                response: Some(Box::new(response)),
                delay: delay.map(|delay| Box::pin(tokio::time::sleep(delay))),
            },
        }
    }
}

impl<F, B, E> Future for ResponseFuture<F, B, E>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<ResponseBody<B>>, E>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProjection::Later { future } => {
                let Some(pending) = future else {
                    return Poll::Pending;
                };
                let answer = ready!(pending.as_mut().poll(cx));
                *future = None;
                Poll::Ready(answer)
            }
            KindProjection::Admitted {
                future,
                headers,
                answered,
            } => {
                if *answered {
                    return Poll::Pending;
                }
                let answer = ready!(future.poll(cx));
                *answered = true;
                let (mut parts, body) = answer?.into_parts();
                if let Some(headers) = headers.take() {
                    headers.write(&mut parts.headers);
                }
                Poll::Ready(Ok(Response::from_parts(parts, ResponseBody::inner(body))))
            }
            KindProjection::Refused { response, delay } => {
                if let Some(sleep) = delay {
                    ready!(sleep.as_mut().poll(cx));
                    *delay = None;
                }
                match response.take() {
                    Some(response) => Poll::Ready(Ok(response.map(ResponseBody::refusal))),
                    None => Poll::Pending,
                }
            }
        }
    }
}

impl<F, B, E> core::fmt::Debug for ResponseFuture<F, B, E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

pin_project! {
    /// The body of [`RateLimitService`](super::RateLimitService)'s responses: the inner
    /// service's body, or a refusal's bytes. It is an [`http_body::Body`] whenever the inner one
    /// is one of `Bytes` (as axum's, hyper's and tonic's are), with the same error, so the layer fits any server that takes a body of its own type
    /// (axum, hyper, tonic's `Server::builder().layer(...)`).
    pub struct ResponseBody<B> {
        #[pin]
        kind: BodyKind<B>,
    }
}

pin_project! {
    #[project = BodyProjection]
    enum BodyKind<B> {
        Inner { #[pin] body: B },
        // `None` once sent. Boxed: a refusal is the rare answer, and a response whose body
        // is no larger than the inner one's moves as cheaply.
        Refusal { bytes: Option<Box<Bytes>> },
    }
}

impl<B> ResponseBody<B> {
    fn inner(body: B) -> Self {
        Self {
            kind: BodyKind::Inner { body },
        }
    }

    fn refusal(bytes: Bytes) -> Self {
        let bytes = (!bytes.is_empty()).then(|| Box::new(bytes));
        Self {
            kind: BodyKind::Refusal { bytes },
        }
    }
}

impl<B: Body<Data = Bytes>> Body for ResponseBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    #[inline]
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.project().kind.project() {
            BodyProjection::Inner { body } => body.poll_frame(cx),
            BodyProjection::Refusal { bytes } => {
                Poll::Ready(bytes.take().map(|b| Ok(Frame::data(*b))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            BodyKind::Inner { body } => body.is_end_stream(),
            BodyKind::Refusal { bytes } => bytes.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            BodyKind::Inner { body } => body.size_hint(),
            BodyKind::Refusal { bytes } => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64))
            }
        }
    }
}

impl<B: core::fmt::Debug> core::fmt::Debug for ResponseBody<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match &self.kind {
            BodyKind::Inner { body } => f.debug_tuple("ResponseBody").field(body).finish(),
            BodyKind::Refusal { bytes } => f.debug_tuple("ResponseBody").field(bytes).finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Noop;

    impl std::task::Wake for Noop {
        fn wake(self: std::sync::Arc<Self>) {}
    }

    fn poll<F: Future>(future: Pin<&mut F>) -> Poll<F::Output> {
        let waker = std::task::Waker::from(std::sync::Arc::new(Noop));
        future.poll(&mut Context::from_waker(&waker))
    }

    type Answer = ResponseFuture<core::future::Ready<Result<Response<Bytes>, ()>>, Bytes, ()>;

    /// Polled again after answering, every kind stays pending: the admitted one does not poll
    /// its finished inner future (`Ready` would panic), the refused one has nothing left, and
    /// the one whose decision was pending does not resume its finished future (which would
    /// panic).
    #[test]
    fn answers_once_then_stays_pending() {
        let inner = core::future::ready(Ok::<_, ()>(Response::new(Bytes::new())));
        let mut admitted = core::pin::pin!(Answer::admitted(inner, None));
        assert!(matches!(poll(admitted.as_mut()), Poll::Ready(Ok(_))));
        assert!(poll(admitted.as_mut()).is_pending());

        let refused = Answer::refused(Response::new(Bytes::new()), None);
        let mut refused = core::pin::pin!(refused);
        assert!(matches!(poll(refused.as_mut()), Poll::Ready(Ok(_))));
        assert!(poll(refused.as_mut()).is_pending());

        let later = Answer::later(Box::pin(async {
            Ok(Response::new(ResponseBody::inner(Bytes::new())))
        }));
        let mut later = core::pin::pin!(later);
        assert!(matches!(poll(later.as_mut()), Poll::Ready(Ok(_))));
        assert!(poll(later.as_mut()).is_pending());
    }

    /// A refusal's body gives its bytes once, with their exact length, then ends; an empty
    /// one (a gRPC refusal's) is at its end at once; an inner body is passed through.
    #[test]
    fn a_refusal_body_sends_its_bytes_once() {
        let mut body = core::pin::pin!(ResponseBody::<String>::refusal(Bytes::from("no")));
        assert_eq!(body.size_hint().exact(), Some(2));
        assert!(!body.is_end_stream());
        let Poll::Ready(Some(Ok(frame))) = poll_frame(body.as_mut()) else {
            panic!("no frame");
        };
        assert_eq!(frame.into_data().ok(), Some(Bytes::from("no")));
        assert!(body.is_end_stream());
        assert!(matches!(poll_frame(body.as_mut()), Poll::Ready(None)));

        let empty = ResponseBody::<String>::refusal(Bytes::new());
        assert!(empty.is_end_stream());
        assert_eq!(empty.size_hint().exact(), Some(0));

        let mut inner = core::pin::pin!(ResponseBody::inner(String::from("yes")));
        assert_eq!(inner.size_hint().exact(), Some(3));
        let Poll::Ready(Some(Ok(frame))) = poll_frame(inner.as_mut()) else {
            panic!("no frame");
        };
        assert_eq!(frame.into_data().ok(), Some(Bytes::from("yes")));
    }

    type Polled<B> = Poll<Option<Result<Frame<<B as Body>::Data>, <B as Body>::Error>>>;

    fn poll_frame<B: Body>(body: Pin<&mut B>) -> Polled<B> {
        let waker = std::task::Waker::from(std::sync::Arc::new(Noop));
        body.poll_frame(&mut Context::from_waker(&waker))
    }
}
