//! Rules on a reply's values that a grammar cannot state, enforced while the local model writes:
//! values that must differ within one call ([`ToolDefinition::unique_values`], a plan's step ids),
//! and references that must name a step written before them
//! ([`ToolDefinition::step_references`]: a `$ref:` in a step's arguments names an earlier step, an
//! `output_steps` entry names a step of the plan).
//!
//! A grammar is fixed before the reply starts, so it cannot know which ids the reply will write.
//! The sampler asks a [`ValueRules`] before it takes a token: the tracker follows the reply's JSON
//! byte by byte (the path to where it is, the call's tool name, the step ids written, the string
//! being written) and turns down a token that would
//!
//! * close a string equal to one already written at a unique place of the same call (the model then
//!   writes `w2` after `w`, instead of a plan that fails validation for a duplicate id);
//! * spell, inside a step's arguments, a reference to a step that is not among the steps before it
//!   (the plan that refers to itself, or to a later step, is never written; in a first step the model
//!   writes the value instead of a reference), or start a string where only a reference could go and
//!   no step can be referred to;
//! * name in `output_steps` a step the plan does not have, or in the plan's text (its answer, or a
//!   string field of an answer that is an object: a choice's condition and replies) a step it does
//!   not have, or a field its tool's output schema does not have;
//! * close a plan's steps while a number it must use ([`StepReferences::required_numbers`]: the
//!   question's) is written in no step's arguments, or a tool its thought names
//!   ([`StepReferences::thought_tools`]) is called by no step, or a word they must write
//!   ([`StepReferences::required_words`]: the options the question names) is in no step's
//!   arguments, once: the model writes one more step, and the steps may close after it whatever it
//!   wrote;
//! * continue an array, anywhere in the reply, after the same string has been written as
//!   [`MAX_REPEATED_STRINGS`] items in a row, or the same number or literal as
//!   [`MAX_REPEATED_SCALARS`] (a small model that falls into a loop writes one item until its
//!   tokens run out, and the reply is lost): the array closes there.
//!
//! The reply's shape is the one of [`reply`](super::reply): `{"tool_calls": [{"name": …,
//! "arguments": {…}}, …]}`, the name before the arguments, a step's id and tool before its
//! arguments.

use std::cell::Cell;
use std::collections::HashSet;

use toolplan_core::words::word_at;

use crate::message::{StepReferences, ToolDefinition};

/// One segment of a path: an object key, or an array index.
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
    /// In an array: the index of the item being written, and the items written in a row that are
    /// the same.
    Array { index: usize, items: Items },
}

/// Most times one string is written as items of an array in a row: the array closes after them.
/// No value in BFCL's ground truth (every category) holds one string more than twice in a row.
pub const MAX_REPEATED_STRINGS: usize = 4;

/// Most times one number (or `true`, `false`, `null`) is written as items of an array in a row:
/// the array closes after them. Lists of one quantity for each of many things repeat a number
/// legitimately, so the limit is higher than for strings.
pub const MAX_REPEATED_SCALARS: usize = 32;

/// Longest item compared with the one before it ([`Items`]); a longer one starts a new run.
const MAX_COMPARED_ITEM: usize = 256;

/// The items of one array as far as a loop in them goes: the item being written (a string or
/// scalar, not an object or array), the one before it, and how many in a row were that one.
#[derive(Debug, Clone, Default)]
struct Items {
    /// The item being written: a string's bytes after a `"`, a scalar's bytes.
    current: Vec<u8>,
    /// Whether the item being written is one that is not compared: an object, an array, or
    /// longer than [`MAX_COMPARED_ITEM`].
    uncompared: bool,
    /// The item before it, as `current` held it.
    last: Vec<u8>,
    /// How many items in a row were `last` (0 before the first).
    run: usize,
}

impl Items {
    /// Adds a byte of the item being written.
    fn push(&mut self, b: u8) {
        if self.current.len() >= MAX_COMPARED_ITEM {
            self.uncompared = true;
        } else {
            self.current.push(b);
        }
    }

    /// The item being written is done (a `,` or `]` follows): returns whether it ended a run that
    /// has reached its limit.
    fn done(&mut self) -> bool {
        let item = std::mem::take(&mut self.current);
        let compared = !std::mem::take(&mut self.uncompared) && !item.is_empty();
        if !compared {
            self.last.clear();
            self.run = 0;
            return false;
        }
        if item == self.last {
            self.run += 1;
        } else {
            self.run = 1;
            self.last = item;
        }
        self.run >= self.limit()
    }

    /// How many times in a row the item before may be written: [`MAX_REPEATED_STRINGS`] for a
    /// string, [`MAX_REPEATED_SCALARS`] for anything else.
    fn limit(&self) -> usize {
        if self.last.first() == Some(&b'"') {
            MAX_REPEATED_STRINGS
        } else {
            MAX_REPEATED_SCALARS
        }
    }

    /// Whether the item being written could end a run at its limit: it is like the items before
    /// it so far, and one more of them reaches the limit.
    fn may_reach_limit(&self) -> bool {
        self.run + 1 >= self.limit() && !self.uncompared && self.last.starts_with(&self.current)
    }
}

/// What a string of a plan's arguments is, for the reference rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Step `step`'s id.
    Id { step: usize },
    /// Step `step`'s tool.
    Tool { step: usize },
    /// A string in step `step`'s arguments; `only_ref` when the argument can be a string only as a
    /// reference.
    Argument { step: usize, only_ref: bool },
    /// An entry of the list of step names (`output_steps`).
    Name,
    /// The text that may refer to any step.
    Text,
    /// The plan's thought, which may name the tools its steps must call.
    Thought,
}

/// The string being written.
#[derive(Debug, Clone)]
struct Text {
    key: bool,
    escaped: bool,
    bytes: Vec<u8>,
    /// Where it is in a plan, when the reference rules apply to it.
    place: Option<Place>,
}

/// One unique-value rule: the tool, and the path inside its arguments (`None` matches any index or
/// key).
#[derive(Debug, Clone)]
struct Rule {
    tool: String,
    path: Vec<Option<Vec<u8>>>,
}

/// A step of the plan being written, as far as it is written.
#[derive(Debug, Clone, Default)]
struct Step {
    id: Option<Vec<u8>>,
    tool: Option<Vec<u8>>,
}

/// Follows a reply as it is written and tells whether a piece of text breaks a rule on its values.
/// Cheap to clone (the sampler tries a piece on a clone).
#[derive(Debug, Clone)]
pub struct ValueRules {
    unique: Vec<Rule>,
    /// Tools whose arguments are plans, and how they refer to steps.
    plans: Vec<(String, StepReferences)>,
    stack: Vec<Frame>,
    text: Option<Text>,
    /// The call being written: its index in `tool_calls`, and its tool's name.
    call: Option<(usize, String)>,
    /// (rule index, value) of every unique value the call being written holds.
    seen: HashSet<(usize, Vec<u8>)>,
    /// The steps of the call being written, by index.
    steps: Vec<Step>,
    /// The text of the steps' arguments written so far in the call being written (strings apart),
    /// in ASCII lower case, for the numbers and words it must use; at most [`MAX_ARGUMENT_TEXT`]
    /// bytes.
    argument_text: Vec<u8>,
    /// The tools the plan's thought names, once it is written, when its steps are held to them
    /// ([`StepReferences::thought_tools`]).
    named_tools: Vec<String>,
    /// How many steps the plan had when a close of its steps was first turned down for a number
    /// or a tool of the thought left out: the close is turned down once, and allowed after one
    /// more step. A cell, since the sampler tries pieces on a clone and learns of the refusal
    /// there.
    refused_close_at: Cell<Option<usize>>,
}

/// Most bytes of a plan's thought read for the tools it names (the planner's schema allows far
/// fewer).
const MAX_THOUGHT_BYTES: usize = 4 * 1024;

/// Most of [`StepReferences::required_words`] looked for in the steps' arguments; the rest hold
/// nothing.
const MAX_REQUIRED_WORDS: usize = 64;

/// Most bytes of step arguments kept for [`StepReferences::required_numbers`]; past it the rule
/// stops checking.
const MAX_ARGUMENT_TEXT: usize = 64 * 1024;

impl ValueRules {
    /// The tracker for replies that may call `tools`: every reply has the rule on items written
    /// again and again; the tools add theirs.
    pub fn for_tools(tools: &[ToolDefinition]) -> Self {
        let unique: Vec<Rule> = tools
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
        let plans: Vec<(String, StepReferences)> = tools
            .iter()
            .filter_map(|t| Some((t.name.clone(), t.step_references.clone()?)))
            .filter(|(_, r)| !r.prefix.is_empty())
            .map(|(name, mut r)| {
                // The words as the arguments are kept: the first few, in lower case.
                r.required_words = r
                    .required_words
                    .iter()
                    .take(MAX_REQUIRED_WORDS)
                    .map(|w| w.to_ascii_lowercase())
                    .collect();
                (name, r)
            })
            .collect();
        ValueRules {
            unique,
            plans,
            stack: Vec::new(),
            text: None,
            call: None,
            seen: HashSet::new(),
            steps: Vec::new(),
            argument_text: Vec::new(),
            named_tools: Vec::new(),
            refused_close_at: Cell::new(None),
        }
    }

    /// Whether `piece` can follow what was written without breaking a rule. A piece that opens or
    /// closes no string and adds nothing to a string under a reference rule is always allowed.
    pub fn allows(&self, piece: &[u8]) -> bool {
        let spaces = !piece.is_empty() && piece.iter().all(u8::is_ascii_whitespace);
        let may_close_a_run = piece.contains(&b',')
            && matches!(self.stack.last(), Some(Frame::Array { items, .. }) if items.may_reach_limit());
        if may_close_a_run
            || piece.contains(&b'"')
            || piece.contains(&b']')
            || (spaces && matches!(self.stack.last(), Some(Frame::Array { .. })))
        {
            let mut probe = self.clone();
            let kept = probe.feed(piece);
            // A close of the steps turned down is remembered (see `refused_close_at`).
            if probe.refused_close_at.get() != self.refused_close_at.get() {
                self.refused_close_at.set(probe.refused_close_at.get());
            }
            return kept;
        }
        match &self.text {
            Some(Text {
                place: Some(place),
                bytes,
                ..
            }) => {
                let mut written = Vec::with_capacity(bytes.len() + piece.len());
                written.extend_from_slice(bytes);
                written.extend_from_slice(piece);
                self.judge(*place, &written, false)
            }
            _ => true,
        }
    }

    /// Takes `piece` as written; false when it broke a rule (the tracker still follows it).
    pub fn feed(&mut self, piece: &[u8]) -> bool {
        let mut kept = true;
        for &b in piece {
            kept &= self.byte(b);
        }
        // A string still open is judged as it stands (a reference may still be partly written).
        if let Some(Text {
            place: Some(place),
            bytes,
            ..
        }) = &self.text
        {
            kept &= self.judge(*place, bytes, false);
        }
        kept
    }

    /// One byte; false when it opened or closed a string against a rule.
    fn byte(&mut self, b: u8) -> bool {
        if self.argument_text.len() < MAX_ARGUMENT_TEXT && self.in_step_arguments() {
            self.argument_text.push(b.to_ascii_lowercase());
        }
        if let Some(text) = &mut self.text {
            // An item of an array: its bytes are compared with the item before.
            if !text.key
                && let Some(Frame::Array { items, .. }) = self.stack.last_mut()
            {
                items.push(b);
            }
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
        // A container or a scalar item of an array.
        if let Some(Frame::Array { items, .. }) = self.stack.last_mut() {
            match b {
                b'{' | b'[' => items.uncompared = true,
                b',' | b']' | b' ' | b'\n' | b'\t' | b'\r' => {}
                // A scalar's bytes, or the quote that opens a string.
                _ => items.push(b),
            }
        }
        match b {
            b'{' => self.stack.push(Frame::Object {
                key: None,
                expect_key: true,
            }),
            b'[' => self.stack.push(Frame::Array {
                index: 0,
                items: Items::default(),
            }),
            b']' => {
                let kept = !self.closes_steps_short(true);
                self.stack.pop();
                return kept;
            }
            // Between steps held open, a space leads only to the close (the grammar takes a
            // comma right after a step, and a space before the `]`): turned down too.
            b' ' | b'\n' | b'\t' | b'\r' => return !self.closes_steps_short(false),
            b'}' => {
                self.stack.pop();
            }
            b',' => match self.stack.last_mut() {
                Some(Frame::Object { expect_key, .. }) => *expect_key = true,
                Some(Frame::Array { index, items }) => {
                    *index += 1;
                    // One more of an item written too often in a row: the array must close.
                    return !items.done();
                }
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
                let place = if key { None } else { self.place() };
                self.text = Some(Text {
                    key,
                    escaped: false,
                    bytes: Vec::new(),
                    place,
                });
                // A string where only a reference can go, with no step to refer to, is refused
                // as it opens: the model writes the value itself.
                if let Some(place) = place {
                    return self.judge(place, b"", false);
                }
            }
            _ => {}
        }
        true
    }

    /// A string ended: a key names the next value; a value may be a call's name, a unique value, or
    /// a string of a plan.
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
                self.steps.clear();
                self.argument_text.clear();
                self.named_tools.clear();
                self.refused_close_at.set(None);
                true
            }
            [Segment::Key(k), rest @ ..] if k == b"arguments" => {
                let Some((_, tool)) = self.call.as_ref().filter(|(i, _)| *i == call) else {
                    return true;
                };
                let mut kept = true;
                for (r, rule) in self.unique.iter().enumerate() {
                    if rule.tool == *tool && matches(&rule.path, rest) {
                        kept &= self.seen.insert((r, text.bytes.clone()));
                    }
                }
                if let Some(place) = text.place {
                    kept &= self.judge(place, &text.bytes, true);
                    match place {
                        Place::Id { step: i } => {
                            if let Some(s) = step_at(&mut self.steps, i) {
                                s.id = Some(text.bytes);
                            }
                        }
                        Place::Tool { step: i } => {
                            if let Some(s) = step_at(&mut self.steps, i) {
                                s.tool = Some(text.bytes);
                            }
                        }
                        Place::Thought => {
                            let thought = String::from_utf8_lossy(
                                &text.bytes[..text.bytes.len().min(MAX_THOUGHT_BYTES)],
                            );
                            self.named_tools = self
                                .references()
                                .map(|refs| {
                                    refs.thought_tools
                                        .iter()
                                        .filter(|t| word_at(&thought, t).is_some())
                                        .cloned()
                                        .collect()
                                })
                                .unwrap_or_default();
                        }
                        _ => {}
                    }
                }
                kept
            }
            _ => true,
        }
    }

    /// The reference rules of the call being written, when its tool takes a plan.
    fn references(&self) -> Option<&StepReferences> {
        let (_, tool) = self.call.as_ref()?;
        self.plans
            .iter()
            .find(|(name, _)| name == tool)
            .map(|(_, r)| r)
    }

    /// Where the string that opens here is in a plan, when a reference rule applies to it.
    fn place(&self) -> Option<Place> {
        let refs = self.references()?;
        let path = self.path();
        let (call, _) = self.call.as_ref()?;
        let rest = match path.as_slice() {
            [
                Segment::Key(t),
                Segment::Index(i),
                Segment::Key(a),
                rest @ ..,
            ] if t == b"tool_calls" && i == call && a == b"arguments" => rest,
            _ => return None,
        };
        let key = |k: &[u8], name: &str| k == name.as_bytes();
        match rest {
            [Segment::Key(s), Segment::Index(step), Segment::Key(k)] if key(s, &refs.steps) => {
                if key(k, &refs.id) {
                    Some(Place::Id { step: *step })
                } else if key(k, &refs.tool) {
                    Some(Place::Tool { step: *step })
                } else {
                    None
                }
            }
            [
                Segment::Key(s),
                Segment::Index(step),
                Segment::Key(a),
                inside @ ..,
            ] if key(s, &refs.steps) && key(a, &refs.arguments) && !inside.is_empty() => {
                let only_ref = match inside {
                    [Segment::Key(field)] => self
                        .steps
                        .get(*step)
                        .and_then(|s| s.tool.as_ref())
                        .and_then(|t| refs.reference_only.get(&*String::from_utf8_lossy(t)))
                        .is_some_and(|fields| fields.iter().any(|f| key(field, f))),
                    _ => false,
                };
                Some(Place::Argument {
                    step: *step,
                    only_ref,
                })
            }
            [Segment::Key(t)]
                if !refs.thought_tools.is_empty()
                    && refs.thought.as_deref().is_some_and(|k| key(t, k)) =>
            {
                Some(Place::Thought)
            }
            [Segment::Key(n), Segment::Index(_)]
                if refs.names.as_deref().is_some_and(|k| key(n, k)) =>
            {
                Some(Place::Name)
            }
            // The text, or a string field of it when it is an object (a choice's condition and
            // its two replies).
            [Segment::Key(t)] | [Segment::Key(t), Segment::Key(_)]
                if refs.text.as_deref().is_some_and(|k| key(t, k)) =>
            {
                Some(Place::Text)
            }
            _ => None,
        }
    }

    /// Whether a string at `place` may read `written` (`complete` when it has closed).
    fn judge(&self, place: Place, written: &[u8], complete: bool) -> bool {
        let Some(refs) = self.references() else {
            return true;
        };
        let prefix = refs.prefix.as_bytes();
        // The steps before `n`, each with its tool's output schema when it declares one.
        let steps_before = |n: usize| -> Vec<Known<'_>> {
            self.steps
                .iter()
                .take(n)
                .filter_map(|s| {
                    let output = s
                        .tool
                        .as_deref()
                        .and_then(|t| std::str::from_utf8(t).ok())
                        .and_then(|t| refs.outputs.get(t));
                    Some((s.id.as_deref()?, output))
                })
                .collect()
        };
        match place {
            Place::Id { .. } | Place::Tool { .. } | Place::Thought => true,
            Place::Name => {
                let steps = steps_before(usize::MAX);
                steps.iter().any(|(id, _)| {
                    if complete {
                        *id == written
                    } else {
                        id.starts_with(written)
                    }
                })
            }
            Place::Text => references_fit(written, prefix, &steps_before(usize::MAX), complete),
            Place::Argument { step, only_ref } => {
                let ids = steps_before(step);
                if only_ref {
                    if ids.is_empty() {
                        return false;
                    }
                    if written.len() < prefix.len() {
                        return !complete && prefix.starts_with(written);
                    }
                    if !written.starts_with(prefix) {
                        return false;
                    }
                }
                references_fit(written, prefix, &ids, complete)
            }
        }
    }

    /// Whether the tracker is inside a step's arguments of the plan being written.
    fn in_step_arguments(&self) -> bool {
        let Some(refs) = self.references() else {
            return false;
        };
        // [tool_calls, i, arguments, steps, j, arguments, …]: at least six frames deep.
        self.stack.len() >= 6
            && matches!(
                self.path().as_slice(),
                [Segment::Key(t), Segment::Index(_), Segment::Key(a), Segment::Key(s),
                 Segment::Index(_), Segment::Key(g), ..]
                    if t == b"tool_calls" && a == b"arguments"
                        && s == refs.steps.as_bytes() && g == refs.arguments.as_bytes()
            )
    }

    /// Whether a `]` here closes the plan's steps while a number they must use is written in none
    /// of their arguments, or a tool the thought names is called by none of them, and the close was
    /// not turned down before at fewer steps; with `record`, records the refusal.
    fn closes_steps_short(&self, record: bool) -> bool {
        let Some(refs) = self.references() else {
            return false;
        };
        let numbers = !refs.required_numbers.is_empty();
        let tools = !self.named_tools.is_empty();
        let words = !refs.required_words.is_empty();
        if !(numbers || tools || words) || self.argument_text.len() >= MAX_ARGUMENT_TEXT {
            return false;
        }
        let (index, closes_steps) = match (self.stack.last(), self.path().as_slice()) {
            (
                Some(Frame::Array { index, .. }),
                [
                    Segment::Key(t),
                    Segment::Index(_),
                    Segment::Key(a),
                    Segment::Key(s),
                    Segment::Index(_),
                ],
            ) => (
                *index,
                t == b"tool_calls" && a == b"arguments" && s == refs.steps.as_bytes(),
            ),
            _ => return false,
        };
        let written = index + 1;
        if !closes_steps || self.refused_close_at.get().is_some_and(|at| written > at) {
            return false;
        }
        let tool_left_out = tools
            && self.named_tools.iter().any(|tool| {
                !self
                    .steps
                    .iter()
                    .any(|s| s.tool.as_deref() == Some(tool.as_bytes()))
            });
        // The arguments are scanned only when no tool already keeps the steps open.
        let missing = tool_left_out
            || words && {
                let written = String::from_utf8_lossy(&self.argument_text);
                refs.required_words
                    .iter()
                    .any(|w| word_at(&written, w).is_none())
            }
            || numbers && {
                let used = numbers_written(&self.argument_text);
                refs.required_numbers.iter().any(|values| {
                    let values: Vec<f64> = values.iter().filter_map(|v| v.parse().ok()).collect();
                    !values.is_empty()
                        && !values.iter().any(|v| {
                            used.iter()
                                .any(|u| (u - v).abs() <= 1e-9 * v.abs().max(1.0))
                        })
                })
            };
        if missing && record {
            self.refused_close_at.set(Some(written));
        }
        missing
    }

    /// The path from the reply's root to the value being written.
    fn path(&self) -> Vec<Segment> {
        self.stack
            .iter()
            .filter_map(|f| match f {
                Frame::Object { key, .. } => key.clone().map(Segment::Key),
                Frame::Array { index, .. } => Some(Segment::Index(*index)),
            })
            .collect()
    }
}

/// The numbers in `text`: runs of digits, with a decimal point between digits.
fn numbers_written(text: &[u8]) -> Vec<f64> {
    let mut numbers = Vec::new();
    let mut i = 0;
    while i < text.len() {
        if !text[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < text.len()
            && (text[i].is_ascii_digit()
                || (text[i] == b'.' && text.get(i + 1).is_some_and(u8::is_ascii_digit)))
        {
            i += 1;
        }
        if let Some(n) = std::str::from_utf8(&text[start..i])
            .ok()
            .and_then(|t| t.parse::<f64>().ok())
        {
            numbers.push(n);
        }
    }
    numbers
}

/// Most steps of one plan the tracker remembers; a longer plan is left to the validator.
const MAX_TRACKED_STEPS: usize = 1024;

/// Step `i` of `steps`, added when it is new (up to [`MAX_TRACKED_STEPS`]).
fn step_at(steps: &mut Vec<Step>, i: usize) -> Option<&mut Step> {
    if steps.len() <= i && i < MAX_TRACKED_STEPS {
        steps.resize_with(i + 1, Step::default);
    }
    steps.get_mut(i)
}

/// A step a reference may name: its id, and its tool's output schema when it declares one.
type Known<'a> = (&'a [u8], Option<&'a serde_json::Value>);

/// Whether `b` may be part of a step id or a path segment.
fn is_id(b: &u8) -> bool {
    b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-'
}

/// Whether every reference in `written` names one of `steps` and, into the result of a step whose
/// tool declares an output schema, a path the schema has (or, at the end of a string still being
/// written, can still become one), and no reference is left half-begun where none could follow.
fn references_fit(written: &[u8], prefix: &[u8], steps: &[Known<'_>], complete: bool) -> bool {
    let mut from = 0;
    while let Some(at) = find(&written[from..], prefix) {
        let start = from + at + prefix.len();
        let end = start + written[start..].iter().take_while(|b| is_id(b)).count();
        let id = &written[start..end];
        if end == written.len() && !complete {
            // The id is still being written.
            return steps.iter().any(|(known, _)| known.starts_with(id));
        }
        let Some(&(_, output)) = steps.iter().find(|(known, _)| *known == id) else {
            return false;
        };
        from = match output {
            Some(schema) => match path_fits(written, end, schema, complete) {
                Some(after) => after,
                None => return false,
            },
            None => end,
        };
    }
    // The marker itself half-written at the end (`$r`, `$ref`; at the start of the string `$`
    // alone), with no step to name.
    !(steps.is_empty()
        && !complete
        && ((1..prefix.len()).any(|n| written == &prefix[..n])
            || (2..prefix.len()).any(|n| written.ends_with(&prefix[..n]))))
}

/// Whether the path written from `at` (`.segment` after `.segment`, right after a reference's id)
/// is one `schema` has, or, when it reaches the end of a string still being written, can still
/// become one; `Some` of where the path ends, `None` when it cannot fit. A `.` not followed by a
/// segment is text (the end of a sentence).
fn path_fits(
    written: &[u8],
    mut at: usize,
    schema: &serde_json::Value,
    complete: bool,
) -> Option<usize> {
    use toolplan_core::output::{Lookup, lookup};
    let mut path: Vec<&str> = Vec::new();
    while written.get(at) == Some(&b'.') {
        let start = at + 1;
        let end = start + written[start..].iter().take_while(|b| is_id(b)).count();
        if end == start {
            break;
        }
        // Id characters are ASCII.
        let segment = std::str::from_utf8(&written[start..end]).ok()?;
        let pending = end == written.len() && !complete;
        path.push(segment);
        if let Lookup::Missing {
            at: missing,
            fields,
        } = lookup(schema, &path)
        {
            let can_grow = pending
                && missing + 1 == path.len()
                && fields.iter().any(|f| f.starts_with(segment));
            if !can_grow {
                return None;
            }
        }
        at = end;
    }
    Some(at)
}

/// Where `needle` first occurs in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    haystack.windows(needle.len()).position(|w| w == needle)
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
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;

    fn plan_tool() -> ToolDefinition {
        ToolDefinition::new("plan", "", json!({"type": "object"})).with_unique_values("/steps/*/id")
    }

    fn tracker() -> ValueRules {
        ValueRules::for_tools(&[plan_tool(), ToolDefinition::new("echo", "", json!({}))])
    }

    /// A plan tool with the reference rules: `add`'s `n` can be a string only as a reference.
    fn referring() -> ValueRules {
        let only = BTreeMap::from([("add".to_owned(), vec!["n".to_owned()])]);
        let plan = plan_tool().with_step_references(
            StepReferences::plan()
                .with_text("answer")
                .with_reference_only(only),
        );
        ValueRules::for_tools(&[plan])
    }

    /// Feeds `text` token by token as `pieces`, and says whether every piece was allowed.
    fn allowed(tracker: &mut ValueRules, pieces: &[&str]) -> Vec<bool> {
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

    const CALL: &str = r#"{"tool_calls":[{"name":"plan","arguments":{"steps":["#;

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

    /// A plan tool whose steps must use the numbers 9 and 32, and 2 or 0.02.
    fn numbered() -> ValueRules {
        let mut references = StepReferences::plan();
        references.required_numbers = vec![
            vec!["9".into()],
            vec!["32".into()],
            vec!["2".into(), "0.02".into()],
        ];
        ValueRules::for_tools(&[plan_tool().with_step_references(references)])
    }

    #[test]
    fn steps_that_leave_out_a_number_of_the_question_stay_open_for_one_more_step() {
        let mut t = numbered();
        let first =
            format!(r#"{CALL}{{"id":"w","tool":"get","arguments":{{"city":"Oslo","rate":0.02}}}}"#);
        assert!(t.feed(first.as_bytes()));
        // 9 and 32 are in no step: the steps may not close, in any token that closes them.
        assert!(!t.allows(b"]"));
        assert!(!t.allows(b"]}"));
        assert!(t.allows(b","));
        // One more step, whatever it writes: then they may.
        let second = r#",{"id":"c","tool":"calc","arguments":{"expression":"$ref:w.temp * 9"}}"#;
        assert!(t.feed(second.as_bytes()));
        assert!(t.allows(b"]"));
        assert!(t.feed(b"]}}]}"));

        // Numbers in ids, tools or the thought do not count; in text arguments and as JSON
        // numbers they do.
        let mut t = numbered();
        let call = r#"{"tool_calls":[{"name":"plan","arguments":{"thought":"9 32 2","steps":[{"id":"s9","tool":"t32","arguments":{"a":"x"}}"#;
        assert!(t.feed(call.as_bytes()));
        assert!(!t.allows(b"]"));
        let mut t = numbered();
        let call = format!(
            r#"{CALL}{{"id":"c","tool":"calc","arguments":{{"expression":"24 * 9 / 5 + 32","n":2.0}}}}"#
        );
        assert!(t.feed(call.as_bytes()));
        assert!(t.allows(b"]"));
        // As the local model writes a plan with its answer, closing quote and brackets in one
        // token.
        let mut t = numbered();
        let head = r#"{"tool_calls":[{"name":"plan","arguments":{"thought":"get_user gives the city","steps":[{"id":"u","tool":"get_user","arguments":{"name":"Frank"}},{"id":"w","tool":"get_weather","arguments":{"location":"$ref:u.city"#;
        assert!(t.feed(head.as_bytes()));
        assert!(!t.allows(b"\"}}],\""));
        assert!(!t.allows(b"\"}}]"));
        assert!(t.allows(b"\"}},"));
        // After the step, a space (which the grammar lets only the close follow) is turned down
        // too; inside a step it is not.
        assert!(t.allows(b" "));
        assert!(t.feed(b"\"}}"));
        assert!(!t.allows(b" "));
        assert!(!t.allows(b"\n"));
        assert!(t.allows(b","));
        // Without required numbers, or outside the steps, nothing is held open.
        let mut t = referring();
        assert!(t.feed(format!(r#"{CALL}{{"id":"w","tool":"a","arguments":{{}}}}"#).as_bytes()));
        assert!(t.allows(b"]"));
        let mut t = numbered();
        assert!(t.feed(format!(r#"{CALL}{{"id":"w","tool":"a","arguments":{{"l":["#).as_bytes()));
        assert!(t.allows(b"]"));
    }

    #[test]
    fn steps_that_leave_out_an_option_of_the_question_stay_open_for_one_more_step() {
        let worded = || {
            let mut references = StepReferences::plan();
            references.required_words = vec!["Berlin".into(), "London".into()];
            ValueRules::for_tools(&[plan_tool().with_step_references(references)])
        };
        let mut t = worded();
        let berlin = r#"{"id":"b","tool":"get_weather","arguments":{"location":"berlin"}}"#;
        assert!(t.feed(format!("{CALL}{berlin}").as_bytes()));
        // London is in no step (case does not matter for Berlin): no close, nor the space before.
        assert!(!t.allows(b"]"));
        assert!(!t.allows(b" "));
        assert!(t.allows(b","));
        // One more step, whatever it writes: then the steps may close.
        assert!(t.feed(br#",{"id":"x","tool":"get_weather","arguments":{"location":"Paris"}}"#));
        assert!(t.allows(b"]"));

        // Both written, as words of their own: the steps close at once. A word inside a longer
        // one ("Londonderry"), or only in the thought or an id, does not count.
        let mut t = worded();
        let both = r#"{"id":"b","tool":"w","arguments":{"location":"Berlin, DE"}},{"id":"l","tool":"w","arguments":{"q":"LONDON"}}"#;
        assert!(t.feed(format!("{CALL}{both}").as_bytes()));
        assert!(t.allows(b"]"));
        let mut t = worded();
        let head = r#"{"tool_calls":[{"name":"plan","arguments":{"thought":"London","steps":[{"id":"London","tool":"w","arguments":{"location":"Berlin"}},{"id":"l","tool":"w","arguments":{"location":"Londonderry"}}"#;
        assert!(t.feed(head.as_bytes()));
        assert!(!t.allows(b"]"));

        // Thousands of words from a caller: the first 64 are looked for, the rest hold nothing.
        let mut references = StepReferences::plan();
        references.required_words = (0..5_000).map(|i| format!("w{i}")).collect();
        let mut t = ValueRules::for_tools(&[plan_tool().with_step_references(references)]);
        let all: Vec<String> = (0..64).map(|i| format!("w{i}")).collect();
        let step = format!(
            r#"{{"id":"a","tool":"t","arguments":{{"q":"{}"}}}}"#,
            all.join(" ")
        );
        assert!(t.feed(format!("{CALL}{step}").as_bytes()));
        assert!(t.allows(b"]"));
    }

    fn thoughtful() -> ValueRules {
        let mut references = StepReferences::plan();
        references.thought = Some("thought".into());
        references.thought_tools = vec!["get_user".into(), "get_weather".into(), "calc".into()];
        ValueRules::for_tools(&[plan_tool().with_step_references(references)])
    }

    const THOUGHT: &str = r#"{"tool_calls":[{"name":"plan","arguments":{"thought":"get_user gives the city, get_weather its temp.","steps":["#;

    #[test]
    fn steps_that_leave_out_a_tool_their_thought_names_stay_open_for_one_more_step() {
        let mut t = thoughtful();
        let user = r#"{"id":"u","tool":"get_user","arguments":{"name":"Ann"}}"#;
        assert!(t.feed(format!("{THOUGHT}{user}").as_bytes()));
        // get_weather is named and not called: no close, nor the space before it.
        assert!(!t.allows(b"]"));
        assert!(!t.allows(b"],\"answer\""));
        assert!(!t.allows(b" "));
        assert!(t.allows(b","));
        // One more step, whatever its tool: then the steps may close.
        assert!(t.feed(br#",{"id":"x","tool":"calc","arguments":{}}"#));
        assert!(t.allows(b"]"));

        // Every named tool called: the steps close at once. A tool the thought does not name
        // (`calc`), or names only inside a longer name, holds nothing.
        for thought in [
            "get_user gives the city, get_weather its temp.",
            "calculate with get_users and get_weather_now",
            "",
        ] {
            let mut t = thoughtful();
            let head = format!(
                r#"{{"tool_calls":[{{"name":"plan","arguments":{{"thought":"{thought}","steps":["#
            );
            let steps = r#"{"id":"u","tool":"get_user","arguments":{}},{"id":"w","tool":"get_weather","arguments":{}}"#;
            let steps = if thought.starts_with("get_user") {
                steps
            } else {
                user
            };
            assert!(t.feed(format!("{head}{steps}").as_bytes()), "{thought}");
            assert!(t.allows(b"]"), "{thought}");
        }

        // Without thought tools the thought is not read.
        let mut t = referring();
        assert!(t.feed(format!("{THOUGHT}{user}").as_bytes()));
        assert!(t.allows(b"]"));
    }

    #[test]
    fn a_huge_thought_and_many_tools_are_read_only_so_far() {
        let mut references = StepReferences::plan();
        references.thought = Some("thought".into());
        references.thought_tools = (0..2_000).map(|i| format!("tool_{i}")).collect();
        let rules = ValueRules::for_tools(&[plan_tool().with_step_references(references)]);
        // tool_7 is named at the start, tool_9 only past what is read.
        let thought = format!("tool_7 {} tool_9", "x ".repeat(512 * 1024));
        let plan = |tool: &str| {
            format!(
                r#"{{"tool_calls":[{{"name":"plan","arguments":{{"thought":"{thought}","steps":[{{"id":"a","tool":"{tool}","arguments":{{}}}}"#
            )
        };
        let mut t = rules.clone();
        assert!(t.feed(plan("tool_1").as_bytes()));
        assert!(!t.allows(b"]"));
        let mut t = rules;
        assert!(t.feed(plan("tool_7").as_bytes()));
        assert!(t.allows(b"]"));
    }

    #[test]
    fn an_item_written_again_and_again_closes_its_array() {
        let mut t = ValueRules::for_tools(&[ToolDefinition::new("order", "", json!({}))]);
        let start = r#"{"tool_calls":[{"name":"order","arguments":{"items":["#;
        assert!(t.feed(start.as_bytes()));
        let burger = "\"麦辣鸡腿堡\"";
        for _ in 0..MAX_REPEATED_STRINGS - 1 {
            assert!(t.feed(burger.as_bytes()));
            assert!(t.allows(b","), "fewer than the limit in a row");
            assert!(t.feed(b","));
        }
        // The last one the limit allows: after it only the close.
        assert!(t.feed(burger.as_bytes()));
        assert!(!t.allows(b","));
        assert!(!t.allows(b", "));
        assert!(!t.allows(b",\""));
        assert!(t.allows(b" "));
        assert!(t.allows(b"]"));
        assert!(t.feed(br#"],"quantities":["#));
        // The same numbers are allowed many more times, and runs of others are counted apart.
        let mut numbers = String::new();
        for _ in 0..MAX_REPEATED_SCALARS - 1 {
            numbers.push_str("1, ");
        }
        assert!(t.feed(numbers.as_bytes()));
        assert!(t.feed(b"1"));
        assert!(!t.allows(b","));
        assert!(!t.allows(b", 1"));
        assert!(t.allows(b"]"));
    }

    #[test]
    fn different_items_and_items_of_objects_repeat_freely() {
        let mut t = ValueRules::for_tools(&[ToolDefinition::new("order", "", json!({}))]);
        let mut text = String::from(r#"{"tool_calls":[{"name":"order","arguments":{"items":["#);
        // Strings that alternate, and the same string inside objects, many times.
        for i in 0..20 {
            text.push_str(if i % 2 == 0 { r#""a","# } else { r#""b","# });
        }
        text.push_str(r#""c"],"rows":["#);
        for _ in 0..20 {
            text.push_str(r#"{"k":"a"},"#);
        }
        text.push_str(r#"{"k":"a"}],"nested":[["x"],["x"],["x"],["x"],["x"],["x"]],"#);
        // A string one byte longer than the last is another item.
        text.push_str(r#""s":["ab","ab","ab","abc","ab"]}}]}"#);
        assert!(t.feed(text.as_bytes()), "{text}");
    }

    #[test]
    fn a_huge_item_is_compared_only_so_far() {
        let mut t = ValueRules::for_tools(&[ToolDefinition::new("order", "", json!({}))]);
        let item = format!("\"{}\"", "x".repeat(1 << 20));
        assert!(t.feed(br#"{"tool_calls":[{"name":"order","arguments":{"items":["#));
        for _ in 0..MAX_REPEATED_STRINGS + 2 {
            assert!(t.feed(item.as_bytes()));
            assert!(t.allows(b","));
            assert!(t.feed(b","));
        }
    }

    /// A plan tool whose `user` tool returns `{name, city, tags: [{label}]}` and `calc` a number.
    fn typed() -> ValueRules {
        let outputs = BTreeMap::from([
            (
                "user".to_owned(),
                json!({"type": "object", "properties": {
                    "name": {"type": "string"}, "city": {"type": "string"},
                    "tags": {"type": "array", "items": {"type": "object", "properties": {"label": {"type": "string"}}}}}}),
            ),
            ("calc".to_owned(), json!({"type": "number"})),
        ]);
        let plan = plan_tool().with_step_references(
            StepReferences::plan()
                .with_text("answer")
                .with_outputs(outputs),
        );
        ValueRules::for_tools(&[plan])
    }

    #[test]
    fn a_reference_into_a_declared_output_names_only_what_it_has() {
        let mut t = typed();
        let first = r#"{"id":"u","tool":"user","arguments":{"q":"ann"}},{"id":"c","tool":"calc","arguments":{}},{"id":"o","tool":"other","arguments":{}},{"id":"w","tool":"get","arguments":{"q":"#;
        assert!(t.feed(format!("{CALL}{first}").as_bytes()));
        for fits in [
            r#""$ref:u.city""#,
            r#""in $ref:u.city.""#,
            r#""$ref:u.tags.0.label""#,
            r#""$ref:u""#,
            r#""$ref:c""#,
            r#""$ref:o.anything.at.all""#,
            r#""$ref:u.ci"#,
        ] {
            assert!(t.allows(fits.as_bytes()), "{fits}");
        }
        for wrong in [
            r#""$ref:u.temperature"#,
            r#""$ref:u.city.x"#,
            r#""$ref:u.tags.0.name"#,
            r#""$ref:c.value"#,
            r#""$ref:u.ci""#,
        ] {
            assert!(!t.allows(wrong.as_bytes()), "{wrong}");
        }
        // Piece by piece: `.te` is turned down as it is written, `.city` taken.
        assert_eq!(
            allowed(
                &mut t,
                &[
                    "\"$ref:u",
                    ".te",
                    ".c",
                    "ity",
                    " and $ref:u.",
                    "x",
                    "name",
                    "\"}}"
                ]
            ),
            [true, false, true, true, true, false, true, true]
        );
    }

    #[test]
    fn a_reference_names_only_a_step_written_before_it() {
        let mut t = referring();
        let first = r#"{"id":"u","tool":"get","arguments":{"q":"ann"}},{"id":"w","tool":"get","arguments":{"q":"#;
        assert!(t.feed(format!("{CALL}{first}").as_bytes()));
        // `u` comes before; `w` is this step, `x` no step at all.
        assert!(t.allows(br#""$ref:u.city""#));
        assert!(t.allows(br#""in $ref:u now""#));
        assert!(!t.allows(br#""$ref:w.city""#));
        assert!(!t.allows(br#""$ref:x"#));
        assert!(t.allows(br#""$ref:"#));
        // Piece by piece: the id is judged as it grows, and the marker alone is fine.
        assert_eq!(
            allowed(&mut t, &["\"$", "ref", ":", "u", ".city", "\"}}"]),
            [true; 6]
        );
        let mut again = referring();
        again.feed(format!("{CALL}{first}").as_bytes());
        assert_eq!(allowed(&mut again, &["\"$ref:", "w"]), [true, false]);
        assert_eq!(allowed(&mut again, &["uu"]), [false]);
    }

    #[test]
    fn a_first_step_writes_values_not_references() {
        let mut t = referring();
        assert!(
            t.feed(format!(r#"{CALL}{{"id":"hcf","tool":"add","arguments":{{"q":"#).as_bytes())
        );
        // A text argument: the marker cannot be finished, anything else can be written.
        assert!(t.allows(br#""$5""#));
        assert!(t.allows(br#""36""#));
        assert!(t.allows(br#""costs $"#));
        assert!(!t.allows(br#""$"#));
        assert!(!t.allows(br#""costs $r"#));
        assert!(!t.allows(br#""$ref"#));
        assert!(!t.allows(br#""$ref:hcf.n1""#));
        // An argument that can be a string only as a reference cannot open a string at all.
        let mut n = referring();
        assert!(
            n.feed(format!(r#"{CALL}{{"id":"hcf","tool":"add","arguments":{{"n":"#).as_bytes())
        );
        assert!(!n.allows(b"\""));
        assert!(n.allows(b"36"));
        // In a later step it opens, and must be a reference.
        let mut later = referring();
        let two = r#"{"id":"a","tool":"add","arguments":{"n":1}},{"id":"b","tool":"add","arguments":{"n":"#;
        assert!(later.feed(format!("{CALL}{two}").as_bytes()));
        assert!(later.allows(b"\""));
        assert!(later.allows(br#""$ref:a""#));
        assert!(!later.allows(br#""7""#));
    }

    #[test]
    fn output_steps_and_the_answer_name_steps_of_the_plan() {
        let mut t = referring();
        let steps = r#"{"id":"s1","tool":"get","arguments":{}},{"id":"s2","tool":"get","arguments":{}}],"output_steps":["#;
        assert!(t.feed(format!("{CALL}{steps}").as_bytes()));
        assert!(t.allows(br#""s2""#));
        assert!(t.allows(br#""s"#));
        assert!(!t.allows(br#""e""#));
        assert!(!t.allows(br#""s""#));
        assert!(t.feed(br#""s1","s2"],"answer":"#));
        assert!(t.allows(br#""Both: $ref:s1 and $ref:s2.x""#));
        assert!(!t.allows(br#""$ref:s3""#));
    }

    #[test]
    fn a_choice_answer_names_steps_and_fields_the_plan_has() {
        let mut t = typed();
        let steps = r#"{"id":"u","tool":"user","arguments":{}},{"id":"c","tool":"calc","arguments":{}}],"answer":{"if":"#;
        assert!(t.feed(format!("{CALL}{steps}").as_bytes()));
        assert!(t.allows(br#""$ref:u.city == 'Oslo' and $ref:c > 2""#));
        assert!(!t.allows(br#""$ref:u.temp < 3""#));
        assert!(!t.allows(br#""$ref:x > 3""#));
        assert!(!t.allows(br#""$ref:c.value > 3""#));
        assert!(t.feed(br#""$ref:c > 2","then":"#));
        assert!(t.allows(br#""Yes, in $ref:u.city""#));
        assert!(!t.allows(br#""Yes, in $ref:u.town""#));
    }

    #[test]
    fn other_tools_and_other_calls_are_not_held() {
        let mut t = referring();
        // A tool without reference rules, then a plan whose step ids start afresh.
        let text = r#"{"tool_calls":[{"name":"echo","arguments":{"steps":[{"id":"a","arguments":{"x":"$ref:zz"}}]}},{"name":"plan","arguments":{"steps":[{"id":"b","tool":"get","arguments":{"x":"#;
        assert!(t.feed(text.as_bytes()));
        assert!(!t.allows(br#""$ref:a""#));
        assert!(t.allows(br#""hi""#));
    }
}
