// A Worker for durable.test.mjs: checks the keys a POST body names (`{"keys": […]}`:
// JSON carries any UTF-16 string, lone surrogates included, which headers cannot) under
// one unit an hour, on the test's PorteroShard namespace.
import wasmModule from "../../pkg/portero_wasm_bg.wasm";
import { initSync } from "../../js/index.js";
import { EdgeLimiter } from "../../js/durable.js";

initSync(wasmModule);

let limiter = null;

export default {
  async fetch(request, env) {
    limiter ??= new EdgeLimiter({ namespace: env.LIMITER, rule: { perHour: 1 }, shards: 4 });
    if (request.method !== "POST") return new Response("ok\n");
    const { keys } = await request.json();
    return Response.json(await limiter.checkMany(keys.map((key) => [key, 1])));
  },
};
