// Hoplite live view: reads the feed (server-sent events) and draws the
// cluster. No library, no build step. Every element the view draws that
// stands for something in the cluster carries data-* attributes naming it
// (data-member, data-edge, data-reduce, data-position, ...).
"use strict";

const MAX_OBJECTS = 40, MAX_REDUCES = 20, MAX_TRANSFERS = 600, MAX_LOG = 300, MAX_SWITCHES = 200;
const SVGNS = "http://www.w3.org/2000/svg";

let S;
function reset(hub, self) {
  S = {
    hub, self,
    members: [],                 // statuses from the last state frame
    stats: {},
    failures: new Map(),         // reporting member -> [NodeFailed data]
    objects: new Map(),          // object id -> {id, size, edges: [], switches: []} (broadcast trees)
    pendingSwitch: new Map(),    // object|receiver -> switch, until its stream starts
    transfers: [],               // every edge, for the timeline
    reduces: new Map(),          // reduce id -> {tree, repaired: Map pos -> info, invalidated: Set, done}
    barriers: [],                // BarrierTookOver and BarrierDeliveryFailed entries
    barrierRows: [],             // the barriers as the hub merged them (state frame)
    log: [],
    openRuns: new Set(),         // runs of shard rebuilds whose shards the reader unfolded
    progress: new Map(),         // receiver|object -> {written, at, rate}
    skipped: 0,
  };
}
reset("", "");

// ---- helpers
const $ = (sel) => document.querySelector(sel);
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === "class") e.className = v; else if (k === "text") e.textContent = v; else e.setAttribute(k, v);
  }
  for (const k of kids) if (k !== null && k !== undefined) e.append(k);
  return e;
}
function svg(tag, attrs, ...kids) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === "text") e.textContent = v; else e.setAttribute(k, v);
  }
  for (const k of kids) if (k) e.append(k);
  return e;
}
function short(id) {
  if (!id) return "";
  const i = id.indexOf("#");
  return i < 0 ? id : id.slice(0, i);
}
// incarnation is the "#n" of a member id; an embedded member's first
// incarnation is printed without one.
function incarnation(id) { const i = (id || "").indexOf("#"); return i < 0 ? "0" : id.slice(i + 1); }
function bytes(n) {
  if (!(n >= 0)) return "?";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + u[i];
}
function rate(bps) { return bps > 0 ? (bps / 1e6).toFixed(0) + " MB/s" : "–"; }
function dur(ns) {
  if (!(ns > 0)) return "–";
  if (ns < 1e6) return (ns / 1e3).toFixed(0) + " µs";
  if (ns < 1e9) return (ns / 1e6).toFixed(1) + " ms";
  return (ns / 1e9).toFixed(2) + " s";
}
function hue(s) { let h = 0; for (const c of s) h = (h * 31 + c.charCodeAt(0)) >>> 0; return h % 360; }
function healthOf(id) {
  const m = S.members.find((m) => m.member === id);
  return m ? m.health : "";
}
function trim(arr, n) { if (arr.length > n) arr.splice(0, arr.length - n); }
function trimMap(map, n) { while (map.size > n) map.delete(map.keys().next().value); }

// ---- the feed
function entry(e) {
  const d = e.data || {};
  if (e.kind === "ShardsRebuilt") {
    // The hub publishes a run of rebuilds again as it grows: the latest
    // entry of a run stands for the earlier ones.
    const i = S.log.findIndex((x) => x.kind === "ShardsRebuilt" && (x.data || {}).run === d.run);
    if (i >= 0) S.log.splice(i, 1);
  }
  S.log.push(e); trim(S.log, MAX_LOG);
  switch (e.kind) {
    case "NodeFailed": {
      const l = S.failures.get(e.member) || [];
      l.push(d); trim(l, 20); S.failures.set(e.member, l);
      break;
    }
    case "TransferStarted": {
      const o = object(d.Object, d.Size);
      const sw = S.pendingSwitch.get(d.Object + "|" + d.Receiver);
      const edge = { object: d.Object, from: d.Sender, to: d.Receiver, offset: d.Offset, size: d.Size,
        start: e.at, end: 0, err: "", state: "streaming", failover: false };
      if (sw && sw.To === d.Sender) {
        edge.failover = true; edge.switched = sw;
        S.pendingSwitch.delete(d.Object + "|" + d.Receiver);
      }
      o.edges.push(edge); trim(o.edges, 64);
      S.transfers.push(edge); trim(S.transfers, MAX_TRANSFERS);
      break;
    }
    case "TransferEnded": {
      const o = S.objects.get(d.Object);
      if (!o) break;
      for (let i = o.edges.length - 1; i >= 0; i--) {
        const x = o.edges[i];
        if (x.from === d.Sender && x.to === d.Receiver && !x.end) {
          x.end = e.at; x.err = d.Err || "";
          if (x.state !== "failed") x.state = x.err ? "failed" : "done";
          break;
        }
      }
      break;
    }
    case "SenderSwitched": {
      const o = object(d.Object, 0);
      o.switches.push(d); trim(o.switches, MAX_SWITCHES);
      S.pendingSwitch.set(d.Object + "|" + d.Receiver, d); trimMap(S.pendingSwitch, MAX_SWITCHES);
      for (const x of o.edges) if (x.from === d.From && x.to === d.Receiver) x.state = "failed";
      break;
    }
    case "ReduceTree": {
      const r = reduce(d.Reduce);
      r.tree = d; r.done = d.Done;
      break;
    }
    case "TreeNodeReplaced": {
      const r = reduce(d.Reduce);
      r.repaired.set(d.Position, d);
      break;
    }
    case "AncestorsInvalidated": {
      const r = reduce(d.Reduce);
      for (const p of d.Positions || []) r.invalidated.add(p);
      break;
    }
    case "ReduceDone": {
      const r = S.reduces.get(d.Reduce);
      if (r) { r.result = d; }
      break;
    }
    case "BarrierTookOver":
    case "BarrierDeliveryFailed":
      S.barriers.push(e); trim(S.barriers, 100);
      break;
  }
}
function object(id, size) {
  let o = S.objects.get(id);
  if (!o) { o = { id, size, edges: [], switches: [] }; S.objects.set(id, o); trimMap(S.objects, MAX_OBJECTS); }
  if (size > 0) o.size = size;
  return o;
}
function reduce(id) {
  let r = S.reduces.get(id);
  if (!r) { r = { id, tree: null, repaired: new Map(), invalidated: new Set(), done: false }; S.reduces.set(id, r); trimMap(S.reduces, MAX_REDUCES); }
  return r;
}
function state(f) {
  S.members = f.members || [];
  S.barrierRows = f.barriers || [];
  S.stats = f.stats || {};
  // Progress and rate of every copy that moves: from the receivers' stores.
  for (const m of S.members) {
    for (const c of m.copies || []) {
      const k = m.member + "|" + c.id, p = S.progress.get(k);
      const now = m.at || f.at;
      if (p && now > p.at && c.written >= p.written) p.rate = (c.written - p.written) / ((now - p.at) / 1000);
      S.progress.set(k, { written: c.written, size: c.size, complete: c.complete, at: now, rate: p ? p.rate : 0 });
    }
  }
  trimMap(S.progress, 4096);
}

function connect() {
  const es = new EventSource("feed");
  es.addEventListener("hello", (ev) => {
    const h = JSON.parse(ev.data);
    if (h.hub !== S.hub) reset(h.hub, h.self); // another cluster, or another incarnation of this member
    $("#conn").dataset.state = "open"; $("#conn").textContent = "live";
  });
  es.addEventListener("entries", (ev) => { for (const e of JSON.parse(ev.data)) entry(e); schedule(); });
  es.addEventListener("state", (ev) => { state(JSON.parse(ev.data)); schedule(); });
  es.addEventListener("skipped", (ev) => { S.skipped += Number(ev.data) || 0; schedule(); });
  es.onerror = () => { $("#conn").dataset.state = "closed"; $("#conn").textContent = "reconnecting…"; };
}

let pending = false;
function schedule() {
  if (pending) return;
  pending = true;
  setTimeout(() => { pending = false; render(); }, 150);
}

// ---- panels
function render() {
  renderMembers(); renderBroadcasts(); renderReduces(); renderTimeline(); renderObjects(); renderBarriers(); renderLog();
  const up = S.members.filter((m) => m.health === "up").length;
  $("#summary").textContent = `${up} of ${S.members.length} members up · ${S.objects.size} broadcasts · ${S.reduces.size} reduces`;
  const st = S.stats;
  $("#stats").textContent = `feed: ${st.entries || 0}/${st.capacity || 0} entries kept, ${st.published || 0} gathered in ${st.gathers || 0} rounds, ` +
    `${st.clients || 0} clients, ${st.dropped || 0} dropped, ${st.skipped || 0} entries skipped by slow clients` +
    (S.skipped ? ` (this page skipped ${S.skipped})` : "") + (S.self ? ` · served by ${S.self}` : "");
}

// failureText says how a member learnt of a failure: a directory shard
// of its own saw the store terminate, or the failure broadcast delivered
// the notice, raised by its origin and passed on by a forwarder over the
// binomial graph.
function failureText(f) {
  // The member id as every other surface prints it: a first incarnation
  // has no "#n" suffix, so splitting it out would print "node-1 ()".
  const who = f.Node || "?";
  const by = f.DetectedBy || "";
  if (by.startsWith("revoke:")) {
    const origin = by.slice("revoke:".length);
    return `${who}: notice of ${origin || "?"}` + (f.Forwarder ? `, forwarded by ${f.Forwarder}` : ", raised here");
  }
  return `${who}: seen by ${by}`;
}

function renderMembers() {
  const body = $("#members tbody");
  body.replaceChildren(...S.members.map((m) => {
    const pct = m.capacity > 0 ? Math.min(100, (100 * m.used) / m.capacity) : 0;
    const fails = (S.failures.get(m.member) || []).map((f) => {
      const by = f.DetectedBy || "", revoke = by.startsWith("revoke:");
      return el("div", { "data-failure": f.Node, "data-detected-by": by, "data-via": revoke ? "revoke" : "shard",
        "data-origin": revoke ? by.slice("revoke:".length) : "", "data-forwarder": f.Forwarder || "", text: failureText(f) });
    });
    return el("tr", { "data-member": m.member, "data-health": m.health, "data-latency-ns": m.latency_ns || 0, "data-bandwidth": m.bandwidth || 0 },
      el("td", { title: m.member, text: short(m.member) + (m.member === S.self ? " (this page)" : "") }),
      el("td", { text: m.address || "" }),
      el("td", { text: incarnation(m.member) }),
      el("td", { class: "health", text: m.health }),
      el("td", {}, el("span", { class: "bar" }, el("i", { style: `width:${pct}%` })),
        `${bytes(m.used)} / ${bytes(m.capacity)} (${bytes(m.pinned)} pinned)`),
      el("td", { class: "latency", text: dur(m.latency_ns) }),
      el("td", { class: "bandwidth", text: rate(m.bandwidth) }),
      el("td", {}, ...fails));
  }));
}

function edgeProgress(x) {
  const p = S.progress.get(x.to + "|" + x.object);
  if (x.state === "done") return { pct: 100, rate: p ? p.rate : 0 };
  if (!p || !(p.size > 0)) return { pct: 0, rate: 0 };
  return { pct: Math.floor((100 * p.written) / p.size), rate: p.rate };
}

function renderBroadcasts() {
  const box = $("#broadcasts");
  const objs = [...S.objects.values()].filter((o) => o.edges.length).reverse();
  if (!objs.length) { box.replaceChildren(el("p", { class: "empty", text: "No transfer yet." })); return; }
  box.replaceChildren(...objs.map((o) => {
    // Layers: a sender that receives nothing (the creator) first, each
    // receiver one layer below its first sender.
    const depth = new Map(), recv = new Set(o.edges.map((x) => x.to));
    for (const x of o.edges) if (!recv.has(x.from)) depth.set(x.from, 0);
    for (let pass = 0; pass < 8; pass++)
      for (const x of o.edges) if (depth.has(x.from) && !depth.has(x.to)) depth.set(x.to, depth.get(x.from) + 1);
    for (const x of o.edges) { if (!depth.has(x.from)) depth.set(x.from, 0); if (!depth.has(x.to)) depth.set(x.to, depth.get(x.from) + 1); }
    const cols = new Map();
    for (const [n, d] of depth) { if (!cols.has(d)) cols.set(d, []); cols.get(d).push(n); }
    const pos = new Map();
    let rows = 1;
    for (const [d, ns] of cols) { ns.sort(); ns.forEach((n, i) => pos.set(n, { x: 60 + d * 170, y: 22 + i * 44 })); rows = Math.max(rows, ns.length); }
    const width = 60 + (Math.max(...cols.keys()) + 1) * 170, height = rows * 44 + 10;
    const g = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}` });
    o.edges.forEach((x, i) => {
      const a = pos.get(x.from), b = pos.get(x.to), p = edgeProgress(x);
      const off = x.failover ? 10 : 0;
      const label = x.failover ? `failover ${p.pct}%` : x.state === "failed" ? "failed" : `${p.pct}% ${p.rate ? rate(p.rate) : ""}`;
      g.append(svg("g", { class: "edge", "data-edge": "1", "data-object": o.id, "data-from": x.from, "data-to": x.to,
        "data-state": x.state, "data-failover": x.failover ? "1" : "0", "data-progress": p.pct, "data-rate": Math.round(p.rate || 0) },
        svg("title", { text: `${short(x.from)} → ${short(x.to)}` }),
        svg("line", { x1: a.x + 14, y1: a.y + off, x2: b.x - 14, y2: b.y + off }),
        svg("text", { x: (a.x + b.x) / 2 - 20, y: (a.y + b.y) / 2 + off - 4, text: label })));
    });
    for (const [n, p] of pos) {
      g.append(svg("g", { class: "node", "data-node": n, "data-health": healthOf(n) },
        svg("circle", { cx: p.x, cy: p.y, r: 12 }), svg("text", { x: p.x - 24, y: p.y + 26, text: short(n) })));
    }
    const list = el("ul", { class: "edges" }, ...o.edges.map((x) => {
      const p = edgeProgress(x);
      const sw = x.failover && x.switched ? ` — failover from ${short(x.switched.From)} at ${bytes(x.switched.Offset)}` : "";
      return el("li", { "data-object": o.id, "data-from": x.from, "data-to": x.to, "data-state": x.state, "data-failover": x.failover ? "1" : "0",
        text: `${short(x.from)} → ${short(x.to)}: ${x.state}, ${p.pct}%${p.rate ? ", " + rate(p.rate) : ""}${sw}${x.err ? " (" + x.err + ")" : ""}` });
    }));
    const sws = o.switches.map((s) => el("div", { class: "switch", "data-switch": "1", "data-receiver": s.Receiver, "data-from": s.From, "data-to": s.To,
      text: `SenderSwitched: ${short(s.Receiver)} lost ${short(s.From)}, resumed from ${short(s.To)} at ${bytes(s.Offset)}` }));
    return el("div", { class: "bcast", "data-object": o.id }, el("h3", { text: `${o.id} (${bytes(o.size)})` }), g, list, ...sws);
  }));
}

// copyOf is member's copy of object id as its last status listed it.
function copyOf(member, id) {
  if (!member || !id) return null;
  const m = S.members.find((x) => x.member === member);
  return m ? (m.copies || []).find((c) => c.id === id) || null : null;
}

// positionProgress is how far a reduce position's output got on its
// node, in percent ("" while unknown): done and ready (a leaf's output is
// its source) are whole.
function positionProgress(p) {
  if (p.State === "done" || p.State === "ready") return 100;
  if (!p.Object || p.State === "waiting" || p.State === "open") return "";
  const c = copyOf(p.Node, p.Output);
  if (!c) return p.State === "sent" ? 0 : "";
  return c.complete ? 100 : Math.floor((100 * c.written) / Math.max(1, c.size));
}

const BOX_W = 150, BOX_H = 44, COL_W = 160, ROW_H = 62;

function renderReduces() {
  const box = $("#reduces");
  const rs = [...S.reduces.values()].filter((r) => r.tree).reverse();
  if (!rs.length) { box.replaceChildren(el("p", { class: "empty", text: "No Reduce yet." })); return; }
  box.replaceChildren(...rs.map((r) => {
    const t = r.tree, ps = t.Positions || [];
    const kids = new Map();
    let root = 0;
    for (const p of ps) { if (p.Parent < 0) root = p.Position; else { if (!kids.has(p.Parent)) kids.set(p.Parent, []); kids.get(p.Parent).push(p.Position); } }
    // Generalized in-order: first child left of its parent, the rest right.
    const xy = new Map(); let col = 0, maxDepth = 0;
    const walk = (p, d) => {
      const ch = kids.get(p) || []; maxDepth = Math.max(maxDepth, d);
      if (ch.length) walk(ch[0], d + 1);
      xy.set(p, { x: 10 + col++ * COL_W, y: 10 + d * ROW_H });
      for (const c of ch.slice(1)) walk(c, d + 1);
    };
    if (ps.length) walk(root, 0);
    const width = 20 + col * COL_W, height = 20 + (maxDepth + 1) * ROW_H;
    const g = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}` });
    for (const p of ps) if (p.Parent >= 0 && xy.has(p.Parent) && xy.has(p.Position)) {
      const a = xy.get(p.Position), b = xy.get(p.Parent);
      g.append(svg("line", { class: "tree-link", x1: a.x + BOX_W / 2, y1: a.y, x2: b.x + BOX_W / 2, y2: b.y + BOX_H }));
    }
    for (const p of ps) {
      const c = xy.get(p.Position); if (!c) continue;
      const rep = r.repaired.get(p.Position), prog = positionProgress(p);
      g.append(svg("g", { class: "pos", "data-reduce": r.id, "data-position": p.Position, "data-object": p.Object, "data-node": p.Node,
        "data-output": p.Output || "", "data-progress": prog, "data-state": p.State, "data-repaired": rep ? "1" : "0",
        "data-invalidated": r.invalidated.has(p.Position) ? "1" : "0" },
        svg("title", { text: `position ${p.Position}: ${p.Object || "open"} on ${p.Node || "–"} (arrival ${p.Arrival}), ${p.State}` +
          (p.Output ? `, makes ${p.Output.replace(/[\x00-\x1f]/g, "")}` : "") }),
        svg("rect", { x: c.x, y: c.y, width: BOX_W, height: BOX_H }),
        svg("rect", { class: "progress", x: c.x + 1, y: c.y + BOX_H - 5, width: prog === "" ? 0 : ((BOX_W - 2) * prog) / 100, height: 4 }),
        svg("text", { x: c.x + 5, y: c.y + 15, text: `p${p.Position} ${p.Object || "(open)"}` }),
        svg("text", { x: c.x + 5, y: c.y + 31, text: `${short(p.Node)} ${p.State}${prog === "" ? "" : " " + prog + "%"}` })));
    }
    // The cost model beside the tree: T(d) of every degree considered,
    // the chosen one marked.
    const costs = Object.entries(t.Costs || {}).sort((a, b) => a[0] - b[0]);
    const table = costs.length ? el("table", { class: "costs" },
      el("tr", {}, el("th", { text: "d" }), el("th", { text: "T(d)" })),
      ...costs.map(([d, c]) => el("tr", { class: Number(d) === t.Degree ? "chosen" : "", "data-degree": d, "data-cost-ns": c,
        "data-chosen": Number(d) === t.Degree ? "1" : "0" }, el("td", { text: d }), el("td", { text: dur(c) }))))
      : el("p", { class: "costs empty", text: "T(d): no estimate of B yet (a chain)" });
    const repairs = el("ul", { class: "repairs" }, ...[...r.repaired.values()].map((x) =>
      el("li", { "data-repair": "1", "data-reduce": r.id, "data-position": x.Position, "data-failed": x.Failed, "data-replacement": x.Replacement,
        text: `TreeNodeReplaced: position ${x.Position} lost ${x.Failed}, ${x.Replacement ? "taken by " + x.Replacement : "waiting for an arrival"}` })),
      ...(r.invalidated.size ? [el("li", { "data-invalidated-list": [...r.invalidated].join(","), text: `AncestorsInvalidated: positions ${[...r.invalidated].join(", ")} cleared and pull again` })] : []));
    const res = r.result ? (r.result.Err ? ` — failed: ${r.result.Err}` : ` — done in ${dur(r.result.Elapsed)}, reduced ${(r.result.Reduced || []).join(", ")}`) : "";
    const knee = t.Knee ? el("div", { class: "knee", "data-knee": t.Knee, "data-num": t.Num,
      text: `Runs until the knee: ${t.Num} sources, fixed by ${t.Knee === "knee" ? "the knee in their arrivals" : t.Knee === "max_objects" ? "max_objects" : "every source arriving"}` }) : null;
    return el("div", { class: "reduce", "data-reduce": r.id, "data-done": r.done ? "1" : "0", "data-knee": t.Knee || "" },
      el("h3", { text: `${t.Target} ← ${t.Num} sources of ${bytes(t.Size)}: ${t.Shape}, degree ${t.Degree}, L ${dur(t.L)}, B ${rate(t.B)}${res}` }),
      knee, el("div", { class: "reduce-body" }, g, table), repairs);
  }));
}

function renderTimeline() {
  const g = $("#timeline");
  const ts = S.transfers;
  if (!ts.length) { g.replaceChildren(); g.setAttribute("height", 30); return; }
  const lanes = [...new Set(ts.map((x) => x.to))].sort();
  const now = Date.now();
  const t0 = Math.min(...ts.map((x) => x.start)), t1 = Math.max(now, ...ts.map((x) => x.end || now));
  const width = g.clientWidth || 1000, left = 130, lh = 18;
  const sx = (t) => left + ((t - t0) / Math.max(1, t1 - t0)) * (width - left - 10);
  const kids = [];
  lanes.forEach((l, i) => kids.push(svg("text", { class: "lane", "data-lane": l, x: 4, y: 14 + i * lh, text: short(l) })));
  for (const x of ts) {
    const i = lanes.indexOf(x.to), a = sx(x.start), b = sx(x.end || now);
    kids.push(svg("rect", { class: "t", "data-transfer": "1", "data-object": x.object, "data-from": x.from, "data-to": x.to, "data-state": x.state,
      x: a, y: 3 + i * lh, width: Math.max(2, b - a), height: lh - 5, fill: `hsl(${hue(x.object)} 60% 55%)` },
      svg("title", { text: `${x.object}: ${short(x.from)} → ${short(x.to)}, ${x.state}, ${((x.end || now) - x.start)} ms` })));
  }
  kids.push(svg("text", { x: left, y: lanes.length * lh + 14, text: `${((t1 - t0) / 1000).toFixed(1)} s shown` }));
  g.setAttribute("height", lanes.length * lh + 20);
  g.replaceChildren(...kids);
}

function renderObjects() {
  const objs = new Map();
  for (const m of S.members) for (const c of m.copies || []) {
    if (!objs.has(c.id)) objs.set(c.id, { id: c.id, size: c.size, copies: [] });
    objs.get(c.id).copies.push({ member: m.member, c });
  }
  const rows = [...objs.values()].sort((a, b) => a.id.localeCompare(b.id)).slice(0, 200);
  $("#objects tbody").replaceChildren(...rows.map((o) => el("tr", { "data-object": o.id },
    el("td", { text: o.id.replace(/[\x00-\x1f]/g, "") }), el("td", { text: bytes(o.size) }),
    el("td", {}, ...o.copies.map(({ member, c }) => {
      const pct = c.complete ? 100 : Math.floor((100 * c.written) / Math.max(1, c.size));
      return el("span", { class: "copy", "data-member": member, "data-complete": c.complete ? "1" : "0", "data-progress": pct,
        "data-written": c.written, text: `${short(member)}: ${c.complete ? "complete" : pct + "%"}${c.pinned ? " (pinned)" : ""}  ` });
    })))));
}

function renderBarriers() {
  const box = $("#barriers");
  // One row per barrier as the hub merged the members' reports: the
  // acting primary's, with the replicas of failed members down and no
  // longer primary (liveview.BarrierView).
  const bs = S.barrierRows;
  const kids = [];
  if (bs.length) {
    kids.push(el("table", { id: "barrier-table" },
      el("tr", {}, ...["barrier", "kind", "entered", "passed", "throttled", "queued", "semaphore", "fired", "replicas (★ primary)"].map((h) => el("th", { text: h }))),
      ...bs.map((b) => el("tr", { "data-barrier": b.Barrier, "data-kind": b.Kind, "data-entered": b.Entered, "data-passed": b.Passed,
        "data-throttled": b.Throttled, "data-queued": b.Queued, "data-holders": b.Holders, "data-limit": b.Limit, "data-epoch": b.Epoch,
        "data-closed": b.Closed ? "1" : "0", "data-acting": b.ActingMember || "", "data-pending": b.TakeoverPending ? "1" : "0" },
        el("td", { text: b.Barrier + (b.Closed ? " (closed)" : "") }),
        el("td", { text: `${b.Kind}, max ${b.Max}` }),
        el("td", { text: b.Entered }), el("td", { text: b.Passed }), el("td", { text: b.Throttled }), el("td", { text: b.Queued }),
        el("td", { class: "semaphore", text: b.Kind === "semaphore" ? `${b.Holders} of ${b.Limit} held` : "–" }),
        el("td", { text: b.Fired ? b.Reason : "no" }),
        el("td", {}, ...(b.Replicas || []).map((x) => {
          const failed = x.Down || healthOf(x.Member) === "failed";
          return el("span", { class: "replica", "data-replica": x.Member, "data-primary": x.Primary ? "1" : "0", "data-down": failed ? "1" : "0",
            text: `${x.Primary ? "★" : ""}${short(x.Member)}${failed ? " (failed)" : ""}  ` });
        }), b.TakeoverPending ? el("span", { class: "pending", text: "takeover pending " }) : null,
        b.Epoch ? ` epoch ${b.Epoch}` : "")))));
  }
  if (S.barriers.length) {
    kids.push(el("ul", { class: "barrier-events" }, ...S.barriers.slice().reverse().map((e) => {
      const d = e.data;
      return el("li", { "data-kind": e.kind, text: e.kind === "BarrierTookOver"
        ? `${d.Barrier}: ${d.Manager} on ${short(d.Member)} took over (epoch ${d.Epoch})`
        : `${d.Barrier}: delivery to ${d.Label}@${short(d.Host)} failed: ${d.Reason}` });
    })));
  }
  if (!kids.length) kids.push(el("p", { class: "empty", text: "No barrier yet." }));
  box.replaceChildren(...kids);
}

function describe(e) {
  const d = e.data || {};
  switch (e.kind) {
    case "NodeFailed": return `${short(d.Node)} failed: ${failureText(d).replace(/^[^:]*: /, "")}`;
    case "BarrierTookOver": return `${d.Barrier}: ${short(d.Member)} took over as primary (epoch ${d.Epoch})`;
    case "BarrierDeliveryFailed": return `${d.Barrier}: delivery to ${d.Label}@${short(d.Host)} failed: ${d.Reason}`;
    case "AllReduceReplanned": return `${d.Reduce}: replanned over ${d.Num} sources (${short(d.Node) || "a source"} lost ${(d.Lost || []).join(", ")})`;
    case "SenderSwitched": return `${d.Object}: ${short(d.Receiver)} switched ${short(d.From)} → ${short(d.To)} at ${bytes(d.Offset)}`;
    case "TreeNodeReplaced": return `${d.Reduce}: position ${d.Position} lost ${d.Failed} → ${d.Replacement || "(waiting)"}`;
    case "AncestorsInvalidated": return `${d.Reduce}: positions ${(d.Positions || []).join(", ")} invalidated`;
    case "TransferStarted": return `${d.Object}: ${short(d.Sender)} → ${short(d.Receiver)} from ${bytes(d.Offset)}`;
    case "TransferEnded": return `${d.Object}: ${short(d.Sender)} → ${short(d.Receiver)} ${d.Err ? "failed: " + d.Err : "done"}`;
    case "ReduceTree": return `${d.Reduce}: tree ${(d.Positions || []).filter((p) => p.Object).length}/${d.Num} placed`;
    case "ReduceDone": return `${d.Reduce}: ${d.Err ? "failed: " + d.Err : "done in " + dur(d.Elapsed)}`;
    case "ShardsRebuilt": {
      // A run of directory shards rebuilt after the same failures (the
      // hub folds them: liveview.ShardsRebuilt).
      const after = (d.failed || []).length ? ` after ${d.failed.map(short).join(", ")} failed` : " (no failure before them: restarted)";
      return `${d.count} shard${d.count === 1 ? "" : "s"} rebuilt${after}: on ` +
        (d.hosts || []).map((h) => `${short(h.host)} (${h.count})`).join(", ");
    }
    default: return JSON.stringify(d);
  }
}
// rebuiltShards is a run's detail: each host's shards, folded (and
// unfolded again at each render if the reader unfolded it).
function rebuiltShards(d) {
  const det = el("details", { open: S.openRuns.has(d.run) ? "" : null }, el("summary", { text: "shards" }), ...(d.hosts || []).map((h) => {
    const more = h.count - (h.shards || []).length;
    return el("div", { "data-host": h.host, "data-count": h.count }, `${short(h.host)}: `,
      ...(h.shards || []).map((s) => el("span", { class: "shard", "data-shard": s, text: s + " " })), more > 0 ? `and ${more} more` : null);
  }));
  det.addEventListener("toggle", () => {
    if (det.open) { S.openRuns.add(d.run); if (S.openRuns.size > 64) S.openRuns.delete(S.openRuns.values().next().value); }
    else S.openRuns.delete(d.run);
  });
  return det;
}
function renderLog() {
  const items = S.log.filter((e) => e.kind !== "ReduceTree").slice(-200).reverse();
  $("#events").replaceChildren(...items.map((e) => {
    const run = e.kind === "ShardsRebuilt" ? e.data || {} : null;
    return el("li", { "data-kind": e.kind, ...(run ? { "data-count": run.count, "data-failed": JSON.stringify(run.failed || []) } : {}) },
      `${new Date(e.at).toISOString().slice(11, 23)} ${short(e.member)} ${e.kind}: ${describe(e)}`, run ? rebuiltShards(run) : null);
  }));
}

connect();
setInterval(schedule, 1000); // streams' bars grow between events
