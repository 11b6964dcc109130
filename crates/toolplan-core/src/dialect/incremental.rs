//! Reading a plan while it is being written: the items of one list of a JSON document (a tool plan's
//! `steps`, a query plan's `nodes`), each handed over as soon as its text is complete.
//!
//! A model writes a plan a few tokens at a time. [`ItemScanner`] takes the text in chunks of any
//! size, cut anywhere (inside a string, an escape, a number), and returns every item of the list
//! whose closing brace has arrived, parsed. It does not validate: the whole text, once complete, is
//! compiled as any plan is, so a plan streamed is judged by the same rules and messages as one
//! read whole. What the scanner reads is bounded: the text by `max_bytes`, the nesting by
//! `max_depth`, an object key by [`MAX_KEY_BYTES`]; past a bound it stops and says why.
//!
//! Text before the document's first `{` is skipped (a local model's `<tool_call>` tag), and so is
//! text after it ends. Items that are not objects are not returned (the whole plan's compile
//! reports them). A document that is not well-formed JSON, or names the list twice, stops the
//! scanner ([`ItemScanner::broken`]); what it returned before stays valid JSON, but the caller
//! should wait for the whole text.

use serde_json::Value;

/// Longest object key the scanner compares with the list's path; a longer key matches nothing.
pub const MAX_KEY_BYTES: usize = 256;

/// Why an [`ItemScanner`] stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScanError {
    /// More text arrived than the plan may have.
    #[error("the plan is larger than {limit} bytes")]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The document nests deeper than allowed.
    #[error("the plan nests deeper than {limit} levels")]
    TooDeep {
        /// The limit in levels.
        limit: usize,
    },
    /// The text is not well-formed JSON, or names the list twice.
    #[error("the plan is not well-formed JSON at byte {at}")]
    Malformed {
        /// Where the scanner stopped, in bytes from the start of the text.
        at: usize,
    },
}

/// One open container of the document.
#[derive(Debug)]
enum Frame {
    /// An object: the key its current value belongs to (`None` before the key or when the key is
    /// too long to match), and whether the next string is a key.
    Object { key: Option<String>, at_key: bool },
    /// An array.
    Array,
}

/// Where the lexer is inside a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InString {
    No,
    Yes,
    /// Just after a backslash.
    Escape,
}

/// Hands over the items of one list of a JSON document as the document's text arrives in chunks.
///
/// ```
/// use toolplan_core::dialect::incremental::ItemScanner;
///
/// let mut scanner = ItemScanner::new(&["steps"], 1 << 20, 64);
/// let mut items = scanner.push(r#"{"steps": [{"id": "a", "tool": "echo"}, {"id": "#).unwrap();
/// assert_eq!(items.len(), 1);
/// items = scanner.push(r#""b", "tool": "echo"}]}"#).unwrap();
/// assert_eq!(items[0]["id"], "b");
/// assert!(scanner.finished());
/// ```
#[derive(Debug)]
pub struct ItemScanner {
    /// The keys from the document's top-level object to the list.
    path: Vec<String>,
    max_bytes: usize,
    max_depth: usize,
    /// Bytes pushed so far.
    read: usize,
    stack: Vec<Frame>,
    string: InString,
    /// Whether the string being read is an object key (then it is collected in `key`).
    reading_key: bool,
    key: String,
    key_too_long: bool,
    /// The text of the item being read and the depth of the stack where it started.
    item: Option<(usize, String)>,
    /// Whether the document's first `{` has been seen.
    started: bool,
    /// Where the document starts and ends in the text, in bytes (the end just after its last `}`).
    start: usize,
    end: Option<usize>,
    /// Whether the top-level object has closed.
    ended: bool,
    /// Whether the list has been seen whole (a second list at the same path is malformed).
    list_done: bool,
    /// Why the scanner stopped, once it has.
    error: Option<ScanError>,
}

impl ItemScanner {
    /// A scanner for the list at `path` (object keys from the top level: `["steps"]` for a tool
    /// plan, `["arguments", "steps"]` for a plan inside a tool call written as
    /// `{"name": …, "arguments": {…}}`), reading at most `max_bytes` of text and `max_depth` levels
    /// of nesting.
    pub fn new(path: &[&str], max_bytes: usize, max_depth: usize) -> Self {
        Self {
            path: path.iter().map(|k| (*k).to_owned()).collect(),
            max_bytes,
            max_depth,
            read: 0,
            stack: Vec::new(),
            string: InString::No,
            reading_key: false,
            key: String::new(),
            key_too_long: false,
            item: None,
            started: false,
            start: 0,
            end: None,
            ended: false,
            list_done: false,
            error: None,
        }
    }

    /// Whether the document's top-level object has closed: nothing after it is read.
    pub fn finished(&self) -> bool {
        self.ended
    }

    /// Where the JSON document is in the text pushed so far, in bytes: from its first `{`, and up to
    /// just after its closing `}` once that has come. `None` before the document starts.
    pub fn document(&self) -> Option<(usize, Option<usize>)> {
        self.started.then_some((self.start, self.end))
    }

    /// Why the scanner stopped, if it has: the items it returned before are complete, and no more
    /// will come.
    pub fn broken(&self) -> Option<&ScanError> {
        self.error.as_ref()
    }

    /// Reads the next chunk of the text and returns the items of the list completed in it, in the
    /// order written. After an error every call returns that error.
    pub fn push(&mut self, chunk: &str) -> Result<Vec<Value>, ScanError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        if self.ended {
            return Ok(Vec::new());
        }
        let mut done = Vec::new();
        // Where, in this chunk, the item being read started (0 when it started before the chunk).
        let mut item_from = 0;
        for (at, byte) in chunk.bytes().enumerate() {
            if self.read + at >= self.max_bytes {
                return Err(self.stop(ScanError::TooLarge {
                    limit: self.max_bytes,
                }));
            }
            if !self.started {
                if byte == b'{' {
                    self.started = true;
                    self.start = self.read + at;
                    self.stack.push(Frame::Object {
                        key: None,
                        at_key: true,
                    });
                }
                continue;
            }
            match self.string {
                InString::Escape => {
                    self.string = InString::Yes;
                    self.key_byte(byte);
                    continue;
                }
                InString::Yes => {
                    match byte {
                        b'\\' => self.string = InString::Escape,
                        b'"' => {
                            self.string = InString::No;
                            if self.reading_key {
                                self.end_key();
                            }
                        }
                        _ => {}
                    }
                    if self.string != InString::No {
                        self.key_byte(byte);
                    }
                    continue;
                }
                InString::No => {}
            }
            match byte {
                b' ' | b'\t' | b'\n' | b'\r' | b':' => {}
                b'"' => {
                    self.string = InString::Yes;
                    if let Some(Frame::Object { at_key: true, .. }) = self.stack.last() {
                        self.reading_key = true;
                        self.key.clear();
                        self.key_too_long = false;
                    }
                }
                b'{' | b'[' => {
                    if self.item.is_none() && byte == b'{' && self.at_list() {
                        self.item = Some((self.stack.len(), String::new()));
                        item_from = at;
                    }
                    if self.stack.len() >= self.max_depth {
                        return Err(self.stop(ScanError::TooDeep {
                            limit: self.max_depth,
                        }));
                    }
                    self.stack.push(if byte == b'{' {
                        Frame::Object {
                            key: None,
                            at_key: true,
                        }
                    } else {
                        Frame::Array
                    });
                }
                b'}' | b']' => {
                    let closes_list = byte == b']' && self.at_list();
                    let fits = matches!(
                        (self.stack.pop(), byte),
                        (Some(Frame::Object { .. }), b'}') | (Some(Frame::Array), b']')
                    );
                    if !fits {
                        return Err(self.stop(ScanError::Malformed { at: self.read + at }));
                    }
                    if closes_list {
                        if self.list_done {
                            return Err(self.stop(ScanError::Malformed { at: self.read + at }));
                        }
                        self.list_done = true;
                    }
                    if let Some((depth, text)) = &mut self.item
                        && *depth == self.stack.len()
                    {
                        text.push_str(&chunk[item_from..=at]);
                        // Balanced text that still fails to parse (a bad literal) is left to the
                        // whole plan's compile.
                        if let Ok(value) = serde_json::from_str(text) {
                            done.push(value);
                        }
                        self.item = None;
                    }
                    if self.stack.is_empty() {
                        self.ended = true;
                        self.end = Some(self.read + at + 1);
                        self.read += at + 1;
                        return Ok(done);
                    }
                }
                b',' => {
                    if let Some(Frame::Object { key, at_key }) = self.stack.last_mut() {
                        *key = None;
                        *at_key = true;
                    }
                }
                _ => {}
            }
        }
        if let Some((_, text)) = &mut self.item {
            text.push_str(&chunk[item_from..]);
        }
        self.read += chunk.len();
        Ok(done)
    }

    /// Whether a value starting now is an item of the list: the innermost container is an array,
    /// and the objects around it lead to it by the path's keys.
    fn at_list(&self) -> bool {
        let Some((Frame::Array, objects)) = self.stack.split_last() else {
            return false;
        };
        objects.len() == self.path.len()
            && objects.iter().zip(&self.path).all(
                |(frame, want)| matches!(frame, Frame::Object { key: Some(k), .. } if k == want),
            )
    }

    /// A byte of the key being read (escapes are kept as written, so an escaped key matches no
    /// path).
    fn key_byte(&mut self, byte: u8) {
        if !self.reading_key || self.key_too_long {
            return;
        }
        if self.key.len() >= MAX_KEY_BYTES {
            self.key_too_long = true;
            return;
        }
        // Keys are compared with ASCII paths: a non-ASCII byte makes the key match nothing.
        if byte.is_ascii() && byte != b'\\' {
            self.key.push(char::from(byte));
        } else {
            self.key_too_long = true;
        }
    }

    /// The key just read becomes the current object's.
    fn end_key(&mut self) {
        self.reading_key = false;
        let key = (!self.key_too_long).then(|| std::mem::take(&mut self.key));
        if let Some(Frame::Object { key: k, at_key }) = self.stack.last_mut() {
            *k = key;
            *at_key = false;
        }
    }

    fn stop(&mut self, error: ScanError) -> ScanError {
        self.item = None;
        self.error = Some(error.clone());
        error
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scan_in(text: &str, cuts: &[usize], path: &[&str]) -> Result<Vec<Value>, ScanError> {
        let mut scanner = ItemScanner::new(path, 1 << 20, 64);
        let mut items = Vec::new();
        let mut from = 0;
        for &cut in cuts.iter().chain([&text.len()]) {
            let cut = cut.clamp(from, text.len());
            if !text.is_char_boundary(cut) {
                continue;
            }
            items.extend(scanner.push(&text[from..cut])?);
            from = cut;
        }
        Ok(items)
    }

    #[test]
    fn items_come_as_they_close_whatever_the_cuts() {
        let text = r#"{"steps": [{"id": "a", "tool": "echo", "arguments": {"text": "x}\"]{"}},
            {"id": "b", "tool": "echo", "arguments": {"list": [1, {"k": [2]}]}}],
            "output_steps": ["b"]}"#;
        let whole: Value = serde_json::from_str(text).unwrap();
        for step in 1..text.len() {
            let cuts: Vec<usize> = (step..text.len()).step_by(step).collect();
            let items = scan_in(text, &cuts, &["steps"]).unwrap();
            assert_eq!(
                Value::Array(items),
                whole["steps"],
                "cut every {step} bytes"
            );
        }
    }

    #[test]
    fn an_item_is_handed_over_when_its_brace_arrives() {
        let mut scanner = ItemScanner::new(&["steps"], 1 << 20, 64);
        assert!(scanner.push(r#"{"steps": [{"id": "a""#).unwrap().is_empty());
        assert_eq!(scanner.push("}").unwrap(), vec![json!({"id": "a"})]);
        assert!(scanner.push(r#", {"id": "b"#).unwrap().is_empty());
        assert_eq!(scanner.push(r#""}]"#).unwrap(), vec![json!({"id": "b"})]);
        assert!(!scanner.finished());
        assert!(scanner.push("}").unwrap().is_empty());
        assert!(scanner.finished());
    }

    #[test]
    fn the_list_is_found_by_its_path_only() {
        // A `steps` key inside an argument, or under another key, is not the plan's.
        let text = r#"<tool_call>
            {"name": "execute_tool_plan", "meta": {"steps": [{"id": "no"}]},
             "arguments": {"note": {"steps": [{"id": "nested"}]},
                           "steps": [{"id": "yes", "arguments": {"steps": [{"id": "inner"}]}}]}}
            </tool_call>"#;
        let items = scan_in(text, &[], &["arguments", "steps"]).unwrap();
        assert_eq!(items.len(), 1);
        assert_eq!(items[0]["id"], "yes");
        assert_eq!(items[0]["arguments"]["steps"][0]["id"], "inner");
    }

    #[test]
    fn items_that_are_not_objects_are_passed_over() {
        let items = scan_in(
            r#"{"steps": ["x", 3, {"id": "a"}, [1], null]}"#,
            &[],
            &["steps"],
        );
        assert_eq!(items.unwrap(), vec![json!({"id": "a"})]);
    }

    #[test]
    fn limits_stop_the_scanner_with_a_reason() {
        let mut scanner = ItemScanner::new(&["steps"], 16, 64);
        let e = scanner.push(r#"{"steps": [{"id": "a"}]}"#).unwrap_err();
        assert_eq!(e, ScanError::TooLarge { limit: 16 });
        assert_eq!(scanner.push("]").unwrap_err(), e, "stays stopped");

        let mut scanner = ItemScanner::new(&["steps"], 1 << 20, 8);
        let deep = format!(
            r#"{{"steps": [{{"a": {}1{}}}]}}"#,
            "[".repeat(20),
            "]".repeat(20)
        );
        assert_eq!(
            scanner.push(&deep).unwrap_err(),
            ScanError::TooDeep { limit: 8 }
        );
    }

    #[test]
    fn malformed_text_and_a_second_list_stop_the_scanner() {
        let mut scanner = ItemScanner::new(&["steps"], 1 << 20, 64);
        assert!(matches!(
            scanner.push(r#"{"steps": [{"id": "a"]}"#),
            Err(ScanError::Malformed { .. })
        ));
        let mut scanner = ItemScanner::new(&["steps"], 1 << 20, 64);
        let items = scanner.push(r#"{"steps": [{"id": "a"}], "steps": [{"id": "b"}]}"#);
        assert!(matches!(items, Err(ScanError::Malformed { .. })));
        assert!(scanner.broken().is_some());
    }

    #[test]
    fn long_and_escaped_keys_match_nothing() {
        let long = "s".repeat(MAX_KEY_BYTES + 10);
        let text = format!(r#"{{"{long}": [{{"id": "a"}}], "st\u0065ps": [{{"id": "b"}}]}}"#);
        assert!(scan_in(&text, &[], &[&long]).unwrap().is_empty());
        let text = r#"{"st\u0065ps": [{"id": "b"}]}"#;
        assert!(scan_in(text, &[], &["steps"]).unwrap().is_empty());
    }

    #[test]
    fn text_after_the_document_is_not_read() {
        let mut scanner = ItemScanner::new(&["steps"], 1 << 20, 64);
        assert_eq!(scanner.document(), None);
        assert!(scanner.push("<tool_call> ").unwrap().is_empty());
        let items = scanner.push(r#"{"steps": [{"id": "a"}]} {"steps": [{"id": "b"}]}"#);
        assert_eq!(items.unwrap(), vec![json!({"id": "a"})]);
        assert!(scanner.finished());
        assert_eq!(scanner.document(), Some((12, Some(36))));
        assert!(scanner.push("}}}").unwrap().is_empty());
    }

    /// Any JSON value, strings with quotes, backslashes, braces and non-ASCII text included.
    fn any_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            "[a-z\"\\\\{}\\[\\],:é€ ]{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z\"{}]{0,6}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// The items of any document, cut into chunks anywhere, are its list's object items.
        #[test]
        fn any_cuts_give_the_list_s_objects(
            items in proptest::collection::vec(any_value(), 0..6),
            other in any_value(),
            pretty: bool,
            cuts in proptest::collection::vec(0usize..400, 0..40),
        ) {
            let doc = json!({"before": other, "steps": items, "after": other});
            let text = if pretty {
                serde_json::to_string_pretty(&doc).unwrap()
            } else {
                serde_json::to_string(&doc).unwrap()
            };
            let mut cuts = cuts;
            cuts.sort_unstable();
            let found = scan_in(&text, &cuts, &["steps"]).unwrap();
            let objects: Vec<Value> = items.into_iter().filter(Value::is_object).collect();
            proptest::prop_assert_eq!(found, objects);
        }
    }
}
