// Starting and stopping workerd (from npm) for tests and benchmarks: a free loopback
// port, the binary started directly (so its process id is workerd's own), a wait until
// it answers, and a stop by that process id.
import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";

/** The package's root directory (`wasm/`), with a trailing slash. */
export const root = fileURLToPath(new URL("../..", import.meta.url));

/** The workerd binary npm installed. */
export const binary = `${root}node_modules/@cloudflare/workerd-linux-64/bin/workerd`;

/** A loopback port that was free a moment ago. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/**
 * Serves `config` and waits (up to 30 s) until every port answers `probe` (a path and
 * request options). Returns the child process and a function giving its output so far.
 */
export async function startWorkerd(config, ports, probe = { path: "/", init: {} }) {
  let log = "";
  const child = spawn(binary, ["serve", config], { stdio: ["ignore", "pipe", "pipe"] });
  child.stdout.on("data", (d) => (log += d));
  child.stderr.on("data", (d) => (log += d));
  const deadline = Date.now() + 30_000;
  for (const port of ports) {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`workerd exited (${child.exitCode}):\n${log}`);
      try {
        await (await fetch(`http://127.0.0.1:${port}${probe.path}`, probe.init)).text();
        break;
      } catch {
        if (Date.now() > deadline) {
          await stopWorkerd(child); // or the test process would wait on it forever
          throw new Error(`workerd did not start in 30 s:\n${log}`);
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }
  return { child, log: () => log };
}

/** Stops `child` by its process id: SIGTERM, then SIGKILL after 5 s. */
export async function stopWorkerd(child) {
  if (child && child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((r) => child.once("exit", r));
    process.kill(child.pid, "SIGTERM");
    await Promise.race([exited, new Promise((r) => setTimeout(r, 5_000))]);
    if (child.exitCode === null && child.signalCode === null) {
      process.kill(child.pid, "SIGKILL");
      await exited;
    }
  }
}

/**
 * The capnp `modules` list of a Worker built on this package, for a config in `wasm/`:
 * `entry` (a path below `wasm/`), the package's JS (with `durable`, its Durable Object
 * module too) and its wasm.
 */
export function packageModules(entry, { durable = false } = {}) {
  const scripts = [entry, "js/index.js", "js/errors.js", ...(durable ? ["js/durable.js", "js/shard.js", "js/keys.js", "js/lease.js", "js/settle.js"] : []), "pkg/portero_wasm.js"];
  const modules = scripts.map((m) => `(name = "${m}", esModule = embed "${m}")`);
  modules.push(`(name = "pkg/portero_wasm_bg.wasm", wasm = embed "pkg/portero_wasm_bg.wasm")`);
  return `[\n    ${modules.join(",\n    ")},\n  ]`;
}

/**
 * A workerd config that serves each of `workers` (`{ name, port, worker }`, `worker`
 * being the capnp text of its `Workerd.Worker`) on its own loopback port; `services`
 * are more services (capnp text, such as a disk) that no socket serves.
 */
export function workerdConfig(workers, services = []) {
  // A capnp constant's name: the service's, in lower camel case.
  const constant = (name) => name.replace(/-(\w)/g, (_, c) => c.toUpperCase());
  const lines = (items) => items.map((item) => `\n    ${item},`).join("");
  const served = workers.map(({ name }) => `(name = "${name}", worker = .${constant(name)})`);
  const sockets = workers.map(
    ({ name, port }) => `(name = "${name}", address = "127.0.0.1:${port}", http = (), service = "${name}")`,
  );
  const definitions = workers.map(({ name, worker }) => `const ${constant(name)} :Workerd.Worker = ${worker};\n`);
  return `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [${lines([...served, ...services])}
  ],
  sockets = [${lines(sockets)}
  ],
);
${definitions.join("")}`;
}
