// The page of pyaisvc serve (pyaisvc/serve/routes/aisvc.py serves it at /).
//
// The chat posts the conversation to /v1/chat/completions with stream: true
// and greedy decoding, and shows the reply as its Server-Sent Events come.
// With "alternatives" ticked it asks for logprobs (top 5) too, and each
// token of the reply becomes a span whose tooltip lists the 5 likeliest
// tokens at that step with their probabilities.
// The table follows /v1/aisvc/table/stream: one snapshot of the kernel's
// request table (ai_table in the guest) five times a second, drawn as the
// scheduling policy, the 16 slots coloured by state (each with its tenant
// and priority), the FIFO, the batch, the ids served per tenant, and the
// TTFT / TPOT of the requests that ended last. "Fire" asks the server for a burst of N
// completions at once (/v1/aisvc/burst), so that the queue fills and drains.
//
// A server started with --api-key answers 401 without the key: the page then
// asks for it once and keeps it in this tab (sessionStorage), sending it as
// "Authorization: Bearer KEY", and to the table's stream as ?api_key=KEY
// (an EventSource cannot set a header).
"use strict";

const $ = (id) => document.getElementById(id);
const conversation = []; // {role, content} of the turns so far
let modelName = "";
let sending = false;

// ---------------------------------------------------------------- HTTP

const KEY_ITEM = "aisvc-api-key";

// fetch(path, init) with the API key this tab holds; on a 401 it asks the
// user for the key once, keeps it and tries again.
async function api(path, init = {}) {
  for (let asked = false; ; asked = true) {
    const key = sessionStorage.getItem(KEY_ITEM);
    const headers = { ...(init.headers || {}) };
    if (key) headers.Authorization = "Bearer " + key;
    const resp = await fetch(path, { ...init, headers });
    if (resp.status !== 401 || asked) return resp;
    const given = window.prompt("This server needs an API key (ask whoever runs it):");
    if (!given) return resp;
    sessionStorage.setItem(KEY_ITEM, given.trim());
  }
}

// The server's error message of a failed response (OpenAI's error shape).
async function errorText(resp) {
  try {
    const body = await resp.json();
    if (body && body.error && body.error.message) return body.error.message;
  } catch (e) {
    // not JSON: the status says it
  }
  return `HTTP ${resp.status}`;
}

// Reads the Server-Sent Events of resp's body, calling onData with each
// event's JSON until "[DONE]" or the end of the body.
async function readEvents(resp, onData) {
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const event = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data: ")) continue;
        const data = line.slice(6);
        if (data === "[DONE]") return;
        onData(JSON.parse(data));
      }
    }
  }
}

// ---------------------------------------------------------------- the chat

function addMessage(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  div.textContent = text;
  $("messages").appendChild(div);
  $("messages").scrollTop = $("messages").scrollHeight;
  return div;
}

// A token of the reply with its alternatives (a logprobs.content entry) as
// a span: the token's text, its tooltip the likeliest tokens and their
// probabilities.
function tokenSpan(entry) {
  const span = document.createElement("span");
  span.className = "tok";
  span.textContent = entry.token;
  span.title = entry.top_logprobs
    .map((t) => `${JSON.stringify(t.token)}  ${(100 * Math.exp(t.logprob)).toFixed(1)}%`)
    .join("\n");
  return span;
}

function showError(id, text) {
  $(id).textContent = text;
  $(id).hidden = !text;
}

// Sends the typed message with the conversation so far; streams the reply.
async function send() {
  const text = $("prompt").value.trim();
  if (!text || sending) return;
  sending = true;
  $("send").disabled = true;
  showError("chat-error", "");
  $("prompt").value = "";
  addMessage("user", text);
  conversation.push({ role: "user", content: text });
  const reply = addMessage("assistant", "");
  reply.classList.add("streaming");
  let content = "";
  const alternatives = $("alternatives").checked; // then the tokens come as spans
  try {
    const resp = await api("/v1/chat/completions", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({
        model: modelName,
        messages: conversation,
        stream: true,
        temperature: 0,
        max_tokens: Number($("max-tokens").value),
        ...(alternatives ? { logprobs: true, top_logprobs: 5 } : {}),
      }),
    });
    if (!resp.ok) throw new Error(await errorText(resp));
    await readEvents(resp, (chunk) => {
      if (chunk.error) throw new Error(chunk.error.message);
      const choice = chunk.choices && chunk.choices[0];
      const delta = choice && choice.delta;
      if (delta && delta.content) {
        content += delta.content;
        const entries = (choice.logprobs && choice.logprobs.content) || [];
        if (entries.map((e) => e.token).join("") === delta.content) {
          for (const entry of entries) reply.appendChild(tokenSpan(entry));
        } else {
          reply.appendChild(document.createTextNode(delta.content));
        }
        $("messages").scrollTop = $("messages").scrollHeight;
      }
    });
    conversation.push({ role: "assistant", content });
    reply.dataset.state = "done";
  } catch (e) {
    conversation.pop(); // the message got no reply: it is not part of the conversation
    reply.dataset.state = "failed";
    showError("chat-error", "error: " + e.message);
  } finally {
    reply.classList.remove("streaming");
    sending = false;
    $("send").disabled = false;
  }
}

// ---------------------------------------------------------------- the table

// The 16 slot boxes, built once the first snapshot says how many.
function buildSlots(n) {
  const box = $("slots");
  for (let i = box.children.length; i < n; i++) {
    const el = document.createElement("div");
    el.className = "slot";
    el.id = "slot-" + i;
    el.dataset.state = "FREE";
    el.innerHTML =
      `<span class="num">${i}</span><span class="state"></span>` +
      `<div class="owner"></div><div class="bar"><div class="fill"></div></div>` +
      `<div class="progress"></div>`;
    box.appendChild(el);
  }
}

function ms(v) {
  return v === null || v === undefined ? "-" : `${Math.round(v)} ms`;
}

// One slot box from its part of the snapshot.
function renderSlot(s, inBatch, fifoPos) {
  const el = $("slot-" + s.slot);
  const free = s.state === "FREE";
  el.dataset.state = s.shown;
  el.dataset.rid = s.rid || (s.ended ? s.ended.rid : 0);
  el.classList.toggle("in-batch", inBatch);
  let label = s.shown === "FREE" ? "" : s.shown;
  if (fifoPos >= 0) label += ` #${fifoPos + 1}`;
  el.querySelector(".state").textContent = label;
  el.querySelector(".owner").textContent = free
    ? ""
    : (s.owner ? s.tenant_name : "orphan") + (s.priority ? ` \u00b7 prio ${s.priority}` : "");
  let done = 0;
  let progress = "";
  if (!free) {
    done = s.predict ? s.tokens / s.predict : 0;
    progress = `${s.tokens}/${s.predict} ids` + (s.cached ? `, ${s.cached} cached` : "");
  } else if (s.ended) {
    done = 1;
    progress = `${s.ended.gen} ids`;
  }
  el.querySelector(".fill").style.width = `${Math.round(100 * done)}%`;
  el.querySelector(".progress").textContent = progress;
  el.title = free
    ? `slot ${s.slot}: free`
    : `slot ${s.slot}: ${s.shown}, owner pid ${s.owner}, tenant ${s.tenant_name} ` +
      `(id ${s.tenant}), priority ${s.priority}, paused ${s.pauses} times; prompt ${s.prompt} ids ` +
      `(${s.cached} from the KV cache), ` +
      `${s.tokens} of ${s.predict} generated; age ${ms(s.age_ms)}, queued ${ms(s.queued_ms)}, ` +
      `TTFT ${ms(s.ttft_ms)}`;
}

// The TTFT and TPOT of the recent requests, two bars each, oldest left.
function drawChart(recent) {
  const c = $("chart");
  const g = c.getContext("2d");
  const w = c.width;
  const h = c.height;
  const pad = 24;
  g.clearRect(0, 0, w, h);
  g.fillStyle = "#555";
  g.font = "12px system-ui, sans-serif";
  if (recent.length === 0) {
    g.fillText("no request has ended yet", pad, h / 2);
    return;
  }
  const top = Math.max(1, ...recent.map((r) => Math.max(r.ttft_ms || 0, r.tpot_ms || 0)));
  const step = (w - 2 * pad) / recent.length;
  const bar = Math.min(14, Math.max(2, step / 2 - 2));
  recent.forEach((r, k) => {
    const x = pad + k * step;
    const pairs = [
      [r.ttft_ms, "#2563eb"],
      [r.tpot_ms, "#f59e0b"],
    ];
    pairs.forEach(([v, colour], j) => {
      const bh = ((v || 0) / top) * (h - 2 * pad);
      g.fillStyle = colour;
      g.fillRect(x + j * (bar + 1), h - pad - bh, bar, bh);
    });
  });
  g.fillStyle = "#555";
  g.fillText(`${Math.round(top)} ms`, 2, pad - 8);
  g.fillText("older", pad, h - 6);
  g.fillText("newer", w - pad - 34, h - 6);
  g.strokeStyle = "#999";
  g.beginPath();
  g.moveTo(pad, h - pad);
  g.lineTo(w - pad, h - pad);
  g.stroke();
}

// The ids served per tenant, most generated first, each with a bar of its
// share.
function renderTenants(rows) {
  const body = $("tenants").querySelector("tbody");
  body.replaceChildren(
    ...rows.map((r) => {
      const tr = document.createElement("tr");
      tr.dataset.user = r.user;
      const cells = [r.user, r.tenant === null ? "-" : r.tenant, r.prompt, r.generated];
      for (const v of cells) {
        const td = document.createElement("td");
        td.textContent = String(v);
        tr.appendChild(td);
      }
      const share = document.createElement("td");
      const bar = document.createElement("span");
      bar.className = "share";
      bar.style.width = `${Math.round(60 * r.share)}px`;
      share.append(bar, `${Math.round(100 * r.share)}%`);
      tr.appendChild(share);
      return tr;
    }),
  );
}

function render(snap) {
  const status = $("status");
  if (snap.down) {
    status.textContent = "the guest is down: " + snap.down;
    status.className = "status down";
    return;
  }
  status.textContent = `live: kernel time ${snap.time_s.toFixed(1)} s`;
  status.className = "status";
  buildSlots(snap.nslot);
  const paused = snap.slots.filter((s) => s.paused).length;
  $("policy").textContent =
    `policy ${snap.policy}, ${snap.chunk} positions a step` +
    (snap.prefill < snap.chunk ? `, ${snap.prefill} for prompts beside a decoder` : "") +
    (paused ? `; ${paused} paused` : "");
  $("policy").dataset.policy = snap.policy;
  $("summary").textContent =
    `worker pid ${snap.worker_pid}, ${snap.completed} completed; ` +
    `slots ${snap.used}/${snap.nslot} used, queue ${snap.fifo.length}, batch ${snap.batch.length}`;
  for (const s of snap.slots) renderSlot(s, snap.batch.includes(s.slot), snap.fifo.indexOf(s.slot));
  const names = (list) => list.map((i) => "#" + i);
  $("fifo").textContent = snap.fifo.length ? names(snap.fifo).join(" \u2192 ") : "empty";
  $("batch").textContent = snap.batch.length ? names(snap.batch).join(", ") : "empty";
  $("batch").dataset.size = snap.batch.length;
  renderTenants(snap.tenants);
  drawChart(snap.recent);
}

function follow() {
  const key = sessionStorage.getItem(KEY_ITEM);
  const query = key ? "?api_key=" + encodeURIComponent(key) : "";
  const events = new EventSource("/v1/aisvc/table/stream" + query);
  events.onmessage = (ev) => render(JSON.parse(ev.data));
  events.onerror = () => {
    $("status").textContent = "reconnecting to the server\u2026";
    $("status").className = "status down";
  };
}

// ---------------------------------------------------------------- the burst

async function burst() {
  const most = Number($("burst-n").max) || 1;
  const n = Math.min(most, Math.max(1, Number($("burst-n").value) || 1));
  const prompt = $("burst-prompt").value || "Once upon a time";
  const status = $("burst-status");
  status.dataset.done = "0";
  status.textContent = `${n} requests fired\u2026`;
  $("burst").disabled = true;
  try {
    const resp = await api("/v1/aisvc/burst", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ n, prompt, max_tokens: 16 }),
    });
    if (!resp.ok) throw new Error(await errorText(resp));
    const out = await resp.json();
    status.textContent =
      `${out.done}/${out.n} done` + (out.failed ? `, ${out.failed} failed (${out.errors[0]})` : "");
  } catch (e) {
    status.textContent = "the burst failed: " + e.message;
  } finally {
    status.dataset.done = "1";
    $("burst").disabled = false;
  }
}

// ---------------------------------------------------------------- start

async function start() {
  $("send-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    send();
  });
  $("prompt").addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey) {
      ev.preventDefault();
      send();
    }
  });
  $("burst-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    burst();
  });
  try {
    const resp = await api("/v1/models"); // asks for the key if the server needs one
    if (!resp.ok) throw new Error(await errorText(resp));
    modelName = (await resp.json()).data[0].id;
    $("model").textContent = modelName;
    // the kernel's limit on generated ids, as the server reads it from aisvc.h
    const limits = await api("/v1/aisvc/limits");
    if (!limits.ok) throw new Error(await errorText(limits));
    const lim = await limits.json();
    $("max-tokens").max = lim.max_predict;
    $("burst-n").max = lim.max_burst;
  } catch (e) {
    showError("chat-error", "cannot reach the server: " + e.message);
  }
  follow();
}

start();
