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
    let packages: Vec<&str> = CRATES.iter().flat_map(|c| ["-p", c]).collect();
    run(
        "cargo",
        &[&["package", "--allow-dirty"][..], &packages].concat(),
        &[],
    )?;
    run(
        "cargo",
        &[&["doc", "--no-deps", "--all-features"][..], &packages].concat(),
        &[("RUSTDOCFLAGS", "-D warnings")],
    )
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
