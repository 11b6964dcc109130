//! OpenSearch's YAML REST tests on the embedded engine: every test listed in `passing.txt` (the
//! ones that passed when it was last written) must still pass, and no test may crash the runner.
//! A test that newly passes is reported, so that the list can grow; the pass rates themselves are
//! measured by the `toolplan-conformance` binary (bench/README.md).

use std::collections::BTreeSet;

use toolplan_conformance::report::{self, DEFAULT_SUITES};
use toolplan_conformance::run::Verdict;

#[tokio::test(flavor = "current_thread")]
async fn the_tests_that_passed_still_pass() {
    let outcome = report::run_suites(&report::vendored_dir(), DEFAULT_SUITES)
        .await
        .expect("the vendored suites are readable");
    let expected: BTreeSet<String> = include_str!("../passing.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect();
    // Test names may end in a space, which the list's lines do not keep.
    let passed: BTreeSet<String> = outcome
        .results
        .iter()
        .filter(|r| r.verdict == Verdict::Passed)
        .map(|r| r.id.trim().to_owned())
        .collect();
    let lost: Vec<String> = outcome
        .results
        .iter()
        .filter(|r| expected.contains(r.id.trim()) && r.verdict != Verdict::Passed)
        .map(|r| format!("{}: {:?}", r.id, r.verdict))
        .collect();
    let missing: Vec<&String> = expected
        .iter()
        .filter(|id| !outcome.results.iter().any(|r| r.id.trim() == id.as_str()))
        .collect();
    let new: Vec<&String> = passed.difference(&expected).collect();
    if !new.is_empty() {
        eprintln!("{} tests pass that passing.txt does not list:", new.len());
        for id in &new {
            eprintln!("  {id}");
        }
    }
    assert!(
        missing.is_empty(),
        "tests in passing.txt that no longer exist: {missing:?}"
    );
    assert!(
        lost.is_empty(),
        "{} tests no longer pass:\n{}",
        lost.len(),
        lost.join("\n")
    );
    assert!(
        expected.len() >= 90,
        "passing.txt lists {} tests",
        expected.len()
    );
}
