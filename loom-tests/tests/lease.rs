//! Loom models of the lease word (the Redis limiter's local fast path): spenders racing each
//! other, the task that takes the rest back, and a renewal that refills the word. Each asserts
//! that every leased cell is spent once or given back once, never both and never lost, and that
//! a spender that takes a cell of a new grant reads that grant's gauge.
//!
//! Run: `RUSTFLAGS="--cfg flowgate_loom" cargo test --release -p flowgate-loom-tests`
#![cfg(flowgate_loom)]

use flowgate::loom::{fail_next_cas, LeaseWord};
use flowgate_loom_tests::model;
use loom::sync::Arc;
use loom::thread;

/// Two spenders (one after a spurious CAS failure) against a taker: spent + taken + left is
/// what was leased.
#[test]
fn spenders_and_the_taker_account_for_every_cell() {
    model(|| {
        let lease = Arc::new(LeaseWord::new());
        lease.fill(3, 1_000, 0, 0);
        let spenders: Vec<_> = [(2, 0), (1, 1)]
            .into_iter()
            .map(|(n, spurious)| {
                let lease = lease.clone();
                thread::spawn(move || {
                    fail_next_cas(spurious);
                    lease.spend(n, 10).map_or(0, |_| n)
                })
            })
            .collect();
        let taken = lease.take_rest();
        let spent: u32 = spenders.into_iter().map(|s| s.join().unwrap()).sum();
        let left = lease.take_rest();
        assert_eq!(
            spent + taken + left,
            3,
            "spent {spent}, taken {taken}, left {left}"
        );
    });
}

/// A renewal (take the rest, fill a new grant with its own gauge) against a spender: a cell of
/// the new grant comes with the new gauge (a cell of the old one with either), and no cell is
/// lost or spent twice.
#[test]
fn a_cell_of_a_new_grant_comes_with_its_gauge() {
    model(|| {
        let lease = Arc::new(LeaseWord::new());
        lease.fill(1, 1_000, 7, 0);
        let renewer = {
            let lease = lease.clone();
            thread::spawn(move || {
                let rest = lease.take_rest();
                lease.fill(2, 1_000, 9, 1);
                rest
            })
        };
        let spent = lease.spend(1, 10);
        let rest = renewer.join().unwrap();
        let left = lease.take_rest();
        match spent {
            // From the first grant (one cell, none left after it) or the second (two, one left).
            Some((debt, bucket, 0)) => {
                // The gauge is read after the CAS, so a renewal in between shows the newer
                // grant's: never an older one than the cell's.
                assert!((debt, bucket) == (7, 0) || (debt, bucket) == (9, 1));
                assert_eq!((rest, left), (0, 2));
            }
            Some((debt, bucket, 1)) => {
                assert_eq!((debt, bucket), (9, 1), "the new grant's gauge");
                assert_eq!((rest, left), (1, 1));
            }
            Some(other) => panic!("{other:?}"),
            // Between the renewal's take and its fill the word is empty: nothing spent.
            None => assert_eq!((rest, left), (1, 2)),
        }
    });
}
