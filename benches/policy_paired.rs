#![allow(missing_docs)]
//! Paired timing of policy decisions against governor's sequential checks, in short batches
//! (10 000 decisions each, 300 rounds under `cargo bench`, the order rotated every round) over
//! the same random calls; each figure is the median of the per-round ratios, which cancels the
//! drift of this shared machine. Both conventions: the **whole result** kept (the headline:
//! a caller that writes headers keeps it) and `is_ok()` only. Each decision's user (and
//! endpoint) is drawn at random, each side from a stream of its own (`Rounds::drawing`), as a
//! server takes them from a request; "key in hand" (one pre-drawn sequence walked in order,
//! `Rounds::walking`) is reported beside it, never instead.
//!
//! * One key, three quotas (200/10 s + 5000/h + 20000/day) at 100 000 users, against three
//!   governor keyed limiters checked in turn.
//! * The users' three layers (per user per endpoint → per endpoint → global), one thread and
//!   two, against three governor checks and against three flowgate limiters checked in turn.
//!
//! `cargo bench -p flowgate-benches --bench policy_paired`.

mod common;

use std::hint::black_box;

use common::paired::{below, mode, Rounds};
use common::*;

/// Prints contenders 0–1 (whole result) and 2–3 (`is_ok()`), flowgate against `other`.
fn print(name: &str, other: &str, r: &Rounds) {
    println!(
        "{name:<36} whole: flowgate {:7.2} ns  {other} {:7.2} ns  ratio {:.3}",
        r.median(0),
        r.median(1),
        r.ratio(0, 1)
    );
    println!(
        "{:<36} is_ok: flowgate {:7.2} ns  {other} {:7.2} ns  ratio {:.3}",
        "",
        r.median(2),
        r.median(3),
        r.ratio(2, 3)
    );
}

fn main() {
    let Some(bench) = mode() else { return };
    let rounds_n = if bench { 300 } else { 4 };
    {
        let users: Vec<u64> = draws(QUOTA_USERS, 13).into_iter().map(u64::from).collect();
        // A pair of limiters per convention: each user sees about 60 requests (at most about
        // 100) per limiter in a run (random draws, then the walk), well inside 200 per 10 s, so
        // every check is admitted.
        let (p, p2) = (flowgate_three_quotas(), flowgate_three_quotas());
        let (g, g2) = (GovernorQuotas::new(), GovernorQuotas::new());
        // Every user seen once before timing, so that every side measures keys it holds.
        for user in 0..QUOTA_USERS as u64 {
            for side in [p.check(&user).is_ok(), p2.check(&user).is_ok()] {
                assert!(side);
            }
            assert!(g.check(&user) && g2.check(&user));
        }
        let user = |x| below(x, QUOTA_USERS) as u64;
        let r = Rounds::drawing(
            rounds_n,
            &[
                &|x| black_box(p.check(&user(x))).is_ok(),
                &|x| g.check_whole(&user(x)),
                &|x| p2.check(&user(x)).is_ok(),
                &|x| g2.check(&user(x)),
            ],
            1,
        );
        print("three quotas, 100 000 users", "governor", &r);
        let r = Rounds::walking(
            rounds_n,
            &users,
            &[
                &|u| black_box(p.check(u)).is_ok(),
                &|u| g.check_whole(u),
                &|u| p2.check(u).is_ok(),
                &|u| g2.check(u),
            ],
            1,
        );
        print("three quotas, key in hand", "governor", &r);
    }
    let calls = calls();
    let policies = flowgate_policies();
    let governor = GovernorLayers::new();
    let sequential = FlowgateLayers::new();
    // Every pair seen once before timing, so that every side measures keys it holds.
    for user in 0..USERS {
        for endpoint in 0..ENDPOINTS {
            let call = Call { user, endpoint };
            assert!(policies.check(&call).is_ok());
            assert!(governor.check(&call));
            assert!(sequential.check(&call));
        }
    }
    // A call drawn at random: the user from the number's high half, the endpoint from its low
    // bits.
    let call = |x: u64| Call {
        user: below(x, USERS as usize) as u64,
        endpoint: (x % u64::from(ENDPOINTS)) as u32,
    };
    let whole = |x| black_box(policies.check(&call(x))).is_ok();
    let ours = |x| policies.check(&call(x)).is_ok();
    let theirs_whole = |x| governor.check_whole(&call(x));
    let theirs = |x| governor.check(&call(x));
    for threads in [1, 2] {
        let r = Rounds::drawing(rounds_n, &[&whole, &theirs_whole, &ours, &theirs], threads);
        print(
            &format!("three layers, {threads} thread(s)"),
            "governor",
            &r,
        );
    }
    let plain = |x| sequential.check(&call(x));
    let r = Rounds::drawing(rounds_n, &[&whole, &plain, &ours, &plain], 1);
    print("three layers / flowgate sequential", "sequential", &r);
    let r = Rounds::walking(
        rounds_n,
        &calls,
        &[
            &|c| black_box(policies.check(c)).is_ok(),
            &|c| governor.check_whole(c),
            &|c| policies.check(c).is_ok(),
            &|c| governor.check(c),
        ],
        1,
    );
    print("three layers, 1 thread, key in hand", "governor", &r);
}
