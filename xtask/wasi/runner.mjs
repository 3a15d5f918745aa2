// Runs a wasm32-wasip1 test binary in Node's WASI (set as cargo's runner for that
// target by `cargo xtask wasi`): `node runner.mjs test.wasm [test args…]`.
import { readFileSync } from "node:fs";
import { WASI } from "node:wasi";

const [wasm, ...args] = process.argv.slice(2);
const wasi = new WASI({ version: "preview1", args: [wasm, ...args], env: process.env, returnOnExit: true });
const { instance } = await WebAssembly.instantiate(readFileSync(wasm), wasi.getImportObject());
process.exitCode = wasi.start(instance);
