//! Reading the suite directories, running them, and the table of what passed.

use std::collections::BTreeMap;
use std::path::Path;

use crate::Error;
use crate::run::{TestResult, Verdict, run_suite};
use crate::suite::Suite;

/// The suites run by default (directories of the vendored tests).
pub const DEFAULT_SUITES: &[&str] = &[
    "search",
    "search.aggregation",
    "count",
    "msearch",
    "indices.create",
    "indices.put_mapping",
    "indices.get_mapping",
];

/// The vendored tests' directory.
pub fn vendored_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("opensearch-yaml")
}

/// Every file of the suite directory `suite` under `root`, read, in name order; a file that cannot
/// be read as a test file is an error of its own, beside the others.
pub fn read_suite(root: &Path, suite: &str) -> Result<Vec<Result<Suite, Error>>, Error> {
    let dir = root.join(suite);
    let io = |e: std::io::Error| Error::Io {
        path: dir.display().to_string(),
        source: e,
    };
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .map_err(io)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yml" || x == "yaml"))
        .collect();
    files.sort();
    Ok(files
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).map_err(|e| Error::Io {
                path: path.display().to_string(),
                source: e,
            })?;
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            Suite::parse(&name, &text).map_err(|e| match e {
                Error::Format(m) => Error::Format(format!("{suite}/{m}")),
                other => other,
            })
        })
        .collect())
}

/// What running the suites gave: every test's result, and the files that could not be read.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Every test's result.
    pub results: Vec<TestResult>,
    /// Files that are not test files this runner can read, with why.
    pub unread: Vec<String>,
}

/// Runs the suites.
pub async fn run_suites(root: &Path, suites: &[&str]) -> Result<Outcome, Error> {
    let mut out = Outcome::default();
    for suite in suites {
        for file in read_suite(root, suite)? {
            match file {
                Ok(file) => out.results.extend(run_suite(suite, &file).await),
                Err(e) => out.unread.push(e.to_string()),
            }
        }
    }
    Ok(out)
}

/// Counts for one suite.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    /// Tests in the files.
    pub tests: usize,
    /// Skipped by the files' own `skip`.
    pub skipped: usize,
    /// Needing what the runner does not implement.
    pub not_applicable: usize,
    /// The rest: run.
    pub applicable: usize,
    /// Run and passed.
    pub passed: usize,
    /// Steps of the tests run.
    pub steps: usize,
    /// Of those, passed.
    pub passed_steps: usize,
}

/// Counts per suite (the first segment of each test's id), in name order.
pub fn counts(results: &[TestResult]) -> BTreeMap<String, Counts> {
    let mut out: BTreeMap<String, Counts> = BTreeMap::new();
    for r in results {
        let suite = r.id.split('/').next().unwrap_or_default().to_owned();
        let c = out.entry(suite).or_default();
        c.tests += 1;
        match &r.verdict {
            Verdict::Skipped(_) => c.skipped += 1,
            Verdict::NotApplicable(_) => c.not_applicable += 1,
            v => {
                c.applicable += 1;
                c.steps += r.steps;
                c.passed_steps += r.passed_steps;
                if *v == Verdict::Passed {
                    c.passed += 1;
                }
            }
        }
    }
    out
}

/// The table of [`counts`], with a total line.
pub fn table(results: &[TestResult]) -> String {
    let per = counts(results);
    let mut total = Counts::default();
    let pct = |a: usize, b: usize| {
        if b == 0 {
            0.0
        } else {
            100.0 * a as f64 / b as f64
        }
    };
    let mut out = format!(
        "{:<22} {:>6} {:>8} {:>8} {:>8} {:>7} {:>7} {:>7} {:>7}\n",
        "suite", "tests", "skipped", "n/a", "run", "passed", "tests%", "steps", "steps%"
    );
    let mut line = |name: &str, c: &Counts| {
        out.push_str(&format!(
            "{:<22} {:>6} {:>8} {:>8} {:>8} {:>7} {:>6.1}% {:>7} {:>6.1}%\n",
            name,
            c.tests,
            c.skipped,
            c.not_applicable,
            c.applicable,
            c.passed,
            pct(c.passed, c.applicable),
            c.steps,
            pct(c.passed_steps, c.steps)
        ));
    };
    for (name, c) in &per {
        line(name, c);
        total.tests += c.tests;
        total.skipped += c.skipped;
        total.not_applicable += c.not_applicable;
        total.applicable += c.applicable;
        total.passed += c.passed;
        total.steps += c.steps;
        total.passed_steps += c.passed_steps;
    }
    line("all", &total);
    out
}

/// One line per test: its id and verdict.
pub fn details(results: &[TestResult]) -> String {
    results
        .iter()
        .map(|r| {
            let verdict = match &r.verdict {
                Verdict::Passed => "pass".to_owned(),
                Verdict::Failed { step, what, why } => {
                    format!("FAIL at step {step} ({what}): {why}")
                }
                Verdict::Skipped(why) => format!("skip: {why}"),
                Verdict::NotApplicable(why) => format!("n/a: {why}"),
            };
            format!("{}\t{}/{}\t{verdict}\n", r.id, r.passed_steps, r.steps)
        })
        .collect()
}
