// An edge Worker that rate-limits every request before it reaches the origin: one GCRA
// per client address, kept in module scope (per isolate).
import wasmModule from "../pkg/portero_wasm_bg.wasm";
import { initSync, KeyedLimiter } from "../js/index.js";

initSync(wasmModule);

let limiter = null;

export default {
  async fetch(request, env) {
    // Built at the first request: the quota comes from the environment.
    limiter ??= new KeyedLimiter({
      perMinute: Number(env.RATE_PER_MINUTE ?? 60),
      burst: Number(env.BURST ?? env.RATE_PER_MINUTE ?? 60),
      maxKeys: 100_000,
    });
    // Cloudflare sets CF-Connecting-IP; never trust X-Forwarded-For from the client.
    const client = request.headers.get("CF-Connecting-IP") ?? "unknown";
    const decision = limiter.check(client, Date.now());
    const headers = limiter.headers(decision, "per-ip");
    if (!decision.allowed) {
      return new Response(JSON.stringify({ error: "rate limit exceeded" }), {
        status: 429,
        headers: { ...headers, "Content-Type": "application/json" },
      });
    }
    return new Response("ok\n", { status: 200, headers });
  },
};
