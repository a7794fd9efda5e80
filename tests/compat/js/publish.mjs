// JetStream publish with nats.js: PubAck fields, msgID de-duplication, every `expect` header
// (stream, last sequence, last subject sequence, last msg id), and a publish no stream listens to.
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { headers } from "@nats-io/transport-node";
import { expectError, scenario } from "./lib.mjs";

const ack = (pa) => ({ stream: pa.stream, seq: pa.seq, duplicate: pa.duplicate ?? false });

await scenario("publish", async (nc, out, step) => {
  step("setup");
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: "PUB", subjects: ["pub.>"] });
  const js = jetstream(nc);

  step("plain");
  out.first = ack(await js.publish("pub.a", "1"));
  out.second = ack(await js.publish("pub.b", "2"));

  step("msgID-dedupe");
  out.idFirst = ack(await js.publish("pub.a", "3", { msgID: "order-7" }));
  out.idDuplicate = ack(await js.publish("pub.a", "3-again", { msgID: "order-7" }));
  out.idOther = ack(await js.publish("pub.a", "4", { msgID: "order-8" }));

  step("expect-stream");
  out.expStreamOk = ack(await js.publish("pub.c", "5", { expect: { streamName: "PUB" } }));
  out.errExpStream = await expectError(js.publish("pub.c", "x", { expect: { streamName: "OTHER" } }));

  step("expect-last-sequence");
  out.expLastSeqOk = ack(await js.publish("pub.c", "6", { expect: { lastSequence: 5 } }));
  out.errExpLastSeq = await expectError(js.publish("pub.c", "x", { expect: { lastSequence: 1 } }));

  step("expect-last-subject-sequence");
  out.expSubjSeqOk = ack(await js.publish("pub.b", "7", { expect: { lastSubjectSequence: 2 } }));
  out.errExpSubjSeq = await expectError(js.publish("pub.b", "x", { expect: { lastSubjectSequence: 2 } }));
  // 0 means "no message on this subject yet".
  out.expSubjSeqZero = ack(await js.publish("pub.fresh", "8", { expect: { lastSubjectSequence: 0 } }));

  step("expect-last-msg-id");
  out.expLastIdOk = ack(await js.publish("pub.d", "9", { msgID: "m-9" }));
  out.expLastIdMatch = ack(await js.publish("pub.d", "10", { msgID: "m-10", expect: { lastMsgID: "m-9" } }));
  out.errExpLastId = await expectError(js.publish("pub.d", "x", { msgID: "m-11", expect: { lastMsgID: "m-9" } }));

  step("headers-stored");
  const h = headers();
  h.set("App-Tag", "blue");
  const pa = await js.publish("pub.h", "with-header", { headers: h });
  const sm = await jsm.streams.getMessage("PUB", { seq: pa.seq });
  out.storedHeader = sm?.header?.get("App-Tag") ?? null;

  step("no-stream");
  out.errNoStream = await expectError(js.publish("nowhere.at.all", "x", { timeout: 2000, retries: 0 }));

  step("state");
  const si = await jsm.streams.info("PUB");
  out.state = { messages: si.state.messages, last_seq: si.state.last_seq };
});
