// natsd live dashboard: polls the monitoring JSON once a second and redraws. No libraries: charts are SVG paths.
"use strict";
(function () {
  const POLL_MS = 1000;
  const HISTORY = 120;                      // points kept per series (two minutes at one poll a second)
  const PENDING_COLORS = ["#37b3f0", "#f0a837", "#3fb950", "#d2a8ff", "#f85149", "#56d4dd", "#e3b341", "#8b949e"];

  const state = {
    prev: null,                             // the previous /varz, for rates
    series: { inMsgs: [], outMsgs: [], inBytes: [], outBytes: [], conns: [] },
    pending: new Map(),                     // "stream > consumer" -> [pending, ...]
    lastSeq: new Map(),                     // "account/stream" -> [last_seq, time]
    polls: 0,
    errors: 0,
  };
  window.natsdDashboard = state;            // for tests and the curious

  const $ = (id) => document.getElementById(id);
  const fmt = new Intl.NumberFormat();
  function num(n) { return fmt.format(Math.round(n || 0)); }
  function bytes(n) {
    n = n || 0;
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i === 0 ? Math.round(n) : n.toFixed(1)) + " " + units[i];
  }
  function push(arr, v) { arr.push(v); if (arr.length > HISTORY) arr.shift(); }
  function text(el, value) { if (el.textContent !== String(value)) el.textContent = value; }
  function cell(tr, value, cls) {
    const td = document.createElement("td");
    td.textContent = value;
    if (cls) td.className = cls;
    tr.appendChild(td);
  }
  function ago(iso, nowIso) {
    if (!iso || iso.startsWith("0001-")) return "never";
    const s = (Date.parse(nowIso || new Date().toISOString()) - Date.parse(iso)) / 1000;
    if (!isFinite(s)) return "–";
    if (s < 1) return "just now";
    if (s < 60) return Math.round(s) + "s ago";
    if (s < 3600) return Math.round(s / 60) + "m ago";
    return Math.round(s / 3600) + "h ago";
  }

  // An SVG line chart of several series on one scale; the newest point is at the right edge.
  function chart(svg, series, colors, fmtAxis) {
    const W = 600, H = 160, PAD = 14;
    let max = 0;
    for (const s of series) for (const v of s) if (v > max) max = v;
    const top = max > 0 ? max * 1.1 : 1;
    const parts = [];
    for (let g = 0; g <= 2; g++) {
      const y = PAD + (H - 2 * PAD) * g / 2;
      parts.push(`<line class="grid" x1="0" x2="${W}" y1="${y}" y2="${y}"/>`);
    }
    series.forEach((s, i) => {
      if (s.length === 0) return;
      const step = W / (HISTORY - 1);
      const x0 = W - (s.length - 1) * step;
      const d = s.map((v, j) => `${j ? "L" : "M"}${(x0 + j * step).toFixed(1)},` +
                                `${(H - PAD - (H - 2 * PAD) * v / top).toFixed(1)}`).join("");
      parts.push(`<path d="${d}" style="stroke:${colors[i % colors.length]}"/>`);
    });
    svg.innerHTML = parts.join("");
    // the scale is HTML, not SVG text: the chart stretches to its box and would distort letters
    const scale = svg.parentElement.querySelector(".scale");
    if (scale) text(scale, "max " + fmtAxis(max));
    svg.dataset.max = String(max);
    svg.dataset.points = String(Math.max(0, ...series.map((s) => s.length)));
  }

  async function getJSON(path) {
    const r = await fetch(path, { cache: "no-store" });
    if (!r.ok) throw new Error(path + ": HTTP " + r.status);
    return r.json();
  }

  function overview(varz) {
    text($("server-name"), varz.server_name || varz.server_id);
    text($("server-version"), "v" + varz.version);
    text($("uptime"), "up " + varz.uptime);
    const now = Date.parse(varz.now) / 1000;
    const prev = state.prev;
    let rates = { inMsgs: 0, outMsgs: 0, inBytes: 0, outBytes: 0 };
    if (prev) {
      const dt = Math.max(now - Date.parse(prev.now) / 1000, 0.001);
      rates = {
        inMsgs: Math.max(varz.in_msgs - prev.in_msgs, 0) / dt, outMsgs: Math.max(varz.out_msgs - prev.out_msgs, 0) / dt,
        inBytes: Math.max(varz.in_bytes - prev.in_bytes, 0) / dt,
        outBytes: Math.max(varz.out_bytes - prev.out_bytes, 0) / dt,
      };
    }
    state.prev = varz;
    const s = state.series;
    push(s.inMsgs, rates.inMsgs); push(s.outMsgs, rates.outMsgs);
    push(s.inBytes, rates.inBytes); push(s.outBytes, rates.outBytes);
    push(s.conns, varz.connections);
    text($("v-connections"), num(varz.connections));
    text($("v-subscriptions"), num(varz.subscriptions));
    text($("v-in-msgs"), num(rates.inMsgs));
    text($("v-out-msgs"), num(rates.outMsgs));
    text($("v-in-bytes"), bytes(rates.inBytes));
    text($("v-out-bytes"), bytes(rates.outBytes));
    text($("v-slow"), num(varz.slow_consumers));
    text($("v-mem"), bytes(varz.mem));
    const io = ["var(--in)", "var(--out)"];
    chart($("chart-msgs"), [s.inMsgs, s.outMsgs], io, num);
    chart($("chart-bytes"), [s.inBytes, s.outBytes], io, bytes);
    chart($("chart-conns"), [s.conns], io, num);
  }

  function jetstream(jsz) {
    const streams = [], consumers = [];
    for (const acc of jsz.account_details || []) {
      for (const st of acc.stream_detail || []) {
        streams.push([acc.name, st]);
        for (const c of st.consumer_detail || []) consumers.push([st.name, c]);
      }
    }
    text($("js-summary"), jsz.disabled ? "(JetStream is off)" :
      `${num(jsz.streams)} streams, ${num(jsz.consumers)} consumers, ${num(jsz.messages)} messages, ` +
      `${bytes(jsz.bytes)}`);
    const now = Date.parse(jsz.now) / 1000;
    const sbody = $("streams-table").tBodies[0];
    const srows = [];
    for (const [acc, st] of streams) {
      const key = acc + "/" + st.name;
      const s = st.state || {};
      const prev = state.lastSeq.get(key);
      const rate = prev ? Math.max(s.last_seq - prev[0], 0) / Math.max(now - prev[1], 0.001) : 0;
      state.lastSeq.set(key, [s.last_seq || 0, now]);
      const tr = document.createElement("tr");
      tr.dataset.stream = st.name;
      cell(tr, st.name); cell(tr, acc); cell(tr, num(s.messages), "num"); cell(tr, bytes(s.bytes), "num");
      cell(tr, num(s.num_subjects), "num"); cell(tr, num(s.consumer_count), "num"); cell(tr, num(rate), "num");
      cell(tr, num(s.first_seq), "num"); cell(tr, num(s.last_seq), "num");
      srows.push(tr);
    }
    if (!srows.length) {
      const tr = document.createElement("tr");
      cell(tr, "no streams", "empty"); tr.firstChild.colSpan = 9; srows.push(tr);
    }
    sbody.replaceChildren(...srows);

    const cbody = $("consumers-table").tBodies[0];
    const crows = [];
    const seen = new Set();
    for (const [stream, c] of consumers) {
      const key = stream + " > " + c.name;
      seen.add(key);
      if (!state.pending.has(key)) state.pending.set(key, []);
      push(state.pending.get(key), c.num_pending || 0);
      const d = c.delivered || {}, a = c.ack_floor || {};
      const last = [d.last_active, a.last_active].filter(Boolean).sort().pop();
      const tr = document.createElement("tr");
      tr.dataset.consumer = key;
      cell(tr, stream); cell(tr, c.name); cell(tr, (c.config || {}).deliver_subject ? "push" : "pull");
      cell(tr, num(c.num_pending), "num"); cell(tr, num(c.num_ack_pending), "num");
      cell(tr, num(c.num_redelivered), "num"); cell(tr, num(c.num_waiting), "num"); cell(tr, ago(last, jsz.now));
      crows.push(tr);
    }
    for (const k of [...state.pending.keys()]) if (!seen.has(k)) state.pending.delete(k);
    if (!crows.length) {
      const tr = document.createElement("tr");
      cell(tr, "no consumers", "empty"); tr.firstChild.colSpan = 8; crows.push(tr);
    }
    cbody.replaceChildren(...crows);
    const top = [...state.pending.entries()].sort((x, y) => y[1][y[1].length - 1] - x[1][x[1].length - 1]).slice(0, 8);
    chart($("chart-pending"), top.map((e) => e[1]), PENDING_COLORS, num);
    $("pending-legend").replaceChildren(...top.map(([k], i) => {
      const span = document.createElement("span");
      span.textContent = k;
      span.style.setProperty("--c", PENDING_COLORS[i]);
      return span;
    }));
  }

  function accounts(accountz, connz) {
    const perAcc = new Map();
    for (const c of connz.connections || []) {
      const a = c.account || "$G";
      const e = perAcc.get(a) || { conns: 0, subs: 0 };
      e.conns++; e.subs += c.subscriptions || 0;
      perAcc.set(a, e);
    }
    const body = $("accounts-table").tBodies[0];
    body.replaceChildren(...(accountz.accounts || []).map((name) => {
      const e = perAcc.get(name) || { conns: 0, subs: 0 };
      const tr = document.createElement("tr");
      cell(tr, name); cell(tr, num(e.conns), "num"); cell(tr, num(e.subs), "num");
      cell(tr, state.jsAccounts && state.jsAccounts.has(name) ? "enabled" : "–");
      return tr;
    }));
  }

  // One row per leaf node link of /leafz; rates from the previous poll's counters of the same link id.
  function leafnodes(leafz, nowIso) {
    const now = Date.parse(nowIso) / 1000;
    const links = leafz.leafs || [];
    text($("leafs"), links.length ? "(" + num(links.length) + ")" : "");
    const prev = state.leafPrev || new Map();
    const next = new Map();
    const rows = links.map((l) => {
      const key = l.id + "/" + l.name;
      const p = prev.get(key);
      const dt = p ? Math.max(now - p.t, 0.001) : 0;
      const inRate = p ? Math.max((l.in_msgs || 0) - p.in, 0) / dt : 0;
      const outRate = p ? Math.max((l.out_msgs || 0) - p.out, 0) / dt : 0;
      next.set(key, { t: now, in: l.in_msgs || 0, out: l.out_msgs || 0 });
      const tr = document.createElement("tr");
      tr.dataset.leaf = l.name || String(l.id);
      cell(tr, l.name || "–"); cell(tr, l.account || "–");
      cell(tr, l.is_spoke ? "to hub" : "from leaf");
      cell(tr, (l.ip || "") + ":" + (l.port || 0)); cell(tr, l.rtt || "–", "num");
      cell(tr, num(inRate), "num"); cell(tr, num(outRate), "num"); cell(tr, num(l.subscriptions), "num");
      return tr;
    });
    state.leafPrev = next;
    if (!rows.length) {
      const tr = document.createElement("tr");
      cell(tr, "no leaf node links", "empty"); tr.firstChild.colSpan = 8; rows.push(tr);
    }
    $("leafs-table").tBodies[0].replaceChildren(...rows);
  }

  // Consumer details cost the server time per consumer: with many of them, fetch them less often than every
  // second (every ceil(consumers / 500) polls) and reuse the last ones in between.
  let lastConsumers = new Map();
  function consumerEvery() { return Math.max(1, Math.ceil((state.consumerCount || 0) / 500)); }
  async function fetchJsz() {
    const withConsumers = state.polls % consumerEvery() === 0;
    const jsz = await getJSON("/jsz?accounts=true&streams=true" + (withConsumers ? "&consumers=true&config=true" : ""));
    state.consumerCount = jsz.consumers || 0;
    for (const acc of jsz.account_details || []) {
      for (const st of acc.stream_detail || []) {
        const key = acc.name + "/" + st.name;
        if (withConsumers) lastConsumers.set(key, st.consumer_detail || []);
        else st.consumer_detail = lastConsumers.get(key) || [];
      }
    }
    return jsz;
  }

  async function poll() {
    try {
      const [varz, jsz, connz, accountz, leafz] = await Promise.all([
        getJSON("/varz"), fetchJsz(), getJSON("/connz?auth=true"), getJSON("/accountz"), getJSON("/leafz"),
      ]);
      state.jsAccounts = new Set((jsz.account_details || []).map((a) => a.name));
      overview(varz);
      jetstream(jsz);
      accounts(accountz, connz);
      // MQTT clients (type "mqtt" in /connz), shown when the server has an mqtt port
      $("c-mqtt").hidden = !(varz.mqtt && varz.mqtt.port);
      text($("v-mqtt"), num((connz.connections || []).filter((c) => c.type === "mqtt").length));
      leafnodes(leafz, varz.now);
      state.polls++;
      const st = $("status");
      st.className = "status ok";
      text(st, "live");
    } catch (e) {
      state.errors++;
      const st = $("status");
      st.className = "status bad";
      text(st, "server unreachable, retrying");
    } finally {
      setTimeout(poll, POLL_MS);
    }
  }
  poll();
})();
