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

// Counting by outcome: failed logins. Only 401s count (skipSuccessfulRequests), a
// good login clears the key (resetOnSuccess), and with `penalty` a failure costs more.
function loginApp(options) {
  const app = express();
  app.use(rateLimit({ windowMs: 60_000, limit: 3, skipSuccessfulRequests: true, ...options }));
  app.post("/login", (req, res) => (req.query.pw === "right" ? res.send("in") : res.status(401).send("no")));
  return app;
}

/** Settled after the response: wait for the server's "finish" to have run. */
const settled = () => new Promise((r) => setTimeout(r, 20));

test("express: only failures count, a success gives its unit back", async () => {
  await serving(loginApp({}), async (get) => {
    // Ten good logins: none counts.
    for (let i = 0; i < 10; i++) {
      assert.equal((await get("/login?pw=right", { method: "POST" })).status, 200);
      await settled();
    }
    // Three wrong ones count; the fourth attempt is refused.
    for (let i = 0; i < 3; i++) {
      assert.equal((await get("/login?pw=wrong", { method: "POST" })).status, 401);
      await settled();
    }
    assert.equal((await get("/login?pw=right", { method: "POST" })).status, 429);
  });
});

test("express: resetOnSuccess clears the failures; a penalty makes each cost more", async () => {
  await serving(loginApp({ resetOnSuccess: true }), async (get) => {
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 2; i++) {
        assert.equal((await get("/login?pw=wrong", { method: "POST" })).status, 401);
        await settled();
      }
      // Two failures, then a success: the key starts again.
      assert.equal((await get("/login?pw=right", { method: "POST" })).status, 200);
      await settled();
    }
  });
  await serving(loginApp({ penalty: 3 }), async (get) => {
    assert.equal((await get("/login?pw=wrong", { method: "POST" })).status, 401);
    await settled();
    // One failure cost 3 of 3: the next attempt is refused.
    assert.equal((await get("/login?pw=right", { method: "POST" })).status, 429);
  });
});

test("express: settle moves a request to the cost its handler reported", async () => {
  const app = express();
  app.use(
    rateLimit({
      windowMs: 60_000,
      limit: 10,
      cost: () => 5,
      settle: (req, res) => res.locals.used,
    }),
  );
  app.get("/", (req, res) => {
    res.locals.used = Number(req.query.used);
    res.send("done");
  });
  await serving(app, async (get) => {
    // Estimated 5 each, used 1 each: six fit (each needs its estimate free: after six,
    // 4 of 10 are) where two would without settling.
    for (let i = 0; i < 6; i++) {
      assert.equal((await get("/?used=1")).status, 200, `request ${i}`);
      await settled();
    }
    assert.equal((await get("/?used=1")).status, 429);
  });
});

/** A Hono app's answer to `path`, its body read whole (as a server sends it): its status. */
async function statusOf(app, path, init) {
  const r = await app.request(path, init);
  await r.text();
  return r.status;
}

test("hono: counting by outcome and settling a streamed body at its end", async () => {
  const app = new Hono();
  app.use("/login", rateLimiter({ limit: 2, skipSuccessfulRequests: true, keyGenerator: () => "k" }));
  app.post("/login", (c) => (c.req.query("pw") === "right" ? c.text("in") : c.text("no", 401)));
  for (let i = 0; i < 5; i++) assert.equal(await statusOf(app, "/login?pw=right", { method: "POST" }), 200);
  for (let i = 0; i < 2; i++) assert.equal(await statusOf(app, "/login?pw=wrong", { method: "POST" }), 401);
  assert.equal(await statusOf(app, "/login?pw=right", { method: "POST" }), 429);

  const streamed = new Hono();
  streamed.use(
    rateLimiter({ limit: 10, keyGenerator: () => "s", cost: () => 5, settle: (c) => c.get("used") }),
  );
  streamed.get("/", (c) => {
    let n = 0;
    const body = new ReadableStream({
      pull(controller) {
        if (n++ < 3) controller.enqueue(new TextEncoder().encode("tok "));
        else {
          c.set("used", 1); // known once the stream is done
          controller.close();
        }
      },
    });
    return c.body(body);
  });
  // As above: six fit at an estimate of 5 settled to 1, where two would not settled.
  for (let i = 0; i < 6; i++) {
    const r = await streamed.request("/");
    assert.equal(r.status, 200, `request ${i}`);
    assert.equal(await r.text(), "tok tok tok ");
  }
  assert.equal((await streamed.request("/")).status, 429);
});

// What an outside attack on the middleware found, each a test.

test("requests that arrive together at start share one limiter (each made its own, all admitted)", async () => {
  const app = new Hono();
  app.use(rateLimiter({ limit: 3, keyGenerator: () => "k" }));
  app.get("/", (c) => c.text("ok"));
  const statuses = await Promise.all(Array.from({ length: 20 }, () => statusOf(app, "/")));
  assert.equal(statuses.filter((s) => s === 200).length, 3, `${statuses}`);
  const ex = express();
  const mw = rateLimit({ limit: 3, keyGenerator: () => "k" });
  ex.use(mw);
  ex.get("/", (req, res) => res.send("ok"));
  // The middleware called for 20 requests in one turn, as a pipelined connection does.
  const results = await Promise.all(
    Array.from({ length: 20 }, () => new Promise((done) => {
      const res = { statusCode: 200, headers: {}, set(f) { Object.assign(this.headers, f); return this; }, status(s) { this.statusCode = s; return this; }, json() { done(this.statusCode); }, send() { done(this.statusCode); } };
      mw({ ip: "1.2.3.4" }, res, () => done(200));
    })),
  );
  assert.equal(results.filter((s) => s === 200).length, 3, `${results}`);
});

test("an async requestWasSuccessful is awaited (a promise counted every request as failed)", async () => {
  for (const make of ["express", "hono"]) {
    const options = { limit: 3, keyGenerator: () => "k", skipFailedRequests: true, requestWasSuccessful: async () => true };
    const statuses = [];
    if (make === "express") {
      const app = express();
      app.use(rateLimit(options));
      app.get("/", (req, res) => res.send("ok"));
      await serving(app, async (get) => {
        for (let i = 0; i < 5; i++) {
          const r = await get("/");
          await r.text();
          statuses.push(r.status);
          await settled();
        }
      });
    } else {
      const app = new Hono();
      app.use(rateLimiter(options));
      app.get("/", (c) => c.text("ok"));
      for (let i = 0; i < 5; i++) {
        statuses.push(await statusOf(app, "/"));
        await settled();
      }
    }
    assert.deepEqual(statuses, [200, 200, 200, 429, 429], make);
  }
});

test("hono: a body the client cancels is a failure, and keeps settle's estimate", async () => {
  const app = new Hono();
  app.use(rateLimiter({ limit: 2, keyGenerator: () => "k", skipSuccessfulRequests: true }));
  app.get("/", (c) => c.body(new ReadableStream({ pull(ctl) { ctl.enqueue(new TextEncoder().encode("x")); } })));
  for (let i = 0; i < 2; i++) {
    const r = await app.request("/");
    assert.equal(r.status, 200);
    await r.body.cancel(); // cut off: counts as failed
  }
  assert.equal((await app.request("/")).status, 429);
});

test("express: a response cut off keeps settle's estimate and counts as failed", async () => {
  const app = express();
  app.use(rateLimit({ limit: 2, keyGenerator: () => "k", settle: () => 0 }));
  app.get("/", (req, res) => {
    res.write("start");
    setTimeout(() => res.end("end"), 200);
  });
  await serving(app, async (get) => {
    for (let i = 0; i < 2; i++) {
      const controller = new AbortController();
      const r = await get("/", { signal: controller.signal });
      assert.equal(r.status, 200);
      controller.abort();
      await new Promise((done) => setTimeout(done, 300));
    }
    // Both kept their estimate (settle's 0 not asked for a response cut off).
    assert.equal((await get("/")).status, 429);
  });
});

test("express: a custom handler that rejects is the request's error (500), not an unhandled rejection", async () => {
  const app = express();
  app.use(rateLimit({ limit: 1, keyGenerator: () => "k", handler: async () => { throw new Error("handler broke"); } }));
  app.get("/", (req, res) => res.send("ok"));
  app.use((err, req, res, next) => res.status(500).send(err.message));
  await serving(app, async (get) => {
    assert.equal((await get("/")).status, 200);
    const r = await get("/");
    assert.equal(r.status, 500);
    assert.equal(await r.text(), "handler broke");
  });
});

test("the fields advertise what is admitted: the burst per the time it refills in", async () => {
  const app = new Hono();
  app.use(rateLimiter({ limit: 5, burst: 10, windowMs: 60_000, keyGenerator: () => "k" }));
  app.get("/", (c) => c.text("ok"));
  const r = await app.request("/");
  assert.equal(r.headers.get("ratelimit-policy"), '"default";q=10;w=120');
  assert.match(r.headers.get("ratelimit"), /^"default";r=9;t=\d+$/);
});

test("an estimate of 0 is charged its real cost once known, never a way around the limit (outside review)", async () => {
  // Sequential requests estimated at 0, each reporting 5 of a limit of 10: the first
  // two fill it, the third is admitted for its estimate (nothing) and charged into
  // debt, and then the key waits it out — as a twin charged 5 up front admits two.
  for (const reported of [() => 5, async () => 5]) {
    const app = new Hono();
    app.use(rateLimiter({ windowMs: 3_600_000, limit: 10, keyGenerator: () => "k", cost: () => 0, settle: reported }));
    app.get("/", (c) => c.text("ok"));
    let admitted = 0;
    for (let i = 0; i < 20; i++) {
      if ((await statusOf(app, "/")) === 200) admitted += 1;
      await settled();
    }
    assert.equal(admitted, 3, String(reported));
  }
  // A penalty charges a free request's failure too.
  const app = express();
  app.use(rateLimit({ windowMs: 3_600_000, limit: 6, keyGenerator: () => "p", cost: () => 0, penalty: 3 }));
  app.get("/", (req, res) => res.status(401).send("no"));
  await serving(app, async (get) => {
    const statuses = [];
    for (let i = 0; i < 5; i++) {
      statuses.push((await get("/")).status);
      await settled();
    }
    assert.deepEqual(statuses, [401, 401, 401, 429, 429]);
  });
});

test("an async settle is awaited: units above the estimate are charged (outside review)", async () => {
  const app = new Hono();
  app.use(rateLimiter({ windowMs: 3_600_000, limit: 20, keyGenerator: () => "a", settle: async () => 5 }));
  app.get("/", (c) => c.text("ok"));
  let admitted = 0;
  for (let i = 0; i < 30; i++) {
    if ((await statusOf(app, "/")) === 200) admitted += 1;
    await settled();
  }
  assert.equal(admitted, 4, "5 each of 20, as with a settle that answers at once");
});

test("requestWasSuccessful: any truthy answer is a success, as express-rate-limit reads it (outside review)", async () => {
  const app = express();
  app.use(
    rateLimit({
      windowMs: 3_600_000,
      limit: 3,
      keyGenerator: () => "u",
      skipFailedRequests: true,
      requestWasSuccessful: (req, res) => res.locals.user,
    }),
  );
  app.get("/", (req, res) => {
    res.locals.user = { name: "ann" };
    res.send("hello ann");
  });
  await serving(app, async (get) => {
    const statuses = [];
    for (let i = 0; i < 5; i++) {
      statuses.push((await get("/")).status);
      await settled();
    }
    assert.deepEqual(statuses, [200, 200, 200, 429, 429]);
  });
});
