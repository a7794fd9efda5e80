// natsd's own features (issue 27) from stock nats.js v3, which knows nothing of natsd: every
// feature is a `natsd.*` metadata key. Against nats-server the keys are kept and ignored (the
// pytest side expects the features off there, on with natsd).
import { AckPolicy, jetstream, jetstreamManager, RetentionPolicy } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { delay, expectError, scenario } from "./lib.mjs";

await scenario("natsd_features", async (nc, out, step) => {
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);

  step("info");
  const ai = await jsm.getAccountInfo();
  out.advertised = ai.natsd ? Object.keys(ai.natsd.features).sort() : null;

  step("dead-letter");
  await jsm.streams.add({ name: "WQ", subjects: ["wq.>"], retention: RetentionPolicy.Workqueue });
  await jsm.streams.add({ name: "DLQ", subjects: ["dlq.>"] });
  await jsm.consumers.add("WQ", { durable_name: "W", ack_policy: AckPolicy.Explicit, ack_wait: 300_000_000,
    max_deliver: 1, metadata: { "natsd.dead_letter": "dlq.wq" } });
  const hdrs = (await import("@nats-io/transport-node")).headers();
  hdrs.set("X-Id", "t");
  await js.publish("wq.t", "terminate me", { headers: hdrs });
  await js.publish("wq.m", "never acked");
  const c = await js.consumers.get("WQ", "W");
  const iter = await c.fetch({ max_messages: 2, expires: 2000 });
  for await (const m of iter) {
    if (m.subject === "wq.t") m.term("schema v2 needed");
  }
  await nc.flush();
  await delay(900);
  const dl = [];
  const dc = await jsm.consumers.add("DLQ", { ack_policy: AckPolicy.None });
  const dcon = await js.consumers.get("DLQ", dc.name);
  const diter = await dcon.fetch({ max_messages: 2, expires: 1500 });
  for await (const m of diter) {
    dl.push({ data: m.string(), reason: m.headers?.get("Natsd-Dlq-Reason") ?? "",
      text: m.headers?.get("Natsd-Dlq-Term-Reason") ?? "", seq: m.headers?.get("Nats-Sequence") ?? "",
      xid: m.headers?.get("X-Id") ?? "" });
  }
  out.deadLetters = dl.sort((a, b) => a.seq.localeCompare(b.seq));
  out.wqLeft = (await jsm.streams.info("WQ")).state.messages;
  out.consumerMetadata = (await jsm.consumers.info("WQ", "W")).config.metadata?.["natsd.dead_letter"] ?? null;

  step("schemas");
  await jsm.streams.add({ name: "ORD", subjects: ["orders.>"],
    metadata: { "natsd.schema.orders.*": JSON.stringify({ type: "object", required: ["id"] }) } });
  out.goodSeq = (await js.publish("orders.new", JSON.stringify({ id: "a" }))).seq;
  out.bad = await expectError(js.publish("orders.new", JSON.stringify({ other: 1 })));
  out.ordMsgs = (await jsm.streams.info("ORD")).state.messages;

  step("bad-setting");
  out.badSetting = await expectError(jsm.streams.add({ name: "BAD", subjects: ["bad.>"],
    metadata: { "natsd.keep_last_under_max_age": "perhaps" } }));

  step("partition-key");
  await jsm.streams.add({ name: "PK", subjects: ["pk.*"] });
  for (let i = 0; i < 12; i++) await js.publish(`pk.k${i % 3}`, `m${i}`);
  await jsm.consumers.add("PK", { durable_name: "P", ack_policy: AckPolicy.Explicit, filter_subject: "pk.*",
    metadata: { "natsd.partition_key": "{{wildcard(1)}}" } });
  const pc = await js.consumers.get("PK", "P");
  const rounds = [];
  for (let r = 0; r < 2; r++) {
    const got = [];
    const it = await pc.fetch({ max_messages: 10, expires: 1000 });
    for await (const m of it) got.push(m);
    rounds.push(got.map((m) => [m.subject, m.seq]));
    for (const m of got) await m.ackAck();
  }
  out.partitionRounds = rounds;

  step("keep-last");
  const kvm = new Kvm(nc);
  const kv = await kvm.create("cfg", { history: 3, ttl: 500 });
  const si = await jsm.streams.info("KV_cfg");
  await jsm.streams.update("KV_cfg", { ...si.config,
    metadata: { ...(si.config.metadata ?? {}), "natsd.keep_last_under_max_age": "true" } });
  await kv.put("a", "1");
  await kv.put("a", "2");
  await kv.put("b", "x");
  await delay(1300);
  const ea = await kv.get("a");
  const eb = await kv.get("b");
  out.kv = { a: ea ? ea.string() : null, b: eb ? eb.string() : null,
    msgs: (await jsm.streams.info("KV_cfg")).state.messages };
});
