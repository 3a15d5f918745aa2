// workerd: the smoke test as a module Worker. The .wasm import is a compiled
// WebAssembly.Module there (workerd refuses to compile wasm from bytes at run time).
import wasmModule from "portero/portero.wasm";
import { initSync } from "portero";
import { smoke } from "./smoke.js";

initSync(wasmModule);

export default {
  fetch() {
    return smoke();
  },
};
