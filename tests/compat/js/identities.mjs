// nats.js with nkeys and JWT credentials (mode "nkey" or "creds"), against a server configured by
// the test: `node identities.mjs <mode> <good file> <bad file> <url>`.
// nkey: the files hold user seeds (the good one is configured as an nkey user, the bad one not);
// creds: the files are .creds (the good one valid, the bad one expired).
// The good identity connects and round-trips a request; the bad one is refused with the client's
// AuthorizationError (the server's -ERR 'Authorization Violation').
import { readFileSync } from "node:fs";
import { connect, credsAuthenticator, nkeyAuthenticator } from "@nats-io/transport-node";
import { args, describeError } from "./lib.mjs";

const [mode, goodFile, badFile] = args;
const url = process.argv.at(-1);

function authenticator(file) {
  const bytes = readFileSync(file);
  if (mode === "nkey") return nkeyAuthenticator(new TextEncoder().encode(bytes.toString().trim()));
  return credsAuthenticator(new Uint8Array(bytes));
}

async function attempt(file) {
  let nc = null;
  try {
    nc = await connect({ servers: url, reconnect: false, timeout: 5000, authenticator: authenticator(file) });
    const sub = nc.subscribe("id.echo", { callback: (_e, m) => m.respond(m.data) });
    const r = await nc.request("id.echo", "ping", { timeout: 2000 });
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

const out = { scenario: `identities-${mode}` };
out.good = await attempt(goodFile);
out.bad = await attempt(badFile);
out.ok = true;
process.stdout.write(JSON.stringify(out) + "\n", () => process.exit(0));
