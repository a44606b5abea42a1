//! Values a configuration checks as it is read (see the [`config` module docs](super)): a
//! quota, a duration, `when_full`. A parser that tracks positions (TOML's, JSON's) reports a bad
//! one at its line and column; `build` checks them again for a configuration made in code.

use serde::{Deserialize, Deserializer};

use crate::algorithm::AnyAlgorithm;
use crate::keyed::WhenFull;
use crate::quota::parse_duration;

/// What a checked field holds: [`QUOTA`], [`DURATION`] or [`WHEN_FULL`].
pub(super) type Kind = u8;
pub(super) const QUOTA: Kind = 0;
pub(super) const DURATION: Kind = 1;
pub(super) const WHEN_FULL: Kind = 2;

/// What is wrong with `text` as a value of `kind`, as the error of the field says it.
fn check(kind: Kind, text: &str) -> Result<(), String> {
    match kind {
        QUOTA => text.parse::<AnyAlgorithm>().map(drop),
        DURATION => parse_duration(text).map(drop),
        _ => return when_full(text).map(drop),
    }
    .map_err(|e| format!("{text:?}: {e}"))
}

/// A `when_full` value.
pub(super) fn when_full(text: &str) -> Result<WhenFull, String> {
    match text {
        "refuse" => Ok(WhenFull::Refuse),
        "admit_untracked" => Ok(WhenFull::AdmitUntracked),
        other => Err(format!(
            "{other:?}: expected \"refuse\" or \"admit_untracked\""
        )),
    }
}

/// A string checked as it is read: a parser that tracks positions reports a bad one at its own.
struct Checked<const K: Kind>(String);

impl<'de, const K: Kind> Deserialize<'de> for Checked<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        check(K, &text).map_err(serde::de::Error::custom)?;
        Ok(Self(text))
    }
}

pub(super) fn checked_list<'de, D: Deserializer<'de>, const K: Kind>(
    d: D,
) -> Result<Vec<String>, D::Error> {
    let all = Vec::<Checked<K>>::deserialize(d)?;
    Ok(all.into_iter().map(|c| c.0).collect())
}

pub(super) fn checked_pair<'de, D: Deserializer<'de>, const K: Kind>(
    d: D,
) -> Result<Option<[String; 2]>, D::Error> {
    let pair = Option::<[Checked<K>; 2]>::deserialize(d)?;
    Ok(pair.map(|pair| pair.map(|c| c.0)))
}

pub(super) fn checked_option<'de, D: Deserializer<'de>, const K: Kind>(
    d: D,
) -> Result<Option<String>, D::Error> {
    Ok(Option::<Checked<K>>::deserialize(d)?.map(|c| c.0))
}
