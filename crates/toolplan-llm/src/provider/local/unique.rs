//! Values that must differ within one tool call ([`ToolDefinition::unique_values`], a plan's step
//! ids), enforced while the local model writes its reply.
//!
//! A grammar cannot say "all different", so the sampler asks a [`UniqueValues`] before it takes a
//! token: the tracker follows the reply's JSON byte by byte (the path to where it is, the call's
//! tool name, the string being written) and turns down a token that would close a string equal to
//! one already written at a unique place of the same call. The model then writes another value
//! (`w2` after `w`) instead of a plan that fails validation for a duplicate id.
//!
//! The reply's shape is the one of [`reply`](super::reply): `{"tool_calls": [{"name": …,
//! "arguments": {…}}, …]}`, the name before the arguments.

use std::collections::HashSet;

use crate::message::ToolDefinition;

/// One segment of a path: an object key, or (in a rule) `*` for any array index.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Key(Vec<u8>),
    Index(usize),
}

/// Where the tracker is inside one container.
#[derive(Debug, Clone)]
enum Frame {
    /// In an object: the key of the value being written (`None` before the first key).
    Object {
        key: Option<Vec<u8>>,
        expect_key: bool,
    },
    /// In an array: the index of the item being written.
    Array { index: usize },
}

/// The string being written.
#[derive(Debug, Clone)]
struct Text {
    key: bool,
    escaped: bool,
    bytes: Vec<u8>,
}

/// One rule: the tool, and the path inside its arguments (`*` matches any index or key).
#[derive(Debug, Clone)]
struct Rule {
    tool: String,
    path: Vec<Option<Vec<u8>>>,
}

/// Follows a reply as it is written and tells whether a piece of text would repeat a value that
/// must be unique. Cheap to clone (the sampler tries a piece on a clone).
#[derive(Debug, Clone)]
pub struct UniqueValues {
    rules: Vec<Rule>,
    stack: Vec<Frame>,
    text: Option<Text>,
    /// The call being written: its index in `tool_calls`, and its tool's name.
    call: Option<(usize, String)>,
    /// (rule index, value) of every unique value the call being written holds.
    seen: HashSet<(usize, Vec<u8>)>,
}

impl UniqueValues {
    /// The tracker for replies that may call `tools`, or `None` when no tool has unique values.
    pub fn for_tools(tools: &[ToolDefinition]) -> Option<Self> {
        let rules: Vec<Rule> = tools
            .iter()
            .flat_map(|t| {
                t.unique_values.iter().map(|path| Rule {
                    tool: t.name.clone(),
                    path: path
                        .split('/')
                        .filter(|s| !s.is_empty())
                        .map(|s| (s != "*").then(|| s.as_bytes().to_vec()))
                        .collect(),
                })
            })
            .collect();
        (!rules.is_empty()).then(|| UniqueValues {
            rules,
            stack: Vec::new(),
            text: None,
            call: None,
            seen: HashSet::new(),
        })
    }

    /// Whether `piece` can follow what was written without repeating a unique value. Only a
    /// closing quote can complete a value, so pieces without one are always allowed.
    pub fn allows(&self, piece: &[u8]) -> bool {
        !piece.contains(&b'"') || self.clone().feed(piece)
    }

    /// Takes `piece` as written; false when it completed a value that repeats an earlier one.
    pub fn feed(&mut self, piece: &[u8]) -> bool {
        let mut fresh = true;
        for &b in piece {
            fresh &= self.byte(b);
        }
        fresh
    }

    /// One byte; false when it completed a repeated unique value.
    fn byte(&mut self, b: u8) -> bool {
        if let Some(text) = &mut self.text {
            if text.escaped {
                text.escaped = false;
                text.bytes.push(b);
            } else if b == b'\\' {
                text.escaped = true;
                text.bytes.push(b);
            } else if b == b'"' {
                let Some(text) = self.text.take() else {
                    return true;
                };
                return self.string_done(text);
            } else {
                text.bytes.push(b);
            }
            return true;
        }
        match b {
            b'{' => self.stack.push(Frame::Object {
                key: None,
                expect_key: true,
            }),
            b'[' => self.stack.push(Frame::Array { index: 0 }),
            b'}' | b']' => {
                self.stack.pop();
            }
            b',' => match self.stack.last_mut() {
                Some(Frame::Object { expect_key, .. }) => *expect_key = true,
                Some(Frame::Array { index }) => *index += 1,
                None => {}
            },
            b':' => {
                if let Some(Frame::Object { expect_key, .. }) = self.stack.last_mut() {
                    *expect_key = false;
                }
            }
            b'"' => {
                let key = matches!(
                    self.stack.last(),
                    Some(Frame::Object {
                        expect_key: true,
                        ..
                    })
                );
                self.text = Some(Text {
                    key,
                    escaped: false,
                    bytes: Vec::new(),
                });
            }
            _ => {}
        }
        true
    }

    /// A string ended: a key names the next value; a value may be a call's name or a unique value.
    fn string_done(&mut self, text: Text) -> bool {
        if text.key {
            if let Some(Frame::Object { key, .. }) = self.stack.last_mut() {
                *key = Some(text.bytes);
            }
            return true;
        }
        let path = self.path();
        // [tool_calls, i, …]
        let call = match path.as_slice() {
            [Segment::Key(k), Segment::Index(i), ..] if k == b"tool_calls" => *i,
            _ => return true,
        };
        match &path[2..] {
            [Segment::Key(k)] if k == b"name" => {
                // A new call: the values of the one before may come again.
                self.call = Some((call, String::from_utf8_lossy(&text.bytes).into_owned()));
                self.seen.clear();
                true
            }
            [Segment::Key(k), rest @ ..] if k == b"arguments" => {
                let Some((_, tool)) = self.call.as_ref().filter(|(i, _)| *i == call) else {
                    return true;
                };
                let mut fresh = true;
                for (r, rule) in self.rules.iter().enumerate() {
                    if rule.tool == *tool && matches(&rule.path, rest) {
                        fresh &= self.seen.insert((r, text.bytes.clone()));
                    }
                }
                fresh
            }
            _ => true,
        }
    }

    /// The path from the reply's root to the value being written.
    fn path(&self) -> Vec<Segment> {
        self.stack
            .iter()
            .filter_map(|f| match f {
                Frame::Object { key, .. } => key.clone().map(Segment::Key),
                Frame::Array { index } => Some(Segment::Index(*index)),
            })
            .collect()
    }
}

/// Whether a rule's path (`None` for `*`) matches a path inside the arguments.
fn matches(rule: &[Option<Vec<u8>>], path: &[Segment]) -> bool {
    rule.len() == path.len()
        && rule.iter().zip(path).all(|(r, p)| match (r, p) {
            (None, _) => true,
            (Some(k), Segment::Key(key)) => k == key,
            (Some(k), Segment::Index(i)) => k == i.to_string().as_bytes(),
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn plan_tool() -> ToolDefinition {
        ToolDefinition::new("plan", "", json!({"type": "object"})).with_unique_values("/steps/*/id")
    }

    fn tracker() -> UniqueValues {
        UniqueValues::for_tools(&[plan_tool(), ToolDefinition::new("echo", "", json!({}))])
            .expect("a rule")
    }

    /// Feeds `text` token by token as `pieces`, and says whether every piece was allowed.
    fn allowed(tracker: &mut UniqueValues, pieces: &[&str]) -> Vec<bool> {
        pieces
            .iter()
            .map(|p| {
                let ok = tracker.allows(p.as_bytes());
                if ok {
                    tracker.feed(p.as_bytes());
                }
                ok
            })
            .collect()
    }

    #[test]
    fn a_repeated_step_id_is_turned_down_at_its_closing_quote() {
        let mut t = tracker();
        let written = r#"{"thought":"x","tool_calls":[{"name":"plan","arguments":{"steps":[{"id":"w","tool":"a","arguments":{"id":"w"}},{"id":"w"#;
        assert!(t.feed(written.as_bytes()));
        // Closing the second `w` is refused, in any token that holds the quote.
        assert!(!t.allows(b"\""));
        assert!(!t.allows(b"\",\""));
        assert!(t.allows(b"2"));
        assert_eq!(allowed(&mut t, &["2", "\",", "\"tool"]), [true; 3]);
    }

    #[test]
    fn values_elsewhere_repeat_freely() {
        let mut t = tracker();
        // The same id in another call, an argument named `id`, and a call of a tool without rules.
        let text = r#"{"tool_calls":[{"name":"plan","arguments":{"steps":[{"id":"a","arguments":{"id":"a"}}],"output_steps":["a","a"]}},{"name":"plan","arguments":{"steps":[{"id":"a"}]}},{"name":"echo","arguments":{"steps":[{"id":"b"},{"id":"b"}]}}]}"#;
        assert!(t.feed(text.as_bytes()));
    }

    #[test]
    fn escapes_and_keys_do_not_confuse_the_tracker() {
        let mut t = tracker();
        let text = r#"{"tool_calls":[{"name":"plan","arguments":{"thought":"say \"id\": \"a\"","steps":[{"id":"a"},{"id":"b"},{"id":"a"}]}}]}"#;
        assert!(!t.feed(text.as_bytes()));
        assert!(tracker().feed(text.replace(r#"{"id":"a"}]"#, r#"{"id":"c"}]"#).as_bytes()));
    }

    #[test]
    fn no_rules_no_tracker() {
        assert!(UniqueValues::for_tools(&[ToolDefinition::new("echo", "", json!({}))]).is_none());
    }
}
