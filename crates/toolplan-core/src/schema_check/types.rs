//! Rules 1 to 3 of [`reconcile`](super::reconcile): `type` names read as JSON Schema types, then
//! the `enum`, `const` and `default` values that are not of those types converted or removed.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::Walk;
use super::kind::{Kind, TypeName, same, scalar_key, type_name};
use super::show::{kinds_text, show, show_all};

impl Walk {
    /// Rule 3: reads the `type` names as JSON Schema types. Returns the types the schema then has
    /// (`None`: no type constraint, or a `type` too malformed to read, left for the validator).
    pub(super) fn type_names(
        &mut self,
        map: &mut Map<String, Value>,
        pointer: &str,
    ) -> Option<Vec<Kind>> {
        let names: Vec<&str> = match map.get("type")? {
            Value::String(name) => vec![name.as_str()],
            Value::Array(items) if !items.is_empty() => {
                items.iter().map(Value::as_str).collect::<Option<_>>()?
            }
            _ => return None,
        };
        let single = matches!(map.get("type"), Some(Value::String(_)));
        let mut kinds = Vec::new();
        let mut any = false;
        let mut changed = false;
        for name in &names {
            match type_name(name) {
                TypeName::Exact(kind) => kinds.push(kind),
                TypeName::Alias(kind) => {
                    changed = true;
                    kinds.push(kind);
                }
                TypeName::Any => any = true,
                TypeName::Unknown => changed = true,
            }
        }
        if !changed && !any {
            return Some(kinds);
        }
        let all: Vec<Value> = names
            .iter()
            .map(|n| Value::String((*n).to_owned()))
            .collect();
        let shown = show_all(all.iter());
        let (verb, plural) = if names.len() == 1 {
            ("is", "a JSON Schema type")
        } else {
            ("are", "all JSON Schema types")
        };
        if any {
            map.shift_remove("type");
            let text = if single {
                format!("{shown} allows every value; type removed")
            } else {
                format!("{shown} include one that allows every value; type removed")
            };
            self.warn(pointer, "type", text);
            return None;
        }
        let mut unique: Vec<Kind> = Vec::new();
        for kind in kinds {
            if !unique.contains(&kind) {
                unique.push(kind);
            }
        }
        if unique.is_empty() {
            map.shift_remove("type");
            self.warn(
                pointer,
                "type",
                format_args!("{shown} {verb} not {plural}; type removed"),
            );
            return None;
        }
        let reading = if let (true, [kind]) = (single, unique.as_slice()) {
            Value::String(kind.name().to_owned())
        } else {
            Value::Array(
                unique
                    .iter()
                    .map(|k| Value::String(k.name().to_owned()))
                    .collect(),
            )
        };
        self.warn(
            pointer,
            "type",
            format_args!("{shown} {verb} not {plural}; read as {reading}"),
        );
        map.insert("type".to_owned(), reading);
        Some(unique)
    }

    /// Rule 1 for `enum`.
    pub(super) fn enum_values(
        &mut self,
        map: &mut Map<String, Value>,
        pointer: &str,
        kinds: &[Kind],
    ) {
        let Some(Value::Array(values)) = map.get_mut("enum") else {
            return;
        };
        let fits = |v: &Value| kinds.iter().any(|k| k.admits(v));
        if values.iter().all(fits) {
            return;
        }
        let mut misfits = Vec::new();
        let mut kept = Vec::with_capacity(values.len());
        let mut seen = HashSet::new();
        for value in std::mem::take(values) {
            let value = if fits(&value) {
                value
            } else {
                let converted = kinds.iter().find_map(|k| k.convert(&value));
                misfits.push(value);
                match converted {
                    Some(v) => v,
                    None => continue,
                }
            };
            // Scalars are kept once (a converted value may repeat another); arrays and objects are
            // kept as they are.
            if scalar_key(&value).is_none_or(|key| seen.insert(key)) {
                kept.push(value);
            }
        }
        let (noun, verb) = if misfits.len() == 1 {
            ("value", "is")
        } else {
            ("values", "are")
        };
        let head = format!(
            "the {noun} {} {verb} not {}",
            show_all(misfits.iter()),
            kinds_text(kinds)
        );
        if kept.is_empty() {
            map.shift_remove("enum");
            self.warn(
                pointer,
                "enum",
                format_args!("{head}; no value is left, so the enum is removed"),
            );
        } else {
            let reading = format!("[{}]", show_all(kept.iter()));
            *values = kept;
            self.warn(
                pointer,
                "enum",
                format_args!("{head}; read as enum {reading}"),
            );
        }
    }

    /// Rule 1 for `const`.
    pub(super) fn const_value(
        &mut self,
        map: &mut Map<String, Value>,
        pointer: &str,
        kinds: &[Kind],
    ) {
        let Some(value) = map.get_mut("const") else {
            return;
        };
        if kinds.iter().any(|k| k.admits(value)) {
            return;
        }
        let head = format!("{} is not {}", show(value), kinds_text(kinds));
        match kinds.iter().find_map(|k| k.convert(value)) {
            Some(converted) => {
                let shown = show(&converted);
                *value = converted;
                self.warn(
                    pointer,
                    "const",
                    format_args!("{head}; read as const {shown}"),
                );
            }
            None => {
                map.shift_remove("const");
                self.warn(pointer, "const", format_args!("{head}; const removed"));
            }
        }
    }

    /// Rule 2.
    pub(super) fn default_value(
        &mut self,
        map: &mut Map<String, Value>,
        pointer: &str,
        kinds: Option<&[Kind]>,
    ) {
        let Some(default) = map.get("default") else {
            return;
        };
        let enumerated = match map.get("enum") {
            Some(Value::Array(values)) => Some(values),
            _ => None,
        };
        let fits_type = |v: &Value| kinds.is_none_or(|ks| ks.iter().any(|k| k.admits(v)));
        let fits_enum = |v: &Value| enumerated.is_none_or(|vs| vs.iter().any(|e| same(e, v)));
        if fits_type(default) && fits_enum(default) {
            return;
        }
        let (head, converted) = if fits_type(default) {
            (format!("{} is not one of the enum", show(default)), None)
        } else {
            let kinds = kinds.unwrap_or_default();
            let converted = kinds
                .iter()
                .find_map(|k| k.convert(default))
                .filter(|v| fits_enum(v));
            (
                format!("{} is not {}", show(default), kinds_text(kinds)),
                converted,
            )
        };
        match converted {
            Some(value) => {
                let shown = show(&value);
                map.insert("default".to_owned(), value);
                self.warn(
                    pointer,
                    "default",
                    format_args!("{head}; read as default {shown}"),
                );
            }
            None => {
                map.shift_remove("default");
                self.warn(pointer, "default", format_args!("{head}; default removed"));
            }
        }
    }
}
