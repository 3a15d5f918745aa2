// An edge Worker with one exact limit per client address across every isolate and
// location: `PorteroShard` Durable Objects hold the state, `EdgeLimiter` answers what it
// can locally first. Bind the class as `LIMITER` (see wasm/README.md).
import wasmModule from "../pkg/portero_wasm_bg.wasm";
import { initSync } from "../js/index.js";
import { EdgeLimiter, PorteroShard } from "../js/durable.js";

initSync(wasmModule);

export { PorteroShard };

let limiter = null;
let perSecond = null;
let leased = null;
let exact = null;

export default {
  async fetch(request, env) {
    limiter ??= new EdgeLimiter({
      namespace: env.LIMITER,
      rule: { perHour: Number(env.RATE_PER_HOUR ?? 50) },
      shards: Number(env.SHARDS ?? 16),
    });
    // Cloudflare sets CF-Connecting-IP; never trust X-Forwarded-For from the client.
    const client = request.headers.get("CF-Connecting-IP") ?? "unknown";
    const path = new URL(request.url).pathname;
    // The same hourly rule (and state), answered from leases of LEASE_BATCH units (1 on
    // /leased-exact) that this isolate spends for a minute without calling the object.
    leased ??= new EdgeLimiter({
      namespace: env.LIMITER,
      rule: { perHour: Number(env.RATE_PER_HOUR ?? 50) },
      shards: Number(env.SHARDS ?? 16),
      lease: { batch: Number(env.LEASE_BATCH ?? 10), lifetimeMs: 60_000 },
    });
    exact ??= new EdgeLimiter({
      namespace: env.LIMITER,
      rule: { perHour: Number(env.RATE_PER_HOUR ?? 50) },
      shards: Number(env.SHARDS ?? 16),
      lease: { batch: 1, lifetimeMs: 60_000 },
    });
    if (path === "/__stats") {
      const calls = { calls: limiter.calls, leasedCalls: leased.calls, leasedUnits: leased.leasedUnits(client) };
      return Response.json({ ...(await limiter.shardStats(client)), ...calls });
    }
    // A second rule on the same keys (its own state): 1 at a time, 1 per second, idle
    // keys swept every 200 ms.
    perSecond ??= new EdgeLimiter({
      namespace: env.LIMITER,
      rule: { perSecond: 1, burst: 1 },
      shards: Number(env.SHARDS ?? 16),
      sweepMs: 200,
    });
    const chosen = { "/burst": perSecond, "/leased": leased, "/leased-exact": exact }[path] ?? limiter;
    const decision = await chosen.check(client, Date.now());
    const headers = { ...limiter.headers(decision, "per-ip"), "X-Served-By": decision.servedBy };
    if (!decision.allowed) {
      return new Response(JSON.stringify({ error: "rate limit exceeded" }), {
        status: 429,
        headers: { ...headers, "Content-Type": "application/json" },
      });
    }
    return new Response("ok\n", { status: 200, headers });
  },
};
