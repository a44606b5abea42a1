//! Per-IP limits through a flood of new keys: 50 well-behaved clients send 10 requests a second
//! each while a flood sends one request each from 200 000 fresh addresses, against a table of
//! 10 000 keys with a quota of 2 000 new keys a second. On a manual clock, so every run is the
//! same.
//!
//! `cargo run --release --example keyed`

use std::time::Duration;

use flowgate::clock::ManualClock;
use flowgate::{Cause, Gcra, KeyedRateLimiter, WhenFull};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::<str, _, _>::builder(Gcra::new(&"10/s burst 5".parse()?))
        .clock(clock.clone())
        .max_keys(10_000)
        .when_full(WhenFull::Refuse)
        .new_keys("2000/s".parse()?)
        .build()?;
    let table = limiter.stats();
    println!(
        "table: {} keys max, {} slots, {} bytes\n",
        table.max_keys, table.slots, table.memory_bytes
    );

    let clients: Vec<String> = (0..50).map(|i| format!("198.51.100.{i}")).collect();
    let (mut served, mut turned_away) = (0u32, 0u32);
    let (mut flood_in, mut flood_out) = (0u32, 0u32);
    let mut flood = 0u32;
    // Ten seconds in steps of 100 ms: each client sends one request per step, the flood 2 000.
    for step in 0..100 {
        clock.set(Duration::from_millis(100 * step).as_nanos() as u64);
        for client in &clients {
            match limiter.check_key(client) {
                Ok(_) => served += 1,
                Err(_) => turned_away += 1,
            }
        }
        for _ in 0..2_000 {
            flood += 1;
            let ip = format!("10.{}.{}.{}", flood >> 16, (flood >> 8) & 255, flood & 255);
            match limiter.check_key(&ip) {
                Ok(_) => flood_in += 1,
                Err(r) if matches!(r.cause(), Cause::NewKeys | Cause::TableFull) => flood_out += 1,
                Err(_) => unreachable!("each flood address sends one request"),
            }
        }
        if step % 25 == 24 {
            limiter.sweep(limiter.stats().slots);
        }
    }
    let stats = limiter.stats();
    println!("clients: {served} served, {turned_away} turned away (10/s each, at their quota)");
    println!("flood:   {flood_in} admitted, {flood_out} refused at creation (2 000/s new keys)");
    println!(
        "table:   {} keys held, {} created, {} evicted idle, {} refused full",
        stats.keys, stats.created, stats.evicted, stats.refused_full
    );
    assert_eq!(turned_away, 0, "well-behaved clients are never refused");
    // New-key quota: a burst of 2 000, then 2 000 a second for the 9.9 s the run lasts.
    assert!(
        flood_in <= 2_000 + 19_800,
        "the flood got past the new-key quota"
    );
    Ok(())
}
