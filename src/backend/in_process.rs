//! The in-process backend: a [`Policies`] set decides at once, on the calling thread, through
//! the crate's one compare-and-swap loop. Its [`Backend`] methods are the set's own methods
//! with ready futures; a wait books ahead (a shaping quota's delay) and gives the booking
//! back if it is dropped.

use core::cell::Cell;
use core::future::{ready, Future};

use super::{AtOnce, Backend, Decision, Failure, PolicyInfo, Source, States, Verdict};
use crate::clock::Clock;
use crate::outcome::{Cited, InsufficientCapacity, QuotaState};
use crate::policy::{Booked, Policies, Silent, Visit};
use crate::wait::Attempt;

impl<R: ?Sized + 'static, C: Clock + Send + Sync + 'static> Backend<R> for Policies<R, C> {
    type Pending = AtOnce;
    type Booking<'a> = Booked<'a, R, C>;

    #[inline]
    fn decide<S: States>(&self, request: &R, n: u32, states: Option<&mut S>) -> Decision<AtOnce> {
        let Some(states) = states else {
            if n == 0 {
                // Takes nothing, as `check_n(request, 0)`: admitted.
                return Decision::Now(Ok(Ok(())));
            }
            // A yes or no, with no admission put together.
            return Decision::Now(Policies::decide(
                self,
                request,
                n,
                || self.clock().now(),
                Silent,
            ));
        };
        let reading = Cell::new(None);
        let now = || {
            let now = self.clock().now();
            reading.set(Some(now));
            now
        };
        if n == 0 {
            self.inspect_at(request, now(), |state| states.push(state));
            return Decision::Now(Ok(Ok(())));
        }
        let visit = Visit(|state: QuotaState| states.push(state));
        let answer = Policies::decide(self, request, n, now, visit);
        if !matches!(answer, Ok(Ok(()))) {
            // Every quota as it stood at the decision's own reading (too many cells read none),
            // the refusing one with nothing left for the request.
            states.clear();
            let by = match &answer {
                Ok(Err(refused)) => refused.by(),
                _ => None,
            };
            let now = reading.get().unwrap_or_else(|| self.clock().now());
            self.inspect_at(request, now, |state| {
                states.push(match by {
                    Some(by) if *by == *state.by() => state.none_left(),
                    _ => state,
                });
            });
        }
        Decision::Now(answer)
    }

    fn check_n(
        &self,
        request: &R,
        n: u32,
    ) -> impl Future<Output = Result<Verdict, InsufficientCapacity>> + Send {
        let answer = Policies::check_n(self, request, n);
        ready(answer.map(|outcome| Verdict::new(outcome, Source::Buckets)))
    }

    fn check_up_to(&self, request: &R, n: u32) -> impl Future<Output = (u32, Verdict)> + Send {
        let (taken, outcome) = match Policies::check_up_to(self, request, n) {
            Ok((taken, allowed)) => (taken, Ok(allowed)),
            Err(refused) => (0, Err(refused)),
        };
        ready((taken, Verdict::new(outcome, Source::Buckets)))
    }

    fn look(&self, request: &R) -> impl Future<Output = Result<Vec<QuotaState>, Failure>> + Send {
        let mut states = Vec::new();
        self.inspect(request, |state| states.push(state));
        ready(Ok(states))
    }

    fn reset(&self, request: &R) -> impl Future<Output = Result<(), Failure>> + Send {
        Policies::reset(self, request);
        ready(Ok(()))
    }

    fn policies(&self) -> Vec<PolicyInfo> {
        (self.stats().into_iter())
            .map(|stats| PolicyInfo {
                quotas: self.quotas(&stats.name).unwrap_or_default(),
                name: stats.name,
                dry_run: stats.dry_run,
            })
            .collect()
    }

    fn now(&self) -> u64 {
        self.clock().now()
    }

    fn attempt(
        &self,
        request: &R,
        n: u32,
        left: u64,
    ) -> impl Future<Output = Attempt<Booked<'_, R, C>, Cited>> + Send {
        ready(Policies::attempt(
            self,
            request,
            n,
            self.clock().now(),
            left,
        ))
    }
}
