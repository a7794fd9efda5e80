// nats.js against a server started with --user/--pass (mode "userpass") or --auth (mode "token"):
// the right credentials connect and can round-trip a request; wrong or missing ones are refused
// with the client's AuthorizationError (the server's -ERR 'Authorization Violation').
import { connect } from "@nats-io/transport-node";
import { args, describeError } from "./lib.mjs";

const mode = args[0];
const url = process.argv.at(-1);

async function attempt(opts) {
  let nc = null;
  try {
    nc = await connect({ servers: url, reconnect: false, timeout: 5000, ...opts });
    const sub = nc.subscribe("auth.echo", { callback: (_e, m) => m.respond(m.data) });
    const r = await nc.request("auth.echo", "ping", { timeout: 2000 });
    sub.unsubscribe();
    const ok = r.string() === "ping";
    await nc.close();
    return { connected: true, roundTrip: ok };
  } catch (err) {
    if (nc) await nc.close().catch(() => {});
    const d = describeError(err);
    return { connected: false, name: d.name, message: d.message };
  }
}

const out = { scenario: `auth-${mode}` };
if (mode === "userpass") {
  out.right = await attempt({ user: "alice", pass: "s3cret" });
  out.wrong = await attempt({ user: "alice", pass: "nope" });
  out.none = await attempt({});
} else {
  out.right = await attempt({ token: "t0k3n" });
  out.wrong = await attempt({ token: "bad" });
  out.none = await attempt({});
}
out.ok = true;
process.stdout.write(JSON.stringify(out) + "\n", () => process.exit(0));
