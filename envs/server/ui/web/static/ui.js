// The page's behaviour: start episodes and step them through the episode API, poll what it shows.
// No framework: the server renders the HTML, this file only sends requests and swaps fragments in.
"use strict";

const DATA = JSON.parse(document.getElementById("page-data").textContent);
const POLL_MS = 800;

// Every request carries the page header: with it, the sign-in cookie stands for the bearer token.
async function api(method, path, body) {
  const init = {method, headers: {"X-Agentrl-Page": "1"}, credentials: "same-origin"};
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  let json = null;
  try { json = JSON.parse(text); } catch (_) { /* shown raw below */ }
  if (!response.ok) {
    const why = json && json.error ? `${json.error}: ${json.message}` : text;
    throw new Error(`HTTP ${response.status} ${why}`);
  }
  return json;
}

function show(el, message) {
  el.textContent = message || "";
  el.hidden = !message;
}

// A JSON field typed in a form: an object if it parses, else the text itself, for the API to refuse.
function jsonOrText(text) {
  if (!text.trim()) return undefined;
  try { return JSON.parse(text); } catch (_) { return text; }
}

// Rewards as the server writes them (1.0, not 1), so the page reads the same before and after a poll.
function num(x) {
  return x === null ? "–" : (Number.isInteger(x) ? x.toFixed(1) : String(x));
}

function age(seconds) {
  if (seconds < 60) return `${Math.floor(seconds)}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ${Math.floor(seconds % 60)}s`;
  return `${Math.floor(seconds / 3600)}h ${Math.floor((seconds % 3600) / 60)}m`;
}

// --- the index: start form and the live list ---------------------------------------------------
function cell(row, text, cls) {
  const td = row.insertCell();
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

function drawEpisodes(episodes) {
  const body = document.querySelector("#episodes tbody");
  body.replaceChildren();
  for (const ep of episodes) {
    const row = body.insertRow();
    row.dataset.episode = ep.episode_id;
    row.className = `row-${ep.status}`;
    cell(row, ep.env_id);
    const link = document.createElement("a");
    link.href = `/ui/episodes/${encodeURIComponent(ep.episode_id)}`;
    link.textContent = ep.episode_id;
    cell(row, "").append(link);
    cell(row, ep.status, `status status-${ep.status}`);
    cell(row, age(ep.age_s));
    cell(row, String(ep.steps), "steps");
    cell(row, num(ep.last_reward), "last-reward");
    cell(row, num(ep.return));
    if (ep.status === "running") {
      const play = document.createElement("a");
      play.href = `/ui/episodes/${encodeURIComponent(ep.episode_id)}/play`;
      play.textContent = "play";
      cell(row, "").append(play);
    } else cell(row, "");
  }
  const live = episodes.filter((ep) => ep.status !== "closed").length;
  document.getElementById("live-count").textContent = `(${live} live)`;
}

function startIndex() {
  drawEpisodes(DATA.episodes);
  const form = document.getElementById("start-form");
  const error = document.getElementById("start-error");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    show(error, "");
    const seedText = form.seed.value.trim();
    const seed = seedText === "" ? null : (/^\d+$/.test(seedText) && Number.isSafeInteger(Number(seedText))
      ? Number(seedText) : seedText);
    const body = {env_id: form.env_id.value, seed,
                  options: jsonOrText(form.options.value), env_kwargs: jsonOrText(form.env_kwargs.value)};
    try {
      const created = await api("POST", "/v1/episodes", body);
      location.href = `/ui/episodes/${encodeURIComponent(created.episode_id)}/play`;
    } catch (err) { show(error, err.message); }
  });
  const listError = document.getElementById("list-error");
  const poll = async () => {
    try {
      drawEpisodes((await api("GET", "/v1/episodes")).episodes);
      show(listError, "");
    } catch (err) { show(listError, err.message); }
    setTimeout(poll, POLL_MS);
  };
  setTimeout(poll, POLL_MS);
}

// --- an episode: its transcript as it grows, and acting on it ----------------------------------
let next = 0;

function drawSummary(ep) {
  const status = document.getElementById("status");
  status.textContent = ep.status;
  status.className = `status-${ep.status}`;
  document.getElementById("steps").textContent = String(ep.steps);
  document.getElementById("last-reward").textContent = num(ep.last_reward);
  document.getElementById("return").textContent = num(ep.return);
  if (!DATA.play && ep.status !== "running") document.getElementById("view-kind").textContent = "Trajectory";
  const controls = document.getElementById("controls");
  if (controls) {
    controls.hidden = ep.status !== "running";
    document.getElementById("over").hidden = ep.status === "running";
  }
}

// One refresh at a time (the poll and a step both ask), so no entry is appended twice.
let queue = Promise.resolve();
function refresh() {
  const run = queue.then(refreshNow);
  queue = run.catch(() => {});
  return run;
}

async function refreshNow() {
  const id = encodeURIComponent(DATA.episode_id);
  const got = await api("GET", `/ui/episodes/${id}/entries?start=${next}`);
  if (got.episode.started !== DATA.episode.started) { location.reload(); return got.episode; }
  if (got.html.trim()) document.getElementById("transcript").insertAdjacentHTML("beforeend", got.html);
  next = got.next;
  drawSummary(got.episode);
  return got.episode;
}

function readArgument(el) {
  const kind = el.dataset.kind;
  const text = el.value;
  if (text.trim() === "") return undefined;  // left empty: not sent (a required one, the env names)
  if (kind === "enum" || kind === "boolean") return JSON.parse(text);
  if (kind === "integer" || kind === "number") {
    const n = Number(text.trim());
    return Number.isFinite(n) ? n : text;  // not a number: sent as typed, the env says what is wrong
  }
  if (kind === "list") {
    const items = text.split(",").map((s) => s.trim()).filter((s) => s !== "");
    const numeric = el.dataset.item === "integer" || el.dataset.item === "number";
    return items.map((s) => (numeric && Number.isFinite(Number(s)) ? Number(s) : s));
  }
  if (kind === "json") return jsonOrText(text);
  return text;
}

function toolCall(form) {
  const args = {};
  for (const el of form.querySelectorAll("[data-arg]")) {
    const value = readArgument(el);
    if (value !== undefined) args[el.dataset.arg] = value;
  }
  return DATA.call_open + JSON.stringify({name: form.dataset.tool, arguments: args}) + DATA.call_close;
}

function drawResult(result) {
  const box = document.getElementById("last-result");
  const parts = [`reward ${num(result.reward)}`];
  if (result.terminated) parts.push("terminated");
  if (result.truncated) parts.push("truncated");
  const progress = result.info && result.info.progress;
  if (progress && typeof progress === "object") {
    parts.push("progress: " + Object.entries(progress).map(([k, v]) => `${k} ${v ? "✓" : "✗"}`).join(", "));
  }
  show(box, parts.join(" · "));
}

async function act(action, button) {
  const error = document.getElementById("step-error");
  show(error, "");
  button.disabled = true;
  try {
    const id = encodeURIComponent(DATA.episode_id);
    drawResult(await api("POST", `/v1/episodes/${id}/step`, {action}));
  } catch (err) { show(error, err.message); }
  try { await refresh(); } catch (err) { show(error, err.message); }
  button.disabled = false;
  const last = document.querySelector("#transcript .entry:last-of-type");
  if (last) last.scrollIntoView({block: "nearest"});
}

function startEpisode() {
  drawSummary(DATA.episode);
  next = DATA.next;
  for (const form of document.querySelectorAll(".tool-form")) {
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const action = toolCall(form);
      document.getElementById("raw-action").value = action;
      act(action, form.querySelector("button"));
    });
  }
  const raw = document.getElementById("raw-form");
  if (raw) {
    raw.addEventListener("submit", (event) => {
      event.preventDefault();
      act(document.getElementById("raw-action").value, document.getElementById("send-raw"));
    });
  }
  const poll = async () => {
    let ep = null;
    try { ep = await refresh(); } catch (_) { /* the next poll retries */ }
    if (!ep || ep.status !== "closed") setTimeout(poll, POLL_MS);
  };
  setTimeout(poll, POLL_MS);
}

if (DATA.episode_id) startEpisode(); else startIndex();
