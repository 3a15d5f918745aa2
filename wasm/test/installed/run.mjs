// The npm package as a user installs it: `npm pack` makes the tarball a registry would
// serve, a fresh project outside the repository installs only that tarball, and the
// same smoke test (smoke.js) runs there in Node, Bun, Deno, workerd and Vercel's
// edge-runtime; wrangler and esbuild bundle the Cloudflare example (example/cloudflare),
// which workerd then serves with the bindings and migration of its wrangler.toml; tsc
// compiles typed usage against the installed declarations. Every runtime comes from
// this package's pinned devDependencies (`npm ci`); a missing one fails the run.
// Servers listen on free loopback ports and are stopped by their own process ids.
//
//   npm run test:installed   (after `cargo xtask wasm`)
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { parse as parseToml } from "smol-toml";
import { binary as workerdBinary, freePort, root, startWorkerd, stopWorkerd, workerdConfig } from "../support/workerd.mjs";

const here = join(root, "test", "installed");
const example = join(root, "example", "cloudflare");
const pinned = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).devDependencies;

// The runtimes and tools, from wasm/node_modules. Bun and Deno are native binaries;
// edge-runtime, wrangler and tsc are started through a runtime so that the process id
// we keep (and stop) is the program's own.
const modules = join(root, "node_modules");
const tools = {
  bun: join(modules, "bun", "bin", "bun.exe"),
  deno: join(modules, "deno", "deno"),
  esbuild: join(modules, "esbuild", "bin", "esbuild"),
  edgeRuntime: join(modules, "edge-runtime", "dist", "cli", "index.js"),
  tsc: join(modules, "typescript", "bin", "tsc"),
  workersTypes: join(modules, "@cloudflare", "workers-types"),
  wrangler: join(modules, "wrangler", "bin", "wrangler.js"),
  workerd: workerdBinary,
};

let tmp; // the temporary directory: tarball, the user's project, workerd's config
let app; // the user's project: package.json, node_modules/portero, the example
let packed; // npm pack's report
let reference; // what Node answered: every other runtime must answer the same
const versions = { node: process.version };
// Every process started here: whatever a failed or timed-out test left running is
// stopped (by its pid) after the tests, so the run always ends.
const children = new Set();
// wrangler's settings, logs and metrics id stay in the temporary directory.
const wranglerEnv = () => ({
  WRANGLER_SEND_METRICS: "false",
  XDG_CONFIG_HOME: join(tmp, "config"),
  WRANGLER_LOG_PATH: join(tmp, "wrangler-logs"),
});

/** Runs a program to its end (at most `timeoutMs`, then killed by its pid); rejects on a non-zero exit. */
function run(cmd, args, { cwd = app, env = {}, timeoutMs = 120_000 } = {}) {
  return new Promise((resolve, reject) => {
    // Bun's transpiler cache too goes in the temporary directory, not the home directory.
    const cache = { BUN_RUNTIME_TRANSPILER_CACHE_PATH: join(tmp, "bun-cache") };
    const child = spawn(cmd, args, { cwd, env: { ...process.env, NO_COLOR: "1", ...cache, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    children.add(child);
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      const what = `${basename(cmd)} ${args.join(" ")}`;
      if (code === 0) resolve({ stdout, stderr });
      else reject(new Error(`${what}: ${signal ? `killed (${signal}) after ${timeoutMs} ms` : `exit ${code}`}\n${stdout}\n${stderr}`));
    });
  });
}

/** Starts a server and waits (up to 30 s) until `url` answers; stop it with stopWorkerd. */
async function serve(cmd, args, url) {
  let log = "";
  const child = spawn(cmd, args, { cwd: app, env: { ...process.env, NO_COLOR: "1" }, stdio: ["ignore", "pipe", "pipe"] });
  children.add(child);
  child.stdout.on("data", (d) => (log += d));
  child.stderr.on("data", (d) => (log += d));
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${basename(cmd)} exited (${child.exitCode}):\n${log}`);
    try {
      await (await fetch(url)).arrayBuffer();
      return { child, log: () => log };
    } catch {
      if (Date.now() > deadline) {
        await stopWorkerd(child);
        throw new Error(`${basename(cmd)} did not answer at ${url} in 30 s:\n${log}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** What a client sees of the smoke test's 429: its status, the limiter's headers, the body. */
function seen({ status, headers, body }) {
  const get = (name) => (headers instanceof Headers ? headers.get(name) : headers[name.toLowerCase()]);
  return { status, headers: Object.fromEntries(body.headers.map((name) => [name, get(name)])), body };
}

async function fetchSmoke(url) {
  const r = await fetch(url);
  return seen({ status: r.status, headers: r.headers, body: await r.json() });
}

before(async () => {
  for (const [name, path] of Object.entries(tools)) {
    assert.ok(existsSync(path), `${name} missing at ${path}: run npm ci --prefix wasm (it installs every runtime this test uses)`);
  }
  assert.ok(existsSync(join(root, "pkg", "portero_wasm_bg.wasm")), "wasm/pkg missing: run cargo xtask wasm");
  tmp = mkdtempSync(join(tmpdir(), "portero-installed-"));
  // The tarball, exactly as `npm publish` would upload it.
  [packed] = JSON.parse((await run("npm", ["pack", "--json", "--pack-destination", tmp], { cwd: root })).stdout);
  // A project that knows nothing of the repository: only the tarball is installed
  // (copied into node_modules, not linked). The package has no dependencies, so the
  // install must work offline.
  app = join(tmp, "app");
  mkdirSync(app);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "portero-user", private: true, type: "module" }));
  await run("npm", ["install", "--offline", "--no-audit", "--no-fund", join(tmp, packed.filename)]);
  // The Cloudflare example is a Hono app: the user installs Hono beside the package
  // (the version this package tests against, from npm's cache).
  await run("npm", ["install", "--offline", "--no-audit", "--no-fund", `hono@${pinned.hono}`]);
  assert.ok(!lstatSync(join(app, "node_modules", "portero")).isSymbolicLink(), "portero is installed, not linked");
  for (const f of readdirSync(here)) if (f !== "run.mjs") cpSync(join(here, f), join(app, f));
  // The example goes where the README says: the project's root, beside node_modules.
  for (const f of readdirSync(example)) {
    assert.ok(!existsSync(join(app, f)), `${f}: the example and this test's files share a name`);
    cpSync(join(example, f), join(app, f));
  }
  // The versions each runtime reports must be the pinned ones.
  const report = async (cmd, args, env) => (await run(cmd, args, { env })).stdout.trim();
  versions.bun = await report(tools.bun, ["--version"]);
  versions.deno = (await report(tools.deno, ["--version"])).split("\n")[0];
  versions.workerd = await report(tools.workerd, ["--version"]);
  versions.esbuild = await report(tools.esbuild, ["--version"]);
  versions.tsc = await report(process.execPath, [tools.tsc, "--version"]);
  versions.wrangler = (await report(tools.bun, [tools.wrangler, "--version"], wranglerEnv())).match(/\d+\.\d+\.\d+/)?.[0];
  versions.edgeRuntime = JSON.parse(readFileSync(join(modules, "edge-runtime", "package.json"), "utf8")).version;
  assert.equal(versions.bun, pinned.bun);
  // workerd 1.YYYYMMDD.n reports its date.
  assert.equal(versions.workerd, `workerd ${pinned.workerd.split(".")[1].replace(/(\d{4})(\d\d)(\d\d)/, "$1-$2-$3")}`);
  assert.match(versions.deno, new RegExp(`^deno ${pinned.deno} `));
  assert.equal(versions.esbuild, pinned.esbuild);
  assert.equal(versions.tsc, `Version ${pinned.typescript}`);
  assert.equal(versions.wrangler, pinned.wrangler);
  assert.equal(versions.edgeRuntime, pinned["edge-runtime"]);
  console.log(`# runtimes: ${JSON.stringify(versions)}`);
}, { timeout: 300_000 });

after(async () => {
  for (const child of children) await stopWorkerd(child);
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

test("the tarball holds every file package.json points to, the examples shipped, and no test or source", () => {
  const files = new Set(packed.files.map((f) => f.path));
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  const targets = [pkg.main, pkg.types];
  const walk = (v) => (typeof v === "string" ? targets.push(v) : Object.values(v).forEach(walk));
  walk(pkg.exports);
  for (const t of targets) assert.ok(files.has(t.replace(/^\.\//, "")), `${t} is in the tarball`);
  for (const license of ["LICENSE-MIT", "LICENSE-APACHE"]) {
    assert.ok(files.has(license), `${license} is in the tarball`);
    assert.equal(readFileSync(join(root, license), "utf8"), readFileSync(join(root, "..", license), "utf8"), "the root's text");
  }
  // The examples shipped: the local recipes (a Worker, and the Durable Object's
  // Worker, each with the workerd config that serves it) and the Cloudflare project.
  const shipped = new Set([
    "example/worker.js",
    "example/workerd.capnp",
    "example/durable-worker.js",
    "example/durable.capnp",
    "example/cloudflare/worker.js",
    "example/cloudflare/wrangler.toml",
  ]);
  for (const f of shipped) assert.ok(files.has(f), `${f} is in the tarball`);
  for (const f of files) if (!shipped.has(f)) assert.doesNotMatch(f, /^(test|example|src|bench|node_modules)\//, f);
});

test("Node runs the smoke test", { timeout: 60_000 }, async () => {
  reference = seen(JSON.parse((await run(process.execPath, ["local.mjs"])).stdout));
  assert.equal(reference.status, 429);
  assert.equal(reference.body.headers.length, 4, JSON.stringify(reference));
});

test("Bun answers as Node does", { timeout: 60_000 }, async () => {
  const got = JSON.parse((await run(tools.bun, ["local.mjs"])).stdout);
  assert.deepEqual(seen(got), reference);
});

test("Deno answers as Node does", { timeout: 60_000 }, async () => {
  // The project's node_modules, read-only; Deno's cache in the temporary directory.
  const env = { DENO_DIR: join(tmp, "deno"), DENO_NO_UPDATE_CHECK: "1" };
  const got = JSON.parse((await run(tools.deno, ["run", "--allow-read", "--no-prompt", "local.mjs"], { env })).stdout);
  assert.deepEqual(seen(got), reference);
});

// esbuild, as a user would bundle for workerd: the .wasm import copied beside the
// bundle (workerd loads it as a compiled module), cloudflare:workers left to the
// runtime. One command, and it must print nothing: any warning fails the test.
test("esbuild bundles the Cloudflare example and the smoke Worker without a warning", { timeout: 60_000 }, async () => {
  const { stdout, stderr } = await run(tools.esbuild, [
    "worker.js",
    "workerd.js",
    "--bundle",
    "--format=esm",
    "--platform=neutral",
    "--external:cloudflare:workers",
    "--loader:.wasm=copy",
    "--entry-names=[name]",
    "--asset-names=[name]",
    "--outdir=dist-esbuild",
    "--log-level=warning",
  ]);
  assert.equal(stdout + stderr, "", "esbuild printed warnings");
  // For edge-runtime: one classic script with the module's bytes inlined. es2022:
  // edge-runtime runs on Node's V8, which lacks the Uint8Array.fromBase64 that esbuild
  // emits for esnext.
  const edge = await run(tools.esbuild, [
    "edge.js",
    "--bundle",
    "--format=iife",
    "--platform=browser",
    "--target=es2022",
    "--loader:.wasm=binary",
    "--outfile=dist-edge/edge.js",
    "--log-level=warning",
  ]);
  assert.equal(edge.stdout + edge.stderr, "", "esbuild printed warnings");
});

// wrangler needs Node >= 22.12 (this machine's is older), so its own CLI runs under
// the pinned Bun. `deploy --dry-run` builds exactly what would be uploaded, and never
// contacts Cloudflare.
test("wrangler builds the Cloudflare example from its wrangler.toml", { timeout: 120_000 }, async () => {
  const { stdout, stderr } = await run(tools.bun, [tools.wrangler, "deploy", "--dry-run", "--outdir", "dist-wrangler"], {
    env: wranglerEnv(),
  });
  assert.doesNotMatch(stdout + stderr, /WARNING|ERROR/, stdout + stderr);
  assert.match(stdout, /env\.LIMITER \(PorteroShard\)\s+Durable Object/, stdout);
  assert.ok(readdirSync(join(app, "dist-wrangler")).some((f) => f.endsWith(".wasm")), "the module is uploaded as a wasm module");
});

// workerd's config from wrangler.toml: its entry, compatibility date and flags, vars,
// Durable Object bindings and the migrations' classes (new_sqlite_classes become
// SQLite-backed namespaces). A key this does not translate fails the test, so the
// example cannot say more than what is run.
function exampleWorker(toml, dist, service) {
  const known = ["name", "main", "compatibility_date", "compatibility_flags", "vars", "durable_objects", "migrations"];
  for (const key of Object.keys(toml)) assert.ok(known.includes(key), `wrangler.toml: ${key} is not run by this test`);
  const sqlite = new Set((toml.migrations ?? []).flatMap((m) => m.new_sqlite_classes ?? []));
  const kv = new Set((toml.migrations ?? []).flatMap((m) => m.new_classes ?? []));
  const bindings = (toml.durable_objects?.bindings ?? []).map((b) => {
    assert.ok(sqlite.has(b.class_name) || kv.has(b.class_name), `${b.class_name} has a migration`);
    return `(name = ${JSON.stringify(b.name)}, durableObjectNamespace = ${JSON.stringify(b.class_name)})`;
  });
  for (const [name, value] of Object.entries(toml.vars ?? {})) bindings.push(`(name = ${JSON.stringify(name)}, text = ${JSON.stringify(value)})`);
  const namespaces = [...sqlite, ...kv].map(
    (c) => `(className = ${JSON.stringify(c)}, uniqueKey = "${service}-${c}", enableSql = ${sqlite.has(c)})`,
  );
  return `(
  modules = ${modulesOf(dist, basename(toml.main))},
  durableObjectNamespaces = [ ${namespaces.join(", ")} ],
  durableObjectStorage = (inMemory = void),
  bindings = [ ${bindings.join(", ")} ],
  compatibilityDate = ${JSON.stringify(toml.compatibility_date)},
  compatibilityFlags = ${JSON.stringify(toml.compatibility_flags ?? [])},
)`;
}

// A bundle's entry and the .wasm files beside it, named as the bundle imports them.
function modulesOf(dist, entry) {
  const wasm = readdirSync(join(app, dist)).filter((f) => f.endsWith(".wasm"));
  const list = [`(name = ${JSON.stringify(entry)}, esModule = embed "app/${dist}/${entry}")`];
  for (const f of wasm) list.push(`(name = ${JSON.stringify(f)}, wasm = embed "app/${dist}/${f}")`);
  return `[ ${list.join(", ")} ]`;
}

test("workerd serves the smoke test and the example, as bundled by esbuild and by wrangler", { timeout: 120_000 }, async () => {
  const toml = parseToml(readFileSync(join(app, "wrangler.toml"), "utf8"));
  const ports = [await freePort(), await freePort(), await freePort()];
  const config = join(tmp, "workerd.capnp");
  const smoke = `(
  modules = ${modulesOf("dist-esbuild", "workerd.js")},
  compatibilityDate = ${JSON.stringify(toml.compatibility_date)},
)`;
  const services = [
    { name: "smoke", port: ports[0], worker: smoke },
    { name: "example-esbuild", port: ports[1], worker: exampleWorker(toml, "dist-esbuild", "esbuild") },
    { name: "example-wrangler", port: ports[2], worker: exampleWorker(toml, "dist-wrangler", "wrangler") },
  ];
  writeFileSync(config, workerdConfig(services));
  const { child, log } = await startWorkerd(config, ports);
  children.add(child);
  try {
    assert.deepEqual(await fetchSmoke(`http://127.0.0.1:${ports[0]}/`), reference, log());
    const limit = Number(toml.vars.RATE_PER_HOUR);
    for (const port of ports.slice(1)) {
      // The probe above was one request from "unknown"; these come from one address.
      const get = (ip) => fetch(`http://127.0.0.1:${port}/`, { headers: { "CF-Connecting-IP": ip } });
      for (let i = 0; i < limit; i++) {
        const r = await get("198.51.100.9");
        const body = await r.text();
        assert.equal(r.status, 200, `request ${i}: ${body}\n${log()}`);
        assert.equal(r.headers.get("RateLimit-Policy"), `"per-ip";q=${limit};w=3600`);
      }
      const over = await get("198.51.100.9");
      assert.equal(over.status, 429, log());
      const retry = Number(over.headers.get("Retry-After"));
      assert.ok(Number.isInteger(retry) && retry >= 1, `Retry-After ${retry}`);
      assert.equal(over.headers.get("RateLimit"), `"per-ip";r=0;t=${retry}`);
      assert.equal(over.headers.get("Cache-Control"), "no-store");
      await over.text();
      const other = await get("198.51.100.10");
      assert.equal(other.status, 200, "another address has its own limit");
      assert.equal(other.headers.get("X-Served-By"), "shard");
      await other.text();
    }
  } finally {
    await stopWorkerd(child);
  }
});

test("the README's local recipe: workerd serves the installed package's example Worker", { timeout: 60_000 }, async () => {
  // `npx workerd serve node_modules/portero/example/workerd.capnp --socket-addr http=…`,
  // with the workerd binary npm installed (this package's pinned devDependency).
  const port = await freePort();
  const config = join(app, "node_modules", "portero", "example", "workerd.capnp");
  const url = `http://127.0.0.1:${port}/`;
  const { child } = await serve(tools.workerd, ["serve", config, "--socket-addr", `http=127.0.0.1:${port}`], url);
  try {
    // 60 a minute per client address (the readiness probe sent none: its own key).
    const statuses = [];
    for (let i = 0; i < 60; i++) statuses.push((await fetch(url, { headers: { "CF-Connecting-IP": "198.51.100.7" } })).status);
    assert.deepEqual(statuses, Array(60).fill(200));
    const refused = await fetch(url, { headers: { "CF-Connecting-IP": "198.51.100.7" } });
    assert.equal(refused.status, 429);
    assert.match(refused.headers.get("ratelimit"), /"per-ip";r=0;t=\d+/);
    assert.equal((await fetch(url, { headers: { "CF-Connecting-IP": "198.51.100.8" } })).status, 200, "another client");
  } finally {
    await stopWorkerd(child);
  }
});

test("the Durable Object's local recipe: workerd serves the installed package's object example", { timeout: 60_000 }, async () => {
  // `npx workerd serve node_modules/portero/example/durable.capnp --socket-addr http=…`:
  // 50 an hour per client address across isolates, leases of 10 on /leased.
  const port = await freePort();
  const config = join(app, "node_modules", "portero", "example", "durable.capnp");
  const base = `http://127.0.0.1:${port}`;
  const { child } = await serve(tools.workerd, ["serve", config, "--socket-addr", `http=127.0.0.1:${port}`], `${base}/`);
  try {
    const client = { headers: { "CF-Connecting-IP": "198.51.100.9" } };
    const served = [];
    for (let i = 0; i < 50; i++) {
      const r = await fetch(`${base}/leased`, client);
      await r.text();
      assert.equal(r.status, 200);
      served.push(r.headers.get("X-Served-By"));
    }
    assert.equal(served.filter((s) => s === "shard").length, 5, "one call to the object per lease of 10");
    const refused = await fetch(`${base}/`, client);
    assert.equal(refused.status, 429, "the exact limit shares the leased one's state");
    assert.match(refused.headers.get("ratelimit"), /"per-ip";r=0;t=\d+/);
  } finally {
    await stopWorkerd(child);
  }
});

test("edge-runtime answers as Node does", { timeout: 60_000 }, async () => {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}/`;
  const { child, log } = await serve(
    process.execPath,
    [tools.edgeRuntime, "--listen", "dist-edge/edge.js", "--host", "127.0.0.1", "--port", String(port)],
    url,
  );
  try {
    assert.deepEqual(await fetchSmoke(url), reference, log());
  } finally {
    await stopWorkerd(child);
  }
});

// Both as a Worker project compiles (workers-types, bundler resolution) and as Node code
// does (nodenext resolution, the DOM's lib): strict, the package's own .d.ts checked.
test("tsc --strict compiles typed usage against the installed declarations", { timeout: 120_000 }, async () => {
  const configs = {
    "tsconfig.worker.json": {
      compilerOptions: {
        target: "es2022",
        module: "preserve",
        moduleResolution: "bundler",
        lib: ["es2022"],
        types: [tools.workersTypes],
        skipLibCheck: false,
      },
      files: ["usage-worker.ts"],
    },
    "tsconfig.node.json": {
      compilerOptions: { target: "es2022", module: "nodenext", lib: ["es2022", "dom"], types: [], skipLibCheck: false },
      files: ["usage-node.ts"],
    },
  };
  for (const [name, config] of Object.entries(configs)) {
    writeFileSync(join(app, name), JSON.stringify(config));
    await run(process.execPath, [tools.tsc, "-p", name, "--strict", "--noEmit"]);
  }
});
