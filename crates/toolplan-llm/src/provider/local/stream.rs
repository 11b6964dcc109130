//! A local reply handed over while it is sampled: [`ReplySplitter`] reads the reply's bytes as the
//! tokens come and sends the [`ReplyDelta`]s of what it holds. A free-text reply is sent as text; a
//! constrained reply (`{"answer": …}` or `{"tool_calls": [{"name": …, "arguments": {…}}]}`, see
//! [`reply`](super::reply)) as each call's name once it is written and its arguments' JSON text as
//! it grows, and the answer once its string is complete. The thought is not sent.
//!
//! The splitter follows the JSON only as far as it needs to: which container it is in, under which
//! key or at which index. The grammar makes the reply well formed; text that is not only ends the
//! pieces (nothing panics, nothing grows beyond the reply).

use crate::message::{ReplyDelta, ReplySink};

/// One open container of the reply.
#[derive(Debug)]
enum Frame {
    /// An object: the key its current value belongs to, and whether the next string is a key.
    Object {
        key: Option<String>,
        expect_key: bool,
    },
    /// An array: the index of its current item (the commas seen at its level).
    Array { index: usize },
}

/// A string being read whose text is wanted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wanted {
    /// An object key.
    Key,
    /// The name of tool call `index`.
    Name(usize),
    /// The answer.
    Answer,
}

/// Reads a local reply's bytes as they are sampled and sends its pieces to a [`ReplySink`].
#[derive(Debug)]
pub(super) struct ReplySplitter {
    sink: ReplySink,
    /// Whether the reply is free text (everything is sent as text).
    text: bool,
    stack: Vec<Frame>,
    /// Inside a string, and whether the last byte was a backslash.
    in_string: bool,
    escaped: bool,
    /// The wanted string being read, with its bytes (quotes included).
    wanted: Option<(Wanted, Vec<u8>)>,
    /// The call whose arguments are being copied, and the depth of the stack they started at.
    arguments: Option<(usize, usize)>,
    /// Bytes to send that do not end on a character boundary yet.
    pending: Vec<u8>,
    /// Whether the text stopped making sense as JSON: nothing more is sent.
    broken: bool,
}

impl ReplySplitter {
    /// A splitter for a free-text reply (`text`) or a constrained JSON one.
    pub(super) fn new(sink: ReplySink, text: bool) -> Self {
        Self {
            sink,
            text,
            stack: Vec::new(),
            in_string: false,
            escaped: false,
            wanted: None,
            arguments: None,
            pending: Vec::new(),
            broken: false,
        }
    }

    /// Reads the next bytes of the reply (a token's piece, which may end inside a character).
    pub(super) fn push(&mut self, bytes: &[u8]) {
        if self.text {
            self.pending.extend_from_slice(bytes);
            let text = self.complete_characters();
            if !text.is_empty() {
                let _ = self.sink.send(ReplyDelta::Text(text));
            }
            return;
        }
        for &byte in bytes {
            if self.broken {
                return;
            }
            self.byte(byte);
        }
        self.send_arguments();
    }

    /// Sends what is left: the end of a text reply or of arguments cut off mid-character.
    pub(super) fn finish(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let text = String::from_utf8_lossy(&std::mem::take(&mut self.pending)).into_owned();
        let delta = match self.arguments {
            _ if self.text => ReplyDelta::Text(text),
            Some((index, _)) => ReplyDelta::Arguments { index, text },
            None => return,
        };
        let _ = self.sink.send(delta);
    }

    /// One byte of a JSON reply.
    fn byte(&mut self, byte: u8) {
        if self.arguments.is_some() {
            self.pending.push(byte);
        }
        if self.in_string {
            if let Some((_, text)) = &mut self.wanted {
                text.push(byte);
            }
            if self.escaped {
                self.escaped = false;
            } else if byte == b'\\' {
                self.escaped = true;
            } else if byte == b'"' {
                self.in_string = false;
                self.end_string();
            }
            return;
        }
        match byte {
            b'{' | b'[' => {
                self.value_starts(byte);
                self.stack.push(if byte == b'{' {
                    Frame::Object {
                        key: None,
                        expect_key: true,
                    }
                } else {
                    Frame::Array { index: 0 }
                });
            }
            b'}' | b']' => {
                if self.stack.pop().is_none() {
                    self.broken = true;
                }
                if self
                    .arguments
                    .is_some_and(|(_, depth)| depth == self.stack.len())
                {
                    self.send_arguments();
                    self.finish();
                    self.arguments = None;
                }
            }
            b'"' => {
                let is_key = matches!(
                    self.stack.last(),
                    Some(Frame::Object {
                        expect_key: true,
                        ..
                    })
                );
                let wanted = if is_key {
                    Some(Wanted::Key)
                } else {
                    self.value_starts(byte)
                };
                self.in_string = true;
                self.wanted = wanted.map(|w| (w, vec![byte]));
            }
            b':' => {
                if let Some(Frame::Object { expect_key, .. }) = self.stack.last_mut() {
                    *expect_key = false;
                }
            }
            b',' => match self.stack.last_mut() {
                Some(Frame::Object { key, expect_key }) => {
                    *key = None;
                    *expect_key = true;
                }
                Some(Frame::Array { index }) => *index += 1,
                None => self.broken = true,
            },
            _ => {}
        }
    }

    /// A value starts with `byte` where the stack is: arguments start being copied; a call's name
    /// or the answer is wanted.
    fn value_starts(&mut self, byte: u8) -> Option<Wanted> {
        let key_at = |i: usize| match self.stack.get(i) {
            Some(Frame::Object { key: Some(k), .. }) => Some(k.as_str()),
            _ => None,
        };
        let call = match (key_at(0), self.stack.get(1)) {
            (Some("tool_calls"), Some(Frame::Array { index })) if self.stack.len() == 3 => {
                Some(*index)
            }
            _ => None,
        };
        match (call, key_at(2), byte) {
            (Some(index), Some("arguments"), b'{') if self.arguments.is_none() => {
                self.arguments = Some((index, self.stack.len()));
                self.pending.clear();
                self.pending.push(byte);
                None
            }
            (Some(index), Some("name"), b'"') => Some(Wanted::Name(index)),
            _ if self.stack.len() == 1 && key_at(0) == Some("answer") && byte == b'"' => {
                Some(Wanted::Answer)
            }
            _ => None,
        }
    }

    /// A wanted string has closed: a key becomes its object's, a name starts its call, the answer
    /// is sent.
    fn end_string(&mut self) {
        let Some((wanted, bytes)) = self.wanted.take() else {
            return;
        };
        let Ok(text) = serde_json::from_slice::<String>(&bytes) else {
            self.broken = true;
            return;
        };
        match wanted {
            Wanted::Key => {
                if let Some(Frame::Object { key, .. }) = self.stack.last_mut() {
                    *key = Some(text);
                }
            }
            Wanted::Name(index) => {
                let _ = self.sink.send(ReplyDelta::CallStart { index, name: text });
            }
            Wanted::Answer => {
                let _ = self.sink.send(ReplyDelta::Text(text));
            }
        }
    }

    /// Sends the arguments text read so far, up to the last whole character.
    fn send_arguments(&mut self) {
        let Some((index, _)) = self.arguments else {
            return;
        };
        let text = self.complete_characters();
        if !text.is_empty() {
            let _ = self.sink.send(ReplyDelta::Arguments { index, text });
        }
    }

    /// The pending bytes up to the last whole character, taken out (bytes that can never be a
    /// character are replaced).
    fn complete_characters(&mut self) -> String {
        let complete = match std::str::from_utf8(&self.pending) {
            Ok(_) => self.pending.len(),
            // An error with no length is a character cut at the end: keep it for the next bytes.
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => self.pending.len(),
        };
        let rest = self.pending.split_off(complete);
        String::from_utf8_lossy(&std::mem::replace(&mut self.pending, rest)).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use tokio::sync::mpsc;

    use super::*;

    /// The deltas of `reply` read in pieces cut at `cuts` (byte offsets, any place).
    fn split(reply: &str, cuts: &[usize], text: bool) -> Vec<ReplyDelta> {
        let (sink, mut out) = mpsc::unbounded_channel();
        let mut splitter = ReplySplitter::new(sink, text);
        let bytes = reply.as_bytes();
        let mut at = 0;
        for &cut in cuts.iter().chain([&bytes.len()]) {
            let cut = cut.clamp(at, bytes.len());
            splitter.push(&bytes[at..cut]);
            at = cut;
        }
        splitter.finish();
        drop(splitter);
        let mut deltas = Vec::new();
        while let Ok(d) = out.try_recv() {
            deltas.push(d);
        }
        deltas
    }

    /// The calls the deltas make: name and arguments (parsed from the joined text).
    fn calls(deltas: &[ReplyDelta]) -> Vec<(String, Value)> {
        let mut calls: Vec<(String, String)> = Vec::new();
        for d in deltas {
            match d {
                ReplyDelta::CallStart { index, name } => {
                    assert_eq!(*index, calls.len(), "calls start in order");
                    calls.push((name.clone(), String::new()));
                }
                ReplyDelta::Arguments { index, text } => calls[*index].1.push_str(text),
                ReplyDelta::Text(_) => {}
            }
        }
        calls
            .into_iter()
            .map(|(n, a)| (n, serde_json::from_str(&a).expect("arguments parse")))
            .collect()
    }

    #[test]
    fn calls_and_their_arguments_from_a_reply_cut_anywhere() {
        let reply = json!({"thought": "a \"plan\" {with} [brackets], ünïcode ✓",
            "tool_calls": [
                {"name": "execute_tool_plan", "arguments": {"steps": [
                    {"id": "a", "tool": "get_user", "arguments": {"name": "Zoë \\ \"q\" }"}},
                    {"id": "b", "tool": "get_weather", "arguments": {"location": "$ref:a.city"}}],
                    "output_steps": ["b"]}},
                {"name": "calculator", "arguments": {"expression": "[1, 2] ✓"}}]})
        .to_string();
        let expected = vec![
            (
                "execute_tool_plan".to_owned(),
                serde_json::from_str::<Value>(&reply).unwrap()["tool_calls"][0]["arguments"]
                    .clone(),
            ),
            ("calculator".to_owned(), json!({"expression": "[1, 2] ✓"})),
        ];
        // Whole, then cut at every byte, then in pieces of three.
        assert_eq!(calls(&split(&reply, &[], false)), expected);
        for cut in 0..reply.len() {
            assert_eq!(
                calls(&split(&reply, &[cut], false)),
                expected,
                "cut at {cut}"
            );
        }
        let threes: Vec<usize> = (0..reply.len()).step_by(3).collect();
        let deltas = split(&reply, &threes, false);
        assert_eq!(calls(&deltas), expected);
        // The arguments come in many pieces, each whole characters.
        let pieces = deltas
            .iter()
            .filter(|d| matches!(d, ReplyDelta::Arguments { .. }))
            .count();
        assert!(pieces > 20, "{pieces}");
        assert!(!deltas.iter().any(|d| matches!(d, ReplyDelta::Text(_))));
    }

    #[test]
    fn the_answer_once_written_and_free_text_as_it_comes() {
        let reply = json!({"thought": "done", "answer": "It is 21 °C in \"Paris\"."}).to_string();
        for cut in 0..reply.len() {
            assert_eq!(
                split(&reply, &[cut], false),
                vec![ReplyDelta::Text("It is 21 °C in \"Paris\".".into())]
            );
        }
        let text = "Plain text, ünïcode ✓ {not json";
        for cut in 0..text.len() {
            let joined: String = split(text, &[cut], true)
                .into_iter()
                .map(|d| match d {
                    ReplyDelta::Text(t) => t,
                    other => panic!("{other:?}"),
                })
                .collect();
            assert_eq!(joined, text);
        }
    }

    #[test]
    fn a_reply_that_is_not_json_sends_nothing_and_does_not_panic() {
        for reply in [
            "}}]]",
            "{\"tool_calls\": [{\"name\": \"x\\",
            "\u{0}\u{ff}",
            ",,,",
        ] {
            let deltas = split(reply, &[1, 2], false);
            assert!(calls(&deltas).len() <= 1, "{reply}: {deltas:?}");
        }
        // A call cut off in its arguments: its name and the arguments so far were sent.
        let deltas = split(
            r#"{"tool_calls": [{"name": "f", "arguments": {"a": "b"#,
            &[5, 30],
            false,
        );
        assert_eq!(
            deltas,
            vec![
                ReplyDelta::CallStart {
                    index: 0,
                    name: "f".into()
                },
                ReplyDelta::Arguments {
                    index: 0,
                    text: "{\"a\": \"b".into()
                }
            ]
        );
    }
}
