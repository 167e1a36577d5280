//! The CommitLog record, byte for byte RocketMQ's `MessageExtEncoder` layout (see
//! `rocketq/store/record.py` for the field table).  Every number is big-endian.
//!
//! ```text
//!  off size field                      off size field
//!    0   4 TOTALSIZE                    40   8 BORNTIMESTAMP
//!    4   4 MAGICCODE 0xDAA320A7         48 8|20 BORNHOST  ip(4|16) + port(i32)
//!    8   4 BODYCRC (crc32 & 0x7FFFFFFF)  .   8 STORETIMESTAMP
//!   12   4 QUEUEID                       . 8|20 STOREHOST
//!   16   4 FLAG                          .   4 RECONSUMETIMES
//!   20   8 QUEUEOFFSET                   .   8 PREPARED TRANSACTION OFFSET
//!   28   8 PHYSICALOFFSET                . 4+n BODY   .  1+t TOPIC   .  2+p PROPERTIES
//!   36   4 SYSFLAG (0x10 born host v6, 0x20 store host v6)
//! ```
//!
//! A segment's unused tail starts with a blank record: `i32 remaining | u32 0xCBD43194`.

pub const MAGIC_V1: u32 = 0xDAA3_20A7;
pub const MAGIC_V2: u32 = 0xDAA3_20AB;
pub const BLANK_MAGIC: u32 = 0xCBD4_3194;
pub const BORNHOST_V6: i32 = 0x10;
pub const STOREHOST_V6: i32 = 0x20;
pub const NOT_CONSUMABLE: i32 = 0x4; // PREPARED (0x4) and ROLLBACK (0xC) records never reach a queue
pub const ROLLBACK: i32 = 0xC;
pub const HEADER_V4: usize = 88; // TOTALSIZE through the BODY length field, both hosts IPv4
pub const MIN_RECORD: usize = HEADER_V4 + 3; // empty body, topic and properties
pub const MAX_TOPIC_BYTES: usize = 127; // the V1 topic length is one byte, Java reads it signed
pub const MAX_PROPERTIES_BYTES: usize = 32767; // a signed short
pub const CRC_MASK: u32 = 0x7FFF_FFFF;

pub const QUEUE_ID_POS: usize = 12;
pub const QUEUE_OFFSET_POS: usize = 20;
pub const PHYSICAL_OFFSET_POS: usize = 28;
pub const SYSFLAG_POS: usize = 36;

/// An IP address (4 or 16 bytes) and port, as records hold them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Host {
    pub ip: [u8; 16],
    pub ip_len: u8,
    pub port: i32,
}

impl Host {
    pub fn new(ip: &[u8], port: i32) -> Option<Host> {
        if ip.len() != 4 && ip.len() != 16 {
            return None;
        }
        let mut out = [0u8; 16];
        out[..ip.len()].copy_from_slice(ip);
        Some(Host {
            ip: out,
            ip_len: ip.len() as u8,
            port,
        })
    }
    #[inline]
    pub fn is_v6(&self) -> bool {
        self.ip_len == 16
    }
    #[inline]
    pub fn ip(&self) -> &[u8] {
        &self.ip[..self.ip_len as usize]
    }
}

#[inline]
pub fn header_len(born_v6: bool, store_v6: bool) -> usize {
    HEADER_V4 + if born_v6 { 12 } else { 0 } + if store_v6 { 12 } else { 0 }
}

/// RocketMQ's `calMsgLength`.
#[inline]
pub fn record_len(born_v6: bool, store_v6: bool, body: usize, topic: usize, props: usize) -> usize {
    header_len(born_v6, store_v6) + body + 1 + topic + 2 + props
}

#[inline]
pub fn body_crc(body: &[u8]) -> u32 {
    crc32fast::hash(body) & CRC_MASK
}

/// A big-endian writer over a slice that is exactly as long as what is written into it.
pub struct Writer<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl<'a> Writer<'a> {
    pub fn new(buf: &'a mut [u8]) -> Self {
        Writer { buf, pos: 0 }
    }
    #[inline]
    pub fn bytes(&mut self, b: &[u8]) {
        self.buf[self.pos..self.pos + b.len()].copy_from_slice(b);
        self.pos += b.len();
    }
    #[inline]
    pub fn i32(&mut self, v: i32) {
        self.bytes(&v.to_be_bytes());
    }
    #[inline]
    pub fn u32(&mut self, v: u32) {
        self.bytes(&v.to_be_bytes());
    }
    #[inline]
    pub fn i64(&mut self, v: i64) {
        self.bytes(&v.to_be_bytes());
    }
    #[inline]
    pub fn host(&mut self, h: &Host) {
        self.bytes(h.ip());
        self.i32(h.port);
    }
    pub fn position(&self) -> usize {
        self.pos
    }
}

/// Every field of one record to encode.
pub struct Fields<'a> {
    pub queue_id: i32,
    pub flag: i32,
    pub queue_offset: i64,
    pub physical_offset: i64,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born: Host,
    pub store_timestamp: i64,
    pub store: Host,
    pub reconsume_times: i32,
    pub prepared_offset: i64,
    pub crc: u32,
    pub body: &'a [u8],
    pub topic: &'a [u8],
    pub props: &'a [u8],
}

/// Encodes one record into `out`, which must be exactly its length; the host bits of SYSFLAG
/// are set from the hosts.
pub fn encode(out: &mut [u8], f: &Fields) {
    let mut sys_flag = f.sys_flag & !(BORNHOST_V6 | STOREHOST_V6);
    if f.born.is_v6() {
        sys_flag |= BORNHOST_V6;
    }
    if f.store.is_v6() {
        sys_flag |= STOREHOST_V6;
    }
    let total = out.len();
    let mut w = Writer::new(out);
    w.i32(total as i32);
    w.u32(MAGIC_V1);
    w.u32(f.crc);
    w.i32(f.queue_id);
    w.i32(f.flag);
    w.i64(f.queue_offset);
    w.i64(f.physical_offset);
    w.i32(sys_flag);
    w.i64(f.born_timestamp);
    w.host(&f.born);
    w.i64(f.store_timestamp);
    w.host(&f.store);
    w.i32(f.reconsume_times);
    w.i64(f.prepared_offset);
    w.i32(f.body.len() as i32);
    w.bytes(f.body);
    w.bytes(&[f.topic.len() as u8]);
    w.bytes(f.topic);
    w.bytes(&(f.props.len() as u16).to_be_bytes());
    w.bytes(f.props);
    debug_assert_eq!(w.position(), total);
}

#[inline]
pub fn be_i32(b: &[u8], pos: usize) -> i32 {
    i32::from_be_bytes(b[pos..pos + 4].try_into().unwrap())
}
#[inline]
pub fn be_u32(b: &[u8], pos: usize) -> u32 {
    u32::from_be_bytes(b[pos..pos + 4].try_into().unwrap())
}
#[inline]
pub fn be_i64(b: &[u8], pos: usize) -> i64 {
    i64::from_be_bytes(b[pos..pos + 8].try_into().unwrap())
}
#[inline]
pub fn be_u16(b: &[u8], pos: usize) -> u16 {
    u16::from_be_bytes(b[pos..pos + 2].try_into().unwrap())
}

/// The parsed parts of one record that lies whole in a buffer.
pub struct View<'a> {
    pub size: usize,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub physical_offset: i64,
    pub sys_flag: i32,
    pub store_timestamp: i64,
    pub body_crc: u32,
    pub body: &'a [u8],
    pub topic: &'a [u8],
    pub props: &'a [u8],
}

/// What is at a position: a record, the end-of-segment blank, or bytes that are no record.
pub enum Parsed<'a> {
    Record(View<'a>),
    Blank(usize),
    Bad(String),
}

/// Parses the record at `buf[pos..limit]` without trusting any length in it.
pub fn parse(buf: &[u8], pos: usize, limit: usize) -> Parsed<'_> {
    let left = limit.saturating_sub(pos);
    if left < 8 {
        return Parsed::Bad(format!("only {left} bytes left, a record header needs 8"));
    }
    let size = be_i32(buf, pos);
    let magic = be_u32(buf, pos + 4);
    if magic == BLANK_MAGIC {
        if size < 8 || size as usize > left {
            return Parsed::Bad(format!(
                "blank record of size {size} does not fit in the {left} bytes left"
            ));
        }
        return Parsed::Blank(size as usize);
    }
    if magic != MAGIC_V1 && magic != MAGIC_V2 {
        return Parsed::Bad(format!("bad magic code 0x{magic:08X} (size field {size})"));
    }
    if size < MIN_RECORD as i32 || size as usize > left {
        return Parsed::Bad(format!(
            "record size {size} is impossible here ({left} bytes left)"
        ));
    }
    let size = size as usize;
    let rec = &buf[pos..pos + size];
    let sys_flag = be_i32(rec, SYSFLAG_POS);
    let born_v6 = sys_flag & BORNHOST_V6 != 0;
    let store_v6 = sys_flag & STOREHOST_V6 != 0;
    let hlen = header_len(born_v6, store_v6);
    if size < hlen + 3 {
        return Parsed::Bad(format!("record size {size} is smaller than its header"));
    }
    let store_ts_pos = if born_v6 { 68 } else { 56 };
    let body_len = be_i32(rec, hlen - 4);
    if body_len < 0 || hlen + body_len as usize + 3 > size {
        return Parsed::Bad(format!("body length {body_len} runs past the record end"));
    }
    let mut p = hlen + body_len as usize;
    let body = &rec[hlen..p];
    let (topic_len, tl_bytes) = if magic == MAGIC_V1 {
        (rec[p] as usize, 1)
    } else {
        (be_u16(rec, p) as usize, 2)
    };
    p += tl_bytes;
    if p + topic_len + 2 > size {
        return Parsed::Bad(format!("topic length {topic_len} runs past the record end"));
    }
    let topic = &rec[p..p + topic_len];
    p += topic_len;
    let props_len = be_u16(rec, p) as usize;
    p += 2;
    if p + props_len != size {
        return Parsed::Bad(format!(
            "lengths add up to {}, TOTALSIZE says {size}",
            p + props_len
        ));
    }
    Parsed::Record(View {
        size,
        queue_id: be_i32(rec, QUEUE_ID_POS),
        queue_offset: be_i64(rec, QUEUE_OFFSET_POS),
        physical_offset: be_i64(rec, PHYSICAL_OFFSET_POS),
        sys_flag,
        store_timestamp: be_i64(rec, store_ts_pos),
        body_crc: be_u32(rec, 8),
        body,
        topic,
        props: &rec[p..p + props_len],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_then_parse() {
        let born = Host::new(&[127, 0, 0, 1], 5).unwrap();
        let store = Host::new(&[0u8; 16], 10911).unwrap();
        let body = b"hello";
        let f = Fields {
            queue_id: 3,
            flag: 7,
            queue_offset: 11,
            physical_offset: 4096,
            sys_flag: 0,
            born_timestamp: 1,
            born,
            store_timestamp: 2,
            store,
            reconsume_times: 0,
            prepared_offset: 0,
            crc: body_crc(body),
            body,
            topic: b"T",
            props: b"TAGS\x01A\x02",
        };
        let n = record_len(false, true, 5, 1, 7);
        let mut out = vec![0u8; n];
        encode(&mut out, &f);
        match parse(&out, 0, n) {
            Parsed::Record(v) => {
                assert_eq!(
                    (v.size, v.queue_id, v.queue_offset, v.physical_offset),
                    (n, 3, 11, 4096)
                );
                assert_eq!(v.sys_flag, STOREHOST_V6);
                assert_eq!(
                    (v.body, v.topic, v.props),
                    (&body[..], &b"T"[..], &b"TAGS\x01A\x02"[..])
                );
                assert_eq!(v.store_timestamp, 2);
            }
            _ => panic!("not a record"),
        }
        for cut in 0..n {
            assert!(!matches!(parse(&out[..cut], 0, cut), Parsed::Record(_)));
        }
    }
}
