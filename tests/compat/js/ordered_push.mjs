// Ordered consumers (pull-based and push-based) and a durable push consumer with nats.js v3:
// ordered fetch/consume over the whole stream, from a start sequence and with a subject filter;
// a durable push consumer with explicit acks, idle heartbeats and flow control; an ordered push
// consumer (the kind KV watch and object-store get build on).
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { createInbox, nanos } from "@nats-io/transport-node";
import { scenario } from "./lib.mjs";

/** Take `n` messages from a ConsumerMessages iterator, then stop it. */
async function takeN(msgs, n, ack = false) {
  const got = [];
  for await (const m of msgs) {
    got.push({ data: m.string(), seq: m.seq, subject: m.subject });
    if (ack) m.ack();
    if (got.length >= n) break;
  }
  await msgs.close();
  return got;
}

await scenario("ordered_push", async (nc, out, step) => {
  step("setup");
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: "EVENTS", subjects: ["ev.>"] });
  const js = jetstream(nc);
  for (let i = 1; i <= 20; i++) await js.publish(i % 2 ? "ev.odd" : "ev.even", `e${i}`);

  step("ordered-pull-consume");
  const oc = await js.consumers.get("EVENTS");
  out.orderedIsPull = oc.isPullConsumer();
  const all = await takeN(await oc.consume({ max_messages: 7 }), 20);
  out.orderedAll = all.map((m) => m.seq);

  step("ordered-pull-fetch-from-seq");
  const oc2 = await js.consumers.get("EVENTS", { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: 15 });
  const f = await oc2.fetch({ max_messages: 10, expires: 1000 });
  const fromSeq = [];
  for await (const m of f) fromSeq.push(m.seq);
  out.orderedFromSeq = fromSeq;

  step("ordered-pull-filtered");
  const oc3 = await js.consumers.get("EVENTS", { filter_subjects: ["ev.even"] });
  const even = await takeN(await oc3.consume(), 10);
  out.orderedEven = even.map((m) => m.data);

  step("durable-push");
  const deliver = createInbox();
  await jsm.consumers.add("EVENTS", {
    durable_name: "pushd", deliver_subject: deliver, ack_policy: AckPolicy.Explicit,
    idle_heartbeat: nanos(1000), flow_control: true, filter_subject: "ev.odd",
  });
  const pc = await js.consumers.getPushConsumer("EVENTS", "pushd");
  out.pushIsPush = pc.isPushConsumer();
  const pushed = await takeN(await pc.consume(), 10, true);
  out.pushed = pushed.map((m) => m.data);
  await nc.flush();
  const pi = await pc.info();
  out.pushSeqs = { ack_floor: pi.ack_floor, delivered: { consumer_seq: pi.delivered.consumer_seq,
    stream_seq: pi.delivered.stream_seq }, num_pending: pi.num_pending };
  out.pushInfo = { ack_floor: pi.ack_floor.stream_seq, num_ack_pending: pi.num_ack_pending,
    push_bound: pi.push_bound ?? false, deliver_subject: pi.config.deliver_subject === deliver };

  step("ordered-push");
  const opc = await js.consumers.getPushConsumer("EVENTS");
  const opMsgs = await takeN(await opc.consume(), 20);
  out.orderedPush = opMsgs.map((m) => m.seq);

  step("push-new-messages");
  // A fresh ordered push consumer delivering only new messages sees a publish made after it starts.
  const npc = await js.consumers.getPushConsumer("EVENTS", { deliver_policy: DeliverPolicy.New });
  const iter = await npc.consume();
  const live = takeN(iter, 3);
  for (let i = 21; i <= 23; i++) await js.publish("ev.live", `e${i}`);
  out.liveSeqs = (await live).map((m) => m.seq);
});
