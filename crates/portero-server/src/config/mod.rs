//! The configuration: envoyproxy/ratelimit's YAML files, read as they are.
//!
//! A path is a file, or a directory whose `.yaml` and `.yml` files are read in name
//! order (as envoyproxy/ratelimit reads its runtime directory). Each file holds one
//! domain. A file that cannot be read, parsed or made sense of is an error that names
//! the file and says why; nothing of a configuration with an error is used.

pub mod error;
mod file;
pub mod lease;
pub mod outage;
pub mod shape;
pub mod tree;
pub mod unit;

use std::path::{Path, PathBuf};

use error::ConfigError;

/// Builds the tree of the files named `(name, text)`.
pub fn from_texts(files: &[(String, String)]) -> Result<tree::Tree, ConfigError> {
    let parsed = files
        .iter()
        .map(|(name, text)| Ok((name.clone(), file::parse(name, text)?)))
        .collect::<Result<Vec<_>, ConfigError>>()?;
    tree::Tree::build(&parsed)
}

/// Reads `paths` (files, or directories of `.yaml`/`.yml` files) and builds the tree.
pub fn load(paths: &[PathBuf]) -> Result<tree::Tree, ConfigError> {
    let mut texts = Vec::new();
    for path in paths {
        for file in files_of(path)? {
            let text = std::fs::read_to_string(&file).map_err(|e| ConfigError {
                file: file.display().to_string(),
                reason: format!("cannot be read: {e}"),
            })?;
            texts.push((file.display().to_string(), text));
        }
    }
    if texts.is_empty() {
        return Err(ConfigError {
            file: paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            reason: "no configuration file (a .yaml or .yml file, or a directory of them)".into(),
        });
    }
    from_texts(&texts)
}

/// What the files under `paths` hold now, as one number: it changes when a file is
/// written, added or removed (a file that cannot be read counts as empty).
pub fn stamp(paths: &[PathBuf]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for path in paths {
        for file in files_of(path).unwrap_or_default() {
            file.hash(&mut h);
            std::fs::read(&file).unwrap_or_default().hash(&mut h);
        }
    }
    h.finish()
}

/// `path` itself, or a directory's YAML files in name order.
fn files_of(path: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let listed = std::fs::read_dir(path).map_err(|e| ConfigError {
        file: path.display().to_string(),
        reason: format!("cannot be listed: {e}"),
    })?;
    let mut files: Vec<PathBuf> = listed
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file() && matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"))
        })
        .collect();
    files.sort();
    Ok(files)
}
