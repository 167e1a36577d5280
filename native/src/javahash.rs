//! Java's `String.hashCode` computed over UTF-8 bytes.
//!
//! RocketMQ stores `String.hashCode` of the TAGS property in every consume-queue unit and of
//! `topic#key` in every index entry, so rocketq must compute the same 32-bit value Java does:
//! `h = 31*h + c` over the string's UTF-16 code units, wrapping at 32 bits.  The input here is
//! UTF-8 (what the records hold); each code point is turned into its one or two UTF-16 units
//! on the fly.  Input that is not valid UTF-8 never reaches these functions: callers validate
//! properties first (a record whose properties are not UTF-8 is refused before it is stored).

/// Folds the UTF-16 code units of `bytes` (valid UTF-8) into `h`.
#[inline]
pub fn fold_utf8(mut h: u32, bytes: &[u8]) -> u32 {
    let mut i = 0;
    let n = bytes.len();
    while i < n {
        let b = bytes[i];
        if b < 0x80 {
            h = h.wrapping_mul(31).wrapping_add(b as u32);
            i += 1;
            continue;
        }
        let (cp, len) = if b >= 0xF0 && i + 3 < n {
            (
                ((b as u32 & 0x07) << 18)
                    | ((bytes[i + 1] as u32 & 0x3F) << 12)
                    | ((bytes[i + 2] as u32 & 0x3F) << 6)
                    | (bytes[i + 3] as u32 & 0x3F),
                4,
            )
        } else if b >= 0xE0 && i + 2 < n {
            (
                ((b as u32 & 0x0F) << 12)
                    | ((bytes[i + 1] as u32 & 0x3F) << 6)
                    | (bytes[i + 2] as u32 & 0x3F),
                3,
            )
        } else if b >= 0xC0 && i + 1 < n {
            (((b as u32 & 0x1F) << 6) | (bytes[i + 1] as u32 & 0x3F), 2)
        } else {
            // not reachable for valid UTF-8; hash the byte rather than read past the end
            (b as u32, 1)
        };
        if cp >= 0x10000 {
            let v = cp - 0x10000;
            h = h.wrapping_mul(31).wrapping_add(0xD800 + (v >> 10));
            h = h.wrapping_mul(31).wrapping_add(0xDC00 + (v & 0x3FF));
        } else {
            h = h.wrapping_mul(31).wrapping_add(cp);
        }
        i += len;
    }
    h
}

/// `String.hashCode` of the concatenation of `parts` (valid UTF-8 each), as Java's signed int.
#[inline]
pub fn java_hash_parts(parts: &[&[u8]]) -> i32 {
    let mut h = 0u32;
    for p in parts {
        h = fold_utf8(h, p);
    }
    h as i32
}

/// The index key hash: `abs(hashCode)`, with `Integer.MIN_VALUE` mapped to 0 as RocketMQ does.
#[inline]
pub fn index_hash_parts(parts: &[&[u8]]) -> i32 {
    let h = java_hash_parts(parts);
    if h == i32::MIN {
        0
    } else {
        h.abs()
    }
}

/// The consume-queue tags code: hashCode of the tags, 0 for none.
#[inline]
pub fn tag_code(tags: Option<&[u8]>) -> i64 {
    match tags {
        Some(t) if !t.is_empty() => java_hash_parts(&[t]) as i64,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_java() {
        // values printed by java.lang.String.hashCode
        assert_eq!(java_hash_parts(&[b"TagA"]), 2598919);
        assert_eq!(java_hash_parts(&[b""]), 0);
        assert_eq!(java_hash_parts(&["h\u{e9}llo".as_bytes()]), 103094734);
        assert_eq!(java_hash_parts(&["\u{1F600}".as_bytes()]), 1772899);
        assert_eq!(
            java_hash_parts(&[b"Topic", b"#", b"key"]),
            java_hash_parts(&[b"Topic#key"])
        );
    }
}
