// The middleware over Redis, for several Node processes: a real redis-server (loopback,
// a free port, stopped by its own process id) and a real client from npm (node-redis),
// two Express apps and a Hono app as three processes would run them. The script is
// portero-redis's own, and the keys are those a Rust RedisLimiter of the same quota and
// prefix writes, so Rust and Node instances share one limit.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";

import express from "express";
import { Hono } from "hono";
import { createClient } from "redis";

import { rateLimit } from "../js/express.js";
import { rateLimiter } from "../js/hono.js";
import { freePort } from "./support/workerd.mjs";

let server;
let port;
let client;

async function startRedis() {
  const child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
    stdio: "ignore",
  });
  const deadline = Date.now() + 10_000;
  for (;;) {
    const probe = createClient({ url: `redis://127.0.0.1:${port}`, socket: { reconnectStrategy: false } });
    probe.on("error", () => {});
    try {
      await probe.connect();
      await probe.quit();
      return child;
    } catch {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error("redis-server did not start (is it installed? cargo xtask setup)");
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

function stopRedis(child) {
  if (child && child.exitCode === null) {
    const exited = new Promise((r) => child.once("exit", r));
    process.kill(child.pid, "SIGKILL");
    return exited;
  }
}

before(async () => {
  port = await freePort();
  server = await startRedis();
  client = createClient({ url: `redis://127.0.0.1:${port}` });
  client.on("error", () => {}); // the outage test stops the server under it
  await client.connect();
});

after(async () => {
  await client?.disconnect().catch(() => {});
  await stopRedis(server);
});

const sendCommand = (...args) => client.sendCommand(args);

async function serving(app, run) {
  const s = await new Promise((ready) => {
    const srv = app.listen(0, "127.0.0.1", () => ready(srv));
  });
  try {
    await run((path) => fetch(`http://127.0.0.1:${s.address().port}${path}`));
  } finally {
    await new Promise((done) => s.close(done));
  }
}

function expressApp(options) {
  const app = express();
  app.use(rateLimit({ windowMs: 60_000, limit: 5, keyGenerator: () => "alice", redis: { sendCommand }, ...options }));
  app.get("/", (req, res) => res.send("ok"));
  return app;
}

test("two processes' middleware share one limit in Redis, under the keys a Rust RedisLimiter writes", async () => {
  await serving(expressApp(), async (one) => {
    await serving(expressApp(), async (two) => {
      const statuses = [];
      for (let i = 0; i < 8; i++) {
        const r = await (i % 2 === 0 ? one : two)("/");
        statuses.push(r.status);
        if (r.status === 200) assert.match(r.headers.get("ratelimit"), /^"default";r=\d;t=\d+$/);
        else {
          // GCRA at 5 a minute: the next unit in 12 s.
          assert.equal(r.headers.get("retry-after"), "12");
          assert.deepEqual(await r.json(), { error: "rate limit exceeded" });
        }
      }
      assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429, 429, 429]);
    });
  });
  // RedisLimiter::connect(…, RedisAlgorithm::gcra(Quota::per_minute(5)?)?) with the
  // prefix "portero:" checks "alice" under this key.
  assert.deepEqual(await client.keys("portero:*"), ["portero:{5:alice}:gcra:12000000us:5"]);
});

test("a Hono app on the same Redis shares the limit of the same key", async () => {
  const app = new Hono();
  app.use(rateLimiter({ windowMs: 60_000, limit: 5, keyGenerator: () => "alice", redis: { sendCommand } }));
  app.get("/", (c) => c.text("ok"));
  // alice spent her five above.
  assert.equal((await app.request("/")).status, 429);
  const bob = new Hono();
  bob.use(rateLimiter({ windowMs: 60_000, limit: 5, keyGenerator: () => "bob", redis: { sendCommand } }));
  bob.get("/", (c) => c.text("ok"));
  assert.equal((await bob.request("/")).status, 200);
});

test("bad options are errors when the middleware is made", () => {
  assert.throws(() => rateLimit({ redis: {} }), /redis.sendCommand must be a function/);
  assert.throws(() => rateLimit({ redis: { sendCommand, prefix: "a{b" } }), /without \{ or \}/);
  assert.throws(() => rateLimit({ redis: { sendCommand, whenDown: "maybe" } }), /"open" or "closed"/);
  assert.throws(() => rateLimit({ redis: { sendCommand }, algorithm: "fixed-window" }), /runs gcra/);
  assert.throws(() => rateLimit({ redis: { sendCommand }, resetOnSuccess: true }), /resetOnSuccess needs the limiter in memory/);
});

test("counting by outcome through Redis: failed requests give their units back, a penalty charges more, settle reports the real cost", async () => {
  // Failed logins only: five 401s are all the key gets, successes cost nothing.
  const login = express();
  login.use(rateLimit({ windowMs: 60_000, limit: 5, keyGenerator: () => "mallory", redis: { sendCommand }, skipSuccessfulRequests: true }));
  login.get("/", (req, res) => res.status(req.query.ok === "1" ? 200 : 401).send("?"));
  await serving(login, async (get) => {
    for (let i = 0; i < 20; i++) assert.equal((await get("/?ok=1")).status, 200, `success ${i} costs nothing`);
    // Settlements are made when each response is done: let them land.
    await new Promise((r) => setTimeout(r, 50));
    const failed = [];
    for (let i = 0; i < 7; i++) {
      failed.push((await get("/")).status);
      await new Promise((r) => setTimeout(r, 5));
    }
    assert.deepEqual(failed, [401, 401, 401, 401, 401, 429, 429]);
  });
  // Streamed tokens: each admitted at an estimate of 10 of 100, settled at 2 after the
  // body's end (Hono), so 100 / 2 = 50 requests fit where the estimate alone lets 10.
  const app = new Hono();
  app.use(
    rateLimiter({
      windowMs: 3_600_000,
      limit: 100,
      keyGenerator: () => "tokens",
      cost: () => 10,
      settle: () => 2,
      redis: { sendCommand },
    }),
  );
  app.get("/", (c) => c.text("streamed"));
  let admitted = 0;
  for (let i = 0; i < 60; i++) {
    const r = await app.request("/");
    await r.text();
    await new Promise((done) => setTimeout(done, 2));
    if (r.status === 200) admitted += 1;
  }
  // The last estimate needs 10 free: 45 settled at 2 leave 10.
  assert.equal(admitted, 46);
  // A penalty: a failure charged 3 units past the estimate's 1.
  const penalty = express();
  penalty.use(rateLimit({ windowMs: 60_000, limit: 6, keyGenerator: () => "trudy", redis: { sendCommand }, penalty: 3 }));
  penalty.get("/", (req, res) => res.status(403).send("no"));
  await serving(penalty, async (get) => {
    const statuses = [];
    for (let i = 0; i < 4; i++) {
      statuses.push((await get("/")).status);
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.deepEqual(statuses, [403, 403, 429, 429], "3 + 3 of 6 spent by two failures");
  });
});

test("through Redis, an estimate of 0 is charged its real cost once known (outside review)", async () => {
  const app = express();
  app.use(rateLimit({ windowMs: 3_600_000, limit: 10, keyGenerator: () => "zero", cost: () => 0, settle: () => 5, redis: { sendCommand } }));
  app.get("/", (req, res) => res.send("ok"));
  await serving(app, async (get) => {
    let admitted = 0;
    for (let i = 0; i < 20; i++) {
      if ((await get("/")).status === 200) admitted += 1;
      await new Promise((r) => setTimeout(r, 20));
    }
    // Two fill the limit; the third fits its estimate (nothing) and is charged into
    // debt; then the key waits it out. Before: all twenty, the key still full.
    assert.equal(admitted, 3);
  });
});

test("a reply that is not the script's (a broken client or proxy) is no answer: the outage policy decides", async () => {
  for (const reply of [[1, 0, 0, 0, NaN, NaN], ["1", "0", "1", "-5", "0", "0"], [1, 0, 1, 3.5, 0, 0], "OK", null]) {
    const garbage = async (...args) => (args[0] === "SCRIPT" ? "sha" : reply);
    const app = expressApp({ keyGenerator: () => "eve", redis: { sendCommand: garbage } });
    await serving(app, async (get) => {
      const r = await get("/");
      assert.equal(r.status, 503, JSON.stringify(reply));
      assert.equal(r.headers.get("ratelimit"), null);
    });
  }
});

test("Redis away: failing closed answers 503, failing open lets requests by", async () => {
  const closed = expressApp({ keyGenerator: () => "carol" });
  const open = expressApp({ keyGenerator: () => "dan", redis: { sendCommand, whenDown: "open", timeoutMs: 100 } });
  await stopRedis(server);
  await serving(closed, async (get) => {
    const r = await get("/");
    assert.equal(r.status, 503);
    assert.equal(r.headers.get("retry-after"), "1");
    assert.deepEqual(await r.json(), { error: "rate limit unavailable" });
  });
  await serving(open, async (get) => {
    assert.equal((await get("/")).status, 200);
  });
  server = await startRedis();
});
