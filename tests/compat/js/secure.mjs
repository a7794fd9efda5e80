// nats.js over secure transports: `node [--experimental-websocket] secure.mjs <mode> <caFile|-> <url>`
// (the flag enables the built-in WebSocket on node 20/21).
// mode "tls" (upgrade after INFO), "tlsfirst" (TLS handshake first), "ws" (wsconnect, ws://) or
// "wss" (wsconnect over TLS). Each does pub/sub with headers, request/reply and a JetStream
// publish + fetch over that transport, and records what the server's INFO said about TLS.
import { headers } from "@nats-io/nats-core";
import { wsconnect } from "@nats-io/nats-core";
import { connect } from "@nats-io/transport-node";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { args, scenario } from "./lib.mjs";

const [mode, caFile] = args;
const ws = mode === "ws" || mode === "wss";
const connectOpts = {};
if (!ws && caFile && caFile !== "-") connectOpts.tls = { caFile, handshakeFirst: mode === "tlsfirst" };

await scenario(`secure-${mode}`, async (nc, out, step) => {
  out.tlsRequired = nc.info?.tls_required ?? null;

  step("pubsub-headers");
  const sub = nc.subscribe("sec.>", { max: 2 });
  const h = headers();
  h.set("Trace", "t-1");
  nc.publish("sec.a", "one", { headers: h });
  nc.publish("sec.b", "two");
  const got = [];
  for await (const m of sub) got.push([m.subject, m.string(), m.headers?.get("Trace") ?? null]);
  out.pubsub = got;

  step("request");
  const rs = nc.subscribe("sec.echo", { callback: (_e, m) => m.respond(m.string().toUpperCase()) });
  out.reply = (await nc.request("sec.echo", "hello", { timeout: 3000 })).string();
  rs.unsubscribe();

  step("large");
  const big = new Uint8Array(300_000).map((_v, i) => i % 251);
  const ls = nc.subscribe("sec.big", { max: 1 });
  nc.publish("sec.big", big);
  for await (const m of ls) out.largeOk = m.data.length === big.length && m.data[299_999] === big[299_999];

  step("jetstream");
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: "SEC", subjects: ["secjs.>"] });
  const js = jetstream(nc);
  const acks = [];
  for (let i = 0; i < 5; i++) acks.push((await js.publish(`secjs.${i}`, `m${i}`)).seq);
  out.acks = acks;
  const c = await js.consumers.get("SEC");
  const fetched = [];
  const iter = await c.fetch({ max_messages: 5, expires: 3000 });
  for await (const m of iter) { fetched.push(m.string()); m.ack(); if (fetched.length === 5) break; }
  out.fetched = fetched;
}, { connectFn: ws ? wsconnect : connect, connectOpts });
