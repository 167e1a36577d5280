//! Offset message ids (RocketMQ `MessageDecoder.createMessageId`): the store host's address and
//! port, then the commitlog offset, big-endian, printed as upper-case hex.

const HEX: &[u8; 16] = b"0123456789ABCDEF";

fn push_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        out.push(HEX[(b >> 4) as usize]);
        out.push(HEX[(b & 15) as usize]);
    }
}

/// The ids of records at `offsets` on the host `host` (packed ip + port), joined with ','.
pub fn joined(host: &[u8], offsets: &[i64]) -> String {
    let mut out = Vec::with_capacity(offsets.len() * (2 * (host.len() + 8) + 1));
    let mut prefix = Vec::with_capacity(2 * host.len());
    push_hex(&mut prefix, host);
    for (i, off) in offsets.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&prefix);
        push_hex(&mut out, &off.to_be_bytes());
    }
    // SAFETY: only ASCII hex digits and commas were written.
    unsafe { String::from_utf8_unchecked(out) }
}

/// The hex of `host` (packed ip + port), the part every id of one store starts with.
pub fn host_hex(host: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 * host.len());
    push_hex(&mut out, host);
    out
}

/// The id of the record at `offset` on a host whose [`host_hex`] is `prefix`.
pub fn one(prefix: &[u8], offset: i64) -> String {
    let mut out = Vec::with_capacity(prefix.len() + 16);
    out.extend_from_slice(prefix);
    push_hex(&mut out, &offset.to_be_bytes());
    // SAFETY: only ASCII hex digits were written (the prefix is host_hex's).
    unsafe { String::from_utf8_unchecked(out) }
}
