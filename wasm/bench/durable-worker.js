// The worker `durable.mjs` measures: the same limit checked locally (per isolate), or
// exactly through a Durable Object, one key or ten keys per request (one call for the
// ten, or ten calls), or from leases of 100 units (one call per 100 checks), the next
// one fetched ahead or not.
import wasmModule from "../pkg/portero_wasm_bg.wasm";
import { initSync, KeyedLimiter } from "../js/index.js";
import { EdgeLimiter, PorteroShard } from "../js/durable.js";

initSync(wasmModule);
export { PorteroShard };

const OPEN = { perSecond: 1_000_000, burst: 1_000_000_000 };
let local = null;
let exact = null;
let leased = null;
let ahead = null;

export default {
  async fetch(request, env, ctx) {
    local ??= new KeyedLimiter({ ...OPEN, maxKeys: 10_000 });
    exact ??= new EdgeLimiter({ namespace: env.LIMITER, rule: OPEN, shards: 1 });
    leased ??= new EdgeLimiter({ namespace: env.LIMITER, rule: OPEN, shards: 1, lease: { batch: 100, lifetimeMs: 60_000 } });
    ahead ??= new EdgeLimiter({
      namespace: env.LIMITER,
      rule: OPEN,
      shards: 1,
      lease: { batch: 100, lifetimeMs: 60_000, prefetch: true },
    });
    const url = new URL(request.url);
    const now = Date.now();
    const keys = Array.from({ length: Number(url.searchParams.get("keys") ?? 1) }, (_, i) => `k${i}`);
    let allowed = true;
    switch (url.pathname) {
      case "/local":
        for (const k of keys) allowed &&= local.check(k, now).allowed;
        break;
      case "/exact-one-call":
        allowed = (await exact.checkMany(keys.map((k) => [k, 1]), now)).every((d) => d.allowed);
        break;
      case "/leased":
        for (const k of keys) allowed &&= (await leased.check(k, now)).allowed;
        break;
      case "/leased-prefetch":
        for (const k of keys) allowed &&= (await ahead.check(`ahead-${k}`, now, 1, ctx)).allowed;
        break;
      case "/exact-call-each":
        for (const k of keys) allowed &&= (await exact.check(k, now)).allowed;
        break;
    }
    return new Response(allowed ? "ok" : "no", { status: allowed ? 200 : 429 });
  },
};
