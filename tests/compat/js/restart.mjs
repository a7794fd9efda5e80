// What nats.js stored survives a server restart on the same store directory.
//   node restart.mjs write <url>  : stream + durable consumer (3 of 5 acked), KV with history,
//                                   an object; records what it wrote.
//   node restart.mjs check <url>  : (after the restart) reads it all back through the client and
//                                   continues where the first run stopped.
import { AckPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { Objm } from "@nats-io/obj";
import { createHash } from "node:crypto";
import { args, scenario } from "./lib.mjs";

const phase = args[0];
const blob = new Uint8Array(200_000).map((_, i) => (i * 31 + 7) & 0xff);
const sha = (b) => createHash("sha256").update(b).digest("hex");

await scenario(`restart-${phase}`, async (nc, out, step) => {
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  if (phase === "write") {
    step("write-stream");
    await jsm.streams.add({ name: "KEEP", subjects: ["keep.>"] });
    for (let i = 1; i <= 5; i++) await js.publish(`keep.${i}`, `k${i}`, { msgID: `keep-${i}` });
    await jsm.consumers.add("KEEP", { durable_name: "d", ack_policy: AckPolicy.Explicit });
    const c = await js.consumers.get("KEEP", "d");
    const iter = await c.fetch({ max_messages: 3, expires: 1000 });
    for await (const m of iter) await m.ackAck();
    step("write-kv");
    const kv = await new Kvm(nc).create("keepkv", { history: 3 });
    await kv.put("a", "1");
    await kv.put("a", "2");
    await kv.put("b", "x");
    await kv.delete("b");
    step("write-obj");
    const os = await new Objm(nc).create("keepobj");
    await os.putBlob({ name: "doc" }, blob);
    out.written = true;
    return;
  }
  step("check-stream");
  const si = await jsm.streams.info("KEEP");
  out.stream = { messages: si.state.messages, first_seq: si.state.first_seq, last_seq: si.state.last_seq,
    subjects: si.config.subjects };
  // The de-duplication window is part of the stored state too.
  const dup = await js.publish("keep.5", "again", { msgID: "keep-5" });
  out.dupAfterRestart = { seq: dup.seq, duplicate: dup.duplicate };
  step("check-consumer");
  const ci = await jsm.consumers.info("KEEP", "d");
  out.consumer = { ack_floor: ci.ack_floor.stream_seq, num_pending: ci.num_pending,
    num_ack_pending: ci.num_ack_pending };
  const c = await js.consumers.get("KEEP", "d");
  const iter = await c.fetch({ max_messages: 5, expires: 1000 });
  out.resumed = [];
  for await (const m of iter) {
    out.resumed.push(m.string());
    m.ack();
  }
  step("check-kv");
  const kv = await new Kvm(nc).open("keepkv");
  const a = await kv.get("a");
  const b = await kv.get("b");
  out.kv = { a: a?.string() ?? null, aRev: a?.revision ?? null, bOp: b?.operation ?? null };
  const hist = [];
  for await (const e of await kv.history({ key: "a" })) hist.push(e.string());
  out.kvHistory = hist;
  out.kvPutAfter = await kv.put("c", "new");
  step("check-obj");
  const os = await new Objm(nc).open("keepobj");
  const got = await os.getBlob("doc");
  out.obj = { len: got?.length ?? null, same: got !== null && sha(got) === sha(blob) };
});
