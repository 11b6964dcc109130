//! Response filtering as OpenSearch's `filter_path` does it: only the parts of a response that
//! a list of paths names are kept, or (after `-`) left out.
//!
//! A path is dot-separated field names; a name may hold `*` wildcards, and `**` stands for any
//! number of levels. Arrays are transparent: a path goes through each element. With paths to keep,
//! a field is kept when a path names it (with everything under it) or something under it; objects
//! and arrays left empty go. Paths after `-` then take out what they name. `hits.hits._id,
//! hits.total` keeps the ids and the total of a search; `-**._source` keeps everything but the
//! documents.

use serde_json::{Map, Value};

use crate::backend::glob;
use crate::error::SearchError;

/// One level of a path.
#[derive(Debug, Clone, PartialEq)]
enum Segment {
    /// A field name, possibly with `*` wildcards.
    Name(String),
    /// `**`: any number of levels.
    AnyLevels,
}

type Path = Vec<Segment>;

/// A parsed `filter_path`: the paths to keep and the paths to leave out.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FilterPath {
    includes: Vec<Path>,
    excludes: Vec<Path>,
}

impl FilterPath {
    /// Reads `filter_path`: paths separated by commas (each `-path` to leave out), from text or
    /// a list of texts; at most `max_paths` of them (the search limit `max_filter_paths`).
    pub fn parse(spec: &Value, max_paths: usize) -> Result<FilterPath, SearchError> {
        let texts: Vec<String> = match spec {
            Value::String(s) => vec![s.clone()],
            Value::Array(items) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s.clone()),
                    other => Err(SearchError::InvalidParameter(format!(
                        "filter_path takes paths as text, found {other}"
                    ))),
                })
                .collect::<Result<_, _>>()?,
            other => {
                return Err(SearchError::InvalidParameter(format!(
                    "filter_path takes paths as text, found {other}"
                )));
            }
        };
        let mut out = FilterPath::default();
        for text in &texts {
            for raw in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                let (exclude, path) = match raw.strip_prefix('-') {
                    Some(rest) => (true, rest),
                    None => (false, raw),
                };
                let segments: Path = path
                    .split('.')
                    .map(|s| {
                        if s == "**" {
                            Segment::AnyLevels
                        } else {
                            Segment::Name(s.to_owned())
                        }
                    })
                    .collect();
                if exclude {
                    out.excludes.push(segments);
                } else {
                    out.includes.push(segments);
                }
            }
        }
        if out.includes.len() + out.excludes.len() > max_paths {
            return Err(SearchError::InvalidParameter(format!(
                "filter_path has more than {max_paths} paths (search limit max_filter_paths)"
            )));
        }
        Ok(out)
    }

    /// The response filtered: what the paths to keep name (everything, without any), less what
    /// the paths to leave out name. Nothing kept is an empty object.
    pub fn apply(&self, response: &Value) -> Value {
        let kept = if self.includes.is_empty() {
            Some(response.clone())
        } else {
            let paths: Vec<&[Segment]> = self.includes.iter().map(Vec::as_slice).collect();
            include(response, &paths)
        };
        let mut kept = kept.unwrap_or_else(|| Value::Object(Map::new()));
        if !self.excludes.is_empty() {
            let paths: Vec<&[Segment]> = self.excludes.iter().map(Vec::as_slice).collect();
            exclude(&mut kept, &paths);
        }
        kept
    }
}

/// What is left of each path after field `key`: `None` when one of them names the field whole;
/// otherwise the rests of the paths that go on below it (empty when none does).
fn step<'a>(paths: &[&'a [Segment]], key: &str) -> Option<Vec<&'a [Segment]>> {
    let mut next: Vec<&'a [Segment]> = Vec::new();
    let push = |rest: &'a [Segment], next: &mut Vec<&'a [Segment]>| -> bool {
        // A path that ends here, or in `**` only, names the whole field.
        if rest.is_empty() || rest.iter().all(|s| *s == Segment::AnyLevels) {
            return true;
        }
        if !next.contains(&rest) {
            next.push(rest);
        }
        false
    };
    for path in paths {
        match path.split_first() {
            None => return None,
            Some((Segment::AnyLevels, rest)) => {
                // `**` takes this level and stays, or takes none and the next segment matches.
                if push(path, &mut next) {
                    return None;
                }
                if let Some((Segment::Name(name), after)) = rest.split_first()
                    && glob(name, key)
                    && push(after, &mut next)
                {
                    return None;
                }
            }
            Some((Segment::Name(name), rest)) => {
                if glob(name, key) && push(rest, &mut next) {
                    return None;
                }
            }
        }
    }
    Some(next)
}

/// The part of `value` the paths name (each already matched down to here), `None` when nothing.
fn include(value: &Value, paths: &[&[Segment]]) -> Option<Value> {
    match value {
        Value::Object(o) => {
            let mut out = Map::new();
            for (k, child) in o {
                match step(paths, k) {
                    None => {
                        out.insert(k.clone(), child.clone());
                    }
                    Some(next) if !next.is_empty() => {
                        if let Some(kept) = include(child, &next) {
                            out.insert(k.clone(), kept);
                        }
                    }
                    Some(_) => {}
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        Value::Array(items) => {
            let kept: Vec<Value> = items.iter().filter_map(|i| include(i, paths)).collect();
            (!kept.is_empty()).then_some(Value::Array(kept))
        }
        // A path goes on below a value that has nothing below it.
        _ => None,
    }
}

/// Takes out of `value` what the paths name.
fn exclude(value: &mut Value, paths: &[&[Segment]]) {
    match value {
        Value::Object(o) => {
            let keys: Vec<String> = o.keys().cloned().collect();
            for k in keys {
                match step(paths, &k) {
                    None => {
                        o.remove(&k);
                    }
                    Some(next) if !next.is_empty() => {
                        if let Some(child) = o.get_mut(&k) {
                            exclude(child, &next);
                        }
                    }
                    Some(_) => {}
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                exclude(item, paths);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn response() -> Value {
        json!({"took": 3, "_shards": {"total": 1, "failed": 0},
               "hits": {"total": 2, "hits": [
                   {"_index": "a", "_id": "1", "_source": {"name": "x", "properties": {"size": 1, "meta": {"foo": "bar"}}}},
                   {"_index": "a", "_id": "2", "_source": {"name": "y"}}]}})
    }

    fn filtered(spec: Value) -> Value {
        FilterPath::parse(&spec, 100).unwrap().apply(&response())
    }

    #[test]
    fn paths_keep_what_they_name_through_arrays_and_wildcards() {
        assert_eq!(filtered(json!("took")), json!({"took": 3}));
        assert_eq!(
            filtered(json!("_shards.*")),
            json!({"_shards": {"total": 1, "failed": 0}})
        );
        assert_eq!(
            filtered(json!(["hits.**._i*", "**.total"])),
            json!({"_shards": {"total": 1}, "hits": {"total": 2, "hits": [
                {"_index": "a", "_id": "1"}, {"_index": "a", "_id": "2"}]}})
        );
        assert_eq!(
            filtered(json!("hits.hits._source.properties.size")),
            json!({"hits": {"hits": [{"_source": {"properties": {"size": 1}}}]}})
        );
        assert_eq!(filtered(json!("nothing.here")), json!({}));
        assert_eq!(filtered(json!("*")), response());
    }

    #[test]
    fn paths_after_a_minus_take_out_what_they_name() {
        let v = filtered(json!(["-**._source.properties", "**._source"]));
        assert_eq!(
            v,
            json!({"hits": {"hits": [{"_source": {"name": "x"}}, {"_source": {"name": "y"}}]}})
        );
        let v = filtered(json!("**._source,-**.meta.foo"));
        assert_eq!(
            v["hits"]["hits"][0]["_source"]["properties"],
            json!({"size": 1, "meta": {}})
        );
        assert_eq!(filtered(json!("-*")), json!({}));
        assert_eq!(filtered(json!("-took,-hits"))["_shards"]["total"], 1);
    }

    #[test]
    fn too_many_paths_are_refused() {
        let many = ["a"; 11].join(",");
        assert!(FilterPath::parse(&json!(many), 10).is_err());
        assert!(FilterPath::parse(&json!(many), 11).is_ok());
        assert!(FilterPath::parse(&json!(3), 10).is_err());
    }
}
