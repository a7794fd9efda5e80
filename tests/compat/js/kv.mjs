// Key-Value with nats.js (@nats-io/kv): bucket create/open/status, put/get (direct get), create
// (only-if-absent), update with the right and a wrong revision, delete/purge markers, keys(),
// history(), watch() (initial values, live updates and deletes), and bucket destroy.
import { Kvm } from "@nats-io/kv";
import { expectError, scenario } from "./lib.mjs";

const entry = (e) => e === null ? null : { key: e.key, value: e.string(), revision: e.revision, operation: e.operation };

/** Collect every value of a QueuedIterator (keys/history end by themselves). */
async function collect(itp) {
  const items = [];
  for await (const x of await itp) items.push(x);
  return items;
}

await scenario("kv", async (nc, out, step) => {
  step("create-bucket");
  const kvm = new Kvm(nc);
  const kv = await kvm.create("cfg", { history: 5 });
  const st = await kv.status();
  out.status = { bucket: st.bucket, history: st.history, values: st.values, backingStore: st.backingStore,
    streamName: st.streamInfo.config.name, allow_direct: st.streamInfo.config.allow_direct,
    max_msgs_per_subject: st.streamInfo.config.max_msgs_per_subject, discard: st.streamInfo.config.discard,
    subjects: st.streamInfo.config.subjects };

  step("put-get");
  out.put1 = await kv.put("color", "blue");
  out.put2 = await kv.put("size", "L");
  out.getColor = entry(await kv.get("color"));
  out.getMissing = await kv.get("nope");

  step("create");
  out.createNew = await kv.create("shape", "round");
  out.errCreateExisting = await expectError(kv.create("shape", "square"));

  step("update");
  out.updateOk = await kv.update("color", "green", out.put1);
  out.errUpdateStale = await expectError(kv.update("color", "red", out.put1));

  step("watch");
  // The watcher first replays the last value of every key, then follows live changes.
  const watched = [];
  const w = await kv.watch();
  const watching = (async () => {
    for await (const e of w) {
      watched.push({ key: e.key, value: e.string(), operation: e.operation, revision: e.revision });
      if (e.key === "stop") break;
    }
  })();
  await kv.put("size", "XL");
  await kv.delete("shape");
  await kv.put("stop", "1");
  await watching;
  w.stop();
  out.watched = watched;

  step("delete-purge");
  out.getDeleted = entry(await kv.get("shape"));
  out.createAfterDelete = await kv.create("shape", "oval");
  await kv.purge("size");
  out.getPurged = entry(await kv.get("size"));

  step("keys");
  out.keys = (await collect(kv.keys())).sort();

  step("history");
  out.historyColor = (await collect(kv.history({ key: "color" }))).map(entry);

  step("get-revision");
  out.getRev = entry(await kv.get("color", { revision: out.put1 }));

  step("open-existing");
  const again = await kvm.open("cfg");
  out.reopenedGet = entry(await again.get("color"));
  out.bucketList = [];
  for await (const s of kvm.list()) out.bucketList.push(s.bucket);

  step("destroy");
  out.destroyed = await kv.destroy();
  out.errOpenDestroyed = await expectError(kvm.open("cfg").then((b) => b.get("color")));
});
