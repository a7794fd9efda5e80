// Newer JetStream features (nats-server 2.10-2.12) as nats.js v3 exposes them, each an independent
// probe (value or {"error": ...} under its own key): stream sources, subject transforms,
// republish, advisories, priority groups (overflow), atomic batch publish, message counters,
// consumer reset, and KV per-key TTL with limit markers.
import { AckPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { headers } from "@nats-io/transport-node";
import { delay, describeError, scenario } from "./lib.mjs";

await scenario("newer", async (nc, out, step) => {
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  const probe = async (name, fn) => {
    step(name);
    try {
      out[name] = await fn();
    } catch (err) {
      out[name] = { error: describeError(err) };
    }
  };

  await probe("advisory", async () => {
    const sub = nc.subscribe("$JS.EVENT.ADVISORY.STREAM.CREATED.>", { max: 1 });
    const got = (async () => { for await (const m of sub) return { subject: m.subject, type: m.json().type, stream: m.json().stream }; })();
    await nc.flush();
    await jsm.streams.add({ name: "ADV", subjects: ["adv.>"] });
    return await Promise.race([got, delay(2000).then(() => null)]);
  });

  await probe("sources", async () => {
    await jsm.streams.add({ name: "S1", subjects: ["s1.>"] });
    await jsm.streams.add({ name: "S2", subjects: ["s2.>"] });
    await js.publish("s1.a", "a");
    await js.publish("s2.b", "b");
    await jsm.streams.add({ name: "AGG", sources: [{ name: "S1" }, { name: "S2" }] });
    let n = 0;
    for (let i = 0; i < 50 && n < 2; i++) {
      n = (await jsm.streams.info("AGG")).state.messages;
      if (n < 2) await delay(100);
    }
    return n;
  });

  await probe("subjectTransform", async () => {
    await jsm.streams.add({ name: "TR", subjects: ["tr.>"], subject_transform: { src: "tr.>", dest: "moved.>" } });
    await js.publish("tr.x", "t");
    const m = await jsm.streams.getMessage("TR", { seq: 1 });
    return m?.subject ?? null;
  });

  await probe("republish", async () => {
    await jsm.streams.add({ name: "RP", subjects: ["rp.>"], republish: { src: "rp.>", dest: "repub.>" } });
    const sub = nc.subscribe("repub.>", { max: 1 });
    const got = (async () => { for await (const m of sub) return { subject: m.subject, stream: m.headers?.get("Nats-Stream") ?? null, data: m.string() }; })();
    await nc.flush();
    await js.publish("rp.x", "r");
    return await Promise.race([got, delay(2000).then(() => null)]);
  });

  await probe("priorityOverflow", async () => {
    await jsm.streams.add({ name: "PRI", subjects: ["pri.>"] });
    for (let i = 0; i < 4; i++) await js.publish("pri.x", `p${i}`);
    await jsm.consumers.add("PRI", { durable_name: "g", ack_policy: AckPolicy.Explicit,
      priority_groups: ["A"], priority_policy: "overflow" });
    const c = await js.consumers.get("PRI", "g");
    const iter = await c.fetch({ max_messages: 4, expires: 1000, group: "A" });
    let n = 0;
    for await (const m of iter) { n++; m.ack(); }
    const ci = await c.info();
    return { fetched: n, groups: ci.config.priority_groups, policy: ci.config.priority_policy };
  });

  await probe("atomicBatch", async () => {
    await jsm.streams.add({ name: "BAT", subjects: ["bat.>"], allow_atomic: true });
    const b = await js.startBatch("bat.a", "1");
    b.add("bat.b", "2");
    const ack = await b.commit("bat.c", "3");
    const si = await jsm.streams.info("BAT");
    return { count: ack.count, seq: ack.seq, messages: si.state.messages };
  });

  await probe("counter", async () => {
    await jsm.streams.add({ name: "CNT", subjects: ["cnt.>"], allow_msg_counter: true });
    const incr = async (n) => {
      const h = headers();
      h.set("Nats-Incr", String(n));
      const r = await nc.request("cnt.hits", "", { headers: h, timeout: 2000 });
      return r.json();
    };
    const a = await incr(5);
    const b = await incr(2);
    const last = await jsm.streams.getMessage("CNT", { last_by_subj: "cnt.hits" });
    return { first: a.val ?? a.error?.err_code ?? null, second: b.val ?? b.error?.err_code ?? null,
      stored: last ? last.json().val : null };
  });

  await probe("consumerReset", async () => {
    // CONSUMER.RESET (server 2.14+; nats.js refuses it client-side when INFO advertises an older version).
    await jsm.streams.add({ name: "RST", subjects: ["rst.>"] });
    for (let i = 1; i <= 5; i++) await js.publish("rst.x", `r${i}`);
    await jsm.consumers.add("RST", { durable_name: "r", ack_policy: AckPolicy.Explicit });
    const c = await js.consumers.get("RST", "r");
    const iter = await c.fetch({ max_messages: 5, expires: 1000 });
    for await (const m of iter) await m.ackAck();
    await jsm.consumers.reset("RST", "r", 2);
    const m = await c.next({ expires: 1000 });
    return { nextSeq: m?.seq ?? null, data: m ? m.string() : null };
  });

  await probe("consumerResetRaw", async () => {
    // The same reset sent as a plain request, bypassing nats.js' server-version gate.
    await jsm.consumers.add("RST", { durable_name: "raw", ack_policy: AckPolicy.Explicit });
    const c = await js.consumers.get("RST", "raw");
    const iter = await c.fetch({ max_messages: 5, expires: 1000 });
    for await (const m of iter) await m.ackAck();
    const r = await nc.request("$JS.API.CONSUMER.RESET.RST.raw", JSON.stringify({ seq: 3 }), { timeout: 2000 });
    const body = r.json();
    const m = await c.next({ expires: 1000 });
    return { type: body.type, apiError: body.error ?? null, nextSeq: m?.seq ?? null };
  });

  await probe("kvKeyTtl", async () => {
    const kv = await new Kvm(nc).create("ttlkv", { markerTTL: 5000 });
    await kv.create("short", "lived", "1s");
    const before = await kv.get("short");
    let after = before;
    for (let i = 0; i < 30 && after && after.operation === "PUT"; i++) {
      await delay(100);
      after = await kv.get("short");
    }
    return { before: before?.string() ?? null, after: after === null ? null : after.operation };
  });
});
