//! Policy sets against a reference model: random sets of three policies (per user per endpoint,
//! per endpoint, global; one or two quotas each; any of them in dry-run mode) and random
//! requests, clock steps and quota replacements, on one thread. The model keeps one GCRA word
//! per (policy, key, quota), never forgets one, and writes the all-or-nothing rules out
//! plainly: look at every quota first, take from all or none, the longest wait names the
//! refusal, dry-run policies take from all their quotas or none and never refuse.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use flowgate::clock::ManualClock;
use flowgate::policy::{Policies, Policy};
use flowgate::{Algorithm, Gcra, Quota};
use proptest::prelude::*;

use common::nanos;

type Request = (u8, u8);

#[derive(Debug, Clone)]
struct Layer {
    quotas: Vec<Quota>,
    dry_run: bool,
}

#[derive(Debug, Clone)]
enum Op {
    Check(Request, u32),
    /// `check_up_to`: the model's answer is the most `k` its `check` admits (tried on copies),
    /// then that check, or a check of one cell when none is admitted.
    UpTo(Request, u32),
    Advance(u64),
    Replace(usize, Vec<Quota>),
}

/// What a decision reported, in plain numbers: admitted (tightest as (policy, quota,
/// remaining, limit, reset), first dry-run refusal as (policy, quota, wait)), refused (policy,
/// quota, wait, remaining, limit, first dry-run refusal), or oversized (policy, quota).
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Admitted(
        Option<(usize, usize, u32, u32, u64)>,
        Option<(usize, usize, u64)>,
    ),
    Refused(usize, usize, u64, u32, u32, Option<(usize, usize, u64)>),
    Oversized(usize, usize),
}

fn key(layer: usize, (user, endpoint): Request) -> (u8, u8) {
    match layer {
        0 => (user, endpoint),
        1 => (255, endpoint),
        _ => (255, 255),
    }
}

#[derive(Clone)]
struct Model {
    layers: Vec<Layer>,
    words: HashMap<(usize, (u8, u8), usize), u64>,
    refused: Vec<u64>,
}

impl Model {
    fn word(&self, l: usize, k: (u8, u8), q: usize, now: u64) -> u64 {
        let gcra = Gcra::new(&self.layers[l].quotas[q]);
        *self
            .words
            .get(&(l, k, q))
            .unwrap_or(&gcra.initial_word(now))
    }

    /// Looks at quota `q` of layer `l` for `n` cells: its answer, clamping a bucket booked
    /// beyond what `now` explains (as the limiter does after such a refusal).
    fn look(&mut self, l: usize, k: (u8, u8), q: usize, n: u32, now: u64) -> Result<u64, u64> {
        let gcra = Gcra::new(&self.layers[l].quotas[q]);
        let word = self.word(l, k, q, now);
        match gcra.check(word, now, n).answer() {
            Ok(_) => Ok(word),
            Err(refused) => {
                if let Some(clamped) = gcra.catch_up(word, now, 0) {
                    self.words.insert((l, k, q), clamped);
                }
                Err(nanos(refused.retry_after()))
            }
        }
    }

    fn take(&mut self, l: usize, k: (u8, u8), q: usize, n: u32, now: u64) {
        let gcra = Gcra::new(&self.layers[l].quotas[q]);
        let word = self.word(l, k, q, now);
        match gcra.check(word, now, n) {
            flowgate::algorithm::Step::Write(new, Ok(_)) => {
                self.words.insert((l, k, q), new);
            }
            other => panic!("the model took from a refusing quota: {other:?}"),
        }
    }

    fn gauge(&self, l: usize, k: (u8, u8), q: usize, now: u64) -> (usize, usize, u32, u32, u64) {
        let gcra = Gcra::new(&self.layers[l].quotas[q]);
        let s = gcra.state(self.word(l, k, q, now), now);
        (l, q, s.remaining(), s.limit(), nanos(s.reset_after()))
    }

    fn check(&mut self, request: Request, n: u32, now: u64) -> Outcome {
        let enforcing: Vec<usize> = (0..3).filter(|&l| !self.layers[l].dry_run).collect();
        if n == 0 {
            let mut tightest: Option<(usize, usize, u32, u32, u64)> = None;
            for &l in &enforcing {
                for q in 0..self.layers[l].quotas.len() {
                    let g = self.gauge(l, key(l, request), q, now);
                    tightest = Some(tighter(tightest, g));
                }
            }
            return Outcome::Admitted(tightest, None);
        }
        let mut dry = None;
        let mut take = Vec::new();
        for l in 0..3 {
            let k = key(l, request);
            let layer = self.layers[l].clone();
            if layer.dry_run {
                let mut would = None;
                for (q, quota) in layer.quotas.iter().enumerate() {
                    if n > quota.burst() {
                        would = Some((l, q, u64::MAX));
                        break;
                    }
                    if let Err(wait) = self.look(l, k, q, n, now) {
                        would = Some((l, q, wait));
                        break;
                    }
                }
                match would {
                    Some(w) => {
                        self.refused[l] += 1;
                        dry.get_or_insert(w);
                    }
                    None => take.extend((0..layer.quotas.len()).map(|q| (l, q))),
                }
                continue;
            }
            for (q, quota) in layer.quotas.iter().enumerate() {
                if n > quota.burst() {
                    return Outcome::Oversized(l, q);
                }
                if let Err(wait) = self.look(l, k, q, n, now) {
                    // The first refusal: every later enforcing quota is looked at too.
                    let mut worst = (l, q, wait);
                    for l2 in l..3 {
                        if self.layers[l2].dry_run {
                            continue;
                        }
                        let from = if l2 == l { q + 1 } else { 0 };
                        for q2 in from..self.layers[l2].quotas.len() {
                            if n > self.layers[l2].quotas[q2].burst() {
                                return Outcome::Oversized(l2, q2);
                            }
                            if let Err(w) = self.look(l2, key(l2, request), q2, n, now) {
                                if w > worst.2 {
                                    worst = (l2, q2, w);
                                }
                            }
                        }
                    }
                    self.refused[worst.0] += 1;
                    let (_, _, remaining, limit, _) =
                        self.gauge(worst.0, key(worst.0, request), worst.1, now);
                    let remaining = if worst.2 == u64::MAX { 0 } else { remaining };
                    return Outcome::Refused(worst.0, worst.1, worst.2, remaining, limit, dry);
                }
                take.push((l, q));
            }
        }
        let mut tightest = None;
        for (l, q) in take {
            self.take(l, key(l, request), q, n, now);
            if !self.layers[l].dry_run {
                tightest = Some(tighter(tightest, self.gauge(l, key(l, request), q, now)));
            }
        }
        Outcome::Admitted(tightest, dry)
    }
}

/// Fewer cells left, then the longer reset, then the first.
fn tighter(
    best: Option<(usize, usize, u32, u32, u64)>,
    next: (usize, usize, u32, u32, u64),
) -> (usize, usize, u32, u32, u64) {
    match best {
        Some(b) if !(next.2 < b.2 || (next.2 == b.2 && next.4 > b.4)) => b,
        _ => next,
    }
}

impl Model {
    /// "Up to `n`" from the model alone.
    fn up_to(&mut self, request: Request, n: u32, now: u64) -> (u32, Outcome) {
        if n == 0 {
            return (0, self.check(request, 0, now));
        }
        let admitted = (1..=n)
            .rev()
            .find(|&k| matches!(self.clone().check(request, k, now), Outcome::Admitted(..)));
        match admitted {
            Some(k) => (k, self.check(request, k, now)),
            None => (0, self.check(request, 1, now)),
        }
    }
}

fn outcome_of(
    answer: Result<
        Result<flowgate::policy::Allowed, flowgate::policy::Refused>,
        flowgate::InsufficientCapacity,
    >,
) -> Outcome {
    let dry = |d: Option<flowgate::policy::DryRun>| {
        d.map(|d| {
            (
                d.by().policy_index(),
                d.by().quota_index(),
                d.retry_after().as_nanos() as u64,
            )
        })
    };
    match answer {
        Ok(Ok(a)) => Outcome::Admitted(
            a.by().map(|t| {
                (
                    t.policy_index(),
                    t.quota_index(),
                    a.remaining(),
                    a.limit(),
                    nanos(a.reset_after()),
                )
            }),
            dry(a.dry_run()),
        ),
        Ok(Err(r)) => Outcome::Refused(
            r.by().unwrap().policy_index(),
            r.by().unwrap().quota_index(),
            nanos(r.retry_after()),
            r.remaining(),
            r.limit(),
            dry(r.dry_run()),
        ),
        Err(o) => Outcome::Oversized(
            ["user-endpoint", "endpoint", "global"]
                .iter()
                .position(|&p| Some(p) == o.by().map(|by| by.policy()))
                .unwrap(),
            o.by().unwrap().quota_index(),
        ),
    }
}

fn quota() -> impl Strategy<Value = Quota> {
    (1u32..5, 1u64..40, 1u32..6).prop_map(|(count, millis, burst)| {
        Quota::new(count, core::time::Duration::from_nanos(millis * 1_000_000))
            .unwrap()
            .with_burst(burst)
            .unwrap()
    })
}

fn layer() -> impl Strategy<Value = Layer> {
    (
        prop::collection::vec(quota(), 1..3),
        prop::bool::weighted(0.25),
    )
        .prop_map(|(quotas, dry_run)| Layer { quotas, dry_run })
}

fn op(layers: Vec<Layer>) -> impl Strategy<Value = Op> {
    let lens: Vec<usize> = layers.iter().map(|l| l.quotas.len()).collect();
    prop_oneof![
        8 => ((0u8..3, 0u8..2), 0u32..4).prop_map(|(r, n)| Op::Check(r, n)),
        4 => ((0u8..3, 0u8..2), 0u32..9).prop_map(|(r, n)| Op::UpTo(r, n)),
        3 => (0u64..30_000_000).prop_map(Op::Advance),
        1 => (0usize..3).prop_flat_map(move |l| {
            prop::collection::vec(quota(), lens[l]).prop_map(move |qs| Op::Replace(l, qs))
        }),
    ]
}

fn scenario() -> impl Strategy<Value = (Vec<Layer>, Vec<Op>)> {
    prop::collection::vec(layer(), 3).prop_flat_map(|layers| {
        let ops = prop::collection::vec(op(layers.clone()), 1..60);
        (Just(layers), ops)
    })
}

proptest! {
    #![proptest_config(common::config())]

    #[test]
    fn policies_decide_as_the_model((layers, ops) in scenario()) {
        let clock = ManualClock::starting_at(1_000_000_000);
        let mut builder = Policies::<Request>::builder().clock(clock.clone()).hash_seed(5);
        let names = ["user-endpoint", "endpoint", "global"];
        for (l, layer) in layers.iter().enumerate() {
            let policy = match l {
                0 => Policy::keyed_with(names[0], |r: &Request, k| {
                    k.add(&r.0).add(&r.1);
                }),
                1 => Policy::keyed(names[1], |r: &Request| &r.1),
                _ => Policy::global(names[2]),
            };
            builder = builder.policy(policy.quotas(layer.quotas.clone()).dry_run(layer.dry_run).max_keys(16));
        }
        let policies = builder.build().unwrap();
        let mut model = Model { layers: layers.clone(), words: HashMap::new(), refused: vec![0; 3] };
        for op in ops {
            match op {
                Op::Check(request, n) => {
                    let now = clock.get();
                    let expected = model.check(request, n, now);
                    let got = outcome_of(policies.check_n(&request, n));
                    prop_assert_eq!(got, expected, "{:?} n={} at {}", request, n, now);
                }
                Op::UpTo(request, n) => {
                    let now = clock.get();
                    let expected = model.up_to(request, n, now);
                    let got = match policies.check_up_to(&request, n) {
                        Ok((k, allowed)) => (k, outcome_of(Ok(Ok(allowed)))),
                        Err(refused) => (0, outcome_of(Ok(Err(refused)))),
                    };
                    prop_assert_eq!(got, expected, "up to: {:?} n={} at {}", request, n, now);
                }
                Op::Advance(d) => clock.advance(Duration::from_nanos(d)),
                Op::Replace(l, quotas) => {
                    policies.replace_quotas(names[l], &quotas).unwrap();
                    model.layers[l].quotas = quotas;
                }
            }
        }
        let refused: Vec<u64> = policies.stats().iter().map(|s| s.refused).collect();
        prop_assert_eq!(refused, model.refused);
    }
}
