//! The checks that the three library crates are ready for users to install: they
//! package and verify together, their docs build without a broken link, and each
//! builds on the Rust it claims, with dependencies resolved the way a user on that
//! Rust gets them.

use std::path::Path;

use crate::{run, rustup_unless, Step};

/// The crates a user installs.
const CRATES: [&str; 3] = ["portero", "portero-http", "portero-redis"];

/// Each crate's minimum Rust (its `rust-version`), and the features checked there.
/// The core is what `no_std` and embedded users pin; the Redis client needs 1.83.
const MSRV: [(&str, &str, &[&str]); 5] = [
    ("portero", "1.82.0", &["std", "quanta", "tokio"]),
    ("portero", "1.82.0", &["alloc"]),
    ("portero", "1.82.0", &[]),
    ("portero-http", "1.82.0", &["axum", "metrics", "tracing"]),
    ("portero-redis", "1.83.0", &["tower"]),
];

/// Installs the MSRV toolchains (minimal profile) unless present.
pub(crate) fn setup() -> Step {
    let mut toolchains: Vec<&str> = MSRV.iter().map(|(_, rust, _)| *rust).collect();
    toolchains.dedup();
    for rust in toolchains {
        rustup_unless(
            &["toolchain", "list"],
            rust,
            &["toolchain", "install", rust, "--profile", "minimal"],
        )?;
    }
    Ok(())
}

/// `cargo package` of the three crates together (each verified against the others'
/// packaged versions), and their docs with every warning an error.
pub(crate) fn package_and_docs() -> Step {
    forget_packaged_sources(&cargo_home())?;
    let packages: Vec<&str> = CRATES.iter().flat_map(|c| ["-p", c]).collect();
    // Registry crates are fingerprinted by name and version, not content: without
    // this a second packaging in one checkout reuses the first one's builds.
    run("cargo", &[&["clean"][..], &packages].concat(), &[])?;
    run(
        "cargo",
        &[&["package", "--allow-dirty"][..], &packages].concat(),
        &[],
    )?;
    licenses_packaged()?;
    run(
        "cargo",
        &[&["doc", "--no-deps", "--all-features"][..], &packages].concat(),
        &[("RUSTDOCFLAGS", "-D warnings")],
    )
}

/// Every library crate's package carries both license texts its manifest names.
fn licenses_packaged() -> Step {
    for krate in CRATES {
        let listed = std::process::Command::new("cargo")
            .args(["package", "--list", "--allow-dirty", "-p", krate])
            .output()
            .map_err(|e| format!("cargo package --list -p {krate}: {e}"))?;
        let files = String::from_utf8_lossy(&listed.stdout);
        for license in ["LICENSE-MIT", "LICENSE-APACHE"] {
            if !files.lines().any(|f| f == license) {
                return Err(format!("{krate}'s package has no {license}"));
            }
        }
    }
    Ok(())
}

/// Cargo verifies each packaged crate against the others through a local registry
/// in `target/package`, and unpacks that registry's crates under
/// `$CARGO_HOME/registry/src/-<hash of its path>/`; an unpacked crate that is already
/// there is not unpacked again. A checkout at the same path as an earlier one (a CI
/// runner's) would so verify `portero-http` against the earlier `portero`, same
/// version, old code. Removing our own crates from those local registries' folders
/// (never from crates.io's) makes cargo unpack what it just packaged.
fn forget_packaged_sources(cargo_home: &Path) -> Step {
    let Ok(registries) = std::fs::read_dir(cargo_home.join("registry/src")) else {
        return Ok(()); // nothing unpacked yet
    };
    for registry in registries.flatten() {
        // Local registries have no host: their folder name starts with the `-`.
        if !registry.file_name().to_string_lossy().starts_with('-') {
            continue;
        }
        let Ok(sources) = std::fs::read_dir(registry.path()) else {
            continue;
        };
        for source in sources.flatten() {
            if is_packaged_crate(&source.file_name().to_string_lossy()) {
                std::fs::remove_dir_all(source.path())
                    .map_err(|e| format!("removing {}: {e}", source.path().display()))?;
            }
        }
    }
    Ok(())
}

/// `name-version` of one of our crates (`portero-0.1.0`, `portero-http-0.1.0`), not
/// another crate that starts with the same word (`portero-extra-1.0.0`).
fn is_packaged_crate(folder: &str) -> bool {
    CRATES.iter().any(|krate| {
        folder
            .strip_prefix(krate)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|version| version.starts_with(|c: char| c.is_ascii_digit()))
    })
}

fn cargo_home() -> std::path::PathBuf {
    match std::env::var_os("CARGO_HOME") {
        Some(home) => home.into(),
        None => Path::new(&std::env::var_os("HOME").unwrap_or_default()).join(".cargo"),
    }
}

/// Each crate on its minimum Rust, from a project outside the workspace whose lock
/// was resolved MSRV-aware (the newest dependency versions that Rust supports).
pub(crate) fn msrv() -> Step {
    let root = std::env::current_dir().map_err(|e| e.to_string())?;
    for (i, (krate, rust, features)) in MSRV.iter().enumerate() {
        let dir = root.join("target/msrv").join(format!("{i}-{krate}"));
        write_project(
            &dir,
            &root.join("crates").join(krate),
            krate,
            rust,
            features,
        )?;
        let manifest = dir.join("Cargo.toml");
        let manifest = manifest.to_str().ok_or("non-UTF-8 path")?;
        run(
            "cargo",
            &["generate-lockfile", "--manifest-path", manifest],
            &[("CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS", "fallback")],
        )?;
        let toolchain = format!("+{rust}");
        run(
            "cargo",
            &[&toolchain, "check", "--locked", "--manifest-path", manifest],
            &[("CARGO_TARGET_DIR", "target/msrv/target")],
        )?;
    }
    Ok(())
}

/// A one-file library that depends on `krate` (at `path`) with `features` and nothing
/// else, declaring `rust` as its own minimum.
fn write_project(dir: &Path, path: &Path, krate: &str, rust: &str, features: &[&str]) -> Step {
    let io = |e: std::io::Error| format!("{}: {e}", dir.display());
    std::fs::create_dir_all(dir.join("src")).map_err(io)?;
    let features: Vec<String> = features.iter().map(|f| format!("{f:?}")).collect();
    let manifest = format!(
        "[package]\nname = \"msrv-check\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
         rust-version = \"{}\"\npublish = false\n\n[dependencies]\n\
         {krate} = {{ path = {:?}, default-features = false, features = [{}] }}\n\n[workspace]\n",
        rust.trim_end_matches(".0"),
        path.display().to_string(),
        features.join(", "),
    );
    std::fs::write(dir.join("Cargo.toml"), manifest).map_err(io)?;
    let lib = format!("pub use {};\n", krate.replace('-', "_"));
    std::fs::write(dir.join("src/lib.rs"), lib).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_crates_in_local_registries_are_forgotten() {
        let home = std::env::temp_dir().join(format!("xtask-home-{}", std::process::id()));
        let local = home.join("registry/src/-4e653d3fe2bc2c3c");
        let crates_io = home.join("registry/src/index.crates.io-1949cf8c6b5b557f");
        for dir in [
            local.join("portero-0.1.0/src"),
            local.join("portero-http-0.1.0"),
            local.join("portero-extra-1.0.0"),
            crates_io.join("portero-0.1.0"),
        ] {
            std::fs::create_dir_all(dir).unwrap();
        }
        forget_packaged_sources(&home).unwrap();
        let left = |dir: &Path| dir.exists();
        assert!(!left(&local.join("portero-0.1.0")));
        assert!(!left(&local.join("portero-http-0.1.0")));
        assert!(left(&local.join("portero-extra-1.0.0")));
        assert!(left(&crates_io.join("portero-0.1.0")));
        std::fs::remove_dir_all(&home).unwrap();
    }

    #[test]
    fn a_home_without_a_registry_is_fine() {
        assert!(forget_packaged_sources(Path::new("/nonexistent/cargo-home")).is_ok());
    }
}
