// Less common but real nats.js v3 paths, each an independent probe: its result (or the error it
// raised) is recorded under its own key, and a failing probe does not stop the others. Covers
// direct get (single, batch, multi-last), fetch and consume by bytes, consumer pause/resume, work-queue and
// interest retention, per-message TTL, multi-filter / last-per-subject / headers-only consumers,
// nak with delay, ack_wait redelivery, working (+WPI), consumer deletion seen by consume(),
// mirrors, KV watch variants / filtered keys / purgeDeletes, object-store links and seal.
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm, KvWatchInclude } from "@nats-io/kv";
import { Objm } from "@nats-io/obj";
import { nanos } from "@nats-io/transport-node";
import { delay, describeError, scenario } from "./lib.mjs";

async function collect(itp) {
  const items = [];
  for await (const x of await itp) items.push(x);
  return items;
}

await scenario("extras", async (nc, out, step) => {
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

  await probe("directGet", async () => {
    await jsm.streams.add({ name: "DIRECT", subjects: ["d.>"], allow_direct: true });
    for (let i = 1; i <= 6; i++) await js.publish(i % 2 ? "d.a" : "d.b", `v${i}`);
    const last = await jsm.direct.getMessage("DIRECT", { last_by_subj: "d.a" });
    const bySeq = await jsm.direct.getMessage("DIRECT", { seq: 2 });
    const next = await jsm.direct.getMessage("DIRECT", { next_by_subj: "d.b", seq: 3 });
    const missing = await jsm.direct.getMessage("DIRECT", { seq: 99 });
    return { last: [last?.seq, last?.subject, last?.string()], bySeq: [bySeq?.seq, bySeq?.string()],
      next: [next?.seq, next?.subject], missing };
  });

  await probe("directBatch", async () => {
    const msgs = await collect(jsm.direct.getBatch("DIRECT", { seq: 2, batch: 3 }));
    return msgs.map((m) => m.seq);
  });

  await probe("directMultiLast", async () => {
    const msgs = await collect(jsm.direct.getLastMessagesFor("DIRECT", { multi_last: ["d.a", "d.b"] }));
    return msgs.map((m) => [m.subject, m.seq]).sort();
  });

  await probe("fetchMaxBytes", async () => {
    await jsm.streams.add({ name: "BYTES", subjects: ["bytes.>"] });
    for (let i = 0; i < 10; i++) await js.publish("bytes.x", "x".repeat(100));
    await jsm.consumers.add("BYTES", { durable_name: "b", ack_policy: AckPolicy.None });
    const c = await js.consumers.get("BYTES", "b");
    // 100-byte payloads in a 400-byte budget: the server sends what fits, then ends the request
    // with a 409 (which nats.js raises from the iterator after the messages it got).
    const iter = await c.fetch({ max_bytes: 400, expires: 1000 });
    let n = 0;
    let status = null;
    try {
      for await (const _ of iter) n++;
    } catch (err) { status = describeError(err).code ?? describeError(err).name; }
    return { received: n, status };
  });

  await probe("pauseResume", async () => {
    await jsm.consumers.add("BYTES", { durable_name: "p", ack_policy: AckPolicy.Explicit });
    const until = new Date(Date.now() + 3600_000);
    const pr = await jsm.consumers.pause("BYTES", "p", until);
    const info = await jsm.consumers.info("BYTES", "p");
    const rr = await jsm.consumers.resume("BYTES", "p");
    const after = await jsm.consumers.info("BYTES", "p");
    return { paused: pr.paused, infoPaused: info.paused ?? false, resumed: rr.paused, afterPaused: after.paused ?? false };
  });

  await probe("workqueue", async () => {
    await jsm.streams.add({ name: "WQ", subjects: ["wq.>"], retention: "workqueue" });
    for (let i = 0; i < 3; i++) await js.publish("wq.job", `j${i}`);
    await jsm.consumers.add("WQ", { durable_name: "w", ack_policy: AckPolicy.Explicit });
    const c = await js.consumers.get("WQ", "w");
    const iter = await c.fetch({ max_messages: 3, expires: 1000 });
    for await (const m of iter) await m.ackAck();
    const si = await jsm.streams.info("WQ");
    let second;
    try {
      await jsm.consumers.add("WQ", { durable_name: "w2", ack_policy: AckPolicy.Explicit });
      second = "created";
    } catch (err) { second = describeError(err).code; }
    return { messagesAfterAck: si.state.messages, secondUnfiltered: second };
  });

  await probe("interest", async () => {
    await jsm.streams.add({ name: "INT", subjects: ["int.>"], retention: "interest" });
    const pa = await js.publish("int.x", "nobody listens");
    const si = await jsm.streams.info("INT");
    return { seq: pa.seq, messages: si.state.messages, last_seq: si.state.last_seq };
  });

  await probe("msgTtl", async () => {
    await jsm.streams.add({ name: "TTL", subjects: ["ttl.>"], allow_msg_ttl: true });
    const pa = await js.publish("ttl.x", "short-lived", { ttl: "60s" });
    const sm = await jsm.streams.getMessage("TTL", { seq: pa.seq });
    let refused;
    try {
      await js.publish("bytes.x", "no ttl here", { ttl: "60s" });
      refused = "accepted";
    } catch (err) { refused = describeError(err).code; }
    return { seq: pa.seq, header: sm?.header?.get("Nats-TTL") ?? null, refusedCode: refused };
  });

  await probe("multiFilter", async () => {
    await jsm.streams.add({ name: "MF", subjects: ["mf.>"] });
    for (const s of ["mf.a", "mf.b", "mf.c", "mf.a", "mf.b", "mf.c"]) await js.publish(s, s);
    await jsm.consumers.add("MF", { durable_name: "ab", ack_policy: AckPolicy.None, filter_subjects: ["mf.a", "mf.b"] });
    const c = await js.consumers.get("MF", "ab");
    const iter = await c.fetch({ max_messages: 10, expires: 1000 });
    const seqs = [];
    for await (const m of iter) seqs.push(m.seq);
    return seqs;
  });

  await probe("lastPerSubject", async () => {
    await jsm.consumers.add("MF", { durable_name: "lps", ack_policy: AckPolicy.None,
      deliver_policy: DeliverPolicy.LastPerSubject, filter_subject: "mf.*" });
    const c = await js.consumers.get("MF", "lps");
    const iter = await c.fetch({ max_messages: 10, expires: 1000 });
    const seqs = [];
    for await (const m of iter) seqs.push(m.seq);
    return seqs;
  });

  await probe("headersOnly", async () => {
    await jsm.consumers.add("MF", { durable_name: "ho", ack_policy: AckPolicy.None, headers_only: true });
    const c = await js.consumers.get("MF", "ho");
    const m = await c.next({ expires: 1000 });
    return { len: m?.data.length ?? null, size: m?.headers?.get("Nats-Msg-Size") ?? null };
  });

  await probe("nakDelay", async () => {
    await jsm.streams.add({ name: "NAK", subjects: ["nak.>"] });
    await js.publish("nak.x", "later");
    await jsm.consumers.add("NAK", { durable_name: "n", ack_policy: AckPolicy.Explicit });
    const c = await js.consumers.get("NAK", "n");
    const m1 = await c.next({ expires: 1000 });
    const t0 = Date.now();
    m1.nak(700);
    const m2 = await c.next({ expires: 3000 });
    const waited = Date.now() - t0;
    m2?.ack();
    // Redelivered within the 3 s pull, but not before the requested 700 ms delay.
    return { redelivered: m2?.redelivered ?? null, waitedAtLeast600: waited >= 600 };
  });

  await probe("ackWaitRedelivery", async () => {
    await jsm.consumers.add("NAK", { durable_name: "aw", ack_policy: AckPolicy.Explicit, ack_wait: nanos(1000) });
    const c = await js.consumers.get("NAK", "aw");
    const m1 = await c.next({ expires: 1000 });
    m1.working(); // +WPI resets the ack timer; still not acked
    const m2 = await c.next({ expires: 4000 });
    // num_redelivered counts redelivered messages still awaiting an ack: read it before and after
    // the (confirmed) ack.
    const pending = await jsm.consumers.info("NAK", "aw");
    const acked = m2 ? await m2.ackAck() : null;
    const info = await jsm.consumers.info("NAK", "aw");
    return { first: m1?.info.deliveryCount ?? null, second: m2?.info.deliveryCount ?? null, acked,
      redeliveredPending: pending.num_redelivered, num_ack_pending: pending.num_ack_pending,
      redeliveredAfterAck: info.num_redelivered };
  });

  await probe("consumerDeletedNotice", async () => {
    await jsm.consumers.add("NAK", { durable_name: "gone", ack_policy: AckPolicy.Explicit, deliver_policy: "new" });
    const c = await js.consumers.get("NAK", "gone");
    const msgs = await c.consume({ expires: 2000, idle_heartbeat: 1000 });
    const seen = [];
    let sawDeleted;
    const deleted = new Promise((r) => { sawDeleted = r; });
    (async () => {
      for await (const s of msgs.status()) {
        seen.push(s.type);
        if (s.type === "consumer_deleted") sawDeleted(true);
      }
    })();
    // The message iterator must be drained for close() to complete.
    (async () => { try { for await (const _ of msgs) { /* none expected */ } } catch { /* stopped */ } })();
    await delay(200);
    await jsm.consumers.delete("NAK", "gone");
    const got = await Promise.race([deleted, delay(3000).then(() => false)]);
    await Promise.race([msgs.close(), delay(1000)]);
    return got;
  });

  await probe("consumeMaxBytes", async () => {
    // consume() budgeted by bytes: each pull asks for max_bytes and the client keeps re-pulling.
    await jsm.consumers.add("BYTES", { durable_name: "cb", ack_policy: AckPolicy.Explicit });
    const c = await js.consumers.get("BYTES", "cb");
    const msgs = await c.consume({ max_bytes: 1024, expires: 1000 });
    let n = 0;
    for await (const m of msgs) {
      m.ack();
      if (++n === 10) break;
    }
    await msgs.close();
    return n;
  });

  await probe("mirror", async () => {
    await jsm.streams.add({ name: "SRC", subjects: ["src.>"] });
    for (let i = 0; i < 3; i++) await js.publish("src.x", `s${i}`);
    await jsm.streams.add({ name: "MIR", mirror: { name: "SRC" } });
    let n = 0;
    for (let i = 0; i < 50 && n < 3; i++) {
      n = (await jsm.streams.info("MIR")).state.messages;
      if (n < 3) await delay(100);
    }
    const m = await jsm.streams.getMessage("MIR", { seq: 3 });
    return { messages: n, third: m?.string() ?? null };
  });

  await probe("kvWatchVariants", async () => {
    const kv = await new Kvm(nc).create("wv", { history: 10 });
    await kv.put("a", "1");
    await kv.put("a", "2");
    await kv.put("b", "1");
    const hist = await kv.watch({ include: KvWatchInclude.AllHistory });
    const h = [];
    for await (const e of hist) {
      h.push(`${e.key}=${e.string()}`);
      if (h.length === 3) break;
    }
    hist.stop();
    const upd = await kv.watch({ include: KvWatchInclude.UpdatesOnly, key: "a" });
    const u = [];
    const got = (async () => { for await (const e of upd) { u.push(`${e.key}=${e.string()}`); break; } })();
    await delay(100);
    await kv.put("b", "ignored");
    await kv.put("a", "3");
    await got;
    upd.stop();
    return { history: h, updatesOnly: u };
  });

  await probe("kvKeysFilterPurgeDeletes", async () => {
    const kv = await new Kvm(nc).create("kf");
    for (const k of ["x.1", "x.2", "y.1"]) await kv.put(k, "v");
    const filtered = (await collect(kv.keys("x.*"))).sort();
    await kv.delete("x.1");
    await kv.purgeDeletes(0);
    const st = await kv.status();
    const after = (await collect(kv.keys())).sort();
    return { filtered, after, values: st.values };
  });

  await probe("objLinkSeal", async () => {
    const os = await new Objm(nc).create("lnk");
    const target = await os.putBlob({ name: "target" }, new TextEncoder().encode("payload"));
    await os.link("alias", target);
    const viaLink = await os.getBlob("alias");
    const sealed = await os.seal();
    let putAfterSeal;
    try {
      await os.putBlob({ name: "late" }, new Uint8Array(10));
      putAfterSeal = "accepted";
    } catch (err) { putAfterSeal = describeError(err).name; }
    return { viaLink: viaLink ? new TextDecoder().decode(viaLink) : null, sealed: sealed.sealed, putAfterSeal };
  });
});
