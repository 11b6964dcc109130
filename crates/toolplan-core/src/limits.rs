//! Size limits that a plan must respect before it runs, and the measures the run-time budgets use.
//! (The budgets of a run — output size, resolved arguments, kept outputs, value depth, error text —
//! are in [`crate::scheduler::RunConfig`].)

/// Limits on plans and on what a run keeps in memory. Every limit is enforced with an error that names
/// the limit; none is a silent truncation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest plan text accepted, in bytes (checked before parsing).
    pub max_plan_bytes: usize,
    /// Most steps in one plan.
    pub max_steps: usize,
    /// Largest `arguments` of one step, in bytes of JSON text (before references are resolved).
    pub max_argument_bytes: usize,
    /// Longest step id, in characters.
    pub max_id_len: usize,
    /// What validation does with steps that make the same call (default:
    /// [`RepeatedCalls::ShareHarmless`]).
    pub repeated_calls: RepeatedCalls,
    /// Whether steps on a tool that changes things keep the order the plan wrote them in (default:
    /// [`WrittenOrder::Kept`]).
    pub written_order: WrittenOrder,
}

/// Most steps and references that putting one plan's steps in written order
/// ([`WrittenOrder::Kept`]) visits (50 million: well under a second); a plan that needs more keeps
/// no written-order wait and runs by its references alone.
pub const WRITTEN_ORDER_WORK: usize = 50_000_000;

/// The order of steps on a tool that does not say it is read-only
/// ([`ToolAnnotations::read_only`](crate::ToolAnnotations::read_only)), when no reference orders
/// them: two `scroll_down` steps, or a `write_file` and a `delete_file`, have no data between them,
/// but their effects depend on which runs first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WrittenOrder {
    /// Each such step waits for the step on the same tool written before it (and is skipped when
    /// that one fails), unless the plan's references put it first: the data flow wins.
    #[default]
    Kept,
    /// Steps wait only for the steps their references (and `depends_on`) name.
    Free,
}

/// What validation does with steps that make the same call: the same tool with the same
/// arguments (references to the same steps included).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RepeatedCalls {
    /// Every copy runs.
    RunEach,
    /// A repeated call of a tool that says repeats are harmless (read-only or idempotent,
    /// [`crate::ToolAnnotations::repeat_is_harmless`]) runs once: the later copies wait for the first
    /// and get its result. Repeated calls of other tools run each.
    #[default]
    ShareHarmless,
    /// As [`ShareHarmless`](Self::ShareHarmless), and a repeated call of any other tool is a problem
    /// in the plan: for plans written by models, where such a repeat is far more often a plan
    /// written in a loop than a call meant twice.
    ShareOrReject,
}

/// Default of [`crate::RunConfig::max_value_depth`]: serde_json's own parsing limit, so every value
/// toolplan passes on is one that a JSON parser on the other side accepts too.
pub const DEFAULT_MAX_VALUE_DEPTH: usize = 128;
/// Default of [`crate::RunConfig::max_resolved_argument_bytes`] (32 MiB: two whole outputs of the
/// largest size).
pub const DEFAULT_MAX_RESOLVED_ARGUMENT_BYTES: usize = 32 * 1024 * 1024;
/// Default of [`crate::RunConfig::max_output_bytes`] (16 MiB).
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 16 * 1024 * 1024;
/// Default of [`crate::RunConfig::max_failure_input_bytes`] (1 MiB): the results a model reads
/// after a failed plan fit in far less.
pub const DEFAULT_MAX_FAILURE_INPUT_BYTES: usize = 1024 * 1024;

/// Default of [`crate::RunConfig::max_kept_output_bytes`] (256 MiB).
pub const DEFAULT_MAX_KEPT_OUTPUT_BYTES: usize = 256 * 1024 * 1024;
/// The text of a plan's results that goes back to a model (the `execute_tool_plan` tool's output,
/// the MCP server's text content), in bytes: [`crate::PlanRun::summary_within`] this (32 KB).
pub const DEFAULT_MAX_SUMMARY_BYTES: usize = 32 * 1024;
/// Default of [`crate::RunConfig::max_error_bytes`] (64 KiB).
pub const DEFAULT_MAX_ERROR_BYTES: usize = 64 * 1024;

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_plan_bytes: 16 * 1024 * 1024,
            max_steps: 10_000,
            max_argument_bytes: 1024 * 1024,
            max_id_len: 128,
            repeated_calls: RepeatedCalls::ShareHarmless,
            written_order: WrittenOrder::Kept,
        }
    }
}

/// Counts the bytes of a value's compact JSON text without building the text.
pub(crate) fn json_size(value: &serde_json::Value) -> usize {
    json_size_within(value, usize::MAX).unwrap_or(usize::MAX)
}

/// [`json_size`], but stops counting as soon as the text would pass `limit` bytes and returns
/// `None` then: the work is bounded by the limit, not by the value.
///
/// Counted by walking the value, without recursion and without running a serializer: this runs
/// once or twice for every step of every plan, so a scalar costs a handful of instructions.
pub(crate) fn json_size_within(value: &serde_json::Value, limit: usize) -> Option<usize> {
    use serde_json::Value;
    let mut n = 0usize;
    let mut add = |k: usize| {
        n = n.saturating_add(k);
        n <= limit
    };
    // Scalars (most outputs a step references) need no stack.
    let mut stack: Vec<&Value> = Vec::new();
    let mut next = Some(value);
    while let Some(v) = next.take().or_else(|| stack.pop()) {
        let within = match v {
            Value::Array(items) => {
                stack.extend(items.iter());
                // `[`, `]` and a comma between items.
                add(2 + items.len().saturating_sub(1))
            }
            Value::Object(map) => {
                let mut within = add(2 + map.len().saturating_sub(1));
                for (key, item) in map {
                    // `"key":`
                    within = within && add(string_size(key) + 1);
                    stack.push(item);
                }
                within
            }
            scalar => add(scalar_size(scalar)),
        };
        if !within {
            return None;
        }
    }
    Some(n)
}

/// Bytes of a scalar's JSON text.
fn scalar_size(v: &serde_json::Value) -> usize {
    use serde_json::Value;
    match v {
        Value::Null => 4,
        Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::String(s) => string_size(s),
        Value::Number(x) => {
            if let Some(u) = x.as_u64() {
                decimal_digits(u)
            } else if let Some(i) = x.as_i64() {
                1 + decimal_digits(i.unsigned_abs())
            } else {
                // Floats: exactly as serde_json writes them, counted without building the text.
                struct Count(usize);
                impl std::fmt::Write for Count {
                    fn write_str(&mut self, s: &str) -> std::fmt::Result {
                        self.0 += s.len();
                        Ok(())
                    }
                }
                let mut c = Count(0);
                // Counting cannot fail.
                let _ = std::fmt::Write::write_fmt(&mut c, format_args!("{x}"));
                c.0
            }
        }
        // Containers are walked by the caller.
        Value::Array(_) | Value::Object(_) => 0,
    }
}

/// Bytes of a string's JSON text: quotes, and escapes as serde_json writes them (`\n`, `\"`,
/// `\u001f`); everything else, UTF-8 included, as it is.
fn string_size(s: &str) -> usize {
    let extra: usize = s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | 0x08 | 0x0c | b'\n' | b'\r' | b'\t' => 1,
            0x00..=0x1f => 5,
            _ => 0,
        })
        .sum();
    s.len() + 2 + extra
}

fn decimal_digits(mut u: u64) -> usize {
    let mut digits = 1;
    while u >= 10 {
        u /= 10;
        digits += 1;
    }
    digits
}

/// How deeply arrays and objects nest in `value` (`1` → 0, `[]` → 1, `{"a": [1]}` → 2), found without
/// recursion (so a value of any depth is measured without exhausting the stack). Stops as soon as
/// the depth passes `limit` and returns `None` then.
pub(crate) fn value_depth(value: &serde_json::Value, limit: usize) -> Option<usize> {
    use serde_json::Value;
    fn children(v: &Value) -> Option<Box<dyn Iterator<Item = &Value> + '_>> {
        match v {
            Value::Array(items) => Some(Box::new(items.iter())),
            Value::Object(map) => Some(Box::new(map.values())),
            _ => None,
        }
    }
    let Some(first) = children(value) else {
        return Some(0);
    };
    if limit == 0 {
        return None;
    }
    let mut deepest = 1;
    let mut stack = vec![first];
    while let Some(top) = stack.last_mut() {
        match top.next() {
            Some(child) => {
                if let Some(grandchildren) = children(child) {
                    if stack.len() >= limit {
                        return None;
                    }
                    stack.push(grandchildren);
                    deepest = deepest.max(stack.len());
                }
            }
            None => {
                stack.pop();
            }
        }
    }
    Some(deepest)
}

/// Drops a value of any depth without recursion (the drop glue of `serde_json::Value` recurses, so
/// a deep enough value would exhaust the stack).
pub(crate) fn drop_deep(value: serde_json::Value) {
    use serde_json::Value;
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

/// A size in bytes for people: `512 bytes`, `1.5 KB`, `99.9 MB` (decimal units).
pub(crate) fn human_bytes(n: usize) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if n < 1000 {
        return format!("{n} bytes");
    }
    let mut value = n as f64 / 1000.0;
    let mut unit = 0;
    while value >= 999.95 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// Cuts `text` to at most `max` bytes (at a character boundary) and says how much was left out:
/// `"abc… 99.9 MB more"`. Text within the limit comes back unchanged. The marker itself is not
/// counted in `max`, so the result is at most `max` plus a few dozen bytes.
pub fn truncate_text(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!(
        "{}… {} more",
        &text[..end],
        human_bytes(text.len() - end)
    ))
}

/// [`truncate_text`] in place, for an owned string.
pub fn truncate_string(text: &mut String, max: usize) {
    if let std::borrow::Cow::Owned(cut) = truncate_text(text, max) {
        *text = cut;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn depth_is_measured_without_recursion() {
        assert_eq!(value_depth(&json!(1), 0), Some(0));
        assert_eq!(value_depth(&json!([]), 1), Some(1));
        assert_eq!(value_depth(&json!([]), 0), None);
        assert_eq!(
            value_depth(&json!({"a": [1, {"b": []}], "c": 2}), 10),
            Some(4)
        );
        assert_eq!(
            value_depth(&json!({"a": [1, {"b": []}], "c": 2}), 4),
            Some(4)
        );
        assert_eq!(value_depth(&json!({"a": [1, {"b": []}]}), 2), None);
        // Far deeper than any stack could recurse: built and dropped iteratively.
        let mut deep = json!(0);
        for _ in 0..200_000 {
            deep = serde_json::Value::Array(vec![deep]);
        }
        assert_eq!(value_depth(&deep, 128), None);
        assert_eq!(value_depth(&deep, 1_000_000), Some(200_000));
        drop_deep(deep);
    }

    #[test]
    fn truncation_says_how_much_is_left_out() {
        assert_eq!(truncate_text("short", 10), "short");
        let long = "x".repeat(100_000_000);
        let cut = truncate_text(&long, 100_000);
        assert!(
            cut.ends_with("… 99.9 MB more"),
            "{}",
            &cut[cut.len() - 30..]
        );
        assert_eq!(cut.len(), 100_000 + "… 99.9 MB more".len());
        // Never inside a character.
        assert_eq!(truncate_text("ééé", 3), "é… 4 bytes more");
        assert_eq!(human_bytes(1_500), "1.5 KB");
        assert_eq!(human_bytes(999_999), "1.0 MB");
    }

    #[test]
    fn size_matches_text() {
        let v = json!({"a": [1, 2.5, "x\"y"], "b": null});
        assert_eq!(json_size(&v), serde_json::to_string(&v).unwrap().len());
        let escapes = json!([
            "\u{0}\u{8}\u{c}\n\r\t\u{1f}\u{7f}\\/\"é€😀",
            -0,
            -1,
            u64::MAX,
            i64::MIN,
            1e300,
            -2.5e-7,
            0.1
        ]);
        assert_eq!(
            json_size(&escapes),
            serde_json::to_string(&escapes).unwrap().len()
        );
        assert_eq!(json_size(&json!({})), 2);
        assert_eq!(json_size(&json!([[], {}, [[]]])), 12);
    }

    #[test]
    fn size_stops_at_the_limit() {
        let v = json!({"a": "x".repeat(100)});
        let n = json_size(&v);
        assert_eq!(json_size_within(&v, n), Some(n));
        assert_eq!(json_size_within(&v, n - 1), None);
        assert_eq!(json_size_within(&json!(true), 3), None);
    }

    fn any_value() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        use serde_json::Value;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|i| json!(i)),
            any::<u64>().prop_map(|u| json!(u)),
            any::<f64>().prop_map(|f| json!(f)),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                proptest::collection::btree_map(any::<String>(), inner, 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// The hand count is exactly the length of serde_json's compact text, for any value.
        #[test]
        fn size_is_the_length_of_the_text(v in any_value()) {
            let text = serde_json::to_string(&v).unwrap();
            proptest::prop_assert_eq!(json_size(&v), text.len());
            proptest::prop_assert_eq!(json_size_within(&v, text.len()), Some(text.len()));
            if !text.is_empty() {
                proptest::prop_assert_eq!(json_size_within(&v, text.len() - 1), None);
            }
        }
    }
}
