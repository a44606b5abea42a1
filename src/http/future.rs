//! [`ResponseFuture`]: the service's answer — the inner service's response with the quota
//! headers added, or a refusal, ready at once or after the configured delay; for a set decided
//! in Redis, first the decision.

use core::future::Future;
use core::pin::Pin;
use core::task::{ready, Context, Poll};

use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response};
use pin_project_lite::pin_project;

use super::headers::Ready;

/// What a decision made off the calling thread (in Redis) concluded.
#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub(crate) enum Decision {
    /// Go on to the inner service, adding these headers to its response.
    Admit(Option<Box<Ready>>),
    /// Answer this, after this delay.
    Refuse(Response<Bytes>, Option<core::time::Duration>),
}

/// A decision under way: it gives the request's head back with its conclusion.
pub(crate) type Deciding = Pin<Box<dyn Future<Output = (Parts, Decision)> + Send>>;

pin_project! {
    /// The future of [`RateLimitService`](super::RateLimitService)'s response: `F` the inner
    /// service's future; `S` the inner service and `Q` the request body, held while a decision
    /// is made in Redis.
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct ResponseFuture<F, B, S, Q> {
        #[pin]
        kind: Kind<F, B, S, Q>,
    }
}

pin_project! {
    #[project = KindProjection]
    enum Kind<F, B, S, Q> {
        // The decision, in Redis: the inner service (ready) and the request's body wait for it,
        // boxed so that the in-process kinds stay as small as they were.
        Deciding {
            decision: Deciding,
            pending: Option<Box<(S, Q)>>,
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

impl<F, B, S, Q> ResponseFuture<F, B, S, Q> {
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn deciding(decision: Deciding, inner: S, body: Q) -> Self {
        Self {
            kind: Kind::Deciding {
                decision,
                pending: Some(Box::new((inner, body))),
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

impl<F, B, S, Q, E> Future for ResponseFuture<F, B, S, Q>
where
    F: Future<Output = Result<Response<B>, E>>,
    S: tower_service::Service<Request<Q>, Future = F>,
    B: From<Bytes>,
{
    type Output = Result<Response<B>, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let KindProjection::Deciding { decision, pending } =
            self.as_mut().project().kind.project()
        {
            let (parts, decision) = ready!(decision.as_mut().poll(cx));
            let next = match (decision, pending.take()) {
                (Decision::Admit(headers), Some(pending)) => {
                    let (mut inner, body) = *pending;
                    let future = inner.call(Request::from_parts(parts, body));
                    Self::admitted(future, headers)
                }
                (Decision::Refuse(response, delay), _) => {
                    Self::refused(response.map(B::from), delay)
                }
                // Polled again after the decision was taken: nothing is left to answer with.
                (Decision::Admit(_), None) => return Poll::Pending,
            };
            self.set(next);
        }
        match self.project().kind.project() {
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
            // Replaced above as soon as it is ready.
            KindProjection::Deciding { .. } => Poll::Pending,
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

impl<F, B, S, Q> core::fmt::Debug for ResponseFuture<F, B, S, Q> {
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

    /// A service whose future is `Ready`, for the types of the futures below.
    #[derive(Clone)]
    struct Answers;

    impl tower_service::Service<Request<()>> for Answers {
        type Response = Response<Bytes>;
        type Error = ();
        type Future = core::future::Ready<Result<Response<Bytes>, ()>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), ()>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Request<()>) -> Self::Future {
            core::future::ready(Ok(Response::new(Bytes::new())))
        }
    }

    type Answer =
        ResponseFuture<core::future::Ready<Result<Response<Bytes>, ()>>, Bytes, Answers, ()>;

    /// Polled again after answering, every kind stays pending: the admitted one does not poll
    /// its finished inner future (`Ready` would panic), the refused one has nothing left, and
    /// a decided one has become one of those.
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

        let (parts, ()) = Request::new(()).into_parts();
        let decision: Deciding = Box::pin(core::future::ready((parts, Decision::Admit(None))));
        let mut decided = core::pin::pin!(Answer::deciding(decision, Answers, ()));
        assert!(matches!(poll(decided.as_mut()), Poll::Ready(Ok(_))));
        assert!(poll(decided.as_mut()).is_pending());
    }
}
