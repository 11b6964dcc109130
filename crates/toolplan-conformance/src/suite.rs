//! A YAML test file read into its sections: `setup`, `teardown` and the named tests, each a list of
//! [`Step`]s (the format of OpenSearch's `rest-api-spec/test/README.md`).

use serde_json::{Map, Value};

use crate::{Error, yaml};

/// One test file.
#[derive(Debug, Clone)]
pub struct Suite {
    /// The file's name within its suite directory (`20_default_values`).
    pub name: String,
    /// Steps run before each test.
    pub setup: Vec<Step>,
    /// Steps run after each test.
    pub teardown: Vec<Step>,
    /// The tests, in file order.
    pub tests: Vec<TestCase>,
}

/// One named test.
#[derive(Debug, Clone)]
pub struct TestCase {
    /// Its name.
    pub name: String,
    /// Its steps.
    pub steps: Vec<Step>,
}

/// When a test (or setup) is skipped.
#[derive(Debug, Clone, Default)]
pub struct Skip {
    /// Version ranges to skip (`" - 6.99.99"`, `"all"`), comma-separated.
    pub version: Option<String>,
    /// Runner features the test needs.
    pub features: Vec<String>,
    /// Why, as the file says.
    pub reason: Option<String>,
}

/// An API call.
#[derive(Debug, Clone)]
pub struct Do {
    /// The API's name (`search`, `indices.create`).
    pub api: String,
    /// Its parameters, the body left out.
    pub params: Map<String, Value>,
    /// Its body.
    pub body: Option<Value>,
    /// The error expected instead of an answer (`bad_request`, `missing`, `/regex/`).
    pub catch: Option<String>,
    /// Deprecation warnings the response must carry.
    pub warnings: Vec<String>,
    /// The HTTP headers the call sets.
    pub headers: Map<String, Value>,
}

/// How an ordering assertion compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// `gt`
    Gt,
    /// `gte`
    Gte,
    /// `lt`
    Lt,
    /// `lte`
    Lte,
}

/// One step of a test.
#[derive(Debug, Clone)]
pub enum Step {
    /// `skip`.
    Skip(Skip),
    /// `do`.
    Do(Box<Do>),
    /// `match: {path: expected}`.
    Match {
        /// Where in the response.
        path: String,
        /// The value expected there.
        expected: Value,
    },
    /// `length: {path: n}`.
    Length {
        /// Where.
        path: String,
        /// The length expected.
        expected: Value,
    },
    /// `is_true: path`.
    IsTrue(String),
    /// `is_false: path`.
    IsFalse(String),
    /// `gt`, `gte`, `lt`, `lte`.
    Compare {
        /// How.
        order: Order,
        /// Where.
        path: String,
        /// Against what.
        expected: Value,
    },
    /// `set: {path: name}`: stashes values of the response.
    Set(Vec<(String, String)>),
    /// `contains: {path: {…}}`.
    Contains {
        /// Where (a list of objects).
        path: String,
        /// The entries one of them must have.
        expected: Value,
    },
    /// A step this runner does not know (`transform_and_set`, `close_to` …).
    Unknown(String),
}

impl Suite {
    /// Reads a test file.
    pub fn parse(name: &str, text: &str) -> Result<Suite, Error> {
        let mut suite = Suite {
            name: name.to_owned(),
            setup: Vec::new(),
            teardown: Vec::new(),
            tests: Vec::new(),
        };
        let docs = yaml::documents(text).map_err(|e| Error::Format(format!("{name}: {e}")))?;
        for doc in docs {
            let Value::Object(sections) = doc else {
                if doc.is_null() {
                    continue;
                }
                return Err(Error::Format(format!(
                    "{name}: a document is not a map of sections"
                )));
            };
            for (section, steps) in sections {
                let steps = parse_steps(&steps)
                    .map_err(|e| Error::Format(format!("{name}: {section}: {e}")))?;
                match section.as_str() {
                    "setup" => suite.setup = steps,
                    "teardown" => suite.teardown = steps,
                    _ => suite.tests.push(TestCase {
                        name: section,
                        steps,
                    }),
                }
            }
        }
        Ok(suite)
    }
}

fn parse_steps(v: &Value) -> Result<Vec<Step>, String> {
    let Value::Array(items) = v else {
        return Err("a section is a list of steps".into());
    };
    items.iter().map(parse_step).collect()
}

fn parse_step(v: &Value) -> Result<Step, String> {
    let Value::Object(obj) = v else {
        return Err(format!("a step is a map, found {v}"));
    };
    let mut entries = obj.iter();
    let (Some((kind, body)), None) = (entries.next(), entries.next()) else {
        return Err(format!("a step has exactly one key, found {}", obj.len()));
    };
    let single = || -> Result<(String, Value), String> {
        match body {
            Value::Object(m) if m.len() == 1 => {
                let (k, v) = m.iter().next().ok_or("empty")?;
                Ok((k.clone(), v.clone()))
            }
            // `match: {path: value, epsilon: x}` is not in this runner's OpenSearch.
            other => Err(format!("{kind} takes one path, found {other}")),
        }
    };
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    Ok(match kind.as_str() {
        "skip" => Step::Skip(Skip {
            version: body.get("version").map(text),
            features: match body.get("features") {
                Some(Value::Array(f)) => f.iter().map(text).collect(),
                Some(f) => vec![text(f)],
                None => Vec::new(),
            },
            reason: body.get("reason").map(text),
        }),
        "do" => Step::Do(Box::new(parse_do(body)?)),
        "match" => {
            let (path, expected) = single()?;
            Step::Match { path, expected }
        }
        "length" => {
            let (path, expected) = single()?;
            Step::Length { path, expected }
        }
        "is_true" => Step::IsTrue(text(body)),
        "is_false" => Step::IsFalse(text(body)),
        "gt" | "gte" | "lt" | "lte" => {
            let (path, expected) = single()?;
            let order = match kind.as_str() {
                "gt" => Order::Gt,
                "gte" => Order::Gte,
                "lt" => Order::Lt,
                _ => Order::Lte,
            };
            Step::Compare {
                order,
                path,
                expected,
            }
        }
        "set" => match body {
            Value::Object(m) => Step::Set(m.iter().map(|(k, v)| (k.clone(), text(v))).collect()),
            other => return Err(format!("set takes a map, found {other}")),
        },
        "contains" => {
            let (path, expected) = single()?;
            Step::Contains { path, expected }
        }
        other => Step::Unknown(other.to_owned()),
    })
}

fn parse_do(body: &Value) -> Result<Do, String> {
    let Value::Object(obj) = body else {
        return Err(format!("do takes a map, found {body}"));
    };
    let mut call = None;
    let mut out = Do {
        api: String::new(),
        params: Map::new(),
        body: None,
        catch: None,
        warnings: Vec::new(),
        headers: Map::new(),
    };
    for (k, v) in obj {
        match k.as_str() {
            "catch" => out.catch = v.as_str().map(str::to_owned),
            "warnings" => {
                out.warnings = v
                    .as_array()
                    .map(|w| {
                        w.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
            }
            "allowed_warnings" | "allowed_warnings_regex" | "node_selector" => {}
            "headers" => out.headers = v.as_object().cloned().unwrap_or_default(),
            api => {
                if call.is_some() {
                    return Err(format!("do names two APIs: {api} and another"));
                }
                call = Some((api.to_owned(), v.clone()));
            }
        }
    }
    let (api, params) = call.ok_or("do names no API")?;
    out.api = api;
    match params {
        Value::Object(mut params) => {
            out.body = params.remove("body");
            out.params = params;
        }
        Value::Null => {}
        other => {
            return Err(format!(
                "the parameters of {} are not a map: {other}",
                out.api
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_reads_into_setup_and_tests() {
        let suite = Suite::parse(
            "x",
            "setup:\n  - do:\n      indices.create:\n        index: t\n---\n\"A test\":\n  - skip:\n      version: \" - 6.99.99\"\n      features: [contains]\n  - do:\n      catch: missing\n      search:\n        index: t\n        body: {query: {match_all: {}}}\n  - match: {hits.total: 1}\n  - is_false: aggregations\n  - gte: {took: 0}\n  - set: {hits.hits.0._id: id}\n",
        )
        .unwrap();
        assert_eq!(suite.setup.len(), 1);
        assert_eq!(suite.tests.len(), 1);
        let steps = &suite.tests[0].steps;
        assert!(matches!(&steps[0], Step::Skip(s) if s.features == ["contains"]));
        let Step::Do(d) = &steps[1] else { panic!() };
        assert_eq!(d.api, "search");
        assert_eq!(d.catch.as_deref(), Some("missing"));
        assert!(d.body.is_some());
        assert!(matches!(
            &steps[4],
            Step::Compare {
                order: Order::Gte,
                ..
            }
        ));
        assert!(matches!(&steps[5], Step::Set(s) if s[0].1 == "id"));
    }
}
