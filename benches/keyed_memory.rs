//! Bytes per key: the resident-memory growth of a process that puts N u64 keys into a keyed
//! limiter (flowgate with `max_keys = N`, governor's `DefaultKeyedRateLimiter`; 10 per hour, so
//! no key goes idle), each crate in a fresh child process, divided by N.
//!
//! `cargo bench -p flowgate-benches --bench keyed_memory` measures 1 000 000 keys (and 100 000);
//! as a test target it
//! runs a quick 10 000.

use std::num::NonZeroU32;
use std::process::Command;

use flowgate::{KeyedRateLimiter, Quota};

/// Resident bytes of this process now.
fn rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: usize = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("VmRSS");
    kib * 1024
}

/// Puts `n` keys into `krate`'s limiter; prints the growth of resident memory.
fn measure(krate: &str, n: u64) {
    let before = rss();
    let grown = match krate {
        "flowgate" => {
            let l = KeyedRateLimiter::<u64>::new(Quota::per_hour(10).unwrap(), n as usize).unwrap();
            for key in 0..n {
                assert!(l.check_key(&key).is_ok());
            }
            let grown = rss() - before;
            assert_eq!(l.len() as u64, n);
            grown
        }
        "governor" => {
            let q = governor::Quota::per_hour(NonZeroU32::new(10).unwrap());
            let l = governor::DefaultKeyedRateLimiter::<u64>::keyed(q);
            for key in 0..n {
                assert!(l.check_key(&key).is_ok());
            }
            let grown = rss() - before;
            assert_eq!(l.len() as u64, n);
            grown
        }
        other => panic!("unknown crate {other}"),
    };
    println!("{grown}");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [krate, n] = args.as_slice() {
        measure(krate, n.parse().expect("a key count"));
        return;
    }
    let sizes: &[u64] = if args.iter().any(|a| a == "--bench") {
        &[100_000, 1_000_000]
    } else {
        &[10_000]
    };
    println!(
        "{:>9} {:>10} {:>14} {:>12}",
        "crate", "keys", "RSS growth", "bytes/key"
    );
    for &n in sizes {
        for krate in ["flowgate", "governor"] {
            let out = Command::new(std::env::current_exe().unwrap())
                .args([krate, &n.to_string()])
                .output()
                .expect("run the measuring child");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let grown: f64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
            println!("{krate:>9} {n:>10} {grown:>14} {:>12.1}", grown / n as f64);
        }
    }
}
