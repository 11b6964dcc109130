//! Running a suite: each test on a fresh embedded backend (an empty data directory, as the Java
//! runner wipes the cluster between tests), its setup first and its teardown last; the steps in
//! order until one fails. A test is skipped when its `skip` says so for the version this runner
//! stands for ([`VERSION`]) or it needs a runner feature this one lacks, and is not applicable when
//! it calls an API the runner does not implement or asks for deprecation warnings or HTTP headers.

use serde_json::{Value, json};
use toolplan_search::EmbeddedBackend;

use crate::api::{self, Outcome};
use crate::assert::{self as check, Stash};
use crate::suite::{Do, Skip, Step, Suite, TestCase};

/// The OpenSearch version the runner claims, for `skip: version` (the vendored tests' own).
pub const VERSION: (u32, u32, u32) = (3, 0, 0);

/// Runner features this runner has (`skip: features` naming another skips the test).
pub const FEATURES: &[&str] = &[
    "contains",
    "headers",
    "allowed_warnings",
    "allowed_warnings_regex",
    "arbitrary_key",
    "stash_in_key",
    "stash_in_path",
];

/// How one test ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Every step passed.
    Passed,
    /// A step failed: its number (setup steps first), what it was, and why.
    Failed {
        /// 0-based index among the steps run (setup, then the test's).
        step: usize,
        /// The step, briefly.
        what: String,
        /// Why it failed.
        why: String,
    },
    /// Skipped by the file's `skip`.
    Skipped(String),
    /// Needs what this runner does not implement.
    NotApplicable(String),
}

/// One test's result.
#[derive(Debug, Clone)]
pub struct TestResult {
    /// `suite/file/test name`.
    pub id: String,
    /// How it ended.
    pub verdict: Verdict,
    /// Steps (setup and test, skips left out).
    pub steps: usize,
    /// Steps that passed.
    pub passed_steps: usize,
}

/// Runs every test of `suite` (`dir` names its suite directory, for ids).
pub async fn run_suite(dir: &str, suite: &Suite) -> Vec<TestResult> {
    let mut out = Vec::new();
    for test in &suite.tests {
        out.push(run_test(dir, suite, test).await);
    }
    out
}

/// Whether a `skip` applies: a version range holding [`VERSION`], or a feature not in
/// [`FEATURES`].
pub fn skipped(skip: &Skip) -> Option<String> {
    if let Some(feature) = skip
        .features
        .iter()
        .find(|f| !FEATURES.contains(&f.as_str()))
    {
        return Some(format!("needs the runner feature {feature}"));
    }
    let version = skip.version.as_deref()?;
    let why = || {
        format!(
            "skipped for version {version}: {}",
            skip.reason.as_deref().unwrap_or("")
        )
    };
    if version.trim() == "all" {
        return Some(why());
    }
    version
        .split(',')
        .any(|range| in_range(range.trim()))
        .then(why)
}

fn in_range(range: &str) -> bool {
    // Elasticsearch's versions (5.x to 8.x), which the files inherited, come before OpenSearch
    // 1.0.0, as in OpenSearch's own `Version`.
    let parse = |v: &str| -> Option<(u32, u32, u32)> {
        let mut parts = v.trim().split('.').map(|p| p.trim().parse::<u32>().ok());
        let version = (
            parts.next()??,
            parts.next().flatten().unwrap_or(0),
            parts.next().flatten().unwrap_or(0),
        );
        Some(if version.0 >= 5 {
            (0, version.0, version.1)
        } else {
            version
        })
    };
    let Some((low, high)) = range.split_once(" - ").or_else(|| range.split_once('-')) else {
        return parse(range) == Some(VERSION);
    };
    let low = if low.trim().is_empty() {
        Some((0, 0, 0))
    } else {
        parse(low)
    };
    let high = if high.trim().is_empty() {
        Some((u32::MAX, 0, 0))
    } else {
        parse(high)
    };
    matches!((low, high), (Some(l), Some(h)) if l <= VERSION && VERSION <= h)
}

async fn run_test(dir: &str, suite: &Suite, test: &TestCase) -> TestResult {
    let id = format!("{dir}/{}/{}", suite.name, test.name);
    let mut result = TestResult {
        id,
        verdict: Verdict::Passed,
        steps: 0,
        passed_steps: 0,
    };
    for step in suite.setup.iter().chain(&test.steps) {
        if let Step::Skip(skip) = step
            && let Some(why) = skipped(skip)
        {
            result.verdict = Verdict::Skipped(why);
            return result;
        }
    }
    let counted = |steps: &[Step]| steps.iter().filter(|s| !matches!(s, Step::Skip(_))).count();
    result.steps = counted(&suite.setup) + counted(&test.steps);
    let Ok(dir) = tempfile::tempdir() else {
        result.verdict = Verdict::NotApplicable("no temporary directory".into());
        return result;
    };
    let backend = match EmbeddedBackend::open(dir.path()) {
        Ok(b) => b,
        Err(e) => {
            result.verdict = Verdict::NotApplicable(format!("no backend: {e}"));
            return result;
        }
    };
    let mut state = State {
        backend: &backend,
        stash: Stash::default(),
        response: Value::Null,
    };
    // The setup's steps, then the test's; what the setup stashed is forgotten in between.
    let steps = suite
        .setup
        .iter()
        .map(|s| (true, s))
        .chain(test.steps.iter().map(|s| (false, s)))
        .filter(|(_, s)| !matches!(s, Step::Skip(_)));
    let mut in_setup = true;
    for (index, (setup, step)) in steps.enumerate() {
        if in_setup && !setup {
            state.stash.clear();
            in_setup = false;
        }
        match state.step(step).await {
            Ok(()) => result.passed_steps += 1,
            Err(fail) => {
                result.verdict = fail.verdict(index, step);
                return result;
            }
        }
    }
    for step in &suite.teardown {
        let _ = state.step(step).await;
    }
    result
}

/// Why a step did not pass.
enum Fail {
    Failed(String),
    NotApplicable(String),
}

impl Fail {
    fn verdict(self, step: usize, what: &Step) -> Verdict {
        match self {
            Fail::Failed(why) => Verdict::Failed {
                step,
                what: describe(what),
                why,
            },
            Fail::NotApplicable(why) => Verdict::NotApplicable(why),
        }
    }
}

/// A step in a few words, for reports.
fn describe(step: &Step) -> String {
    match step {
        Step::Do(d) => format!("do {}", d.api),
        Step::Match { path, .. } => format!("match {path}"),
        Step::Length { path, .. } => format!("length {path}"),
        Step::IsTrue(p) => format!("is_true {p}"),
        Step::IsFalse(p) => format!("is_false {p}"),
        Step::Compare { order, path, .. } => format!("{order:?} {path}"),
        Step::Set(_) => "set".into(),
        Step::Contains { path, .. } => format!("contains {path}"),
        Step::Skip(_) => "skip".into(),
        Step::Unknown(k) => k.clone(),
    }
}

struct State<'a> {
    backend: &'a EmbeddedBackend,
    stash: Stash,
    response: Value,
}

impl State<'_> {
    async fn step(&mut self, step: &Step) -> Result<(), Fail> {
        let at = |s: &Self, path: &str| -> Result<Option<Value>, Fail> {
            check::lookup(&s.response, path, &s.stash).map_err(Fail::Failed)
        };
        match step {
            Step::Skip(_) => Ok(()),
            Step::Do(call) => self.call(call).await,
            Step::Match { path, expected } => {
                let expected = self.expected(expected);
                check::matches(at(self, path)?.as_ref(), &expected).map_err(Fail::Failed)
            }
            Step::Length { path, expected } => {
                check::length(at(self, path)?.as_ref(), &self.expected(expected))
                    .map_err(Fail::Failed)
            }
            Step::IsTrue(path) => {
                if check::truthy(at(self, path)?.as_ref()) {
                    Ok(())
                } else {
                    Err(Fail::Failed(format!("{path} is not true")))
                }
            }
            Step::IsFalse(path) => {
                if check::truthy(at(self, path)?.as_ref()) {
                    Err(Fail::Failed(format!("{path} is not false")))
                } else {
                    Ok(())
                }
            }
            Step::Compare {
                order,
                path,
                expected,
            } => check::compare(*order, at(self, path)?.as_ref(), &self.expected(expected))
                .map_err(Fail::Failed),
            Step::Set(pairs) => {
                for (path, name) in pairs {
                    let value = at(self, path)?.unwrap_or(Value::Null);
                    self.stash.set(name, value);
                }
                Ok(())
            }
            Step::Contains { path, expected } => {
                check::contains(at(self, path)?.as_ref(), &self.expected(expected))
                    .map_err(Fail::Failed)
            }
            Step::Unknown(kind) => Err(Fail::NotApplicable(format!(
                "the runner has no {kind} step"
            ))),
        }
    }

    fn expected(&self, expected: &Value) -> Value {
        self.stash.replace(expected)
    }

    async fn call(&mut self, call: &Do) -> Result<(), Fail> {
        if !call.warnings.is_empty() {
            return Err(Fail::NotApplicable("asks for deprecation warnings".into()));
        }
        // Headers that say the body is JSON change nothing; others are HTTP's business.
        if let Some((name, value)) = call.headers.iter().find(|(name, value)| {
            !(matches!(
                name.to_ascii_lowercase().as_str(),
                "content-type" | "accept"
            ) && value
                .as_str()
                .is_some_and(|v| v.starts_with("application/json")))
        }) {
            return Err(Fail::NotApplicable(format!(
                "sets the HTTP header {name}: {value}"
            )));
        }
        let params = match self.stash.replace(&Value::Object(call.params.clone())) {
            Value::Object(p) => p,
            _ => call.params.clone(),
        };
        let body = call.body.as_ref().map(|b| self.stash.replace(b));
        let outcome = api::call(self.backend, &call.api, &params, body.as_ref()).await;
        let (status, body) = match outcome {
            Outcome::NotApplicable(why) => return Err(Fail::NotApplicable(why)),
            Outcome::Ok(body) => (200, body),
            Outcome::Err { status, body } => (status, body),
        };
        self.stash.set("body", body.clone());
        self.response = body;
        match (&call.catch, status) {
            (None, 200) => Ok(()),
            (None, _) => Err(Fail::Failed(format!(
                "{} failed with {status}: {}",
                call.api, self.response["error"]["reason"]
            ))),
            (Some(catch), _) => expect_error(catch, status, &self.response),
        }
    }
}

/// Whether a response is the error a `catch` asks for.
fn expect_error(catch: &str, status: u16, body: &Value) -> Result<(), Fail> {
    let wanted = match catch {
        "bad_request" => Some(400),
        "unauthorized" => Some(401),
        "forbidden" => Some(403),
        "missing" => Some(404),
        "request_timeout" => Some(408),
        "conflict" => Some(409),
        "unavailable" => Some(503),
        "request" => None,
        // A parameter the client refuses before sending: the runner's own check.
        "param" => return Err(Fail::NotApplicable("a client-side parameter check".into())),
        _ => None,
    };
    if status == 200 {
        return Err(Fail::Failed(format!(
            "expected an error ({catch}), the call succeeded"
        )));
    }
    match wanted {
        Some(code) if code != status => Err(Fail::Failed(format!(
            "expected {catch} ({code}), got {status}: {}",
            body["error"]["reason"]
        ))),
        Some(_) => Ok(()),
        None if catch.starts_with('/') && catch.ends_with('/') && catch.len() > 2 => {
            let text = json!({"type": body["error"]["type"], "reason": body["error"]["reason"]})
                .to_string();
            // The runner's `catch` pattern is a plain Java regex found in the message: unlike a
            // `match` assertion's, its spaces count.
            let pattern = &catch[1..catch.len() - 1];
            let re = regex::Regex::new(pattern)
                .map_err(|e| Fail::Failed(format!("bad regex {catch}: {e}")))?;
            if re.is_match(&text) {
                Ok(())
            } else {
                Err(Fail::Failed(format!("{text:?} does not match {catch}")))
            }
        }
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_ranges_and_features() {
        let skip = |v: &str| Skip {
            version: Some(v.into()),
            ..Skip::default()
        };
        assert!(skipped(&skip(" - 6.99.99")).is_none());
        assert!(skipped(&skip(" - 7.1.99")).is_none());
        assert!(skipped(&skip("7.2.0 - ")).is_some());
        assert!(skipped(&skip("3.0.0 - ")).is_some());
        assert!(skipped(&skip(" - 2.99.99, 3.0.0 - 3.0.0")).is_some());
        assert!(skipped(&skip("all")).is_some());
        assert!(
            skipped(&Skip {
                features: vec!["warnings".into()],
                ..Skip::default()
            })
            .is_some()
        );
        assert!(
            skipped(&Skip {
                features: vec!["contains".into()],
                ..Skip::default()
            })
            .is_none()
        );
    }
}
