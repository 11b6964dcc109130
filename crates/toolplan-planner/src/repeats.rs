//! Plan steps that repeat another step with made-up additions: [`repeats_with_additions`].
//!
//! A small model that has written the step a question asks for sometimes writes it again with an
//! optional argument added whose value the question never gives: asked for a car's yearly CO2 at
//! 12,000 miles and 25 MPG, the 1.5B model planned the call, then the same call with
//! `"efficiency_reduction": 10`. The question asks for each call once, and the repeat's additions
//! come from nowhere, so the repeat is asked by nobody. On BFCL's ground truth (each correct plan
//! read twice: with every argument it gives, and with every argument it may leave out left out),
//! no plan has such a step (`bench/bfcl_unasked.py --check repeats`).

use serde_json::Value;
use toolplan_core::reference::REF_PREFIX;

use crate::options::plain;
use crate::self_check::gives_number;

/// Most steps of a plan [`repeats_with_additions`] compares with each other; the rest are not
/// checked.
pub const MAX_COMPARED_CALLS: usize = 256;

/// The calls of `calls` (`(step id, tool, arguments)`) that repeat another call of the same tool
/// with additions the question does not give: every argument of the other call is in this one
/// with the same value, and each argument this one adds is a number the question does not write
/// (nor as a percentage of which it is the fraction) or a text it does not contain (compared
/// without case, `_` and `-` read as spaces: "trial date" gives `trial_date`; a `$ref:` is never
/// made up). Additions of other kinds (`true`, a list) are not
/// judged, and a call with them is not found. Returns the ids of the calls found, in order, each
/// once. Only the first [`MAX_COMPARED_CALLS`] calls are compared.
pub fn repeats_with_additions<'c>(
    question: &str,
    calls: impl IntoIterator<Item = (&'c str, &'c str, &'c Value)>,
) -> Vec<String> {
    let calls: Vec<(&str, &str, &Value)> = calls.into_iter().take(MAX_COMPARED_CALLS).collect();
    let lowered = plain(question);
    let mut found: Vec<String> = Vec::new();
    for (i, (id, tool, arguments)) in calls.iter().enumerate() {
        let Some(arguments) = arguments.as_object() else {
            continue;
        };
        let repeats = calls.iter().enumerate().any(|(j, (_, other_tool, other))| {
            let Some(other) = other.as_object() else {
                return false;
            };
            j != i
                && other_tool == tool
                && other.len() < arguments.len()
                && other.iter().all(|(k, v)| arguments.get(k) == Some(v))
                && arguments
                    .iter()
                    .filter(|(k, _)| !other.contains_key(*k))
                    .all(|(_, added)| made_up(question, &lowered, added))
        });
        if repeats && !found.iter().any(|f| f == id) {
            found.push((*id).to_owned());
        }
    }
    found
}

/// Takes out of `plan` (an `execute_tool_plan` call's arguments) the steps that repeat another
/// step with additions the question does not give ([`repeats_with_additions`]) and stand alone:
/// they read no other step's result and nothing in the plan (a step, its answer) reads theirs.
/// One step always stays. Returns the ids taken out; `output_steps` loses them too.
pub fn drop_repeats_with_additions(question: &str, plan: &mut Value) -> Vec<String> {
    crate::relevance::drop_found_steps(plan, |calls| repeats_with_additions(question, calls))
}

/// Whether `value`, an argument a call adds, is one `question` does not give: a number it does not
/// write, or a text (not a reference) that `plain_question`, the question [`plain`], does not
/// contain.
fn made_up(question: &str, plain_question: &str, value: &Value) -> bool {
    match value {
        Value::Number(n) => n.as_f64().is_some_and(|n| !gives_number(question, n)),
        Value::String(s) => {
            let text = plain(s);
            let text = text.trim();
            !text.is_empty() && !s.contains(REF_PREFIX) && !plain_question.contains(text)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const QUESTION: &str = "How much CO2 is produced annually by a gas-fueled car that travels 12,000 miles per year, \
         with fuel efficiency of 25 MPG?";

    fn repeats(question: &str, calls: &[(&str, &str, Value)]) -> Vec<String> {
        repeats_with_additions(question, calls.iter().map(|(s, t, a)| (*s, *t, a)))
    }

    fn car(extra: Option<(&str, Value)>) -> Value {
        let mut arguments = json!({"distance": 12000, "fuel_type": "gas", "fuel_efficiency": 25});
        if let (Some((key, value)), Some(object)) = (extra, arguments.as_object_mut()) {
            object.insert(key.to_owned(), value);
        }
        arguments
    }

    #[test]
    fn a_repeat_with_a_made_up_addition_is_found() {
        let first = ("a", "emissions", car(None));
        let made_up = (
            "b",
            "emissions",
            car(Some(("efficiency_reduction", json!(10)))),
        );
        assert_eq!(repeats(QUESTION, &[first.clone(), made_up.clone()]), ["b"]);
        assert_eq!(repeats(QUESTION, &[made_up, first.clone()]), ["b"]);
        // Made-up text too.
        let text = ("c", "emissions", car(Some(("model", json!("Sedan")))));
        assert_eq!(repeats(QUESTION, &[first.clone(), text]), ["c"]);
    }

    #[test]
    fn a_repeat_the_question_asks_for_is_not() {
        let first = ("a", "emissions", car(None));
        // A value the question gives, as a number, a percentage or text.
        let given = |key, value: Value| ("b", "emissions", car(Some((key, value))));
        let q = format!("{QUESTION} And with a 4% yearly efficiency reduction, for a hybrid?");
        for added in [
            given("efficiency_reduction", json!(4)),
            given("efficiency_reduction", json!(0.04)),
            given("variant", json!("Hybrid")),
            given("details", json!("yearly_efficiency")),
            given("from", json!("$ref:a.total")),
        ] {
            assert!(
                repeats(&q, &[first.clone(), added.clone()]).is_empty(),
                "{added:?}"
            );
        }
        // Not judged: a flag, a list.
        let flag = ("b", "emissions", car(Some(("detailed", json!(true)))));
        assert!(repeats(QUESTION, &[first.clone(), flag]).is_empty());
        // Another tool, another value, or the same call again (not a repeat with additions).
        let other_tool = ("b", "fuel", car(Some(("efficiency_reduction", json!(10)))));
        assert!(repeats(QUESTION, &[first.clone(), other_tool]).is_empty());
        let mut changed = car(Some(("efficiency_reduction", json!(10))));
        changed["distance"] = json!(11000);
        assert!(repeats(QUESTION, &[first.clone(), ("b", "emissions", changed)]).is_empty());
        assert!(repeats(QUESTION, &[first.clone(), first.clone()]).is_empty());
    }

    #[test]
    fn a_lone_repeat_is_dropped_from_a_plan() {
        let step = |id: &str, arguments: Value| json!({"id": id, "tool": "emissions", "arguments": arguments});
        let repeat = step("b", car(Some(("efficiency_reduction", json!(10)))));
        let mut plan = json!({"steps": [step("a", car(None)), repeat.clone()],
                              "output_steps": ["a", "b"]});
        assert_eq!(drop_repeats_with_additions(QUESTION, &mut plan), ["b"]);
        assert_eq!(
            plan,
            json!({"steps": [step("a", car(None))], "output_steps": ["a"]})
        );
        // Read by another step: it stays.
        let reader = json!({"id": "c", "tool": "say", "arguments": {"text": "$ref:b"}});
        let mut plan = json!({"steps": [step("a", car(None)), repeat, reader]});
        assert!(drop_repeats_with_additions(QUESTION, &mut plan).is_empty());
    }

    #[test]
    fn only_so_many_calls_are_compared() {
        let calls: Vec<(String, Value)> = (0..MAX_COMPARED_CALLS * 4)
            .map(|i| (format!("s{i}"), json!({"n": i})))
            .collect();
        let mut all: Vec<(&str, &str, &Value)> =
            calls.iter().map(|(s, a)| (s.as_str(), "t", a)).collect();
        let repeat = json!({"n": 0, "x": 99});
        all.push(("late", "t", &repeat));
        assert!(repeats_with_additions("n", all).is_empty());
    }
}
