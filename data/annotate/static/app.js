// proofcheck annotate: the single page. No external network; KaTeX is served from /static/katex.
// All record text is untrusted: it is inserted with textContent, then KaTeX renders the maths.
"use strict";

const $ = (id) => document.getElementById(id);
const S = {
  name: localStorage.getItem("pc-annotator") || "",
  token: localStorage.getItem("pc-token") || "",
  authRequired: false,
  queue: [],        // [{index, proof_id, status, ...}]
  index: 0,
  item: null,       // the item shown
  drafts: {},       // proof_id -> {fatal, rec:Set, comment, remark, reason}
  cursor: 0,
};

// ---------- HTTP ----------
async function api(method, path, body) {
  const headers = { "X-Annotator": S.name };
  if (S.token) headers["Authorization"] = "Bearer " + S.token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  let data = null;
  try { data = await res.json(); } catch (e) { data = null; }
  if (!res.ok) {
    const msg = (data && data.error && data.error.message) || `HTTP ${res.status}`;
    const err = new Error(msg);
    err.status = res.status;
    throw err;
  }
  return data;
}

// ---------- maths ----------
function setMath(el, text) {
  el.textContent = text == null ? "" : String(text);
  el.classList.remove("raw-latex");
  if (typeof window.renderMathInElement !== "function") { el.classList.add("raw-latex"); return; }
  try {
    window.renderMathInElement(el, {
      delimiters: [
        { left: "$$", right: "$$", display: true }, { left: "\\[", right: "\\]", display: true },
        { left: "\\(", right: "\\)", display: false }, { left: "$", right: "$", display: false },
      ],
      throwOnError: false, errorColor: "#b00020",   // a bad formula shows its raw source in red
    });
  } catch (e) {                                     // anything else: fall back to the raw LaTeX
    el.textContent = text == null ? "" : String(text);
    el.classList.add("raw-latex");
  }
}

// ---------- messages ----------
function say(text, kind) { const m = $("message"); m.textContent = text; m.className = kind || ""; }

// ---------- login ----------
async function showLogin(msg) {
  $("work").hidden = true;
  $("login").hidden = false;
  $("login-token-row").hidden = !S.authRequired;
  $("login-name").value = S.name;
  $("login-msg").textContent = msg || "";
  $("login-name").focus();
}

async function login() {
  S.name = $("login-name").value.trim();
  S.token = S.authRequired ? $("login-token").value.trim() : "";
  try {
    await loadQueue(true);
  } catch (e) {
    await showLogin(e.message);
    return;
  }
  localStorage.setItem("pc-annotator", S.name);
  if (S.token) localStorage.setItem("pc-token", S.token); else localStorage.removeItem("pc-token");
  $("login").hidden = true;
  $("work").hidden = false;
  $("who").textContent = S.name;
  await show(S.index);
}

// ---------- queue ----------
async function loadQueue(resume) {
  const q = await api("GET", "/api/queue");
  S.queue = q.items;
  if (resume) S.index = q.resume_index;
  renderProgress(q.progress);
  renderQueueSelect();
}

function renderProgress(p) { $("progress").textContent = `${p.done} / ${p.total} done`; }

function renderQueueSelect() {
  const sel = $("queue");
  sel.textContent = "";
  for (const it of S.queue) {
    const o = document.createElement("option");
    const mark = it.status === "annotated" ? "✓" : it.status === "broken" ? "⚑" : S.drafts[it.proof_id] ? "•" : " ";
    o.value = String(it.index);
    o.textContent = `${mark} ${it.index + 1}. ${it.proof_id}`;
    sel.appendChild(o);
  }
  sel.value = String(S.index);
}

// ---------- one item ----------
function draftFrom(mine) {
  const d = { fatal: -1, rec: new Set(), comment: "", remark: "", reason: "", brokenReason: "", dirty: false };
  if (mine && mine.kind === "annotated" && mine.annotation) {
    const a = mine.annotation;
    d.fatal = a.first_fatal_error_step;
    for (const s of a.recoverable_error_steps) if (s >= 0) d.rec.add(s);
    d.comment = a.reviewer_comment || ""; d.remark = a.remark || ""; d.reason = a.first_error_reason || "";
  } else if (mine && mine.kind === "broken") {
    d.brokenReason = mine.reason || "";
  }
  return d;
}

function draft() { return S.drafts[S.item.proof_id]; }

async function show(index) {
  if (!S.queue.length) return;
  S.index = Math.max(0, Math.min(index, S.queue.length - 1));
  const pid = S.queue[S.index].proof_id;
  let item;
  try { item = await api("GET", "/api/items/" + encodeURIComponent(pid)); }
  catch (e) { if (e.status === 401) return showLogin(e.message); say(e.message, "error"); return; }
  S.item = item;
  if (!S.drafts[pid]) S.drafts[pid] = draftFrom(item.mine);
  S.cursor = 0;
  say("", "");
  $("queue").value = String(S.index);
  const meta = [`${item.index + 1} of ${item.total}`, `proof ${item.proof_id}`, `problem ${item.problem_id}`,
    item.domain === "qe" ? "QE" : "UG", item.subject, item.policy ? `policy ${item.policy}` : "",
    item.n_annotators ? `${item.n_annotators} annotator(s) done` : ""].filter(Boolean);
  $("meta").textContent = meta.join(" · ");
  setMath($("problem"), item.problem);
  $("ref-box").hidden = !item.reference_solution;
  $("ref-box").open = false;
  setMath($("reference"), item.reference_solution || "");
  renderPasses(item);
  renderSteps();
  const d = draft();
  $("comment").value = d.comment; $("remark").value = d.remark; $("reason").value = d.reason;
  $("broken-reason").value = d.brokenReason;
  $("broken-box").open = item.mine && item.mine.kind === "broken";
  $("saved-at").textContent = item.mine ? `saved ${item.mine.kind === "broken" ? "as broken " : ""}at ${item.mine.updated_at}` : "not saved yet";
  window.scrollTo(0, 0);
}

function verdictOf(pass) {
  if (pass && typeof pass === "object") {
    if (typeof pass.verdict === "string") {          // `proofcheck data select`: {verifier, status, verdict, ...}
      const k = pass.first_error_step;
      return pass.verdict + (pass.verdict === "reject" && typeof k === "number" && k >= 0 ? ` (step ${k})` : "");
    }
    if (pass.status && pass.status !== "valid") return pass.status + (pass.invalid_reason ? `: ${pass.invalid_reason}` : "");
    if (typeof pass.accept === "boolean") return pass.accept ? "accept" : "reject";
    if (pass.valid === false) return "invalid";
    const p = pass.parsed || pass;
    if (typeof p.first_error_step === "number") return p.first_error_step < 0 ? "accept" : `reject (step ${p.first_error_step})`;
  }
  return "";
}

function fmtValue(v) {
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toFixed(3);
  if (v && typeof v === "object") {
    return Object.entries(v).map(([k, x]) => x && typeof x === "object" ? `${k}: {${fmtValue(x)}}` : `${k} ${fmtValue(x)}`).join(", ");
  }
  return String(v);
}

function renderPasses(item) {
  const box = $("passes"), dl = $("selection");
  box.textContent = ""; dl.textContent = "";
  const passes = item.verifier_passes || [];
  const stats = Object.entries(item.selection || {});
  $("passes-box").hidden = !passes.length && !stats.length;
  $("passes-box").open = false;
  $("passes-summary").textContent = `Auxiliary verifier passes (${passes.length})`;
  for (const [k, v] of stats) {
    const dt = document.createElement("dt"); dt.textContent = k;
    const dd = document.createElement("dd"); dd.textContent = fmtValue(v);
    dl.append(dt, dd);
  }
  passes.forEach((p, i) => {
    const div = document.createElement("div"); div.className = "pass";
    const head = document.createElement("div");
    const model = p && typeof p === "object" ? (p.model || p.verifier || "") : "";
    head.textContent = [`pass ${i}`, model, verdictOf(p)].filter(Boolean).join(" · ");
    const pre = document.createElement("pre");
    pre.textContent = p && typeof p === "object" && typeof p.text === "string" ? p.text : JSON.stringify(p, null, 2);
    div.append(head, pre);
    box.appendChild(div);
  });
}

function renderSteps() {
  const ol = $("steps"), d = draft();
  ol.textContent = "";
  S.item.steps.forEach((text, i) => {
    const li = document.createElement("li");
    li.className = "step"; li.dataset.step = String(i); li.id = `step-${i}`;
    const label = document.createElement("span"); label.className = "step-label"; label.textContent = `Step ${i}`;
    const body = document.createElement("div"); body.className = "step-text";
    setMath(body, text);
    const btns = document.createElement("span");
    const f = document.createElement("button"); f.className = "mark f"; f.textContent = "F"; f.title = "first fatal error (f)";
    const r = document.createElement("button"); r.className = "mark r"; r.textContent = "R"; r.title = "recoverable error (r)";
    f.addEventListener("click", (ev) => { ev.stopPropagation(); S.cursor = i; toggleFatal(i); });
    r.addEventListener("click", (ev) => { ev.stopPropagation(); S.cursor = i; toggleRec(i); });
    btns.append(f, " ", r);
    li.append(label, body, btns);
    li.addEventListener("click", () => { S.cursor = i; paintSteps(); });
    ol.appendChild(li);
  });
  paintSteps();
}

function paintSteps() {
  const d = draft();
  document.querySelectorAll("#steps .step").forEach((li) => {
    const i = Number(li.dataset.step);
    li.classList.toggle("fatal", d.fatal === i);
    li.classList.toggle("recoverable", d.rec.has(i));
    li.classList.toggle("cursor", S.cursor === i);
    li.querySelector(".mark.f").classList.toggle("on", d.fatal === i);
    const r = li.querySelector(".mark.r");
    r.classList.toggle("on", d.rec.has(i));
    r.disabled = d.fatal >= 0 && i >= d.fatal;
  });
  const v = $("verdict");
  const rec = [...d.rec].sort((a, b) => a - b);
  if (d.fatal < 0 && !rec.length) { v.textContent = "Verdict: correct (no error marked)"; v.className = "correct"; }
  else {
    const parts = [];
    if (d.fatal >= 0) parts.push(`first fatal error at step ${d.fatal}`);
    if (rec.length) parts.push(`recoverable at step${rec.length > 1 ? "s" : ""} ${rec.join(", ")}`);
    v.textContent = "Verdict: flawed — " + parts.join("; ");
    v.className = "flawed";
  }
}

function touch() { draft().dirty = true; renderQueueSelect(); }

function toggleFatal(i) {
  const d = draft();
  if (d.fatal === i) d.fatal = -1;
  else {
    d.fatal = i;
    const dropped = [...d.rec].filter((s) => s >= i);
    dropped.forEach((s) => d.rec.delete(s));
    if (dropped.length) say(`Removed recoverable mark(s) at step ${dropped.join(", ")}: only errors before the fatal one are recorded.`, "");
  }
  touch(); paintSteps();
}

function toggleRec(i) {
  const d = draft();
  if (d.rec.has(i)) d.rec.delete(i);
  else if (d.fatal >= 0 && i >= d.fatal) { say(`Step ${i} is not before the fatal step ${d.fatal}: mark recoverable errors only before it.`, "error"); return; }
  else d.rec.add(i);
  touch(); paintSteps();
}

function clearStep(i) { const d = draft(); if (d.fatal === i) d.fatal = -1; d.rec.delete(i); touch(); paintSteps(); }

// ---------- saving ----------
async function save() {
  const d = draft();
  const rec = [...d.rec].sort((a, b) => a - b);
  const body = {
    first_fatal_error_step: d.fatal, recoverable_error_steps: rec.length ? rec : [-1],
    reviewer_comment: $("comment").value, remark: $("remark").value, first_error_reason: $("reason").value,
  };
  await submit("/api/annotations/", body, "Saved");
}

async function reportBroken() {
  await submit("/api/broken/", { reason: $("broken-reason").value }, "Reported as broken");
}

async function submit(prefix, body, okText) {
  const pid = S.item.proof_id;
  $("save").disabled = $("report").disabled = true;
  try {
    const res = await api("PUT", prefix + encodeURIComponent(pid), body);
    renderProgress(res.progress);
    S.queue[S.index].status = prefix.includes("broken") ? "broken" : "annotated";
    draft().dirty = false;
    renderQueueSelect();
    $("saved-at").textContent = `saved at ${res.record.updated_at}`;
    say(`${okText}: ${pid}. Press n for the next proof.`, "ok");
  } catch (e) {
    if (e.status === 401) return showLogin(e.message);
    say(`Not saved: ${e.message}`, "error");
  } finally {
    $("save").disabled = $("report").disabled = false;
  }
}

// ---------- keys ----------
function onKey(ev) {
  const typing = ["TEXTAREA", "INPUT", "SELECT"].includes(document.activeElement && document.activeElement.tagName);
  if ((ev.ctrlKey || ev.metaKey) && ev.key === "Enter") { ev.preventDefault(); if (!$("work").hidden) save(); return; }
  if (typing) { if (ev.key === "Escape") document.activeElement.blur(); return; }
  if ($("work").hidden || !S.item || ev.ctrlKey || ev.metaKey || ev.altKey) return;
  const n = S.item.steps.length;
  const k = ev.key;
  if (k === "j" || k === "ArrowDown") { S.cursor = Math.min(n - 1, S.cursor + 1); paintSteps(); $(`step-${S.cursor}`).scrollIntoView({ block: "nearest" }); }
  else if (k === "k" || k === "ArrowUp") { S.cursor = Math.max(0, S.cursor - 1); paintSteps(); $(`step-${S.cursor}`).scrollIntoView({ block: "nearest" }); }
  else if (k === "f") toggleFatal(S.cursor);
  else if (k === "r") toggleRec(S.cursor);
  else if (k === "x") clearStep(S.cursor);
  else if (k === "n" || k === "ArrowRight") show(S.index + 1);
  else if (k === "p" || k === "ArrowLeft") show(S.index - 1);
  else if (k === "c") $("comment").focus();
  else return;
  ev.preventDefault();
}

// ---------- start ----------
function bindInputs() {
  const field = (id, key) => $(id).addEventListener("input", () => { if (S.item) { draft()[key] = $(id).value; draft().dirty = true; } });
  field("comment", "comment"); field("remark", "remark"); field("reason", "reason"); field("broken-reason", "brokenReason");
  $("save").addEventListener("click", save);
  $("report").addEventListener("click", reportBroken);
  $("next").addEventListener("click", () => show(S.index + 1));
  $("prev").addEventListener("click", () => show(S.index - 1));
  $("queue").addEventListener("change", (ev) => { show(Number(ev.target.value)); ev.target.blur(); });
  $("login-go").addEventListener("click", login);
  $("login-name").addEventListener("keydown", (ev) => { if (ev.key === "Enter") login(); });
  $("login-token").addEventListener("keydown", (ev) => { if (ev.key === "Enter") login(); });
  $("logout").addEventListener("click", () => { localStorage.removeItem("pc-token"); S.token = ""; S.drafts = {}; showLogin(""); });
  document.addEventListener("keydown", onKey);
}

async function start() {
  bindInputs();
  try {
    const cfg = await (await fetch("/api/config")).json();
    S.authRequired = cfg.auth_required;
    document.title = `proofcheck annotate · ${cfg.total} proofs`;
  } catch (e) { say("Cannot reach the annotation server: " + e.message, "error"); return; }
  if (!S.name || (S.authRequired && !S.token)) return showLogin("");
  $("login-name").value = S.name; $("login-token").value = S.token;
  await login();
}

window.addEventListener("DOMContentLoaded", start);
