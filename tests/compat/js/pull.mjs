// Durable pull consumers with nats.js: fetch + ack, consumer info after acks, nak -> redelivery,
// term, next() on an empty consumer (server heartbeats then 408 -> null), and consume() across an
// idle period long enough that the server must send idle heartbeats and expire the pull request
// (the client re-pulls; "heartbeats_missed" must never be reported).
import { AckPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { delay, scenario } from "./lib.mjs";

await scenario("pull", async (nc, out, step) => {
  step("setup");
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: "SMOKE", subjects: ["smoke.>"] });
  const js = jetstream(nc);
  for (let i = 0; i < 5; i++) await js.publish(`smoke.${i}`, `m${i}`, { msgID: `id-${i}` });
  await jsm.consumers.add("SMOKE", { durable_name: "pull1", ack_policy: AckPolicy.Explicit });
  const c = await js.consumers.get("SMOKE", "pull1");

  step("fetch");
  const iter = await c.fetch({ max_messages: 5, expires: 2000 });
  const fetched = [];
  for await (const m of iter) {
    fetched.push({ subject: m.subject, data: m.string(), seq: m.seq, streamSequence: m.info.streamSequence,
      deliverySequence: m.info.deliverySequence, deliveryCount: m.info.deliveryCount,
      pending: m.info.pending, stream: m.info.stream, consumer: m.info.consumer, msgId: m.headers?.get("Nats-Msg-Id") ?? null });
    m.ack();
  }
  out.fetched = fetched;

  step("info-after-ack");
  // ackAck-free acks are fire-and-forget; a flush is a full round trip after them.
  await nc.flush();
  const ci = await c.info();
  out.afterAck = { delivered: ci.delivered.stream_seq, ack_floor: ci.ack_floor.stream_seq,
    num_ack_pending: ci.num_ack_pending, num_pending: ci.num_pending };

  step("next-empty");
  const t0 = Date.now();
  const none = await c.next({ expires: 1000 });
  out.nextEmpty = none === null ? null : none.string();
  out.nextEmptyWaitedMs = Date.now() - t0;

  step("nak-redelivery");
  await js.publish("smoke.nak", "again");
  const first = await c.next({ expires: 2000 });
  out.nakFirst = first ? { data: first.string(), deliveryCount: first.info.deliveryCount, redelivered: first.redelivered } : null;
  first?.nak();
  const second = await c.next({ expires: 2000 });
  out.nakSecond = second ? { data: second.string(), deliveryCount: second.info.deliveryCount,
    redelivered: second.redelivered, streamSequence: second.info.streamSequence } : null;
  // ackAck waits for the server's confirmation of the ack (a request on the ack subject).
  out.ackAck = second ? await second.ackAck() : null;

  step("term");
  await js.publish("smoke.term", "stop");
  const t = await c.next({ expires: 2000 });
  t?.term("bad data");
  await nc.flush();
  const afterTerm = await c.next({ expires: 1000 });
  out.afterTerm = afterTerm === null ? null : afterTerm.string();

  step("consume");
  await jsm.consumers.add("SMOKE", { durable_name: "worker", ack_policy: AckPolicy.Explicit,
    deliver_policy: "new" });
  const wc = await js.consumers.get("SMOKE", "worker");
  const msgs = await wc.consume({ max_messages: 4, expires: 1000, idle_heartbeat: 500 });
  const notes = {};
  (async () => {
    for await (const s of msgs.status()) notes[s.type] = (notes[s.type] ?? 0) + 1;
  })();
  const received = [];
  const done = (async () => {
    for await (const m of msgs) {
      received.push(m.string());
      m.ack();
      if (received.length === 10) break;
    }
  })();
  for (let i = 0; i < 6; i++) await js.publish(`smoke.c.${i}`, `c${i}`);
  // Quiet for longer than `expires`: the server sends idle heartbeats, then ends the pull with a
  // 408, and the client must re-pull to see the next batch.
  await delay(2200);
  for (let i = 6; i < 10; i++) await js.publish(`smoke.c.${i}`, `c${i}`);
  await done;
  await msgs.close();
  out.consumed = received;
  out.consumeNotes = { heartbeat: (notes.heartbeat ?? 0) > 0, heartbeats_missed: notes.heartbeats_missed ?? 0,
    next: (notes.next ?? 0) > 1 };
  await nc.flush();
  const wi = await wc.info();
  out.workerInfo = { ack_floor: wi.ack_floor.consumer_seq, num_ack_pending: wi.num_ack_pending,
    num_pending: wi.num_pending };
});
