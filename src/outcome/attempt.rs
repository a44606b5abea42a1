//! What one attempt of a wait found ([`Attempt`]), what gives a booking back ([`GiveBack`]),
//! and how a decision's answer becomes an attempt: the vocabulary the waits of every limiter
//! and every [`Backend`](crate::backend::Backend) share.

use crate::outcome::{Allowed, Cause, Citation, Cited, Error, InsufficientCapacity, Refused};

/// What one attempt of a wait found ([`Backend::attempt`](crate::backend::Backend::attempt));
/// `G` is what gives a reservation back, `C` what its outcomes cite.
#[derive(Debug)]
pub enum Attempt<G, C = ()> {
    /// Admitted: go ahead after `delay` ns. `reserved` holds what gives the cells back if the
    /// wait is abandoned while it sleeps on them (a reservation: a delay > 0).
    Ready {
        /// The admission.
        value: Allowed<C>,
        /// Nanoseconds to sleep before going ahead.
        delay: u64,
        /// The booking to give back if the wait ends before the delay.
        reserved: Option<G>,
    },
    /// Refused for now: sleep this many ns and ask again.
    Retry(u64),
    /// The wait ends without cells.
    Fail(Error<C>),
}

/// The attempt an answer makes, with `left` ns of the budget left. `reserved` gives back what
/// the decision wrote (`None` if it wrote nothing); it is used at once for a reservation beyond
/// the budget. A refusal that `queue_full` says comes from a shaping quota (its queue is full)
/// ends the wait.
pub(crate) fn judge<G: GiveBack, C: Citation>(
    answer: Result<Allowed<C>, Refused<C>>,
    reserved: Option<G>,
    left: u64,
    queue_full: impl FnOnce(&Refused<C>) -> bool,
) -> Attempt<G, C> {
    match answer {
        Ok(allowed) => {
            let delay = allowed.delay_nanos();
            if delay > left {
                if let Some(reserved) = reserved {
                    reserved.give_back();
                }
                let refused = Refused::new(allowed.gauge(), delay).cite(C::default());
                return Attempt::Fail(Error::Refused(refused));
            }
            Attempt::Ready {
                value: allowed,
                delay,
                reserved: reserved.filter(|_| delay > 0),
            }
        }
        Err(refused) => {
            // At least 1 ns: a custom algorithm's zero wait must not spin. A keyed table's
            // refusals (full table, new-key quota) are waited out like any other.
            let conforms = refused.conforms_after_nanos().max(1);
            let full = refused.cause() == Cause::Quota && queue_full(&refused);
            if full || conforms == u64::MAX || conforms > left {
                Attempt::Fail(Error::Refused(refused))
            } else {
                // A policy's jitter (in `retry_after`) only as far as the bound allows.
                Attempt::Retry(refused.retry_after_nanos().clamp(conforms, left))
            }
        }
    }
}

/// The attempt of a wait for zero cells, which takes nothing and never waits: the bucket as
/// `state` (a zero-cell check or peek) found it.
pub(crate) fn as_is<G, C>(
    state: Result<Result<Allowed<C>, Refused<C>>, InsufficientCapacity>,
) -> Attempt<G, C> {
    match state {
        Ok(Ok(state)) => Attempt::Ready {
            value: state,
            delay: 0,
            reserved: None,
        },
        Ok(Err(refused)) => Attempt::Fail(Error::Refused(refused)),
        Err(capacity) => Attempt::Fail(Error::Capacity(capacity)),
    }
}

/// What gives a wait's booking back: [`Booked`](crate::policy::Booked) in process.
pub trait GiveBack {
    /// Undoes the reservation (each write it made, if the bucket still holds it).
    fn give_back(self);
}

impl<G: GiveBack> Attempt<G, Cited> {
    /// The attempt that `outcome`, a decision of `n` cells that booked nothing ahead, makes for
    /// a wait with `left` ns left: go ahead (after the admission's delay, if within `left`),
    /// retry after a refusal's wait (if within `left`), or fail. What a backend whose waits
    /// retry answers.
    pub fn retrying(outcome: Result<Allowed<Cited>, Refused<Cited>>, n: u32, left: u64) -> Self {
        if n == 0 {
            return as_is(Ok(outcome));
        }
        judge(outcome, None, left, |_| false)
    }
}
