//! Sets `single_threaded_wasm` for WebAssembly without the `atomics` feature: no
//! threads can exist there, so the sync shim needs no atomic instructions or locks.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(single_threaded_wasm)");
    let wasm =
        std::env::var("CARGO_CFG_TARGET_FAMILY").is_ok_and(|f| f.split(',').any(|f| f == "wasm"));
    let atomics = std::env::var("CARGO_CFG_TARGET_FEATURE")
        .is_ok_and(|f| f.split(',').any(|f| f == "atomics"));
    if wasm && !atomics && std::env::var_os("CARGO_CFG_LOOM").is_none() {
        println!("cargo::rustc-cfg=single_threaded_wasm");
    }
}
