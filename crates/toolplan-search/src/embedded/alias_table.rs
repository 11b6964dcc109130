//! The embedded backend's aliases: one table for all indices ([`Aliases`]) in
//! `<data dir>/_aliases.json`, read when a request names something that is not an index. It is
//! changed, and an index is made or deleted, under [`AliasLock`]: the backend's write lock and a
//! lock on `<data dir>/_aliases.lock` that every process on the data directory takes, so that no
//! two change the table at once or make an index of an alias's name. A change is written whole
//! (a new file flushed to disk, then renamed over the old one) or not at all.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::PathBuf;
use std::sync::{MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::{Inner, io};
use crate::aliases::{AliasOptions, Aliases};
use crate::backend::{check_index_expression, resolve_indices};
use crate::error::SearchError;

/// The file of the alias table, beside the index directories (index names cannot start with `_`).
const ALIASES_FILE: &str = "_aliases.json";
/// The file every process locks while it changes the alias table or the set of indices.
const LOCK_FILE: &str = "_aliases.lock";

/// Held while the alias table or the set of indices changes: this backend's write lock (unless
/// the caller holds it already) and the data directory's lock file (released when dropped).
pub(super) struct AliasLock<'a> {
    _file: File,
    _writes: Option<MutexGuard<'a, ()>>,
}

impl Inner {
    /// Takes [`AliasLock`], waiting at most the `timeout` search limit for another process.
    pub(super) fn lock_aliases(&self) -> Result<AliasLock<'_>, SearchError> {
        let writes = self.writes.lock().unwrap_or_else(PoisonError::into_inner);
        let mut held = self.lock_alias_file()?;
        held._writes = Some(writes);
        Ok(held)
    }

    /// Takes the lock file of [`AliasLock`] only: for a caller that holds the write lock.
    pub(super) fn lock_alias_file(&self) -> Result<AliasLock<'_>, SearchError> {
        let path = self.dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io(&path))?;
        let wait = self.limits.timeout;
        let started = Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) if started.elapsed() < wait => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(TryLockError::WouldBlock) => {
                    return Err(SearchError::Index(format!(
                        "{}: another process held the alias table for more than {wait:?} (search limit timeout)",
                        path.display()
                    )));
                }
                Err(TryLockError::Error(e)) => return Err(io(&path)(e)),
            }
        }
        Ok(AliasLock {
            _file: file,
            _writes: None,
        })
    }

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

    /// Writes the alias table: a new file, flushed to disk, renamed over the old one, and the
    /// rename flushed. The caller holds [`AliasLock`].
    fn save_aliases(&self, aliases: &Aliases, _held: &AliasLock<'_>) -> Result<(), SearchError> {
        let path = self.aliases_path();
        let staged = self.dir.join(format!("{ALIASES_FILE}.new"));
        let text = serde_json::to_string_pretty(&aliases.to_json()).unwrap_or_default();
        let write = || -> std::io::Result<()> {
            let mut file = File::create(&staged)?;
            std::io::Write::write_all(&mut file, text.as_bytes())?;
            file.sync_all()
        };
        write().map_err(io(&staged))?;
        std::fs::rename(&staged, &path).map_err(io(&path))?;
        // The directory entry too; where a directory cannot be opened to flush, the rename stands.
        if let Ok(dir) = File::open(&self.dir) {
            let _ = dir.sync_all();
        }
        Ok(())
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
        let held = self.lock_aliases()?;
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
        self.save_aliases(&aliases, &held)
    }

    /// Takes `alias` off the indices `index` names.
    pub(super) fn delete_alias_blocking(
        &self,
        index: &str,
        alias: &str,
    ) -> Result<(), SearchError> {
        check_index_expression(index)?;
        let held = self.lock_aliases()?;
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
        self.save_aliases(&aliases, &held)
    }

    /// Takes every alias off `index`, which is being deleted under `held`.
    pub(super) fn forget_aliases_of(
        &self,
        index: &str,
        held: &AliasLock<'_>,
    ) -> Result<(), SearchError> {
        let mut aliases = self.aliases()?;
        if aliases.of_index(index).is_empty() {
            return Ok(());
        }
        aliases.remove_index(index);
        self.save_aliases(&aliases, held)
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
