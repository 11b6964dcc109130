//! What can be kept of a JSON reply cut off at the token limit: the complete elements of chosen
//! arrays (the tool calls, a plan's steps), the rest dropped and the JSON closed.
//!
//! Only whole elements of the arrays at the given paths count. A cut inside anything else (a
//! call's arguments, a step's arguments, a thought) goes back to the last such element, so nothing
//! kept was written only in part: a call is kept with all its arguments or not at all.

/// One open container of the text read so far.
#[derive(Debug, Clone)]
struct Frame {
    /// `]` for an array, `}` for an object: what closes it.
    closer: char,
    /// The path of this container, as JSON-pointer-like segments (`*` for an array element).
    path: Vec<String>,
    /// In an object: the key of the member being read (its value comes next).
    key: Option<String>,
}

/// Reads `text`, a JSON object cut short, and returns it cut back to the end of the last complete
/// element of an array whose path is in `arrays` (paths like `/tool_calls` or
/// `/tool_calls/*/arguments/steps`), with every container still open closed; `None` when no such
/// element was complete. Text that is complete JSON is not this function's business: it is read
/// the same way and cut at the last such element too.
pub fn salvage(text: &str, arrays: &[&str]) -> Option<String> {
    let mut stack: Vec<Frame> = Vec::new();
    // The best cut so far: where to cut, and the closers of the containers open there.
    let mut best: Option<(usize, String)> = None;
    let mut chars = text.char_indices().peekable();
    // Whether the next string read is an object key.
    let mut expect_key = false;
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => {
                // Read the whole string; a string cut short ends the reading.
                let mut s = String::new();
                let mut closed = None;
                while let Some((j, d)) = chars.next() {
                    match d {
                        '\\' => {
                            if let Some((_, e)) = chars.next() {
                                s.push(e);
                            }
                        }
                        '"' => {
                            closed = Some(j + 1);
                            break;
                        }
                        _ => s.push(d),
                    }
                }
                let Some(end) = closed else { break };
                if expect_key {
                    if let Some(top) = stack.last_mut() {
                        top.key = Some(s);
                    }
                    expect_key = false;
                } else {
                    value_done(&stack, end, arrays, &mut best);
                }
            }
            '{' | '[' => {
                let path = match stack.last() {
                    None => Vec::new(),
                    Some(parent) => child_path(parent),
                };
                stack.push(Frame {
                    closer: if c == '{' { '}' } else { ']' },
                    path,
                    key: None,
                });
                expect_key = c == '{';
            }
            '}' | ']' => {
                // A closer that closes nothing, or the wrong thing, ends the reading.
                match stack.pop() {
                    Some(frame) if frame.closer == c => {}
                    _ => break,
                }
                if stack.is_empty() {
                    break;
                }
                value_done(&stack, i + 1, arrays, &mut best);
            }
            ',' => {
                if let Some(top) = stack.last_mut()
                    && top.closer == '}'
                {
                    top.key = None;
                    expect_key = true;
                }
            }
            c if c == '-' || c.is_ascii_alphanumeric() => {
                // A number or a literal: complete only once something follows it.
                let mut end = i + c.len_utf8();
                while let Some(&(j, d)) = chars.peek() {
                    if d == '-' || d == '+' || d == '.' || d.is_ascii_alphanumeric() {
                        end = j + d.len_utf8();
                        chars.next();
                    } else {
                        break;
                    }
                }
                if chars.peek().is_some() {
                    value_done(&stack, end, arrays, &mut best);
                }
            }
            _ => {}
        }
    }
    best.map(|(at, closers)| format!("{}{closers}", &text[..at]))
}

/// The path of the value being read inside `parent`.
fn child_path(parent: &Frame) -> Vec<String> {
    let mut path = parent.path.clone();
    if parent.closer == ']' {
        path.push("*".to_owned());
    } else {
        path.push(parent.key.clone().unwrap_or_default());
    }
    path
}

/// A value ended at byte `end` inside the container on top of `stack`: when that container is one
/// of the `arrays`, cutting at `end` keeps whole elements, and becomes the best cut.
fn value_done(stack: &[Frame], end: usize, arrays: &[&str], best: &mut Option<(usize, String)>) {
    let Some(top) = stack.last() else { return };
    if top.closer != ']' {
        return;
    }
    let pointer: String = top.path.iter().map(|s| format!("/{s}")).collect();
    if arrays.contains(&pointer.as_str()) {
        let closers: String = stack.iter().rev().map(|f| f.closer).collect();
        *best = Some((end, closers));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    const ARRAYS: &[&str] = &["/tool_calls", "/tool_calls/*/arguments/steps"];

    fn plan_reply(steps: usize) -> String {
        let steps: Vec<Value> = (0..steps)
            .map(|i| json!({"id": format!("s{i}"), "tool": "get_weather", "arguments": {"location": format!("City \"{i}\""), "days": i}}))
            .collect();
        json!({"thought": "a, b", "tool_calls": [{"name": "execute_tool_plan", "arguments": {"steps": steps, "output_steps": ["s0"]}}]}).to_string()
    }

    #[test]
    fn a_plan_cut_in_its_third_step_keeps_two() {
        let text = plan_reply(3);
        let cut = &text[..text.find("\"s2\"").unwrap() + 10];
        let kept: Value = serde_json::from_str(&salvage(cut, ARRAYS).unwrap()).unwrap();
        let steps = kept["tool_calls"][0]["arguments"]["steps"]
            .as_array()
            .unwrap();
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[1]["arguments"]["location"], "City \"1\"");
        assert_eq!(kept["tool_calls"][0]["name"], "execute_tool_plan");
    }

    #[test]
    fn a_cut_inside_arguments_keeps_no_part_of_them() {
        // The second call's arguments were being written: the first call alone is kept.
        let text = r#"{"tool_calls": [{"name": "f", "arguments": {"xs": [1, 2]}}, {"name": "g", "arguments": {"xs": [1, 2, 3"#;
        let kept: Value = serde_json::from_str(&salvage(text, ARRAYS).unwrap()).unwrap();
        assert_eq!(
            kept,
            json!({"tool_calls": [{"name": "f", "arguments": {"xs": [1, 2]}}]})
        );
        // The first call cut: nothing to keep.
        assert_eq!(
            salvage(
                r#"{"tool_calls": [{"name": "f", "arguments": {"xs": [1, 2"#,
                ARRAYS
            ),
            None
        );
        assert_eq!(salvage(r#"{"answer": "It is 2"#, ARRAYS), None);
        assert_eq!(salvage("", ARRAYS), None);
    }

    #[test]
    fn a_number_at_the_cut_may_be_unfinished() {
        let text = r#"{"tool_calls": [{"name": "f", "arguments": {"n": 2}}, {"name": "f", "arguments": {"n": 20"#;
        let kept: Value = serde_json::from_str(&salvage(text, ARRAYS).unwrap()).unwrap();
        assert_eq!(kept["tool_calls"].as_array().unwrap().len(), 1);
    }

    proptest! {
        /// Wherever a plan reply is cut, what is kept parses, and its steps are the first steps of
        /// the whole reply, each whole.
        #[test]
        fn any_cut_keeps_whole_leading_steps(steps in 1usize..6, at in 0.0f64..1.0) {
            let text = plan_reply(steps);
            let whole: Value = serde_json::from_str(&text).unwrap();
            let all = whole["tool_calls"][0]["arguments"]["steps"].as_array().unwrap().clone();
            let mut cut_at = (text.len() as f64 * at) as usize;
            while !text.is_char_boundary(cut_at) {
                cut_at -= 1;
            }
            if let Some(kept) = salvage(&text[..cut_at], ARRAYS) {
                let kept: Value = serde_json::from_str(&kept).unwrap();
                let got = kept["tool_calls"][0]["arguments"]["steps"].as_array().unwrap();
                prop_assert!(!got.is_empty() && got.len() <= all.len());
                prop_assert_eq!(got.as_slice(), &all[..got.len()]);
            }
        }

        /// Arbitrary text never panics.
        #[test]
        fn arbitrary_text_is_read_safely(text in ".{0,200}") {
            if let Some(kept) = salvage(&text, ARRAYS) {
                prop_assert!(kept.len() <= 2 * text.len());
            }
        }
    }
}
