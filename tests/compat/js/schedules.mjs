// Message schedules through nats.js v3's own publish options (`schedule`, `cancelSchedule`):
// an `@at` one shot 1.5 s ahead (the client writes an ISO time with milliseconds), an `every`
// schedule copying the last message of a data subject with a TTL, its cancellation, and a bad
// cron specification (the server's 10189 as nats.js surfaces it).
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { delay, expectError, scenario } from "./lib.mjs";

await scenario("schedules", async (nc, out, step) => {
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  step("stream");
  await jsm.streams.add({
    name: "SCH", allow_msg_schedules: true, allow_msg_ttl: true,
    subjects: ["sch.schedule.>", "sch.target.>", "sch.stop", "sch.data.*"],
  });
  await js.publish("sch.data.A", "42");
  step("at");
  const at = new Date(Date.now() + 1500).toISOString();
  const ackAt = await js.publish("sch.schedule.once", "later", {
    schedule: { specification: `@at ${at}`, target: "sch.target.once" },
  });
  out.atSeq = ackAt.seq;
  step("every");
  const ackEvery = await js.publish("sch.schedule.every", "", {
    schedule: { specification: { every: "1s" }, target: "sch.target.every", source: "sch.data.A", ttl: "5s" },
  });
  out.everySeq = ackEvery.seq;
  step("bad");
  out.bad = await expectError(js.publish("sch.schedule.bad", "", {
    schedule: { specification: { cron: "0 0 0 30 2 *" }, target: "sch.target.bad" },
  }));
  step("wait");
  const last = async (subj) => {
    try {
      return await jsm.streams.getMessage("SCH", { last_by_subj: subj });
    } catch (err) {
      return null;
    }
  };
  let once = null;
  let every = null;
  for (let i = 0; i < 60 && (once === null || every === null); i++) {
    await delay(100);
    once = once ?? await last("sch.target.once");
    every = every ?? await last("sch.target.every");
  }
  out.once = once && { data: once.string(), scheduler: once.header?.get("Nats-Scheduler") ?? null,
                       next: once.header?.get("Nats-Schedule-Next") ?? null };
  out.every = every && { data: every.string(), scheduler: every.header?.get("Nats-Scheduler") ?? null,
                         ttl: every.header?.get("Nats-TTL") ?? null,
                         nextIsTime: /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/.test(every.header?.get("Nats-Schedule-Next") ?? "") };
  step("cancel");
  const cancel = await js.publish("sch.stop", "", { cancelSchedule: { scheduleSubject: "sch.schedule.every" } });
  out.cancelled = cancel.seq > 0;
  const info = await jsm.streams.info("SCH", { subjects_filter: ">" });
  const subjects = info.state.subjects ?? {};
  out.scheduleGone = !("sch.schedule.every" in subjects) && !("sch.schedule.once" in subjects);
});
