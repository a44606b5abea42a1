//! [`Text`]: a header value formatted on the stack, and numbers in decimal without the
//! formatting machinery: what every quota header is written with.

use arrayvec::ArrayVec;
use http::header::HeaderValue;

/// Text of one header value, formatted on the stack (spilling to the heap only for very long
/// lists), so that a response's header costs one allocation: its `HeaderValue`.
#[derive(Default)]
pub(crate) struct Text {
    stack: ArrayVec<u8, 256>,
    spill: Vec<u8>,
}

impl Text {
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        if self.spill.is_empty() && self.stack.try_extend_from_slice(bytes).is_ok() {
            return;
        }
        if self.spill.is_empty() {
            self.spill.extend_from_slice(&self.stack);
        }
        self.spill.extend_from_slice(bytes);
    }

    pub(crate) fn push_number(&mut self, n: u64) {
        let mut digits = [0u8; 20];
        self.push(decimal(n, &mut digits));
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        if self.spill.is_empty() {
            &self.stack
        } else {
            &self.spill
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.as_bytes().is_empty()
    }

    pub(crate) fn value(&self) -> HeaderValue {
        bytes_value(self.as_bytes())
    }
}

/// `n` in decimal, in the tail of `digits` (two digits per division).
pub(crate) fn decimal(mut n: u64, digits: &mut [u8; 20]) -> &[u8] {
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899";
    let mut at = digits.len();
    while n >= 100 {
        let pair = (n % 100) as usize * 2;
        n /= 100;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if n >= 10 {
        let pair = n as usize * 2;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    } else {
        at -= 1;
        digits[at] = b'0' + n as u8;
    }
    &digits[at..]
}

/// A header value of `n` in decimal.
pub(crate) fn number(n: u64) -> HeaderValue {
    let mut digits = [0u8; 20];
    bytes_value(decimal(n, &mut digits))
}

pub(crate) fn bytes_value(bytes: &[u8]) -> HeaderValue {
    // Built from sf-strings (printable ASCII only, see `push_name`), digits and separators:
    // always valid; an empty value is the unreachable fallback.
    HeaderValue::from_bytes(bytes).unwrap_or_else(|_| HeaderValue::from_static(""))
}
