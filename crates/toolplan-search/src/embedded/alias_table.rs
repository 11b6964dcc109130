//! The embedded backend's aliases: one table for all indices ([`Aliases`]) in
//! `<data dir>/_aliases.json`, written whole or not at all under the backend's write lock, read
//! when a request names something that is not an index.

use std::path::PathBuf;
use std::sync::PoisonError;

use serde_json::{Map, Value, json};

use super::{Inner, io};
use crate::aliases::{AliasOptions, Aliases};
use crate::backend::{check_index_expression, resolve_indices};
use crate::error::SearchError;

/// The file of the alias table, beside the index directories (index names cannot start with `_`).
const ALIASES_FILE: &str = "_aliases.json";

impl Inner {
    fn aliases_path(&self) -> PathBuf {
        self.dir.join(ALIASES_FILE)
    }

    /// The alias table (empty when there is no file).
    pub(super) fn aliases(&self) -> Result<Aliases, SearchError> {
        let path = self.aliases_path();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Aliases::default()),
            Err(e) => return Err(io(&path)(e)),
        };
        let json: Value = serde_json::from_str(&text)
            .map_err(|e| SearchError::Index(format!("{}: {e}", path.display())))?;
        Aliases::from_json(&json)
            .map_err(|e| SearchError::Index(format!("{}: {e}", path.display())))
    }

    /// Writes the alias table (a new file renamed over the old one). The caller holds the write
    /// lock.
    fn save_aliases(&self, aliases: &Aliases) -> Result<(), SearchError> {
        let path = self.aliases_path();
        let staged = self.dir.join(format!("{ALIASES_FILE}.new"));
        let text = serde_json::to_string_pretty(&aliases.to_json()).unwrap_or_default();
        std::fs::write(&staged, text).map_err(io(&staged))?;
        std::fs::rename(&staged, &path).map_err(io(&path))
    }

    /// The names of the indices on disk, sorted.
    pub(super) fn index_names(&self) -> Result<Vec<String>, SearchError> {
        let mut names: Vec<String> = std::fs::read_dir(&self.dir)
            .map_err(io(&self.dir))?
            .filter_map(Result::ok)
            .filter(|e| e.path().join(super::MAPPING_FILE).is_file())
            .filter_map(|e| e.file_name().to_str().map(str::to_owned))
            .filter(|name| crate::backend::check_index_name(name).is_ok())
            .collect();
        names.sort();
        Ok(names)
    }

    /// Points `alias` at the indices `index` names (indices only, as OpenSearch's put-alias API
    /// reads it). The filter was checked against each index before.
    pub(super) fn put_alias_blocking(
        &self,
        index: &str,
        alias: &str,
        options: AliasOptions,
    ) -> Result<(), SearchError> {
        check_index_expression(index)?;
        let _one_writer = self.writes.lock().unwrap_or_else(PoisonError::into_inner);
        let existing = self.index_names()?;
        let indices = resolve_indices(index, &existing)?;
        if indices.is_empty() {
            return Err(SearchError::NoSuchIndex(index.to_owned()));
        }
        let mut aliases = self.aliases()?;
        for name in &indices {
            aliases.put(alias, name, options.clone(), &existing)?;
        }
        let max = self.limits.max_aliases;
        if aliases.len() > max {
            return Err(SearchError::InvalidParameter(format!(
                "the indices would have more than {max} aliases (search limit max_aliases)"
            )));
        }
        self.save_aliases(&aliases)
    }

    /// Takes `alias` off the indices `index` names.
    pub(super) fn delete_alias_blocking(
        &self,
        index: &str,
        alias: &str,
    ) -> Result<(), SearchError> {
        check_index_expression(index)?;
        let _one_writer = self.writes.lock().unwrap_or_else(PoisonError::into_inner);
        let existing = self.index_names()?;
        let indices = resolve_indices(index, &existing)?;
        let mut aliases = self.aliases()?;
        let mut removed = false;
        for name in &indices {
            removed |= aliases.remove(alias, name);
        }
        if !removed {
            return Err(SearchError::NoSuchAlias(alias.to_owned()));
        }
        self.save_aliases(&aliases)
    }

    /// Takes every alias off `index`, which is being deleted. The caller holds the write lock.
    pub(super) fn forget_aliases_of(&self, index: &str) -> Result<(), SearchError> {
        let mut aliases = self.aliases()?;
        if aliases.of_index(index).is_empty() {
            return Ok(());
        }
        aliases.remove_index(index);
        self.save_aliases(&aliases)
    }

    /// The aliases of the indices `expr` names (an alias names its indices).
    pub(super) fn get_aliases_blocking(&self, expr: &str) -> Result<Value, SearchError> {
        check_index_expression(expr)?;
        let existing = self.index_names()?;
        let aliases = self.aliases()?;
        let mut out = Map::new();
        for target in aliases.resolve(expr, &existing)? {
            let of: Map<String, Value> = aliases
                .of_index(&target.index)
                .into_iter()
                .map(|(alias, options)| (alias.to_owned(), options.to_json()))
                .collect();
            out.insert(target.index, json!({ "aliases": of }));
        }
        Ok(Value::Object(out))
    }

    /// The index writes to `name` go to: `name`, or the write index of the alias it is.
    pub(super) fn write_target(&self, name: &str) -> Result<String, SearchError> {
        if self.exists(name) {
            return Ok(name.to_owned());
        }
        let aliases = self.aliases()?;
        aliases.write_index(name).map(str::to_owned)
    }
}
