// gwhub web status page. Plain JavaScript, no framework, no other origin:
// the hub serves this file, the JSON API and the Server-Sent Events stream
// (see hub/api/src/web/mod.rs). Every string from the hub goes into the page as
// text (textContent), never as HTML, and shown through printable().
'use strict';

const TOKEN_COOKIE = 'gwhub_token';
const state = {
  clusters: [],          // [{name, connected, stale, gatewayCount, lastSeenMillis, neverConnected, outsideInventory}]
  gateways: new Map(),   // "ns/name" -> gateway JSON
  namespaces: new Set(),
  selected: null,        // "ns/name"
  source: null,          // EventSource
  events: 0,             // events applied (for tests and the bench)
  lastEventAt: 0,        // performance.now() of the last applied event
  rendered: 0,           // renders done
  // The first snapshot: when it arrived and was drawn (performance.now(),
  // ms since the page started loading) and its size; for the bench.
  firstSnapshot: null,
  causes: null,          // /api/causes: what is not ready, grouped by cause
  causesLoaded: 0,       // answers of /api/causes applied (for tests)
  causeClusters: null,   // the chosen cause's clusters (Set), or null
  dns: null,             // /api/dns: fleet DNS per hostname
  dnsLoaded: 0,          // answers of /api/dns applied (for tests)
};
window.gwhub = state;

const $ = (id) => document.getElementById(id);

// gwhubctl's rule (gwhub_model::text::printable): control characters and
// bidirectional controls escaped as Rust writes them, so a rogue cluster's
// names cannot reorder what the page shows. A test in hub/api/src/web/mod.rs
// holds this character class to the Rust rule.
const UNSAFE_CHARS = /[\u0000-\u001f\u007f-\u009f\u061c\u200e-\u200f\u202a-\u202e\u2066-\u2069]/g;
const ESCAPES = { '\t': '\\t', '\n': '\\n', '\r': '\\r' };
function printable(s) {
  return String(s).replace(UNSAFE_CHARS,
    (c) => ESCAPES[c] || '\\u{' + c.codePointAt(0).toString(16) + '}');
}

const el = (tag, cls, text) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = printable(text);
  return e;
};
const keyOf = (g) => g.namespace + '/' + g.name;

// ---- filters: in the address (shareable), sent to the hub ----------------

function filters() {
  const p = new URLSearchParams(location.search);
  return {
    namespace: p.get('namespace') || '',
    cluster: p.get('cluster') || '',
    notReady: p.get('not_ready') === '1',
  };
}

function setFilters(f) {
  // The list's own settings (view()) stay in the address.
  const p = new URLSearchParams(location.search);
  for (const k of ['namespace', 'cluster', 'not_ready']) p.delete(k);
  if (f.namespace) p.set('namespace', f.namespace);
  if (f.cluster) p.set('cluster', f.cluster);
  if (f.notReady) p.set('not_ready', '1');
  const q = p.toString();
  history.replaceState(null, '', location.pathname + (q ? '?' + q : '') + location.hash);
  connect();
}

function query() {
  const f = filters();
  const p = new URLSearchParams();
  if (f.namespace) p.set('namespace', f.namespace);
  if (f.cluster) p.set('cluster', f.cluster);
  if (f.notReady) p.set('not_ready', '1');
  return p.toString();
}

// ---- the token: a cookie the API and EventSource send by themselves -------

function saveToken(token) {
  const secure = location.protocol === 'https:' ? '; Secure' : '';
  document.cookie = TOKEN_COOKIE + '=' + encodeURIComponent(token) + '; path=/; SameSite=Strict' + secure;
}

function tokenFromFragment() {
  const m = /^#token=(.+)$/.exec(location.hash);
  if (m) {
    saveToken(decodeURIComponent(m[1]));
    history.replaceState(null, '', location.pathname + location.search);
  }
}

function askToken(message) {
  $('token-form').classList.remove('hidden');
  $('token-error').textContent = printable(message || '');
  setLive(false, 'token needed');
}

// ---- live connection ------------------------------------------------------

function setLive(on, text) {
  const l = $('live');
  l.className = 'live ' + (on ? 'on' : 'off');
  l.textContent = text;
}

let retry = null;

function connect() {
  if (state.source) { state.source.close(); state.source = null; }
  clearTimeout(retry);
  setLive(false, 'connecting');
  const es = new EventSource('api/events?' + query());
  state.source = es;
  es.addEventListener('snapshot', (e) => {
    $('token-form').classList.add('hidden');
    const at = performance.now();
    applySnapshot(JSON.parse(e.data));
    if (!state.firstSnapshot) {
      state.firstSnapshot = { at, drawn: performance.now(), bytes: e.data.length };
    }
  });
  es.addEventListener('change', (e) => applyChange(JSON.parse(e.data)));
  es.onopen = () => setLive(true, 'live');
  es.onerror = () => {
    if (es.readyState !== EventSource.CLOSED) { setLive(false, 'reconnecting'); return; }
    // EventSource gives up on an HTTP error without saying which: ask.
    whyClosed();
  };
}

async function whyClosed() {
  let r = null;
  try {
    // The stream's own question: a refusal is the same for both.
    r = await fetch('api/fleet?' + query(), { credentials: 'same-origin', cache: 'no-store' });
  } catch (e) { /* unreachable: retried below */ }
  if (r && r.status === 401) { askToken(); return; }
  if (r && r.status === 403) {
    // --dashboard-auth=kubernetes: RBAC does not let this token read it.
    let why = 'forbidden';
    try { why = (await r.json()).error || why; } catch (e) { /* keep the word */ }
    askToken(why);
    return;
  }
  setLive(false, (r ? 'hub answered ' + r.status : 'hub unreachable') + '; retrying');
  retry = setTimeout(connect, 2000);
}

function applySnapshot(d) {
  state.clusters = d.clusters;
  state.gateways = new Map();
  for (const g of d.gateways) { state.gateways.set(keyOf(g), g); state.namespaces.add(g.namespace); }
  state.events++;
  state.lastEventAt = performance.now();
  render();
  refreshDetails(true);
  afterEvent();
}

function applyChange(d) {
  const columnsBefore = columnKey();
  state.clusters = d.clusters;
  let structural = columnKey() !== columnsBefore;
  const changed = [];
  for (const g of d.upserted) {
    const k = keyOf(g);
    if (!state.gateways.has(k)) structural = true;
    state.gateways.set(k, g);
    state.namespaces.add(g.namespace);
    changed.push(k);
  }
  for (const r of d.deleted) { state.gateways.delete(keyOf(r)); structural = true; }
  state.events++;
  state.lastEventAt = performance.now();
  if (structural) {
    render();
  } else {
    for (const k of changed) replaceRow(k);
    renderCounts();
  }
  if (state.selected && (changed.includes(state.selected) || !state.gateways.has(state.selected))) {
    refreshDetails(false);
  }
  afterEvent();
}

// ---- the overview --------------------------------------------------------

function visibleClusters() {
  const f = filters();
  const v = view();
  return state.clusters.filter((c) => (!f.cluster || c.name === f.cluster) && onClusterAxis(c.name, v));
}

function columnKey() {
  return visibleClusters().map((c) => c.name + (c.stale ? '!' : '') + (c.connected ? '' : '~')
    + (c.neverConnected ? '?' : '') + (c.outsideInventory ? '^' : '')).join(',');
}

function render() {
  renderFilters();
  const table = $('overview');
  const head = el('tr');
  head.appendChild(el('th', 'gw', 'Hub Gateway'));
  head.appendChild(el('th', null, 'Aggregated'));
  const visible = visibleClusters();
  compactGrid = visible.length > COLUMN_LIMIT;
  if (compactGrid) head.appendChild(summaryHeader(visible));
  for (const c of compactGrid ? [] : visible) {
    const th = el('th', 'cluster' + (c.stale ? ' stale' : '') + (c.connected ? '' : ' disconnected')
      + (c.neverConnected ? ' never-connected' : '') + (c.outsideInventory ? ' outside-inventory' : ''),
      c.name + (c.stale ? ' (stale)' : '') + (c.neverConnected ? ' (never connected)' : '')
      + (c.outsideInventory ? ' (outside inventory)' : ''));
    th.dataset.cluster = c.name;
    th.title = printable(c.name) + ': ' + (c.stale ? 'STALE, no report or heartbeat within --stale-after; ' : '')
      + (c.neverConnected ? 'in the fleet inventory, NEVER CONNECTED; ' : '')
      + (c.outsideInventory ? 'NOT in the fleet inventory; ' : '')
      + (c.connected ? 'agent connected' : 'agent not connected') + ', ' + c.gatewayCount + ' Gateways';
    head.appendChild(th);
  }
  const thead = table.tHead;
  thead.replaceChildren(head);
  const body = document.createElement('tbody');
  const keys = [...state.gateways.keys()].sort();
  for (const k of keys) body.appendChild(row(state.gateways.get(k)));
  table.tBodies[0].replaceWith(body);
  $('empty').classList.toggle('hidden', keys.length > 0);
  renderCounts();
  state.rendered++;
}

function renderCounts() {
  const n = state.gateways.size;
  const bad = [...state.gateways.values()].filter((g) => g.notReady).length;
  const stale = state.clusters.filter((c) => c.stale).length;
  $('counts').textContent = n + ' hub Gateways (' + bad + ' not ready), '
    + state.clusters.length + ' clusters (' + stale + ' stale)';
}

function row(g) {
  const tr = el('tr');
  const k = keyOf(g);
  tr.dataset.gateway = k;
  tr.dataset.revision = g.revision;
  if (k === state.selected) tr.classList.add('selected');
  tr.appendChild(el('td', 'gw', k));
  const agg = el('td');
  agg.appendChild(el('span', 'badge ' + (g.notReady ? 'not-ready' : 'ready'), g.notReady ? 'not ready' : 'ready'));
  tr.appendChild(agg);
  const cells = new Map(g.cells.map((c) => [c.cluster, c]));
  const expected = new Map((g.missing || []).map((m) => [m.cluster, m]));
  if (compactGrid) tr.appendChild(summaryCell(cells, visibleClusters()));
  for (const c of compactGrid ? [] : visibleClusters()) {
    const cell = cells.get(c.name);
    const gone = !cell && expected.get(c.name);
    const td = el('td', 'cell ' + (cell ? cell.health : gone ? 'expected-missing' : 'missing')
      + (cell && cell.stale ? ' stale' : ''));
    td.dataset.cluster = c.name;
    if (cell) {
      td.dataset.health = cell.health;
      if (cell.stale) td.textContent = 'S';
      td.title = printable(c.name) + ': ' + cell.health.replace('-', ' ') + (cell.stale ? ' (STALE report)' : '');
    } else if (gone) {
      td.textContent = '!';
      td.title = printable(c.name) + (gone.neverReported ? ' is expected and NEVER REPORTED'
        : ' is expected but does NOT REPORT this Gateway');
    } else {
      td.textContent = '\u2013';
      td.title = printable(c.name) + ' does not report this Gateway';
    }
    tr.appendChild(td);
  }
  tr.addEventListener('click', () => select(k));
  return tr;
}

function replaceRow(k) {
  const old = document.querySelector('#overview tbody tr[data-gateway="' + CSS.escape(k) + '"]');
  const g = state.gateways.get(k);
  if (old && g) old.replaceWith(row(g)); else render();
  state.rendered++;
}

function renderFilters() {
  const f = filters();
  const fill = (sel, values, current) => {
    const want = ['', ...values];
    if (current && !want.includes(current)) want.push(current);
    const have = [...sel.options].map((o) => o.value);
    if (have.join('\n') !== want.join('\n')) {
      sel.replaceChildren(...want.map((v) => { const o = el('option', null, v || 'all'); o.value = v; return o; }));
    }
    sel.value = current;
  };
  fill($('f-namespace'), [...state.namespaces].sort(), f.namespace);
  fill($('f-cluster'), state.clusters.map((c) => c.name), f.cluster);
  $('f-not-ready').checked = f.notReady;
}

// ---- the fleet at scale: causes, a compact grid, the cluster list ---------

// More cluster columns than this and the grid shows one summary per hub
// Gateway instead (search or a cause bring the columns back).
const COLUMN_LIMIT = 50;
// Cluster names a cause shows before "and N more".
const CAUSE_CHIPS = 12;
let compactGrid = false;

// The list's settings, in the address next to the filters: q (search),
// sort, group, cause (the chosen cause, JSON).
function view() {
  const p = new URLSearchParams(location.search);
  return { q: p.get('q') || '', sort: p.get('sort') || 'name', group: p.get('group') || '', cause: p.get('cause') || '' };
}

function setView(v) {
  const p = new URLSearchParams(location.search);
  for (const [k, val] of Object.entries(v)) { if (val) p.set(k, val); else p.delete(k); }
  const q = p.toString();
  history.replaceState(null, '', location.pathname + (q ? '?' + q : '') + location.hash);
  chooseCauseClusters();
  render();
  renderCauses();
  renderClusterList();
}

function onClusterAxis(name, v) {
  if (v.q && !name.toLowerCase().includes(v.q.toLowerCase())) return false;
  return !state.causeClusters || state.causeClusters.has(name);
}

function causeId(g) {
  return JSON.stringify([g.kind, g.type, g.reason, g.message]);
}

function causeTitle(g) {
  if (g.kind === 'hub') return 'hub: ' + g.type + ' ' + (g.reason || '(no reason)');
  return g.kind === 'condition' ? g.type + ' ' + (g.reason || '(no reason)') : g.reason;
}

// The chosen cause's clusters, kept while the cause lasts.
function chooseCauseClusters() {
  const id = view().cause;
  if (!id) { state.causeClusters = null; return; }
  const g = state.causes && state.causes.groups.find((x) => causeId(x) === id);
  if (g) state.causeClusters = new Set(g.clusters);
  else if (!state.causeClusters) state.causeClusters = new Set();
}

let sideTimer = null;
let causesTimer = null;
let causesSeq = 0;
let causesAsked = -1e9;

// After each event: the causes (fetched 100 ms after it, so a burst is
// one fetch, and at most once a second) and the cluster list (redrawn at
// most every 250 ms).
function afterEvent() {
  if (!causesTimer) {
    const wait = Math.max(100, causesAsked + 1000 - performance.now());
    causesTimer = setTimeout(() => { causesTimer = null; causesAsked = performance.now(); loadCauses(); }, wait);
  }
  if (!sideTimer) sideTimer = setTimeout(() => { sideTimer = null; renderClusterList(); }, 250);
  // Fleet DNS decides after the views change (and coalesces its writes
  // for 250 ms): asked again shortly after an event.
  if (!dnsTimer) dnsTimer = setTimeout(() => { dnsTimer = null; loadDns(); }, 500);
}

// ---- fleet DNS: per hostname, from /api/dns --------------------------------

let dnsTimer = null;
let dnsSeq = 0;

async function loadDns() {
  const seq = ++dnsSeq;
  let r;
  try {
    r = await fetch('api/dns?' + new URLSearchParams({ namespace: filters().namespace }),
      { credentials: 'same-origin', cache: 'no-store' });
  } catch (e) { return; }
  if (seq !== dnsSeq || !r.ok) return;
  const d = await r.json();
  if (seq !== dnsSeq) return;
  state.dns = d;
  state.dnsLoaded++;
  renderDns();
}

const recordSets = (sets) => {
  const parts = Object.entries(sets || {}).map(([t, targets]) => t + ' ' + targets.join(', '));
  return parts.length ? parts.join('; ') : '-';
};

function renderDns() {
  const d = state.dns;
  $('dns').classList.toggle('hidden', !d || !d.enabled);
  if (!d || !d.enabled) return;
  const names = d.names || [];
  $('dns-summary').textContent = printable(names.length + (names.length === 1 ? ' name' : ' names')
    + (d.dryRun ? ', a dry run: nothing is sent' : '')
    + (d.outputs && d.outputs.length ? ', to ' + d.outputs.join(', ') : ''));
  $('dns-message').textContent = printable(d.message || '');
  $('dns-message').classList.toggle('hidden', !d.message);
  $('dns-names').tBodies[0].replaceChildren(...names.map((n) => {
    const tr = el('tr');
    tr.dataset.host = n.hostname;
    tr.dataset.state = n.state;
    tr.appendChild(el('td', 'gw', n.hostname));
    tr.appendChild(el('td', null, n.gateway));
    tr.appendChild(el('td', null, n.state + (n.stateMessage ? ': ' + n.stateMessage : '')));
    const published = el('td', 'published', recordSets(n.published));
    tr.appendChild(published);
    tr.appendChild(el('td', 'desired', recordSets(n.desired)));
    const cl = el('td', 'msg');
    for (const c of n.clusters || []) {
      const chip = el('span', 'chip ' + (c.eligible ? 'eligible' : 'ineligible'),
        c.eligible ? c.cluster : c.cluster + ': rule ' + c.rule + ' ' + c.reason);
      chip.dataset.cluster = c.cluster;
      chip.dataset.eligible = String(c.eligible);
      if (!c.eligible) chip.title = printable(c.message);
      cl.appendChild(chip);
    }
    tr.appendChild(cl);
    return tr;
  }));
}

async function loadCauses() {
  const seq = ++causesSeq;
  const t0 = performance.now();
  let r;
  try {
    r = await fetch('api/causes?' + query(), { credentials: 'same-origin', cache: 'no-store' });
  } catch (e) { return; }
  if (seq !== causesSeq || !r.ok) return;
  const d = await r.json();
  if (seq !== causesSeq) return;
  state.causes = d;
  state.causesLoaded++;
  state.causesMs = performance.now() - t0;   // fetch and parse (for the bench)
  const before = state.causeClusters ? [...state.causeClusters].join(',') : null;
  chooseCauseClusters();
  if ((state.causeClusters ? [...state.causeClusters].join(',') : null) !== before) render();
  renderCauses();
  renderClusterList();
}

function renderCauses() {
  const d = state.causes;
  if (!d) return;
  const chosen = view().cause;
  const n = d.groups.length + d.moreGroups;
  $('causes-summary').textContent = n + (n === 1 ? ' cause, ' : ' causes, ')
    + d.affectedClusters + ' of ' + d.clusterCount + ' clusters affected';
  $('causes-none').classList.toggle('hidden', d.groups.length > 0);
  $('cause-list').replaceChildren(...d.groups.map((g) => causeItem(g, causeId(g) === chosen)));
  if (d.moreGroups) $('cause-list').appendChild(el('li', 'cause more', 'and ' + d.moreGroups + ' smaller causes'));
  const g = d.groups.find((x) => causeId(x) === chosen);
  $('cause-filter').classList.toggle('hidden', !chosen);
  $('cause-filter-text').textContent = chosen
    ? printable('Cluster columns and list: the ' + (state.causeClusters ? state.causeClusters.size : 0)
      + ' clusters of ' + (g ? causeTitle(g) : 'a cause that is gone'))
    : '';
}

function causeItem(g, chosen) {
  const li = el('li', 'cause kind-' + g.kind + (chosen ? ' chosen' : ''));
  li.dataset.kind = g.kind;
  li.dataset.type = g.type;
  li.dataset.reason = g.reason;
  li.dataset.clusterCount = g.clusterCount;
  li.dataset.gatewayCount = g.gatewayCount;
  const head = el('div', 'head');
  const hub = g.kind === 'hub';
  head.title = hub ? 'the hub\'s own problem (no cluster reports it); click: open the first hub Gateway'
    : 'click: show only these clusters in the overview and the cluster list';
  head.appendChild(el('span', 'num', (hub ? '' : g.clusterCount + (g.clusterCount === 1 ? ' cluster' : ' clusters')
    + ' \u00b7 ') + g.gatewayCount + (g.gatewayCount === 1 ? ' Gateway' : ' Gateways')));
  head.appendChild(el('span', 'what', causeTitle(g)));
  const msg = el('span', 'msg', g.message);
  msg.title = 'as one cluster wrote it: ' + printable(g.example);
  head.appendChild(msg);
  head.addEventListener('click', () => {
    if (hub) { if (g.gateways.length) select(g.gateways[0]); } else setView({ cause: chosen ? '' : causeId(g) });
  });
  li.appendChild(head);
  const members = el('div', 'members');
  const shown = g.clusters.slice(0, CAUSE_CHIPS);
  const chips = el('span', 'chips');
  const fill = (names) => chips.replaceChildren(...names.map((n) => {
    const c = el('span', 'chip', n);
    c.dataset.cluster = n;
    return c;
  }));
  fill(shown);
  if (!hub) {
    members.appendChild(el('span', null, 'clusters: '));
    members.appendChild(chips);
  }
  const hidden = g.clusters.length - shown.length + g.moreClusters;
  if (hidden > 0) {
    const more = el('button', 'more-clusters', 'and ' + hidden + ' more');
    more.type = 'button';
    more.addEventListener('click', () => {
      fill(g.clusters);
      more.replaceWith(el('span', null, g.moreClusters ? ' and ' + g.moreClusters + ' not listed' : ''));
    });
    members.appendChild(more);
  }
  if (g.gateways.length) {
    members.appendChild(el('div', null, 'hub Gateways: ' + g.gateways.join(', ')
      + (g.moreGateways ? ' and ' + g.moreGateways + ' more' : '')));
  }
  li.appendChild(members);
  return li;
}

function summaryHeader(visible) {
  const th = el('th', 'summary', 'Clusters: ' + visible.length + ' (one summary per hub Gateway; search or choose a cause for columns)');
  return th;
}

// One hub Gateway across the visible clusters: a bar and its counts.
function summaryCell(cells, visible) {
  const n = { ready: 0, 'not-ready': 0, unknown: 0, stale: 0, missing: 0 };
  for (const c of visible) {
    const cell = cells.get(c.name);
    if (!cell) n.missing++; else if (cell.stale) n.stale++; else n[cell.health]++;
  }
  const td = el('td', 'summary');
  for (const [k, v] of Object.entries(n)) td.dataset[k.replace('-r', 'R')] = v;
  const line = el('div', 'inline');
  const bar = el('div', 'bar');
  for (const k of ['ready', 'not-ready', 'unknown', 'stale', 'missing']) {
    if (!n[k]) continue;
    const seg = el('span', k);
    seg.style.flexGrow = String(n[k]);
    bar.appendChild(seg);
  }
  line.appendChild(bar);
  line.appendChild(el('span', 'nums', n.ready + ' ready \u00b7 ' + n['not-ready'] + ' not ready \u00b7 '
    + n.unknown + ' unknown \u00b7 ' + n.stale + ' stale \u00b7 ' + n.missing + ' not reporting'));
  td.appendChild(line);
  return td;
}

// Per cluster: its cells' health over the listed hub Gateways.
function clusterStats() {
  const stats = new Map(state.clusters.map((c) => [c.name, { bad: 0, cells: 0 }]));
  for (const g of state.gateways.values()) {
    for (const c of g.cells) {
      const s = stats.get(c.cluster);
      if (!s) continue;
      s.cells++;
      if (c.stale || c.health !== 'ready') s.bad++;
    }
  }
  return stats;
}

function clusterState(c, never) {
  if (c.stale) return ['stale', 'stale'];
  if (never.has(c.name)) return ['never reported', 'never'];
  return c.connected ? ['connected', 'connected'] : ['disconnected', 'disconnected'];
}

function renderClusterList() {
  const v = view();
  const causesOf = new Map();
  const groups = (state.causes && state.causes.groups) || [];
  for (const g of groups) {
    for (const n of g.clusters) { if (!causesOf.has(n)) causesOf.set(n, []); causesOf.get(n).push(g); }
  }
  const never = new Set(groups.filter((g) => g.kind === 'neverReported').flatMap((g) => g.clusters));
  const stats = clusterStats();
  const problems = (c) => Math.max((stats.get(c.name) || { bad: 0 }).bad, c.stale || never.has(c.name) ? 1 : 0);
  let list = visibleClusters();
  if (v.sort === 'problems') {
    list = [...list].sort((a, b) => problems(b) - problems(a) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }
  const row = (c) => {
    const tr = el('tr');
    tr.dataset.cluster = c.name;
    tr.appendChild(el('td', 'gw', c.name));
    const [st, cls] = clusterState(c, never);
    tr.appendChild(el('td', 'st-' + cls, st));
    tr.appendChild(el('td', null, c.gatewayCount));
    const p = problems(c);
    tr.appendChild(el('td', p ? 'bad' : null, p));
    tr.appendChild(el('td', 'causes-of', (causesOf.get(c.name) || []).map(causeTitle).join('; ')));
    tr.title = 'click: only this cluster (the Cluster filter)';
    tr.addEventListener('click', () => setFilters({ ...filters(), cluster: c.name }));
    return tr;
  };
  const header = (text, n) => {
    const tr = el('tr', 'group');
    const th = el('th', null, text + ' (' + n + ')');
    th.colSpan = 5;
    tr.appendChild(th);
    return tr;
  };
  const rows = [];
  if (v.group === 'state') {
    const by = new Map();
    for (const c of list) { const s = clusterState(c, never)[0]; if (!by.has(s)) by.set(s, []); by.get(s).push(c); }
    for (const s of ['stale', 'never reported', 'disconnected', 'connected']) {
      if (by.has(s)) rows.push(header(s, by.get(s).length), ...by.get(s).map(row));
    }
  } else if (v.group === 'cause') {
    const inList = new Set(list.map((c) => c.name));
    const byName = new Map(list.map((c) => [c.name, c]));
    for (const g of groups) {
      const members = list.filter((c) => g.clusters.includes(c.name));
      if (members.length) rows.push(header(causeTitle(g) + ': ' + g.message, members.length), ...members.map(row));
    }
    const fine = [...inList].filter((n) => !causesOf.has(n)).map((n) => byName.get(n));
    if (fine.length) rows.push(header('no problem', fine.length), ...fine.map(row));
  } else {
    rows.push(...list.map(row));
  }
  const body = document.createElement('tbody');
  body.replaceChildren(...rows);
  $('cluster-list').tBodies[0].replaceWith(body);
  $('cl-counts').textContent = list.length + ' of ' + state.clusters.length + ' shown';
}

// ---- one hub Gateway -----------------------------------------------------

function select(k) {
  state.selected = k;
  for (const tr of document.querySelectorAll('#overview tbody tr')) {
    tr.classList.toggle('selected', tr.dataset.gateway === k);
  }
  refreshDetails(true);
}

let detailsSeq = 0;

async function refreshDetails(scroll) {
  const k = state.selected;
  const box = $('details');
  if (!k) { box.classList.add('hidden'); return; }
  const [ns, ...rest] = k.split('/');
  const seq = ++detailsSeq;
  const r = await fetch('api/gateway?' + new URLSearchParams({ namespace: ns, name: rest.join('/') }),
    { credentials: 'same-origin', cache: 'no-store' });
  if (seq !== detailsSeq) return;
  if (r.status === 401) { askToken(); return; }
  if (!r.ok) { box.classList.add('hidden'); return; }
  const d = await r.json();
  if (seq !== detailsSeq) return;
  box.classList.remove('hidden');
  const g = d.gateway;
  $('d-title').textContent = printable(keyOf(g)) + '  (revision ' + g.revision + ')';
  conditions($('d-conditions'), (g.status && g.status.conditions) || []);
  list($('d-addresses'), ((g.status && g.status.addresses) || []).map((a) => (a.type || 'IPAddress') + '  ' + a.value), 'none');
  listeners($('d-listeners'), (g.status && g.status.listeners) || []);
  list($('d-omissions'), g.omissions.map((o) => o.message + ' [' + o.rule + ']'), 'nothing left out');
  const reports = $('d-reports');
  reports.replaceChildren(...d.reports.map((rep) => {
    const div = el('div', 'report' + (rep.stale ? ' stale' : ''));
    div.dataset.cluster = rep.cluster;
    const h = el('h4', null, rep.cluster);
    if (rep.stale) h.appendChild(el('span', 'badge stale', 'stale'));
    div.appendChild(h);
    const t = el('table', 'conds');
    conditions(t, (rep.status && rep.status.conditions) || []);
    div.appendChild(t);
    const addrs = ((rep.status && rep.status.addresses) || []).map((a) => a.value).join(', ');
    div.appendChild(el('div', 'msg', 'addresses: ' + (addrs || 'none') + '; listeners: '
      + ((rep.status && rep.status.listeners) || []).map((l) => l.name).join(', ')));
    return div;
  }));
  const h = $('d-history');
  h.replaceChildren(header(['time', 'cluster', 'condition', 'change', 'reason', 'message']),
    ...d.history.map((t) => {
      const tr = el('tr');
      tr.appendChild(el('td', null, new Date(t.timeMillis).toLocaleTimeString()));
      tr.appendChild(el('td', null, t.cluster || '(aggregated)'));
      tr.appendChild(el('td', null, t.type));
      tr.appendChild(el('td', 'st-' + (t.status || 'none'), (t.previousStatus || '\u2013') + ' \u2192 ' + (t.status || 'gone')));
      tr.appendChild(el('td', null, t.reason));
      tr.appendChild(el('td', 'msg', t.message));
      return tr;
    }));
  if (scroll) box.scrollIntoView({ block: 'nearest' });
}

function header(names) {
  const tr = el('tr');
  for (const n of names) tr.appendChild(el('th', null, n));
  return tr;
}

function conditions(table, list) {
  table.replaceChildren(header(['type', 'status', 'reason', 'message']), ...list.map((c) => {
    const tr = el('tr');
    tr.appendChild(el('td', null, c.type));
    tr.appendChild(el('td', 'st-' + c.status, c.status));
    tr.appendChild(el('td', null, c.reason));
    tr.appendChild(el('td', 'msg', c.message));
    return tr;
  }));
}

function listeners(table, list) {
  table.replaceChildren(header(['listener', 'routes', 'conditions']), ...list.map((l) => {
    const tr = el('tr');
    tr.appendChild(el('td', null, l.name));
    tr.appendChild(el('td', null, l.attachedRoutes));
    tr.appendChild(el('td', 'msg', (l.conditions || []).map((c) => c.type + '=' + c.status).join(', ')));
    return tr;
  }));
}

function list(ul, items, none) {
  ul.replaceChildren(...(items.length ? items : [none]).map((t) => el('li', null, t)));
}

// ---- start ---------------------------------------------------------------

document.addEventListener('DOMContentLoaded', () => {
  tokenFromFragment();
  $('f-namespace').addEventListener('change', (e) => setFilters({ ...filters(), namespace: e.target.value }));
  $('f-cluster').addEventListener('change', (e) => setFilters({ ...filters(), cluster: e.target.value }));
  $('f-not-ready').addEventListener('change', (e) => setFilters({ ...filters(), notReady: e.target.checked }));
  const v = view();
  $('cl-search').value = v.q;
  $('cl-sort').value = v.sort;
  $('cl-group').value = v.group;
  $('cl-search').addEventListener('input', (e) => setView({ q: e.target.value }));
  $('cl-sort').addEventListener('change', (e) => setView({ sort: e.target.value === 'name' ? '' : e.target.value }));
  $('cl-group').addEventListener('change', (e) => setView({ group: e.target.value }));
  $('cause-clear').addEventListener('click', () => setView({ cause: '' }));
  $('token-form').addEventListener('submit', (e) => {
    e.preventDefault();
    saveToken($('token').value.trim());
    $('token').value = '';
    connect();
  });
  connect();
  loadDns();
  // Rise and staleness move the records without a Gateway event.
  setInterval(loadDns, 5000);
});
