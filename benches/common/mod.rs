//! Limiters shared by the benches, built the same way for flowgate and governor so that both
//! answer the same question in the same run.
#![allow(dead_code)]

pub mod floor;
pub mod paired;

use std::num::NonZeroU32;
use std::time::Duration;

use flowgate::algorithm::{Credit, FixedWindow, IntervalRefill, LeakyBucket, SlidingWindow};
use flowgate::clock::QuantaClock;
use flowgate::{KeyedRateLimiter, Quota, RateLimiter, SlidingLog};
use governor::DefaultKeyedRateLimiter;
use governor::{clock::DefaultClock, state::InMemoryState, state::NotKeyed};

pub type Governor = governor::RateLimiter<NotKeyed, InMemoryState, DefaultClock>;

const HUGE: u32 = 1_000_000_000;

/// 10⁹/s with a burst of 10⁹: every check in a benchmark loop is admitted.
pub fn flowgate_allowing() -> RateLimiter {
    RateLimiter::new(allowing_quota())
}

/// 1/hour with burst 1, already used: every check is refused.
pub fn flowgate_refusing() -> RateLimiter {
    let limiter = RateLimiter::new(Quota::per_hour(1).unwrap());
    assert!(limiter.check().is_ok());
    limiter
}

pub fn allowing_quota() -> Quota {
    Quota::per_second(HUGE).unwrap()
}

pub fn governor_allowing() -> Governor {
    let n = NonZeroU32::new(HUGE).unwrap();
    governor::RateLimiter::direct(governor::Quota::per_second(n))
}

pub fn governor_refusing() -> Governor {
    let one = NonZeroU32::new(1).unwrap();
    let limiter = governor::RateLimiter::direct(governor::Quota::per_hour(one));
    assert!(limiter.check().is_ok());
    limiter
}

/// Two threads, each making `iters` decisions on one shared bucket (each must be admitted);
/// the time both take. Criterion reports it per iteration, which covers 2 decisions.
pub fn two_threads(iters: u64, decide: &(dyn Fn() -> bool + Sync)) -> std::time::Duration {
    two_threads_walking(iters, &|_, _| decide())
}

/// [`two_threads`], where `decide(thread, i)` is told which thread (0 or 1) makes its `i`-th
/// decision. Each thread reads the time when it starts (after a barrier) and when it ends, and
/// the pair's time runs from the earlier start to the later end: a thread that starts late (a
/// wake-up after the barrier, a preemption) makes the pair's time longer, as it would a
/// server's, instead of being left out. (A timer in the spawning thread would start whenever
/// that thread wakes after the barrier, which can be after the workers are done.)
pub fn two_threads_walking(
    iters: u64,
    decide: &(dyn Fn(usize, u64) -> bool + Sync),
) -> std::time::Duration {
    let barrier = std::sync::Barrier::new(2);
    let spans: Vec<_> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|thread| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    let start = std::time::Instant::now();
                    for i in 0..iters {
                        assert!(std::hint::black_box(decide(thread, i)));
                    }
                    (start, std::time::Instant::now())
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let start = spans.iter().map(|s| s.0).min().unwrap();
    let end = spans.iter().map(|s| s.1).max().unwrap();
    end - start
}

/// Polls `future` once with a waker that does nothing, expecting it to be ready: the
/// uncontended waits of the `wait` benches, which never sleep, measured without a runtime.
pub fn ready_now<F: std::future::Future>(future: F) -> F::Output {
    struct Noop;
    impl std::task::Wake for Noop {
        fn wake(self: std::sync::Arc<Self>) {}
    }
    // Made once: the loop measures the wait, not an allocation.
    static WAKER: std::sync::OnceLock<std::task::Waker> = std::sync::OnceLock::new();
    let waker = WAKER.get_or_init(|| std::task::Waker::from(std::sync::Arc::new(Noop)));
    let mut cx = std::task::Context::from_waker(waker);
    let mut future = std::pin::pin!(future);
    match future.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(output) => output,
        std::task::Poll::Pending => panic!("an uncontended wait went to sleep"),
    }
}

/// One limiter per algorithm, all deciding the same way in a benchmark loop (all admitted, or
/// all refused), behind one `check`.
pub enum Any {
    Gcra(RateLimiter),
    Leaky(RateLimiter<QuantaClock, LeakyBucket>),
    Credit(RateLimiter<QuantaClock, Credit>),
    Interval(RateLimiter<QuantaClock, IntervalRefill>),
    Fixed(RateLimiter<QuantaClock, FixedWindow>),
    Sliding(RateLimiter<QuantaClock, SlidingWindow>),
    Log(SlidingLog),
    Governor(Governor),
}

impl Any {
    #[inline(always)]
    pub fn check(&self) -> bool {
        match self {
            Any::Gcra(l) => l.check().is_ok(),
            Any::Leaky(l) => l.check().is_ok(),
            Any::Credit(l) => l.check().is_ok(),
            Any::Interval(l) => l.check().is_ok(),
            Any::Fixed(l) => l.check().is_ok(),
            Any::Sliding(l) => l.check().is_ok(),
            Any::Log(l) => l.check().is_ok(),
            Any::Governor(l) => l.check().is_ok(),
        }
    }
}

/// The algorithms benchmarked, by name.
pub const ALGORITHMS: &[&str] = &[
    "gcra",
    "leaky_meter",
    "leaky_shaper",
    "credit",
    "interval_refill",
    "fixed_window",
    "sliding_window",
    "sliding_log",
    "governor",
];

fn q(s: &str) -> Quota {
    s.parse().unwrap()
}

/// `name`'s limiter, admitting every check of a benchmark loop (`allowing`) or refusing every
/// one: the fixed-window counters at 10⁶ per 1 ms window (the finest rate a quota holds), the sliding
/// counter at its largest limit, 262 143 per 1 ms, the log at 1000 per µs
/// (its ring stays in L1 and every slot has left the window when reused).
pub fn algorithm(name: &str, allowing: bool) -> Any {
    let clock = QuantaClock::new;
    let with = |a| RateLimiter::with_algorithm(a, clock());
    let any = match (name, allowing) {
        ("gcra", true) => Any::Gcra(flowgate_allowing()),
        ("gcra", false) => Any::Gcra(flowgate_refusing()),
        ("leaky_meter", true) => Any::Leaky(with(LeakyBucket::meter(&allowing_quota()))),
        ("leaky_meter", false) => Any::Leaky(with(LeakyBucket::meter(&q("1/h")))),
        ("leaky_shaper", a) => {
            let quota = if a { allowing_quota() } else { q("1/h") };
            Any::Leaky(with(
                LeakyBucket::shaper(&quota, Duration::from_millis(1)).unwrap(),
            ))
        }
        ("credit", a) => {
            let quota = if a { allowing_quota() } else { q("1/h") };
            let debt = if a {
                Duration::from_millis(1)
            } else {
                Duration::ZERO
            };
            Any::Credit(RateLimiter::with_algorithm(
                Credit::new(&quota, debt).unwrap(),
                clock(),
            ))
        }
        ("interval_refill", a) => {
            let quota = if a { q("1000000/1ms") } else { q("1/h") };
            Any::Interval(RateLimiter::with_algorithm(
                IntervalRefill::new(&quota).unwrap(),
                clock(),
            ))
        }
        ("fixed_window", a) => {
            let quota = if a { q("1000000/1ms") } else { q("1/h") };
            Any::Fixed(RateLimiter::with_algorithm(
                FixedWindow::new(&quota).unwrap(),
                clock(),
            ))
        }
        ("sliding_window", a) => {
            let quota = if a { q("262143/1ms") } else { q("1/h") };
            Any::Sliding(RateLimiter::with_algorithm(
                SlidingWindow::new(&quota).unwrap(),
                clock(),
            ))
        }
        ("sliding_log", a) => {
            let quota = if a { q("1000/1us") } else { q("1/h") };
            Any::Log(SlidingLog::with_clock(quota, clock()).unwrap())
        }
        ("governor", true) => Any::Governor(governor_allowing()),
        ("governor", false) => Any::Governor(governor_refusing()),
        _ => panic!("unknown algorithm {name}"),
    };
    if !allowing {
        // Spend the one cell (the shaper and credit have no slack here).
        any.check();
        assert!(!any.check(), "{name} should refuse now");
    }
    any
}

// Keyed limiters (benches/keyed.rs, benches/instructions.rs).

/// 4·10⁹ per hour (one cell per 0.9 µs): each key is filled with half of it, so that it stays
/// busy (not idle, never evicted) for half an hour and admits every check of a run.
pub const PER_HOUR: u32 = 4_000_000_000;
pub const FILL: u32 = PER_HOUR / 2;

pub fn governor_keyed<K: std::hash::Hash + Eq + Clone>() -> DefaultKeyedRateLimiter<K> {
    let n = NonZeroU32::new(PER_HOUR).unwrap();
    governor::RateLimiter::keyed(governor::Quota::per_hour(n))
}

pub fn keyed_quota() -> Quota {
    Quota::per_hour(PER_HOUR).unwrap()
}

pub fn governor_u64(keys: usize) -> DefaultKeyedRateLimiter<u64> {
    let l = governor_keyed::<u64>();
    let fill = NonZeroU32::new(FILL).unwrap();
    for key in 0..keys as u64 {
        assert!(matches!(l.check_key_n(&key, fill), Ok(Ok(_))));
    }
    l
}

pub fn flowgate_u64(keys: usize) -> KeyedRateLimiter<u64> {
    let limiter = KeyedRateLimiter::new(keyed_quota(), keys).unwrap();
    for key in 0..keys as u64 {
        assert!(matches!(limiter.check_key_n(&key, FILL), Ok(Ok(_))));
    }
    assert_eq!(limiter.len(), keys);
    limiter
}

/// Length of the pre-drawn sequence of key indices every loop walks through.
pub const DRAWS: usize = 1 << 20;

/// `DRAWS` indices below `keys`, uniformly at random (xorshift, fixed seed), offset per thread.
pub fn draws(keys: usize, thread: u64) -> Vec<u32> {
    let mut x = 0x9e37_79b9_7f4a_7c15_u64 ^ thread.wrapping_mul(0xa076_1d64_78bd_642f);
    (0..DRAWS)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (((x >> 32) * keys as u64) >> 32) as u32
        })
        .collect()
}

pub fn string_keys(keys: usize) -> Vec<String> {
    (0..keys).map(|i| format!("user-{i}|/api/books")).collect()
}

pub fn governor_string(keys: &[String]) -> DefaultKeyedRateLimiter<String> {
    let l = governor_keyed::<String>();
    let fill = NonZeroU32::new(FILL).unwrap();
    for key in keys {
        assert!(matches!(l.check_key_n(key, fill), Ok(Ok(_))));
    }
    l
}

pub fn flowgate_str(keys: &[String]) -> KeyedRateLimiter<str> {
    let limiter = KeyedRateLimiter::<str>::new(keyed_quota(), keys.len()).unwrap();
    for key in keys {
        assert!(matches!(limiter.check_key_n(key.as_str(), FILL), Ok(Ok(_))));
    }
    assert_eq!(limiter.len(), keys.len());
    limiter
}

/// The drawn `String` keys in draw order, each a copy made in that order: walking them reads
/// memory in sequence, as a server has the key it just parsed at hand. (Picking each from a
/// table of a million strings would add two cache misses per decision, the same for both
/// crates, that are the benchmark's and not the limiter's.)
pub fn in_hand(names: &[String], draws: &[u32]) -> Vec<String> {
    draws.iter().map(|&k| names[k as usize].clone()).collect()
}

// Instruction counting (benches/instructions.rs, benches/keyed_instructions.rs).

/// The loop whose instructions callgrind collects (`--toggle-collect=*hot_loop*`).
#[inline(never)]
pub fn hot_loop(n: u64, mut f: impl FnMut()) {
    for _ in 0..n {
        f();
    }
}

/// The `main` of an instruction-count bench (`scripts/instructions.sh`): `CASE N` runs one case
/// `N` times; without arguments (as `cargo bench` and `cargo test` run it) every case runs
/// briefly, to show they work.
pub fn instruction_main(label: &str, cases: &[&str], run: impl Fn(&str, u64)) {
    match case_from_args() {
        Some((case, n)) => run(&case, n),
        None => {
            for case in cases {
                run(case, 1_000);
            }
            println!("{label}: {} cases ran", cases.len());
        }
    }
}

/// Ends an instruction-count bench asked for a case it does not have.
pub fn unknown_case(case: &str, cases: &[&str]) -> ! {
    eprintln!("unknown case {case}; cases: {cases:?}");
    std::process::exit(2);
}

/// `CASE N` from the command line (flags such as `--bench` ignored), if given.
pub fn case_from_args() -> Option<(String, u64)> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    match args.as_slice() {
        [case, n] => Some((case.clone(), n.parse().expect("N must be a whole number"))),
        _ => None,
    }
}

// Policies (benches/policy.rs, benches/keyed_instructions.rs): the users' three layers, per
// user per endpoint → per endpoint → global, against three sequential governor checks.

/// Users and endpoints of the policy benches: 10 000 × 16 (user, endpoint) pairs.
pub const USERS: u64 = 10_000;
pub const ENDPOINTS: u32 = 16;

/// A request as a server has it: who, and which endpoint.
pub struct Call {
    pub user: u64,
    pub endpoint: u32,
}

/// The three layers in flowgate, every quota `PER_HOUR` (every check admitted).
pub fn flowgate_policies() -> flowgate::policy::Policies<Call> {
    use flowgate::policy::{Policies, Policy};
    Policies::builder()
        .policy(
            Policy::keyed_with("per-user-per-endpoint", |c: &Call, k| {
                k.add(&c.user).add(&c.endpoint);
            })
            .quota(keyed_quota())
            .max_keys((USERS * u64::from(ENDPOINTS)) as usize),
        )
        .policy(Policy::keyed("per-endpoint", |c: &Call| &c.endpoint).quota(keyed_quota()))
        .policy(Policy::global("global").quota(keyed_quota()))
        .build()
        .unwrap()
}

/// The same three layers as three governor limiters, checked in turn.
pub struct GovernorLayers {
    pub per_user_endpoint: DefaultKeyedRateLimiter<(u64, u32)>,
    pub per_endpoint: DefaultKeyedRateLimiter<u32>,
    pub global: Governor,
}

impl GovernorLayers {
    pub fn new() -> Self {
        let n = NonZeroU32::new(PER_HOUR).unwrap();
        Self {
            per_user_endpoint: governor_keyed(),
            per_endpoint: governor_keyed(),
            global: governor::RateLimiter::direct(governor::Quota::per_hour(n)),
        }
    }

    /// The three checks in order, stopping at the first refusal (as the C# article does; a
    /// refusal by a later layer leaves the earlier ones charged).
    #[inline]
    pub fn check(&self, call: &Call) -> bool {
        self.per_user_endpoint
            .check_key(&(call.user, call.endpoint))
            .is_ok()
            && self.per_endpoint.check_key(&call.endpoint).is_ok()
            && self.global.check().is_ok()
    }
}

impl GovernorLayers {
    /// [`check`](Self::check) keeping each layer's whole result (governor's convention).
    #[inline]
    pub fn check_whole(&self, call: &Call) -> bool {
        use std::hint::black_box;
        black_box(
            self.per_user_endpoint
                .check_key(&(call.user, call.endpoint)),
        )
        .is_ok()
            && black_box(self.per_endpoint.check_key(&call.endpoint)).is_ok()
            && black_box(self.global.check()).is_ok()
    }
}

// One key, three quotas (the users' "200 per 10 s and 5000 per hour and 20 000 per day"), at
// 100 000 users (benches/policy_paired.rs).

/// Users of the three-quota bench.
pub const QUOTA_USERS: usize = 100_000;

/// The three quotas.
pub fn three_quotas() -> [Quota; 3] {
    [q("200/10s"), q("5000/h"), q("20000/day")]
}

/// One keyed policy with the three quotas, sized for [`QUOTA_USERS`].
pub fn flowgate_three_quotas() -> flowgate::policy::Policies<u64> {
    use flowgate::policy::{Policies, Policy};
    Policies::builder()
        .policy(
            Policy::keyed("per-user", |user: &u64| user)
                .quotas(three_quotas())
                .max_keys(QUOTA_USERS),
        )
        .build()
        .unwrap()
}

/// The three quotas as three governor keyed limiters, checked in turn.
pub struct GovernorQuotas([DefaultKeyedRateLimiter<u64>; 3]);

impl GovernorQuotas {
    pub fn new() -> Self {
        let n = |n| NonZeroU32::new(n).unwrap();
        let s = |secs| Duration::from_secs(secs);
        let quota = |per: Duration, cells: u32| {
            governor::Quota::with_period(per / cells)
                .unwrap()
                .allow_burst(n(cells))
        };
        Self([
            governor::RateLimiter::keyed(quota(s(10), 200)),
            governor::RateLimiter::keyed(quota(s(3_600), 5_000)),
            governor::RateLimiter::keyed(quota(s(86_400), 20_000)),
        ])
    }

    /// The three checks in turn, stopping at the first refusal, each result `is_ok()` only.
    #[inline]
    pub fn check(&self, user: &u64) -> bool {
        self.0.iter().all(|l| l.check_key(user).is_ok())
    }

    /// [`check`](Self::check) keeping each whole result (governor's convention).
    #[inline]
    pub fn check_whole(&self, user: &u64) -> bool {
        self.0
            .iter()
            .all(|l| std::hint::black_box(l.check_key(user)).is_ok())
    }
}

/// The same three layers as three flowgate limiters checked in turn, each reading the clock:
/// what the policy's all-or-nothing decision costs over plain sequential checks (which leave
/// earlier layers charged when a later one refuses).
pub struct FlowgateLayers {
    pub per_user_endpoint: KeyedRateLimiter<(u64, u32)>,
    pub per_endpoint: KeyedRateLimiter<u32>,
    pub global: RateLimiter,
}

impl FlowgateLayers {
    pub fn new() -> Self {
        use flowgate::Gcra;
        let clock = QuantaClock::new();
        let gcra = Gcra::new(&keyed_quota());
        Self {
            per_user_endpoint: KeyedRateLimiter::builder(gcra)
                .clock(clock.clone())
                .max_keys((USERS * u64::from(ENDPOINTS)) as usize)
                .build()
                .unwrap(),
            per_endpoint: KeyedRateLimiter::builder(gcra)
                .clock(clock.clone())
                .build()
                .unwrap(),
            global: RateLimiter::with_clock(keyed_quota(), clock.clone()),
        }
    }

    #[inline]
    pub fn check(&self, call: &Call) -> bool {
        self.per_user_endpoint
            .check_key(&(call.user, call.endpoint))
            .is_ok()
            && self.per_endpoint.check_key(&call.endpoint).is_ok()
            && self.global.check().is_ok()
    }
}

/// `DRAWS` calls with users and endpoints drawn at random (fixed seed).
pub fn calls() -> Vec<Call> {
    let users = draws(USERS as usize, 11);
    let endpoints = draws(ENDPOINTS as usize, 12);
    users
        .iter()
        .zip(&endpoints)
        .map(|(&user, &endpoint)| Call {
            user: u64::from(user),
            endpoint,
        })
        .collect()
}
