//! Index aliases, as OpenSearch has them: another name for one or more indices, optionally with a
//! filter that every search through the alias applies, routing values (kept and shown; one shard
//! has nothing to route) and a write index that writes through the alias go to.
//!
//! [`Aliases`] is the table the embedded backend keeps (alias → index → [`AliasOptions`]); it
//! resolves index expressions as OpenSearch does, aliases included ([`Aliases::resolve`]): a name is
//! an index or an alias, a wildcard matches both, `-` leaves out what it matches, and an index
//! reached only through filtered aliases is searched with their filters.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::backend::{check_index_name, glob};
use crate::error::SearchError;

/// What an alias says about one of its indices.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AliasOptions {
    /// A query every search through the alias is filtered by.
    pub filter: Option<Value>,
    /// Routing of writes through the alias (kept and shown).
    pub index_routing: Option<String>,
    /// Routing of searches through the alias (kept and shown).
    pub search_routing: Option<String>,
    /// Whether writes through the alias go to this index (`None`: not said; an alias of one index
    /// writes to it).
    pub is_write_index: Option<bool>,
}

impl AliasOptions {
    /// Reads the options of a put-alias request (`filter`, `routing`, `index_routing`,
    /// `search_routing`, `is_write_index`; `{}` or null for none). Anything else is refused by name.
    pub fn parse(body: &Value) -> Result<AliasOptions, SearchError> {
        let o = match body {
            Value::Null => return Ok(AliasOptions::default()),
            Value::Object(o) => o,
            other => {
                return Err(SearchError::InvalidParameter(format!(
                    "an alias's options must be an object, found {other}"
                )));
            }
        };
        let text = |key: &str, v: &Value| match v {
            Value::String(s) => Ok(s.clone()),
            Value::Number(n) => Ok(n.to_string()),
            other => Err(SearchError::InvalidParameter(format!(
                "alias option [{key}] must be text, found {other}"
            ))),
        };
        let mut out = AliasOptions::default();
        for (key, v) in o {
            match key.as_str() {
                "filter" if v.is_object() => out.filter = Some(v.clone()),
                "filter" if v.is_null() => {}
                "filter" => {
                    return Err(SearchError::InvalidParameter(format!(
                        "alias option [filter] must be a query object, found {v}"
                    )));
                }
                "routing" => {
                    let r = text(key, v)?;
                    out.index_routing = Some(r.clone());
                    out.search_routing = Some(r);
                }
                "index_routing" => out.index_routing = Some(text(key, v)?),
                "search_routing" => out.search_routing = Some(text(key, v)?),
                "is_write_index" => match v {
                    Value::Bool(b) => out.is_write_index = Some(*b),
                    Value::Null => {}
                    other => {
                        return Err(SearchError::InvalidParameter(format!(
                            "alias option [is_write_index] must be true or false, found {other}"
                        )));
                    }
                },
                other => {
                    return Err(SearchError::InvalidParameter(format!(
                        "alias option [{other}] is not supported (filter, routing, index_routing, search_routing, is_write_index are)"
                    )));
                }
            }
        }
        Ok(out)
    }

    /// The options as OpenSearch's get-alias API shows them.
    pub fn to_json(&self) -> Value {
        let mut o = Map::new();
        if let Some(f) = &self.filter {
            o.insert("filter".into(), f.clone());
        }
        if let Some(r) = &self.index_routing {
            o.insert("index_routing".into(), json!(r));
        }
        if let Some(r) = &self.search_routing {
            o.insert("search_routing".into(), json!(r));
        }
        if let Some(w) = self.is_write_index {
            o.insert("is_write_index".into(), json!(w));
        }
        Value::Object(o)
    }
}

/// One index an expression resolves to, and the alias filters a search of it applies: `None`
/// when it was reached by its own name, a pattern, or an alias without a filter (then nothing
/// filters it); otherwise a search keeps the documents any of the filters matches.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The index.
    pub index: String,
    /// The filters of the aliases it was reached through, when all of them had one.
    pub filters: Option<Vec<Value>>,
}

/// The aliases of a set of indices: alias name → index name → options.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Aliases {
    table: BTreeMap<String, BTreeMap<String, AliasOptions>>,
}

impl Aliases {
    /// Reads the table from its JSON (`{alias: {index: options}}`), as [`Aliases::to_json`] wrote
    /// it.
    pub fn from_json(v: &Value) -> Result<Aliases, SearchError> {
        let mut table = BTreeMap::new();
        let Some(o) = v.as_object() else {
            return Err(SearchError::InvalidParameter(
                "the aliases file must hold an object".into(),
            ));
        };
        for (alias, indices) in o {
            let mut of = BTreeMap::new();
            for (index, options) in indices.as_object().into_iter().flatten() {
                of.insert(index.clone(), AliasOptions::parse(options)?);
            }
            table.insert(alias.clone(), of);
        }
        Ok(Aliases { table })
    }

    /// The table as JSON.
    pub fn to_json(&self) -> Value {
        Value::Object(
            self.table
                .iter()
                .map(|(alias, indices)| {
                    let of: Map<String, Value> = indices
                        .iter()
                        .map(|(index, options)| (index.clone(), options.to_json()))
                        .collect();
                    (alias.clone(), Value::Object(of))
                })
                .collect(),
        )
    }

    /// How many (alias, index) pairs there are.
    pub fn len(&self) -> usize {
        self.table.values().map(BTreeMap::len).sum()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Whether `name` is an alias.
    pub fn contains(&self, name: &str) -> bool {
        self.table.contains_key(name)
    }

    /// Points `alias` at `index` with `options` (replacing what it said of that index before).
    /// The alias's name keeps an index name's rules and is no index's name; one index at most is
    /// its write index.
    pub fn put(
        &mut self,
        alias: &str,
        index: &str,
        options: AliasOptions,
        existing: &[String],
    ) -> Result<(), SearchError> {
        check_index_name(alias).map_err(|e| match e {
            SearchError::InvalidIndexName { reason, .. } => {
                SearchError::InvalidParameter(format!("Invalid alias name [{alias}]: {reason}"))
            }
            other => other,
        })?;
        if existing.iter().any(|n| n == alias) {
            return Err(SearchError::InvalidParameter(format!(
                "Invalid alias name [{alias}]: an index exists with the same name as the alias"
            )));
        }
        let of = self.table.entry(alias.to_owned()).or_default();
        if options.is_write_index == Some(true)
            && let Some(other) = of
                .iter()
                .find(|(i, o)| *i != index && o.is_write_index == Some(true))
                .map(|(i, _)| i.clone())
        {
            return Err(SearchError::InvalidParameter(format!(
                "alias [{alias}] has more than one write index [{other},{index}]"
            )));
        }
        of.insert(index.to_owned(), options);
        Ok(())
    }

    /// Takes `alias` off `index`; whether it was there.
    pub fn remove(&mut self, alias: &str, index: &str) -> bool {
        let Some(of) = self.table.get_mut(alias) else {
            return false;
        };
        let was = of.remove(index).is_some();
        if of.is_empty() {
            self.table.remove(alias);
        }
        was
    }

    /// Takes every alias off `index` (the index is gone).
    pub fn remove_index(&mut self, index: &str) {
        for of in self.table.values_mut() {
            of.remove(index);
        }
        self.table.retain(|_, of| !of.is_empty());
    }

    /// The aliases names matching `pattern` (a name, or a pattern with `*`).
    pub fn names_matching<'a>(&'a self, pattern: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.table
            .keys()
            .filter(move |a| glob(pattern, a))
            .map(String::as_str)
    }

    /// The aliases of `index`, with their options for it.
    pub fn of_index(&self, index: &str) -> BTreeMap<&str, &AliasOptions> {
        self.table
            .iter()
            .filter_map(|(alias, of)| of.get(index).map(|o| (alias.as_str(), o)))
            .collect()
    }

    /// The indices `alias` names, with their options.
    pub fn indices_of(&self, alias: &str) -> Option<&BTreeMap<String, AliasOptions>> {
        self.table.get(alias)
    }

    /// The index writes through `name` go to: `name` itself when it is no alias; an alias's write
    /// index, or its one index. An alias of several indices without a write index cannot be
    /// written to.
    pub fn write_index<'a>(&'a self, name: &'a str) -> Result<&'a str, SearchError> {
        let Some(of) = self.table.get(name) else {
            return Ok(name);
        };
        if let Some((index, _)) = of.iter().find(|(_, o)| o.is_write_index == Some(true)) {
            return Ok(index);
        }
        match (of.len(), of.iter().next()) {
            (1, Some((index, o))) if o.is_write_index != Some(false) => Ok(index),
            _ => Err(SearchError::InvalidParameter(format!(
                "no write index is defined for alias [{name}]. The write index may be explicitly disabled using is_write_index=false or the alias points to multiple indices without one being designated as a write index"
            ))),
        }
    }

    /// The indices `expr` stands for among `existing` (sorted, without duplicates), with the
    /// filters their aliases apply. A part is `_all`, a pattern with `*` (matching index names and
    /// alias names; it may match none), a name (an index or an alias; it must exist), or one of
    /// those after `-`, leaving out what it matches.
    pub fn resolve(&self, expr: &str, existing: &[String]) -> Result<Vec<Target>, SearchError> {
        // index → filters so far (`None`: reached unfiltered).
        let mut out: BTreeMap<String, Option<Vec<Value>>> = BTreeMap::new();
        let reach = |out: &mut BTreeMap<String, Option<Vec<Value>>>,
                     index: &str,
                     filter: Option<&Value>| {
            match (out.get_mut(index), filter) {
                (None, f) => {
                    out.insert(index.to_owned(), f.map(|f| vec![f.clone()]));
                }
                (Some(slot), None) => *slot = None,
                (Some(Some(filters)), Some(f)) => {
                    if !filters.contains(f) {
                        filters.push(f.clone());
                    }
                }
                (Some(None), Some(_)) => {}
            }
        };
        for part in expr.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if let Some(excluded) = part.strip_prefix('-') {
                let mut gone: Vec<String> = existing
                    .iter()
                    .filter(|n| glob(excluded, n))
                    .cloned()
                    .collect();
                for alias in self.names_matching(excluded) {
                    gone.extend(self.table[alias].keys().cloned());
                }
                out.retain(|n, _| !gone.contains(n));
            } else if part == "_all" || part.contains('*') {
                let pattern = if part == "_all" { "*" } else { part };
                for n in existing.iter().filter(|n| glob(pattern, n)) {
                    reach(&mut out, n, None);
                }
                if part != "_all" {
                    for alias in self.names_matching(pattern) {
                        for (index, o) in &self.table[alias] {
                            if existing.contains(index) {
                                reach(&mut out, index, o.filter.as_ref());
                            }
                        }
                    }
                }
            } else if existing.iter().any(|n| n == part) {
                reach(&mut out, part, None);
            } else if let Some(of) = self.table.get(part) {
                for (index, o) in of {
                    if existing.contains(index) {
                        reach(&mut out, index, o.filter.as_ref());
                    }
                }
            } else {
                return Err(SearchError::NoSuchIndex(part.to_owned()));
            }
        }
        Ok(out
            .into_iter()
            .map(|(index, filters)| Target { index, filters })
            .collect())
    }
}

/// `body` with its query filtered by `filters` (a document is kept when any of them matches it);
/// scores are the query's own.
pub fn filtered_body(body: &Value, filters: &[Value]) -> Value {
    let mut out = body.clone();
    let query = body
        .get("query")
        .cloned()
        .unwrap_or_else(|| json!({"match_all": {}}));
    let filter = match filters {
        [one] => one.clone(),
        many => json!({"bool": {"should": many, "minimum_should_match": 1}}),
    };
    if !out.is_object() {
        out = json!({});
    }
    out["query"] = json!({"bool": {"must": [query], "filter": [filter]}});
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    fn table() -> (Aliases, Vec<String>) {
        let existing = names(&["logs-1", "logs-2", "users"]);
        let mut a = Aliases::default();
        a.put("logs", "logs-1", AliasOptions::default(), &existing)
            .unwrap();
        a.put("logs", "logs-2", AliasOptions::default(), &existing)
            .unwrap();
        let admins = AliasOptions::parse(&json!({"filter": {"term": {"role": "admin"}}})).unwrap();
        a.put("admins", "users", admins, &existing).unwrap();
        (a, existing)
    }

    fn indices(targets: &[Target]) -> Vec<&str> {
        targets.iter().map(|t| t.index.as_str()).collect()
    }

    #[test]
    fn names_patterns_and_exclusions_reach_indices_through_aliases() {
        let (a, existing) = table();
        assert_eq!(
            indices(&a.resolve("logs", &existing).unwrap()),
            ["logs-1", "logs-2"]
        );
        assert_eq!(
            indices(&a.resolve("logs,-logs-2", &existing).unwrap()),
            ["logs-1"]
        );
        // A pattern matches alias names too.
        assert_eq!(indices(&a.resolve("adm*", &existing).unwrap()), ["users"]);
        assert_eq!(
            indices(&a.resolve("_all,-logs", &existing).unwrap()),
            ["users"]
        );
        assert!(matches!(
            a.resolve("nope", &existing),
            Err(SearchError::NoSuchIndex(n)) if n == "nope"
        ));
    }

    #[test]
    fn an_index_reached_only_through_a_filtered_alias_is_filtered() {
        let (a, existing) = table();
        let through_alias = a.resolve("admins", &existing).unwrap();
        assert_eq!(
            through_alias[0].filters,
            Some(vec![json!({"term": {"role": "admin"}})])
        );
        // Named as well by itself: nothing filters it.
        let both = a.resolve("admins,users", &existing).unwrap();
        assert_eq!(both[0].filters, None);
        let body = filtered_body(&json!({"size": 1}), &[json!({"term": {"a": 1}})]);
        assert_eq!(
            body["query"],
            json!({"bool": {"must": [{"match_all": {}}], "filter": [{"term": {"a": 1}}]}})
        );
    }

    #[test]
    fn alias_names_writes_and_options_keep_opensearch_rules() {
        let (mut a, existing) = table();
        assert!(
            a.put("users", "logs-1", AliasOptions::default(), &existing)
                .is_err()
        );
        assert!(
            a.put("Bad", "logs-1", AliasOptions::default(), &existing)
                .is_err()
        );
        // Writes: an alias of one index writes to it; of two, only with a write index.
        assert_eq!(a.write_index("admins").unwrap(), "users");
        assert!(a.write_index("logs").is_err());
        let write = AliasOptions::parse(&json!({"is_write_index": true})).unwrap();
        a.put("logs", "logs-2", write.clone(), &existing).unwrap();
        assert_eq!(a.write_index("logs").unwrap(), "logs-2");
        assert!(a.put("logs", "logs-1", write, &existing).is_err());
        assert_eq!(a.write_index("users").unwrap(), "users");
        // `routing` sets both routings; unknown options are refused.
        let routed = AliasOptions::parse(&json!({"routing": "b"})).unwrap();
        assert_eq!(
            routed.to_json(),
            json!({"index_routing": "b", "search_routing": "b"})
        );
        assert!(AliasOptions::parse(&json!({"is_hidden": true})).is_err());
        // Round trip, and an index's removal takes its aliases.
        assert_eq!(Aliases::from_json(&a.to_json()).unwrap(), a);
        a.remove_index("users");
        assert!(!a.contains("admins"));
        assert!(a.remove("logs", "logs-1") && !a.remove("logs", "logs-1"));
    }
}
