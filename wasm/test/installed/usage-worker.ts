// A Worker written against the package's types as installed from the tarball, with
// Cloudflare's workers-types as a Worker project has them; run.mjs compiles it with
// `tsc --strict --noEmit`. Each @ts-expect-error line must fail to compile (tsc fails
// if it does not): the option types are real, not Record<string, unknown>.
import wasmModule from "portero/portero.wasm";
import { initSync, Gcra, KeyedLimiter, Rule, type Decision, type KeyedDecision } from "portero";
import { EdgeLimiter, PorteroShard, type EdgeDecision } from "portero/durable";

initSync(wasmModule);
export { PorteroShard };

interface Env {
  LIMITER: DurableObjectNamespace;
  RATE_PER_HOUR: string;
}

const perIp = new KeyedLimiter({ perMinute: 60, burst: 20, maxKeys: 100_000, algorithm: "token-bucket", evict: true });
let exact: EdgeLimiter | null = null;

export default {
  async fetch(request, env) {
    const ip = request.headers.get("CF-Connecting-IP") ?? "unknown";
    const coarse: KeyedDecision = perIp.check(ip, Date.now());
    if (!coarse.allowed) return new Response(null, { status: 429, headers: perIp.headers(coarse, "per-ip") });
    exact ??= new EdgeLimiter({
      namespace: env.LIMITER,
      rule: { perHour: Number(env.RATE_PER_HOUR), algorithm: "sliding-window-counter" },
      shards: 16,
      maxKeys: 1_000,
      durability: "fast",
      sweepMs: 1_000,
      localKeys: 100,
    });
    const leased = new EdgeLimiter({ namespace: env.LIMITER, rule: { perHour: 1_000 }, lease: { batch: 20, lifetimeMs: 5_000 } });
    const fromLease: EdgeDecision = await leased.check(ip);
    const servedBy: "local" | "shard" | "lease" = fromLease.servedBy;
    const held: number = leased.leasedUnits(ip);
    const d: EdgeDecision = await exact.check(ip, Date.now(), 2);
    const both: EdgeDecision[] = await exact.checkMany([[ip], [`${ip}/login`, 3]] as const);
    const headers: Record<string, string> = exact.headers(d, "per-ip");
    return new Response(JSON.stringify({ d, both, servedBy, held, stats: await exact.shardStats(ip) }), {
      status: d.allowed ? 200 : 429,
      headers,
    });
  },
} satisfies ExportedHandler<Env>;

function misuse(env: Env): Decision[] {
  const rule = new Rule({ limit: 10, periodMs: 1_000, capacity: 5 });
  const [decision, next]: [Decision, bigint] = rule.decide(rule.initialState, 0);
  // The canonical quota is itself valid rule options.
  new Rule(rule.quota).decide(next, 1);
  // @ts-expect-error a rate is required
  new Gcra({ burst: 5 });
  // @ts-expect-error a limit needs its period
  new Gcra({ limit: 5 });
  // @ts-expect-error rates are numbers
  new KeyedLimiter({ perMinute: "60" });
  // @ts-expect-error an algorithm the core has
  new Rule({ perSecond: 1, algorithm: "fixed" });
  // @ts-expect-error durability is "confirmed" or "fast"
  new EdgeLimiter({ namespace: env.LIMITER, rule: { perHour: 1 }, durability: "slow" });
  // @ts-expect-error a namespace binding, not its name
  new EdgeLimiter({ namespace: "LIMITER", rule: { perHour: 1 } });
  // @ts-expect-error a lease has a lifetime
  new EdgeLimiter({ namespace: env.LIMITER, rule: { perHour: 1 }, lease: { batch: 1 } });
  // @ts-expect-error a batch is a number of units
  new EdgeLimiter({ namespace: env.LIMITER, rule: { perHour: 1 }, lease: { batch: "10", lifetimeMs: 1 } });
  // @ts-expect-error keys are strings
  void exact?.checkMany([[1, 1]]);
  return [decision];
}
void misuse;
