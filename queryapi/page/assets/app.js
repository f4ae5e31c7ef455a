// The search page of kubesearch. It calls the query API's own endpoints from the browser with the
// caller's credentials (a client certificate the browser presents, or a bearer token kept in
// sessionStorage), so it shows exactly what the API answers that subject. Everything the server
// returns is attacker-controlled text (names, labels, annotations): it is put on the page through
// textContent and attributes only, never parsed as HTML.
"use strict";

const SEARCH = "../v1alpha1/search";
const FLEET = "../v1alpha1/fleet";
const TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io, application/json";
const CLUSTER_ANNOTATION = "resource.karmada.io/cached-from-cluster";
const PAGE_SIZE = 100;
const POLL_MS = 3000; // live results: the first page asked again this often while it is shown
const FLEET_MS = 5000;
const TOKEN_KEY = "kubesearch.token";
// Keys whose selectors are field selectors; any other key is a label's (labels may hold dots).
const FIELD_ROOTS = ["metadata.", "spec.", "status.", "data.", "involvedObject.", "regarding.", "type", "reason"];

const $ = (id) => document.getElementById(id);

// el builds an element: text children become text nodes, so nothing is ever parsed as markup.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// ---- the search box's syntax ----

// parseBox turns the box's text into the REST search's parameters: free words into q, key:value
// filters into their lists, selectors into labelSelector or fieldSelector.
function parseBox(text) {
  const f = { words: [], resources: [], clusters: [], namespaces: [], names: [], owner: "", labels: [], fields: [] };
  const tokens = text.match(/[^\s(),]+\s+(?:notin|in)\s*\([^)]*\)|\S+/g) || [];
  for (const tok of tokens) {
    const m = /^(kind|k|resource|cluster|c|namespace|ns|n|name|owner|label|l|field|f):(.*)$/.exec(tok);
    if (m) {
      const v = m[2];
      const list = v.split(",").filter(Boolean);
      switch (m[1]) {
        case "kind": case "k": case "resource": f.resources.push(...list); break;
        case "cluster": case "c": f.clusters.push(...list); break;
        case "namespace": case "ns": case "n": f.namespaces.push(...list); break;
        case "name": f.names.push(...list); break;
        case "owner": f.owner = v; break;
        case "label": case "l": if (v) f.labels.push(v); break;
        case "field": case "f": if (v) f.fields.push(v); break;
      }
      continue;
    }
    if (/\s(in|notin)\s*\(/.test(tok) || /^!?[A-Za-z0-9][\w.\-/]*$/.test(tok) && tok.startsWith("!") || /^[^=!]+(==|!=|=)/.test(tok)) {
      const key = tok.replace(/^!/, "").split(/\s|==|!=|=/)[0];
      (FIELD_ROOTS.some((r) => key === r || key.startsWith(r)) ? f.fields : f.labels).push(tok);
      continue;
    }
    f.words.push(tok);
  }
  return f;
}

// formatBox writes filters back as the box's text, in a stable order.
function formatBox(f) {
  const out = [...f.words];
  const q = (v) => (/[\s,]/.test(v) ? null : v);
  if (f.resources.length) out.push("kind:" + f.resources.join(","));
  if (f.clusters.length) out.push("cluster:" + f.clusters.join(","));
  if (f.namespaces.length) out.push("ns:" + f.namespaces.join(","));
  if (f.names.length) out.push("name:" + f.names.join(","));
  if (f.owner) out.push("owner:" + f.owner);
  for (const l of f.labels) out.push(FIELD_ROOTS.some((r) => l.startsWith(r)) || !q(l) ? "label:" + l : l);
  for (const s of f.fields) out.push(FIELD_ROOTS.some((r) => s.startsWith(r)) ? s : "field:" + s);
  return out.join(" ");
}

function searchParams(f) {
  const p = new URLSearchParams();
  if (f.words.length) p.set("q", f.words.join(" "));
  if (f.resources.length) p.set("resources", f.resources.join(","));
  if (f.clusters.length) p.set("clusters", f.clusters.join(","));
  if (f.namespaces.length) p.set("namespaces", f.namespaces.join(","));
  if (f.names.length) p.set("names", f.names.join(","));
  if (f.owner) p.set("owner", f.owner);
  if (f.labels.length) p.set("labelSelector", f.labels.join(","));
  if (f.fields.length) p.set("fieldSelector", f.fields.join(","));
  return p;
}

// ---- talking to the API ----

class APIError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

async function api(path, params, accept) {
  const headers = { Accept: accept || "application/json" };
  if (token()) headers.Authorization = "Bearer " + token();
  const url = params ? path + "?" + params.toString() : path;
  const resp = await fetch(url, { headers, credentials: "same-origin", cache: "no-store" });
  let body = null;
  try { body = await resp.json(); } catch (_) { /* a proxy's HTML error: the status says enough */ }
  if (!resp.ok) {
    const msg = (body && body.message) || resp.statusText || String(resp.status);
    if (resp.status === 401) needCredentials();
    throw new APIError(resp.status, msg);
  }
  const warnings = [];
  const w = resp.headers.get("Warning");
  if (w) for (const m of w.matchAll(/299 - "((?:[^"\\]|\\.)*)"/g)) warnings.push(m[1].replace(/\\(.)/g, "$1"));
  return { body, warnings };
}

let signinOpen = false;
function needCredentials() {
  if (signinOpen) return;
  signinOpen = true;
  $("signin-error").textContent = token() ? "The token was refused (401)." : "";
  $("token").value = "";
  $("signin").showModal();
  $("token").focus();
}

// ---- state ----

const state = {
  text: "",
  sort: "",              // "" is the API's default order
  sortResource: "",      // the one resource a column sort (sort=columns.<id>) was chosen for
  wide: false,           // the kind's -o wide columns too (its Table's columns of priority > 0)
  tokens: [""],          // continue tokens of the pages read, tokens[i] reads page i
  page: 0,
  items: [], rows: [], columns: {}, columnSorts: {},
  total: 0,
  facets: {},
  selected: -1,
  open: null,            // the object in the side panel
  pendingOpen: "",       // an object the URL names, kept in the URL until it is found
  lastKeys: new Set(),   // keys of the rows last shown: new ones are highlighted
  generation: 0,         // drops answers of searches superseded meanwhile
};

const key = (o) => [clusterOf(o), o.metadata.namespace || "", o.apiVersion, o.kind, o.metadata.name].join("/");
const clusterOf = (o) => (o.metadata.annotations || {})[CLUSTER_ANNOTATION] || "";

function age(ts) {
  if (!ts) return "<unknown>";
  const s = Math.max(0, (Date.now() - Date.parse(ts)) / 1000);
  if (s < 120) return Math.floor(s) + "s";
  const m = s / 60;
  if (m < 10) return Math.floor(m) + "m" + (Math.floor(s % 60) ? Math.floor(s % 60) + "s" : "");
  if (m < 180) return Math.floor(m) + "m";
  const h = m / 60;
  if (h < 8) return Math.floor(h) + "h" + (Math.floor(m % 60) ? Math.floor(m % 60) + "m" : "");
  if (h < 48) return Math.floor(h) + "h";
  const d = h / 24;
  if (d < 8) return Math.floor(d) + "d" + (Math.floor(h % 24) ? Math.floor(h % 24) + "h" : "");
  if (d < 730) return Math.floor(d) + "d";
  return Math.floor(d / 365) + "y";
}

// ---- the URL: every search is shareable (never a token) ----

function writeURL(push) {
  const p = new URLSearchParams();
  if (state.text) p.set("q", state.text);
  if (state.sort) p.set("sort", state.sort);
  if (state.wide) p.set("wide", "1");
  if (state.open) p.set("open", [clusterOf(state.open), state.open.metadata.namespace || "", state.open.apiVersion, state.open.kind, state.open.metadata.name].join("/"));
  else if (state.pendingOpen) p.set("open", state.pendingOpen);
  const url = location.pathname + (p.toString() ? "?" + p.toString() : "");
  if (url === location.pathname + location.search) return;
  (push ? history.pushState : history.replaceState).call(history, null, "", url);
}

function readURL() {
  const p = new URLSearchParams(location.search);
  state.text = p.get("q") || "";
  state.sort = p.get("sort") || "";
  state.sortResource = oneResource(parseBox(state.text));
  state.wide = p.get("wide") === "1";
  $("wide").checked = state.wide;
  $("box").value = state.text;
  state.pendingOpen = p.get("open") || "";
  return state.pendingOpen;
}

// ---- searching ----

async function runSearch(opts) {
  const { push = false, page = 0, live = false } = opts || {};
  const gen = ++state.generation;
  if (!live) { state.page = page; if (page === 0) state.tokens = [""]; }
  const f = parseBox(state.text);
  // A column sort orders one resource by a column of its Table: the box no longer naming that
  // resource alone, it falls back to the default order rather than failing every search.
  if (isColumnSort(state.sort) && (!oneResource(f) || oneResource(f) !== state.sortResource)) state.sort = "";
  const p = searchParams(f);
  p.set("limit", String(PAGE_SIZE));
  if (state.sort) p.set("sort", state.sort);
  if (state.tokens[state.page]) p.set("continue", state.tokens[state.page]);
  // Facets in a request of their own, beside the page: the first rows need not wait for counts
  // over every match (the costlier part at 100k objects).
  const fp = searchParams(f);
  fp.set("limit", "1");
  fp.set("metadataOnly", "true");
  // Label pairs are counted only when the box completes a label (labelFacet): over every label of
  // 100k objects they cost more than the other three together.
  fp.set("facets", "resource,cluster,namespace");
  fp.set("facetSize", "100");
  writeURL(push);
  const t0 = performance.now();
  const facetsDone = state.page === 0 ? api(SEARCH, fp).then((r) => {
    if (gen !== state.generation) return;
    state.facets = Object.fromEntries((r.body.facets || []).map((x) => [x.name, x]));
    state.labelsFor = null;
    renderFacets(f);
  }).catch(() => { /* the page's own request reports the error */ }) : Promise.resolve();
  try {
    const r = await api(SEARCH, p, TABLE);
    if (gen !== state.generation) return;
    $("error").hidden = true;
    $("error").textContent = "";
    state.items = r.body.items || [];
    state.rows = r.body.rows || [];
    state.columns = r.body.columns || {};
    state.columnSorts = r.body.columnSorts || {};
    state.total = r.body.total;
    state.tokens[state.page + 1] = (r.body.metadata && r.body.metadata.continue) || "";
    state.tokens.length = state.page + 2;
    state.took = Math.round(performance.now() - t0);
    renderResults(live);
    renderBanner(r.warnings, r.body.clusters || []);
    // When the first rows were on the page, from the navigation's start (the benchmark reads it).
    if (!document.body.dataset.firstRowsMs) document.body.dataset.firstRowsMs = String(Math.round(performance.now()));
    document.body.dataset.ready = String(state.generation);
  } catch (e) {
    if (gen !== state.generation) return;
    if (e.status === 410 && state.page > 0) {
      showError("These pages expired (" + e.message + "); starting again from the first page.");
      return runSearch({ page: 0 });
    }
    if (!live) { state.items = []; state.rows = []; state.total = 0; renderResults(false); }
    showError(e.message);
    document.body.dataset.ready = String(state.generation);
  }
  await facetsDone;
}

function showError(msg) {
  $("error").textContent = msg;
  $("error").hidden = false;
}

// ---- rendering ----

// A column sorts on the server when the REST search's sort has its field (an indexed one). STATUS
// is indexed as the kind's Status cell (sort=status; kinds without one, and custom resources, sort
// last). The kind's own Table columns sort by the keys the indexer stored for each
// (sort=columns.<id>, named per column by the answer's columnSorts), when the box names that one
// resource (kind:pods): a column means one thing in one kind only. A custom resource's columns do
// not sort (its CRD's, not indexed).
const BASE = [
  { name: "CLUSTER", sort: "cluster" },
  { name: "NAMESPACE", sort: "namespace" },
  { name: "KIND", sort: "kind" },
  { name: "NAME", sort: "name" },
  { name: "STATUS", sort: "status" },
  { name: "AGE", sort: "creationTimestamp", reverse: true },
];

// kindColumns are the Table columns of the page's one resource, those BASE does not show already,
// with the columns kubectl shows only with -o wide when state.wide; a page of several kinds shows
// BASE only.
function kindColumns() {
  const resources = new Set(state.rows.map((r) => r.resource));
  if (resources.size !== 1) return { resource: "", cols: [] };
  const resource = [...resources][0];
  const defs = state.columns[resource] || [];
  const cols = [];
  defs.forEach((d, i) => {
    if (i === 0) return; // the row's first cell is the name
    if (["name", "status", "age", "created at"].includes(d.name.toLowerCase()) || (d.priority > 0 && !state.wide)) return;
    const sort = (state.columnSorts[resource] || [])[i] || "";
    cols.push({ name: d.name.toUpperCase(), index: i, description: d.description, sort });
  });
  return { resource, cols };
}

const isColumnSort = (sort) => sort.startsWith("columns.");

// oneResource is the resource the box names when it names exactly one (kind:pods), else "".
function oneResource(f) {
  return f.resources.length === 1 ? f.resources[0] : "";
}

function statusCell(row) {
  if (!row) return "";
  const defs = state.columns[row.resource] || [];
  for (const want of ["status", "phase"]) {
    const i = defs.findIndex((d) => d.name.toLowerCase() === want);
    if (i >= 0) return String(row.cells[i] ?? "");
  }
  return "";
}

function renderHead(extra) {
  const head = $("head");
  head.replaceChildren();
  const [field, dir] = state.sort.split(":");
  for (const c of BASE) {
    const attrs = { scope: "col" };
    if (c.sort) {
      attrs.class = "sortable";
      attrs.title = "Sort by " + c.name.toLowerCase();
      attrs["data-sort"] = c.sort;
      if (field === c.sort) attrs["aria-sort"] = (dir === "desc") !== !!c.reverse ? "descending" : "ascending";
      attrs.onclick = () => sortBy(c);
    }
    head.append(el("th", attrs, c.name));
  }
  const one = oneResource(parseBox(state.text));
  for (const c of extra) {
    const attrs = { scope: "col", title: c.description || "" };
    if (c.sort && one) {
      attrs.class = "sortable";
      attrs.title = "Sort by " + c.name.toLowerCase() + (c.description ? ": " + c.description : "");
      attrs["data-sort"] = c.sort;
      if (field === c.sort) attrs["aria-sort"] = dir === "desc" ? "descending" : "ascending";
      attrs.onclick = () => sortBy(c);
    } else if (c.sort) {
      attrs.title = (c.description ? c.description + " " : "") + "(sorts when the search names this one kind: kind:…)";
    }
    head.append(el("th", attrs, c.name));
  }
}

function sortBy(c) {
  const [field, dir] = state.sort.split(":");
  const natural = c.reverse ? "desc" : "asc";
  const next = field === c.sort && dir === natural ? (natural === "asc" ? "desc" : "asc") : natural;
  state.sort = c.sort + ":" + next;
  if (isColumnSort(c.sort)) state.sortResource = oneResource(parseBox(state.text));
  runSearch({ push: true });
}

function renderResults(live) {
  const { cols } = kindColumns();
  renderHead(cols);
  const body = $("rows");
  const prevKey = state.selected >= 0 && state.items[state.selected] ? key(state.items[state.selected]) : "";
  body.replaceChildren();
  const keys = new Set();
  state.selected = -1;
  state.items.forEach((o, i) => {
    const row = state.rows[i];
    const k = key(o);
    keys.add(k);
    if (k === prevKey) state.selected = i;
    const cells = [
      clusterOf(o), o.metadata.namespace || "", o.kind, o.metadata.name, statusCell(row), age(o.metadata.creationTimestamp),
      ...cols.map((c) => (row ? String(row.cells[c.index] ?? "") : "")),
    ];
    const tr = el("tr", {
      "data-index": i, "data-key": k, "aria-selected": String(k === prevKey),
      class: live && !state.lastKeys.has(k) ? "fresh" : undefined,
      onclick: () => { select(i); openObject(o); },
    }, cells.map((c) => el("td", {}, c)));
    body.append(tr);
  });
  state.lastKeys = keys;
  const from = state.items.length ? state.page * PAGE_SIZE + 1 : 0;
  const to = state.page * PAGE_SIZE + state.items.length;
  $("range").textContent = `${from.toLocaleString("en")}–${to.toLocaleString("en")} of ${state.total.toLocaleString("en")}`;
  $("summary").textContent = `${state.total.toLocaleString("en")} objects` + (state.took !== undefined ? ` · first page in ${state.took} ms` : "");
  $("prev").disabled = state.page === 0;
  $("next").disabled = !state.tokens[state.page + 1];
}

function renderFacets(f) {
  const spec = [
    ["resource", "Kinds", "resources"],
    ["cluster", "Clusters", "clusters"],
    ["namespace", "Namespaces", "namespaces"],
  ];
  for (const [name, title, list] of spec) {
    const box = $("facet-" + name);
    const facet = state.facets[name] || { buckets: [] };
    const picks = (b) => f[list].some((v) => v === b || (name === "resource" && b.startsWith(v + ".")));
    const items = facet.buckets.map((b) => [b.value, b.count]);
    for (const v of f[list]) if (!items.some(([b]) => b === v || (name === "resource" && b.startsWith(v + ".")))) items.push([v, 0]);
    box.replaceChildren(el("h4", {}, title + (facet.other ? ` (+${facet.other.toLocaleString("en")} more)` : "")),
      ...items.map(([v, n]) => el("label", { "data-facet": name, "data-value": v },
        el("input", { type: "checkbox", checked: picks(v), onchange: (ev) => toggleFilter(list, v, ev.target.checked) }),
        el("span", { class: "v", title: v }, v), el("span", { class: "n" }, n.toLocaleString("en")))));
  }
}

function toggleFilter(list, value, on) {
  const f = parseBox(state.text);
  f[list] = f[list].filter((v) => v !== value && !(list === "resources" && value.startsWith(v + ".")));
  if (on) f[list].push(value);
  state.text = formatBox(f);
  $("box").value = state.text;
  runSearch({ push: true });
}

function renderBanner(warnings, clusters) {
  const lines = [...new Set(warnings)];
  for (const c of clusters) {
    if (c.state === "Failed") lines.push(`${c.name}: collection failed${c.reason ? ": " + c.reason : ""}`);
  }
  const b = $("banner");
  b.textContent = lines.length ? "Answers may be stale or incomplete:\n" + lines.join("\n") : "";
  b.hidden = !lines.length;
}

function select(i) {
  const trs = $("rows").children;
  if (!trs.length) return;
  i = Math.max(0, Math.min(trs.length - 1, i));
  if (state.selected >= 0 && trs[state.selected]) trs[state.selected].setAttribute("aria-selected", "false");
  state.selected = i;
  trs[i].setAttribute("aria-selected", "true");
  trs[i].scrollIntoView({ block: "nearest" });
}

// ---- the side panel ----

// yaml writes a JSON value as YAML: strings that could read as another type, or hold special
// characters, are double-quoted (JSON strings are valid YAML), so the text is exact.
function yaml(v, indent) {
  indent = indent || "";
  const scalar = (x) => {
    if (x === null) return "null";
    if (typeof x !== "string") return String(x);
    if (x === "" || /^[\s\-?:,[\]{}#&*!|>'"%@`]|[:#]\s|\s$|[\n\t\\"]|:$/.test(x) ||
        /^(true|false|yes|no|on|off|null|~|y|n)$/i.test(x) || !isNaN(Number(x))) return JSON.stringify(x);
    return x;
  };
  if (Array.isArray(v)) {
    if (!v.length) return "[]";
    return v.map((x) => {
      if (x && typeof x === "object" && Object.keys(x).length) {
        const inner = yaml(x, indent + "  ");
        return indent + "- " + inner.slice(indent.length + 2);
      }
      return indent + "- " + (x && typeof x === "object" ? yaml(x, "") : scalar(x));
    }).join("\n");
  }
  if (v && typeof v === "object") {
    const keys = Object.keys(v);
    if (!keys.length) return "{}";
    return keys.map((k) => {
      const x = v[k];
      const kk = scalar(k);
      if (x && typeof x === "object" && (Array.isArray(x) ? x.length : Object.keys(x).length)) {
        return indent + kk + ":\n" + yaml(x, Array.isArray(x) ? indent : indent + "  ");
      }
      return indent + kk + ": " + (x && typeof x === "object" ? yaml(x, "") : scalar(x));
    }).join("\n");
  }
  return indent + scalar(v);
}

function refItem(o, note) {
  return el("li", {}, el("a", { tabindex: "0", "data-key": key(o), onclick: () => openObject(o, true),
    onkeydown: (e) => { if (e.key === "Enter") openObject(o, true); } },
  `${clusterOf(o)} · ${o.metadata.namespace ? o.metadata.namespace + " · " : ""}${o.kind}/${o.metadata.name}`), note ? el("span", { class: "muted" }, " " + note) : null);
}

function fillRefs(id, items, empty) {
  $(id).replaceChildren(...(items.length ? items : [el("li", { class: "none" }, empty)]));
}

async function showObject(o, push) {
  state.open = o;
  writeURL(!!push);
  $("panel").hidden = false;
  $("panel-title").textContent = `${clusterOf(o)} / ${o.metadata.namespace ? o.metadata.namespace + " / " : ""}${o.kind} / ${o.metadata.name}`;
  $("yaml").textContent = yaml(o);
  for (const id of ["owners", "owned", "repeats"]) fillRefs(id, [], "…");
  const cluster = clusterOf(o);
  const ns = o.metadata.namespace || "";
  const nsParams = (p) => { if (ns) p.set("namespaces", ns); return p; };
  // Owners: the objects the references name, in the same cluster and namespace.
  const refs = o.metadata.ownerReferences || [];
  const owners = Promise.all(refs.map(async (ref) => {
    const p = nsParams(new URLSearchParams({ clusters: cluster, names: ref.name, limit: "10" }));
    try {
      const r = await api(SEARCH, p);
      const hit = (r.body.items || []).find((x) => x.metadata.uid === ref.uid) || (r.body.items || []).find((x) => x.kind === ref.kind);
      return hit ? refItem(hit, ref.controller ? "(controller)" : "") : el("li", {}, `${ref.kind}/${ref.name} (not cached)`);
    } catch (e) { return el("li", {}, `${ref.kind}/${ref.name} (${e.message})`); }
  })).then((lis) => { if (state.open === o) fillRefs("owners", lis, "none"); });
  // Owned: objects whose owner is this kind and name, in every cluster (the same app's rollout).
  const owned = api(SEARCH, nsParams(new URLSearchParams({ owner: `${o.kind}/${o.metadata.name}`, limit: "50", metadataOnly: "true" })))
    .then((r) => { if (state.open === o) fillRefs("owned", (r.body.items || []).map((x) => refItem(x)), "none"); })
    .catch((e) => fillRefs("owned", [], e.message));
  // Repeats: the same kind, namespace and name in other clusters.
  const repeats = api(SEARCH, nsParams(new URLSearchParams({ names: o.metadata.name, limit: "100", metadataOnly: "true" })))
    .then((r) => {
      if (state.open !== o) return;
      const others = (r.body.items || []).filter((x) => x.kind === o.kind && x.apiVersion === o.apiVersion && clusterOf(x) !== cluster);
      fillRefs("repeats", others.map((x) => refItem(x)), "only in " + cluster);
    }).catch((e) => fillRefs("repeats", [], e.message));
  await Promise.all([owners, owned, repeats]);
  document.body.dataset.panel = key(o);
}

// openObject shows an object in the panel; one opened from the panel's references may be metadata
// only, so the whole object is read first.
async function openObject(o, push) {
  if (!o.spec && !o.data && !o.status && o.metadata) {
    const p = new URLSearchParams({ clusters: clusterOf(o), names: o.metadata.name, limit: "10" });
    if (o.metadata.namespace) p.set("namespaces", o.metadata.namespace);
    try {
      const r = await api(SEARCH, p);
      o = (r.body.items || []).find((x) => x.metadata.uid === o.metadata.uid) || o;
    } catch (_) { /* shown as it is */ }
  }
  return showObject(o, push);
}

function closePanel() {
  state.open = null;
  state.pendingOpen = "";
  $("panel").hidden = true;
  delete document.body.dataset.panel;
  writeURL(false);
}

async function openFromURL(spec) {
  state.pendingOpen = spec;
  const parts = spec.split("/");
  if (parts.length < 5) { state.pendingOpen = ""; return; }
  const [cluster, ns] = parts;
  const name = parts[parts.length - 1], kind = parts[parts.length - 2], apiVersion = parts.slice(2, parts.length - 2).join("/");
  const p = new URLSearchParams({ clusters: cluster, names: name, limit: "10" });
  if (ns) p.set("namespaces", ns);
  try {
    const r = await api(SEARCH, p);
    const o = (r.body.items || []).find((x) => x.kind === kind && x.apiVersion === apiVersion);
    state.pendingOpen = "";
    if (o) openObject(o, false);
    else showError(`${kind} ${ns ? ns + "/" : ""}${name} is not in ${cluster} (or not yours to see)`);
  } catch (e) {
    // A 401 keeps it: the sign-in starts the page again, which opens it then.
    if (e.status !== 401) { state.pendingOpen = ""; showError(e.message); }
  }
}

// ---- the fleet strip ----

async function refreshFleet() {
  let r;
  try { r = await api(FLEET); } catch (e) { return; }
  renderFleet(r.body.items || []);
}

// renderFleet summarises the fleet status per cluster so that it stays one glance at 1,000
// clusters: counts per state, one small cell per cluster (its name, state, lag and reasons in the
// title), and the failing clusters listed with their reasons.
function renderFleet(items) {
  const byCluster = new Map();
  for (const p of items) {
    const c = byCluster.get(p.cluster) || { name: p.cluster, failed: [], listing: false, unknown: false, lag: 0 };
    if (p.state === "Failed") c.failed.push(`${p.resource}${p.group ? "." + p.group : ""}: ${p.reason || "failed"}`);
    else if (p.state !== "Running") c.unknown = true;
    if (p.listing) c.listing = true;
    if (p.lagSeconds) c.lag = Math.max(c.lag, p.lagSeconds);
    byCluster.set(p.cluster, c);
  }
  const clusters = [...byCluster.values()].sort((a, b) => a.name.localeCompare(b.name));
  const counts = { synced: 0, listing: 0, failing: 0, unknown: 0 };
  for (const c of clusters) {
    c.state = c.failed.length ? "failing" : c.listing ? "listing" : c.unknown ? "unknown" : "synced";
    counts[c.state]++;
  }
  const maxLag = clusters.reduce((m, c) => Math.max(m, c.lag), 0);
  const strip = $("fleet");
  strip.dataset.clusters = String(clusters.length);
  strip.replaceChildren(
    el("div", { class: "counts" },
      el("b", {}, `${clusters.length.toLocaleString("en")} clusters`),
      ...["synced", "listing", "failing", "unknown"].map((s) => el("span", { "data-state": s }, el("span", { class: "dot " + s }), `${counts[s].toLocaleString("en")} ${s}`)),
      el("span", { class: "muted" }, `freshness lag: ${maxLag ? maxLag.toFixed(1) + " s (worst)" : "none"}`)),
    el("div", { class: "cells" }, clusters.map((c) => el("button", {
      type: "button", class: "cell " + c.state, "data-cluster": c.name, tabindex: "-1",
      title: `${c.name}: ${c.state}${c.lag ? `, ${c.lag.toFixed(1)} s behind` : ""}${c.failed.length ? "\n" + c.failed.join("\n") : ""}`,
      onclick: () => toggleFilter("clusters", c.name, !parseBox(state.text).clusters.includes(c.name)),
    }))),
    ...(counts.failing ? [el("ul", { class: "failing-list" }, clusters.filter((c) => c.failed.length).slice(0, 50).map((c) =>
      el("li", { "data-cluster": c.name }, `${c.name}: ${c.failed.join("; ")}`)))] : []));
}

// ---- completion ----

const PREFIXES = ["kind:", "cluster:", "ns:", "name:", "owner:", "label:", "field:"];

function suggestions(tokenText) {
  const facet = (n) => (state.facets[n] ? state.facets[n].buckets : []);
  const m = /^(kind|k|cluster|c|ns|namespace|n):(.*)$/.exec(tokenText);
  if (m) {
    const dim = { kind: "resource", k: "resource", cluster: "cluster", c: "cluster", ns: "namespace", namespace: "namespace", n: "namespace" }[m[1]];
    const done = m[2].split(",");
    const part = done.pop();
    return facet(dim).filter((b) => b.value.startsWith(part) && !done.includes(b.value))
      .map((b) => ({ text: `${m[1]}:${[...done, b.value].join(",")}`, count: b.count }));
  }
  const pairs = facet("labels");
  const eq = tokenText.indexOf("=");
  if (eq > 0) {
    const k = tokenText.slice(0, eq).replace(/!$/, "");
    return pairs.filter((b) => b.value.startsWith(k + "=") && b.value.slice(k.length + 1).startsWith(tokenText.slice(eq + 1).replace(/^=/, "")))
      .map((b) => ({ text: tokenText.slice(0, eq + (tokenText[eq + 1] === "=" ? 2 : 1)) + b.value.slice(k.length + 1), count: b.count }));
  }
  if (!tokenText) return [];
  const keys = new Map();
  for (const b of pairs) {
    const k = b.value.slice(0, b.value.indexOf("="));
    if (k.startsWith(tokenText)) keys.set(k, (keys.get(k) || 0) + b.count);
  }
  return [
    ...PREFIXES.filter((p) => p.startsWith(tokenText) && p !== tokenText).map((p) => ({ text: p })),
    ...[...keys].map(([k, n]) => ({ text: k + "=", count: n })),
  ];
}

const suggest = { items: [], active: -1 };

// labelFacet asks, once per search, for the label pairs of its matches, for completion.
let labelsAsked = null;
function labelFacet() {
  if (state.labelsFor === state.text || labelsAsked === state.text) return;
  const text = labelsAsked = state.text;
  const p = searchParams(parseBox(text));
  p.set("limit", "1");
  p.set("metadataOnly", "true");
  p.set("facets", "labels");
  p.set("facetSize", "100");
  api(SEARCH, p).then((r) => {
    if (text !== state.text) return;
    state.facets.labels = (r.body.facets || [])[0];
    state.labelsFor = text;
    if (document.activeElement === $("box")) updateSuggest();
  }).catch(() => { /* completion without labels */ }).finally(() => { labelsAsked = null; });
}

function currentToken() {
  const box = $("box");
  const upto = box.value.slice(0, box.selectionStart);
  const start = upto.search(/\S*$/);
  return { start, text: upto.slice(start) };
}

function updateSuggest() {
  const { text } = currentToken();
  if (text && !/^(kind|k|cluster|c|ns|namespace|n|name|owner|field|f):/.test(text)) labelFacet();
  suggest.items = suggestions(text).slice(0, 20);
  suggest.active = -1;
  const ul = $("suggest");
  ul.replaceChildren(...suggest.items.map((s, i) => el("li", { role: "option", id: "sg-" + i, "aria-selected": "false",
    onmousedown: (e) => { e.preventDefault(); acceptSuggestion(i); } },
  el("span", {}, s.text), s.count !== undefined ? el("span", { class: "n" }, s.count.toLocaleString("en")) : null)));
  ul.hidden = !suggest.items.length;
}

function moveSuggest(d) {
  const lis = $("suggest").children;
  if (!lis.length) return;
  if (suggest.active >= 0) lis[suggest.active].setAttribute("aria-selected", "false");
  suggest.active = (suggest.active + d + lis.length) % lis.length;
  lis[suggest.active].setAttribute("aria-selected", "true");
  lis[suggest.active].scrollIntoView({ block: "nearest" });
}

function acceptSuggestion(i) {
  const box = $("box");
  const { start } = currentToken();
  const s = suggest.items[i].text;
  const rest = box.value.slice(box.selectionStart);
  const open = s.endsWith(":") || s.endsWith("=");
  box.value = box.value.slice(0, start) + s + (open ? "" : " ") + rest.replace(/^\S*/, "");
  const caret = start + s.length + (open ? 0 : 1);
  box.setSelectionRange(caret, caret);
  updateSuggest();
}

// ---- wiring ----

function submit() {
  $("suggest").hidden = true;
  state.text = $("box").value.trim();
  state.selected = -1;
  runSearch({ push: true });
}

function inEditable(t) { return t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.isContentEditable); }

function wire() {
  $("search-form").addEventListener("submit", (e) => { e.preventDefault(); submit(); });
  const box = $("box");
  box.addEventListener("input", updateSuggest);
  box.addEventListener("blur", () => { $("suggest").hidden = true; });
  box.addEventListener("keydown", (e) => {
    const open = !$("suggest").hidden;
    if (e.key === "ArrowDown" && open) { e.preventDefault(); moveSuggest(1); }
    else if (e.key === "ArrowUp" && open) { e.preventDefault(); moveSuggest(-1); }
    else if ((e.key === "Tab" || e.key === "Enter") && open && suggest.active >= 0) { e.preventDefault(); acceptSuggestion(suggest.active); }
    else if (e.key === "Tab" && open && suggest.items.length === 1) { e.preventDefault(); acceptSuggestion(0); }
    else if (e.key === "Escape") { $("suggest").hidden = true; if (!open) box.blur(); }
    else if (e.key === "ArrowDown" && !open) { e.preventDefault(); box.blur(); select(state.selected < 0 ? 0 : state.selected); }
  });
  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey || signinOpen) return;
    if (inEditable(e.target)) return;
    switch (e.key) {
      case "/": e.preventDefault(); box.focus(); box.select(); break;
      case "ArrowDown": case "j": e.preventDefault(); select(state.selected + 1); break;
      case "ArrowUp": case "k": e.preventDefault(); select(state.selected - 1); break;
      case "Enter": if (state.selected >= 0 && state.items[state.selected]) { e.preventDefault(); openObject(state.items[state.selected], true); } break;
      case "ArrowRight": if (!$("next").disabled) { e.preventDefault(); nextPage(); } break;
      case "ArrowLeft": if (!$("prev").disabled) { e.preventDefault(); prevPage(); } break;
      case "Escape": if (state.open) closePanel(); break;
      case "w": e.preventDefault(); setWide(!state.wide); break;
    }
  });
  $("wide").addEventListener("change", (e) => setWide(e.target.checked));
  $("next").addEventListener("click", nextPage);
  $("prev").addEventListener("click", prevPage);
  $("panel-close").addEventListener("click", closePanel);
  $("signin-form").addEventListener("submit", () => {
    const t = $("token").value.trim();
    if (t) sessionStorage.setItem(TOKEN_KEY, t);
    signinOpen = false;
    start();
  });
  $("signin").addEventListener("cancel", () => { signinOpen = false; });
  $("signout").addEventListener("click", () => { sessionStorage.removeItem(TOKEN_KEY); location.reload(); });
  window.addEventListener("popstate", () => { const open = readURL(); runSearch(); if (open) openFromURL(open); else if (state.open) closePanel(); });
}

// setWide shows or hides the kind's -o wide columns: the rows hold every cell already, so the
// page is drawn again without a request; the URL keeps the choice.
function setWide(on) {
  state.wide = on;
  $("wide").checked = on;
  writeURL(true);
  renderResults(false);
}

function nextPage() { state.selected = -1; runSearch({ page: state.page + 1 }); }
function prevPage() { state.selected = -1; runSearch({ page: state.page - 1 }); }

let timers = [];
function start() {
  $("signout").hidden = !token();
  const open = readURL();
  runSearch().then(() => { if (open) openFromURL(open); });
  refreshFleet();
  for (const t of timers) clearInterval(t);
  timers = [
    // Live: the first page again (later pages are one snapshot, read as they were). A page hidden
    // in a background tab asks nothing.
    setInterval(() => { if (!document.hidden && state.page === 0 && !signinOpen) runSearch({ live: true }); }, POLL_MS),
    setInterval(() => { if (!document.hidden && !signinOpen) refreshFleet(); }, FLEET_MS),
  ];
}

wire();
start();
