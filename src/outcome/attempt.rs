//! What one attempt of a wait found ([`Attempt`]), what gives a booking back ([`GiveBack`]),
//! and how a decision's answer becomes an attempt: the vocabulary the waits of every limiter
//! and every [`Backend`](crate::backend::Backend) share.

use crate::outcome::{policy, Allowed, Cause, Error, InsufficientCapacity, Refused};

/// What one attempt of a wait found ([`Backend::attempt`](crate::backend::Backend::attempt)):
/// `G` is what gives a reservation back; `A` and `E` are the admission and the error a wait
/// answers, a policy set's ([`policy::Allowed`], [`policy::Error`]) unless said otherwise.
#[derive(Debug)]
pub enum Attempt<G, A = policy::Allowed, E = policy::Error> {
    /// Admitted: go ahead after `delay` ns. `reserved` holds what gives the cells back if the
    /// wait is abandoned while it sleeps on them (a reservation: a delay > 0).
    Ready {
        /// The admission.
        value: A,
        /// Nanoseconds to sleep before going ahead.
        delay: u64,
        /// The booking to give back if the wait ends before the delay.
        reserved: Option<G>,
    },
    /// Refused for now: sleep this many ns and ask again.
    Retry(u64),
    /// The wait ends without cells.
    Fail(E),
}

/// An admission a wait can judge: a limiter's or a policy set's, with the refusal and the
/// error that go with it.
pub(crate) trait Admission: Sized {
    /// The refusal of the same kind.
    type Refused: Refusal;
    /// The owned error of the same kind.
    type Error: From<Self::Refused> + From<InsufficientCapacity>;
    /// Nanoseconds to wait before going ahead.
    fn delay_nanos(&self) -> u64;
    /// The refusal of a reservation whose delay is past the wait's bound.
    fn too_late(&self) -> Self::Refused;
}

/// A refusal a wait can judge.
pub(crate) trait Refusal {
    fn cause(&self) -> Cause;
    fn conforms_after_nanos(&self) -> u64;
    fn retry_after_nanos(&self) -> u64;
}

impl Admission for Allowed {
    type Refused = Refused;
    type Error = Error;

    fn delay_nanos(&self) -> u64 {
        self.delay
    }

    fn too_late(&self) -> Refused {
        Refused::new(self.gauge, self.delay)
    }
}

impl Admission for policy::Allowed {
    type Refused = policy::Refused;
    type Error = policy::Error;

    fn delay_nanos(&self) -> u64 {
        self.bucket.delay
    }

    fn too_late(&self) -> policy::Refused {
        policy::Refused::new(self.bucket.too_late(), None, None, 0)
    }
}

impl Refusal for Refused {
    fn cause(&self) -> Cause {
        Refused::cause(self)
    }

    fn conforms_after_nanos(&self) -> u64 {
        self.wait
    }

    fn retry_after_nanos(&self) -> u64 {
        self.wait
    }
}

impl Refusal for policy::Refused {
    fn cause(&self) -> Cause {
        self.bucket.cause()
    }

    fn conforms_after_nanos(&self) -> u64 {
        self.bucket.wait
    }

    fn retry_after_nanos(&self) -> u64 {
        policy::Refused::retry_after_nanos(self)
    }
}

/// The attempt an answer makes, with `left` ns of the budget left. `reserved` gives back what
/// the decision wrote (`None` if it wrote nothing); it is used at once for a reservation beyond
/// the budget. A refusal that `queue_full` says comes from a shaping quota (its queue is full)
/// ends the wait.
pub(crate) fn judge<G: GiveBack, A: Admission>(
    answer: Result<A, A::Refused>,
    reserved: Option<G>,
    left: u64,
    queue_full: impl FnOnce(&A::Refused) -> bool,
) -> Attempt<G, A, A::Error> {
    match answer {
        Ok(allowed) => {
            let delay = allowed.delay_nanos();
            if delay > left {
                if let Some(reserved) = reserved {
                    reserved.give_back();
                }
                return Attempt::Fail(allowed.too_late().into());
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
                Attempt::Fail(refused.into())
            } else {
                // A policy's jitter (in `retry_after`) only as far as the bound allows.
                Attempt::Retry(refused.retry_after_nanos().clamp(conforms, left))
            }
        }
    }
}

/// The attempt of a wait for zero cells, which takes nothing and never waits: the bucket as
/// `state` (a zero-cell check or peek) found it.
pub(crate) fn as_is<G, A: Admission>(
    state: Result<Result<A, A::Refused>, InsufficientCapacity>,
) -> Attempt<G, A, A::Error> {
    match state {
        Ok(Ok(state)) => Attempt::Ready {
            value: state,
            delay: 0,
            reserved: None,
        },
        Ok(Err(refused)) => Attempt::Fail(refused.into()),
        Err(capacity) => Attempt::Fail(capacity.into()),
    }
}

/// What gives a wait's booking back: [`Booked`](crate::policy::Booked) in process.
pub trait GiveBack {
    /// Undoes the reservation (each write it made, if the bucket still holds it).
    fn give_back(self);
}

impl<G: GiveBack> Attempt<G> {
    /// The attempt that `outcome`, a decision of `n` cells that booked nothing ahead, makes for
    /// a wait with `left` ns left: go ahead (after the admission's delay, if within `left`),
    /// retry after a refusal's wait (if within `left`), or fail. What a backend whose waits
    /// retry answers.
    pub fn retrying(outcome: Result<policy::Allowed, policy::Refused>, n: u32, left: u64) -> Self {
        if n == 0 {
            return as_is(Ok(outcome));
        }
        judge(outcome, None, left, |_| false)
    }
}
