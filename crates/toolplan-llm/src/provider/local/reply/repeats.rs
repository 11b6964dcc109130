//! Replies that have started to repeat themselves: a tool call written again with the same name and
//! arguments, or a plan step written again with the same tool and arguments (under another id).
//!
//! Small models fall into loops (two calls written 13 times each were seen): the sampler checks the
//! reply each time an object closes ([`repeats_in`]), stops at the first repeat, and the reply keeps
//! only the first of each ([`drop_repeats`]).

use serde_json::Value;

use super::{SALVAGED_ARRAYS, salvage};

/// The key a plan step may differ in and still repeat an earlier one.
const STEP_ID: &str = "id";

/// Whether the reply written so far (cut anywhere) holds a complete element of a watched array that
/// repeats an earlier one.
pub fn repeats_in(text: &str) -> bool {
    let Some(kept) = salvage(text, SALVAGED_ARRAYS) else {
        return false;
    };
    let Ok(mut reply) = serde_json::from_str::<Value>(&kept) else {
        return false;
    };
    drop_repeats(&mut reply) > 0
}

/// Removes from `reply` every tool call that repeats an earlier call (name and arguments), and every
/// plan step that repeats an earlier step of its plan (all but the id); returns how many were
/// removed.
pub fn drop_repeats(reply: &mut Value) -> usize {
    let mut dropped = 0;
    if let Some(calls) = reply.get_mut("tool_calls").and_then(Value::as_array_mut) {
        for call in calls.iter_mut() {
            if let Some(steps) = call
                .get_mut("arguments")
                .and_then(|a| a.get_mut("steps"))
                .and_then(Value::as_array_mut)
            {
                dropped += dedupe(steps, Some(STEP_ID));
            }
        }
        dropped += dedupe(calls, None);
    }
    dropped
}

/// Keeps the first of the elements of `items` that are equal but for the key `ignored`.
fn dedupe(items: &mut Vec<Value>, ignored: Option<&str>) -> usize {
    let key = |v: &Value| match (v, ignored) {
        (Value::Object(o), Some(k)) => {
            let mut o = o.clone();
            o.remove(k);
            Value::Object(o)
        }
        _ => v.clone(),
    };
    let mut seen: Vec<Value> = Vec::with_capacity(items.len());
    let before = items.len();
    items.retain(|item| {
        let k = key(item);
        if seen.contains(&k) {
            false
        } else {
            seen.push(k);
            true
        }
    });
    before - items.len()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn plan(steps: Value) -> Value {
        json!({"tool_calls": [{"name": "execute_tool_plan", "arguments": {"thought": "t", "steps": steps}}]})
    }

    #[test]
    fn a_step_written_again_under_another_id_is_a_repeat() {
        let a = json!({"id": "a", "tool": "get_weather", "arguments": {"location": "Paris"}});
        let b = json!({"id": "b", "tool": "get_weather", "arguments": {"location": "Lima"}});
        let a2 = json!({"id": "a2", "tool": "get_weather", "arguments": {"location": "Paris"}});
        let text = plan(json!([a, b, a2])).to_string();
        assert!(repeats_in(&text));
        // Cut inside the repeat, nothing repeats yet.
        let cut = &text[..text.find("a2").unwrap() + 10];
        assert!(!repeats_in(cut), "{cut}");
        let mut reply = plan(json!([a, b, a2, b]));
        assert_eq!(drop_repeats(&mut reply), 2);
        assert_eq!(reply, plan(json!([a, b])));
    }

    #[test]
    fn different_steps_and_calls_are_not_repeats() {
        let text = plan(json!([
            {"id": "a", "tool": "get_weather", "arguments": {"location": "Paris"}},
            {"id": "b", "tool": "get_user", "arguments": {"name": "Paris"}},
            {"id": "c", "tool": "get_weather", "arguments": {"location": "Paris", "unit": "F"}}
        ]))
        .to_string();
        assert!(!repeats_in(&text));
        assert!(!repeats_in("not json"));
        assert!(!repeats_in(""));
    }

    #[test]
    fn a_call_made_again_is_a_repeat_and_dropped() {
        let call = json!({"name": "get_weather", "arguments": {"location": "Paris"}});
        let other = json!({"name": "get_weather", "arguments": {"location": "Rome"}});
        let mut reply = json!({"tool_calls": [call, other, call, call]});
        assert!(repeats_in(&reply.to_string()));
        assert_eq!(drop_repeats(&mut reply), 2);
        assert_eq!(reply, json!({"tool_calls": [call, other]}));
    }
}
