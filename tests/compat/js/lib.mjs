// Shared harness for the nats.js compatibility scenarios (tests/acceptance/test_compat_natsjs.py).
//
// Each scenario is `node <scenario>.mjs [args...] <server-url>` (the URL is always last). It connects with the stock nats.js v3 client,
// records what it observed into a result object, and prints that object as ONE JSON line on stdout,
// exit code 0. When a step throws, it prints the same line with `ok:false`, the step name (`stage`),
// the error's class/message/code, and everything observed so far, exit code 1. The pytest side
// asserts on the observed values, so the scripts never decide pass/fail by themselves (apart from
// the failing step, which names the incompatibility precisely).

import { connect } from "@nats-io/transport-node";

/** Sleep `ms` real milliseconds (only used where the client's own timers are being exercised). */
export const delay = (ms) => new Promise((r) => setTimeout(r, ms));

/** Describe any thrown value as plain JSON: class, message, and the NATS/JetStream codes when present. */
export function describeError(err) {
  if (err === null || err === undefined) return { name: String(err) };
  const d = { name: err.constructor?.name ?? typeof err, message: String(err.message ?? err) };
  for (const key of ["code", "status"]) {
    try {
      if (err[key] !== undefined) d[key] = err[key];
    } catch { /* getters may throw */ }
  }
  if (typeof err.apiError === "function") {
    try { d.api = err.apiError(); } catch { /* not an API error */ }
  }
  if (typeof err.isNoResponders === "function") d.noResponders = err.isNoResponders();
  if (err.cause) d.cause = describeError(err.cause);
  return d;
}

/**
 * Run `await fn(promise)` expecting it to reject; returns the error description, or
 * `{ name: "NoError", value }` when it resolved (the test then fails on the missing code).
 */
export async function expectError(promise) {
  try {
    const value = await promise;
    return { name: "NoError", value: value === undefined ? null : String(value) };
  } catch (err) {
    return describeError(err);
  }
}

/** Scenario arguments before the URL (e.g. the phase of a two-part scenario). */
export const args = process.argv.slice(2, -1);

/**
 * Run a scenario: connect to the URL (last argument; `connectFn`/`connectOpts` pick e.g. wsconnect or TLS), hand `fn(nc, out, step)` a result object and a step marker,
 * print the JSON line, close the connection. A watchdog turns a hang into a clear failure line
 * (the pytest side has its own, longer, subprocess timeout as a backstop).
 */
export async function scenario(name, fn, { timeoutMs = 45000, connectFn = connect, connectOpts = {} } = {}) {
  const url = process.argv.at(-1);
  const out = { scenario: name, ok: false };
  let stage = "connect";
  const step = (s) => { stage = s; };
  let nc = null;
  const watchdog = setTimeout(() => {
    out.stage = stage;
    out.error = { name: "Watchdog", message: `scenario hung for ${timeoutMs} ms in step '${stage}'` };
    process.stdout.write(JSON.stringify(out) + "\n", () => process.exit(1));
  }, timeoutMs);
  let code = 0;
  try {
    nc = await connectFn({ servers: url, name: `compat-${name}`, reconnect: false, timeout: 5000, ...connectOpts });
    out.server = { version: nc.info?.version, headers: nc.info?.headers, jetstream: nc.info?.jetstream,
      max_payload: nc.info?.max_payload, proto: nc.info?.proto };
    await fn(nc, out, step);
    stage = "close";
    await nc.close();
    const closed = await nc.closed();
    if (closed) throw closed;
    out.ok = true;
  } catch (err) {
    out.stage = stage;
    out.error = describeError(err);
    code = 1;
    if (nc && !nc.isClosed()) {
      try { await nc.close(); } catch { /* already broken */ }
    }
  }
  clearTimeout(watchdog);
  process.stdout.write(JSON.stringify(out) + "\n", () => process.exit(code));
}
