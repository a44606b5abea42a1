//! The in-process backend: a [`Policies`] set decides at once, on the calling thread, through
//! the crate's one compare-and-swap loop. Its [`Backend`] methods are the set's own methods
//! with ready futures; a wait books ahead (a shaping quota's delay) and gives the booking
//! back if it is dropped.

use core::cell::Cell;
use core::future::{ready, Future};

use super::report::{Silent, Visit};
use super::wait::Booked;
use super::Policies;
use crate::backend::{AtOnce, Backend, Decision, Failure, PolicyInfo, Source, States, Verdict};
use crate::clock::Clock;
use crate::outcome::Attempt;
use crate::outcome::{InsufficientCapacity, QuotaState};

impl<R: ?Sized + 'static, C: Clock + Send + Sync + 'static> Backend<R> for Policies<R, C> {
    type Pending = AtOnce;
    type Booking<'a> = Booked<'a, R, C>;

    #[inline]
    fn decide<S: States>(&self, request: &R, n: u32, states: Option<&mut S>) -> Decision<AtOnce> {
        let Some(states) = states else {
            if n == 0 {
                // Takes nothing, as `check_n(request, 0)`: admitted, unless rejected.
                return Decision::Now(Ok(self.rejection(request).map_or(Ok(()), Err)));
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
            if let Some(rejected) = self.rejection(request) {
                return Decision::Now(Ok(Err(rejected)));
            }
            self.inspect_at(request, now(), |state| states.push(state));
            return Decision::Now(Ok(Ok(())));
        }
        let answer = Policies::decide(self, request, n, now, Visit(&mut *states));
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
    ) -> impl Future<Output = Attempt<Booked<'_, R, C>>> + Send {
        ready(Policies::attempt(
            self,
            request,
            n,
            self.clock().now(),
            left,
        ))
    }
}

#[cfg(all(test, not(flowgate_loom)))]
mod tests {
    use futures_util::FutureExt as _;

    use super::*;
    use crate::clock::ManualClock;
    use crate::policy::Policy;

    /// Per user 2 per minute and 5 per hour; everyone 3 per minute.
    fn set() -> Policies<str, ManualClock> {
        Policies::<str>::builder()
            .clock(ManualClock::new())
            .policy(
                Policy::keyed("user", |u: &str| u)
                    .quotas(["2/min".parse().unwrap(), "5/h".parse().unwrap()]),
            )
            .policy(Policy::global("everyone").quota("3/min".parse().unwrap()))
            .build()
            .unwrap()
    }

    /// The answer of a decision made at once.
    fn now(decision: Decision<AtOnce>) -> crate::backend::Answer {
        match decision {
            Decision::Now(answer) => answer,
            Decision::Pending(never) => match never {},
        }
    }

    /// The remaining cells of each state, in order.
    fn left(states: &[QuotaState]) -> Vec<(&'static str, u32)> {
        states
            .iter()
            .map(|s| (s.by().policy(), s.gauge().remaining()))
            .collect()
    }

    /// An admission reports every enforcing quota as it left it; a refusal reports them as
    /// they stood (nothing of the refused attempt), the refusing quota with nothing left; too
    /// many cells report them as they are.
    #[test]
    fn decide_reports_the_states_an_answer_stands_on() {
        let set = set();
        let mut states = Vec::new();
        let answer = now(Backend::decide(&set, "alice", 1, Some(&mut states)));
        assert_eq!(answer, Ok(Ok(())));
        let expected = [("user", 1), ("user", 4), ("everyone", 2)];
        assert_eq!(left(&states), expected);
        states.clear();
        let answer = now(Backend::decide(&set, "alice", 2, Some(&mut states)));
        let refused = answer.unwrap().unwrap_err();
        assert_eq!(refused.by().map(|by| by.quota_index()), Some(0));
        // The refusal took nothing: the states are those after the first admission, the
        // refusing quota (user's first) reported with nothing left.
        assert_eq!(left(&states), [("user", 0), ("user", 4), ("everyone", 2)]);
        states.clear();
        let answer = now(Backend::decide(&set, "bob", 9, Some(&mut states)));
        assert!(answer.is_err(), "9 cells exceed every burst");
        assert_eq!(left(&states), [("user", 2), ("user", 5), ("everyone", 2)]);
        // Without states, the same yes or no.
        let answer = now(Backend::decide(
            &set,
            "bob",
            1,
            None::<&mut Vec<QuotaState>>,
        ));
        assert_eq!(answer, Ok(Ok(())));
    }

    /// A reset forgets one key's buckets, leaving other keys and the global policy (every
    /// client's) as they were; a look takes nothing.
    #[test]
    fn reset_forgets_a_requests_buckets_and_look_takes_nothing() {
        let set = set();
        for user in ["alice", "alice", "bob"] {
            assert!(Backend::check_n(&set, user, 1)
                .now_or_never()
                .unwrap()
                .unwrap()
                .is_allowed());
        }
        let look = |user| Backend::look(&set, user).now_or_never().unwrap().unwrap();
        assert_eq!(
            left(&look("alice")),
            [("user", 0), ("user", 3), ("everyone", 0)]
        );
        assert_eq!(
            left(&look("alice")),
            [("user", 0), ("user", 3), ("everyone", 0)]
        );
        Backend::reset(&set, "alice")
            .now_or_never()
            .unwrap()
            .unwrap();
        assert_eq!(
            left(&look("alice")),
            [("user", 2), ("user", 5), ("everyone", 0)]
        );
        assert_eq!(
            left(&look("bob")),
            [("user", 1), ("user", 4), ("everyone", 0)]
        );
        let names: Vec<_> = Backend::policies(&set)
            .into_iter()
            .map(|p| p.name)
            .collect();
        assert_eq!(names, ["user", "everyone"]);
    }
}
