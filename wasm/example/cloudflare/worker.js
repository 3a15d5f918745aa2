// A Cloudflare Worker with one exact limit per client address across every isolate and
// location, as a project that ran `npm install portero` writes it: `wrangler deploy`
// next to wrangler.toml deploys it. test/installed/run.mjs bundles this file with
// wrangler and with esbuild from the packed package and serves it in workerd.
//
// The module is imported by a name ending in .wasm: wrangler picks the imports it
// uploads as compiled wasm modules by that name (its CompiledWasm rule, `**/*.wasm`),
// not by the file a package export resolves to.
import wasmModule from "portero/portero.wasm";
import { initSync } from "portero";
import { EdgeLimiter, PorteroShard } from "portero/durable";

initSync(wasmModule);

// The Durable Object class wrangler.toml binds as LIMITER.
export { PorteroShard };

let limiter = null;

export default {
  async fetch(request, env) {
    // Built at the first request: the binding and the quota come from env.
    limiter ??= new EdgeLimiter({ namespace: env.LIMITER, rule: { perHour: Number(env.RATE_PER_HOUR) } });
    // Cloudflare sets CF-Connecting-IP; never trust X-Forwarded-For from the client.
    const client = request.headers.get("CF-Connecting-IP") ?? "unknown";
    const decision = await limiter.check(client, Date.now());
    const headers = { ...limiter.headers(decision, "per-ip"), "X-Served-By": decision.servedBy };
    if (!decision.allowed) return new Response("rate limit exceeded\n", { status: 429, headers });
    // A real Worker would now `return fetch(request)` to its origin.
    return new Response("ok\n", { headers });
  },
};
