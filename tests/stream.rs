//! The `futures` adapters on tokio's paused clock (`TokioClock` follows it), with exact
//! timings: items go on when the limiter's cells allow and not a nanosecond earlier or later,
//! costly items pay over time, streams sharing a limiter keep it busy, and dropping an adapter
//! mid-payment gives the cells back. And off tokio: on futures-timer's timer with a parking
//! executor, and on a timer that moves a manual clock (jitter, a sink's inner parts).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flowgate::backend::Backend;
use flowgate::clock::{ManualClock, TokioClock};
use flowgate::policy::{seed_jitter, Policies, Policy};
use flowgate::stream::{Over, RateLimited, RateLimitedSink};
use flowgate::RateLimiter;
use futures_util::{FutureExt, Sink, SinkExt, StreamExt};
use tokio::time::Instant;

fn limiter(quota: &str) -> Arc<RateLimiter<TokioClock>> {
    Arc::new(RateLimiter::with_clock(
        quota.parse().unwrap(),
        TokioClock::new(),
    ))
}

/// When each item came out, in ms since `start`.
async fn times<S: futures_util::Stream + Unpin>(mut stream: S, start: Instant) -> Vec<u128> {
    let mut out = Vec::new();
    while stream.next().await.is_some() {
        out.push(start.elapsed().as_millis());
    }
    out
}

#[tokio::test(start_paused = true)]
async fn one_cell_items_come_at_the_rate() {
    let start = Instant::now();
    let limited = RateLimited::new(futures_util::stream::iter(0..6), limiter("10/s burst 3"));
    // The burst at once, then one every 100 ms.
    assert_eq!(times(limited, start).await, [0, 0, 0, 100, 200, 300]);
}

#[tokio::test(start_paused = true)]
async fn weighted_items_pay_their_cost_even_above_the_burst() {
    let start = Instant::now();
    let chunks = futures_util::stream::iter([500u32, 1_500, 250, 0, 1_000]);
    let limited = RateLimited::new(chunks, limiter("1000/s")).with_cost(|bytes: &u32| *bytes);
    // 500 of the full 1 000 at once; 1 500 takes the other 500 and waits a second for 1 000
    // more; 250 a quarter second; nothing costs nothing; 1 000 a second.
    assert_eq!(times(limited, start).await, [0, 1_000, 1_250, 1_250, 2_250]);
}

/// An item is pulled from the inner stream only when the next one is asked for.
#[tokio::test(start_paused = true)]
async fn items_are_pulled_one_at_a_time() {
    let pulled = Arc::new(AtomicU32::new(0));
    let counter = pulled.clone();
    let inner = futures_util::stream::iter(0..10).inspect(move |_| {
        // Relaxed: a count, read on this same task after the poll.
        counter.fetch_add(1, Ordering::Relaxed);
    });
    let mut limited = RateLimited::new(inner, limiter("1/s"));
    assert_eq!(limited.next().await, Some(0));
    // Relaxed: written on this task (the runtime is current-thread).
    assert_eq!(pulled.load(Ordering::Relaxed), 1);
    assert_eq!(futures_util::Stream::size_hint(&limited), (9, Some(9)));
}

/// Two streams on one limiter (one of 1-cell items, one of 4-cell items: the burst) keep it
/// busy: the last item of all comes when the cells of every item have come, exactly (36 cells:
/// a burst of 4 at once, then 10 a second, 3.2 s). And the costly stream is not starved: while
/// both wait, each cell goes to the task polled first when it appears, which `tokio::join!`
/// alternates, so the costly items take every other cell and come every 800 ms. (Were each item
/// to wait for all its cells at once, the cheap stream would take every cell as it appeared and
/// the costly one would get none until the cheap one was done.)
#[tokio::test(start_paused = true)]
async fn streams_sharing_a_limiter_share_its_cells() {
    let shared = limiter("10/s burst 4");
    let start = Instant::now();
    let cheap = RateLimited::new(futures_util::stream::iter(0..20), shared.clone());
    let costly =
        RateLimited::new(futures_util::stream::iter(0..4), shared.clone()).with_cost(|_: &i32| 4);
    let (cheap, costly) = tokio::join!(times(cheap, start), times(costly, start));
    let every_other: Vec<u128> = (1..=16).map(|i| i * 200).collect();
    assert_eq!(cheap, [&[0, 0, 0, 0][..], &every_other[..]].concat());
    assert_eq!(costly, [700, 1_500, 2_300, 3_100]);
}

/// Dropping a stream whose item has taken part of its cost gives those cells back.
#[tokio::test(start_paused = true)]
async fn dropping_mid_payment_gives_the_cells_back() {
    let shared = limiter("10/s burst 3");
    let mut limited = RateLimited::new(futures_util::stream::iter([5u32]), shared.clone())
        .with_cost(|cells: &u32| *cells);
    // Paying: the item takes the 3 cells there are and waits for 2 more.
    let poll = tokio::time::timeout(Duration::from_millis(50), limited.next()).await;
    assert!(poll.is_err(), "5 cells cannot be there within 50 ms");
    assert_eq!(shared.available(), 0);
    drop(limited);
    // The 3 taken are back, and the 50 ms refilled none (a cell takes 100).
    assert_eq!(shared.available(), 3);
}

/// A payment taken in several steps is given back whole while nothing was built on it, and not
/// at all once another request took a cell after it: giving back then would free cells that
/// request was admitted against (here 3 cells and the other's at one instant, with a burst of 3).
#[tokio::test(start_paused = true)]
async fn a_dropped_payment_gives_back_exactly() {
    let shared = limiter("10/s burst 3");
    let five = || {
        RateLimited::new(futures_util::stream::iter([5u32]), shared.clone())
            .with_cost(|cells: &u32| *cells)
    };
    // 3 cells at 0 ms, the fourth at 100 ms, then waiting for the fifth until 200 ms.
    let mut limited = five();
    let poll = tokio::time::timeout(Duration::from_millis(150), limited.next()).await;
    assert!(poll.is_err());
    assert_eq!(shared.available(), 0);
    drop(limited);
    assert_eq!(
        shared.available(),
        3,
        "both steps given back: the bucket as before"
    );

    let mut limited = five();
    let poll = tokio::time::timeout(Duration::from_millis(50), limited.next()).await;
    assert!(poll.is_err());
    // The payment took 3 cells at 150 ms, booked until 450 ms. While the stream is not polled,
    // another request takes a cell at 460 ms, on top of the payment's word. Giving the payment
    // back now (3 cells) would admit 4 at one instant, with a burst of 3.
    tokio::time::sleep(Duration::from_millis(260)).await;
    assert!(shared.check().is_ok());
    drop(limited);
    assert_eq!(
        shared.available(),
        2,
        "nothing given back under another's admission"
    );
}

#[tokio::test(start_paused = true)]
async fn a_sink_passes_items_on_at_the_rate() {
    let seen = delivered([600, 600, 200, 2_000], |inner| {
        RateLimitedSink::new(inner, limiter("1000/s burst 1000")).with_cost(|bytes: &u32| *bytes)
    })
    .await;
    // 600 at once; 400 left, so the next 600 waits 200 ms; 200 more waits 200 ms; 2 000 more
    // take 2 s.
    assert_eq!(seen, [(600, 0), (600, 200), (200, 400), (2_000, 2_400)]);
}

/// The sink a test's adapter wraps: it takes every item at once.
type Inner = std::pin::Pin<Box<dyn futures_util::Sink<u32, Error = std::convert::Infallible>>>;

/// Sends `items` through the adapter `wrap` makes around an [`Inner`] sink, and closes it: each
/// item with when the inner sink took it, in ms from the start.
async fn delivered<S>(
    items: impl IntoIterator<Item = u32>,
    wrap: impl FnOnce(Inner) -> S,
) -> Vec<(u32, u128)>
where
    S: futures_util::Sink<u32>,
    S::Error: std::fmt::Debug,
{
    let start = Instant::now();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let inner: Inner = Box::pin(futures_util::sink::unfold((), move |(), item: u32| {
        log.lock()
            .unwrap()
            .push((item, start.elapsed().as_millis()));
        async { Ok(()) }
    }));
    let mut sink = Box::pin(wrap(inner));
    for item in items {
        sink.send(item).await.unwrap();
    }
    sink.close().await.unwrap();
    let seen = seen.lock().unwrap().clone();
    seen
}

/// A policy set for streams: 10/s burst 4 per user, 5/s burst 2 for everyone, whose refusals
/// carry a jitter of a second (for clients: a stream waits only until the set conforms).
fn set() -> Arc<Policies<str, TokioClock>> {
    let second = Duration::from_secs(1);
    let built = Policies::<str>::builder()
        .clock(TokioClock::new())
        .policy(Policy::keyed("user", |user: &str| user).quota("10/s burst 4".parse().unwrap()))
        .policy(
            Policy::global("all")
                .quota("5/s burst 2".parse().unwrap())
                .jitter(second, second),
        )
        .build();
    Arc::new(built.unwrap())
}

/// Over a backend, items go on at the tightest quota of every policy that applies, an item
/// costing more than every burst is paid over time (here 5 cells through a burst of 2), and
/// another user's stream spends the same global cells.
#[tokio::test(start_paused = true)]
async fn items_over_a_backend_go_at_the_tightest_quota() {
    let start = Instant::now();
    let shared = set();
    let alice = RateLimited::new(
        futures_util::stream::iter([1u32, 5, 1]),
        Over::new(shared.clone(), "alice".to_owned()),
    )
    .with_cost(|cells: &u32| *cells);
    // 1 of the 2 global cells at once; 5 takes the other and waits 200 ms for each of the 4
    // more; the last cell 200 ms later.
    assert_eq!(times(alice, start).await, [0, 800, 1_000]);
    // The user bucket holds all but the last cell (it refills in 100 ms); the global is spent.
    assert_eq!(alice_left(&shared).await, [3, 0]);

    let bob = RateLimited::new(futures_util::stream::iter(0..2), Over::new(shared, "bob"));
    assert_sync(&bob);
    assert_eq!(times(bob, start).await, [1_200, 1_400]);
}

/// Adapters are `Sync` when their parts are (a stream stored in shared state, or made a body).
fn assert_sync<T: Sync>(_: &T) {}

async fn alice_left(set: &Policies<str, TokioClock>) -> Vec<u32> {
    let states = set.look("alice").await.unwrap();
    states
        .iter()
        .map(|state| state.gauge().remaining())
        .collect()
}

/// Cells taken through a backend stay spent when the adapter is dropped mid-payment: an
/// admission never rests on cells given back, and the set reads as the decisions left it.
#[tokio::test(start_paused = true)]
async fn a_payment_over_a_backend_keeps_what_it_took() {
    let shared = set();
    let mut limited = RateLimited::new(
        futures_util::stream::iter([5u32]),
        Over::new(shared.clone(), "alice"),
    )
    .with_cost(|cells: &u32| *cells);
    let poll = tokio::time::timeout(Duration::from_millis(50), limited.next()).await;
    assert!(poll.is_err(), "5 cells cannot be there within 50 ms");
    assert_eq!(
        futures_util::Stream::size_hint(limited.get_ref()),
        (0, Some(0))
    );
    drop(limited);
    assert_eq!(alice_left(&shared).await, [2, 0]);
}

/// A sink over a backend: the back-pressure of the set's tightest quota.
#[tokio::test(start_paused = true)]
async fn a_sink_over_a_backend_passes_items_at_the_tightest_quota() {
    let seen = delivered(0..4, |inner| {
        RateLimitedSink::new(inner, Over::new(set(), "carol"))
    })
    .await;
    assert_eq!(seen, [(0, 0), (1, 0), (2, 200), (3, 400)]);
}

/// Runs `future` to its end on this thread, parking between polls: an executor that is not
/// tokio's (there is no tokio runtime here: a tokio sleep would panic).
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Arc::new(Unpark(std::thread::current())).into();
    let mut cx = std::task::Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let std::task::Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::park();
    }
}

/// A stream on another executor's timer (futures-timer's, real time) and the default clock:
/// four items through a burst of 1 at 20 a second take at least three intervals of 50 ms (a
/// refused item asks again after its sleep, and the limiter decides by its own clock), and end
/// (within a bound far above anything a busy machine takes).
#[test]
fn a_stream_runs_on_another_executors_timer() {
    let limiter = Arc::new(RateLimiter::new("20/s burst 1".parse().unwrap()));
    let start = std::time::Instant::now();
    let items = RateLimited::with_timer(
        futures_util::stream::iter(0..4),
        limiter,
        futures_timer::Delay::new,
    );
    assert_eq!(block_on(items.collect::<Vec<_>>()), [0, 1, 2, 3]);
    let elapsed = start.elapsed();
    assert!(elapsed >= Duration::from_millis(145), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(60), "{elapsed:?}");
}

/// The sleeps a timer was asked for.
type Asked = Arc<Mutex<Vec<Duration>>>;

/// A timer that moves a manual clock instead of sleeping, and notes each sleep it was asked for:
/// adapters on it run with no executor and no real time.
fn manual_timer() -> (
    ManualClock,
    Asked,
    impl FnMut(Duration) -> std::future::Ready<()> + Send + 'static,
) {
    let clock = ManualClock::new();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let (timer, log) = (clock.clone(), asked.clone());
    let sleep = move |wait: Duration| {
        log.lock().unwrap().push(wait);
        timer.advance(wait);
        std::future::ready(())
    };
    (clock, asked, sleep)
}

/// With jitter each retry sleeps the refusal's wait (100 ms here) plus a draw from the range,
/// and the draws differ; without it, exactly the wait.
#[test]
fn jitter_lengthens_each_retry_by_a_draw_from_its_range() {
    for jitter in [
        None,
        Some((Duration::from_millis(10), Duration::from_millis(20))),
    ] {
        let (clock, asked, sleep) = manual_timer();
        let limiter = Arc::new(RateLimiter::with_clock(
            "10/s burst 1".parse().unwrap(),
            clock,
        ));
        let mut items = RateLimited::with_timer(futures_util::stream::iter(0..5), limiter, sleep);
        if let Some((min, max)) = jitter {
            seed_jitter(11);
            items = items.with_jitter(max, min); // either order
        }
        let all = items.collect::<Vec<_>>().now_or_never();
        assert_eq!(all, Some(vec![0, 1, 2, 3, 4]));
        let asked = asked.lock().unwrap().clone();
        assert_eq!(asked.len(), 4, "{asked:?}");
        let hundred = Duration::from_millis(100);
        match jitter {
            None => assert!(asked.iter().all(|&wait| wait == hundred), "{asked:?}"),
            Some((min, max)) => {
                let range = hundred + min..=hundred + max;
                assert!(asked.iter().all(|wait| range.contains(wait)), "{asked:?}");
                assert!(asked.windows(2).any(|w| w[0] != w[1]), "{asked:?}");
            }
        }
    }
}

/// A sink on a manual timer: `get_mut` reaches the inner sink, and `into_inner` hands back the
/// inner sink with the items sent but not passed on, in order.
#[test]
fn a_sink_gives_back_its_inner_sink_and_the_items_it_kept() {
    let (clock, _, sleep) = manual_timer();
    let limiter = Arc::new(RateLimiter::with_clock("1/s".parse().unwrap(), clock));
    let mut sink = RateLimitedSink::with_timer(Vec::<u32>::new(), limiter, sleep);
    // Sent without waiting for readiness: kept, none paid for yet.
    for item in [1, 2, 3] {
        std::pin::Pin::new(&mut sink).start_send(item).unwrap();
    }
    sink.get_mut().push(0); // straight to the inner sink, unpaid
    assert_eq!(sink.get_ref(), &[0]);
    let (inner, kept) = sink.into_inner();
    assert_eq!((inner, Vec::from(kept)), (vec![0], vec![1, 2, 3]));

    // An item part-paid when the sink is taken apart gives its cells back: 5 cells through a
    // burst of 2 takes the 2 and sleeps (here for ever) for the rest.
    let clock = ManualClock::new();
    let limiter = Arc::new(RateLimiter::with_clock(
        "1/s burst 2".parse().unwrap(),
        clock,
    ));
    let never = |_| std::future::pending::<()>();
    let mut sink = RateLimitedSink::with_timer(Vec::<u32>::new(), limiter.clone(), never)
        .with_cost(|cells: &u32| *cells);
    std::pin::Pin::new(&mut sink).start_send(5).unwrap();
    assert!(
        sink.flush().now_or_never().is_none(),
        "5 cells are not there"
    );
    assert!(limiter.check().is_err(), "the burst is taken");
    let (_, kept) = sink.into_inner();
    assert_eq!(Vec::from(kept), [5]);
    assert!(limiter.check_n(2).unwrap().is_ok(), "both cells are back");

    // The same sink flushed pays every item (1 a second after the first) and passes all on.
    let (clock, _, sleep) = manual_timer();
    let limiter = Arc::new(RateLimiter::with_clock(
        "1/s".parse().unwrap(),
        clock.clone(),
    ));
    let mut sink = RateLimitedSink::with_timer(Vec::<u32>::new(), limiter, sleep);
    let sent = async {
        for item in [1, 2, 3] {
            sink.send(item).await.unwrap();
        }
        sink.flush().await.unwrap();
    };
    assert_eq!(sent.now_or_never(), Some(()));
    let (inner, kept) = sink.into_inner();
    assert_eq!((inner, kept.len()), (vec![1, 2, 3], 0));
    assert_eq!(clock.get(), 2_000_000_000);
}
