//! The common JSON remoting header without building a JSON tree: a one-pass scanner for what
//! clients send (RocketMQ's `RemotingCommand` through fastjson, rocketq's own codec): a flat object
//! whose values are strings, integers or null, plus `extFields`, an object of strings (or nulls).
//!
//! [`decode`] returns `None` for anything outside that subset - floats, booleans, nested values,
//! a surrogate escape, malformed text - and the caller then parses with `serde_json` into a `Value`
//! (`frame::decode_json`), which stays the only place that accepts the rest or names an error.  So
//! for every input this either gives exactly what the `Value` path gives (the same fields, the
//! same extFields in the same order: sorted by key, the last of duplicate keys kept, nulls dropped)
//! or defers to it; tests/native/test_codec.py holds both to the Python reference.
//!
//! Why: a send's header is ~300 bytes; building `Value`s (a `BTreeMap` of boxed strings per
//! object) and copying every string out of them again cost more than the rest of the frame's decode.

use crate::frame::{Header, LANGUAGES};

/// Integers longer than this take the `Value` path (it knows i64 overflow and int32 range).
const MAX_INT_DIGITS: usize = 18;
const OTHER: u8 = 7;

struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

enum Scalar<'a> {
    Str(std::borrow::Cow<'a, str>),
    Int(i64),
    Null,
}

impl<'a> Scan<'a> {
    fn ws(&mut self) {
        while let Some(&c) = self.b.get(self.i) {
            if !matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
                break;
            }
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.b.get(self.i) == Some(&c)).then(|| self.i += 1)
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.b.get(self.i..self.i + 4)?;
        let mut v = 0u32;
        for &d in digits {
            v = v * 16 + (d as char).to_digit(16)?;
        }
        self.i += 4;
        Some(v)
    }

    /// A string (the opening quote next); escapes decoded; None for a surrogate escape, a raw
    /// control character, bad UTF-8 or a bad escape (the `Value` path decides those).
    fn string(&mut self) -> Option<std::borrow::Cow<'a, str>> {
        self.eat(b'"')?;
        let start = self.i;
        let b = self.b;
        while let Some(&c) = b.get(self.i) {
            match c {
                b'"' => {
                    let s = std::str::from_utf8(&b[start..self.i]).ok()?;
                    self.i += 1;
                    return Some(std::borrow::Cow::Borrowed(s));
                }
                b'\\' => break,
                0..=0x1F => return None,
                _ => self.i += 1,
            }
        }
        let mut out: Vec<u8> = b.get(start..self.i)?.to_vec();
        loop {
            let c = *b.get(self.i)?;
            self.i += 1;
            match c {
                b'"' => return String::from_utf8(out).ok().map(std::borrow::Cow::Owned),
                b'\\' => {
                    let e = *b.get(self.i)?;
                    self.i += 1;
                    let ch = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let v = self.hex4()?;
                            if (0xD800..0xE000).contains(&v) {
                                return None; // pairs and lone surrogates: serde_json's rules
                            }
                            char::from_u32(v)?
                        }
                        _ => return None,
                    };
                    let mut utf8 = [0u8; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut utf8).as_bytes());
                }
                0..=0x1F => return None,
                _ => out.push(c),
            }
        }
    }

    /// `-?(0|[1-9][0-9]*)` with no fraction or exponent, at most MAX_INT_DIGITS digits.
    fn int(&mut self) -> Option<i64> {
        let neg = self.b.get(self.i) == Some(&b'-');
        let start = self.i + neg as usize;
        let mut end = start;
        while self.b.get(end).is_some_and(u8::is_ascii_digit) {
            end += 1;
        }
        let digits = &self.b[start..end];
        if digits.is_empty()
            || digits.len() > MAX_INT_DIGITS
            || (digits[0] == b'0' && digits.len() > 1)
            || (neg && digits == b"0")
            || matches!(self.b.get(end), Some(b'.' | b'e' | b'E'))
        {
            return None;
        }
        self.i = end;
        let n = digits
            .iter()
            .fold(0i64, |acc, &d| acc * 10 + (d - b'0') as i64);
        Some(if neg { -n } else { n })
    }

    fn scalar(&mut self) -> Option<Scalar<'a>> {
        match self.peek()? {
            b'"' => self.string().map(Scalar::Str),
            b'n' if self.b[self.i..].starts_with(b"null") => {
                self.i += 4;
                Some(Scalar::Null)
            }
            b'-' | b'0'..=b'9' => self.int().map(Scalar::Int),
            _ => None,
        }
    }

    /// `{ "k": v, ... }` calling `each(key, scan)` with the scanner at each value.
    fn object(&mut self, mut each: impl FnMut(&str, &mut Self) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            let key = self.string()?;
            self.eat(b':')?;
            each(&key, self)?;
            if self.eat(b'}').is_some() {
                return Some(());
            }
            self.eat(b',')?;
        }
    }
}

fn int32(v: &Scalar<'_>) -> Option<i32> {
    match v {
        Scalar::Null => Some(0),
        Scalar::Int(n) => i32::try_from(*n).ok(),
        Scalar::Str(_) => None, // "7", " 7 ", "7.0": the Value path's lenient parse
    }
}

/// The header, when `header` is in the subset this scanner reads; else None (see the module doc).
pub fn decode(header: &[u8]) -> Option<Header> {
    let mut s = Scan { b: header, i: 0 };
    let (mut code, mut language, mut version, mut opaque, mut flag) = (None, 0u8, 0, 0, 0);
    let mut remark: Option<String> = None;
    let mut ext: Vec<(String, Option<String>)> = Vec::new();
    s.object(|key, s| {
        if key == "extFields" {
            ext.clear(); // a repeated extFields: the last one counts
            if s.peek()? == b'n' {
                return matches!(s.scalar()?, Scalar::Null).then_some(());
            }
            return s.object(|k, s| {
                let value = match s.scalar()? {
                    Scalar::Str(v) => Some(v.into_owned()),
                    Scalar::Null => None,
                    Scalar::Int(_) => return None, // its JSON text: the Value path spells it
                };
                ext.push((k.to_owned(), value));
                Some(())
            });
        }
        let v = s.scalar()?;
        match key {
            "code" => {
                code = if matches!(v, Scalar::Null) {
                    None
                } else {
                    Some(int32(&v)?)
                }
            }
            "version" => version = int32(&v)?,
            "opaque" => opaque = int32(&v)?,
            "flag" => flag = int32(&v)?,
            "language" => {
                language = match &v {
                    Scalar::Null => 0,
                    Scalar::Str(name) => LANGUAGES
                        .iter()
                        .position(|l| *l == name.as_ref())
                        .map_or(OTHER, |i| i as u8),
                    Scalar::Int(n) => {
                        if (0..LANGUAGES.len() as i64).contains(n) {
                            *n as u8
                        } else {
                            return None; // negative or large: as_u64 and friends, the Value path's rules
                        }
                    }
                }
            }
            "remark" => {
                remark = match v {
                    Scalar::Null => None,
                    Scalar::Str(r) => Some(r.into_owned()),
                    Scalar::Int(_) => return None,
                }
            }
            _ => {}
        }
        Some(())
    })?;
    s.ws();
    if s.i != header.len() {
        return None; // trailing bytes: the Value path's error
    }
    // the Value path's map: sorted by key, the last of duplicates kept, nulls dropped
    ext.reverse();
    ext.sort_by(|a, b| a.0.cmp(&b.0)); // stable: the last duplicate comes first
    ext.dedup_by(|later, first| later.0 == first.0);
    Some(Header {
        code: code?,
        language,
        version,
        opaque,
        flag,
        remark,
        ext: ext.into_iter().filter_map(|(k, v)| Some((k, v?))).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::decode_json;

    fn same(text: &str) -> bool {
        let Some(fast) = decode(text.as_bytes()) else {
            return false;
        };
        let slow =
            decode_json(text.as_bytes()).expect("the fast path took a header serde_json refuses");
        assert_eq!(
            (
                fast.code,
                fast.language,
                fast.version,
                fast.opaque,
                fast.flag
            ),
            (
                slow.code,
                slow.language,
                slow.version,
                slow.opaque,
                slow.flag
            ),
            "{text}"
        );
        assert_eq!(fast.remark, slow.remark, "{text}");
        assert_eq!(fast.ext, slow.ext, "{text}");
        true
    }

    #[test]
    fn the_usual_headers_take_the_scanner_and_agree_with_serde() {
        for text in [
            r#"{"code":310,"language":"JAVA","version":479,"opaque":7,"flag":0,"extFields":{"a":"P","b":"T","i":"KEYS\u0001k\u0002"},"serializeTypeCurrentRPC":"JSON"}"#,
            r#" { "code" : -1 , "remark" : "a\"b\\c\/d\b\f\n\r\t\u00e9\u4e2d" , "extFields" : { } } "#,
            r#"{"code":1,"language":9,"extFields":{"z":"1","a":null,"m":"x","z":"2","a":"3"}}"#,
            r#"{"code":1,"extFields":{"k":"v"},"extFields":null,"remark":null,"flag":-2147483648}"#,
            r#"{"code":1,"language":"KLINGON","x":"y","n":null,"i":123,"extFields":{"é":"ü","":""}}"#,
            r#"{"code":2147483647,"code":3,"opaque":0}"#,
        ] {
            assert!(same(text), "the scanner deferred on {text}");
        }
    }

    #[test]
    fn anything_else_defers_to_serde() {
        for text in [
            r#"{"code":null}"#,
            r#"{"opaque":1}"#,
            r#"{"code":"1"}"#,
            r#"{"code":1.0}"#,
            r#"{"code":01}"#,
            r#"{"code":-0}"#,
            r#"{"code":2147483648}"#,
            r#"{"code":1,"language":-1}"#,
            r#"{"code":1,"flag":true}"#,
            r#"{"code":1,"x":[1]}"#,
            r#"{"code":1,"extFields":{"k":1}}"#,
            r#"{"code":1,"extFields":"k"}"#,
            r#"{"code":1,"remark":"\ud83d\ude00"}"#,
            r#"{"code":1,"remark":"\x"}"#,
            "{\"code\":1,\"remark\":\"a\tb\"}",
            r#"{"code":1}x"#,
            r#"{"code":1,}"#,
            r#"{"code":1"#,
            r#"[1]"#,
            "",
        ] {
            assert!(decode(text.as_bytes()).is_none(), "the scanner took {text}");
        }
        assert!(decode(b"{\"code\":1,\"remark\":\"\xff\"}").is_none());
    }

    #[test]
    fn random_headers_agree_with_serde_whenever_the_scanner_takes_them() {
        // a fixed-seed generator of flat headers (and, now and then, a piece that breaks the
        // subset): every header the scanner accepts must be one serde accepts, with the same fields
        const KEYS: [&str; 9] = [
            "\"code\"",
            "\"extFields\"",
            "\"remark\"",
            "\"language\"",
            "\"opaque\"",
            "\"k\"",
            "\"\\u0001\"",
            "\"a\\\"b\"",
            "\"é\"",
        ];
        const VALUES: [&str; 14] = [
            "1",
            "-5",
            "0",
            "null",
            "\"JAVA\"",
            "\"\"",
            "\"x\\ny\"",
            "2147483648",
            "true",
            "1.5",
            "\"\\ud800\"",
            "\"é\"",
            "13",
            "\"\\u0002\"",
        ];
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let (mut taken, mut deferred) = (0, 0);
        for _ in 0..100_000 {
            let mut text = String::from("{\"code\":1");
            for _ in 0..next(6) {
                let key = KEYS[next(KEYS.len())];
                text.push_str([",", " , ", ",\n"][next(3)]);
                text.push_str(key);
                text.push(':');
                if key == "\"extFields\"" && next(4) > 0 {
                    text.push('{');
                    for i in 0..next(4) {
                        if i > 0 {
                            text.push(',');
                        }
                        text.push_str(KEYS[5 + next(4)]);
                        text.push(':');
                        text.push_str(VALUES[[3, 4, 5, 6, 11, 13, 13, 0][next(8)]]);
                    }
                    text.push('}');
                } else {
                    text.push_str(VALUES[next(VALUES.len())]);
                }
            }
            text.push('}');
            if same(&text) {
                taken += 1;
            } else {
                deferred += 1;
            }
        }
        assert!(
            taken > 1000 && deferred > 1000,
            "{taken} taken, {deferred} deferred"
        );
    }
}
