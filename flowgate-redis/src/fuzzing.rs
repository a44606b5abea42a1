//! Hooks for the cargo-fuzz targets in `fuzz/`; present only under `--cfg fuzzing`, which
//! cargo-fuzz sets, so no ordinary build (and no published API) has them.
//!
//! It owns one thing: a way in to the check of the Redis script's replies (`Reply::parse` in
//! `script.rs`), which is crate-private and only reached, in the library, after a round trip to
//! a server. Every other target drives public API (quota strings, configuration files,
//! `ClientIp::resolve`, limiters on a manual clock).

pub use self::reply::{Buckets, ParsedReply};

mod reply {
    use ::redis::Value;

    use flowgate::algorithm::{Algorithm, AnyAlgorithm};

    use crate::script::{Bucket, Micros};
    use crate::script::{Call, Reply};

    /// The buckets of one script call, as the client builds them from a policy set's algorithms.
    #[derive(Debug, Clone)]
    pub struct Buckets {
        quotas: Vec<Bucket>,
        keys: Vec<Vec<u8>>,
        capacity: u32,
    }

    /// What the reply check made of a reply, in plain fields (see `gcra.lua`, "Replies").
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ParsedReply {
        /// Every bucket admitted.
        pub admitted: bool,
        /// Buckets whose value was not a TAT.
        pub repaired: u32,
        /// Cells taken (0 of a refusal).
        pub granted: u32,
        /// The refusing bucket, from 0 (refused; 0 of an admission).
        pub index: usize,
        /// The refusing bucket's state (refused; 0 of an admission).
        pub state: u64,
        /// The first refusing bucket of every dry-run policy that would have refused.
        pub dry: Vec<usize>,
        /// The script's reading in µs (`None` for the common call's one integer).
        pub now: Option<u64>,
        /// Every bucket's state.
        pub states: Vec<u64>,
    }

    impl Buckets {
        /// The buckets the script runs `algorithms` as, one key each; `None` if the script
        /// cannot run one of them (the client refuses such a set when it is built).
        pub fn new(algorithms: &[AnyAlgorithm]) -> Option<Self> {
            let micros = (algorithms.iter().enumerate())
                .map(|(i, algorithm)| Micros::new(algorithm, "fuzz", i).ok())
                .collect::<Option<Vec<_>>>()?;
            Some(Self {
                quotas: micros.iter().map(|m| m.bucket).collect(),
                keys: vec![Vec::new(); micros.len()],
                capacity: micros.iter().map(|m| m.algorithm.capacity()).min()?,
            })
        }

        /// Each bucket's four arguments: kind (0 a schedule, 1 a stepped counter, 2 a sliding
        /// one) and its three numbers, in the order `gcra.lua` reads them.
        pub fn args(&self) -> Vec<[u64; 4]> {
            self.quotas.iter().map(|b| b.args()).collect()
        }

        /// The most cells one call may take: the smallest capacity.
        pub fn capacity(&self) -> u32 {
            self.capacity
        }

        /// The reply check on `value`, answering a call for `n` cells (up to `want`, `dry`
        /// naming the dry-run buckets); `None` if it is refused.
        pub fn parse(&self, value: &Value, dry: &str, n: u32, want: u32) -> Option<ParsedReply> {
            let call = Call {
                keys: &self.keys,
                quotas: &self.quotas,
                dry,
                now: None,
                n,
                want,
            };
            Some(match Reply::parse(value, &call)? {
                Reply::Admitted {
                    repaired,
                    granted,
                    dry,
                    now,
                    states,
                } => ParsedReply {
                    admitted: true,
                    repaired,
                    granted,
                    index: 0,
                    state: 0,
                    dry: dry.all,
                    now,
                    states: states.to_vec(),
                },
                Reply::Refused {
                    repaired,
                    index,
                    state,
                    dry,
                    now,
                    states,
                } => ParsedReply {
                    admitted: false,
                    repaired,
                    granted: 0,
                    index,
                    state,
                    dry: dry.all,
                    now,
                    states: states.to_vec(),
                },
            })
        }
    }
}
