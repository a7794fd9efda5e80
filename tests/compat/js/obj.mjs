// Object store with nats.js (@nats-io/obj): bucket create/status, putBlob of a 300 kB and a 5 MB
// blob (chunked 128 KiB publishes + a rollup meta message), getBlob (an ordered push consumer with
// flow control over the chunks, SHA-256 digest checked by the client), info, list, an empty object,
// delete (purges the chunks; getBlob -> null), and bucket destroy.
import { createHash } from "node:crypto";
import { Objm } from "@nats-io/obj";
import { scenario } from "./lib.mjs";

/** Deterministic pseudo-random bytes (xorshift32), so a corrupted chunk cannot go unnoticed. */
function blob(size, seed) {
  const b = new Uint8Array(size);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < size; i++) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    b[i] = x & 0xff;
  }
  return b;
}

const sha = (b) => createHash("sha256").update(b).digest("hex");

await scenario("obj", async (nc, out, step) => {
  step("create-bucket");
  const objm = new Objm(nc);
  const os = await objm.create("files");
  const st = await os.status();
  out.status = { bucket: st.bucket, sealed: st.sealed, backingStore: st.backingStore,
    streamName: st.streamInfo?.config?.name ?? null,
    allow_direct: st.streamInfo?.config?.allow_direct ?? null, subjects: st.streamInfo?.config?.subjects ?? null };

  step("put-small");
  const small = blob(300_000, 7);
  const si = await os.putBlob({ name: "blob" }, small);
  out.putSmall = { name: si.name, size: si.size, chunks: si.chunks, deleted: si.deleted,
    digestPrefix: si.digest.slice(0, 8) };

  step("put-large");
  const large = blob(5 * 1024 * 1024 + 123, 99);
  const li = await os.putBlob({ name: "dir/large.bin", description: "five megabytes" }, large);
  out.putLarge = { size: li.size, chunks: li.chunks, description: li.description };

  step("put-empty");
  const ei = await os.putBlob({ name: "empty" }, new Uint8Array(0));
  out.putEmpty = { size: ei.size, chunks: ei.chunks };

  step("get-small");
  const gs = await os.getBlob("blob");
  out.getSmall = { len: gs?.length ?? null, sameSha: gs !== null && sha(gs) === sha(small) };

  step("get-large");
  const gl = await os.getBlob("dir/large.bin");
  out.getLarge = { len: gl?.length ?? null, sameSha: gl !== null && sha(gl) === sha(large) };

  step("get-empty");
  const ge = await os.getBlob("empty");
  out.getEmpty = ge === null ? null : ge.length;

  step("info-list");
  const info = await os.info("dir/large.bin");
  out.info = { name: info?.name, size: info?.size, chunks: info?.chunks, bucket: info?.bucket };
  out.list = (await os.list()).map((o) => o.name).sort();
  out.missing = await os.getBlob("no-such-object");

  step("overwrite");
  const replaced = blob(1000, 3);
  await os.putBlob({ name: "blob" }, replaced);
  const gr = await os.getBlob("blob");
  out.overwritten = gr !== null && sha(gr) === sha(replaced);

  step("delete");
  const pr = await os.delete("dir/large.bin");
  out.deletePurged = pr.purged;
  out.afterDelete = await os.getBlob("dir/large.bin");
  const di = await os.info("dir/large.bin");
  out.deletedInfo = di === null ? null : { deleted: di.deleted, size: di.size };
  out.listAfterDelete = (await os.list()).map((o) => o.name).sort();

  step("destroy");
  out.destroyed = await os.destroy();
});
