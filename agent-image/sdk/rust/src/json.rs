//! A JSON value with the key order kept, parsed and written the way JavaScript's `JSON.parse` and
//! `JSON.stringify` do (compact; `"`, `\` and control characters escaped, everything else as is).

use std::fmt::{self, Write as _};

/// Deepest nesting `Json::parse` accepts.
pub const MAX_DEPTH: usize = 512;

/// A JSON value. Objects keep their keys in order (a repeated key: the last one wins on `get`).
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    /// Parses JSON text; whitespace around the value is allowed, anything else after it is not.
    pub fn parse(text: &str) -> Result<Json, String> {
        let mut p = Parser { s: text.as_bytes(), i: 0 };
        let value = p.value(0)?;
        p.ws();
        if p.i != p.s.len() {
            return Err(format!("unexpected text after the JSON value at byte {}", p.i));
        }
        Ok(value)
    }

    /// The value of `key` in an object (None for a missing key or a value that is not an object).
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(fields) => fields.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Json::Number(n) => Some(*n),
            _ => None,
        }
    }

    /// An integral number that fits an i64.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Json::Number(n) if n.fract() == 0.0 && n.abs() < 9.2e18 => Some(*n as i64),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Json::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Json::Null)
    }

    /// Compact JSON text; Err when a number is NaN or infinite (JSON cannot say it).
    pub fn to_json(&self) -> Result<String, String> {
        let mut out = String::new();
        write_value(&mut out, self)?;
        Ok(out)
    }
}

impl fmt::Display for Json {
    /// Compact JSON text (a NaN or infinite number is written as null, as JSON.stringify does).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        write_lossy(&mut out, self);
        f.write_str(&out)
    }
}

impl From<&str> for Json {
    fn from(s: &str) -> Json {
        Json::String(s.to_string())
    }
}
impl From<String> for Json {
    fn from(s: String) -> Json {
        Json::String(s)
    }
}
impl From<f64> for Json {
    fn from(n: f64) -> Json {
        Json::Number(n)
    }
}
impl From<i64> for Json {
    fn from(n: i64) -> Json {
        Json::Number(n as f64)
    }
}
impl From<i32> for Json {
    fn from(n: i32) -> Json {
        Json::Number(n as f64)
    }
}
impl From<bool> for Json {
    fn from(b: bool) -> Json {
        Json::Bool(b)
    }
}
impl<T: Into<Json>> From<Vec<T>> for Json {
    fn from(items: Vec<T>) -> Json {
        Json::Array(items.into_iter().map(Into::into).collect())
    }
}
impl<T: Into<Json>> From<Option<T>> for Json {
    fn from(value: Option<T>) -> Json {
        value.map_or(Json::Null, Into::into)
    }
}

/// An object from key-value pairs, in order: `obj(vec![("a", 1.into())])`.
pub fn obj<K: Into<String>>(fields: Vec<(K, Json)>) -> Json {
    Json::Object(fields.into_iter().map(|(k, v)| (k.into(), v)).collect())
}

fn write_value(out: &mut String, v: &Json) -> Result<(), String> {
    check_finite(v)?;
    write_lossy(out, v);
    Ok(())
}

fn check_finite(v: &Json) -> Result<(), String> {
    match v {
        Json::Number(n) if !n.is_finite() => Err(format!("{} cannot be written as JSON", n)),
        Json::Array(items) => items.iter().try_for_each(check_finite),
        Json::Object(fields) => fields.iter().try_for_each(|(_, item)| check_finite(item)),
        _ => Ok(()),
    }
}

fn write_lossy(out: &mut String, v: &Json) {
    match v {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Number(n) => write_number(out, *n),
        Json::String(s) => write_string(out, s),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_lossy(out, item);
            }
            out.push(']');
        }
        Json::Object(fields) => {
            out.push('{');
            for (i, (k, item)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, k);
                out.push(':');
                write_lossy(out, item);
            }
            out.push('}');
        }
    }
}

/// A number as JavaScript writes it: integers without a fraction, exponents past 1e21 and below 1e-6.
fn write_number(out: &mut String, n: f64) {
    if !n.is_finite() {
        out.push_str("null");
    } else if n == 0.0 {
        out.push('0');
    } else if n.abs() >= 1e21 || n.abs() < 1e-6 {
        let text = format!("{:e}", n);
        match text.find('e') {
            Some(at) if !text[at + 1..].starts_with('-') => {
                let _ = write!(out, "{}e+{}", &text[..at], &text[at + 1..]);
            }
            _ => out.push_str(&text),
        }
    } else if n.fract() == 0.0 {
        let _ = write!(out, "{:.0}", n);
    } else {
        let _ = write!(out, "{}", n);
    }
}

/// A JSON string as JSON.stringify writes it.
pub(crate) fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Parser<'a> {
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn fail<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("{} at byte {}", what, self.i))
    }

    fn eat(&mut self, word: &str) -> bool {
        if self.s[self.i..].starts_with(word.as_bytes()) {
            self.i += word.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, String> {
        if depth > MAX_DEPTH {
            return self.fail("JSON nested too deep");
        }
        self.ws();
        match self.s.get(self.i) {
            None => self.fail("unexpected end of JSON"),
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().map(Json::String),
            Some(b't') if self.eat("true") => Ok(Json::Bool(true)),
            Some(b'f') if self.eat("false") => Ok(Json::Bool(false)),
            Some(b'n') if self.eat("null") => Ok(Json::Null),
            Some(b'-') | Some(b'0'..=b'9') => self.number(),
            Some(_) => self.fail("unexpected character in JSON"),
        }
    }

    fn array(&mut self, depth: usize) -> Result<Json, String> {
        self.i += 1;
        let mut items = Vec::new();
        self.ws();
        if self.eat("]") {
            return Ok(Json::Array(items));
        }
        loop {
            items.push(self.value(depth + 1)?);
            self.ws();
            if self.eat("]") {
                return Ok(Json::Array(items));
            }
            if !self.eat(",") {
                return self.fail("expected , or ] in a JSON array");
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Json, String> {
        self.i += 1;
        let mut fields = Vec::new();
        self.ws();
        if self.eat("}") {
            return Ok(Json::Object(fields));
        }
        loop {
            self.ws();
            if self.s.get(self.i) != Some(&b'"') {
                return self.fail("expected a key in a JSON object");
            }
            let key = self.string()?;
            self.ws();
            if !self.eat(":") {
                return self.fail("expected : in a JSON object");
            }
            fields.push((key, self.value(depth + 1)?));
            self.ws();
            if self.eat("}") {
                return Ok(Json::Object(fields));
            }
            if !self.eat(",") {
                return self.fail("expected , or } in a JSON object");
            }
        }
    }

    fn number(&mut self) -> Result<Json, String> {
        let start = self.i;
        while self.i < self.s.len() && matches!(self.s[self.i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') {
            self.i += 1;
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
        let valid = {
            let t = text.strip_prefix('-').unwrap_or(text);
            !t.is_empty() && t.as_bytes()[0].is_ascii_digit() && !(t.len() > 1 && t.starts_with('0') && t.as_bytes()[1].is_ascii_digit())
        };
        match text.parse::<f64>() {
            Ok(n) if valid && n.is_finite() => Ok(Json::Number(n)),
            _ => {
                self.i = start;
                self.fail("invalid JSON number")
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self.s.get(self.i..self.i + 4).and_then(|h| std::str::from_utf8(h).ok());
        match digits.and_then(|h| u32::from_str_radix(h, 16).ok()) {
            Some(n) => {
                self.i += 4;
                Ok(n)
            }
            None => self.fail("invalid \\u escape in a JSON string"),
        }
    }

    fn escape(&mut self, out: &mut String) -> Result<(), String> {
        let c = self.s.get(self.i).copied();
        self.i += 1;
        let plain = match c {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                let first = self.hex4()?;
                let code = if (0xD800..0xDC00).contains(&first) && self.s[self.i..].starts_with(b"\\u") {
                    let save = self.i;
                    self.i += 2;
                    let second = self.hex4()?;
                    if (0xDC00..0xE000).contains(&second) {
                        0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
                    } else {
                        self.i = save;
                        first
                    }
                } else {
                    first
                };
                char::from_u32(code).unwrap_or('\u{FFFD}') // a lone surrogate
            }
            _ => return self.fail("invalid escape in a JSON string"),
        };
        out.push(plain);
        Ok(())
    }

    fn string(&mut self) -> Result<String, String> {
        self.i += 1;
        let mut out = String::new();
        loop {
            let start = self.i;
            while self.i < self.s.len() && self.s[self.i] != b'"' && self.s[self.i] != b'\\' && self.s[self.i] >= 0x20 {
                self.i += 1;
            }
            match std::str::from_utf8(&self.s[start..self.i]) {
                Ok(run) => out.push_str(run),
                Err(_) => return self.fail("invalid UTF-8 in a JSON string"),
            }
            match self.s.get(self.i) {
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.i += 1;
                    self.escape(&mut out)?;
                }
                Some(_) => return self.fail("control character in a JSON string"),
                None => return self.fail("unterminated JSON string"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_as_json_stringify_writes() {
        let text = r#"{"b":[1,1.5,-0.25,1e+21,1e-7,true,null],"a":"é \"q\" \\ 😀 \u0001\u2028"}"#;
        let v = Json::parse(text).unwrap();
        assert_eq!(v.to_json().unwrap(), "{\"b\":[1,1.5,-0.25,1e+21,1e-7,true,null],\"a\":\"é \\\"q\\\" \\\\ 😀 \\u0001\u{2028}\"}");
    }

    #[test]
    fn refuses_hostile_input() {
        assert!(Json::parse(&"[".repeat(100_000)).is_err());
        assert!(Json::parse("{\"a\":1} x").is_err());
        assert!(Json::parse("01").is_err());
        assert!(Json::parse("\"\u{1}\"").is_err());
        assert!(Json::parse("1e999").is_err());
        assert_eq!(Json::parse("\"\\ud800\"").unwrap(), Json::String("\u{FFFD}".into()));
        assert!(Json::Number(f64::NAN).to_json().is_err());
    }
}
