// nats.js rides through a server restart: the test restarts the server on the same port and store
// while this program is connected. Protocol with the pytest side (line-based):
//   this program prints {"phase":"ready",...} once a core subscription and a consume() are running
//   and 5 messages went through; the test restarts the server and writes "go\n" to stdin; this
//   program then waits for the client to reconnect, publishes 5 more, and prints the final JSON
//   line: the core subscription must have been re-established (SUB replay), consume() must pick up
//   where the durable consumer left off, and nothing acked may be redelivered.
import { createInterface } from "node:readline";
import { AckPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { delay, describeError } from "./lib.mjs";

const url = process.argv.at(-1);
const out = { scenario: "reconnect", ok: false };
const print = (o) => new Promise((r) => process.stdout.write(JSON.stringify(o) + "\n", r));
let stage = "connect";
const watchdog = setTimeout(async () => {
  out.stage = stage;
  out.error = { name: "Watchdog", message: `hung in ${stage}` };
  await print(out);
  process.exit(1);
}, 60000);

async function until(pred, ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (pred()) return true;
    await delay(50);
  }
  return pred();
}

try {
  const nc = await connect({ servers: url, reconnect: true, maxReconnectAttempts: -1, reconnectTimeWait: 200,
    reconnectJitter: 0, timeout: 5000 });
  const events = [];
  (async () => { for await (const s of nc.status()) events.push(s.type); })();

  stage = "setup";
  let core = 0;
  nc.subscribe("rc.core", { callback: () => { core++; } });
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: "RC", subjects: ["rc.js.>"] });
  await jsm.consumers.add("RC", { durable_name: "w", ack_policy: AckPolicy.Explicit });
  const js = jetstream(nc);
  const c = await js.consumers.get("RC", "w");
  const msgs = await c.consume({ max_messages: 10, expires: 2000, idle_heartbeat: 1000 });
  const seen = [];
  (async () => {
    for await (const m of msgs) {
      seen.push(m.seq);
      m.ack();
    }
  })();
  for (let i = 1; i <= 5; i++) await js.publish("rc.js.x", `m${i}`);
  nc.publish("rc.core", "before");
  await nc.flush();
  await until(() => seen.length >= 5 && core >= 1, 5000);
  await nc.flush(); // the acks reached the server before it goes away
  await print({ phase: "ready", seen: seen.length, core });

  stage = "wait-go";
  const rl = createInterface({ input: process.stdin });
  await new Promise((resolve) => rl.once("line", resolve));
  rl.close();

  stage = "reconnect";
  out.reconnected = await until(() => events.includes("reconnect"), 15000);

  stage = "publish-after";
  for (let i = 6; i <= 10; i++) {
    // The stream's responders may need a moment after the restart: retry each publish briefly.
    for (let attempt = 0; ; attempt++) {
      try {
        await js.publish("rc.js.x", `m${i}`, { msgID: `rc-${i}` });
        break;
      } catch (err) {
        if (attempt >= 20) throw err;
        await delay(100);
      }
    }
  }
  nc.publish("rc.core", "after");
  await nc.flush();
  stage = "consume-after";
  await until(() => seen.length >= 10 && core >= 2, 15000);
  out.seen = seen;
  out.core = core;
  out.events = { disconnect: events.includes("disconnect"), reconnect: events.includes("reconnect") };
  await msgs.close().catch(() => {});
  // Plain acks are fire-and-forget and the server applies them asynchronously: let them land.
  let ci = await jsm.consumers.info("RC", "w");
  for (let i = 0; i < 40 && ci.num_ack_pending > 0; i++) {
    await delay(50);
    ci = await jsm.consumers.info("RC", "w");
  }
  out.consumer = { ack_floor: ci.ack_floor.stream_seq, num_ack_pending: ci.num_ack_pending,
    num_redelivered: ci.num_redelivered };
  await nc.close();
  out.ok = true;
} catch (err) {
  out.stage = stage;
  out.error = describeError(err);
}
clearTimeout(watchdog);
await print(out);
process.exit(out.ok ? 0 : 1);
