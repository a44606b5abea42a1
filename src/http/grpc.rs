//! gRPC refusals: a request whose content type is `application/grpc` (or
//! `application/grpc+proto`, `+json`…) is refused as a gRPC client reads it — HTTP 200 with a
//! trailers-only answer: `grpc-status`, a percent-encoded `grpc-message`, and the wait both in
//! `Retry-After` and as a `google.rpc.RetryInfo` detail in `grpc-status-details-bin`, encoded
//! here (a few protobuf fields, written by hand rather than through a protobuf crate).

use core::time::Duration;

use http::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};

/// `grpc-status`.
const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
/// `grpc-message`.
const GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");
/// `grpc-status-details-bin`: a base64 `google.rpc.Status`.
const GRPC_STATUS_DETAILS_BIN: HeaderName = HeaderName::from_static("grpc-status-details-bin");

/// The type URL of `google.rpc.RetryInfo` in a `google.protobuf.Any`.
const RETRY_INFO: &str = "type.googleapis.com/google.rpc.RetryInfo";

/// Whether a request with these headers is a gRPC call: its content type is
/// `application/grpc`, alone or with a `+codec` or parameters (gRPC-Web's
/// `application/grpc-web` is not: its clients read HTTP statuses).
pub(crate) fn requested(headers: &HeaderMap) -> bool {
    headers.get(CONTENT_TYPE).is_some_and(|value| {
        let value = value.as_bytes();
        let prefix = b"application/grpc";
        value.len() >= prefix.len()
            && value[..prefix.len()].eq_ignore_ascii_case(prefix)
            && matches!(value.get(prefix.len()), None | Some(b'+' | b';'))
    })
}

/// Makes `headers` a trailers-only gRPC refusal with the status `code` and `message`
/// ([`Refusal::grpc_code`](super::Refusal::grpc_code) and
/// [`Refusal::detail`](super::Refusal::detail)); `wait` is the time until a retry can be
/// admitted, when there is one.
pub(crate) fn write(code: u8, message: &str, wait: Option<Duration>, headers: &mut HeaderMap) {
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert(GRPC_STATUS, HeaderValue::from(u16::from(code)));
    let encoded = percent_encode(message);
    if let Ok(value) = HeaderValue::from_str(&encoded) {
        headers.insert(GRPC_MESSAGE, value);
    }
    if let Some(wait) = wait {
        let status = status_with_retry_info(code, message, wait);
        if let Ok(value) = HeaderValue::from_str(&base64(&status)) {
            headers.insert(GRPC_STATUS_DETAILS_BIN, value);
        }
    }
}

/// `grpc-message`'s encoding: every byte outside printable ASCII, and `%`, as `%XX`.
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for &byte in text.as_bytes() {
        if (b' '..=b'~').contains(&byte) && byte != b'%' {
            out.push(char::from(byte));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 15)]));
        }
    }
    out
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// A `google.rpc.Status { code, message, details: [Any(RetryInfo { retry_delay: wait })] }`
/// in protobuf's wire format.
fn status_with_retry_info(code: u8, message: &str, wait: Duration) -> Vec<u8> {
    // google.protobuf.Duration { seconds = 1; nanos = 2 }: proto3 omits zero fields.
    let mut duration = Vec::with_capacity(16);
    if wait.as_secs() != 0 {
        varint_field(&mut duration, 1, wait.as_secs());
    }
    if wait.subsec_nanos() != 0 {
        varint_field(&mut duration, 2, u64::from(wait.subsec_nanos()));
    }
    // google.rpc.RetryInfo { retry_delay = 1 }.
    let mut retry_info = Vec::with_capacity(20);
    bytes_field(&mut retry_info, 1, &duration);
    // google.protobuf.Any { type_url = 1; value = 2 }.
    let mut any = Vec::with_capacity(64);
    bytes_field(&mut any, 1, RETRY_INFO.as_bytes());
    bytes_field(&mut any, 2, &retry_info);
    // google.rpc.Status { code = 1; message = 2; details = 3 }.
    let mut status = Vec::with_capacity(96 + message.len());
    varint_field(&mut status, 1, u64::from(code));
    bytes_field(&mut status, 2, message.as_bytes());
    bytes_field(&mut status, 3, &any);
    status
}

/// A varint field (wire type 0).
fn varint_field(out: &mut Vec<u8>, field: u64, value: u64) {
    varint(out, field << 3);
    varint(out, value);
}

/// A length-delimited field (wire type 2).
fn bytes_field(out: &mut Vec<u8>, field: u64, value: &[u8]) {
    varint(out, (field << 3) | 2);
    varint(out, value.len() as u64);
    out.extend_from_slice(value);
}

fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        // Truncation: the low seven bits, with the continuation bit.
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    // Truncation: below 0x80 here.
    out.push(value as u8);
}

/// Standard base64 without padding, as gRPC's `-bin` headers are sent.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let word = chunk
            .iter()
            .enumerate()
            .fold(0u32, |word, (i, &b)| word | u32::from(b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            let sextet = (word >> (18 - 6 * i)) & 63;
            out.push(char::from(ALPHABET[sextet as usize]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648_vectors_unpadded() {
        let cases = [
            ("", ""),
            ("f", "Zg"),
            ("fo", "Zm8"),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg"),
            ("fooba", "Zm9vYmE"),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in cases {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
        assert_eq!(base64(&[0xfb, 0xff]), "+/8");
    }

    #[test]
    fn varints_are_little_endian_groups_of_seven() {
        let mut out = Vec::new();
        varint(&mut out, 300);
        assert_eq!(out, [0xac, 0x02]);
        out.clear();
        varint(&mut out, u64::MAX);
        assert_eq!(out.len(), 10);
        assert_eq!(out[9], 1);
    }

    #[test]
    fn messages_are_percent_encoded() {
        assert_eq!(percent_encode("a 100% é\n"), "a 100%25 %C3%A9%0A");
    }

    #[test]
    fn grpc_content_types_are_told_apart() {
        let is = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(CONTENT_TYPE, HeaderValue::from_str(value).unwrap());
            requested(&headers)
        };
        assert!(is("application/grpc"));
        assert!(is("application/grpc+proto"));
        assert!(is("Application/GRPC;charset=utf-8"));
        assert!(!is("application/grpc-web"));
        assert!(!is("application/grpcx"));
        assert!(!is("application/json"));
        assert!(!requested(&HeaderMap::new()));
    }
}
