//! [`Payment`]: one item's cost being paid to a limiter, cell batch by cell batch, sleeping on
//! tokio's timer in between; what both adapters drive, and what gives the cells back, exactly
//! (a [`Receipt`]), if the adapter is dropped before the item goes on.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::sync::Arc;

use crate::algorithm::Algorithm;
use crate::clock::Clock;
use crate::{RateLimiter, Receipt};

/// An item's cost, partly paid.
#[derive(Debug)]
pub(super) struct Payment<C: Clock, A: Algorithm> {
    limiter: Arc<RateLimiter<C, A>>,
    /// Cells still owed by the item under way (0: nothing under way, or paid).
    owed: u32,
    /// What the item under way has taken (given back if it never goes on): the batches taken
    /// one on top of the other, as one receipt; a batch taken after another request took cells
    /// replaces the earlier ones, which can no longer be given back exactly.
    taken: Receipt,
    /// The sleep before the next attempt (a refusal's wait), or before the item goes on (a
    /// shaper's delay). Boxed: tokio's `Sleep` is not `Unpin`.
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<C: Clock, A: Algorithm> Payment<C, A> {
    pub(super) fn new(limiter: Arc<RateLimiter<C, A>>) -> Self {
        Self {
            limiter,
            owed: 0,
            taken: Receipt::default(),
            sleep: None,
        }
    }

    /// The limiter paid.
    pub(super) fn limiter(&self) -> &Arc<RateLimiter<C, A>> {
        &self.limiter
    }

    /// Starts paying `cost` cells for a new item (the last one must be paid).
    pub(super) fn start(&mut self, cost: u32) {
        debug_assert!(self.owed == 0 && self.sleep.is_none());
        self.owed = cost;
        self.taken = Receipt::default();
    }

    /// The item paid for has gone on: its cells are spent, and nothing is given back.
    pub(super) fn settle(&mut self) {
        self.taken = Receipt::default();
    }

    /// Pays what is owed: `Ready` once every cell is taken and any delay slept, `Pending` while
    /// sleeping (the waker is registered with tokio's timer). The cells stay the payment's
    /// (given back on drop) until [`settle`](Self::settle).
    pub(super) fn poll_paid(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            if let Some(sleep) = self.sleep.as_mut() {
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.sleep = None;
            }
            if self.owed == 0 {
                return Poll::Ready(());
            }
            let wait = match self.limiter.reserve_up_to(self.owed) {
                Ok((k, allowed, receipt)) => {
                    self.owed -= k;
                    self.taken = core::mem::take(&mut self.taken).then(receipt);
                    allowed.delay()
                }
                Err(refused) => refused.retry_after(),
            };
            if wait > Duration::ZERO {
                self.sleep = Some(Box::pin(tokio::time::sleep(wait)));
            }
        }
    }
}

impl<C: Clock, A: Algorithm> Drop for Payment<C, A> {
    fn drop(&mut self) {
        // An item that never went on gives back what it took, if nothing was built on it.
        self.limiter.give_back(core::mem::take(&mut self.taken));
    }
}
