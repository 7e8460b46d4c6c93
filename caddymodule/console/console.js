// The console of caddy-mcp-tasks: a view over the admin API's JSON routes
// (/mcp_tasks/tasks, /mcp_tasks/stores, /mcp_tasks/health) on the same
// origin. No build step, no dependencies. Everything a task carries
// (principals, tool names, messages, errors) comes from callers and
// upstreams: it is put in the page as text (textContent), never as HTML.

const base = new URL("../", location.href); // /mcp_tasks/
const pollMs = 3000;
const active = new Set(["working", "input_required"]);

const $ = (id) => document.getElementById(id);

const state = {
  filter: new URLSearchParams(),
  cursors: [""], // the cursor of each page seen, the first page's is ""
  page: 0,
  next: "",
  busy: false,
  again: false,
  stores: [],
  shown: new Map(), // what each part of the page last showed, to leave it alone when nothing changed
};

// changed reports whether part's data differs from what the page shows,
// and records it. An unchanged part is not redrawn: the element under
// the keyboard focus or the pointer stays where it is.
function changed(part, data) {
  const key = JSON.stringify(data);
  if (state.shown.get(part) === key) return false;
  state.shown.set(part, key);
  return true;
}

// api fetches a route; it resolves to the decoded answer, or throws an
// Error naming the status and the admin API's error message. okStatuses
// are answers with a body worth reading besides 2xx (health's 503).
async function api(path, init = {}, okStatuses = []) {
  const resp = await fetch(new URL(path, base), {
    cache: "no-store",
    headers: { Accept: "application/json" },
    ...init,
  });
  let body = null;
  try {
    body = await resp.json();
  } catch {
    body = null;
  }
  if (!resp.ok && !okStatuses.includes(resp.status)) {
    const msg = body && typeof body.error === "string" ? body.error : resp.statusText;
    throw new Error(`${resp.status}: ${msg}`);
  }
  return body;
}

// el makes an element with text (never HTML) and attributes.
function el(tag, text, attrs = {}) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}

function row(cells) {
  const tr = el("tr");
  for (const c of cells) {
    if (c instanceof Node) {
      const td = el("td");
      td.append(c);
      tr.append(td);
    } else {
      tr.append(el("td", c ?? ""));
    }
  }
  return tr;
}

function when(s) {
  if (!s) return "";
  const d = new Date(s);
  if (Number.isNaN(d.getTime()) || d.getTime() <= 0) return "";
  return d.toISOString().replace("T", " ").slice(0, 19);
}

function statusText(t) {
  const parts = [t.status];
  if (t.is_error) parts.push("tool error");
  if (t.inputs_open) parts.push(`${t.inputs_open} input${t.inputs_open > 1 ? "s" : ""} open`);
  if (t.running_here) parts.push("running here");
  return parts.join(", ");
}

function messageText(t) {
  if (t.error) return `error ${t.error.code}: ${t.error.message}`;
  return t.status_message || "";
}

function setProblem(err) {
  $("problem").textContent = err ? `Error: ${err.message}` : "";
}

// --- stores, health, upstreams -------------------------------------------

function healthText(h) {
  if (!h) return "unknown";
  const wrong = [];
  if (!h.open) wrong.push("not open");
  else {
    if (!h.reachable) wrong.push("unreachable");
    if (!h.writable) wrong.push("not writable");
    if (!h.recovered) wrong.push("recovering");
  }
  if (h.draining) wrong.push("draining");
  return wrong.length ? `unhealthy: ${wrong.join(", ")}` : "healthy";
}

async function refreshStores() {
  const [stores, health] = await Promise.all([
    api("stores"),
    api("health", {}, [503]),
  ]);
  state.stores = stores || [];
  if (!changed("stores", [stores, health])) return;
  const byName = new Map(((health && health.stores) || []).map((h) => [h.store, h]));
  const body = $("stores").tBodies[0];
  const upBody = $("upstreams").tBodies[0];
  const rows = [];
  const upRows = [];
  for (const s of state.stores) {
    const h = byName.get(s.store);
    rows.push(row([s.store, s.backend, healthText(h), s.workers, s.plain_calls, h ? h.error : ""]));
    for (const u of (h && h.upstreams) || []) {
      const reach = u.reachable === undefined ? "not called yet" : u.reachable ? "reachable" : "unreachable";
      const err = u.last_error ? `${when(u.last_error_at)} ${u.last_error}` : "";
      upRows.push(row([u.route, reach, (u.versions || []).join(", "), when(u.last_reached), err]));
    }
  }
  if (!rows.length) rows.push(row(["no task store in use (no mcp_tasks handler configured)", "", "", "", "", ""]));
  if (!upRows.length) upRows.push(row(["no upstream state yet", "", "", "", ""]));
  body.replaceChildren(...rows);
  upBody.replaceChildren(...upRows);
  syncStoreChoice();
}

// syncStoreChoice offers the stores in the filter; a listing needs one
// named when several are in use.
function syncStoreChoice() {
  const sel = $("f-store");
  const names = state.stores.map((s) => s.store);
  const want = names.length > 1 ? names : [""];
  const label = (n) => n || names[0] || "(none)";
  if (!changed("store-choice", names)) return;
  const current = sel.value;
  sel.replaceChildren(...want.map((n) => el("option", label(n), { value: n })));
  sel.value = want.includes(current) ? current : want[0];
  if (names.length > 1 && !state.filter.get("store")) {
    state.filter.set("store", sel.value);
  }
}

// --- the task list ------------------------------------------------------

function readFilter() {
  const f = new URLSearchParams();
  for (const name of ["store", "status", "principal", "tenant", "route", "tool", "limit"]) {
    const v = $(`f-${name}`).value.trim();
    if (v) f.set(name, v);
  }
  const age = $("f-age").value;
  if (age) {
    const [k, v] = age.split("=");
    f.set(k, v);
  }
  return f;
}

async function refreshList() {
  const q = new URLSearchParams(state.filter);
  const cursor = state.cursors[state.page];
  if (cursor) q.set("cursor", cursor);
  const page = await api(`tasks?${q}`);
  state.next = page.next_cursor || "";
  // Only what the table shows decides a redraw (a working task's lease,
  // renewed every few seconds, does not).
  const cells = page.tasks.map((t) => [t.id, statusText(t), t.principal, t.tenant, t.tool, t.route, t.era,
    when(t.created_at), when(t.updated_at), messageText(t), t.status]);
  if (!changed("list", [cells, state.page, state.next])) return;
  const focused = document.activeElement && document.activeElement.dataset
    ? document.activeElement.dataset.task : undefined;
  const counts = new Map();
  const rows = cells.map(([id, ...shown]) => {
    const status = shown.pop();
    counts.set(status, (counts.get(status) || 0) + 1);
    const link = el("a", id, { href: `#task/${encodeURIComponent(id)}`, "data-task": id });
    const tr = row([link, ...shown]);
    tr.cells[0].className = "id";
    tr.cells[1].className = "status";
    tr.cells[5].className = "route";
    tr.cells[9].className = "message";
    tr.cells[6].className = tr.cells[7].className = tr.cells[8].className = "time";
    tr.dataset.status = status;
    return tr;
  });
  if (!rows.length) rows.push(row(["no task matches", "", "", "", "", "", "", "", "", ""]));
  $("tasks").tBodies[0].replaceChildren(...rows);
  const summary = [...counts].map(([s, n]) => `${n} ${s}`).join(", ");
  $("counts").textContent = page.tasks.length
    ? `On this page: ${page.tasks.length} task${page.tasks.length > 1 ? "s" : ""} (${summary}).`
    : "";
  $("page-no").textContent = `Page ${state.page + 1}`;
  $("newer").disabled = state.page === 0;
  $("older").disabled = !state.next;
  if (focused) {
    const again = $("tasks").querySelector(`a[data-task="${CSS.escape(focused)}"]`);
    if (again) again.focus();
  }
}

// --- one task -----------------------------------------------------------

function shownTask() {
  const m = /^#task\/(.+)$/.exec(location.hash);
  return m ? decodeURIComponent(m[1]) : "";
}

function field(dl, name, value) {
  if (value === undefined || value === null || value === "" || value === false) return;
  dl.append(el("dt", name), el("dd", value === true ? "yes" : value));
}

function pretty(raw) {
  if (raw === undefined || raw === null) return "(none)";
  return JSON.stringify(raw, null, 2);
}

async function refreshDetail(id) {
  const t = await api(`tasks/${encodeURIComponent(id)}?detail=1`);
  if (!changed("detail", t)) return t;
  $("detail-title").textContent = `Task ${t.id}`;
  const dl = el("dl", null, { id: "fields" });
  field(dl, "Status", statusText(t));
  field(dl, "Status message", t.status_message);
  field(dl, "Principal", t.principal);
  field(dl, "Tenant", t.tenant);
  field(dl, "Tool", t.tool);
  field(dl, "Protocol", t.era);
  field(dl, "Route", t.route);
  field(dl, "Store", t.store);
  field(dl, "Created", when(t.created_at));
  field(dl, "Updated", when(t.updated_at));
  field(dl, "Expires", when(t.expires_at));
  field(dl, "Lease holder", t.lease_holder);
  field(dl, "Lease expires", when(t.lease_expires));
  field(dl, "Upstream task id", t.upstream_task_id);
  field(dl, "Trace id", t.trace_id);
  if (t.error) {
    field(dl, "Error", `${t.error.code}: ${t.error.message}`);
    if (t.error.data !== undefined) field(dl, "Error data", JSON.stringify(t.error.data));
  }
  $("fields").replaceWith(dl);

  const hist = (t.history || []).map((c) => row([when(c.at), c.from || "(created)", c.to, c.message]));
  if (!hist.length) hist.push(row(["no status change recorded", "", "", ""]));
  $("history").tBodies[0].replaceChildren(...hist);

  const inputs = (t.inputs || []).map((i) => row([i.round ?? "", i.key, i.method, i.answered ? "yes" : "no"]));
  if (!inputs.length) inputs.push(row(["no input requested", "", "", ""]));
  $("inputs").tBodies[0].replaceChildren(...inputs);

  $("params").textContent = pretty(t.params);
  $("result").textContent = pretty(t.result);
  const cancel = $("cancel");
  cancel.hidden = !active.has(t.status);
  cancel.dataset.task = t.id;
  return t;
}

async function cancelShown() {
  const id = $("cancel").dataset.task;
  const out = $("cancel-result");
  if (!id || !window.confirm(`Cancel task ${id}? Its upstream call is cancelled too.`)) return;
  out.className = "";
  out.textContent = `Cancelling ${id}…`;
  try {
    const t = await api(`tasks/${encodeURIComponent(id)}/cancel`, { method: "POST" });
    out.textContent = `Task ${t.id} is ${t.status}.`;
  } catch (err) {
    out.className = "error";
    out.textContent = `Cancel failed: ${err.message}`;
  }
  await refresh();
}

// --- wiring -------------------------------------------------------------

function showView() {
  const id = shownTask();
  $("detail").hidden = !id;
  for (const s of document.querySelectorAll("main > section:not(#detail)")) s.hidden = Boolean(id);
  return id;
}

// refresh redraws what changed; a call while one runs (a click during a
// poll) runs once more after it, so that it sees the latest filter.
async function refresh() {
  if (state.busy) {
    state.again = true;
    return;
  }
  state.busy = true;
  state.again = false;
  try {
    const id = showView();
    await refreshStores();
    if (id) await refreshDetail(id);
    else await refreshList();
    setProblem(null);
    $("updated").textContent = `Updated ${when(new Date().toISOString())} UTC.`;
  } catch (err) {
    setProblem(err);
  } finally {
    state.busy = false;
  }
  if (state.again) await refresh();
}

$("filters").addEventListener("submit", (ev) => {
  ev.preventDefault();
  state.filter = readFilter();
  state.cursors = [""];
  state.page = 0;
  refresh();
});
$("filters").addEventListener("reset", () => {
  setTimeout(() => $("filters").requestSubmit(), 0);
});
$("older").addEventListener("click", () => {
  if (!state.next) return;
  state.cursors[state.page + 1] = state.next;
  state.page++;
  refresh();
});
$("newer").addEventListener("click", () => {
  if (state.page === 0) return;
  state.page--;
  refresh();
});
$("cancel").addEventListener("click", cancelShown);
window.addEventListener("hashchange", async () => {
  const id = showView();
  $("cancel-result").textContent = "";
  await refresh();
  if (id) $("detail-title").focus();
  else {
    const link = document.querySelector("#tasks a[data-task]");
    if (link) link.focus();
  }
});

let timer = setInterval(refresh, pollMs);
$("live").addEventListener("change", (ev) => {
  clearInterval(timer);
  if (ev.target.checked) timer = setInterval(refresh, pollMs);
});
state.filter = readFilter();
refresh();
