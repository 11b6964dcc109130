//! `$ref:` references: how they are recognised in argument strings and how a path is looked up in a
//! step's output.
//!
//! Grammar: `$ref:` then a step id (`[A-Za-z0-9_-]+`), then any number of `.segment` where a segment is
//! also `[A-Za-z0-9_-]+`. A segment selects an object member by key, or an array element by index when
//! it is an integer (negative indexes count from the end: `-1` is the last element).
//!
//! A string that is exactly one reference is replaced by the referenced value with its JSON type; a
//! reference inside a longer string is interpolated as text. `$ref:` not followed by an id character is
//! literal text.

use std::fmt;

use serde_json::Value;

/// The marker that starts a reference.
pub const REF_PREFIX: &str = "$ref:";

/// One parsed reference: the step it names and the path into that step's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The id of the referenced step, as written.
    pub step: String,
    /// Index of the referenced step in the compiled plan; `usize::MAX` until the plan is validated.
    pub slot: usize,
    /// Path segments after the step id (`$ref:s.items.0.name` → `["items", "0", "name"]`).
    pub path: Vec<String>,
}

impl Reference {
    /// A reference to the whole output of step `step` (`$ref:step`), for dialects that build
    /// templates themselves rather than parse them from text.
    pub fn whole(step: &str) -> Self {
        Self::new(step, Vec::new())
    }

    fn new(step: &str, path: Vec<String>) -> Self {
        Self {
            step: step.to_owned(),
            slot: usize::MAX,
            path,
        }
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{REF_PREFIX}{}", self.step)?;
        for seg in &self.path {
            write!(f, ".{seg}")?;
        }
        Ok(())
    }
}

/// A piece of a string argument: literal text or a reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Literal text, kept as written.
    Text(String),
    /// A reference whose value is interpolated as text.
    Ref(Reference),
}

/// Whether `c` may appear in a step id or a path segment.
pub fn is_id_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

/// Whether `s` is a well-formed step id.
pub fn is_valid_id(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(is_id_char)
}

/// Reads one reference starting right after `$ref:` at byte offset `start` of `s`.
/// Returns the reference and the offset just past it, or `None` when no id follows.
fn read_reference(s: &str, start: usize) -> Option<(Reference, usize)> {
    let bytes = s.as_bytes();
    let id_end = scan_id(bytes, start);
    if id_end == start {
        return None;
    }
    let mut path = Vec::new();
    let mut pos = id_end;
    while pos < bytes.len() && bytes[pos] == b'.' {
        let seg_end = scan_id(bytes, pos + 1);
        if seg_end == pos + 1 {
            break;
        }
        path.push(s[pos + 1..seg_end].to_owned());
        pos = seg_end;
    }
    Some((Reference::new(&s[start..id_end], path), pos))
}

fn scan_id(bytes: &[u8], mut pos: usize) -> usize {
    while pos < bytes.len() && is_id_char(bytes[pos]) {
        pos += 1;
    }
    pos
}

/// Splits a string argument into literal text and references.
///
/// Returns `None` when the string holds no reference (the common case, so no allocation is made).
pub fn split_pieces(s: &str) -> Option<Vec<Piece>> {
    if !s.contains(REF_PREFIX) {
        return None;
    }
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut rest_start = 0;
    let mut search_from = 0;
    while let Some(found) = s[search_from..].find(REF_PREFIX) {
        let at = search_from + found;
        let after = at + REF_PREFIX.len();
        match read_reference(s, after) {
            Some((reference, end)) => {
                text.push_str(&s[rest_start..at]);
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                pieces.push(Piece::Ref(reference));
                rest_start = end;
                search_from = end;
            }
            None => search_from = after,
        }
    }
    if pieces.is_empty() {
        return None;
    }
    text.push_str(&s[rest_start..]);
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Some(pieces)
}

/// Why a path could not be followed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// The referenced output is plain text, so it has no fields.
    #[error(
        "'{reference}': the output of step '{step}' is text ({shape}), not JSON, so it has no field '{segment}'"
    )]
    TextHasNoFields {
        /// The reference as written.
        reference: String,
        /// The referenced step.
        step: String,
        /// What the text looks like ([`crate::text_shapes::describe`]).
        shape: String,
        /// The first path segment.
        segment: String,
    },
    /// The path reaches a text, number or boolean and goes on into it.
    #[error(
        "'{reference}': {} is {found}, so it has no field '{segment}'",
        where_in(step, at)
    )]
    ScalarHasNoFields {
        /// The reference as written.
        reference: String,
        /// The referenced step.
        step: String,
        /// The path up to the scalar (`city` in `$ref:u.city.temp`; empty for the whole output).
        at: String,
        /// The scalar, described (`the text "Cairo"`).
        found: String,
        /// The segment that cannot be followed.
        segment: String,
    },
}

/// Follows `reference.path` into `output`. A missing field or index gives `None` (inserted as `null`);
/// a path on a text output, or one that goes on into a text, number or boolean inside the output
/// (`$ref:u.city.temp` where `city` is `"Cairo"`), is an error naming the step.
pub fn follow<'v>(
    reference: &Reference,
    output: &'v Value,
) -> Result<Option<&'v Value>, PathError> {
    let Some(first) = reference.path.first() else {
        return Ok(Some(output));
    };
    if let Value::String(text) = output {
        return Err(PathError::TextHasNoFields {
            reference: reference.to_string(),
            step: reference.step.clone(),
            shape: crate::text_shapes::describe(text),
            segment: first.clone(),
        });
    }
    let mut current = output;
    for (depth, segment) in reference.path.iter().enumerate() {
        let Some(next) = child(current, segment) else {
            return Err(PathError::ScalarHasNoFields {
                reference: reference.to_string(),
                step: reference.step.clone(),
                at: reference.path[..depth].join("."),
                found: describe_scalar(current),
                segment: segment.clone(),
            });
        };
        match next {
            Some(v) => current = v,
            None => return Ok(None),
        }
    }
    Ok(Some(current))
}

/// Why `reference` found no value in `output` (where [`follow`] gives `None`, inserted as `null`),
/// for an error message: `$ref:u.temperature found no value: the output of step 'u' has no field
/// 'temperature' (its fields: name, city, team)`. `None` when the reference finds a value, or the
/// path cannot be followed at all (an error of its own).
pub fn describe_missing(reference: &Reference, output: &Value) -> Option<String> {
    let mut current = output;
    for (depth, segment) in reference.path.iter().enumerate() {
        if let Some(next) = child(current, segment)? {
            current = next;
            continue;
        }
        // Only a reference that found nothing pays for the message.
        let here = where_in(&reference.step, &reference.path[..depth].join("."));
        let why = match current {
            Value::Object(map) if map.is_empty() => format!("{here} is an empty object"),
            Value::Object(map) => {
                let mut fields: Vec<&str> = map.keys().map(String::as_str).take(12).collect();
                if map.len() > fields.len() {
                    fields.push("…");
                }
                format!(
                    "{here} has no field '{segment}' (its fields: {})",
                    fields.join(", ")
                )
            }
            Value::Array(items) => {
                format!("{here} has {} items, so no item '{segment}'", items.len())
            }
            _ => format!("{here} is null"),
        };
        return Some(format!("{reference} found no value: {why}"));
    }
    None
}

/// One step down a path: the field or item `segment` names (`None` when there is none, or the value
/// is null), or `None` outright for text, numbers and booleans, which have no fields.
fn child<'v>(value: &'v Value, segment: &str) -> Option<Option<&'v Value>> {
    match value {
        Value::Object(map) => Some(map.get(segment)),
        Value::Array(items) => Some(array_index(items.len(), segment).and_then(|i| items.get(i))),
        Value::Null => Some(None),
        _ => None,
    }
}

/// `'city' of step 'u'`, or `the output of step 'u'` for the whole output.
fn where_in(step: &str, at: &str) -> String {
    if at.is_empty() {
        format!("the output of step '{step}'")
    } else {
        format!("'{at}' of step '{step}'")
    }
}

/// `the text "Cairo"`, `the number 31`, `the boolean true` (long texts cut).
fn describe_scalar(value: &Value) -> String {
    match value {
        Value::String(text) => {
            let mut shown: String = text.chars().take(40).collect();
            if shown.len() < text.len() {
                shown.push('…');
            }
            format!("the text {shown:?}")
        }
        Value::Number(n) => format!("the number {n}"),
        Value::Bool(b) => format!("the boolean {b}"),
        other => other.to_string(),
    }
}

fn array_index(len: usize, segment: &str) -> Option<usize> {
    if let Some(back) = segment.strip_prefix('-') {
        let back: usize = back.parse().ok()?;
        len.checked_sub(back).filter(|_| back > 0)
    } else {
        segment.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn r(step: &str, path: &[&str]) -> Reference {
        Reference::new(step, path.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn no_reference_means_none() {
        assert_eq!(split_pieces("plain text"), None);
        assert_eq!(split_pieces("costs $5"), None);
        assert_eq!(split_pieces("$ref: nothing"), None);
        assert_eq!(split_pieces("$ref:"), None);
    }

    #[test]
    fn whole_reference() {
        assert_eq!(split_pieces("$ref:a"), Some(vec![Piece::Ref(r("a", &[]))]));
        assert_eq!(
            split_pieces("$ref:weather-tokyo.temp"),
            Some(vec![Piece::Ref(r("weather-tokyo", &["temp"]))])
        );
        assert_eq!(
            split_pieces("$ref:s.items.0.name"),
            Some(vec![Piece::Ref(r("s", &["items", "0", "name"]))])
        );
    }

    #[test]
    fn embedded_references() {
        assert_eq!(
            split_pieces("Weather: $ref:s1.temp degrees in $ref:s1.city."),
            Some(vec![
                Piece::Text("Weather: ".into()),
                Piece::Ref(r("s1", &["temp"])),
                Piece::Text(" degrees in ".into()),
                Piece::Ref(r("s1", &["city"])),
                Piece::Text(".".into()),
            ])
        );
        assert_eq!(
            split_pieces("$ref:a$ref:b"),
            Some(vec![Piece::Ref(r("a", &[])), Piece::Ref(r("b", &[]))])
        );
        assert_eq!(
            split_pieces("$ref: and $ref:x"),
            Some(vec![
                Piece::Text("$ref: and ".into()),
                Piece::Ref(r("x", &[]))
            ])
        );
    }

    #[test]
    fn display_round_trips() {
        assert_eq!(r("s", &["a", "0"]).to_string(), "$ref:s.a.0");
    }

    #[test]
    fn follow_paths() {
        let out = json!({"a": {"b": [10, 20, {"c": true}]}, "n": null});
        assert_eq!(follow(&r("s", &[]), &out).unwrap(), Some(&out));
        assert_eq!(
            follow(&r("s", &["a", "b", "1"]), &out).unwrap(),
            Some(&json!(20))
        );
        assert_eq!(
            follow(&r("s", &["a", "b", "-1", "c"]), &out).unwrap(),
            Some(&json!(true))
        );
        assert_eq!(follow(&r("s", &["a", "b", "-4"]), &out).unwrap(), None);
        assert_eq!(follow(&r("s", &["a", "b", "-0"]), &out).unwrap(), None);
        assert_eq!(follow(&r("s", &["a", "b", "9"]), &out).unwrap(), None);
        assert_eq!(follow(&r("s", &["missing"]), &out).unwrap(), None);
        assert_eq!(follow(&r("s", &["n", "x"]), &out).unwrap(), None);
        assert_eq!(follow(&r("s", &["a", "b", "x"]), &out).unwrap(), None);
    }

    #[test]
    fn a_path_into_a_scalar_field_names_where_it_stops() {
        let output = json!({"name": "Erin", "city": "Cairo", "n": 3, "ok": true, "none": null});
        let follow_path = |path: &[&str]| follow(&r("u", path), &output).map(|v| v.cloned());
        assert_eq!(
            follow_path(&["city", "temp"]).unwrap_err().to_string(),
            "'$ref:u.city.temp': 'city' of step 'u' is the text \"Cairo\", so it has no field 'temp'"
        );
        assert!(
            follow_path(&["n", "0"])
                .unwrap_err()
                .to_string()
                .contains("'n' of step 'u' is the number 3")
        );
        assert!(follow_path(&["ok", "x"]).is_err());
        // Into null or a missing field: null, as before.
        assert_eq!(follow_path(&["none", "x"]), Ok(None));
        assert_eq!(follow_path(&["temp", "x"]), Ok(None));
    }

    #[test]
    fn path_on_text_names_the_step() {
        let err = follow(&r("s1", &["temp"]), &json!("sunny")).unwrap_err();
        assert!(err.to_string().contains("step 's1'"), "{err}");
        assert!(err.to_string().contains("'temp'"), "{err}");
    }

    #[test]
    fn a_missing_value_is_explained_where_the_path_stops() {
        let output = json!({"city": "Oslo", "tags": ["a", "b"], "none": null, "empty": {}});
        let why = |step: &str, path: &[&str]| describe_missing(&r(step, path), &output);
        assert_eq!(
            why("u", &["temp"]).as_deref(),
            Some(
                "$ref:u.temp found no value: the output of step 'u' has no field 'temp' (its fields: city, tags, none, empty)"
            )
        );
        assert_eq!(
            why("u", &["tags", "5"]).as_deref(),
            Some("$ref:u.tags.5 found no value: 'tags' of step 'u' has 2 items, so no item '5'")
        );
        assert_eq!(
            why("u", &["none", "x"]).as_deref(),
            Some("$ref:u.none.x found no value: 'none' of step 'u' is null")
        );
        assert_eq!(
            why("u", &["empty", "x"]).as_deref(),
            Some("$ref:u.empty.x found no value: 'empty' of step 'u' is an empty object")
        );
        // Found values, whole outputs, and paths into scalars (an error of their own) need no note.
        assert_eq!(why("u", &["city"]), None);
        assert_eq!(why("u", &[]), None);
        assert_eq!(why("u", &["city", "x"]), None);
    }

    #[test]
    fn numeric_keys_on_objects() {
        let out = json!({"0": "zero"});
        assert_eq!(follow(&r("s", &["0"]), &out).unwrap(), Some(&json!("zero")));
    }
}
