// One server of the middleware benchmark, in its own process (the load generator runs
// in another): `node bench/middleware-server.mjs VARIANT`, printing its port. A
// hello-world with no limiter, with the anchors' middleware, or with portero's, each
// at a limit no request reaches (the cost of the path, not of refusing).
import express from "express";
import { Hono } from "hono";
import { serve } from "@hono/node-server";
import { rateLimit as expressRateLimit } from "express-rate-limit";
import { rateLimiter as honoRateLimiter } from "hono-rate-limiter";
import { rateLimit } from "../js/express.js";
import { rateLimiter } from "../js/hono.js";

const variant = process.argv[2];
const LIMIT = 1_000_000_000;
const WINDOW = 60_000;
// One key for every request (loopback): the same table path for each limiter.
const key = () => "client";
// The floors under any limiting middleware: one that does nothing, and one that only
// sets two fields as long as a limiter's (what every limiter here adds to a response).
const FIELDS = { "ratelimit-policy": '"default";q=1000000000;w=60', ratelimit: '"default";r=999999999;t=1' };

if (variant.startsWith("express")) {
  const app = express();
  if (variant === "express-rate-limit") {
    app.use(expressRateLimit({ windowMs: WINDOW, limit: LIMIT, keyGenerator: key, standardHeaders: "draft-8", legacyHeaders: false }));
  } else if (variant === "express-floor-noop") {
    app.use((req, res, next) => next());
  } else if (variant === "express-floor-fields") {
    app.use((req, res, next) => {
      for (const k in FIELDS) res.setHeader(k, FIELDS[k]);
      next();
    });
  } else if (variant === "express-portero") {
    app.use(rateLimit({ windowMs: WINDOW, limit: LIMIT, keyGenerator: key }));
  }
  app.get("/", (req, res) => res.send("hello"));
  const server = app.listen(0, "127.0.0.1", () => console.log(server.address().port));
} else {
  const app = new Hono();
  if (variant === "hono-rate-limiter") {
    app.use(honoRateLimiter({ windowMs: WINDOW, limit: LIMIT, keyGenerator: key, standardHeaders: "draft-7" }));
  } else if (variant === "hono-floor-noop") {
    app.use((c, next) => next());
  } else if (variant === "hono-floor-fields") {
    app.use((c, next) => {
      for (const k in FIELDS) c.header(k, FIELDS[k]);
      return next();
    });
  } else if (variant === "hono-portero") {
    app.use(rateLimiter({ windowMs: WINDOW, limit: LIMIT, keyGenerator: key }));
  }
  app.get("/", (c) => c.text("hello"));
  serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, (info) => console.log(info.port));
}
