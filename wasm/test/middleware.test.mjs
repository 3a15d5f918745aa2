// The middleware with the real frameworks from npm: Express over a real socket, Hono
// through its own request handling, in Node. The scenarios are express-rate-limit's
// documented behaviour where the options share a name: the limit reached answers 429
// with the fields and Retry-After; `skip`; a custom key; a custom handler; `message`
// and `statusCode`; the legacy fields; a cost per request.
import { test } from "node:test";
import assert from "node:assert/strict";

import express from "express";
import { Hono } from "hono";

import { rateLimit } from "../js/express.js";
import { rateLimiter } from "../js/hono.js";

/** Serves `app` on a free loopback port; `fetch`es paths on it; closes it. */
async function serving(app, run) {
  const server = await new Promise((ready) => {
    const s = app.listen(0, "127.0.0.1", () => ready(s));
  });
  const base = `http://127.0.0.1:${server.address().port}`;
  try {
    await run((path, init) => fetch(base + path, init));
  } finally {
    await new Promise((done) => server.close(done));
  }
}

function expressApp(options) {
  const app = express();
  app.use(rateLimit(options));
  app.get("/", (req, res) => res.send("ok"));
  app.get("/health", (req, res) => res.send("up"));
  return app;
}

test("express: the limit reached answers 429 with the fields, exact Retry-After, JSON body", async () => {
  await serving(expressApp({ windowMs: 60_000, limit: 3 }), async (get) => {
    for (const left of [2, 1, 0]) {
      const r = await get("/");
      assert.equal(r.status, 200);
      assert.equal(await r.text(), "ok");
      assert.equal(r.headers.get("ratelimit-policy"), '"default";q=3;w=60');
      assert.match(r.headers.get("ratelimit"), new RegExp(`^"default";r=${left};t=\\d+$`));
    }
    const r = await get("/");
    assert.equal(r.status, 429);
    assert.deepEqual(await r.json(), { error: "rate limit exceeded" });
    // GCRA: one request every 20 s; the next is 20 s away.
    assert.equal(r.headers.get("retry-after"), "20");
    assert.equal(r.headers.get("cache-control"), "no-store");
    assert.match(r.headers.get("ratelimit"), /^"default";r=0;t=20$/);
  });
});

test("express: skip, a custom key, message, statusCode, handler, legacy fields, cost", async () => {
  const app = express();
  app.use(
    rateLimit({
      limit: 2,
      skip: (req) => req.path === "/health",
      keyGenerator: (req) => req.get("x-api-key") ?? "anonymous",
      message: "slow down",
      statusCode: 503,
      legacyHeaders: true,
      cost: (req) => Number(req.get("x-cost") ?? 1),
    }),
  );
  app.get("/", (req, res) => res.send("ok"));
  app.get("/health", (req, res) => res.send("up"));
  await serving(app, async (get) => {
    const as = (key, cost = 1) => get("/", { headers: { "x-api-key": key, "x-cost": String(cost) } });
    assert.equal((await as("a", 2)).status, 200);
    const refused = await as("a");
    assert.equal(refused.status, 503);
    assert.equal(await refused.text(), "slow down");
    assert.equal(refused.headers.get("x-ratelimit-limit"), "2");
    assert.equal(refused.headers.get("x-ratelimit-remaining"), "0");
    assert.ok(Number(refused.headers.get("x-ratelimit-reset")) > Date.now() / 1000);
    // Another key has its own.
    assert.equal((await as("b")).status, 200);
    for (let i = 0; i < 5; i++) assert.equal((await get("/health")).status, 200, "skipped");
  });
  const handled = express();
  handled.use(rateLimit({ limit: 1, handler: (req, res, next, { decision }) => res.status(429).send(`wait ${decision.retryAfterMs} ms`) }));
  handled.get("/", (req, res) => res.send("ok"));
  await serving(handled, async (get) => {
    assert.equal((await get("/")).status, 200);
    const r = await get("/");
    assert.equal(r.status, 429);
    assert.match(await r.text(), /^wait \d+ ms$/);
    assert.ok(r.headers.get("retry-after"), "the fields are set before the handler");
  });
});

test("express: bad options are errors when the middleware is made", () => {
  assert.throws(() => rateLimit({ limit: 0 }), /limit must be a whole number/);
  assert.throws(() => rateLimit({ windowMs: NaN }), /windowMs/);
  assert.throws(() => rateLimit({ keyGenerator: "ip" }), /keyGenerator must be a function/);
  assert.throws(() => rateLimit({ standardHeaders: "draft-6" }), /standardHeaders/);
});

test("express: a key generator that returns nothing is an error passed to next, not an admission", async () => {
  const app = express();
  app.use(rateLimit({ keyGenerator: () => undefined }));
  app.get("/", (req, res) => res.send("ok"));
  await serving(app, async (get) => {
    assert.equal((await get("/")).status, 500);
  });
});

function honoApp(options) {
  const app = new Hono();
  app.use(rateLimiter(options));
  app.get("/", (c) => c.text("ok"));
  app.get("/raw", () => new Response("raw"));
  app.get("/health", (c) => c.text("up"));
  return app;
}

test("hono: the limit reached answers 429 with the fields and Retry-After", async () => {
  const app = honoApp({ limit: 3, keyGenerator: (c) => c.req.header("x-api-key") ?? "-" });
  const ask = (path = "/") => app.request(path, { headers: { "x-api-key": "k" } });
  for (const left of [2, 1]) {
    const r = await ask();
    assert.equal(r.status, 200);
    assert.match(r.headers.get("ratelimit"), new RegExp(`^"default";r=${left};t=\\d+$`));
  }
  const raw = await ask("/raw");
  assert.equal(await raw.text(), "raw");
  assert.match(raw.headers.get("ratelimit"), /r=0/, "fields on a response the handler made itself");
  const r = await ask();
  assert.equal(r.status, 429);
  assert.deepEqual(await r.json(), { error: "rate limit exceeded" });
  assert.equal(r.headers.get("retry-after"), "20");
  assert.equal(r.headers.get("ratelimit-policy"), '"default";q=3;w=60');
});

test("hono: skip, handler, message, and the socket's address in Node's server", async () => {
  const app = honoApp({ limit: 1, skip: (c) => c.req.path === "/health", message: "no" });
  // Node's server (hono's adapter) hands the IncomingMessage as env.incoming.
  const from = (address) => ({ incoming: { socket: { remoteAddress: address } } });
  assert.equal((await app.request("/", {}, from("10.0.0.1"))).status, 200);
  const refused = await app.request("/", {}, from("10.0.0.1"));
  assert.equal(refused.status, 429);
  assert.equal(await refused.text(), "no");
  assert.equal((await app.request("/", {}, from("10.0.0.2"))).status, 200);
  for (let i = 0; i < 3; i++) assert.equal((await app.request("/health", {}, from("10.0.0.1"))).status, 200);
  // No address and no key function: an error, not a shared or unlimited bucket.
  const anonymous = await app.request("/");
  assert.equal(anonymous.status, 500);

  const handled = honoApp({ limit: 1, keyGenerator: () => "one", handler: (c, { decision }) => c.text(`later: ${decision.retryAfterMs}`, 429) });
  assert.equal((await handled.request("/")).status, 200);
  const r = await handled.request("/");
  assert.equal(r.status, 429);
  assert.match(await r.text(), /^later: \d+$/);
  assert.ok(r.headers.get("retry-after"));
});
