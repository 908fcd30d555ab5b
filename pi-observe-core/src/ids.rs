//! Trace and span identifiers (W3C Trace Context compatible) and their generation.

use std::cell::Cell;
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A 16-byte trace id, never all-zero; printed as 32 lowercase hex characters.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TraceId([u8; 16]);

/// An 8-byte span id, never all-zero; printed as 16 lowercase hex characters.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpanId([u8; 8]);

/// Why a string or byte array is not a valid id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidId {
    what: &'static str,
    reason: &'static str,
}

impl fmt::Display for InvalidId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid {}: {}", self.what, self.reason)
    }
}

impl std::error::Error for InvalidId {}

macro_rules! id_type {
    ($ty:ident, $len:literal, $what:literal) => {
        impl $ty {
            /// Wraps raw bytes; `None` when they are all zero (the W3C "invalid" id).
            pub fn from_bytes(bytes: [u8; $len]) -> Option<Self> {
                if bytes == [0; $len] { None } else { Some(Self(bytes)) }
            }

            /// The raw bytes.
            pub fn to_bytes(self) -> [u8; $len] {
                self.0
            }

            /// A new random id (never all-zero).
            pub fn random() -> Self {
                loop {
                    let mut bytes = [0u8; $len];
                    for chunk in bytes.chunks_mut(8) {
                        let word = next_random().to_le_bytes();
                        chunk.copy_from_slice(&word[..chunk.len()]);
                    }
                    if let Some(id) = Self::from_bytes(bytes) {
                        return id;
                    }
                }
            }

            /// The lowercase hex text, on the stack (what `Display` writes).
            pub fn hex(&self) -> IdHex<{ $len * 2 }> {
                IdHex::encode(&self.0)
            }

            /// Parses exactly
            #[doc = concat!(stringify!($len), " bytes of lowercase or uppercase hex.")]
            pub fn from_hex(hex: &str) -> Result<Self, InvalidId> {
                let mut bytes = [0u8; $len];
                decode_hex(hex, &mut bytes).map_err(|reason| InvalidId { what: $what, reason })?;
                Self::from_bytes(bytes).ok_or(InvalidId { what: $what, reason: "all zero" })
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.hex())
            }
        }

        impl fmt::Debug for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($ty), "({})"), self)
            }
        }

        impl FromStr for $ty {
            type Err = InvalidId;
            fn from_str(s: &str) -> Result<Self, InvalidId> {
                Self::from_hex(s)
            }
        }

        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.hex())
            }
        }

        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                Self::from_hex(&s).map_err(serde::de::Error::custom)
            }
        }
    };
}

/// An id's lowercase hex text held on the stack ([`TraceId::hex`], [`SpanId::hex`]): writing an
/// id costs no allocation and no formatting machinery. Derefs to `str`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct IdHex<const N: usize>([u8; N]);

impl<const N: usize> IdHex<N> {
    fn encode(bytes: &[u8]) -> Self {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut out = [b'0'; N];
        for (pair, byte) in out.chunks_exact_mut(2).zip(bytes) {
            pair[0] = DIGITS[usize::from(byte >> 4)];
            pair[1] = DIGITS[usize::from(byte & 0xf)];
        }
        IdHex(out)
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        // Only ASCII hex digits are ever stored.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl<const N: usize> std::ops::Deref for IdHex<N> {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl<const N: usize> fmt::Debug for IdHex<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

id_type!(TraceId, 16, "trace id");
id_type!(SpanId, 8, "span id");

fn decode_hex(hex: &str, out: &mut [u8]) -> Result<(), &'static str> {
    let bytes = hex.as_bytes();
    if bytes.len() != out.len() * 2 {
        return Err("wrong length");
    }
    for (slot, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        *slot = (nibble(pair[0])? << 4) | nibble(pair[1])?;
    }
    Ok(())
}

fn nibble(c: u8) -> Result<u8, &'static str> {
    match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        b'A'..=b'F' => Ok(c - b'A' + 10),
        _ => Err("not hex"),
    }
}

/// Per-thread SplitMix64 state, seeded from the clock, the thread and a process-wide counter, so
/// ids are unique across threads without a lock. Ids are identifiers, not secrets.
fn next_random() -> u64 {
    static SEED_COUNTER: AtomicU64 = AtomicU64::new(0);
    thread_local! {
        static STATE: Cell<u64> = Cell::new(seed(SEED_COUNTER.fetch_add(1, Ordering::Relaxed)));
    }
    STATE.with(|state| {
        let next = state.get().wrapping_add(0x9e37_79b9_7f4a_7c15);
        state.set(next);
        let mut z = next;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    })
}

fn seed(counter: u64) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // RandomState carries per-process OS randomness; mix in time and a counter per thread.
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default();
    hasher.write_u128(nanos);
    hasher.write_u64(counter);
    hasher.write_u32(std::process::id());
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_print_as_lowercase_hex_and_parse_back() {
        let trace = TraceId::random();
        let text = trace.to_string();
        assert_eq!(text.len(), 32);
        assert!(text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        assert_eq!(text.parse::<TraceId>().unwrap(), trace);
        let span = SpanId::random();
        assert_eq!(span.to_string().len(), 16);
        assert_eq!(span.to_string().parse::<SpanId>().unwrap(), span);
    }

    #[test]
    fn known_bytes_give_the_w3c_text_in_display_hex_and_json() {
        let trace = TraceId::from_bytes([
            0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36,
        ])
        .unwrap();
        let span = SpanId::from_bytes([0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]).unwrap();
        assert_eq!(&*trace.hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(trace.to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(span.hex().as_str(), "00f067aa0ba902b7");
        assert_eq!(serde_json::to_string(&span).unwrap(), "\"00f067aa0ba902b7\"");
        assert_eq!(format!("{span:?}"), "SpanId(00f067aa0ba902b7)");
    }

    #[test]
    fn all_zero_and_malformed_ids_are_rejected() {
        assert!(TraceId::from_hex(&"0".repeat(32)).is_err());
        assert!(SpanId::from_bytes([0; 8]).is_none());
        assert!(SpanId::from_hex("abc").is_err());
        assert!(SpanId::from_hex("zz00000000000001").is_err());
        assert!(SpanId::from_hex("é0000000000001").is_err());
    }

    #[test]
    fn random_ids_do_not_repeat_across_threads() {
        let handles: Vec<_> =
            (0..4).map(|_| std::thread::spawn(|| (0..10_000).map(|_| SpanId::random()).collect::<Vec<_>>())).collect();
        let mut all = std::collections::HashSet::new();
        for handle in handles {
            for id in handle.join().unwrap() {
                assert!(all.insert(id), "duplicate span id {id}");
            }
        }
    }
}
