//! Tool output that is text but not JSON: the shapes toolplan reads leniently, and the names of
//! the ones it does not, for errors.
//!
//! Many tools (MCP servers written in Python above all) return a Python literal where JSON was
//! meant: `{'name': 'Bob', 'city': 'London', 'active': True}`. [`read_python_literal`] reads such a
//! text as the JSON it means (single- or double-quoted strings, `True`/`False`/`None`, tuples as
//! arrays), so that `$ref:u.city` finds `London`. Anything else stays text, and a path into it is
//! an error that says what the text looks like ([`describe`]: a table, `key: value` lines, XML …),
//! never a silent null.
//!
//! The reader is bounded: at most [`MAX_LITERAL_BYTES`] of text and [`MAX_LITERAL_DEPTH`] levels
//! of nesting; past them the text stays text.

use serde_json::{Map, Number, Value};

/// Longest text read as a Python literal (1 MiB); longer output stays text.
pub const MAX_LITERAL_BYTES: usize = 1024 * 1024;

/// Deepest nesting of a Python literal read (128 levels, as for JSON values).
pub const MAX_LITERAL_DEPTH: usize = 128;

/// The JSON value a Python literal dict or list means (`{'a': True, 'b': (1, None)}` →
/// `{"a": true, "b": [1, null]}`), or `None` when `text` is not one (or is too long or too deep).
pub fn read_python_literal(text: &str) -> Option<Value> {
    let text = text.trim();
    if text.len() > MAX_LITERAL_BYTES || !(text.starts_with('{') || text.starts_with('[')) {
        return None;
    }
    let mut reader = Reader {
        bytes: text.as_bytes(),
        at: 0,
    };
    let value = reader.value(0)?;
    reader.space();
    (reader.at == reader.bytes.len()).then_some(value)
}

/// What a text that is not JSON looks like, for an error about a path into it: `a table of 4 lines
/// with | columns`, `3 key: value lines`, `XML or HTML`, `5 comma-separated lines`, or `120
/// characters`.
pub fn describe(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let all = |f: &dyn Fn(&str) -> bool| lines.len() >= 2 && lines.iter().all(|l| f(l));
    if text.trim_start().starts_with('<') {
        "XML or HTML".to_owned()
    } else if all(&|l| l.contains('|')) {
        format!("a table of {} lines with | columns", lines.len())
    } else if all(&|l| l.split_once(':').is_some_and(|(k, _)| is_key(k))) {
        format!("{} key: value lines", lines.len())
    } else if all(&|l| l.contains(',')) {
        format!("{} comma-separated lines", lines.len())
    } else {
        format!("{} characters", text.chars().count())
    }
}

/// Whether `key` reads as the key of a `key: value` line: a short name without spaces at its ends.
fn is_key(key: &str) -> bool {
    let key = key.trim();
    !key.is_empty() && key.len() <= 40 && !key.contains('|')
}

/// A cursor over a Python literal.
struct Reader<'t> {
    bytes: &'t [u8],
    at: usize,
}

impl Reader<'_> {
    fn space(&mut self) {
        while self.bytes.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.space();
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Option<Value> {
        if depth > MAX_LITERAL_DEPTH {
            return None;
        }
        match self.peek()? {
            b'{' => self.dict(depth),
            b'[' => self.list(b']', depth),
            b'(' => self.list(b')', depth),
            b'\'' | b'"' => self.string().map(Value::String),
            _ => self.word(),
        }
    }

    fn dict(&mut self, depth: usize) -> Option<Value> {
        self.at += 1;
        let mut map = Map::new();
        loop {
            if self.eat(b'}') {
                return Some(Value::Object(map));
            }
            let key = match self.value(depth + 1)? {
                Value::String(s) => s,
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                _ => return None,
            };
            if !self.eat(b':') {
                return None;
            }
            let value = self.value(depth + 1)?;
            map.insert(key, value);
            if !self.eat(b',') && self.peek() != Some(b'}') {
                return None;
            }
        }
    }

    fn list(&mut self, close: u8, depth: usize) -> Option<Value> {
        self.at += 1;
        let mut items = Vec::new();
        loop {
            if self.eat(close) {
                return Some(Value::Array(items));
            }
            items.push(self.value(depth + 1)?);
            if !self.eat(b',') && self.peek() != Some(close) {
                return None;
            }
        }
    }

    /// A quoted string, with Python's common escapes.
    fn string(&mut self) -> Option<String> {
        let quote = self.bytes[self.at];
        self.at += 1;
        let mut out: Vec<u8> = Vec::new();
        loop {
            let b = *self.bytes.get(self.at)?;
            self.at += 1;
            match b {
                b'\\' => {
                    let e = *self.bytes.get(self.at)?;
                    self.at += 1;
                    out.push(match e {
                        b'n' => b'\n',
                        b't' => b'\t',
                        b'r' => b'\r',
                        other => other,
                    });
                }
                b if b == quote => return String::from_utf8(out).ok(),
                b => out.push(b),
            }
        }
    }

    /// `True`, `False`, `None`, or a number.
    fn word(&mut self) -> Option<Value> {
        let start = self.at;
        while self
            .bytes
            .get(self.at)
            .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+' | b'_'))
        {
            self.at += 1;
        }
        let word = std::str::from_utf8(&self.bytes[start..self.at]).ok()?;
        match word {
            "True" | "true" => Some(Value::Bool(true)),
            "False" | "false" => Some(Value::Bool(false)),
            "None" | "null" => Some(Value::Null),
            _ => {
                let word = word.replace('_', "");
                if let Ok(i) = word.parse::<i64>() {
                    Some(Value::Number(i.into()))
                } else {
                    word.parse::<f64>()
                        .ok()
                        .and_then(Number::from_f64)
                        .map(Value::Number)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn python_literals_read_as_the_json_they_mean() {
        assert_eq!(
            read_python_literal(
                "{'name': 'Bob', 'city': \"London\", 'active': True, 'boss': None}"
            ),
            Some(json!({"name": "Bob", "city": "London", "active": true, "boss": null}))
        );
        assert_eq!(
            read_python_literal(" [1, 2.5, -3, ('a', False),] "),
            Some(json!([1, 2.5, -3, ["a", false]]))
        );
        assert_eq!(
            read_python_literal(r"{'it\'s': 'a\nb', 1: 2}"),
            Some(json!({"it's": "a\nb", "1": 2}))
        );
        for text in [
            "Bob lives in London",
            "{'a': }",
            "{'a' 1}",
            "{'a': 1} and more",
            "{'a': nan}",
        ] {
            assert_eq!(read_python_literal(text), None, "{text}");
        }
    }

    #[test]
    fn a_literal_too_deep_or_too_long_stays_text() {
        let deep = "[".repeat(MAX_LITERAL_DEPTH + 2) + &"]".repeat(MAX_LITERAL_DEPTH + 2);
        assert_eq!(read_python_literal(&deep), None);
        let ok = "[".repeat(50) + &"]".repeat(50);
        assert!(read_python_literal(&ok).is_some());
        let long = format!("['{}']", "x".repeat(MAX_LITERAL_BYTES));
        assert_eq!(read_python_literal(&long), None);
    }

    #[test]
    fn shapes_are_named() {
        assert_eq!(
            describe("| name | city |\n|---|---|\n| Bob | London |"),
            "a table of 3 lines with | columns"
        );
        assert_eq!(describe("name: Bob\ncity: London"), "2 key: value lines");
        assert_eq!(describe("<user><city>London</city></user>"), "XML or HTML");
        assert_eq!(describe("Bob,London\nAda,Paris"), "2 comma-separated lines");
        assert_eq!(describe("Bob lives in London."), "20 characters");
    }

    proptest::proptest! {
        #[test]
        fn any_text_reads_or_stays_text_without_panicking(text in "[{\\[(][ -~\\n]{0,80}") {
            let _ = read_python_literal(&text);
            let _ = describe(&text);
        }
    }
}
