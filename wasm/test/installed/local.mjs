// Node, Bun and Deno: the module's bytes from the installed package (resolved by name,
// as a user's code would), then the smoke test; prints what a client would receive.
import { readFileSync } from "node:fs";
import { initSync } from "portero";
import { smoke } from "./smoke.js";

initSync(readFileSync(new URL(import.meta.resolve("portero/portero.wasm"))));
const response = smoke();
const headers = Object.fromEntries(response.headers);
console.log(JSON.stringify({ status: response.status, headers, body: await response.json() }));
