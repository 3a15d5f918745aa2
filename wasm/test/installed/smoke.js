// The smoke test every runtime runs on the package as installed from its tarball: a
// per-isolate limiter, a keyed limiter and the 429 response with its headers. It imports
// the package by name (no path into the repository) and uses only what every runtime
// has (no node: modules), so Node, Bun, Deno, workerd and edge-runtime run this one file.
// Time is a fixed argument, so every runtime must answer exactly the same: the runner
// compares their answers, and the checks here hold each answer to the quota it set.
import { Gcra, KeyedLimiter } from "portero";

const T0 = 1_700_000_000_000;
const PER_MINUTE = 6;
const BURST = 3;

function expect(ok, what, got) {
  if (!ok) throw new Error(`smoke: ${what} (got ${JSON.stringify(got)})`);
}

/** Runs the checks; returns the 429 a Worker would send, its body the decisions. */
export function smoke() {
  // Per isolate: a burst of BURST at one instant, then a refusal that names its wait.
  const gcra = new Gcra({ perMinute: PER_MINUTE, burst: BURST });
  const local = Array.from({ length: BURST + 1 }, () => gcra.check(T0));
  expect(local.slice(0, BURST).every((d) => d.allowed), "the burst is admitted", local);
  const over = local[BURST];
  expect(!over.allowed && over.retryAfterMs > 0, "the request after the burst is refused with a wait", over);
  expect(gcra.check(T0 + over.retryAfterMs).allowed, "admitted again after retryAfterMs", over);

  // Keyed: one client's burst leaves another's untouched.
  const keyed = new KeyedLimiter({ perMinute: PER_MINUTE, burst: BURST, maxKeys: 64 });
  const a = Array.from({ length: BURST + 1 }, () => keyed.check("198.51.100.1", T0));
  const refused = a[BURST];
  expect(a.slice(0, BURST).every((d) => d.allowed) && !refused.allowed && !refused.tableFull, "key a: burst, then refused", a);
  const b = keyed.check("198.51.100.2", T0);
  expect(b.allowed && b.remaining === BURST - 1, "key b has its own burst", b);
  expect(keyed.size === 2, "two keys held", keyed.size);

  // The 429: the runtime's own Response must carry the headers unchanged.
  const headers = keyed.headers(refused, "per-ip");
  const retry = Math.ceil(refused.retryAfterMs / 1000);
  const want = {
    "RateLimit-Policy": `"per-ip";q=${PER_MINUTE};w=60`,
    RateLimit: `"per-ip";r=0;t=${retry}`,
    "Retry-After": String(retry),
    "Cache-Control": "no-store",
  };
  expect(JSON.stringify(headers) === JSON.stringify(want), "the refusal's headers", headers);
  const body = { local, keyed: [...a, b], headers: Object.keys(headers) };
  const response = new Response(JSON.stringify(body), {
    status: 429,
    headers: { ...headers, "Content-Type": "application/json" },
  });
  for (const [name, value] of Object.entries(headers)) {
    expect(response.headers.get(name) === value, `the Response keeps ${name}`, response.headers.get(name));
  }
  return response;
}
