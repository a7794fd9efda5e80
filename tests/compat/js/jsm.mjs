// The nats.js JetStream manager: account info, stream add/info/update/list/names/find/purge/delete,
// stored-message get/delete, consumer add/info/list/update/delete, and the API errors (codes and
// err_codes) the client turns into JetStreamApiError.
import { AckPolicy, jetstreamManager } from "@nats-io/jetstream";
import { expectError, scenario } from "./lib.mjs";

/** Drain a nats.js Lister into an array. */
async function collect(lister) {
  const items = [];
  for await (const x of lister) items.push(x);
  return items;
}

await scenario("jsm", async (nc, out, step) => {
  step("jetstreamManager");
  const jsm = await jetstreamManager(nc); // sends $JS.API.INFO
  const ai = await jsm.getAccountInfo();
  out.account = { hasLimits: typeof ai.limits === "object", apiLevel: ai.api?.level ?? null };

  step("stream-add");
  const si = await jsm.streams.add({ name: "ORDERS", subjects: ["orders.>"], max_msgs: 1000 });
  out.added = {
    name: si.config.name, subjects: si.config.subjects, retention: si.config.retention,
    storage: si.config.storage, max_msgs: si.config.max_msgs, duplicate_window: si.config.duplicate_window,
    discard: si.config.discard, num_replicas: si.config.num_replicas, messages: si.state.messages,
    first_seq: si.state.first_seq, last_seq: si.state.last_seq, created: typeof si.created === "string",
  };
  // Adding the identical config again is idempotent on the reference.
  const again = await jsm.streams.add({ name: "ORDERS", subjects: ["orders.>"], max_msgs: 1000 });
  out.addIdempotent = again.config.name;

  step("stream-add-errors");
  out.errAddDifferent = await expectError(jsm.streams.add({ name: "ORDERS", subjects: ["other.>"] }));
  out.errOverlap = await expectError(jsm.streams.add({ name: "OVERLAP", subjects: ["orders.new"] }));
  out.errInfoMissing = await expectError(jsm.streams.info("NOPE"));
  out.errDeleteMissing = await expectError(jsm.streams.delete("NOPE"));

  step("publish-some");
  for (let i = 0; i < 4; i++) {
    const r = await nc.request(`orders.${i % 2 ? "new" : "old"}`, `o${i}`, { timeout: 3000 });
    if (!r.string().includes('"seq"')) throw new Error(`no PubAck: ${r.string()}`);
  }

  step("stream-info");
  const info = await jsm.streams.info("ORDERS", { subjects_filter: ">" });
  out.info = {
    messages: info.state.messages, bytes: info.state.bytes > 0, first_seq: info.state.first_seq,
    last_seq: info.state.last_seq, num_subjects: info.state.num_subjects ?? null,
    subjects: info.state.subjects ?? null, consumer_count: info.state.consumer_count,
  };

  step("stream-update");
  const up = await jsm.streams.update("ORDERS", { subjects: ["orders.>", "returns.>"], max_msgs: 500,
    description: "updated" });
  out.updated = { subjects: up.config.subjects, max_msgs: up.config.max_msgs, description: up.config.description,
    messages: up.state.messages };
  out.errUpdateStorage = await expectError(jsm.streams.update("ORDERS", { storage: "memory" }));
  out.errUpdateMissing = await expectError(jsm.streams.update("NOPE", { subjects: ["nope.>"] }));

  step("stream-list");
  await jsm.streams.add({ name: "AUDIT", subjects: ["audit.>"], storage: "memory" });
  const listed = await collect(jsm.streams.list());
  out.list = listed.map((s) => s.config.name).sort();
  out.names = (await collect(jsm.streams.names())).sort();
  out.namesFiltered = await collect(jsm.streams.names("audit.x"));
  out.find = await jsm.streams.find("returns.1");
  out.errFind = await expectError(jsm.streams.find("unknown.subject"));

  step("stream-messages");
  const m2 = await jsm.streams.getMessage("ORDERS", { seq: 2 });
  out.msg2 = { subject: m2?.subject ?? null, seq: m2?.seq ?? null, data: m2 ? m2.string() : null };
  const last = await jsm.streams.getMessage("ORDERS", { last_by_subj: "orders.old" });
  out.lastOld = { seq: last?.seq ?? null, data: last ? last.string() : null };
  out.msgMissing = await jsm.streams.getMessage("ORDERS", { seq: 99 }); // null, not an error
  out.deleteMsg = await jsm.streams.deleteMessage("ORDERS", 1);
  out.errDeleteMsgAgain = await expectError(jsm.streams.deleteMessage("ORDERS", 1));
  out.afterDelete = (await jsm.streams.info("ORDERS")).state.messages;

  step("consumer-add");
  const ci = await jsm.consumers.add("ORDERS", {
    durable_name: "proc", ack_policy: AckPolicy.Explicit, filter_subject: "orders.new",
  });
  out.consumer = {
    name: ci.name, stream_name: ci.stream_name, durable_name: ci.config.durable_name,
    ack_policy: ci.config.ack_policy, deliver_policy: ci.config.deliver_policy, ack_wait: ci.config.ack_wait,
    max_deliver: ci.config.max_deliver, max_ack_pending: ci.config.max_ack_pending,
    max_waiting: ci.config.max_waiting, replay_policy: ci.config.replay_policy,
    num_pending: ci.num_pending, filter_subject: ci.config.filter_subject,
  };
  const eph = await jsm.consumers.add("ORDERS", { ack_policy: AckPolicy.None, inactive_threshold: 60_000_000_000 });
  out.ephemeralNameLen = eph.name.length;

  step("consumer-errors");
  out.errConsumerMissing = await expectError(jsm.consumers.info("ORDERS", "ghost"));
  out.errConsumerStreamMissing = await expectError(jsm.consumers.add("NOPE", { durable_name: "x" }));
  out.errConsumerDifferent = await expectError(jsm.consumers.add("ORDERS", {
    durable_name: "proc", ack_policy: AckPolicy.Explicit, filter_subject: "orders.old",
  }));

  step("consumer-update-list");
  const cu = await jsm.consumers.update("ORDERS", "proc", { description: "processor", max_ack_pending: 50 });
  out.consumerUpdated = { description: cu.config.description, max_ack_pending: cu.config.max_ack_pending };
  out.consumers = (await collect(jsm.consumers.list("ORDERS"))).map((c) => c.name).sort();
  out.streamConsumers = (await jsm.streams.info("ORDERS")).state.consumer_count;

  step("purge");
  const pr = await jsm.streams.purge("ORDERS", { filter: "orders.old" });
  out.purgeFiltered = pr.purged;
  const pr2 = await jsm.streams.purge("ORDERS");
  out.purgeAll = pr2.purged;
  const afterPurge = await jsm.streams.info("ORDERS");
  out.afterPurge = { messages: afterPurge.state.messages, first_seq: afterPurge.state.first_seq,
    last_seq: afterPurge.state.last_seq };

  step("deletes");
  out.consumerDeleted = await jsm.consumers.delete("ORDERS", "proc");
  out.streamDeleted = await jsm.streams.delete("ORDERS");
  out.errAfterDelete = await expectError(jsm.streams.info("ORDERS"));
  out.remaining = (await collect(jsm.streams.names())).sort();
});
