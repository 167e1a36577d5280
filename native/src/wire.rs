//! SEND_BATCH_MESSAGE bodies (RocketMQ `MessageDecoder.encodeMessages`), big-endian, per message:
//!
//! ```text
//! i32 totalSize | i32 magic | i32 bodyCRC | i32 flag | i32 bodyLen | body | i16 propsLen | props
//! ```
//!
//! totalSize counts the whole entry; magic and bodyCRC are not used by brokers.  The properties must
//! be UTF-8 and whole `name\x01value\x02` pairs.  Every length is checked against what is left, so any
//! bytes parse to messages or to an error naming the byte or the message; nothing panics.

use crate::{props, record};

pub const HEAD: usize = 20; // totalSize, magic, bodyCRC, flag, bodyLen

pub struct Message<'a> {
    pub flag: i32,
    pub body: &'a [u8],
    pub props: &'a [u8],
}

pub enum Parsed<'a> {
    Messages(Vec<Message<'a>>),
    /// A message carries a DELAY property: the store's Python path re-addresses it.
    HasDelay,
}

#[derive(Debug)]
pub enum Error {
    /// Bytes that are no batch (the broker answers like for a bad frame).
    Format(String),
    /// A message the store refuses (MESSAGE_ILLEGAL).
    Illegal(String),
}

pub fn parse(data: &[u8]) -> Result<Parsed<'_>, Error> {
    let mut out = Vec::with_capacity(data.len() / 64 + 1);
    let mut pos = 0;
    let mut delay = false;
    while pos < data.len() {
        let left = data.len() - pos;
        if left < HEAD {
            return Err(Error::Format(format!(
                "batch record at byte {pos} is truncated"
            )));
        }
        let total = record::be_i32(data, pos);
        let flag = record::be_i32(data, pos + 12);
        let blen = record::be_i32(data, pos + 16);
        if total < (HEAD + 2) as i32
            || total as usize > left
            || blen < 0
            || HEAD + blen as usize + 2 > total as usize
        {
            return Err(Error::Format(format!(
                "batch record at byte {pos} has inconsistent lengths"
            )));
        }
        let (total, blen) = (total as usize, blen as usize);
        let p = pos + HEAD + blen;
        let plen = record::be_u16(data, p) as usize;
        if HEAD + blen + 2 + plen != total {
            return Err(Error::Format(format!(
                "batch record at byte {pos}: properties length does not fit"
            )));
        }
        let prop_bytes = &data[p + 2..pos + total];
        let i = out.len();
        if std::str::from_utf8(prop_bytes).is_err() {
            return Err(Error::Format(format!(
                "batch record {i}: properties are not UTF-8"
            )));
        }
        if !props::well_formed(prop_bytes) {
            return Err(Error::Illegal(format!(
                "message {i}: properties are not k\\x01v\\x02 pairs"
            )));
        }
        delay |= props::known(prop_bytes).delay.is_some();
        out.push(Message {
            flag,
            body: &data[pos + HEAD..p],
            props: prop_bytes,
        });
        pos += total;
    }
    Ok(if delay {
        Parsed::HasDelay
    } else {
        Parsed::Messages(out)
    })
}
