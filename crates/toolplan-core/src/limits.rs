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
}

/// Default of [`crate::RunConfig::max_value_depth`]: serde_json's own parsing limit, so every value
/// toolplan passes on is one that a JSON parser on the other side accepts too.
pub const DEFAULT_MAX_VALUE_DEPTH: usize = 128;
/// Default of [`crate::RunConfig::max_resolved_argument_bytes`] (32 MiB: two whole outputs of the
/// largest size).
pub const DEFAULT_MAX_RESOLVED_ARGUMENT_BYTES: usize = 32 * 1024 * 1024;
/// Default of [`crate::RunConfig::max_output_bytes`] (16 MiB).
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 16 * 1024 * 1024;
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
        }
    }
}

/// Counts the bytes of a value's compact JSON text without building the text.
pub fn json_size(value: &serde_json::Value) -> usize {
    json_size_within(value, usize::MAX).unwrap_or(usize::MAX)
}

/// [`json_size`], but stops counting as soon as the text would pass `limit` bytes and returns
/// `None` then: the work is bounded by the limit, not by the value.
pub fn json_size_within(value: &serde_json::Value, limit: usize) -> Option<usize> {
    struct Counter {
        n: usize,
        limit: usize,
    }
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.n = self.n.saturating_add(buf.len());
            if self.n > self.limit {
                return Err(std::io::Error::other("over the limit"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Counter { n: 0, limit };
    // A `Value` always serialises: the only error is the counter's own.
    match serde_json::to_writer(&mut c, value) {
        Ok(()) => Some(c.n),
        Err(_) => None,
    }
}

/// How deeply arrays and objects nest in `value` (`1` → 0, `[]` → 1, `{"a": [1]}` → 2), found without
/// recursion (so a value of any depth is measured without exhausting the stack). Stops as soon as
/// the depth passes `limit` and returns `None` then.
pub fn value_depth(value: &serde_json::Value, limit: usize) -> Option<usize> {
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
pub fn drop_deep(value: serde_json::Value) {
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
pub fn human_bytes(n: usize) -> String {
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
    }
}
