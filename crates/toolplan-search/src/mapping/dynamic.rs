//! Dynamic mapping: the fields a document brings that its index's mapping does not have, mapped as
//! OpenSearch maps them by default.
//!
//! A new field's type comes from its first value (the first non-null element of an array): text
//! becomes `text` with a `keyword` sub-field (`ignore_above: 256`), unless it reads as a date under
//! the root's `dynamic_date_formats` (`date_detection`, on by default) or as a number
//! (`numeric_detection`, off by default); a whole number `long`, a decimal `float`, a boolean
//! `boolean`; an object an object whose fields are mapped the same way, and so is every element of
//! an array of objects. A key with dots (`"a.b": 1`) is the path of objects it names. `null`, `[]`
//! and arrays of nulls add nothing.
//!
//! `dynamic` on the root and on any object (inherited by the objects inside) decides what a new
//! field does: `true` maps it, `false` leaves it in `_source` only, `strict` refuses the document.
//! A document is mapped whole or not at all: one refused leaves the mapping as it was.
//!
//! Limits ([`MappingLimits`], OpenSearch's own defaults): a mapping grows to at most
//! `max_mapped_fields` fields, sub-fields and objects, and `max_mapping_depth` levels of objects; a
//! document that would pass either is refused, naming the limit.

use serde_json::{Map, Value};

use super::{Dynamic, Mapping, is_object};
use crate::datemath::DateFormat;
use crate::error::SearchError;

/// How far documents may grow a mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MappingLimits {
    /// Most fields, sub-fields and objects (OpenSearch's `index.mapping.total_fields.limit`).
    pub max_fields: usize,
    /// Most levels of objects a field may sit under, the root's fields being at 1
    /// (`index.mapping.depth.limit`).
    pub max_depth: usize,
}

impl Default for MappingLimits {
    fn default() -> Self {
        Self {
            max_fields: 1000,
            max_depth: 20,
        }
    }
}

/// The dynamic date formats OpenSearch tries by default.
const DEFAULT_DATE_FORMATS: &[&str] = &[
    "strict_date_optional_time",
    "yyyy/MM/dd HH:mm:ss||yyyy/MM/dd",
];

/// What a new field's values are read as, from the mapping's root options.
struct Rules {
    dynamic: Dynamic,
    date_detection: bool,
    numeric_detection: bool,
    date_formats: Vec<(String, DateFormat)>,
}

impl Rules {
    fn of(root: &Map<String, Value>) -> Rules {
        let formats: Vec<String> = match root.get("dynamic_date_formats") {
            Some(Value::Array(list)) => list
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            _ => DEFAULT_DATE_FORMATS
                .iter()
                .map(|f| (*f).to_owned())
                .collect(),
        };
        Rules {
            dynamic: root
                .get("dynamic")
                .and_then(Dynamic::read)
                .unwrap_or_default(),
            date_detection: root.get("date_detection") != Some(&Value::Bool(false)),
            numeric_detection: root.get("numeric_detection") == Some(&Value::Bool(true)),
            date_formats: formats
                .into_iter()
                .filter_map(|f| DateFormat::parse(&f).ok().map(|parsed| (f, parsed)))
                .collect(),
        }
    }

    /// The mapping of a new field whose first value is the scalar `v`, and how many mappers it adds.
    fn leaf(&self, v: &Value) -> (Value, usize) {
        let ty = |t: &str| (serde_json::json!({ "type": t }), 1);
        match v {
            Value::Bool(_) => ty("boolean"),
            Value::Number(n) if n.is_f64() => ty("float"),
            Value::Number(_) => ty("long"),
            Value::String(s) => {
                if self.date_detection
                    && let Some(format) = self.date_formats.iter().position(|(_, f)| f.detects(s))
                {
                    // The first format is the one a date field has anyway.
                    return match format {
                        0 if self.date_formats[0].0 == "strict_date_optional_time" => ty("date"),
                        _ => (
                            serde_json::json!({
                                "type": "date",
                                "format": format!("{}||epoch_millis", self.date_formats[format].0),
                            }),
                            1,
                        ),
                    };
                }
                if self.numeric_detection {
                    if s.trim().parse::<i64>().is_ok() {
                        return ty("long");
                    }
                    if s.trim().parse::<f64>().is_ok_and(f64::is_finite) {
                        return ty("float");
                    }
                }
                (
                    serde_json::json!({
                        "type": "text",
                        "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}
                    }),
                    2,
                )
            }
            // Objects and nulls never reach here.
            _ => ty("object"),
        }
    }
}

/// Grows a mapping with the fields of documents, one document at a time.
pub struct Extender {
    root: Map<String, Value>,
    rules: Rules,
    limits: MappingLimits,
    count: usize,
    changed: bool,
}

impl Extender {
    /// Starts from `mapping`.
    pub fn new(mapping: &Mapping, limits: MappingLimits) -> Extender {
        Extender {
            root: mapping.root().clone(),
            rules: Rules::of(mapping.root()),
            limits,
            count: mapping.mapper_count(),
            changed: false,
        }
    }

    /// Maps the new fields of `doc`; a document the mapping refuses (a strict object, a value
    /// where an object is mapped, a limit) changes nothing and says why, as OpenSearch's
    /// mapper_parsing_exception.
    pub fn add(&mut self, doc: &Map<String, Value>) -> Result<(), String> {
        // Most documents bring nothing new: a look first, without copying the mapping.
        if !self.walk(doc, false)? {
            return Ok(());
        }
        let (saved, count) = (self.root.clone(), self.count);
        match self.walk(doc, true) {
            Ok(_) => {
                self.changed = true;
                Ok(())
            }
            Err(e) => {
                self.root = saved;
                self.count = count;
                Err(e)
            }
        }
    }

    /// Whether a document added anything.
    pub fn changed(&self) -> bool {
        self.changed
    }

    /// The mapping with every field the documents added.
    pub fn finish(self) -> Result<Mapping, SearchError> {
        Mapping::parse_strict(&Value::Object(self.root))
    }

    fn walk(&mut self, doc: &Map<String, Value>, apply: bool) -> Result<bool, String> {
        let dynamic = self.rules.dynamic;
        let Some(Value::Object(properties)) = self.root.get_mut("properties") else {
            return Ok(false);
        };
        let mut walk = Walk {
            rules: &self.rules,
            limits: self.limits,
            count: &mut self.count,
            apply,
        };
        walk.object(properties, dynamic, "", 1, doc)
    }
}

/// One walk of a document against the mapping. Without `apply` it only looks: it stops at the
/// first new field (answering true) and reports a document the mapping refuses.
struct Walk<'a> {
    rules: &'a Rules,
    limits: MappingLimits,
    count: &'a mut usize,
    apply: bool,
}

impl Walk<'_> {
    /// The fields of object `doc` at `path`, whose fields sit at `depth`.
    fn object(
        &mut self,
        properties: &mut Map<String, Value>,
        dynamic: Dynamic,
        path: &str,
        depth: usize,
        doc: &Map<String, Value>,
    ) -> Result<bool, String> {
        let mut new = false;
        for (key, value) in doc {
            let parts: Vec<&str> = key.split('.').collect();
            if parts.iter().any(|p| p.trim().is_empty()) {
                return Err(if key.trim().is_empty() {
                    "field name cannot be an empty string".to_owned()
                } else {
                    format!("field name [{key}] has an empty part between dots")
                });
            }
            if self.field(properties, dynamic, path, depth, &parts, value)? {
                new = true;
                if !self.apply {
                    return Ok(true);
                }
            }
        }
        Ok(new)
    }

    /// The value of the field `parts` names (several parts: `a.b` is field `b` of object `a`).
    fn field(
        &mut self,
        properties: &mut Map<String, Value>,
        dynamic: Dynamic,
        parent: &str,
        depth: usize,
        parts: &[&str],
        value: &Value,
    ) -> Result<bool, String> {
        let Some((name, rest)) = parts.split_first() else {
            return Ok(false);
        };
        let path = join(parent, name);
        match properties.get_mut(*name) {
            Some(Value::Object(def)) if is_object(def) => {
                if def.get("enabled") == Some(&Value::Bool(false)) {
                    return Ok(false);
                }
                let inner = def
                    .get("dynamic")
                    .and_then(Dynamic::read)
                    .unwrap_or(dynamic);
                let had = def.contains_key("properties");
                let found = match def
                    .entry("properties")
                    .or_insert_with(|| Value::Object(Map::new()))
                {
                    Value::Object(children) if rest.is_empty() => {
                        self.in_object(children, inner, &path, depth + 1, value)
                    }
                    Value::Object(children) => {
                        self.field(children, inner, &path, depth + 1, rest, value)
                    }
                    _ => Ok(false),
                };
                // `{"type": "object"}` with no fields stays as it was given.
                if !had
                    && def
                        .get("properties")
                        .and_then(Value::as_object)
                        .is_some_and(Map::is_empty)
                {
                    def.remove("properties");
                }
                found
            }
            // A field's values are checked as the document is indexed.
            Some(_) => Ok(false),
            None => self.unmapped(properties, dynamic, parent, depth, (name, rest), value),
        }
    }

    /// A field the mapping does not have: `name`, then the `rest` of a dotted key.
    fn unmapped(
        &mut self,
        properties: &mut Map<String, Value>,
        dynamic: Dynamic,
        parent: &str,
        depth: usize,
        (name, rest): (&str, &[&str]),
        value: &Value,
    ) -> Result<bool, String> {
        let Some(first) = first_value(value) else {
            return Ok(false);
        };
        match dynamic {
            Dynamic::False => return Ok(false),
            Dynamic::Strict => {
                return Err(format!(
                    "mapping set to strict, dynamic introduction of [{name}] within [{}] is not allowed",
                    if parent.is_empty() { "_doc" } else { parent }
                ));
            }
            Dynamic::True if !self.apply => return Ok(true),
            Dynamic::True => {}
        }
        let path = join(parent, name);
        if rest.is_empty() && !first.is_object() {
            let (def, mappers) = self.rules.leaf(first);
            self.grow(mappers)?;
            properties.insert(name.to_owned(), def);
            return Ok(true);
        }
        if depth + 1 > self.limits.max_depth {
            return Err(format!(
                "Limit of mapping depth [{}] has been exceeded due to object field [{path}]",
                self.limits.max_depth
            ));
        }
        self.grow(1)?;
        let mut children = Map::new();
        if rest.is_empty() {
            self.in_object(&mut children, dynamic, &path, depth + 1, value)?;
        } else {
            self.field(&mut children, dynamic, &path, depth + 1, rest, value)?;
        }
        let mut def = Map::new();
        if children.is_empty() {
            def.insert("type".into(), Value::from("object"));
        } else {
            def.insert("properties".into(), Value::Object(children));
        }
        properties.insert(name.to_owned(), Value::Object(def));
        Ok(true)
    }

    /// The value of an object field: an object, an array of them, or null.
    fn in_object(
        &mut self,
        children: &mut Map<String, Value>,
        dynamic: Dynamic,
        path: &str,
        depth: usize,
        value: &Value,
    ) -> Result<bool, String> {
        match value {
            Value::Object(o) => self.object(children, dynamic, path, depth, o),
            Value::Array(items) => {
                let mut new = false;
                for item in items {
                    if self.in_object(children, dynamic, path, depth, item)? {
                        new = true;
                        if !self.apply {
                            return Ok(true);
                        }
                    }
                }
                Ok(new)
            }
            Value::Null => Ok(false),
            _ => Err(format!(
                "object mapping for [{path}] tried to parse field [{path}] as object, but found a concrete value"
            )),
        }
    }

    /// Counts `n` more mappers, within the limit.
    fn grow(&mut self, n: usize) -> Result<(), String> {
        if *self.count + n > self.limits.max_fields {
            return Err(format!(
                "Limit of total fields [{}] has been exceeded while adding new fields [{n}]",
                self.limits.max_fields
            ));
        }
        *self.count += n;
        Ok(())
    }
}

/// The first value that decides a new field's type: the value, or an array's first non-null
/// element (through nested arrays).
fn first_value(value: &Value) -> Option<&Value> {
    match value {
        Value::Null => None,
        Value::Array(items) => items.iter().find_map(first_value),
        v => Some(v),
    }
}

fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_owned()
    } else {
        format!("{parent}.{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn grow(mapping: Value, docs: &[Value]) -> (Value, Vec<Result<(), String>>) {
        let mapping = Mapping::parse_strict(&mapping).expect("mapping");
        let mut ext = Extender::new(&mapping, MappingLimits::default());
        let results = docs
            .iter()
            .map(|d| ext.add(d.as_object().expect("object")))
            .collect();
        (ext.finish().expect("valid").to_json(), results)
    }

    #[test]
    fn values_map_as_opensearch_maps_them() {
        let (m, r) = grow(
            json!({"properties": {}}),
            &[json!({
                "title": "Moby Dick", "pages": 635, "price": 9.5, "used": false,
                "published": "1851-10-18", "slashed": "2015/09/02", "nothing": null, "empty": [],
                "tags": [null, "sea"], "author": {"name": "Melville", "born": {"year": 1819}},
                "reviews": [{"stars": 5}, {"stars": 4, "by": "Ann"}], "a.b": 1
            })],
        );
        assert_eq!(r, [Ok(())]);
        let p = &m["properties"];
        assert_eq!(
            p["title"],
            json!({"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}})
        );
        assert_eq!(p["pages"], json!({"type": "long"}));
        assert_eq!(p["price"], json!({"type": "float"}));
        assert_eq!(p["used"], json!({"type": "boolean"}));
        assert_eq!(p["published"], json!({"type": "date"}));
        assert_eq!(
            p["slashed"],
            json!({"type": "date", "format": "yyyy/MM/dd HH:mm:ss||yyyy/MM/dd||epoch_millis"})
        );
        assert!(p.get("nothing").is_none() && p.get("empty").is_none());
        assert_eq!(p["tags"]["type"], "text");
        assert_eq!(
            p["author"]["properties"]["born"]["properties"]["year"]["type"],
            "long"
        );
        assert_eq!(p["reviews"]["properties"]["by"]["type"], "text");
        assert_eq!(p["a"]["properties"]["b"]["type"], "long");
    }

    #[test]
    fn detection_is_switchable_and_numbers_in_text_stay_text() {
        let (m, _) = grow(
            json!({"date_detection": false, "numeric_detection": true, "properties": {}}),
            &[json!({"d": "2020-01-01", "n": "42", "x": "4.5", "y": "2024"})],
        );
        let p = &m["properties"];
        assert_eq!(p["d"]["type"], "text");
        assert_eq!(p["n"]["type"], "long");
        assert_eq!(p["x"]["type"], "float");
        let (m, _) = grow(json!({}), &[json!({"y": "2024", "n": "42"})]);
        assert_eq!(m["properties"]["y"]["type"], "text");
        assert_eq!(m["properties"]["n"]["type"], "text");
    }

    #[test]
    fn dynamic_false_and_strict_per_object() {
        let mapping = json!({"dynamic": "strict", "properties": {
            "open": {"dynamic": true, "properties": {}},
            "closed": {"dynamic": false, "properties": {}},
            "off": {"type": "object", "enabled": false}
        }});
        let (m, r) = grow(
            mapping,
            &[
                json!({"open": {"x": 1}, "closed": {"y": 1}, "off": {"z": 1}}),
                json!({"open": {"q": 2}, "new": 1}),
            ],
        );
        assert_eq!(r[0], Ok(()));
        assert_eq!(
            r[1],
            Err(
                "mapping set to strict, dynamic introduction of [new] within [_doc] is not allowed"
                    .into()
            )
        );
        let p = &m["properties"];
        assert_eq!(p["open"]["properties"]["x"]["type"], "long");
        // The refused document added nothing, not even its allowed field.
        assert!(p["open"]["properties"].get("q").is_none());
        assert_eq!(p["closed"]["properties"], json!({}));
        assert_eq!(p["off"], json!({"type": "object", "enabled": false}));
    }

    #[test]
    fn a_value_where_an_object_is_mapped_is_refused() {
        let (_, r) = grow(
            json!({"properties": {"user": {"properties": {"name": {"type": "keyword"}}}}}),
            &[
                json!({"user": "ann"}),
                json!({"user": [{"name": "a"}, {"name": "b"}]}),
            ],
        );
        assert_eq!(
            r,
            [
                Err("object mapping for [user] tried to parse field [user] as object, but found a concrete value".into()),
                Ok(())
            ]
        );
    }

    #[test]
    fn limits_refuse_the_document_that_passes_them() {
        let mapping = Mapping::parse_strict(&json!({})).expect("mapping");
        let limits = MappingLimits {
            max_fields: 5,
            max_depth: 3,
        };
        let mut ext = Extender::new(&mapping, limits);
        assert_eq!(
            ext.add(json!({"a": 1, "b": "x"}).as_object().expect("o")),
            Ok(())
        );
        let wide = json!({"c": 1, "d": 1, "e": 1});
        assert_eq!(
            ext.add(wide.as_object().expect("o")),
            Err("Limit of total fields [5] has been exceeded while adding new fields [1]".into())
        );
        let deep = json!({"o": {"p": {"q": {"r": 1}}}});
        assert!(
            ext.add(deep.as_object().expect("o"))
                .is_err_and(|e| e.contains("Limit of mapping depth [3]"))
        );
        let m = ext.finish().expect("valid").to_json();
        assert_eq!(m["properties"].as_object().map(Map::len), Some(2));
    }

    #[test]
    fn bad_field_names_are_refused() {
        let (_, r) = grow(json!({}), &[json!({"": 1}), json!({"a..b": 1})]);
        assert!(r.iter().all(Result::is_err));
    }
}
