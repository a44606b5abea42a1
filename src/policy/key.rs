//! [`Key`]: how a policy's key extractor names the bucket a request goes to, by feeding borrowed
//! parts of the request to one hasher: no allocation, one hash per policy, whatever the parts
//! are (a user name, an endpoint, an IP address, a tuple of them). For a set decided in Redis
//! the same extractor writes the parts' bytes instead (see [`Key`]'s docs), so that every process
//! names a key's buckets alike.

use core::hash::{BuildHasher, Hash, Hasher};

use crate::outcome::Rejection;

/// A request's key for one policy, built by the policy's extractor from parts of the request.
///
/// The parts are hashed as they are added (nothing is copied or stored), so a key made of
/// borrowed strings costs no allocation. Two requests share a bucket when their extractors add
/// equal parts in the same order. An extractor that finds no usable key calls
/// [`skip`](Self::skip): the policy then does not apply to that request; or
/// [`reject`](Self::reject): the request is refused, whatever the buckets hold.
///
/// ```
/// use flowgate::clock::ManualClock;
/// use flowgate::policy::{Policies, Policy};
/// use flowgate::Quota;
///
/// struct Request { user: Option<String>, endpoint: &'static str }
///
/// let policies = Policies::<Request>::builder()
///     .clock(ManualClock::new())
///     .policy(
///         Policy::keyed_with("per-user-per-endpoint", |request: &Request, key| {
///             match &request.user {
///                 Some(user) => key.add(user).add(request.endpoint),
///                 None => key.skip(), // anonymous requests are not limited per user
///             };
///         })
///         .quota(Quota::per_minute(1)?),
///     )
///     .build()?;
/// let alice = Request { user: Some("alice".into()), endpoint: "/search" };
/// assert!(policies.check(&alice).is_ok());
/// assert!(policies.check(&alice).is_err());
/// let anonymous = Request { user: None, endpoint: "/search" };
/// assert!(policies.check(&anonymous).is_ok());
/// assert!(policies.check(&anonymous).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// An extractor that [`reject`](Self::reject)s a request refuses it for good, with a status
/// and a message the HTTP middleware answers with:
///
/// ```
/// use flowgate::clock::ManualClock;
/// use flowgate::outcome::{Cause, Rejection};
/// use flowgate::policy::{Policies, Policy};
/// use flowgate::Quota;
///
/// static NO_TOKEN: Rejection = Rejection::new(401, "the request carries no token");
///
/// let policies = Policies::<Option<&str>>::builder()
///     .clock(ManualClock::new())
///     .policy(
///         Policy::keyed_with("per-token", |token: &Option<&str>, key| {
///             match token {
///                 Some(token) => key.add(token),
///                 None => key.reject(&NO_TOKEN),
///             };
///         })
///         .quota(Quota::per_minute(10)?),
///     )
///     .build()?;
/// let refused = policies.check(&None).unwrap_err();
/// assert_eq!(refused.cause(), Cause::Rejected);
/// assert_eq!(refused.rejection(), Some(&NO_TOKEN));
/// assert!(policies.check(&Some("t0k3n")).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # In Redis
/// A set decided in Redis names each key's buckets by bytes written by the parts' [`Hash`]
/// implementations, the same in every process whatever its hash seed. A key of one string
/// part is that string (`"alice"` is the Redis key `…:alice…`). Any other key is the byte
/// `0xff` (which no string holds, so the two forms never meet) followed by the bytes the parts
/// write: strings as UTF-8 and a `0xff` end, integers little-endian whatever the machine,
/// lengths as 8 bytes. The types std hashes by their value (strings, integers, `char`, `bool`,
/// and tuples, slices and arrays of them) write the same bytes on every machine; for an IP
/// address add its text or its octets, since std does not promise how `IpAddr` hashes across
/// Rust releases.
///
/// The lifetime is that of a recording key's buffer; an extractor never names it
/// (`|request: &Request, key: &mut Key| …`).
#[derive(Debug)]
pub struct Key<'a> {
    hasher: ahash::AHasher,
    /// `None` while the request goes to the key's buckets; [`Rejection::SKIP`] or the
    /// rejection once the extractor skipped or rejected it. One pointer, not an enum of three: a key is made
    /// per policy per decision, and zero is its usual end.
    end: Option<&'static Rejection>,
    /// Where the parts' bytes go, for a set decided in Redis; `None` in process. A reference,
    /// not an owned buffer: a key with an owned one cost an in-process decision its drop on
    /// every policy (`scripts/instructions.sh 100000 flowgate_policy_three_layers`).
    record: Option<&'a mut Recording>,
}

impl Key<'_> {
    /// A key hashed with `state`.
    #[inline(always)]
    pub(crate) fn new(state: &ahash::RandomState) -> Self {
        Self {
            hasher: state.build_hasher(),
            end: None,
            record: None,
        }
    }
}

impl<'a> Key<'a> {
    /// A key that records its parts' bytes into `record` (a set decided in Redis; see the
    /// type's docs).
    fn recording(record: &'a mut Recording) -> Self {
        Self {
            hasher: ahash::RandomState::with_seeds(0, 0, 0, 0).build_hasher(),
            end: None,
            record: Some(record),
        }
    }

    /// Adds `part` to the key.
    #[inline(always)]
    pub fn add<T: Hash + ?Sized>(&mut self, part: &T) -> &mut Self {
        match &mut self.record {
            None => part.hash(&mut self.hasher),
            Some(recording) => recording.add(part),
        }
        self
    }

    /// Marks the request as having no key for this policy: the policy does not apply to it.
    #[inline]
    pub fn skip(&mut self) -> &mut Self {
        self.end = Some(&Rejection::SKIP);
        self
    }

    /// Rejects the request: the policy set refuses it ([`Cause::Rejected`](crate::Cause)),
    /// whatever its buckets hold, giving back what earlier policies took; the refusal carries
    /// `why` ([`Refused::rejection`](crate::policy::Refused::rejection)), which the HTTP
    /// middleware answers with. A dry-run policy never refuses: its extractor's rejection
    /// leaves the request to the other policies, as a skip does. The last call of `skip` and
    /// `reject` counts.
    ///
    /// Put a policy whose extractor may reject before the keyed policies that create buckets:
    /// what those earlier policies spent on the rejected request beyond its cells (a new key's
    /// slot, a cell of the quota on new keys) is not given back, as for any refusal. Over
    /// Redis a rejection takes nothing anywhere.
    #[inline]
    pub fn reject(&mut self, why: &'static Rejection) -> &mut Self {
        self.end = Some(why);
        self
    }

    /// The key's hash; `None` if the extractor skipped the request, the rejection if it
    /// rejected it.
    #[inline(always)]
    pub(crate) fn finish(self) -> Result<Option<u64>, &'static Rejection> {
        match self.end {
            None => Ok(Some(self.hasher.finish())),
            Some(end) => ended(end),
        }
    }
}

/// What a key that ended at `end` ([`Rejection::SKIP`] or a rejection) comes to.
#[cold]
fn ended(end: &'static Rejection) -> Result<Option<u64>, &'static Rejection> {
    if end.is_skip() {
        Ok(None)
    } else {
        Err(end)
    }
}

impl<R: ?Sized> super::Policy<R> {
    /// Appends to `out` the key this policy names for `request` in its portable form (the
    /// parts' bytes as std hashes them; see [`Key`]), the same on every machine: what a backend
    /// that keeps buckets elsewhere keys them by. Appends nothing for a global policy; leaves
    /// `out` as it was and answers `Ok(false)` if the extractor skipped the request, or the
    /// rejection if it rejected it.
    pub fn record_key(&self, request: &R, out: &mut Vec<u8>) -> Result<bool, &'static Rejection> {
        let Some(extract) = &self.extract else {
            return Ok(true);
        };
        let start = out.len();
        let mut recording = Recording {
            bytes: core::mem::take(out),
            shape: Shape::Empty,
        };
        let mut key = Key::recording(&mut recording);
        extract(request, &mut key);
        let end = key.end;
        let Recording { bytes, shape } = recording;
        *out = bytes;
        if let Some(end) = end {
            out.truncate(start);
            return ended(end).map(|_| false);
        }
        if shape == Shape::Str {
            out.pop();
        } else {
            out.insert(start, 0xff);
        }
        Ok(true)
    }
}

/// The bytes a recording key was given, and whether they are one string.
#[derive(Debug, Default)]
pub(crate) struct Recording {
    bytes: Vec<u8>,
    shape: Shape,
}

impl Recording {
    /// Out of line: the recording path must not weigh on the hashing one, which every
    /// in-process decision runs.
    #[cold]
    #[inline(never)]
    fn add<T: Hash + ?Sized>(&mut self, part: &T) {
        part.hash(self);
    }
}

/// What a recording key was given so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Shape {
    #[default]
    Empty,
    /// One `write`: a string's bytes, if its end follows.
    Written,
    /// One `write`, then the `0xff` that ends a string: one string part.
    Str,
    /// Anything else.
    Other,
}

/// Integers in little-endian order whatever the machine's (`usize` and `isize` as 8 bytes), so
/// that a key's bytes are the same everywhere.
macro_rules! record_le {
    ($($method:ident: $ty:ty as $wide:ty),* $(,)?) => {
        $(
            #[inline]
            fn $method(&mut self, value: $ty) {
                self.shape = Shape::Other;
                self.bytes.extend_from_slice(&(value as $wide).to_le_bytes());
            }
        )*
    };
}

impl Hasher for Recording {
    fn finish(&self) -> u64 {
        // Never asked: a recording key is read through `Policy::record_key`.
        0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        self.shape = match self.shape {
            Shape::Empty => Shape::Written,
            _ => Shape::Other,
        };
        self.bytes.extend_from_slice(bytes);
    }

    #[inline]
    fn write_u8(&mut self, value: u8) {
        self.shape = match (self.shape, value) {
            (Shape::Written, 0xff) => Shape::Str,
            _ => Shape::Other,
        };
        self.bytes.push(value);
    }

    record_le! {
        write_u16: u16 as u16, write_u32: u32 as u32, write_u64: u64 as u64,
        write_u128: u128 as u128, write_usize: usize as u64, write_i8: i8 as i8,
        write_i16: i16 as i16, write_i32: i32 as i32, write_i64: i64 as i64,
        write_i128: i128 as i128, write_isize: isize as i64,
    }
}

/// A policy's key extractor, boxed.
pub type Extract<R> = Box<dyn Fn(&R, &mut Key<'_>) + Send + Sync>;

#[cfg(all(test, not(flowgate_loom)))]
mod tests {
    use super::Key;
    use crate::policy::Policy;

    /// What `add` records after `front`, or `None` if it skipped.
    fn recorded(
        front: &[u8],
        add: impl Fn(&mut Key<'_>) + Send + Sync + 'static,
    ) -> Option<Vec<u8>> {
        let policy = Policy::keyed_with("p", move |_: &(), key: &mut Key<'_>| add(key));
        let mut out = front.to_vec();
        policy.record_key(&(), &mut out).ok()?.then_some(out)
    }

    fn bytes(add: impl Fn(&mut Key<'_>) + Send + Sync + 'static) -> Vec<u8> {
        recorded(&[], add).unwrap()
    }

    /// The bytes a recording key keeps are fixed by the parts' values, so that processes built
    /// on other machines or by other Rust releases name the same Redis buckets. (If std ever
    /// changed how strings or integers hash, this test would say so.)
    #[test]
    fn records_the_same_bytes_everywhere() {
        let alice = bytes(|k| {
            k.add("alice");
        });
        assert_eq!(alice, b"alice", "one string is itself");
        let owned = bytes(|k| {
            k.add(&String::from("alice"));
        });
        assert_eq!(owned, alice);
        let numbers = bytes(|k| {
            k.add(&0x0102_0304_u32).add(&7_usize);
        });
        assert_eq!(numbers, [0xff, 4, 3, 2, 1, 7, 0, 0, 0, 0, 0, 0, 0]);
        let tuple = bytes(|k| {
            k.add(&("a", -1_i16));
        });
        assert_eq!(tuple, [0xff, b'a', 0xff, 0xff, 0xff]);
        let octets = bytes(|k| {
            k.add(&[10_u8, 0, 0, 1][..]);
        });
        assert_eq!(octets, [0xff, 4, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 1]);
        // Distinct parts never run together: a string's end is marked.
        let ab_c = bytes(|k| {
            k.add("ab").add("c");
        });
        let a_bc = bytes(|k| {
            k.add("a").add("bc");
        });
        assert_eq!(ab_c, b"\xffab\xffc\xff");
        assert_ne!(ab_c, a_bc);
        // A string and raw bytes that spell it are told apart.
        let raw = bytes(|k| {
            k.add(&0x0000_0065_6369_6c61_u64);
        });
        assert_eq!(raw[1..6], *b"alice");
        assert_ne!(raw, alice);
        let skipping = recorded(b"{p}:", |key| {
            key.add("x").skip();
        });
        assert_eq!(skipping, None);
        // A rejection leaves the buffer as it was, and says why.
        static NO: crate::outcome::Rejection = crate::outcome::Rejection::new(400, "no");
        let rejecting = Policy::keyed_with("p", |_: &(), key: &mut Key<'_>| {
            key.add("x").reject(&NO);
        });
        let mut out = b"{p}:".to_vec();
        assert_eq!(rejecting.record_key(&(), &mut out), Err(&NO));
        assert_eq!(out, b"{p}:");
    }

    /// A key recorded after a front is the front followed by the key's own bytes (its `0xff`
    /// mark, for a key that is not one string, comes after the front).
    #[test]
    fn records_after_a_front() {
        let after = |add: fn(&mut Key<'_>)| recorded(b"{p}:", add).unwrap();
        assert_eq!(
            after(|k| {
                k.add("alice");
            }),
            b"{p}:alice"
        );
        let numbers = after(|k| {
            k.add(&7_u8).add(&8_u8);
        });
        assert_eq!(numbers, b"{p}:\xff\x07\x08");
    }
}
