// The JetStream API through a domain prefix with nats.js: jetstreamManager/jetstream({domain}) send every
// request to $JS.<domain>.API.... Stream and durable consumer created through it, a publish (the
// PubAck names the domain), fetch + ack and next() on the consumer (CONSUMER.MSG.NEXT under the prefix),
// direct get, consumer info. The domain is the first argument.
import { AckPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { args, scenario } from "./lib.mjs";

const domain = args[0];

await scenario("domain", async (nc, out, step) => {
  step("setup");
  const jsm = await jetstreamManager(nc, { domain });
  const js = jetstream(nc, { domain });
  const ai = await jsm.getAccountInfo();
  out.accountDomain = ai.domain ?? null;
  await jsm.streams.add({ name: "DOM", subjects: ["dom.>"], allow_direct: true });
  const acks = [];
  for (let i = 0; i < 3; i++) {
    const pa = await js.publish(`dom.${i}`, `m${i}`);
    acks.push({ seq: pa.seq, domain: pa.domain ?? null, stream: pa.stream });
  }
  out.acks = acks;
  await jsm.consumers.add("DOM", { durable_name: "dc", ack_policy: AckPolicy.Explicit });

  step("fetch");
  const c = await js.consumers.get("DOM", "dc");
  const iter = await c.fetch({ max_messages: 2, expires: 2000 });
  const fetched = [];
  for await (const m of iter) {
    fetched.push({ subject: m.subject, data: m.string(), seq: m.seq, domain: m.info.domain ?? null });
    await m.ackAck();
  }
  out.fetched = fetched;

  step("next");
  const m = await c.next({ expires: 2000 });
  out.next = m ? { subject: m.subject, data: m.string() } : null;
  if (m) await m.ackAck();

  step("info");
  const ci = await c.info();
  out.consumer = { ack_floor: ci.ack_floor.stream_seq, num_pending: ci.num_pending };

  step("direct");
  const dm = await jsm.direct.getMessage("DOM", { seq: 2 });
  out.direct = dm ? { subject: dm.subject, data: dm.string(), seq: dm.seq } : null;
});
