//! [`RateLimitedSink`]: a `Sink` that passes items on no faster than a limiter allows.

use core::future::Future;
use core::pin::Pin;
use core::task::{ready, Context, Poll};
use core::time::Duration;
use std::collections::VecDeque;

use futures_sink::Sink;
use pin_project_lite::pin_project;

use super::payment::Payment;
use super::Payee;

pin_project! {
    /// A sink passing items on to `Si` no faster than its limiter ([`Payee`]) allows, each costing
    /// one cell or what [`with_cost`](Self::with_cost) says (see the [module docs](super)).
    ///
    /// `start_send` keeps the item; `poll_ready`, `poll_flush` and `poll_close` pay for it and
    /// hand it to `Si`. So `poll_ready` is pending while the last item waits for its cells,
    /// which is the back-pressure a producer (`SinkExt::send`, `StreamExt::forward`) waits on.
    #[must_use = "sinks do nothing unless polled"]
    pub struct RateLimitedSink<Si, T, P, F>
    where
        P: Payee,
    {
        #[pin]
        inner: Si,
        cost: F,
        payment: Payment<P>,
        // Items kept, paid for front first (one, unless a caller sent without waiting for
        // `poll_ready`; none is ever dropped).
        held: VecDeque<T>,
        // Whether the front item's payment has started.
        paying: bool,
    }
}

impl<Si, T, P: Payee> RateLimitedSink<Si, T, P, fn(&T) -> u32> {
    /// Passes items on to `inner`, one cell each, no faster than `payee` allows (an
    /// `Arc<RateLimiter>`, or a backend and request: [`Over`](super::Over)), sleeping on
    /// tokio's timer (feature `tokio`; any other: [`with_timer`](Self::with_timer)).
    #[cfg(feature = "tokio")]
    pub fn new(inner: Si, payee: P) -> Self {
        Self::with_timer(inner, payee, tokio::time::sleep)
    }

    /// `new`, sleeping with `sleep`: a future that ends once the duration it is given has
    /// passed (never before), from any executor's timer whose futures are `Send` (see the
    /// [module docs](super#time)).
    pub fn with_timer<Z, F>(inner: Si, payee: P, sleep: Z) -> Self
    where
        Z: FnMut(Duration) -> F + Send + 'static,
        F: Future<Output = ()> + Send + 'static,
    {
        Self {
            inner,
            cost: |_| 1,
            payment: Payment::new(payee, sleep),
            held: VecDeque::new(),
            paying: false,
        }
    }
}

impl<Si, T, P: Payee, F> RateLimitedSink<Si, T, P, F> {
    /// The same sink with each item costing `cost(&item)` cells.
    pub fn with_cost<G: FnMut(&T) -> u32>(self, cost: G) -> RateLimitedSink<Si, T, P, G> {
        RateLimitedSink {
            inner: self.inner,
            cost,
            payment: self.payment,
            held: self.held,
            paying: self.paying,
        }
    }

    /// The same sink with each wait before another attempt lengthened by a uniform draw from
    /// `[min, max]`, as [`RateLimited::with_jitter`](super::RateLimited::with_jitter) says.
    pub fn with_jitter(mut self, min: Duration, max: Duration) -> Self {
        self.payment.jitter(min, max);
        self
    }

    /// What items are paid to: the limiter, or the backend and request.
    pub fn limiter(&self) -> &P {
        self.payment.payee()
    }

    /// The inner sink.
    pub fn get_ref(&self) -> &Si {
        &self.inner
    }

    /// The inner sink, mutably (items sent to it here skip paying).
    pub fn get_mut(&mut self) -> &mut Si {
        &mut self.inner
    }

    /// The inner sink, and the items sent but not yet passed on to it, in order (paying for
    /// them stops: the cells the first one took are given back where that can be done, as on
    /// a drop).
    pub fn into_inner(self) -> (Si, VecDeque<T>) {
        (self.inner, self.held)
    }
}

impl<Si, T, P, F> RateLimitedSink<Si, T, P, F>
where
    Si: Sink<T>,
    P: Payee,
    F: FnMut(&T) -> u32,
{
    /// Pays for every kept item and hands each to the inner sink, in order.
    fn poll_forward(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Si::Error>> {
        let mut this = self.project();
        while let Some(front) = this.held.front() {
            if !*this.paying {
                this.payment.start((this.cost)(front));
                *this.paying = true;
            }
            ready!(this.payment.poll_paid(cx));
            ready!(this.inner.as_mut().poll_ready(cx))?;
            let Some(item) = this.held.pop_front() else {
                break;
            };
            this.payment.settle();
            *this.paying = false;
            this.inner.as_mut().start_send(item)?;
        }
        Poll::Ready(Ok(()))
    }
}

impl<Si, T, P, F> Sink<T> for RateLimitedSink<Si, T, P, F>
where
    Si: Sink<T>,
    P: Payee,
    F: FnMut(&T) -> u32,
{
    type Error = Si::Error;

    fn poll_ready(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Si::Error>> {
        ready!(self.as_mut().poll_forward(cx))?;
        self.project().inner.poll_ready(cx)
    }

    fn start_send(self: Pin<&mut Self>, item: T) -> Result<(), Si::Error> {
        self.project().held.push_back(item);
        Ok(())
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Si::Error>> {
        ready!(self.as_mut().poll_forward(cx))?;
        self.project().inner.poll_flush(cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Si::Error>> {
        ready!(self.as_mut().poll_forward(cx))?;
        self.project().inner.poll_close(cx)
    }
}

impl<Si, T, P, F> core::fmt::Debug for RateLimitedSink<Si, T, P, F>
where
    Si: core::fmt::Debug,
    P: Payee + core::fmt::Debug,
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RateLimitedSink")
            .field("inner", &self.inner)
            .field("payment", &self.payment)
            .field("kept", &self.held.len())
            .finish_non_exhaustive()
    }
}
