//! Size limits that a plan must respect before it runs. (The limit on outputs kept in memory while a plan
//! runs is [`crate::scheduler::RunConfig::max_output_bytes`].)

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
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Counter(0);
    // Writing to a counter cannot fail, and a `Value` always serialises.
    let _ = serde_json::to_writer(&mut c, value);
    c.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn size_matches_text() {
        let v = json!({"a": [1, 2.5, "x\"y"], "b": null});
        assert_eq!(json_size(&v), serde_json::to_string(&v).unwrap().len());
    }
}
