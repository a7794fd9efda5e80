// Modest volume through nats.js (correctness under load, not speed): a 20,000-message core burst
// received complete and in order; 2,000 JetStream publishes with up to 200 PubAcks in flight;
// all 2,000 read back by consume() with acks and by an ordered consumer; 300 KV keys seen by a watcher.
import { AckPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { scenario } from "./lib.mjs";

await scenario("volume", async (nc, out, step) => {
  step("core-burst");
  const N = 20000;
  let got = 0;
  let inOrder = true;
  const done = new Promise((resolve) => {
    nc.subscribe("burst.x", {
      callback: (_err, m) => {
        if (Number(m.string()) !== got) inOrder = false;
        got++;
        if (got === N) resolve();
      },
    });
  });
  await nc.flush();
  for (let i = 0; i < N; i++) nc.publish("burst.x", String(i));
  await Promise.race([done, nc.flush().then(() => new Promise((r) => setTimeout(r, 10000)))]);
  out.burst = { received: got, inOrder };

  step("js-publish");
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: "VOL", subjects: ["vol.>"] });
  const js = jetstream(nc);
  const M = 2000;
  const seqs = [];
  for (let base = 0; base < M; base += 200) {
    const acks = await Promise.all(Array.from({ length: 200 }, (_, i) => js.publish(`vol.${(base + i) % 7}`, `p${base + i}`)));
    for (const a of acks) seqs.push(a.seq);
  }
  const uniq = new Set(seqs);
  out.published = { acks: seqs.length, unique: uniq.size, max: Math.max(...seqs) };
  out.streamMessages = (await jsm.streams.info("VOL")).state.messages;

  step("consume-all");
  await jsm.consumers.add("VOL", { durable_name: "all", ack_policy: AckPolicy.Explicit });
  const c = await js.consumers.get("VOL", "all");
  const msgs = await c.consume({ max_messages: 300 });
  let n = 0;
  let lastSeq = 0;
  let ordered = true;
  for await (const m of msgs) {
    if (m.seq !== lastSeq + 1) ordered = false;
    lastSeq = m.seq;
    m.ack();
    if (++n === M) break;
  }
  await msgs.close();
  await nc.flush();
  const ci = await c.info();
  out.consumed = { n, ordered, num_pending: ci.num_pending, delivered: ci.delivered.stream_seq };

  step("ordered-all");
  const oc = await js.consumers.get("VOL");
  const om = await oc.consume();
  let on = 0;
  for await (const _ of om) if (++on === M) break;
  await om.close();
  out.orderedRead = on;

  step("kv-watch");
  const kv = await new Kvm(nc).create("volkv");
  const w = await kv.watch({ include: "updates" });
  const K = 300;
  const seen = new Set();
  const watching = (async () => {
    for await (const e of w) {
      seen.add(e.key);
      if (seen.size === K) break;
    }
  })();
  await Promise.all(Array.from({ length: K }, (_, i) => kv.put(`k${i}`, `v${i}`)));
  await watching;
  w.stop();
  out.kvWatched = seen.size;
});
