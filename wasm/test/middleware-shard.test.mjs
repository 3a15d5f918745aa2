// The Hono middleware exact across isolates: two apps (two isolates' middleware, each
// with its own Worker-side client) on one PorteroShard namespace share one limit, in
// Node on the in-memory stand-ins of the runtime's storage and namespace (the runtime
// itself: durable.test.mjs). Counting by outcome settles through the shard.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { register } from "node:module";

register("./support/loader.mjs", import.meta.url);
const { initSync } = await import("../js/index.js");
const { namespace } = await import("./support/shards.mjs");
const { Hono } = await import("hono");
const { rateLimiter } = await import("../js/hono.js");
initSync(readFileSync(new URL("../pkg/portero_wasm_bg.wasm", import.meta.url)));

function app(ns, options = {}) {
  const a = new Hono();
  a.use(rateLimiter({ windowMs: 60_000, limit: 5, keyGenerator: () => "client", shard: () => ns, ...options }));
  a.get("/", (c) => c.text("ok"));
  a.post("/login", (c) => (c.req.query("pw") === "right" ? c.text("in") : c.text("no", 401)));
  return a;
}

test("two isolates' middleware on one shard namespace admit the limit between them", async () => {
  const ns = namespace();
  const [one, two] = [app(ns), app(ns)];
  const statuses = [];
  for (let i = 0; i < 10; i++) {
    const r = await (i % 2 === 0 ? one : two).request("/");
    statuses.push(r.status);
    if (r.status === 429) assert.ok(Number(r.headers.get("retry-after")) >= 1);
  }
  assert.equal(statuses.filter((s) => s === 200).length, 5, `${statuses}`);
  // In memory instead, each isolate would have admitted five.
  const alone = [app(null, { shard: undefined }), app(null, { shard: undefined })];
  let admitted = 0;
  for (let i = 0; i < 10; i++) admitted += (await alone[i % 2].request("/")).status === 200 ? 1 : 0;
  assert.equal(admitted, 10);
});

test("through the shard, only failures count", async () => {
  const ns = namespace();
  const [one, two] = [app(ns, { skipSuccessfulRequests: true }), app(ns, { skipSuccessfulRequests: true })];
  for (let i = 0; i < 8; i++) {
    const r = await (i % 2 === 0 ? one : two).request("/login?pw=right", { method: "POST" });
    await r.text(); // sent whole: only then does it count as a success
    assert.equal(r.status, 200, `good login ${i}`);
    // Settled off the response's path: give the shard's call its turn.
    await new Promise((r) => setTimeout(r, 5));
  }
  for (let i = 0; i < 5; i++) {
    const r = await (i % 2 === 0 ? one : two).request("/login?pw=wrong", { method: "POST" });
    await r.text();
    assert.equal(r.status, 401);
  }
  assert.equal((await one.request("/login?pw=right", { method: "POST" })).status, 429);
});

test("what a shard cannot do is said when the middleware is made", () => {
  assert.throws(() => rateLimiter({ shard: () => null, resetOnSuccess: true }), /resetOnSuccess needs the limiter in memory/);
  assert.throws(() => rateLimiter({ lease: { batch: 5, lifetimeMs: 1000 } }), /need the shard option/);
});
