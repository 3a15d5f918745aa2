// Vercel's edge-runtime: it runs one classic script (no imports) and answers fetch
// events, so this is bundled into one file with the module's bytes inlined, and the
// module is compiled from them here (edge-runtime allows it).
import bytes from "portero/portero.wasm";
import { initSync } from "portero";
import { smoke } from "./smoke.js";

initSync(bytes);

addEventListener("fetch", (event) => event.respondWith(smoke()));
