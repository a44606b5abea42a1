//! flowgate's main job, with no external service: one API key's requests through a limiter of
//! "5/s burst 3", on a manual clock so the run is the same on every machine.
//!
//! `cargo run --release --example quickstart`

use std::time::Duration;

use flowgate::clock::ManualClock;
use flowgate::{Quota, RateLimiter};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quota: Quota = "5/s burst 3".parse()?;
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(quota, clock.clone());
    println!(
        "quota {quota}: one cell every {:?}, at most {} at once\n",
        quota.interval(),
        quota.burst()
    );

    // A client sends a request every 50 ms for one second.
    let mut admitted = 0;
    for i in 0..20 {
        let at = Duration::from_millis(50 * i);
        clock.set(at.as_nanos() as u64);
        match limiter.check() {
            Ok(a) => {
                admitted += 1;
                println!(
                    "{at:>7?}  200 OK      remaining {}/{}",
                    a.remaining(),
                    a.limit()
                );
            }
            Err(r) => println!("{at:>7?}  429         retry after {:?}", r.retry_after()),
        }
    }
    // The burst of 3, then one cell per 200 ms: 3 + 4 in 950 ms.
    assert_eq!(admitted, 7);

    // A batch of 4 can never fit a burst of 3: an error of its own, not a 429.
    let never = limiter.check_n(4).unwrap_err();
    println!("\ncheck_n(4): {never}");

    // The default clock is the CPU's counter; the same limiter in real time:
    let live = RateLimiter::new(quota);
    let first_three = (0..3).all(|_| live.check().is_ok());
    // A decision prints as one line (`Display`), admitted or refused.
    let fourth = match live.check() {
        Ok(allowed) => allowed.to_string(),
        Err(refused) => refused.to_string(),
    };
    println!("live limiter: first 3 admitted: {first_three}, 4th: {fourth}");
    assert!(first_three);
    Ok(())
}
