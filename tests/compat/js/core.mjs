// Core NATS with nats.js: pub/sub with wildcards, queue groups, auto-unsubscribe, request/reply,
// headers (multi-valued, echoed by a responder), a 512 kB payload, no-responders, drain.
import { connect, createInbox, headers } from "@nats-io/transport-node";
import { describeError, scenario } from "./lib.mjs";

const enc = new TextEncoder();

/** Collect `n` messages from a subscription's iterator (or fewer when it ends). */
async function take(sub, n) {
  const got = [];
  for await (const m of sub) {
    got.push(m);
    if (got.length >= n) break;
  }
  return got;
}

await scenario("core", async (nc, out, step) => {
  step("wildcard-subscribe");
  const all = nc.subscribe("core.>");
  const star = nc.subscribe("core.*.x");
  const allP = take(all, 3);
  const starP = take(star, 1);
  await nc.flush();
  nc.publish("core.a", "one");
  nc.publish("core.b.x", "two");
  nc.publish("core.c.d.e", enc.encode("three"));
  const got = await allP;
  out.wildcard = got.map((m) => [m.subject, m.string()]);
  out.star = (await starP).map((m) => m.subject);

  step("queue-group");
  let qa = 0, qb = 0;
  const q1 = nc.subscribe("work.q", { queue: "workers", callback: () => { qa++; } });
  const q2 = nc.subscribe("work.q", { queue: "workers", callback: () => { qb++; } });
  await nc.flush();
  for (let i = 0; i < 20; i++) nc.publish("work.q", `${i}`);
  await nc.flush();
  // A round trip after the publishes: the server has routed all 20 before it answers this PING.
  await nc.flush();
  out.queueTotal = qa + qb;
  q1.unsubscribe();
  q2.unsubscribe();

  step("auto-unsubscribe");
  const limited = nc.subscribe("auto.unsub", { max: 2 });
  const limitedP = take(limited, 10);
  await nc.flush();
  for (let i = 0; i < 5; i++) nc.publish("auto.unsub", `${i}`);
  out.autoUnsub = (await limitedP).length;

  step("request-reply");
  const svc = nc.subscribe("svc.echo", {
    callback: (err, m) => {
      if (err) return;
      const h = headers();
      h.set("Echo-Count", String(m.headers?.values("X-Multi")?.length ?? 0));
      m.respond(m.string().toUpperCase(), { headers: h });
    },
  });
  await nc.flush();
  const reqH = headers();
  reqH.append("X-Multi", "a");
  reqH.append("X-Multi", "b");
  const rep = await nc.request("svc.echo", "hello", { timeout: 3000, headers: reqH });
  out.reply = rep.string();
  out.replyHeader = rep.headers?.get("Echo-Count") ?? null;
  // Many requests in flight share one inbox subscription (the muxed `_INBOX.<id>.*`).
  const many = await Promise.all(
    Array.from({ length: 25 }, (_, i) => nc.request("svc.echo", `r${i}`, { timeout: 3000 })),
  );
  out.manyReplies = many.filter((m, i) => m.string() === `R${i}`).length;
  svc.unsubscribe();

  step("headers");
  const hsub = nc.subscribe("hdr.test");
  const hP = take(hsub, 2);
  await nc.flush();
  const h = headers();
  h.set("Trace-Id", "abc 123");
  h.append("Multi", "1");
  h.append("Multi", "2");
  nc.publish("hdr.test", "with-headers", { headers: h });
  nc.publish("hdr.test", "", { headers: headers() });
  const hm = await hP;
  out.headers = {
    traceId: hm[0].headers?.get("Trace-Id") ?? null,
    multi: hm[0].headers?.values("Multi") ?? null,
    body: hm[0].string(),
    emptyBodyHasHeaders: hm[1].headers !== undefined,
    emptyBodyLen: hm[1].data.length,
  };

  step("reply-subject");
  const inbox = createInbox();
  const rsub = nc.subscribe("with.reply");
  const rP = take(rsub, 1);
  await nc.flush();
  nc.publish("with.reply", "x", { reply: inbox });
  out.replySubjectSeen = (await rP)[0].reply === inbox;

  step("large-payload");
  const big = new Uint8Array(512 * 1024);
  for (let i = 0; i < big.length; i++) big[i] = i % 251;
  const bsub = nc.subscribe("big.payload");
  const bP = take(bsub, 1);
  await nc.flush();
  nc.publish("big.payload", big);
  const bm = (await bP)[0];
  let same = bm.data.length === big.length;
  for (let i = 0; same && i < big.length; i += 4099) same = bm.data[i] === big[i];
  out.largeOk = same;

  step("no-responders");
  try {
    await nc.request("nobody.listens.here", "?", { timeout: 2000 });
    out.noResponders = { name: "NoError" };
  } catch (err) {
    out.noResponders = describeError(err);
  }

  step("rtt");
  out.rttOk = (await nc.rtt()) >= 0;

  step("verbose-pedantic-no-echo");
  // A second connection with verbose (+OK after every op), pedantic and noEcho.
  const nc2 = await connect({ servers: process.argv.at(-1), verbose: true, pedantic: true, noEcho: true,
    reconnect: false });
  const peer = nc.subscribe("echo.test");
  const peerP = take(peer, 1);
  const self = nc2.subscribe("echo.test");
  let selfGot = 0;
  (async () => { for await (const _ of self) selfGot++; })();
  await nc.flush();
  await nc2.flush();
  nc2.publish("echo.test", "mine");
  await nc2.flush();
  out.noEchoPeer = (await peerP)[0].string();
  await nc.flush();
  await nc2.flush();
  out.noEchoSelf = selfGot;
  const svc2 = nc.subscribe("svc.v", { callback: (_e, m) => m.respond("pong") });
  await nc.flush();
  out.verboseRequest = (await nc2.request("svc.v", "ping", { timeout: 2000 })).string();
  svc2.unsubscribe();
  await nc2.close();

  step("drain");
  const dsub = nc.subscribe("drain.me");
  let drained = 0;
  (async () => { for await (const _ of dsub) drained++; })();
  await nc.flush();
  for (let i = 0; i < 10; i++) nc.publish("drain.me", "d");
  await nc.flush();
  await dsub.drain();
  out.drained = drained;
});
