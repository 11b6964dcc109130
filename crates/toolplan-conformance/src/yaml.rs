//! YAML test files as JSON values. Scalars keep the types the Java runner's YAML reader gives them
//! (integers, decimals, booleans, null, and everything else a string: no timestamps).

use serde_json::{Map, Number, Value};
use yaml_rust2::{Yaml, YamlLoader};

use crate::Error;

/// Every document of a YAML text, as JSON.
pub fn documents(text: &str) -> Result<Vec<Value>, Error> {
    let docs = YamlLoader::load_from_str(text).map_err(|e| Error::Yaml(e.to_string()))?;
    docs.iter().map(|d| to_json(d, 0)).collect()
}

/// Deepest nesting read (the test files nest a dozen levels at most).
const MAX_DEPTH: usize = 256;

fn to_json(y: &Yaml, depth: usize) -> Result<Value, Error> {
    if depth > MAX_DEPTH {
        return Err(Error::Yaml(format!(
            "nested deeper than {MAX_DEPTH} levels"
        )));
    }
    Ok(match y {
        Yaml::Null => Value::Null,
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Integer(i) => Value::from(*i),
        Yaml::Real(text) => text
            .parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map_or_else(|| Value::String(text.clone()), Value::Number),
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Array(items) => Value::Array(
            items
                .iter()
                .map(|i| to_json(i, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        Yaml::Hash(hash) => {
            let mut map = Map::new();
            for (k, v) in hash {
                let key = match k {
                    Yaml::String(s) | Yaml::Real(s) => s.clone(),
                    Yaml::Integer(i) => i.to_string(),
                    Yaml::Boolean(b) => b.to_string(),
                    Yaml::Null => "null".to_owned(),
                    other => {
                        return Err(Error::Yaml(format!(
                            "a key that is not a scalar: {other:?}"
                        )));
                    }
                };
                map.insert(key, to_json(v, depth + 1)?);
            }
            Value::Object(map)
        }
        Yaml::Alias(_) | Yaml::BadValue => {
            return Err(Error::Yaml(
                "an alias or a value that could not be read".into(),
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scalars_keep_the_java_runners_types() {
        let docs = documents(
            "a: 1\nb: 1.5\nc: true\nd: ~\ne: 2020-01-01T00:00:00Z\nf: '1'\n---\ng: [x]\n",
        )
        .unwrap();
        assert_eq!(
            docs,
            [
                json!({"a": 1, "b": 1.5, "c": true, "d": null, "e": "2020-01-01T00:00:00Z", "f": "1"}),
                json!({"g": ["x"]})
            ]
        );
    }
}
