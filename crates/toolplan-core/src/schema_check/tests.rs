//! The unit tests of [`reconcile`](super::reconcile): each reading, subschemas of every kind, deep
//! schemas, long values in warnings, consistent schemas left alone, and idempotence (proptest).

use super::*;
use proptest::prelude::*;
use serde_json::{Map, Number, Value, json};

/// The reading and the warnings of `schema`.
fn reading(schema: Value) -> (Value, Vec<String>) {
    let r = reconcile(schema);
    (r.schema, r.warnings)
}

/// Asserts that `schema` is consistent: it comes back as it was, without warnings.
fn assert_consistent(schema: Value) {
    let (read, warnings) = reading(schema.clone());
    assert!(warnings.is_empty(), "{schema}: {warnings:?}");
    assert_eq!(read, schema);
    // Not even the order of keys changes.
    assert_eq!(read.to_string(), schema.to_string());
}

#[test]
fn a_boolean_with_string_choices_is_a_boolean() {
    let (schema, warnings) = reading(json!({"type": "object", "properties": {
        "has_laundry": {"type": "boolean", "enum": ["True", "False", "dontcare"],
                        "description": "Whether there is laundry."}},
        "required": ["has_laundry"]}));
    assert_eq!(
        schema,
        json!({"type": "object", "properties": {
            "has_laundry": {"type": "boolean", "enum": [true, false],
                            "description": "Whether there is laundry."}},
            "required": ["has_laundry"]})
    );
    assert_eq!(
        warnings,
        [
            r#"/properties/has_laundry/enum: the values "True", "False", "dontcare" are not boolean; read as enum [true, false]"#
        ]
    );
}

#[test]
fn enum_values_convert_to_the_type_or_go() {
    let cases = [
        (
            json!({"type": "integer", "enum": ["3", "2.5", "x", 3, "4.0"]}),
            json!({"type": "integer", "enum": [3, 4]}),
        ),
        (
            json!({"type": "number", "enum": ["2.5", "-1", "1e3", "NaN", "inf"]}),
            json!({"type": "number", "enum": [2.5, -1, 1000.0]}),
        ),
        (
            json!({"type": "string", "enum": [1, true, "a", 2.5, null, "1"]}),
            json!({"type": "string", "enum": ["1", "true", "a", "2.5"]}),
        ),
        (
            json!({"type": "boolean", "enum": ["TRUE", "true", true, "yes"]}),
            json!({"type": "boolean", "enum": [true]}),
        ),
        // With a list of types a value may have any of them; a misfit goes to the first it fits.
        (
            json!({"type": ["integer", "string"], "enum": [1, "a", true, 2.5]}),
            json!({"type": ["integer", "string"], "enum": [1, "a", "true", "2.5"]}),
        ),
        (
            json!({"type": "boolean", "enum": ["dontcare", "maybe"]}),
            json!({"type": "boolean"}),
        ),
        (
            json!({"type": "boolean", "const": "True"}),
            json!({"type": "boolean", "const": true}),
        ),
        (
            json!({"type": "integer", "const": "many"}),
            json!({"type": "integer"}),
        ),
    ];
    for (schema, expected) in cases {
        let (read, warnings) = reading(schema.clone());
        assert_eq!(read, expected, "{schema}");
        assert_eq!(warnings.len(), 1, "{schema}: {warnings:?}");
    }
    let (_, warnings) = reading(json!({"type": "boolean", "enum": ["dontcare"]}));
    assert_eq!(
        warnings,
        [r#"/enum: the value "dontcare" is not boolean; no value is left, so the enum is removed"#]
    );
    let (_, warnings) = reading(json!({"type": "integer", "const": "many"}));
    assert_eq!(
        warnings,
        [r#"/const: "many" is not integer; const removed"#]
    );
}

#[test]
fn defaults_follow_the_type_and_the_enum() {
    let cases = [
        (
            json!({"type": "boolean", "default": "False"}),
            json!({"type": "boolean", "default": false}),
            r#"/default: "False" is not boolean; read as default false"#,
        ),
        (
            json!({"type": "boolean", "default": "maybe"}),
            json!({"type": "boolean"}),
            r#"/default: "maybe" is not boolean; default removed"#,
        ),
        (
            json!({"type": "string", "enum": ["a", "b"], "default": "c"}),
            json!({"type": "string", "enum": ["a", "b"]}),
            r#"/default: "c" is not one of the enum; default removed"#,
        ),
        (
            json!({"type": "string", "default": null}),
            json!({"type": "string"}),
            "/default: null is not string; default removed",
        ),
        // Converted, the default must still be one of the enum.
        (
            json!({"type": "integer", "enum": [1, 2], "default": "3"}),
            json!({"type": "integer", "enum": [1, 2]}),
            r#"/default: "3" is not integer; default removed"#,
        ),
        (
            json!({"type": "boolean", "enum": ["True", "False", "dontcare"], "default": "dontcare"}),
            json!({"type": "boolean", "enum": [true, false]}),
            r#"/default: "dontcare" is not boolean; default removed"#,
        ),
    ];
    for (schema, expected, warning) in cases {
        let (read, warnings) = reading(schema.clone());
        assert_eq!(read, expected, "{schema}");
        assert_eq!(
            warnings.last().map(String::as_str),
            Some(warning),
            "{schema}"
        );
    }
    // 1.0 is 1 for JSON Schema.
    assert_consistent(json!({"type": "integer", "enum": [1, 2], "default": 1.0}));
    // Without a type, the enum alone decides.
    let (read, _) = reading(json!({"enum": ["a"], "default": "b"}));
    assert_eq!(read, json!({"enum": ["a"]}));
}

#[test]
fn python_type_names_are_json_schema_types() {
    let (schema, warnings) = reading(json!({"type": "dict", "properties": {
        "a": {"type": "float"},
        "b": {"type": "int", "default": "3"},
        "c": {"type": "any"},
        "d": {"type": "tuple", "items": {"type": "str"}},
        "e": {"type": "bool"},
        "f": {"type": "list"},
        "g": {"type": "String"},
        "h": {"type": "frobnicate"},
        "i": {"type": ["int", "null", "integer"]},
        "j": {"type": ["str", "any"]},
    }}));
    assert_eq!(
        schema,
        json!({"type": "object", "properties": {
            "a": {"type": "number"},
            "b": {"type": "integer", "default": 3},
            "c": {},
            "d": {"type": "array", "items": {"type": "string"}},
            "e": {"type": "boolean"},
            "f": {"type": "array"},
            "g": {"type": "string"},
            "h": {},
            "i": {"type": ["integer", "null"]},
            "j": {},
        }})
    );
    assert_eq!(
        warnings,
        [
            r#"/type: "dict" is not a JSON Schema type; read as "object""#,
            r#"/properties/a/type: "float" is not a JSON Schema type; read as "number""#,
            r#"/properties/b/type: "int" is not a JSON Schema type; read as "integer""#,
            r#"/properties/b/default: "3" is not integer; read as default 3"#,
            r#"/properties/c/type: "any" allows every value; type removed"#,
            r#"/properties/d/type: "tuple" is not a JSON Schema type; read as "array""#,
            r#"/properties/d/items/type: "str" is not a JSON Schema type; read as "string""#,
            r#"/properties/e/type: "bool" is not a JSON Schema type; read as "boolean""#,
            r#"/properties/f/type: "list" is not a JSON Schema type; read as "array""#,
            r#"/properties/g/type: "String" is not a JSON Schema type; read as "string""#,
            r#"/properties/h/type: "frobnicate" is not a JSON Schema type; type removed"#,
            r#"/properties/i/type: "int", "null", "integer" are not all JSON Schema types; read as ["integer","null"]"#,
            r#"/properties/j/type: "str", "any" include one that allows every value; type removed"#,
        ]
    );
    // A type that is not a name at all is the validator's to refuse.
    assert_consistent(json!({"type": 12}));
    assert_consistent(json!({"type": [1, "string"]}));
}

#[test]
fn required_properties_that_cannot_be_given_are_dropped() {
    let (schema, warnings) = reading(json!({"type": "object",
        "properties": {"a": {"type": "string"}}, "required": ["a", "b", "c"],
        "additionalProperties": false}));
    assert_eq!(
        schema,
        json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
               "additionalProperties": false})
    );
    assert_eq!(
        warnings,
        [
            r#"/required: the required properties "b", "c" are not among the properties and additionalProperties is false, so no arguments could have them; dropped from required"#
        ]
    );
    let (schema, _) = reading(json!({"required": ["x"], "additionalProperties": false}));
    assert_eq!(schema, json!({"additionalProperties": false}));
    // Other properties may be given: nothing is impossible.
    assert_consistent(
        json!({"properties": {"a": {}}, "required": ["a", "b"], "additionalProperties": true}),
    );
    assert_consistent(json!({"properties": {"a": {}}, "required": ["b"]}));
    assert_consistent(json!({"properties": {"a": {}}, "required": ["b"],
                              "patternProperties": {"^b$": {}}, "additionalProperties": false}));
}

#[test]
fn bounds_that_allow_nothing_are_removed() {
    let (schema, warnings) = reading(json!({"type": "integer", "minimum": 5, "maximum": 3}));
    assert_eq!(schema, json!({"type": "integer"}));
    assert_eq!(
        warnings,
        ["/minimum: minimum 5 and maximum 3 allow no value; both removed"]
    );
    for (schema, expected) in [
        (
            json!({"exclusiveMinimum": 2, "exclusiveMaximum": 2, "multipleOf": 1}),
            json!({"multipleOf": 1}),
        ),
        (json!({"minimum": 2, "exclusiveMaximum": 2}), json!({})),
        (json!({"exclusiveMinimum": 3, "maximum": 1.5}), json!({})),
        (
            json!({"type": "string", "minLength": 10, "maxLength": 2}),
            json!({"type": "string"}),
        ),
        (
            json!({"minItems": 3, "maxItems": 1, "items": {"type": "string"}}),
            json!({"items": {"type": "string"}}),
        ),
        (json!({"minProperties": 2, "maxProperties": 0}), json!({})),
    ] {
        let (read, warnings) = reading(schema.clone());
        assert_eq!(read, expected, "{schema}");
        assert_eq!(warnings.len(), 1, "{schema}: {warnings:?}");
    }
    assert_consistent(json!({"minimum": 3, "maximum": 3, "minLength": 0, "maxLength": 0}));
    // Draft 4's boolean exclusive bounds are not numbers to compare.
    assert_consistent(json!({"minimum": 1, "maximum": 5, "exclusiveMinimum": true}));
}

#[test]
fn every_kind_of_subschema_is_read() {
    let bad = json!({"type": "boolean", "enum": ["True"]});
    let good = json!({"type": "boolean", "enum": [true]});
    let schema = json!({
        "items": bad, "prefixItems": [bad], "additionalProperties": bad, "not": bad,
        "anyOf": [{}, bad], "oneOf": [bad], "allOf": [bad], "$defs": {"x": bad},
        "definitions": {"y": bad}, "properties": {"a/b~c": bad},
        "patternProperties": {"^p": bad}, "if": bad, "then": bad, "else": bad,
        "contains": bad, "propertyNames": bad, "dependentSchemas": {"d": bad},
    });
    let (read, warnings) = reading(schema);
    let pointers: Vec<&str> = warnings
        .iter()
        .map(|w| w.split(": ").next().unwrap_or(""))
        .collect();
    assert_eq!(
        pointers,
        [
            "/items/enum",
            "/additionalProperties/enum",
            "/not/enum",
            "/contains/enum",
            "/if/enum",
            "/then/enum",
            "/else/enum",
            "/propertyNames/enum",
            "/prefixItems/0/enum",
            "/anyOf/1/enum",
            "/oneOf/0/enum",
            "/allOf/0/enum",
            "/properties/a~1b~0c/enum",
            "/patternProperties/^p/enum",
            "/$defs/x/enum",
            "/definitions/y/enum",
            "/dependentSchemas/d/enum",
        ]
    );
    assert_eq!(read["anyOf"][1], good);
    assert_eq!(read["properties"]["a/b~c"], good);
    // `items` in its array form (draft 4).
    let (read, _) = reading(json!({"items": [bad, {}]}));
    assert_eq!(read, json!({"items": [good, {}]}));
}

/// `{"not": {"not": … leaf …}}`, `depth` levels of `not` above `leaf`, built without
/// recursion.
fn nested(depth: usize, leaf: Value) -> Value {
    let mut schema = leaf;
    for _ in 0..depth {
        let mut map = Map::new();
        map.insert("not".to_owned(), schema);
        schema = Value::Object(map);
    }
    schema
}

#[test]
fn deep_schemas_are_read_down_to_the_limit() {
    let bad = json!({"type": "boolean", "enum": ["True"]});
    // The deepest level read.
    let (read, warnings) = reading(nested(MAX_SCHEMA_DEPTH - 1, bad.clone()));
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let (_, again) = reading(read);
    assert!(again.is_empty());
    // One level further: left as it is, with one warning.
    let schema = nested(MAX_SCHEMA_DEPTH, bad.clone());
    let (read, warnings) = reading(schema.clone());
    assert_eq!(read, schema);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].ends_with(
            ": the schema nests deeper than 64 levels (MAX_SCHEMA_DEPTH); what is below is read as it is"
        ),
        "{warnings:?}"
    );
    assert!(warnings[0].starts_with("/not/not/"), "{warnings:?}");
    // Far deeper than any stack could recurse: one warning, no crash.
    let deep = nested(200_000, bad);
    let r = reconcile(deep);
    assert_eq!(r.warnings.len(), 1);
    crate::limits::drop_deep(r.schema);
}

#[test]
fn long_values_are_cut_in_warnings() {
    let long = "x".repeat(1000);
    let mut values: Vec<Value> = (0..20).map(|i| json!(format!("v{i}"))).collect();
    values.push(json!(long));
    let (_, warnings) = reading(json!({"type": "integer", "enum": values}));
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].len() < 300, "{}", warnings[0]);
    assert!(warnings[0].contains("and 13 more"), "{}", warnings[0]);
    let (_, warnings) = reading(json!({"type": "integer", "default": long}));
    assert!(warnings[0].len() < 200, "{}", warnings[0]);
    assert!(warnings[0].contains("xxx\"…"), "{}", warnings[0]);
}

/// Schemas as tools write them, each consistent.
#[test]
fn consistent_schemas_come_back_unchanged() {
    for schema in [
        json!({}),
        json!(true),
        json!({"type": "object", "properties": {}}),
        json!({"type": "object",
               "properties": {"location": {"type": "string", "description": "A city."},
                              "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}},
               "required": ["location"], "additionalProperties": false}),
        json!({"type": "object", "properties": {
            "expression": {"type": "string", "maxLength": 10000},
            "precision": {"type": ["integer", "null"], "minimum": 0, "maximum": 15, "default": null},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "uniqueItems": true},
            "point": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}]},
            "mode": {"anyOf": [{"const": "fast"}, {"type": "integer", "exclusiveMinimum": 0}]},
            "nested": {"$ref": "#/$defs/node"},
            "flag": {"type": "boolean", "enum": [true, false], "default": false},
            "ratio": {"type": "number", "enum": [0.5, 1, 2.5]},
            "any": {"description": "Anything at all."}},
               "$defs": {"node": {"type": "object", "additionalProperties": {"type": "integer"}}}}),
        json!({"type": "object", "properties": {"a": {"type": "integer", "enum": [1, 1.0, 2]}}}),
        json!({"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
               "properties": {"n": {"type": "number", "minimum": 0, "exclusiveMinimum": true}}}),
    ] {
        assert_consistent(schema);
    }
}

// ---------------------------------------------------------------------------------------------
// Idempotence, on schema-shaped JSON with contradictions of every kind
// ---------------------------------------------------------------------------------------------

fn scalar() -> BoxedStrategy<Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-5i64..5).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop::sample::select(vec![
            "True",
            "false",
            "dontcare",
            "3",
            "2.5",
            "-0",
            "1e3",
            "4.0",
            "",
            "NaN",
            "a",
            "b",
            "18446744073709551615",
            "1e400",
        ])
        .prop_map(Value::from),
    ]
    .boxed()
}

fn type_value() -> BoxedStrategy<Value> {
    let name = prop::sample::select(vec![
        "string", "integer", "number", "boolean", "null", "object", "array", "dict", "float",
        "int", "bool", "str", "list", "tuple", "any", "String", "frob",
    ])
    .prop_map(Value::from);
    prop_oneof![
        4 => name.clone(),
        1 => prop::collection::vec(name, 0..4).prop_map(Value::Array),
        1 => Just(json!(12)),
    ]
    .boxed()
}

fn bound() -> BoxedStrategy<Value> {
    prop_oneof![
        (-3i64..4).prop_map(Value::from),
        any::<bool>().prop_map(Value::Bool)
    ]
    .boxed()
}

fn schema() -> impl Strategy<Value = Value> {
    let leaf = (
        prop::option::of(type_value()),
        prop::option::of(prop::collection::vec(scalar(), 0..6)),
        prop::option::of(scalar()),
        prop::option::of(scalar()),
        prop::collection::vec(
            (
                prop::sample::select(vec![
                    "minimum",
                    "maximum",
                    "exclusiveMinimum",
                    "exclusiveMaximum",
                    "minLength",
                    "maxLength",
                    "minItems",
                    "maxItems",
                    "minProperties",
                    "maxProperties",
                ]),
                bound(),
            ),
            0..4,
        ),
    )
        .prop_map(|(ty, en, cst, default, bounds)| {
            let mut map = Map::new();
            if let Some(ty) = ty {
                map.insert("type".into(), ty);
            }
            if let Some(en) = en {
                map.insert("enum".into(), Value::Array(en));
            }
            if let Some(c) = cst {
                map.insert("const".into(), c);
            }
            if let Some(d) = default {
                map.insert("default".into(), d);
            }
            for (k, v) in bounds {
                map.insert(k.into(), v);
            }
            Value::Object(map)
        });
    leaf.prop_recursive(4, 32, 4, |inner| {
        (
            prop::collection::btree_map("[a-c/~]{1,2}", inner.clone(), 0..4),
            prop::collection::vec("[a-d]", 0..4),
            prop::option::of(prop_oneof![
                any::<bool>().prop_map(Value::Bool),
                inner.clone()
            ]),
            prop::option::of(inner.clone()),
            prop::collection::vec(inner.clone(), 0..3),
            prop::option::of(type_value()),
            prop::option::of(scalar()),
        )
            .prop_map(
                |(props, required, additional, items, any_of, ty, default)| {
                    let mut map = Map::new();
                    if let Some(ty) = ty {
                        map.insert("type".into(), ty);
                    }
                    if let Some(d) = default {
                        map.insert("default".into(), d);
                    }
                    map.insert(
                        "properties".into(),
                        Value::Object(props.into_iter().collect()),
                    );
                    map.insert(
                        "required".into(),
                        Value::Array(required.into_iter().map(Value::from).collect()),
                    );
                    if let Some(a) = additional {
                        map.insert("additionalProperties".into(), a);
                    }
                    if let Some(i) = items {
                        map.insert("items".into(), i);
                    }
                    if !any_of.is_empty() {
                        map.insert("anyOf".into(), Value::Array(any_of));
                    }
                    Value::Object(map)
                },
            )
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    /// Reading a reconciled schema again changes nothing and warns of nothing; a schema read
    /// without warnings is the schema itself.
    #[test]
    fn reconciling_is_idempotent(schema in schema()) {
        let once = reconcile(schema.clone());
        if once.warnings.is_empty() {
            prop_assert_eq!(&once.schema, &schema);
        }
        let twice = reconcile(once.schema.clone());
        prop_assert!(twice.warnings.is_empty(), "{} → {}: {:?}", schema, once.schema, twice.warnings);
        prop_assert_eq!(twice.schema, once.schema);
    }
}
