//! A small JSON reader (RFC 8259), enough for the vectors' files and strict about them: a truncated or
//! edited file is an error naming the byte where reading stopped, never a value made up.
//! Numbers are f64: the vectors write float32 values as their exact decimal, so `x as f32` is exact.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(BTreeMap<String, Json>),
}

const NULL: Json = Json::Null;

impl Json {
    /// The value at `key` of an object (null when absent, or when this is not an object).
    pub fn get(&self, key: &str) -> &Json {
        match self {
            Json::Obj(m) => m.get(key).unwrap_or(&NULL),
            _ => &NULL,
        }
    }
    pub fn is_null(&self) -> bool {
        matches!(self, Json::Null)
    }
    pub fn as_array(&self) -> Option<&[Json]> {
        match self {
            Json::Arr(v) => Some(v),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Json::Num(x) => Some(*x),
            _ => None,
        }
    }
    /// A whole number that fits i64 exactly (2^53 at most, as f64 holds every such integer).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Json::Num(x) if x.fract() == 0.0 && x.abs() <= 9_007_199_254_740_992.0 => Some(*x as i64),
            _ => None,
        }
    }
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Json::Bool(b) => Some(*b),
            _ => None,
        }
    }
}

/// Parse a whole document: one value, then nothing but whitespace.
pub fn parse(bytes: &[u8]) -> Result<Json, String> {
    let mut p = Parser { s: bytes, i: 0 };
    let value = p.value(0)?;
    p.ws();
    if p.i != p.s.len() {
        return Err(format!("trailing bytes after the value at byte {}", p.i));
    }
    Ok(value)
}

const MAX_DEPTH: usize = 64;

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn next(&mut self) -> Result<u8, String> {
        let c = self
            .peek()
            .ok_or_else(|| format!("unexpected end of the file at byte {}", self.i))?;
        self.i += 1;
        Ok(c)
    }
    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }
    fn expect(&mut self, want: u8) -> Result<(), String> {
        let at = self.i;
        match self.next()? {
            c if c == want => Ok(()),
            c => Err(format!(
                "expected {:?} at byte {}, found {:?}",
                want as char, at, c as char
            )),
        }
    }
    fn value(&mut self, depth: usize) -> Result<Json, String> {
        if depth > MAX_DEPTH {
            return Err(format!("nested deeper than {} at byte {}", MAX_DEPTH, self.i));
        }
        self.ws();
        match self.peek() {
            None => Err(format!("unexpected end of the file at byte {}", self.i)),
            Some(b'n') => self.word("null", Json::Null),
            Some(b't') => self.word("true", Json::Bool(true)),
            Some(b'f') => self.word("false", Json::Bool(false)),
            Some(b'"') => Ok(Json::Str(self.string()?)),
            Some(b'[') => {
                self.i += 1;
                let mut out = Vec::new();
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Ok(Json::Arr(out));
                }
                loop {
                    out.push(self.value(depth + 1)?);
                    self.ws();
                    let at = self.i;
                    match self.next()? {
                        b',' => {}
                        b']' => return Ok(Json::Arr(out)),
                        c => return Err(format!("expected ',' or ']' at byte {}, found {:?}", at, c as char)),
                    }
                }
            }
            Some(b'{') => {
                self.i += 1;
                let mut out = BTreeMap::new();
                self.ws();
                if self.peek() == Some(b'}') {
                    self.i += 1;
                    return Ok(Json::Obj(out));
                }
                loop {
                    self.ws();
                    let at = self.i;
                    let key = self.string()?;
                    self.ws();
                    self.expect(b':')?;
                    if out.insert(key.clone(), self.value(depth + 1)?).is_some() {
                        return Err(format!("key {:?} given twice (at byte {})", key, at));
                    }
                    self.ws();
                    let at = self.i;
                    match self.next()? {
                        b',' => {}
                        b'}' => return Ok(Json::Obj(out)),
                        c => return Err(format!("expected ',' or '}}' at byte {}, found {:?}", at, c as char)),
                    }
                }
            }
            Some(_) => self.number(),
        }
    }
    fn word(&mut self, w: &str, v: Json) -> Result<Json, String> {
        if self.s[self.i..].starts_with(w.as_bytes()) {
            self.i += w.len();
            Ok(v)
        } else {
            Err(format!("not a JSON value at byte {}", self.i))
        }
    }
    fn number(&mut self) -> Result<Json, String> {
        let start = self.i;
        while matches!(self.peek(), Some(b'+' | b'-' | b'.' | b'e' | b'E' | b'0'..=b'9')) {
            self.i += 1;
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).map_err(|e| e.to_string())?;
        let first = text.bytes().next();
        if !matches!(first, Some(b'-' | b'0'..=b'9')) {
            return Err(format!("not a JSON value at byte {}", start));
        }
        match text.parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(Json::Num(x)),
            _ => Err(format!("not a finite number at byte {}: {:?}", start, text)),
        }
    }
    fn hex4(&mut self) -> Result<u32, String> {
        let at = self.i;
        let digits = self
            .s
            .get(self.i..self.i + 4)
            .ok_or_else(|| format!("truncated \\u escape at byte {}", at))?;
        self.i += 4;
        let text = std::str::from_utf8(digits).map_err(|_| format!("bad \\u escape at byte {}", at))?;
        u32::from_str_radix(text, 16).map_err(|_| format!("bad \\u escape at byte {}", at))
    }
    fn string(&mut self) -> Result<String, String> {
        self.expect(b'"')?;
        let mut out = Vec::new();
        loop {
            let at = self.i;
            match self.next()? {
                b'"' => return String::from_utf8(out).map_err(|e| format!("not UTF-8 text before byte {}: {}", at, e)),
                b'\\' => match self.next()? {
                    b'"' => out.push(b'"'),
                    b'\\' => out.push(b'\\'),
                    b'/' => out.push(b'/'),
                    b'b' => out.push(8),
                    b'f' => out.push(12),
                    b'n' => out.push(b'\n'),
                    b'r' => out.push(b'\r'),
                    b't' => out.push(b'\t'),
                    b'u' => {
                        let mut code = self.hex4()?;
                        if (0xD800..0xDC00).contains(&code) {
                            // a surrogate pair: the low half must follow
                            if self.next()? != b'\\' || self.next()? != b'u' {
                                return Err(format!("unpaired surrogate at byte {}", at));
                            }
                            let low = self.hex4()?;
                            if !(0xDC00..0xE000).contains(&low) {
                                return Err(format!("unpaired surrogate at byte {}", at));
                            }
                            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                        }
                        let c = char::from_u32(code).ok_or_else(|| format!("bad \\u escape at byte {}", at))?;
                        let mut buf = [0u8; 4];
                        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                    }
                    c => return Err(format!("bad escape \\{} at byte {}", c as char, at)),
                },
                c if c < 0x20 => return Err(format!("control character in a string at byte {}", at)),
                c => out.push(c),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_values_and_refuses_truncated_or_edited_text() {
        let v = parse(br#"{"a": [1, -2.5e0, "x\u00e9\ud83d\ude00"], "b": null, "c": true}"#).unwrap();
        assert_eq!(v.get("a").as_array().unwrap()[1].as_f64(), Some(-2.5));
        assert_eq!(v.get("a").as_array().unwrap()[2].as_str(), Some("x\u{e9}\u{1f600}"));
        assert!(v.get("b").is_null() && v.get("missing").is_null());
        for bad in [
            &b"{\"a\": [1, 2"[..],
            b"{\"a\": 1,}",
            b"[1] 2",
            b"{\"a\": 1, \"a\": 2}",
            b"[NaN]",
            b"\"\\x\"",
        ] {
            assert!(parse(bad).is_err(), "{:?}", std::str::from_utf8(bad));
        }
    }
}
