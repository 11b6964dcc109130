//! Choice answers: the reply to a question that asks for a judgement on the results (yes or no,
//! which of two), written in the plan before the results as a condition on them and a reply for
//! each outcome: `{"if": "$ref:b.temp < $ref:l.temp", "then": "Berlin", "else": "London"}`
//! ([`choice_answer_schema`](toolplan_planner::choice_answer_schema)). The plan then answers in
//! one model call where the model would otherwise read the results and reply in a second.
//!
//! The condition is read the way a model writes one ([`Condition::parse`]): `$ref:` values, numbers,
//! text in `'…'` or `"…"` (a bare word is text too: `$ref:w.condition == rain`), the comparisons
//! `== != < > <= >=` (`=` and `===` read as `==`), and `and`, `or`, `not` (or `&& || !`) with
//! brackets. Text is compared by its words, without regard to case or to the ending that makes a
//! word of the same stem ("rain", "rainy" and "raining" are equal: the model writes the condition
//! before it sees how the result words it). The references become variables, and the
//! engine resolves them as whole values like any step argument; [`Condition::evaluate`] then
//! hands the expression to `evalexpr` with those values. A condition that cannot be evaluated (a
//! missing value, a comparison of text with a number, a syntax error) is an error of the answer
//! step: the steps' results stand, and the model replies from them as it would without a choice.
//!
//! Limits: a condition is at most [`MAX_CONDITION_CHARS`] characters long and nests brackets at
//! most [`MAX_CONDITION_DEPTH`] deep (the local model's grammar holds it to
//! [`CONDITION_MAX_CHARS`](toolplan_planner::CONDITION_MAX_CHARS); a hosted model's is checked here).

use evalexpr::{ContextWithMutableVariables, DefaultNumericTypes, HashMapContext};
use serde_json::Value;
use toolplan_core::reference::{Piece, Reference, split_pieces};

/// The longest condition evaluated, in characters.
pub const MAX_CONDITION_CHARS: usize = 400;

/// The deepest nesting of brackets in a condition.
pub const MAX_CONDITION_DEPTH: usize = 16;

/// The fields of a choice answer.
pub(crate) const IF: &str = "if";
pub(crate) const THEN: &str = "then";
pub(crate) const ELSE: &str = "else";

/// Whether a plan's `answer` is a choice (an object with a condition).
pub(crate) fn is_choice(answer: &Value) -> bool {
    answer.get(IF).is_some()
}

/// A condition made ready to evaluate: the expression with each reference replaced by a variable
/// (`v0`, `v1`, …), and the references in that order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Condition {
    /// The expression in `evalexpr`'s syntax.
    pub(crate) expression: String,
    /// The references, the `i`-th one read as the variable `v{i}`.
    pub(crate) operands: Vec<Reference>,
}

impl Condition {
    /// Reads a condition as a model writes it (see the module's documentation).
    pub(crate) fn parse(text: &str) -> Result<Condition, String> {
        if text.chars().count() > MAX_CONDITION_CHARS {
            return Err(format!(
                "the condition is longer than {MAX_CONDITION_CHARS} characters"
            ));
        }
        let pieces = split_pieces(text).unwrap_or_else(|| vec![Piece::Text(text.to_owned())]);
        let mut expression = String::new();
        let mut operands = Vec::new();
        let mut depth = 0usize;
        for piece in pieces {
            match piece {
                Piece::Ref(reference) => {
                    expression.push_str(&format!(" v{} ", operands.len()));
                    operands.push(reference);
                }
                Piece::Text(text) => translate(&text, &mut expression, &mut depth)?,
            }
        }
        if operands.is_empty() {
            return Err("the condition reads no result ($ref:)".into());
        }
        Ok(Condition {
            expression,
            operands,
        })
    }

    /// Evaluates the condition with `values`, the values of its operands in order.
    #[cfg(test)]
    pub(crate) fn evaluate(&self, values: &[Value]) -> Result<bool, String> {
        let names: Vec<String> = self.operands.iter().map(ToString::to_string).collect();
        evaluate(&self.expression, values, &names)
    }
}

/// Evaluates `expression`, a [`Condition`]'s expression, with `values` as its variables `v0`,
/// `v1`, … (`names` says which reference each came from, for the error). The limits hold here too,
/// on the expression (at most four times [`MAX_CONDITION_CHARS`], brackets
/// [`MAX_CONDITION_DEPTH`] deep): a plan may name the answer tool itself.
pub(crate) fn evaluate(
    expression: &str,
    values: &[Value],
    names: &[String],
) -> Result<bool, String> {
    if expression.chars().count() > 4 * MAX_CONDITION_CHARS {
        return Err(format!(
            "the condition is longer than {MAX_CONDITION_CHARS} characters"
        ));
    }
    let mut depth = 0usize;
    for c in expression.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth > MAX_CONDITION_DEPTH {
            return Err(format!(
                "the condition nests brackets more than {MAX_CONDITION_DEPTH} deep"
            ));
        }
    }
    let mut context = HashMapContext::<DefaultNumericTypes>::new();
    for (i, value) in values.iter().enumerate() {
        let name = names.get(i).map_or("a value", String::as_str);
        let value = operand(value).map_err(|why| format!("{name} {why}"))?;
        context
            .set_value(format!("v{i}"), value)
            .map_err(|e| e.to_string())?;
    }
    evalexpr::eval_boolean_with_context(expression, &context).map_err(|e| e.to_string())
}

/// A result as a value of the condition: a number as a float, text that is a number as that
/// number, other text in lower case, a boolean as it is.
fn operand(value: &Value) -> Result<evalexpr::Value<DefaultNumericTypes>, &'static str> {
    Ok(match value {
        Value::Number(n) => evalexpr::Value::Float(n.as_f64().ok_or("is not a number")?),
        Value::Bool(b) => evalexpr::Value::Boolean(*b),
        Value::String(s) => match s.trim().parse::<f64>() {
            Ok(n) if n.is_finite() => evalexpr::Value::Float(n),
            _ => evalexpr::Value::String(comparable(s)),
        },
        Value::Null => return Err("has no value (no such field in that step's result)"),
        Value::Array(_) | Value::Object(_) => {
            return Err("is a list or an object, not one value: refer to one of its fields");
        }
    })
}

/// The words a condition may use for operators, and what they mean in `evalexpr`.
const WORDS: &[(&str, &str)] = &[
    ("and", "&&"),
    ("or", "||"),
    ("not", "!"),
    ("true", "true"),
    ("false", "false"),
];

/// Appends `text`, a part of a condition between references, to `out` in `evalexpr`'s syntax;
/// `depth` carries the brackets open so far.
fn translate(text: &str, out: &mut String, depth: &mut usize) -> Result<(), String> {
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\'' | '"' => {
                let end = chars[i + 1..]
                    .iter()
                    .position(|&d| d == c)
                    .map(|p| i + 1 + p)
                    .ok_or("the condition opens a quote it does not close")?;
                let literal: String = chars[i + 1..end].iter().collect();
                push_text(&literal, out);
                i = end + 1;
            }
            '(' => {
                *depth += 1;
                if *depth > MAX_CONDITION_DEPTH {
                    return Err(format!(
                        "the condition nests brackets more than {MAX_CONDITION_DEPTH} deep"
                    ));
                }
                out.push('(');
                i += 1;
            }
            ')' => {
                *depth = depth.saturating_sub(1);
                out.push(')');
                i += 1;
            }
            '=' | '!' | '<' | '>' => {
                let mut end = i;
                while end < chars.len() && matches!(chars[end], '=' | '!' | '<' | '>') {
                    end += 1;
                }
                let op: String = chars[i..end].iter().collect();
                out.push_str(match op.as_str() {
                    "=" | "==" | "===" => " == ",
                    "!=" | "!==" | "<>" => " != ",
                    "<" | ">" | "<=" | ">=" | "!" => &op,
                    _ => return Err(format!("the condition has an unknown operator {op:?}")),
                });
                i = end;
            }
            '&' | '|' => {
                let end = chars[i..]
                    .iter()
                    .position(|&d| d != c)
                    .map_or(chars.len(), |p| i + p);
                out.push_str(if c == '&' { " && " } else { " || " });
                i = end;
            }
            c if c.is_ascii_digit()
                || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) =>
            {
                let end = chars[i..]
                    .iter()
                    .position(|d| !(d.is_ascii_digit() || *d == '.'))
                    .map_or(chars.len(), |p| i + p);
                let number: String = chars[i..end].iter().collect();
                let number: f64 = number
                    .parse()
                    .map_err(|_| format!("the condition has a malformed number {number:?}"))?;
                // Every number is a float, as the results are: 15 and 15.0 compare equal.
                out.push_str(&format!(" {number:?} "));
                i = end;
            }
            c if c.is_alphabetic() || c == '_' => {
                let end = chars[i..]
                    .iter()
                    .position(|d| !(d.is_alphanumeric() || *d == '_'))
                    .map_or(chars.len(), |p| i + p);
                let word: String = chars[i..end].iter().collect();
                let lowered = word.to_lowercase();
                match WORDS.iter().find(|(w, _)| *w == lowered) {
                    Some((_, meaning)) => {
                        out.push(' ');
                        out.push_str(meaning);
                        out.push(' ');
                    }
                    // A bare word is text: `$ref:w.condition == rain`.
                    None => push_text(&word, out),
                }
                i = end;
            }
            c if c.is_whitespace() => {
                out.push(' ');
                i += 1;
            }
            other => return Err(format!("the condition has an unexpected {other:?}")),
        }
    }
    Ok(())
}

/// Appends `text` as a string literal of `evalexpr`, in lower case (text compares without regard
/// to case), or as a number when it is one ("15" and 15 compare equal, as results do).
fn push_text(text: &str, out: &mut String) {
    match text.trim().parse::<f64>() {
        Ok(n) if n.is_finite() => out.push_str(&format!(" {n:?} ")),
        _ => {
            out.push_str(" \"");
            for c in comparable(text).chars() {
                if matches!(c, '"' | '\\') {
                    out.push('\\');
                }
                out.push(c);
            }
            out.push_str("\" ");
        }
    }
}

/// Text as a condition compares it: its words in lower case, each without the ending that makes
/// a word of the same stem ("Rainy", "raining" and "rain" compare equal; so do "sunny" and
/// "sun"), one space between words. A condition is written before the results, so the model
/// guesses how a value is worded; it does not guess its inflection.
fn comparable(text: &str) -> String {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|word| stem(&word.to_lowercase()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A word without its ending (`-ing`, `-ed`, `-y`, `-s`), where enough of the word is left, and a
/// doubled last consonant made single ("sunny" → "sun", "running" → "run").
pub(crate) fn stem(word: &str) -> String {
    let chars: Vec<char> = word.chars().collect();
    let ends = |suffix: &str, min_left: usize| {
        let n = suffix.chars().count();
        word.ends_with(suffix) && chars.len() >= n + min_left
    };
    let cut = if ends("ing", 3) {
        3
    } else if ends("ed", 3) {
        2
    } else if ends("y", 3) || (ends("s", 3) && !word.ends_with("ss")) {
        1
    } else {
        0
    };
    let mut stem: Vec<char> = chars[..chars.len() - cut].to_vec();
    if cut > 0
        && let [.., a, b] = stem.as_slice()
        && a == b
        && a.is_alphabetic()
        && !"aeiou".contains(*a)
    {
        stem.pop();
    }
    stem.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn holds(condition: &str, values: &[Value]) -> Result<bool, String> {
        Condition::parse(condition)?.evaluate(values)
    }

    #[test]
    fn conditions_as_models_write_them() {
        let rain = || vec![json!("Rain")];
        let temps = || vec![json!(10), json!(12.5)];
        let cases: Vec<(&str, Vec<Value>, bool)> = vec![
            ("$ref:w.condition == 'rain'", rain(), true),
            ("$ref:w.condition == \"rain\"", rain(), true),
            ("$ref:w.condition = rain", rain(), true),
            ("$ref:w.condition === 'snow'", rain(), false),
            ("$ref:w.condition != 'snow'", rain(), true),
            ("$ref:b.temp < $ref:l.temp", temps(), true),
            ("$ref:b.temp >= $ref:l.temp", temps(), false),
            ("$ref:b.temp == 10", temps(), true),
            ("$ref:b.temp == '10'", temps(), true),
            ("$ref:b.temp > 9.5 and $ref:l.temp < 13", temps(), true),
            ("$ref:b.temp > 11 OR $ref:l.temp > 12", temps(), true),
            ("not ($ref:b.temp > 11) && $ref:l.temp > 12", temps(), true),
            (
                "$ref:t.condition == 'sunny' && $ref:s.condition == 'sunny'",
                vec![json!("sunny"), json!("Sunny ")],
                true,
            ),
            // Text compares by its words' stems: the model writes a condition before it sees how
            // the result words it.
            ("$ref:w.condition == 'rain'", vec![json!("rainy")], true),
            ("$ref:w.condition == 'raining'", vec![json!("Rainy")], true),
            ("$ref:w.condition == 'sun'", vec![json!("sunny")], true),
            ("$ref:w.condition == 'cloudy'", vec![json!("clouds")], true),
            (
                "$ref:w.condition == 'cloudy'",
                vec![json!("partly cloudy")],
                false,
            ),
            ("$ref:w.condition == 'snow'", vec![json!("snow")], true),
            (
                "$ref:w.condition == 'clear'",
                vec![json!("overcast")],
                false,
            ),
            ("$ref:u.team == 'sales'", vec![json!("Sales")], true),
            // Text that is a number compares as one.
            ("$ref:a > $ref:b", vec![json!("18"), json!(9)], true),
            ("$ref:a", vec![json!(true)], true),
        ];
        for (condition, values, expected) in cases {
            assert_eq!(holds(condition, &values), Ok(expected), "{condition}");
        }
    }

    #[test]
    fn references_become_variables() {
        let condition = Condition::parse("$ref:b.temp < $ref:l.temp").unwrap();
        assert_eq!(condition.operands.len(), 2);
        assert_eq!(condition.operands[0].to_string(), "$ref:b.temp");
        assert!(condition.expression.contains("v0") && condition.expression.contains("v1"));
        assert!(!condition.expression.contains("$ref"));
    }

    #[test]
    fn conditions_that_cannot_be_evaluated_say_why() {
        let no_ref = Condition::parse("1 < 2").unwrap_err();
        assert!(no_ref.contains("reads no result"), "{no_ref}");
        let missing = holds("$ref:w.temp > 3", &[Value::Null]).unwrap_err();
        assert!(missing.contains("$ref:w.temp has no value"), "{missing}");
        let object = holds("$ref:w > 3", &[json!({"temp": 4})]).unwrap_err();
        assert!(object.contains("refer to one of its fields"), "{object}");
        assert!(holds("$ref:w.condition == 'rain", &[json!("rain")]).is_err());
        assert!(holds("$ref:w.temp > ", &[json!(3)]).is_err());
        assert!(
            holds("$ref:w.temp + 1", &[json!(3)]).is_err(),
            "not a boolean"
        );
        assert!(holds("$ref:w.temp > 'warm'", &[json!(3)]).is_err());
        assert!(holds("$ref:w.temp ; 3", &[json!(3)]).is_err());
    }

    #[test]
    fn an_attacker_s_condition_is_refused_within_its_limits() {
        // Brackets nested deeper than the limit: refused before evalexpr parses them.
        let deep = format!("{}$ref:w.temp > 3{}", "(".repeat(17), ")".repeat(17));
        let refused = holds(&deep, &[json!(4)]).unwrap_err();
        assert!(refused.contains("16 deep"), "{refused}");
        let within = format!("{}$ref:w.temp > 3{}", "(".repeat(16), ")".repeat(16));
        assert_eq!(holds(&within, &[json!(4)]), Ok(true));
        // Longer than the limit.
        let long = format!("$ref:w.temp > 3{}", " and true".repeat(60));
        let refused = holds(&long, &[json!(4)]).unwrap_err();
        assert!(refused.contains("400 characters"), "{refused}");
        // Assignments and chains are not conditions.
        assert!(holds("$ref:w.temp = 3; true", &[json!(4)]).is_err());
    }
}
