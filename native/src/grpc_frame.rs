//! gRPC's message framing over an HTTP/2 stream, and the header values gRPC defines.
//!
//! Each message is a 5-byte prefix (compressed flag, big-endian u32 length) and that many bytes.
//! DATA frames cut the stream anywhere, so [`Decoder`] keeps what it has of the message being
//! read and hands out whole messages. A length over the limit is refused from its prefix, before
//! anything is buffered, so a peer can make it hold at most one limit's worth of bytes. The
//! compressed flag is refused: the server advertises only `identity`.

use bytes::{Buf, Bytes, BytesMut};
use std::time::Duration;

/// Bytes of the length-prefix of every gRPC message.
pub const PREFIX_BYTES: usize = 5;

/// Why a stream's bytes are not gRPC messages; `code` is the gRPC status to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameError {
    pub code: u32,
    pub message: String,
}

/// gRPC status codes the transport itself answers.
pub mod code {
    pub const OK: u32 = 0;
    pub const CANCELLED: u32 = 1;
    pub const UNKNOWN: u32 = 2;
    pub const DEADLINE_EXCEEDED: u32 = 4;
    pub const RESOURCE_EXHAUSTED: u32 = 8;
    pub const UNIMPLEMENTED: u32 = 12;
    pub const INTERNAL: u32 = 13;
    pub const UNAVAILABLE: u32 = 14;
}

/// Splits a request stream into messages.
pub struct Decoder {
    buf: BytesMut,
    max_len: usize,
    /// length of the message being read, once its prefix is in
    want: Option<usize>,
}

impl Decoder {
    pub fn new(max_len: usize) -> Decoder {
        Decoder {
            buf: BytesMut::new(),
            max_len,
            want: None,
        }
    }

    /// Bytes held for a message not complete yet.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Takes `chunk` in; whole messages come out of [`Decoder::next_message`].
    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// The next whole message, `None` when more bytes are needed, or why the stream is bad.
    pub fn next_message(&mut self) -> Result<Option<Bytes>, FrameError> {
        if self.want.is_none() {
            if self.buf.len() < PREFIX_BYTES {
                return Ok(None);
            }
            let flag = self.buf[0];
            let len =
                u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
            match flag {
                0 => {}
                1 => {
                    return Err(FrameError {
                        code: code::UNIMPLEMENTED,
                        message:
                            "a compressed gRPC message: this server accepts identity encoding only"
                                .into(),
                    })
                }
                f => {
                    return Err(FrameError {
                        code: code::INTERNAL,
                        message: format!(
                            "gRPC message prefix has compressed flag {f} (0 or 1 expected)"
                        ),
                    })
                }
            }
            if len > self.max_len {
                return Err(FrameError {
                    code: code::RESOURCE_EXHAUSTED,
                    message: format!(
                        "gRPC message of {len} bytes is larger than the server's limit of {} bytes",
                        self.max_len
                    ),
                });
            }
            self.buf.advance(PREFIX_BYTES);
            self.want = Some(len);
        }
        let len = self.want.unwrap_or(0);
        if self.buf.len() < len {
            self.buf.reserve(len - self.buf.len());
            return Ok(None);
        }
        self.want = None;
        Ok(Some(self.buf.split_to(len).freeze()))
    }

    /// At the end of the stream: an error when a message was cut short.
    pub fn finish(&self) -> Result<(), FrameError> {
        if self.buf.is_empty() && self.want.is_none() {
            return Ok(());
        }
        Err(FrameError {
            code: code::INTERNAL,
            message: format!(
                "the request stream ended inside a gRPC message ({} bytes of it received)",
                self.buf.len()
            ),
        })
    }
}

/// `body` with its 5-byte uncompressed prefix, ready to go out as DATA.
pub fn encode(body: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(PREFIX_BYTES + body.len());
    out.extend_from_slice(&[0]);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(body);
    out.freeze()
}

/// A `grpc-timeout` value (`1..=8` digits and a unit `H M S m u n`), or `None` when malformed.
pub fn parse_timeout(value: &[u8]) -> Option<Duration> {
    if value.len() < 2 || value.len() > 9 {
        return None;
    }
    let (digits, unit) = value.split_at(value.len() - 1);
    if !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit[0] {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// `grpc-message` as the spec wants it: percent-encoded outside printable ASCII (and `%`).
pub fn percent_encode(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for b in message.bytes() {
        if (0x20..0x7f).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_split_anywhere() {
        let mut wire = Vec::new();
        for body in [&b"abc"[..], b"", b"0123456789"] {
            wire.extend_from_slice(&encode(body));
        }
        for cut in 0..wire.len() {
            let mut d = Decoder::new(100);
            let mut got = Vec::new();
            for part in [&wire[..cut], &wire[cut..]] {
                d.push(part);
                while let Some(m) = d.next_message().unwrap() {
                    got.push(m.to_vec());
                }
            }
            assert_eq!(got, vec![b"abc".to_vec(), vec![], b"0123456789".to_vec()]);
            d.finish().unwrap();
        }
    }

    #[test]
    fn refusals() {
        let mut d = Decoder::new(4);
        d.push(&[0, 0, 0, 0, 5]);
        assert_eq!(d.next_message().unwrap_err().code, code::RESOURCE_EXHAUSTED);
        let mut d = Decoder::new(4);
        d.push(&[1, 0, 0, 0, 1, 7]);
        assert_eq!(d.next_message().unwrap_err().code, code::UNIMPLEMENTED);
        let mut d = Decoder::new(4);
        d.push(&[0, 0, 0, 0, 3, 1]);
        assert_eq!(d.next_message().unwrap(), None);
        assert!(d.finish().is_err());
    }

    #[test]
    fn timeouts_and_messages() {
        assert_eq!(parse_timeout(b"100m"), Some(Duration::from_millis(100)));
        assert_eq!(parse_timeout(b"2S"), Some(Duration::from_secs(2)));
        assert_eq!(parse_timeout(b"123456789S"), None);
        assert_eq!(parse_timeout(b"m"), None);
        assert_eq!(parse_timeout(b"1x"), None);
        assert_eq!(percent_encode("a%b\né"), "a%25b%0A%C3%A9");
    }
}
