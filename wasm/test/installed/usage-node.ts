// The local limiters as Node, Bun or Deno code uses them, compiled with
// `tsc --strict --noEmit` and Node's module resolution (nodenext), without
// workers-types.
import { initSync, init, algorithms, Gcra, TokenBucket, FixedWindow, SlidingWindowCounter, LeakyMeter, KeyedLimiter, Rule, rateLimitHeaders, type AlgorithmName, type Decision, type Headers, type QuotaOptions } from "portero";
import { rateLimit } from "portero/express";
import { rateLimiter } from "portero/hono";

declare const bytes: Uint8Array;
initSync(bytes);
void init(new URL("file:///portero.wasm"));

const names: AlgorithmName[] = algorithms();
const quota: QuotaOptions = { perSecond: 10, capacity: 20 };
const limiters = [new Gcra(quota), new TokenBucket(quota), new FixedWindow(quota), new SlidingWindowCounter(quota), new LeakyMeter(quota)];
const decisions: Decision[] = limiters.map((l) => l.check(Date.now()));
const allowed: boolean = limiters[0].allow(Date.now(), 2);
const keyed = new KeyedLimiter({ ...quota, algorithm: names[0] });
const swept: number = keyed.sweep(Date.now());
const rule = new Rule({ perHour: 100 });
const [d, state] = rule.decide(rule.initialState, Date.now(), 1, false);
const headers: Headers = rateLimitHeaders(d, { policy: "per-ip", quota: rule.quota.limit, windowSeconds: 3_600 });
// @ts-expect-error the window is required
rateLimitHeaders(d, { quota: 1 });
// @ts-expect-error state is a BigInt
rule.decide(0, Date.now());
// The middleware, typed.
const forExpress = rateLimit({ windowMs: 60_000, limit: 100, keyGenerator: (req) => String(req.ip), cost: () => 2 });
const forHono = rateLimiter({ limit: 10, handler: (c, { decision }) => new Response(String(decision.retryAfterMs), { status: 429 }) });
// @ts-expect-error a key function returns a string
rateLimiter({ keyGenerator: 7 });
export { decisions, allowed, swept, state, headers, forExpress, forHono };
