//! Argument templates: a step's arguments with their `$ref:` references found once, at parse time,
//! so that running a step only substitutes values.
//!
//! Subtrees without references stay as literal JSON and are cloned as a whole when rendered.

use serde_json::{Map, Value};

use crate::reference::{self, PathError, Piece, Reference};
use crate::tool::value_as_text;

/// A JSON value whose strings may hold references to other steps' outputs.
#[derive(Debug, Clone, PartialEq)]
pub enum Template {
    /// JSON without references.
    Literal(Value),
    /// A string that is exactly one reference: replaced by the value with its JSON type.
    Ref(Reference),
    /// A string with references inside longer text: interpolated as text.
    Interpolated(Vec<Piece>),
    /// An array with at least one reference somewhere inside.
    Array(Vec<Template>),
    /// An object with at least one reference somewhere inside.
    Object(Vec<(String, Template)>),
}

impl Template {
    /// A hash of a call of `tool` with these arguments: equal calls hash equal (references by the
    /// step they name and their path). Walks the value with a stack of its own, not by recursion.
    pub(crate) fn call_hash(&self, tool: &str) -> u64 {
        use std::hash::{Hash, Hasher};
        enum Item<'a> {
            T(&'a Template),
            V(&'a Value),
        }
        let mut h = std::collections::hash_map::DefaultHasher::new();
        tool.hash(&mut h);
        let mut stack = vec![Item::T(self)];
        while let Some(item) = stack.pop() {
            match item {
                Item::T(Template::Literal(v)) | Item::V(v) => match v {
                    Value::Null => 0u8.hash(&mut h),
                    Value::Bool(b) => (1u8, b).hash(&mut h),
                    Value::Number(n) => (2u8, n.to_string()).hash(&mut h),
                    Value::String(s) => (3u8, s).hash(&mut h),
                    Value::Array(a) => {
                        (4u8, a.len()).hash(&mut h);
                        stack.extend(a.iter().rev().map(Item::V));
                    }
                    Value::Object(o) => {
                        (5u8, o.len()).hash(&mut h);
                        for (k, v) in o.iter().rev() {
                            k.hash(&mut h);
                            stack.push(Item::V(v));
                        }
                    }
                },
                Item::T(Template::Ref(r)) => (6u8, &r.step, &r.path).hash(&mut h),
                Item::T(Template::Interpolated(pieces)) => {
                    (7u8, pieces.len()).hash(&mut h);
                    for piece in pieces {
                        match piece {
                            Piece::Text(t) => (0u8, t).hash(&mut h),
                            Piece::Ref(r) => (1u8, &r.step, &r.path).hash(&mut h),
                        }
                    }
                }
                Item::T(Template::Array(items)) => {
                    (8u8, items.len()).hash(&mut h);
                    stack.extend(items.iter().rev().map(Item::T));
                }
                Item::T(Template::Object(fields)) => {
                    (9u8, fields.len()).hash(&mut h);
                    for (k, v) in fields.iter().rev() {
                        k.hash(&mut h);
                        stack.push(Item::T(v));
                    }
                }
            }
        }
        h.finish()
    }

    /// Compiles a JSON value, finding every reference in it.
    pub fn compile(value: Value) -> Template {
        match value {
            Value::String(s) => match reference::split_pieces(&s) {
                None => Template::Literal(Value::String(s)),
                Some(mut pieces) => {
                    if let [Piece::Ref(_)] = pieces.as_slice()
                        && let Some(Piece::Ref(r)) = pieces.pop()
                    {
                        Template::Ref(r)
                    } else {
                        Template::Interpolated(pieces)
                    }
                }
            },
            Value::Array(items) => {
                let parts: Vec<Template> = items.into_iter().map(Template::compile).collect();
                if parts.iter().all(Template::is_literal) {
                    Template::Literal(Value::Array(
                        parts.into_iter().map(Template::into_literal).collect(),
                    ))
                } else {
                    Template::Array(parts)
                }
            }
            Value::Object(map) => {
                let parts: Vec<(String, Template)> = map
                    .into_iter()
                    .map(|(k, v)| (k, Template::compile(v)))
                    .collect();
                if parts.iter().all(|(_, t)| t.is_literal()) {
                    Template::Literal(Value::Object(
                        parts
                            .into_iter()
                            .map(|(k, t)| (k, t.into_literal()))
                            .collect(),
                    ))
                } else {
                    Template::Object(parts)
                }
            }
            other => Template::Literal(other),
        }
    }

    /// Whether the template holds no reference.
    pub fn is_literal(&self) -> bool {
        matches!(self, Template::Literal(_))
    }

    /// The literal value, when the template holds no reference.
    pub fn as_literal(&self) -> Option<&Value> {
        match self {
            Template::Literal(v) => Some(v),
            _ => None,
        }
    }

    fn into_literal(self) -> Value {
        match self {
            Template::Literal(v) => v,
            // Only called after `is_literal` held for every part.
            _ => Value::Null,
        }
    }

    /// Calls `f` on every reference, in document order.
    pub fn for_each_ref(&self, f: &mut impl FnMut(&Reference)) {
        match self {
            Template::Literal(_) => {}
            Template::Ref(r) => f(r),
            Template::Interpolated(pieces) => {
                for p in pieces {
                    if let Piece::Ref(r) = p {
                        f(r);
                    }
                }
            }
            Template::Array(items) => items.iter().for_each(|t| t.for_each_ref(f)),
            Template::Object(fields) => fields.iter().for_each(|(_, t)| t.for_each_ref(f)),
        }
    }

    /// Calls `f` on every reference, allowing it to be changed (used to fill in step slots).
    pub fn for_each_ref_mut(&mut self, f: &mut impl FnMut(&mut Reference)) {
        match self {
            Template::Literal(_) => {}
            Template::Ref(r) => f(r),
            Template::Interpolated(pieces) => {
                for p in pieces {
                    if let Piece::Ref(r) = p {
                        f(r);
                    }
                }
            }
            Template::Array(items) => items.iter_mut().for_each(|t| t.for_each_ref_mut(f)),
            Template::Object(fields) => fields.iter_mut().for_each(|(_, t)| t.for_each_ref_mut(f)),
        }
    }

    /// Why each reference that renders as `null` for lack of a value found none
    /// ([`reference::describe_missing`]), joined with `; `: `None` when every reference found its
    /// value. For the error of a step that then fails, so that the model that wrote
    /// `$ref:u.temperature` learns which fields `u` has.
    pub fn missing_note<'o>(&self, output: &impl Fn(usize) -> Option<&'o Value>) -> Option<String> {
        let mut notes: Vec<String> = Vec::new();
        self.for_each_ref(&mut |r| {
            if let Some(note) = output(r.slot).and_then(|v| reference::describe_missing(r, v))
                && !notes.contains(&note)
            {
                notes.push(note);
            }
        });
        (!notes.is_empty()).then(|| notes.join("; "))
    }

    /// Substitutes every reference, within the default [`Budget`]. `output(slot)` gives the output of
    /// the step at that slot; it is only asked for slots that this template references.
    pub fn render<'o>(
        &self,
        output: &impl Fn(usize) -> Option<&'o Value>,
    ) -> Result<Value, RenderError> {
        self.render_within(output, &Budget::default())
            .map(|r| r.value)
    }

    /// Substitutes every reference, and says whether some reference found no value (and was
    /// inserted as `null`): then [`missing_note`](Self::missing_note) says why. The result stays
    /// within `budget`: the bytes that references insert (counted before anything is copied, so a
    /// value referenced thousands of times fails at once instead of filling memory) and how deeply
    /// an inserted value ends up nested.
    pub fn render_within<'o>(
        &self,
        output: &impl Fn(usize) -> Option<&'o Value>,
        budget: &Budget,
    ) -> Result<Rendered, RenderError> {
        let mut state = RenderState {
            budget,
            inserted: 0,
            missing: false,
        };
        let value = self.render_into(output, &mut state, 0)?;
        Ok(Rendered {
            value,
            missing: state.missing,
        })
    }

    fn render_into<'o>(
        &self,
        output: &impl Fn(usize) -> Option<&'o Value>,
        state: &mut RenderState<'_>,
        level: usize,
    ) -> Result<Value, RenderError> {
        Ok(match self {
            Template::Literal(v) => v.clone(),
            Template::Ref(r) => match lookup(r, output)? {
                Some(v) => {
                    state.admit(r, v, level)?;
                    v.clone()
                }
                None => {
                    state.missing = true;
                    Value::Null
                }
            },
            Template::Interpolated(pieces) => {
                let mut text = String::new();
                for piece in pieces {
                    match piece {
                        Piece::Text(t) => text.push_str(t),
                        Piece::Ref(r) => match lookup(r, output)? {
                            Some(v) => {
                                // Text is flat: only its bytes count.
                                state.admit(r, v, 0)?;
                                text.push_str(&value_as_text(v));
                            }
                            None => {
                                state.missing = true;
                                text.push_str("null");
                            }
                        },
                    }
                }
                Value::String(text)
            }
            Template::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|t| t.render_into(output, state, level + 1))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            Template::Object(fields) => {
                let mut map = Map::with_capacity(fields.len());
                for (k, t) in fields {
                    map.insert(k.clone(), t.render_into(output, state, level + 1)?);
                }
                Value::Object(map)
            }
        })
    }
}

/// Bounds on what references may insert into one step's arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Most bytes (of compact JSON text) that the references of one step's arguments may insert,
    /// all references together.
    pub max_bytes: usize,
    /// Deepest nesting of arrays and objects that an inserted value may reach, counted from the
    /// root of the arguments.
    pub max_depth: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            max_bytes: crate::limits::DEFAULT_MAX_RESOLVED_ARGUMENT_BYTES,
            max_depth: crate::limits::DEFAULT_MAX_VALUE_DEPTH,
        }
    }
}

/// Rendered arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    /// The arguments with every reference substituted.
    pub value: Value,
    /// Whether some reference found no value and was inserted as `null`.
    pub missing: bool,
}

/// Why a step's arguments could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RenderError {
    /// A reference's path cannot be followed.
    #[error(transparent)]
    Path(#[from] PathError),
    /// The references insert more bytes than the budget allows.
    #[error(
        "the arguments with their references resolved exceed the limit of {limit} bytes (max_resolved_argument_bytes) at '{reference}'"
    )]
    TooLarge {
        /// The reference at which the budget ran out.
        reference: String,
        /// The budget, in bytes.
        limit: usize,
    },
    /// An inserted value would be nested deeper than the budget allows.
    #[error(
        "the arguments with their references resolved nest deeper than the limit of {limit} levels (max_value_depth) at '{reference}'"
    )]
    TooDeep {
        /// The reference whose value is too deep where it lands.
        reference: String,
        /// The budget, in levels of arrays and objects.
        limit: usize,
    },
}

struct RenderState<'b> {
    budget: &'b Budget,
    inserted: usize,
    missing: bool,
}

impl RenderState<'_> {
    /// Counts a value that `r` is about to insert at `level`, before it is copied.
    fn admit(&mut self, r: &Reference, v: &Value, level: usize) -> Result<(), RenderError> {
        let room = self.budget.max_depth.saturating_sub(level);
        if level > self.budget.max_depth || crate::limits::value_depth(v, room).is_none() {
            return Err(RenderError::TooDeep {
                reference: r.to_string(),
                limit: self.budget.max_depth,
            });
        }
        let left = self.budget.max_bytes.saturating_sub(self.inserted);
        match crate::limits::json_size_within(v, left) {
            Some(n) => {
                self.inserted += n;
                Ok(())
            }
            None => Err(RenderError::TooLarge {
                reference: r.to_string(),
                limit: self.budget.max_bytes,
            }),
        }
    }
}

fn lookup<'o>(
    r: &Reference,
    output: &impl Fn(usize) -> Option<&'o Value>,
) -> Result<Option<&'o Value>, PathError> {
    match output(r.slot) {
        Some(v) => reference::follow(r, v),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn compiled(v: Value) -> Template {
        let mut t = Template::compile(v);
        // Slot = position of the id in this fixed list.
        let ids = ["a", "b", "c", "s1", "user"];
        t.for_each_ref_mut(&mut |r| r.slot = ids.iter().position(|i| *i == r.step).unwrap());
        t
    }

    fn render_with(t: &Template, outputs: &[Value]) -> Result<Value, RenderError> {
        t.render(&|slot| outputs.get(slot))
    }

    fn outputs() -> Vec<Value> {
        vec![
            json!({"temp": 18, "city": "Tokyo", "ok": true}), // a
            json!("plain text output"),                       // b
            json!([1, {"x": "y"}]),                           // c
            json!(""),                                        // s1: empty output
            json!({"address": {"city": "Oslo"}, "tags": ["p", "q"]}), // user
        ]
    }

    #[test]
    fn literal_stays_literal() {
        let t = Template::compile(json!({"x": [1, "two", {"y": null}]}));
        assert!(t.is_literal());
        assert_eq!(
            render_with(&t, &[]).unwrap(),
            json!({"x": [1, "two", {"y": null}]})
        );
    }

    #[test]
    fn typed_insertion() {
        let t = compiled(json!({
            "obj": "$ref:a", "text": "$ref:b", "arr": "$ref:c", "num": "$ref:a.temp",
            "bool": "$ref:a.ok", "missing": "$ref:a.nope", "nested": "$ref:user.address.city",
            "idx": "$ref:c.1.x", "empty": "$ref:s1"
        }));
        let v = render_with(&t, &outputs()).unwrap();
        assert_eq!(
            v,
            json!({
                "obj": {"temp": 18, "city": "Tokyo", "ok": true}, "text": "plain text output",
                "arr": [1, {"x": "y"}], "num": 18, "bool": true, "missing": null,
                "nested": "Oslo", "idx": "y", "empty": ""
            })
        );
    }

    #[test]
    fn several_references_in_one_argument() {
        let t = compiled(json!({"data": ["$ref:a.city", "$ref:user.tags.1", "$ref:c.0"]}));
        assert_eq!(
            render_with(&t, &outputs()).unwrap(),
            json!({"data": ["Tokyo", "q", 1]})
        );
    }

    #[test]
    fn interpolation_as_text() {
        let t = compiled(
            json!({"msg": "It is $ref:a.temp°C in $ref:a.city; raw=$ref:c, none=$ref:a.zz"}),
        );
        assert_eq!(
            render_with(&t, &outputs()).unwrap(),
            json!({"msg": "It is 18°C in Tokyo; raw=[1,{\"x\":\"y\"}], none=null"})
        );
    }

    #[test]
    fn special_characters_survive() {
        let outs = vec![json!("line1\nline2\t\"quoted\"\\")];
        let t = compiled(json!({"v": "$ref:a", "w": "<$ref:a>"}));
        let v = render_with(&t, &outs).unwrap();
        assert_eq!(v["v"], json!("line1\nline2\t\"quoted\"\\"));
        assert_eq!(v["w"], json!("<line1\nline2\t\"quoted\"\\>"));
        // And it serialises to valid JSON that parses back to the same value.
        let text = serde_json::to_string(&v).unwrap();
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), v);
    }

    #[test]
    fn path_on_text_is_an_error() {
        let t = compiled(json!({"v": "$ref:b.field"}));
        let err = render_with(&t, &outputs()).unwrap_err();
        assert!(err.to_string().contains("step 'b'"));
        let t = compiled(json!({"v": "see $ref:b.field"}));
        assert!(render_with(&t, &outputs()).is_err());
    }

    #[test]
    fn refs_are_listed_in_order() {
        let t = Template::compile(json!({"x": "$ref:b", "y": ["$ref:a.q", "t $ref:c"]}));
        let mut seen = Vec::new();
        t.for_each_ref(&mut |r| seen.push(r.to_string()));
        assert_eq!(seen, ["$ref:b", "$ref:a.q", "$ref:c"]);
    }
}
