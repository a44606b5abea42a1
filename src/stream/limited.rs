//! [`RateLimited`]: a `Stream` whose items go on no faster than a limiter allows.

use core::future::Future;
use core::pin::Pin;
use core::task::{ready, Context, Poll};
use core::time::Duration;

use futures_core::Stream;
use pin_project_lite::pin_project;

use super::payment::Payment;
use super::Payee;

pin_project! {
    /// A stream yielding `S`'s items no faster than its limiter ([`Payee`]) allows, each costing
    /// one cell or what [`with_cost`](Self::with_cost) says (see the [module docs](super) for
    /// how an item is paid for, fairness and cancellation).
    ///
    /// An item is pulled from `S` only when the next one is asked for, and yielded once it is
    /// paid for; `S` ending ends this stream.
    #[must_use = "streams do nothing unless polled"]
    pub struct RateLimited<S, P, F>
    where
        S: Stream,
        P: Payee,
    {
        #[pin]
        inner: S,
        cost: F,
        payment: Payment<P>,
        held: Option<S::Item>,
    }
}

impl<S: Stream, P: Payee> RateLimited<S, P, fn(&S::Item) -> u32> {
    /// `inner`'s items, one cell each, no faster than `payee` allows (an
    /// `Arc<RateLimiter>`, or a backend and request: [`Over`](super::Over)), sleeping on
    /// tokio's timer (feature `tokio`; any other: [`with_timer`](Self::with_timer)).
    #[cfg(feature = "tokio")]
    pub fn new(inner: S, payee: P) -> Self {
        Self::with_timer(inner, payee, tokio::time::sleep)
    }

    /// `new`, sleeping with `sleep`: a future that ends once the duration it is given has
    /// passed (never before), from any executor's timer whose futures are `Send` (see the
    /// [module docs](super#time)).
    pub fn with_timer<Z, T>(inner: S, payee: P, sleep: Z) -> Self
    where
        Z: FnMut(Duration) -> T + Send + 'static,
        T: Future<Output = ()> + Send + 'static,
    {
        Self {
            inner,
            cost: |_| 1,
            payment: Payment::new(payee, sleep),
            held: None,
        }
    }
}

impl<S: Stream, P: Payee, F> RateLimited<S, P, F> {
    /// The same stream with each item costing `cost(&item)` cells (bytes, rows, tokens); an
    /// item costing 0 goes on at once.
    pub fn with_cost<G: FnMut(&S::Item) -> u32>(self, cost: G) -> RateLimited<S, P, G> {
        RateLimited {
            inner: self.inner,
            cost,
            payment: self.payment,
            held: self.held,
        }
    }

    /// The same stream with each wait before another attempt (a refusal's `retry_after`)
    /// lengthened by a uniform draw from `[min, max]` (the bounds swapped if given the wrong way
    /// round), so that streams refused together do not come back together (governor's
    /// `with_jitter`). The generator is the per-thread one
    /// [`seed_jitter`](crate::policy::seed_jitter) seeds.
    pub fn with_jitter(mut self, min: Duration, max: Duration) -> Self {
        self.payment.jitter(min, max);
        self
    }

    /// What items are paid to: the limiter, or the backend and request.
    pub fn limiter(&self) -> &P {
        self.payment.payee()
    }

    /// The inner stream.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner stream, mutably (taking items from it here skips paying for them).
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner stream, and the item pulled from it but not yet yielded (paying for it
    /// stops: the cells it took are given back where that can be done, as on a drop).
    pub fn into_inner(self) -> (S, Option<S::Item>) {
        (self.inner, self.held)
    }
}

impl<S, P, F> Stream for RateLimited<S, P, F>
where
    S: Stream,
    P: Payee,
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

impl<S, P, F> core::fmt::Debug for RateLimited<S, P, F>
where
    S: Stream + core::fmt::Debug,
    P: Payee + core::fmt::Debug,
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RateLimited")
            .field("inner", &self.inner)
            .field("payment", &self.payment)
            .field("holding", &self.held.is_some())
            .finish_non_exhaustive()
    }
}
