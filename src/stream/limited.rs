//! [`RateLimited`]: a `Stream` whose items go on no faster than a limiter allows.

use core::pin::Pin;
use core::task::{ready, Context, Poll};
use std::sync::Arc;

use futures_core::Stream;
use pin_project_lite::pin_project;

use super::payment::Payment;
use crate::algorithm::Algorithm;
use crate::clock::Clock;
use crate::RateLimiter;

pin_project! {
    /// A stream yielding `S`'s items no faster than its [`RateLimiter`] allows, each costing
    /// one cell or what [`with_cost`](Self::with_cost) says (see the [module docs](super) for
    /// how an item is paid for, fairness and cancellation).
    ///
    /// An item is pulled from `S` only when the next one is asked for, and yielded once it is
    /// paid for; `S` ending ends this stream.
    #[must_use = "streams do nothing unless polled"]
    pub struct RateLimited<S, C, A, F>
    where
        S: Stream,
        C: Clock,
        A: Algorithm,
    {
        #[pin]
        inner: S,
        cost: F,
        payment: Payment<C, A>,
        held: Option<S::Item>,
    }
}

impl<S: Stream, C: Clock, A: Algorithm> RateLimited<S, C, A, fn(&S::Item) -> u32> {
    /// `inner`'s items, one cell each, no faster than `limiter` allows.
    pub fn new(inner: S, limiter: Arc<RateLimiter<C, A>>) -> Self {
        Self {
            inner,
            cost: |_| 1,
            payment: Payment::new(limiter),
            held: None,
        }
    }
}

impl<S: Stream, C: Clock, A: Algorithm, F> RateLimited<S, C, A, F> {
    /// The same stream with each item costing `cost(&item)` cells (bytes, rows, tokens); an
    /// item costing 0 goes on at once.
    pub fn with_cost<G: FnMut(&S::Item) -> u32>(self, cost: G) -> RateLimited<S, C, A, G> {
        RateLimited {
            inner: self.inner,
            cost,
            payment: self.payment,
            held: self.held,
        }
    }

    /// The limiter.
    pub fn limiter(&self) -> &Arc<RateLimiter<C, A>> {
        self.payment.limiter()
    }

    /// The inner stream.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner stream, and the item pulled from it but not yet yielded (paying for it
    /// stops: the cells it took are given back).
    pub fn into_inner(self) -> (S, Option<S::Item>) {
        (self.inner, self.held)
    }
}

impl<S, C, A, F> Stream for RateLimited<S, C, A, F>
where
    S: Stream,
    C: Clock,
    A: Algorithm,
    F: FnMut(&S::Item) -> u32,
{
    type Item = S::Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        let mut this = self.project();
        if this.held.is_none() {
            let Some(item) = ready!(this.inner.as_mut().poll_next(cx)) else {
                return Poll::Ready(None);
            };
            this.payment.start((this.cost)(&item));
            *this.held = Some(item);
        }
        ready!(this.payment.poll_paid(cx));
        this.payment.settle();
        Poll::Ready(this.held.take())
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let held = usize::from(self.held.is_some());
        let (low, high) = self.inner.size_hint();
        (
            low.saturating_add(held),
            high.and_then(|h| h.checked_add(held)),
        )
    }
}

impl<S, C, A, F> core::fmt::Debug for RateLimited<S, C, A, F>
where
    S: Stream + core::fmt::Debug,
    C: Clock + core::fmt::Debug,
    A: Algorithm + core::fmt::Debug,
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RateLimited")
            .field("inner", &self.inner)
            .field("payment", &self.payment)
            .field("holding", &self.held.is_some())
            .finish_non_exhaustive()
    }
}
