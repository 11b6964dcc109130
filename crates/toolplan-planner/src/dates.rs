//! A first plan checked for dates its question never gives: [`dates_not_given`].
//!
//! A small model offered a search tool and an action tool ("find a house", "book a house") often
//! plans both when asked for one, and fills the action's dates itself ("want a house I can stay
//! in": a booking from 04/23/2023 to 04/27/2023). A date in a call is nearly always one the
//! question gives in some form ("on the 15th of May", "2023.10.2", "tomorrow"); on BFCL's ground
//! truth, no call with a date argument answers a question that names no date (0 of 251). So a call
//! that writes a date when the question names none has made it up: the call is one the question
//! does not ask for, or its date is the user's to give.

use serde_json::Value;

/// Deepest nesting of arguments [`dates_not_given`] looks into.
const MAX_DATE_DEPTH: usize = 16;

/// Most string arguments [`dates_not_given`] looks at; the rest are not checked.
pub const MAX_CHECKED_TEXTS: usize = 1024;

/// A date a call writes that its question does not give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MadeUpDate {
    /// The id of the step (for a direct call, the tool's name).
    pub step: String,
    /// The tool the step calls.
    pub tool: String,
    /// The argument that holds it, with the objects it is inside first.
    pub parameter: Vec<String>,
    /// The date, as the call writes it.
    pub value: String,
}

/// The dates `calls` (`(step id, tool, arguments)`) write when `question` names no date at all, in
/// the order of the calls; none when the question names one. A date is a string argument (not a
/// reference) that holds a calendar date written with digits (`2023-04-23`, `04/23/2023`,
/// `2023.4.23`); the question names a date when it has a month or weekday name, a word such as
/// "today", "tomorrow", "week" or "date", an ordinal day ("the 15th"), or a date written with
/// digits.
pub fn dates_not_given<'c>(
    question: &str,
    calls: impl IntoIterator<Item = (&'c str, &'c str, &'c Value)>,
) -> Vec<MadeUpDate> {
    if names_a_date(question) {
        return Vec::new();
    }
    let mut found = Vec::new();
    let mut budget = MAX_CHECKED_TEXTS;
    for (step, tool, arguments) in calls {
        let mut path = Vec::new();
        collect_dates(arguments, &mut path, 0, &mut budget, &mut |path, value| {
            found.push(MadeUpDate {
                step: step.to_owned(),
                tool: tool.to_owned(),
                parameter: path.to_vec(),
                value: value.to_owned(),
            });
        });
    }
    found
}

/// Calls `found` with each date text in `value` and where it is.
fn collect_dates(
    value: &Value,
    path: &mut Vec<String>,
    depth: usize,
    budget: &mut usize,
    found: &mut dyn FnMut(&[String], &str),
) {
    if depth > MAX_DATE_DEPTH || *budget == 0 {
        return;
    }
    match value {
        Value::String(text) => {
            *budget -= 1;
            if !text.contains(toolplan_core::reference::REF_PREFIX) && has_digit_date(text) {
                found(path, text);
            }
        }
        Value::Array(items) => items
            .iter()
            .for_each(|v| collect_dates(v, path, depth + 1, budget, found)),
        Value::Object(map) => {
            for (name, v) in map {
                path.push(name.clone());
                collect_dates(v, path, depth + 1, budget, found);
                path.pop();
            }
        }
        _ => {}
    }
}

/// Whether `text` holds a date written with digits: year-month-day with `-`, `.` or `/` between
/// (`2023-04-23`, `2023.4.23`), or month/day/year or day/month/year with `/` (`04/23/2023`,
/// `19/03/2024`, `4/23/23`).
fn has_digit_date(text: &str) -> bool {
    let groups = digit_groups(text);
    groups.windows(3).any(|w| {
        let [(a, la, sep1), (b, lb, sep2), (c, lc, _)] = [w[0], w[1], w[2]];
        let (Some(sep1), Some(sep2)) = (sep1, sep2) else {
            return false;
        };
        let year_first = la == 4
            && sep1 == sep2
            && matches!(sep1, '-' | '.' | '/')
            && (1..=2).contains(&lb)
            && (1..=2).contains(&lc)
            && (1..=12).contains(&b)
            && (1..=31).contains(&c);
        let year_last = sep1 == '/'
            && sep2 == '/'
            && (1..=2).contains(&la)
            && (1..=2).contains(&lb)
            && (lc == 2 || lc == 4)
            && (1..=31).contains(&a)
            && (1..=31).contains(&b)
            && (a <= 12 || b <= 12);
        year_first || year_last
    })
}

/// The runs of digits of `text` as `(value, digits, the one character that joins it to the next
/// run)`: in "2023-04-23 x", `(2023, 4, Some('-'))`, `(4, 2, Some('-'))`, `(23, 2, None)`.
fn digit_groups(text: &str) -> Vec<(u32, usize, Option<char>)> {
    let chars: Vec<char> = text.chars().collect();
    let mut groups = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && chars[i].is_ascii_digit() {
            i += 1;
        }
        let digits: String = chars[start..i].iter().collect();
        let value = digits.parse::<u32>().unwrap_or(u32::MAX);
        let joins = match (chars.get(i), chars.get(i + 1)) {
            (Some(c), Some(next)) if !c.is_alphanumeric() && next.is_ascii_digit() => Some(*c),
            _ => None,
        };
        groups.push((value, digits.len(), joins));
    }
    groups
}

/// Words that name a day or a span of days.
const DATE_WORDS: &[&str] = &[
    "today",
    "tomorrow",
    "tonight",
    "yesterday",
    "weekend",
    "week",
    "weeks",
    "month",
    "months",
    "year",
    "years",
    "day",
    "days",
    "date",
    "dates",
    "daily",
    "weekly",
    "monthly",
    "annual",
    "annually",
    "now",
];

/// Month names and their short forms ("sept" too).
const MONTHS: &[&str] = &[
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
];

/// Whether `question` names a date in any form (see [`dates_not_given`]).
fn names_a_date(question: &str) -> bool {
    if has_digit_date(question) {
        return true;
    }
    let lowered = question.to_lowercase();
    // "2023.10.1", "2023 .10.01": a year joined to a month;
    let groups = digit_groups(&lowered.replace(' ', ""));
    // "10/1": a month and a day.
    let month_day = |w: &[(u32, usize, Option<char>)]| {
        w[0].2 == Some('/') && w[0].1 <= 2 && w[1].1 <= 2 && (1..=12).contains(&w[0].0)
    };
    if groups.windows(2).any(|w| {
        (w[0].1 == 4 && w[0].2.is_some_and(|c| matches!(c, '-' | '.' | '/'))) || month_day(w)
    }) {
        return true;
    }
    lowered
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .any(|word| {
            DATE_WORDS.contains(&word)
                || MONTHS
                    .iter()
                    .any(|m| word.starts_with(m) && (word.len() == m.len() || month_name(word)))
                || word.ends_with("day") && word.len() > 5
                || ordinal_day(word)
        })
}

/// Whether `word` is a month's full name.
fn month_name(word: &str) -> bool {
    [
        "january",
        "february",
        "march",
        "april",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ]
    .contains(&word)
}

/// "1st", "15th", "22nd", "3rd": an ordinal of at most two digits.
fn ordinal_day(word: &str) -> bool {
    let digits = word.chars().take_while(char::is_ascii_digit).count();
    (1..=2).contains(&digits) && matches!(&word[digits..], "st" | "nd" | "rd" | "th")
}

/// Removes from `plan` (an `execute_tool_plan` call's arguments) the steps that write a date
/// `question` never gives ([`dates_not_given`]) and stand alone: they read no other step's result
/// and nothing in the plan (a step, its answer) reads theirs. One step always stays. Returns the
/// ids removed; `output_steps` loses them too. For a plan that was sent back for its made-up
/// dates and came back with them: the 1.5B model, told its booking's dates were not the
/// question's, sent the search and the booking again, and the search was all that was asked.
pub fn drop_made_up_steps(question: &str, plan: &mut Value) -> Vec<String> {
    crate::relevance::drop_found_steps(plan, |calls| {
        let made_up = dates_not_given(question, calls);
        made_up.into_iter().map(|d| d.step).collect()
    })
}

/// What the model reads when its first plan was sent back because a step writes a date the
/// question never gives ([`dates_not_given`]).
pub fn plan_with_made_up_dates(made_up: &[MadeUpDate]) -> String {
    format!(
        "Error: the plan was not run. The question gives no date, but {list}: a step that needs a \
         date the question does not give is a step it does not ask for. Send the whole plan \
         again, with only the steps the question asks for and no made-up values. Call \
         execute_tool_plan again.",
        list = made_up_list(made_up, false)
    )
}

/// What the model reads when its first tool calls (no plan among them) were sent back because a
/// call writes a date the question never gives ([`dates_not_given`]).
pub fn calls_with_made_up_dates(made_up: &[MadeUpDate]) -> String {
    format!(
        "Error: the calls were not run. The question gives no date, but {list}: a call that needs \
         a date the question does not give is a call it does not ask for. Make the calls again, \
         only those the question asks for, with no made-up values.",
        list = made_up_list(made_up, true)
    )
}

/// `step b (book) sets "check_in" to "04/23/2023"`, one per date, joined.
fn made_up_list(made_up: &[MadeUpDate], calls: bool) -> String {
    let items: Vec<String> = made_up
        .iter()
        .map(|d| {
            let who = if calls {
                format!("the {} call", d.tool)
            } else {
                format!("step {} ({})", d.step, d.tool)
            };
            format!(
                "{who} sets \"{}\" to \"{}\"",
                d.parameter.join("."),
                d.value
            )
        })
        .collect();
    crate::self_check::listed(&items)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(question: &str, arguments: Value) -> Vec<MadeUpDate> {
        dates_not_given(question, [("b", "book", &arguments)])
    }

    #[test]
    fn a_date_the_question_never_gives_is_found() {
        let found = check(
            "I am going to Los Angeles and want a house I can stay in.",
            json!({"where_to": "Los Angeles, CA", "stay": {"check_in": "04/23/2023"}}),
        );
        assert_eq!(
            found,
            vec![MadeUpDate {
                step: "b".into(),
                tool: "book".into(),
                parameter: vec!["stay".into(), "check_in".into()],
                value: "04/23/2023".into(),
            }]
        );
        assert_eq!(
            plan_with_made_up_dates(&found),
            "Error: the plan was not run. The question gives no date, but step b (book) sets \
             \"stay.check_in\" to \"04/23/2023\": a step that needs a date the question does not \
             give is a step it does not ask for. Send the whole plan again, with only the steps \
             the question asks for and no made-up values. Call execute_tool_plan again."
        );
        for date in [
            "2023-04-15",
            "2023.4.15",
            "4/15/23",
            "on 2023/04/15 at noon",
        ] {
            assert_eq!(
                check("Rent a home in Berkeley.", json!({"d": date})).len(),
                1,
                "{date}"
            );
        }
    }

    #[test]
    fn a_question_that_names_a_date_in_any_form_passes() {
        let date = json!({"d": "2023-10-02"});
        for question in [
            "Find a concert happening 2023.10.2?",
            "a housekeeper 20/3/2024, time 9:00",
            "the weather in Petaluma for 2023 .10.01",
            "depart on the 15th of May",
            "book it for tomorrow",
            "Is there a show on Saturday?",
            "from 10/1 to 10/7",
            "in March",
            "what's the date of the next game",
        ] {
            assert!(check(question, date.clone()).is_empty(), "{question}");
        }
    }

    #[test]
    fn numbers_references_and_other_texts_are_not_dates() {
        let question = "Rent a home with 3 bedrooms and 2.5 baths for 1,200 dollars.";
        for value in [
            json!({"beds": 3, "price": "1,200", "version": "1.2.3", "ratio": "3/4"}),
            json!({"d": "$ref:s.date"}),
            json!({"phone": "555-123-4567", "ip": "10.0.0.1", "score": "13/40/2023"}),
        ] {
            assert!(check(question, value.clone()).is_empty(), "{value}");
        }
        // Words that start like months are not months.
        assert!(!names_a_date("Mark the marble, decide"));
    }

    #[test]
    fn a_step_that_still_makes_up_a_date_is_dropped_when_it_stands_alone() {
        let question = "I want a house in Los Angeles I can stay in.";
        let mut plan = json!({"steps": [
            {"id": "s", "tool": "search", "arguments": {"where": "Los Angeles"}},
            {"id": "b", "tool": "book", "arguments": {"where": "Los Angeles", "in": "04/23/2023"}}],
            "output_steps": ["s", "b"]});
        assert_eq!(drop_made_up_steps(question, &mut plan), ["b"]);
        assert_eq!(
            plan,
            json!({"steps": [{"id": "s", "tool": "search", "arguments": {"where": "Los Angeles"}}],
                "output_steps": ["s"]})
        );
        // A step that reads another's result, or is read, stays; so does the last step.
        for mut plan in [
            json!({"steps": [{"id": "s", "tool": "search", "arguments": {}},
                {"id": "b", "tool": "book", "arguments": {"house": "$ref:s.id", "in": "04/23/2023"}}]}),
            json!({"steps": [{"id": "b", "tool": "book", "arguments": {"in": "04/23/2023"}},
                {"id": "t", "tool": "tell", "arguments": {"text": "$ref:b.code"}}]}),
            json!({"steps": [{"id": "b", "tool": "book", "arguments": {"in": "04/23/2023"}}]}),
        ] {
            let before = plan.clone();
            assert!(
                drop_made_up_steps(question, &mut plan).is_empty(),
                "{before}"
            );
            assert_eq!(plan, before);
        }
        // Two made-up steps alone: one stays.
        let mut plan = json!({"steps": [
            {"id": "a", "tool": "book", "arguments": {"in": "2023-04-23"}},
            {"id": "b", "tool": "book", "arguments": {"in": "2023-04-24"}}]});
        assert_eq!(drop_made_up_steps(question, &mut plan), ["a"]);
        assert!(drop_made_up_steps(question, &mut json!("not a plan")).is_empty());
    }

    #[test]
    fn a_hostile_plan_is_looked_at_within_the_limits() {
        let mut deep = json!("2023-04-15");
        for _ in 0..500 {
            deep = json!({"a": deep});
        }
        assert!(check("no day named", deep).is_empty());
        let many: Vec<Value> = (0..MAX_CHECKED_TEXTS + 5)
            .map(|i| {
                json!(if i < MAX_CHECKED_TEXTS {
                    "x"
                } else {
                    "2023-04-15"
                })
            })
            .collect();
        assert!(check("nothing", json!({"list": many})).is_empty());
    }
}
