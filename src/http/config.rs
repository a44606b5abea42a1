//! The client-address settings in configuration files (features `tower` and `serde`): a
//! [`Cidr`] as its text (`"10.0.0.0/8"`), and a [`ClientIp`] as a table, so that a service's
//! file holds its trusted proxies beside its policies.
//!
//! ```
//! use flowgate::http::ClientIp;
//! use flowgate::policy::PoliciesConfig;
//!
//! #[derive(serde::Deserialize)]
//! struct Config {
//!     client_ip: ClientIp,
//!     #[serde(flatten)]
//!     limits: PoliciesConfig,
//! }
//!
//! let config: Config = toml::from_str(r#"
//!     [client_ip]
//!     trust = ["10.0.0.0/8", "fd00::/8"]
//!     header = "x-forwarded-for"   # or "forwarded", or "x-real-ip"
//!     ipv6_prefix = 56
//!     when_missing = "refuse"      # or "shared"
//!     missing_status = 500
//!
//!     [[policies]]
//!     name = "per-ip"
//!     key = "client-ip"
//!     quotas = ["100/min"]
//! "#)?;
//! assert_eq!(
//!     config.client_ip,
//!     ClientIp::peer().trust(["10.0.0.0/8".parse()?, "fd00::/8".parse()?]).ipv6_prefix(56)
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{Cidr, ClientIp, ForwardedHeader, Unkeyed};

impl Serialize for Cidr {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Cidr {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(D::Error::custom)
    }
}

/// A [`ClientIp`] as a configuration file writes it; every field may be left out (the
/// defaults of [`ClientIp::peer`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Written {
    #[serde(default)]
    trust: Vec<Cidr>,
    header: Option<String>,
    ipv4_prefix: Option<u8>,
    ipv6_prefix: Option<u8>,
    embedded_ipv4: Option<bool>,
    when_missing: Option<String>,
    missing_status: Option<u16>,
}

impl<'de> Deserialize<'de> for ClientIp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let written = Written::deserialize(deserializer)?;
        let mut client_ip = ClientIp::peer().trust(written.trust);
        if let Some(header) = written.header {
            client_ip = client_ip.header(match header.to_ascii_lowercase().as_str() {
                "x-forwarded-for" => ForwardedHeader::XForwardedFor,
                "forwarded" => ForwardedHeader::Forwarded,
                "x-real-ip" => ForwardedHeader::XRealIp,
                other => {
                    return Err(D::Error::custom(format!(
                        "header {other:?}: expected \"x-forwarded-for\", \"forwarded\" or \
                         \"x-real-ip\""
                    )))
                }
            });
        }
        if let Some(bits) = written.ipv4_prefix {
            client_ip = client_ip.ipv4_prefix(bits);
        }
        if let Some(bits) = written.ipv6_prefix {
            client_ip = client_ip.ipv6_prefix(bits);
        }
        if let Some(embedded) = written.embedded_ipv4 {
            client_ip = client_ip.embedded_ipv4(embedded);
        }
        let status = match written.missing_status {
            Some(code) => http::StatusCode::from_u16(code)
                .map_err(|_| D::Error::custom(format!("missing_status {code}: not a status")))?,
            None => http::StatusCode::INTERNAL_SERVER_ERROR,
        };
        let missing = match written.when_missing.as_deref() {
            None | Some("refuse") => Unkeyed::Refuse(status),
            Some("shared") if written.missing_status.is_none() => Unkeyed::Shared,
            Some("shared") => {
                return Err(D::Error::custom(
                    "missing_status goes with when_missing = \"refuse\"",
                ))
            }
            Some(other) => {
                return Err(D::Error::custom(format!(
                    "when_missing {other:?}: expected \"refuse\" or \"shared\""
                )))
            }
        };
        Ok(client_ip.when_missing(missing))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ClientIp, String> {
        toml::from_str::<ClientIp>(text).map_err(|e| e.to_string())
    }

    #[test]
    fn every_setting_reads_and_mistakes_are_named() {
        assert_eq!(parse("").unwrap(), ClientIp::peer());
        let all = parse(
            "trust = [\"10.0.0.0/8\"]\nheader = \"Forwarded\"\nipv4_prefix = 24\n\
             ipv6_prefix = 48\nembedded_ipv4 = false\nwhen_missing = \"shared\"\n",
        )
        .unwrap();
        let expected = ClientIp::peer()
            .trust(["10.0.0.0/8".parse().unwrap()])
            .header(ForwardedHeader::Forwarded)
            .ipv4_prefix(24)
            .ipv6_prefix(48)
            .embedded_ipv4(false)
            .when_missing(Unkeyed::Shared);
        assert_eq!(all, expected);
        let forbidden = parse("missing_status = 403").unwrap();
        let status = http::StatusCode::FORBIDDEN;
        assert_eq!(forbidden.missing(), Unkeyed::Refuse(status));
        for (bad, says) in [
            ("trust = [\"10.0.0.0/33\"]", "not a network"),
            ("header = \"via\"", "expected \"x-forwarded-for\""),
            (
                "when_missing = \"ignore\"",
                "expected \"refuse\" or \"shared\"",
            ),
            ("missing_status = 42", "not a status"),
            (
                "when_missing = \"shared\"\nmissing_status = 500",
                "goes with",
            ),
            ("trusted = []", "unknown field"),
        ] {
            let error = parse(bad).unwrap_err();
            assert!(error.contains(says), "{bad}: {error}");
        }
        let cidr: Cidr = toml::from_str::<Wrapper>("c = \"2001:db8::/32\"")
            .unwrap()
            .c;
        assert_eq!(
            toml::to_string(&Wrapper { c: cidr }).unwrap(),
            "c = \"2001:db8::/32\"\n"
        );
    }

    #[derive(Deserialize, Serialize)]
    struct Wrapper {
        c: Cidr,
    }
}
