// A Cloudflare Worker, as a Hono app, with one exact limit per client address across
// every isolate and location, as a project that ran `npm install portero hono` writes
// it: `wrangler deploy` next to wrangler.toml deploys it. test/installed/run.mjs
// bundles this file with wrangler and with esbuild from the packed package and serves
// it in workerd.
//
// The module is imported by a name ending in .wasm: wrangler picks the imports it
// uploads as compiled wasm modules by that name (its CompiledWasm rule, `**/*.wasm`),
// not by the file a package export resolves to.
import wasm from "portero/portero.wasm";
import { Hono } from "hono";
import { rateLimiter } from "portero/hono";
import { PorteroShard } from "portero/durable";

// The Durable Object class wrangler.toml binds as LIMITER.
export { PorteroShard };

const app = new Hono();

// Made at the first request: the quota comes from env. The key is CF-Connecting-IP,
// which Cloudflare sets (never X-Forwarded-For, which the client can).
let limit = null;
app.use(async (c, next) => {
  limit ??= rateLimiter({
    wasm,
    windowMs: 3_600_000,
    limit: Number(c.env.RATE_PER_HOUR),
    policy: "per-ip",
    message: "rate limit exceeded\n",
    shard: (c) => c.env.LIMITER,
  });
  return limit(c, next);
});

app.get("*", (c) => {
  // A real Worker would now `return fetch(c.req.raw)` to its origin.
  c.header("X-Served-By", c.get("rateLimit").servedBy);
  return c.text("ok\n");
});

export default app;
