// The DeepSearcher chat page. Plain script, no build step, no dependencies. Every text that
// comes from documents or the server goes into the page as textContent, never as markup:
// documents are untrusted data.
"use strict";

const KEY_STORE = "deepsearcher.apiKey";
const SOURCES_HEADING = "\n\nSources:\n";

const $ = (id) => document.getElementById(id);
const state = { history: [], busy: false };

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function apiKey() {
  return sessionStorage.getItem(KEY_STORE) || "";
}

function headers(extra) {
  const h = Object.assign({}, extra || {});
  const key = apiKey();
  if (key) h.Authorization = "Bearer " + key;
  return h;
}

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
}

// The server's errors are {"error": {"message", "hint"}}; a 401 gets a sentence for people.
function describeError(status, body) {
  const err = (body && body.error) || {};
  if (status === 401) {
    return apiKey()
      ? "error: the API key was refused (" + (err.message || "401") + ")\nhint: check the key and enter it again above"
      : "error: this server needs an API key\nhint: enter your key in the API key field above";
  }
  let text = "error: " + (err.message || "request failed with status " + status);
  if (err.hint) text += "\nhint: " + err.hint;
  return text;
}

async function errorOf(resp) {
  let body = null;
  try { body = await resp.json(); } catch (_) { /* not JSON: keep the status */ }
  return describeError(resp.status, body);
}

// -- collections -------------------------------------------------------------------------

async function loadCollections() {
  const select = $("collection");
  const resp = await fetch("/v1/models", { headers: headers() });
  if (!resp.ok) {
    showError(await errorOf(resp));
    return false;
  }
  const data = (await resp.json()).data || [];
  const current = select.value;
  select.replaceChildren();
  for (const m of data) {
    const label = m.id === "deepsearcher" ? "all collections"
      : m.id + (m.chunks !== undefined ? " (" + m.chunks + " chunks)" : "");
    const option = el("option", "", label);
    option.value = m.id;
    option.title = m.description || "";
    select.append(option);
  }
  if ([...select.options].some((o) => o.value === current)) select.value = current;
  showError("");
  return true;
}

// -- the answer and its citations ---------------------------------------------------------

function pageLabel(s) {
  if (s.page === null || s.page === undefined) return "";
  return s.page_end && s.page_end !== s.page ? "p. " + s.page + "–" + s.page_end : "p. " + s.page;
}

function openPassage(s) {
  $("passage").hidden = false;
  $("passage-n").textContent = "[" + s.n + "]";
  $("passage-source").textContent = s.kind === "web" ? (s.title || s.source) + " — " + s.source : s.source;
  $("passage-page").textContent = pageLabel(s);
  $("passage-collection").textContent = s.collection ? "· " + s.collection : "";
  $("passage-text").textContent = s.text;
  $("passage").scrollIntoView({ block: "nearest" });
}

// The answer text with each [n] that names a source turned into a button opening it.
function renderAnswer(node, text, sources) {
  const byN = new Map(sources.map((s) => [String(s.n), s]));
  node.replaceChildren();
  const parts = text.split(/(\[\d+\])/);
  for (const part of parts) {
    const m = /^\[(\d+)\]$/.exec(part);
    const source = m && byN.get(m[1]);
    if (source) {
      const button = el("button", "cite", part);
      button.type = "button";
      button.title = source.source + (pageLabel(source) ? " " + pageLabel(source) : "");
      button.addEventListener("click", () => openPassage(source));
      node.append(button);
    } else if (part) {
      node.append(document.createTextNode(part));
    }
  }
}

function renderSources(sources) {
  const list = $("sources");
  list.replaceChildren();
  for (const s of sources) {
    const item = el("li");
    item.value = s.n;
    // "attributed": the model wrote no [n] here; the sentence was matched to this passage.
    const label = s.source + (pageLabel(s) ? " " + pageLabel(s) : "")
      + (s.attributed ? " (attributed)" : "");
    const button = el("button", "", label);
    button.type = "button";
    button.addEventListener("click", () => openPassage(s));
    item.append(button);
    list.append(item);
  }
}

// -- the search trace ---------------------------------------------------------------------

// The server words each event (deepsearcher/describe.py, the same line the CLI and MCP show);
// the page only picks a class for it.
function traceLine(event) {
  if (!event.text) return null;
  const kind = event.type === "verdict" ? (event.kept ? "kept" : "dropped")
    : event.type === "note" ? "note"
    : event.type === "hop" ? (event.status === "answered" ? "kept" : "dropped")
    : "";
  return [kind, event.text];
}

function addTrace(event) {
  const line = traceLine(event);
  if (!line) return;
  const item = el("li", line[0], line[1]);
  item.dataset.type = event.type;
  $("trace").append(item);
  item.scrollIntoView({ block: "nearest" });
}

// -- asking -------------------------------------------------------------------------------

// Calls onFrame with each parsed SSE data frame of the response body as it arrives.
async function readEvents(resp, onFrame) {
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    buffer += decoder.decode(value || new Uint8Array(), { stream: !done });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = frame.split("\n").filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(5).trimStart()).join("\n");
      if (!data) continue;
      if (data === "[DONE]") return;
      onFrame(JSON.parse(data));
    }
    if (done) return;
  }
}

async function ask(question) {
  const conversation = $("conversation");
  conversation.append(el("div", "msg user", question));
  const reply = el("div", "msg assistant");
  const body = el("span", "answer");
  reply.append(body);
  conversation.append(reply);
  $("trace").replaceChildren();
  showError("");

  const messages = state.history.concat([{ role: "user", content: question }]);
  const resp = await fetch("/v1/chat/completions", {
    method: "POST",
    headers: headers({ "Content-Type": "application/json" }),
    body: JSON.stringify({ model: $("collection").value, messages, stream: true }),
  });
  if (!resp.ok) {
    reply.remove();
    showError(await errorOf(resp));
    return;
  }
  let text = "";
  let finalText = null;  // the answer as it stands, with the citations attribution added
  let sources = [];
  let details = null;
  let failed = null;
  await readEvents(resp, (frame) => {
    if (frame.error) { failed = frame; return; }
    if (frame.deepsearcher_event) addTrace(frame.deepsearcher_event);
    const choice = (frame.choices || [])[0];
    const delta = choice && choice.delta && choice.delta.content;
    if (delta) {
      text += delta;
      body.textContent = text.split(SOURCES_HEADING)[0];
    }
    if (frame.sources) sources = frame.sources;
    if (typeof frame.answer === "string") finalText = frame.answer;
    if (frame.deepsearcher) details = frame.deepsearcher;
  });
  if (failed) {
    showError(describeError(200, failed));
    if (!text) reply.remove();
    return;
  }
  renderAnswer(body, finalText !== null ? finalText : text.split(SOURCES_HEADING)[0], sources);
  renderSources(sources);
  if (details) {
    const c = details.chunks || {};
    const facts = [
      (c.kept || 0) + " passages kept, " + (c.dropped || 0) + " dropped",
      (details.usage ? details.usage.llm_calls : 0) + " LLM calls",
    ];
    if (details.evidence) facts.push("evidence: " + details.evidence);
    if ((details.unsupported_sentences || []).length) {
      facts.push(details.unsupported_sentences.length + " sentence(s) no passage holds");
    }
    if (details.cut_short) facts.push(details.cut_short);
    for (const note of details.notes || []) facts.push(note);
    reply.append(el("span", "details", facts.join(" · ")));
  }
  state.history = messages.concat([{ role: "assistant", content: text }]);
}

// -- uploads ------------------------------------------------------------------------------

async function upload(files, collection) {
  const form = new FormData();
  for (const f of files) form.append("files", f, f.name);
  if (collection) form.append("collection", collection);
  $("upload-status").textContent = "loading " + files.length + " file(s)…";
  const resp = await fetch("/v1/load", { method: "POST", headers: headers(), body: form });
  if (!resp.ok) {
    $("upload-status").textContent = "";
    showError(await errorOf(resp));
    return;
  }
  const report = await resp.json();
  const failed = (report.failures || []).map((f) => f.path + ": " + f.reason);
  $("upload-status").textContent = "loaded into " + (report.collection || collection || "the default collection")
    + (failed.length ? "; failed: " + failed.join("; ") : "");
  await loadCollections();
}

// -- wiring -------------------------------------------------------------------------------

function init() {
  const keyInput = $("api-key");
  keyInput.value = apiKey();
  $("key-form").hidden = document.body.dataset.keys !== "on" && !apiKey();
  $("upload").hidden = document.body.dataset.upload !== "on";

  $("key-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    sessionStorage.setItem(KEY_STORE, keyInput.value.trim());
    await loadCollections();
  });
  $("new-chat").addEventListener("click", () => {
    state.history = [];
    for (const id of ["conversation", "trace", "sources"]) $(id).replaceChildren();
    $("passage").hidden = true;
    showError("");
  });
  $("ask").addEventListener("submit", async (e) => {
    e.preventDefault();
    const question = $("question").value.trim();
    if (!question || state.busy) return;
    state.busy = true;
    $("send").disabled = true;
    $("question").value = "";
    try {
      await ask(question);
    } catch (err) {
      showError("error: " + err.message + "\nhint: is the server still running?");
    } finally {
      state.busy = false;
      $("send").disabled = false;
    }
  });
  $("question").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      $("ask").requestSubmit();
    }
  });
  $("upload").addEventListener("submit", async (e) => {
    e.preventDefault();
    const files = [...$("upload-files").files];
    if (files.length) await upload(files, $("upload-collection").value.trim());
  });
  loadCollections().catch((err) => showError("error: " + err.message));
}

document.addEventListener("DOMContentLoaded", init);
