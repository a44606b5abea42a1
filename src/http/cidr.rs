//! [`Cidr`]: a network (an address and a prefix length), as the operator names the proxies it
//! trusts; and the address arithmetic it shares with the client's address (IPv4-mapped
//! addresses as IPv4, host bits cleared).

use core::fmt;
use core::str::FromStr;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A network: an address and a prefix length, such as `10.0.0.0/8` or `2001:db8::/32`.
///
/// Parsed from `address/prefix` or a bare address (a single host). Host bits are cleared, and an
/// IPv4-mapped IPv6 network (`::ffff:10.0.0.0/104`) is stored as the IPv4 network it maps.
///
/// ```
/// use flowgate::http::Cidr;
///
/// let lan: Cidr = "10.0.0.0/8".parse()?;
/// assert!(lan.contains("10.1.2.3".parse()?));
/// assert!(lan.contains("::ffff:10.1.2.3".parse()?)); // IPv4-mapped
/// assert!(!lan.contains("11.0.0.1".parse()?));
/// assert!("10.0.0.0/33".parse::<Cidr>().is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

/// Why a [`Cidr`] was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CidrError {
    input: String,
}

impl fmt::Display for CidrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "'{}' is not a network: expected an IP address, optionally followed by '/' and a \
             prefix length of at most 32 (IPv4) or 128 (IPv6)",
            self.input
        )
    }
}

impl core::error::Error for CidrError {}

impl Cidr {
    /// The network of `address` with `prefix` leading bits.
    ///
    /// # Errors
    /// A prefix longer than the address (32 bits for IPv4, 128 for IPv6).
    pub fn new(address: IpAddr, prefix: u8) -> Result<Self, CidrError> {
        let (address, prefix) = match address {
            IpAddr::V6(v6) => match (v6.to_ipv4_mapped(), prefix.checked_sub(96)) {
                (Some(v4), Some(v4_prefix)) => (IpAddr::V4(v4), v4_prefix),
                _ => (address, prefix),
            },
            IpAddr::V4(_) => (address, prefix),
        };
        if prefix > max_prefix(address) {
            return Err(CidrError {
                input: format!("{address}/{prefix}"),
            });
        }
        Ok(Self {
            network: mask(address, prefix),
            prefix,
        })
    }

    /// The network's first address.
    pub fn network(&self) -> IpAddr {
        self.network
    }

    /// The prefix length.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// Whether `address` (IPv4-mapped IPv6 addresses as IPv4) is inside the network.
    pub fn contains(&self, address: IpAddr) -> bool {
        let address = normalize(address);
        address.is_ipv4() == self.network.is_ipv4() && mask(address, self.prefix) == self.network
    }
}

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(s: &str) -> Result<Self, CidrError> {
        let error = || CidrError { input: s.into() };
        let (address, prefix) = match s.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (s, None),
        };
        let address: IpAddr = address.trim().parse().map_err(|_| error())?;
        let prefix = match prefix {
            Some(prefix) => prefix.trim().parse::<u8>().map_err(|_| error())?,
            None => max_prefix(address),
        };
        Self::new(address, prefix).map_err(|_| error())
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// IPv4-mapped IPv6 addresses as IPv4.
pub(crate) fn normalize(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
        IpAddr::V4(_) => address,
    }
}

pub(crate) fn max_prefix(address: IpAddr) -> u8 {
    if address.is_ipv4() {
        32
    } else {
        128
    }
}

/// `address` with all but its first `prefix` bits cleared (`prefix` at most the address's
/// length).
pub(crate) fn mask(address: IpAddr, prefix: u8) -> IpAddr {
    match address {
        IpAddr::V4(v4) => IpAddr::V4(Ipv4Addr::from(u32::from(v4) & keep_v4(prefix))),
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & keep_v6(prefix))),
    }
}

/// The mask that keeps the first `prefix` (≤ 32) bits of an IPv4 address.
pub(crate) const fn keep_v4(prefix: u8) -> u32 {
    match u32::MAX.checked_shl(32 - prefix as u32) {
        Some(keep) => keep,
        None => 0,
    }
}

/// The mask that keeps the first `prefix` (≤ 128) bits of an IPv6 address.
pub(crate) const fn keep_v6(prefix: u8) -> u128 {
    match u128::MAX.checked_shl(128 - prefix as u32) {
        Some(keep) => keep,
        None => 0,
    }
}
