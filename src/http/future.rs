//! [`ResponseFuture`]: the service's answer — the inner service's response with the quota
//! headers added, or a refusal, ready at once or after the configured delay; for a backend
//! whose decision is pending ([`Defer`]), first the decision.

use core::future::Future;
use core::pin::Pin;
use core::task::{ready, Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response};
use pin_project_lite::pin_project;

use super::headers::Ready;
use crate::backend::{AtOnce, Pending, Remote, Settled};

/// What the middleware concludes from a decision, as the sealed [`Defer`] passes it: the
/// conclusion, and the `X-RateLimit-Source` value if the layer writes one.
pub struct Concluded(pub(crate) Conclusion, pub(crate) Option<HeaderValue>);

/// What the middleware concludes from a decision.
pub(crate) enum Conclusion {
    /// Go on to the inner service, adding these headers to its response.
    Admit(Option<Box<Ready>>),
    /// Answer this, after this delay.
    Refuse(Response<Bytes>, Option<core::time::Duration>),
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
    use super::{Conclude, Later, Request, Response};

    /// What [`Defer`](super::Defer) does, out of users' sight.
    pub trait Hold<S: tower_service::Service<Request<Q>>, Q, B> {
        /// The response: the decision awaited, then the inner service's answer or the refusal.
        fn defer(
            self,
            inner: &mut S,
            request: Request<Q>,
            conclude: Conclude,
        ) -> Later<Result<Response<B>, S::Error>>;
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
    B: From<Bytes> + Send + 'static,
{
}

impl<S, Q, B> sealed::Hold<S, Q, B> for AtOnce
where
    S: tower_service::Service<Request<Q>, Response = Response<B>>,
{
    fn defer(self, _: &mut S, _: Request<Q>, _: Conclude) -> Later<Result<Response<B>, S::Error>> {
        match self {}
    }
}

impl<S, Q, B> sealed::Hold<S, Q, B> for Remote
where
    S: tower_service::Service<Request<Q>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send,
    Q: Send + 'static,
    B: From<Bytes> + Send + 'static,
{
    fn defer(
        self,
        inner: &mut S,
        request: Request<Q>,
        conclude: Conclude,
    ) -> Later<Result<Response<B>, S::Error>> {
        let clone = inner.clone();
        let mut ready = core::mem::replace(inner, clone);
        Box::pin(async move {
            let settled = self.await;
            let source = settled.source;
            let Concluded(conclusion, header) = conclude(settled, request.headers());
            let mut response = match conclusion {
                Conclusion::Admit(headers) => {
                    let mut request = request;
                    request.extensions_mut().insert(source);
                    let mut response = ready.call(request).await?;
                    if let Some(headers) = headers {
                        headers.write(response.headers_mut());
                    }
                    response
                }
                Conclusion::Refuse(response, delay) => {
                    if let Some(delay) = delay {
                        tokio::time::sleep(delay).await;
                    }
                    response.map(B::from)
                }
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
    /// service's future, `B` the response body.
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct ResponseFuture<F: Future, B> {
        #[pin]
        kind: Kind<F, B>,
    }
}

pin_project! {
    #[project = KindProjection]
    enum Kind<F: Future, B> {
        // A decision that was pending, and the rest of the response after it (a remote
        // backend's), boxed so that the in-process kinds stay as small as they were.
        Later {
            // `None` once answered: polled again, it stays pending instead of resuming a
            // finished future (which panics).
            future: Option<Later<F::Output>>,
        },
        Admitted {
            #[pin]
            future: F,
            // Boxed: prepared headers are about 100 bytes, and a future that carried them inline
            // was moved at a cost above tower_governor's whole overhead (BENCHMARKS.md).
            headers: Option<Box<Ready>>,
            // Answered: polled again, it stays pending instead of polling a finished future
            // (a flag, not a state of its own: switching states dropped the finished future
            // in place, a cost the no-header case measurably paid; BENCHMARKS.md).
            answered: bool,
        },
        Refused {
            // Boxed: refusals are the rare answer; the future stays the inner one's size.
            response: Option<Box<Response<B>>>,
            // Boxed: a timer is large, and most refusals are not delayed.
            delay: Option<Pin<Box<tokio::time::Sleep>>>,
        },
    }
}

impl<F: Future, B> ResponseFuture<F, B> {
    pub(crate) fn later(future: Later<F::Output>) -> Self {
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

    pub(crate) fn refused(response: Response<B>, delay: Option<core::time::Duration>) -> Self {
        Self {
            kind: Kind::Refused {
                response: Some(Box::new(response)),
                delay: delay.map(|delay| Box::pin(tokio::time::sleep(delay))),
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
                let mut response = answer?;
                if let Some(headers) = headers.take() {
                    headers.write(response.headers_mut());
                }
                Poll::Ready(Ok(response))
            }
            KindProjection::Refused { response, delay } => {
                if let Some(sleep) = delay {
                    ready!(sleep.as_mut().poll(cx));
                    *delay = None;
                }
                match response.take() {
                    Some(response) => Poll::Ready(Ok(*response)),
                    None => Poll::Pending,
                }
            }
        }
    }
}

impl<F: Future, B> core::fmt::Debug for ResponseFuture<F, B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
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

    type Answer = ResponseFuture<core::future::Ready<Result<Response<Bytes>, ()>>, Bytes>;

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

        let later = Answer::later(Box::pin(async { Ok(Response::new(Bytes::new())) }));
        let mut later = core::pin::pin!(later);
        assert!(matches!(poll(later.as_mut()), Poll::Ready(Ok(_))));
        assert!(poll(later.as_mut()).is_pending());
    }
}
