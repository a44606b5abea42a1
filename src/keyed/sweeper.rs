//! [`Sweeper`]: a thread that sweeps a keyed limiter's whole table periodically (with `std`;
//! without it, call [`KeyedRateLimiter::sweep`] from a timer of your own).

use core::hash::Hash;
use core::time::Duration;
use std::sync::mpsc::{self, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

use super::table::SWEEP_CHUNK;
use super::KeyedRateLimiter;
use crate::algorithm::Algorithm;
use crate::clock::Clock;

/// A background sweeper, from [`KeyedRateLimiter::spawn_sweeper`]. Dropping it stops the thread
/// (and waits for the step under way, 256 slots); so does dropping the limiter.
#[must_use = "dropping a Sweeper stops the sweeping at once"]
#[derive(Debug)]
pub struct Sweeper {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl<K, C, A> KeyedRateLimiter<K, C, A>
where
    K: ?Sized + Hash + 'static,
    C: Clock + Send + Sync + 'static,
    A: Algorithm + Send + Sync + 'static,
{
    /// Starts a thread that sweeps the whole table every `every` (see
    /// [`sweep`](Self::sweep)), 256 slots per step, releasing the lock in between. The thread
    /// keeps a weak reference and holds the limiter only for one step at a time: dropping the
    /// [`Sweeper`] stops it after the step under way, and dropping the limiter stops it at its
    /// next step or wake-up (within `every`).
    ///
    /// # Errors
    /// If the thread could not be spawned.
    pub fn spawn_sweeper(self: &Arc<Self>, every: Duration) -> std::io::Result<Sweeper> {
        let (stop, stopped) = mpsc::channel::<()>();
        let limiter: Weak<Self> = Arc::downgrade(self);
        let thread = std::thread::Builder::new()
            .name("flowgate-sweeper".into())
            .spawn(move || {
                // The channel only ever disconnects (the handle dropped): then stop.
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                    let mut left = match limiter.upgrade() {
                        Some(limiter) => limiter.store.table().slots(),
                        None => return,
                    };
                    while left > 0 {
                        if let Err(TryRecvError::Disconnected) = stopped.try_recv() {
                            return;
                        }
                        let Some(limiter) = limiter.upgrade() else {
                            return;
                        };
                        let step = left.min(SWEEP_CHUNK);
                        limiter.sweep(step);
                        left -= step;
                    }
                }
            })?;
        Ok(Sweeper {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Sweeper {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            // A sweep step never panics; if it did, the panic stays on that thread.
            let _ = thread.join();
        }
    }
}
