//! Every public error type crosses threads and goes into `Box<dyn Error + Send + Sync +
//! 'static>`: a change that makes one of them hold an `Rc`, a `Cell` or a borrow fails to
//! compile here. (Here rather than in a unit test: the list names every module's errors, and
//! a unit test in one module naming them all would make it depend on every other.)

use flowgate::{Error, InsufficientCapacity, Refused};

/// Compiles only for an error that is `Error + Send + Sync + 'static`.
fn assert_send_sync<T: std::error::Error + Send + Sync + 'static>() {}

/// Every public error type, a policy set's outcomes included.
#[test]
fn every_public_error_is_send_sync_and_static() {
    assert_send_sync::<Error>();
    assert_send_sync::<flowgate::policy::Error>();
    assert_send_sync::<Refused>();
    assert_send_sync::<flowgate::policy::Refused>();
    assert_send_sync::<InsufficientCapacity>();
    assert_send_sync::<flowgate::quota::QuotaError>();
    assert_send_sync::<flowgate::quota::ParseQuotaError>();
    assert_send_sync::<flowgate::keyed::KeyedError>();
    assert_send_sync::<flowgate::policy::BuildError>();
    assert_send_sync::<flowgate::policy::ConfigError>();
    assert_send_sync::<flowgate::http::CidrError>();
    assert_send_sync::<flowgate_redis::RedisConfigError>();
    assert_send_sync::<flowgate_redis::Failure>();
    assert_send_sync::<flowgate::simulate::trace::TraceError>();
}
