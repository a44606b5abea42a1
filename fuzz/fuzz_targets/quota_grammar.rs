//! The quota grammar (`flowgate::quota`): any text, read as a [`Quota`] and as an
//! [`AnyAlgorithm`] (a quota with an algorithm's name after it).
//!
//! Asserts: neither parser panics; an error's position is a byte offset inside the input, on a
//! character boundary; whatever either parser accepts, its `Display` (documented as written "in
//! the grammar `from_str` reads") reads back as an equal value and is its own canonical form;
//! a string that is a quota is also the GCRA algorithm of that quota ("GCRA if none").
#![no_main]

use flowgate::algorithm::AnyAlgorithm;
use flowgate::quota::ParseQuotaError;
use flowgate::Quota;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let quota = text.parse::<Quota>();
    match &quota {
        Ok(quota) => round_trip(quota, text),
        Err(error) => located(error, text),
    }
    let algorithm = text.parse::<AnyAlgorithm>();
    match &algorithm {
        Ok(algorithm) => round_trip(algorithm, text),
        Err(error) => located(error, text),
    }
    if let Ok(quota) = quota {
        assert_eq!(
            algorithm,
            Ok(AnyAlgorithm::from(quota)),
            "{text:?} is a quota, so it is that quota's GCRA"
        );
    }
});

/// `value` (read from `text`) written and read back: equal, and written the same way again.
fn round_trip<T>(value: &T, text: &str)
where
    T: std::str::FromStr<Err = ParseQuotaError> + std::fmt::Display + std::fmt::Debug + PartialEq,
{
    let written = value.to_string();
    match written.parse::<T>() {
        Ok(again) => {
            assert_eq!(&again, value, "{text:?} was written as {written:?}");
            assert_eq!(again.to_string(), written, "{text:?}: not canonical");
        }
        Err(error) => panic!("{text:?} was written as {written:?}, which does not read: {error}"),
    }
}

/// An error points at a place in the input, and says something.
fn located(error: &ParseQuotaError, text: &str) {
    let at = error.position();
    assert!(
        at <= text.len() && text.is_char_boundary(at),
        "{text:?}: error at byte {at}: {error:?}"
    );
    assert!(!error.to_string().is_empty());
}
