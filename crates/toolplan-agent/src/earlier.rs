//! Replanning that reuses results (LLMCompiler's joiner, without its extra call): the results of the
//! completed steps of the plans already run in an interaction, so that a follow-up plan refers to
//! them by id (`$ref:u.city`) instead of calling those tools again.
//!
//! The summary a model reads after a plan lists the results of its output steps by id, and of the
//! steps its failed steps read ([`toolplan_core::PlanRun::failure_inputs`]); a later plan
//! of the same interaction may name those ids. Before the plan is checked or run,
//! [`EarlierResults::inline`] puts the value in place of each such reference (a whole-value
//! reference becomes the value, one inside longer text its text), so the engine sees a plan of
//! literal arguments. A step of the new plan with the same id wins over an earlier one.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};
use toolplan_core::reference::{Piece, follow, split_pieces};
use toolplan_core::value_as_text;

/// Deepest nesting of a plan's arguments that [`EarlierResults::inline`] walks; deeper values are
/// left as they are (the plan's own depth limit applies to them when it is compiled).
const MAX_DEPTH: usize = 128;

/// The results an interaction's plan summaries listed, by step id (a later
/// plan's step with the same id replaces an earlier one's).
#[derive(Debug, Default)]
pub struct EarlierResults {
    outputs: HashMap<String, Value>,
}

impl EarlierResults {
    /// None yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Keeps `outputs` (the results a run's summary listed: output steps that succeeded, and the
    /// steps its failed steps read, by id).
    pub fn remember(&mut self, outputs: Map<String, Value>) {
        self.outputs.extend(outputs);
    }

    /// Puts the earlier results in place of the references of `plan` (an `execute_tool_plan`
    /// call's arguments) that name no step of its own but an earlier one; returns how many it
    /// replaced. A reference whose path finds nothing in the earlier result is left for validation
    /// to report.
    pub fn inline(&self, plan: &mut Value) -> usize {
        if self.outputs.is_empty() {
            return 0;
        }
        let Some(Value::Array(steps)) = plan.get_mut("steps") else {
            return 0;
        };
        let own: HashSet<String> = steps
            .iter()
            .filter_map(|s| s.get("id").and_then(Value::as_str).map(str::to_owned))
            .collect();
        let mut replaced = 0;
        for step in steps.iter_mut() {
            let Some(arguments) = step.get_mut("arguments") else {
                continue;
            };
            // Arguments given as a JSON string are read as the object they hold.
            if let Value::String(text) = arguments
                && let Ok(object @ Value::Object(_)) = serde_json::from_str::<Value>(text)
            {
                *arguments = object;
            }
            replaced += self.inline_value(arguments, &own, 0);
        }
        replaced
    }

    fn inline_value(&self, value: &mut Value, own: &HashSet<String>, depth: usize) -> usize {
        if depth > MAX_DEPTH {
            return 0;
        }
        match value {
            Value::String(text) => match self.resolve(text, own) {
                Some(new) => {
                    *value = new;
                    1
                }
                None => 0,
            },
            Value::Array(items) => items
                .iter_mut()
                .map(|v| self.inline_value(v, own, depth + 1))
                .sum(),
            Value::Object(map) => map
                .values_mut()
                .map(|v| self.inline_value(v, own, depth + 1))
                .sum(),
            _ => 0,
        }
    }

    /// `text` with its references to earlier results put in, when it has any.
    fn resolve(&self, text: &str, own: &HashSet<String>) -> Option<Value> {
        let pieces = split_pieces(text)?;
        let earlier = |r: &toolplan_core::reference::Reference| -> Option<Value> {
            if own.contains(&r.step) {
                return None;
            }
            let output = self.outputs.get(&r.step)?;
            follow(r, output).ok().flatten().cloned()
        };
        if let [Piece::Ref(r)] = pieces.as_slice() {
            return earlier(r);
        }
        let mut changed = false;
        let mut out = String::new();
        for piece in &pieces {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Ref(r) => match earlier(r) {
                    Some(v) => {
                        out.push_str(&value_as_text(&v));
                        changed = true;
                    }
                    None => out.push_str(&r.to_string()),
                },
            }
        }
        changed.then_some(Value::String(out))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn references_to_earlier_results_are_put_in_place() {
        let mut earlier = EarlierResults::new();
        earlier.remember(
            json!({"u": {"name": "Erin", "city": "Cairo"}, "t": 31})
                .as_object()
                .cloned()
                .unwrap(),
        );
        let mut plan = json!({"steps": [
            {"id": "w", "tool": "get_weather", "arguments": {"location": "$ref:u.city"}},
            {"id": "c", "tool": "calculator", "arguments": "{\"expression\": \"$ref:t - $ref:w.temp\"}"},
            {"id": "t2", "tool": "echo", "arguments": {"text": ["$ref:t", "$ref:u.team", "$ref:nope"]}}]});
        assert_eq!(earlier.inline(&mut plan), 3);
        assert_eq!(plan["steps"][0]["arguments"]["location"], "Cairo");
        // The plan's own step stays a reference.
        assert_eq!(
            plan["steps"][1]["arguments"]["expression"],
            "31 - $ref:w.temp"
        );
        // A path that finds nothing, and an unknown id, are left for validation.
        assert_eq!(
            plan["steps"][2]["arguments"]["text"],
            json!([31, "$ref:u.team", "$ref:nope"])
        );
        // A step of the new plan with an earlier id wins.
        let mut shadowed = json!({"steps": [
            {"id": "u", "tool": "get_user", "arguments": {"name": "Dave"}},
            {"id": "w", "tool": "get_weather", "arguments": {"location": "$ref:u.city"}}]});
        assert_eq!(earlier.inline(&mut shadowed), 0);
    }
}
