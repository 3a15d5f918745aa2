/**
 * `import wasm from "portero/portero.wasm"`: the compiled module, as Workers tooling
 * imports a `.wasm` file (wrangler, workerd, esbuild with a copy loader for workerd);
 * pass it to `initSync`. Node cannot import it: read the file's bytes (its path is
 * `import.meta.resolve("portero/portero.wasm")`) and pass those.
 */
declare const module: WebAssembly.Module;
export default module;
