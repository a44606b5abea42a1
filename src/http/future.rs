//! [`ResponseFuture`]: the service's answer — the inner service's response with the quota
//! headers added, or a refusal, ready at once or after the configured delay.

use core::future::Future;
use core::pin::Pin;
use core::task::{ready, Context, Poll};

use http::Response;
use pin_project_lite::pin_project;

use super::headers::Ready;

pin_project! {
    /// The future of [`RateLimitService`](super::RateLimitService)'s response.
    pub struct ResponseFuture<F, B> {
        #[pin]
        kind: Kind<F, B>,
    }
}

pin_project! {
    #[project = KindProjection]
    enum Kind<F, B> {
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

impl<F, B> ResponseFuture<F, B> {
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

impl<F, B> core::fmt::Debug for ResponseFuture<F, B> {
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

    /// Polled again after answering, either kind stays pending: the admitted one does not poll
    /// its finished inner future (`Ready` would panic), the refused one has nothing left.
    #[test]
    fn answers_once_then_stays_pending() {
        let inner = core::future::ready(Ok::<_, ()>(Response::new(())));
        let mut admitted = core::pin::pin!(ResponseFuture::<_, ()>::admitted(inner, None));
        assert!(matches!(poll(admitted.as_mut()), Poll::Ready(Ok(_))));
        assert!(poll(admitted.as_mut()).is_pending());

        let refused = ResponseFuture::<core::future::Ready<Result<Response<()>, ()>>, ()>::refused(
            Response::new(()),
            None,
        );
        let mut refused = core::pin::pin!(refused);
        assert!(matches!(poll(refused.as_mut()), Poll::Ready(Ok(_))));
        assert!(poll(refused.as_mut()).is_pending());
    }
}
