//! [`Key`]: how a policy's key extractor names the bucket a request goes to, by feeding borrowed
//! parts of the request to one hasher: no allocation, one hash per policy, whatever the parts
//! are (a user name, an endpoint, an IP address, a tuple of them).

use core::hash::{BuildHasher, Hash, Hasher};

/// A request's key for one policy, built by the policy's extractor from parts of the request.
///
/// The parts are hashed as they are added (nothing is copied or stored), so a key made of
/// borrowed strings costs no allocation. Two requests share a bucket when their extractors add
/// equal parts in the same order. An extractor that finds no usable key calls
/// [`skip`](Self::skip): the policy then does not apply to that request.
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
#[derive(Debug)]
pub struct Key {
    hasher: ahash::AHasher,
    skip: bool,
}

impl Key {
    /// A key hashed with `state`.
    #[inline(always)]
    pub(crate) fn new(state: &ahash::RandomState) -> Self {
        Self {
            hasher: state.build_hasher(),
            skip: false,
        }
    }

    /// Adds `part` to the key.
    #[inline(always)]
    pub fn add<T: Hash + ?Sized>(&mut self, part: &T) -> &mut Self {
        part.hash(&mut self.hasher);
        self
    }

    /// Marks the request as having no key for this policy: the policy does not apply to it.
    #[inline]
    pub fn skip(&mut self) -> &mut Self {
        self.skip = true;
        self
    }

    /// The key's hash, or `None` if the extractor skipped the request.
    #[inline(always)]
    pub(crate) fn finish(self) -> Option<u64> {
        (!self.skip).then(|| self.hasher.finish())
    }
}

/// A policy's key extractor, boxed.
pub(crate) type Extract<R> = Box<dyn Fn(&R, &mut Key) + Send + Sync>;
