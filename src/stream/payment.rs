//! What an item's cells are paid to ([`Payee`]: a [`RateLimiter`] or a [`Backend`] with the
//! request naming the buckets, [`Over`]), and [`Payment`]: one item's cost being paid, batch by
//! batch, sleeping on the adapter's timer in between; what both adapters drive.

use core::borrow::Borrow;
use core::future::Future;
use core::marker::PhantomData;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::sync::Arc;

use crate::algorithm::Algorithm;
use crate::backend::{Backend, Verdict};
use crate::clock::{nanos, Clock};
use crate::jitter;
use crate::{RateLimiter, Receipt};

/// A value reached only through `&mut` (never locked), so that what holds it is `Sync` as long
/// as the value is `Send`: a backend's call under way, an adapter's timer.
#[doc(hidden)]
#[derive(Default)]
pub struct Unshared<T>(std::sync::Mutex<T>);

impl<T> Unshared<T> {
    fn new(value: T) -> Self {
        Self(std::sync::Mutex::new(value))
    }

    fn get(&mut self) -> &mut T {
        self.0
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A sleep under way.
type Sleeping = Pin<Box<dyn Future<Output = ()> + Send>>;

/// How an adapter sleeps: the timer it was given, and its sleep under way.
struct Timer {
    sleep: Box<dyn FnMut(Duration) -> Sleeping + Send>,
    sleeping: Option<Sleeping>,
}

/// What a stream or sink pays its items' cells to: an `Arc<`[`RateLimiter`]`>`, or a
/// [`Backend`] with one request ([`Over`]). Sealed.
pub trait Payee: sealed::Sealed + Unpin {
    /// What an item under way has taken, or the call taking it.
    #[doc(hidden)]
    type Taken: Default + Send;

    /// Takes up to `owed` cells: how many and the delay before they may be used, or the
    /// wait before asking again.
    #[doc(hidden)]
    fn poll_take(
        &self,
        taken: &mut Self::Taken,
        owed: u32,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(u32, Duration), Duration>>;

    /// Gives back what an item that never went on took, where that can be done exactly.
    #[doc(hidden)]
    fn give_back(&self, taken: Self::Taken);
}

mod sealed {
    pub trait Sealed {}
    impl<C: crate::clock::Clock, A: crate::algorithm::Algorithm> Sealed
        for std::sync::Arc<crate::RateLimiter<C, A>>
    {
    }
    impl<B, Q, R: ?Sized> Sealed for super::Over<B, Q, R> {}
}

/// A limiter's payments: each batch a reservation, the batches of one item kept as one receipt
/// (a batch taken after another request took cells replaces the earlier ones, which can no
/// longer be given back exactly).
impl<C: Clock, A: Algorithm> Payee for Arc<RateLimiter<C, A>> {
    type Taken = Receipt;

    fn poll_take(
        &self,
        taken: &mut Receipt,
        owed: u32,
        _: &mut Context<'_>,
    ) -> Poll<Result<(u32, Duration), Duration>> {
        Poll::Ready(match self.reserve_up_to(owed) {
            Ok((k, allowed, receipt)) => {
                *taken = core::mem::take(taken).then(receipt);
                Ok((k, allowed.delay()))
            }
            Err(refused) => Err(refused.conforms_after()),
        })
    }

    fn give_back(&self, taken: Receipt) {
        RateLimiter::give_back(self, taken);
    }
}

/// A [`Backend`] and the request every item of a stream or sink is decided for: items pay
/// through [`Backend::check_up_to`], all the set's policies at once.
///
/// Cells taken through a backend are not given back: an item dropped part-paid leaves them
/// spent (never an admission too many; at most one item's cells unused). Each batch is one
/// boxed call of the backend, which owns a clone of the backend and of the request (an
/// `Arc<str>` clones without allocating). A refused batch waits until the set conforms, without
/// the policy's jitter (which spreads clients, not one stream's batches). The request must be
/// owned: a set of HTTP requests (`http::Inbound`) cannot pay a stream.
///
/// ```
/// use std::sync::Arc;
/// use futures_util::StreamExt;
/// use flowgate::policy::{Policies, Policy};
/// use flowgate::stream::{Over, RateLimited};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let limits = Arc::new(
///     Policies::<str>::builder()
///         .policy(Policy::keyed("tenant", |tenant: &str| tenant).quota("100/s".parse()?))
///         .policy(Policy::global("all").quota("1000/s".parse()?))
///         .build()?,
/// );
/// let rows = futures_util::stream::iter([40u32, 60]);
/// let paid = RateLimited::new(rows, Over::new(limits, "acme")).with_cost(|rows: &u32| *rows);
/// assert_eq!(paid.collect::<Vec<_>>().await, [40, 60]); // within the burst: at once
/// # Ok(())
/// # }
/// # tokio::runtime::Builder::new_current_thread().enable_time().build()?.block_on(run())
/// #     .map_err(|e| e.to_string())?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Over<B, Q, R: ?Sized> {
    backend: B,
    request: Q,
    of: PhantomData<fn(&R)>,
}

impl<B, Q, R> Over<B, Q, R>
where
    B: Backend<R> + Clone + Unpin,
    Q: Borrow<R> + Clone + Send + Unpin + 'static,
    R: ?Sized + Sync,
{
    /// Items paid to `backend` for `request` (a user, a tenant: what the set's policies read).
    pub fn new(backend: B, request: Q) -> Self {
        Self {
            backend,
            request,
            of: PhantomData,
        }
    }
}

impl<B, Q, R: ?Sized> Over<B, Q, R> {
    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The request items are decided for.
    pub fn request(&self) -> &Q {
        &self.request
    }
}

impl<B: core::fmt::Debug, Q: core::fmt::Debug, R: ?Sized> core::fmt::Debug for Over<B, Q, R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Over")
            .field("backend", &self.backend)
            .field("request", &self.request)
            .finish()
    }
}

/// The backend's call under way (one allocation per batch: it owns clones of the backend and
/// the request, so that it outlives a poll).
#[doc(hidden)]
pub type Call = Unshared<Option<Pin<Box<Taking>>>>;

type Taking = dyn Future<Output = (u32, Verdict)> + Send;

impl<B, Q, R> Payee for Over<B, Q, R>
where
    B: Backend<R> + Clone + Unpin,
    Q: Borrow<R> + Clone + Send + Unpin + 'static,
    R: ?Sized + Sync,
{
    type Taken = Call;

    fn poll_take(
        &self,
        call: &mut Call,
        owed: u32,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(u32, Duration), Duration>> {
        let call = call.get();
        let future = call.get_or_insert_with(|| {
            let (backend, request) = (self.backend.clone(), self.request.clone());
            Box::pin(async move { backend.check_up_to(request.borrow(), owed).await })
        });
        let (k, verdict) = core::task::ready!(future.as_mut().poll(cx));
        *call = None;
        Poll::Ready(match verdict.outcome() {
            Ok(allowed) => Ok((k, allowed.delay())),
            Err(refused) => Err(refused.conforms_after()),
        })
    }

    fn give_back(&self, _: Call) {}
}

/// An item's cost, partly paid.
pub(super) struct Payment<P: Payee> {
    payee: P,
    /// Cells still owed by the item under way (0: nothing under way, or paid).
    owed: u32,
    /// What the item under way has taken (given back if it never goes on).
    taken: P::Taken,
    /// The sleep before the next attempt (a refusal's wait, plus `jitter`), or before the item
    /// goes on (a shaper's delay).
    timer: Unshared<Timer>,
    /// The range of the draw added to each wait before another attempt, in ns.
    jitter: (u64, u64),
}

impl<P: Payee> Payment<P> {
    /// Paying `payee`, sleeping with `sleep`.
    pub(super) fn new<Z, F>(payee: P, mut sleep: Z) -> Self
    where
        Z: FnMut(Duration) -> F + Send + 'static,
        F: Future<Output = ()> + Send + 'static,
    {
        let timer = Timer {
            sleep: Box::new(move |wait| Box::pin(sleep(wait))),
            sleeping: None,
        };
        Self {
            payee,
            owed: 0,
            taken: P::Taken::default(),
            timer: Unshared::new(timer),
            jitter: (0, 0),
        }
    }

    /// The same payment, adding a draw from `[min, max]` to each wait before another attempt.
    pub(super) fn jitter(&mut self, min: Duration, max: Duration) {
        let (min, max) = (nanos(min), nanos(max));
        self.jitter = (min.min(max), min.max(max));
    }

    /// What is paid.
    pub(super) fn payee(&self) -> &P {
        &self.payee
    }

    /// Starts paying `cost` cells for a new item (the last one must be paid).
    pub(super) fn start(&mut self, cost: u32) {
        debug_assert!(self.owed == 0 && self.timer.get().sleeping.is_none());
        self.owed = cost;
        self.taken = P::Taken::default();
    }

    /// The item paid for has gone on: its cells are spent, and nothing is given back.
    pub(super) fn settle(&mut self) {
        self.taken = P::Taken::default();
    }

    /// Pays what is owed: `Ready` once every cell is taken and any delay slept, `Pending` while
    /// sleeping or waiting for the payee (the waker registered). The cells stay the payment's
    /// (given back on drop, where that can be done) until [`settle`](Self::settle).
    pub(super) fn poll_paid(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            let timer = self.timer.get();
            if let Some(sleeping) = timer.sleeping.as_mut() {
                if sleeping.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                timer.sleeping = None;
            }
            if self.owed == 0 {
                return Poll::Ready(());
            }
            let wait =
                match core::task::ready!(self.payee.poll_take(&mut self.taken, self.owed, cx)) {
                    // A payee that admits no cell breaks its contract: waited on, not spun on.
                    Ok((0, delay)) => delay.max(Duration::from_millis(1)),
                    Ok((k, delay)) => {
                        self.owed -= k.min(self.owed);
                        delay
                    }
                    Err(retry_after) => match self.jitter {
                        (_, 0) => retry_after,
                        (min, max) => {
                            retry_after.saturating_add(Duration::from_nanos(jitter::draw(min, max)))
                        }
                    },
                };
            if wait > Duration::ZERO {
                let timer = self.timer.get();
                timer.sleeping = Some((timer.sleep)(wait));
            }
        }
    }
}

impl<P: Payee> Drop for Payment<P> {
    fn drop(&mut self) {
        // An item that never went on gives back what it took, if nothing was built on it.
        self.payee.give_back(core::mem::take(&mut self.taken));
    }
}

impl<P: Payee + core::fmt::Debug> core::fmt::Debug for Payment<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Payment")
            .field("payee", &self.payee)
            .field("owed", &self.owed)
            .field("jitter", &self.jitter)
            .finish_non_exhaustive()
    }
}
