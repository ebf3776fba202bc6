// drover's web UI: a page per URL fragment (#/, #/apps/APP,
// #/apps/APP/services/SVC, #/apps/APP/releases, #/apps/APP/releases/ID,
// #/runtimes, #/notifications, #/signin), drawn from the /v1 API with the session cookie.
// Text from the server only ever goes through textContent or attributes:
// nothing is parsed as HTML.

const main = document.getElementById('main');
const who = document.getElementById('who');
const toast = document.getElementById('toast');

// ---- the API ----------------------------------------------------------

class APIError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

async function api(path, body) {
  const init = { credentials: 'same-origin', headers: { Accept: 'application/json' } };
  if (body !== undefined) {
    init.method = 'POST';
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(path, init);
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
  if (!resp.ok) {
    const e = (data && data.error) || {};
    throw new APIError(resp.status, e.code || String(resp.status), e.message || resp.statusText);
  }
  return data;
}

// ---- who is signed in, and what they may do ---------------------------

let me = null; // {name, kind, roles}

const grants = {
  viewer: ['read'],
  deployer: ['read', 'push', 'operate'],
  approver: ['read', 'approve'],
  admin: ['read', 'push', 'operate', 'approve', 'bypass', 'freeze', 'configure', 'runtimes', 'tokens', 'audit'],
};

// can mirrors the server's check, only to show the buttons a person may
// use: the server checks every request all the same.
function can(perm, app, channel) {
  if (!me) return false;
  return me.roles.some((b) => {
    const [role, scope = ''] = b.split('@');
    const [bApp = '', bChannel = ''] = scope.split('/');
    if (!(grants[role] || []).includes(perm)) return false;
    if (bApp && bApp !== app) return false;
    if (bChannel && bChannel !== channel) return false;
    return true;
  });
}

async function loadMe() {
  try {
    me = await api('/v1/whoami');
  } catch (e) {
    if (e.status === 401) { me = null; return false; }
    throw e;
  }
  who.replaceChildren(
    el('span', {}, `${me.name} (${me.roles.length ? me.roles.join(', ') : 'no role'})`),
    button('Sign out', 'secondary', async () => {
      await api('/v1/auth/logout', {});
      me = null;
      who.replaceChildren();
      location.hash = '#/signin';
    }),
  );
  return true;
}

// ---- small DOM helpers ------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') n.className = v;
    else if (k.startsWith('on')) n.addEventListener(k.slice(2), v);
    else n.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    n.append(c instanceof Node ? c : String(c));
  }
  return n;
}

function svg(tag, attrs = {}, ...children) {
  const n = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
  for (const c of children.flat()) if (c) n.append(c instanceof Node ? c : String(c));
  return n;
}

function button(label, cls, onclick) {
  return el('button', { type: 'button', class: cls, onclick }, label);
}

function say(msg) {
  toast.textContent = msg;
  clearTimeout(say.timer);
  say.timer = setTimeout(() => { toast.textContent = ''; }, 6000);
}

function short(v) { return v ? (v.length > 14 ? v.slice(0, 14) + '…' : v) : '—'; }

// named is a version as people recognise it: its display name (an image
// tag, the bundleName) beside its id, or the id alone when it has none.
function named(v, name) { return v && name ? `${name} (${short(v)})` : short(v); }

function ago(t) {
  if (!t) return '';
  const s = Math.round((Date.now() - Date.parse(t)) / 1000);
  if (s < 60) return `${Math.max(s, 0)} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return new Date(t).toLocaleString();
}

// Status words, a symbol each and a tone: never colour alone.
const statuses = {
  CONVERGED: ['✓', 'Converged', 'ok'],
  CONVERGING: ['↻', 'Converging', 'info'],
  PENDING: ['…', 'Pending', 'info'],
  WAITING_PRECONDITIONS: ['…', 'Waiting', 'warn'],
  WAITING_MANUAL_APPROVAL: ['!', 'Needs approval', 'warn'],
  BLOCKED: ['■', 'Blocked', 'warn'],
  PAUSED: ['‖', 'Paused', 'warn'],
  REPLACED: ['→', 'Replaced', 'info'],
  ROLLING_BACK: ['↺', 'Rolling back', 'bad'],
  ROLLED_BACK: ['↺', 'Rolled back', 'bad'],
  FAILED: ['✗', 'Failed', 'bad'],
  FAILED_ROLLBACK: ['✗', 'Rollback failed', 'bad'],
  // A release's own statuses (PENDING and FAILED are above).
  IN_PROGRESS: ['↻', 'In progress', 'info'],
  SUCCEEDED: ['✓', 'Succeeded', 'ok'],
  SKIPPED: ['→', 'Skipped', 'info'],
};

function word(status) { return (statuses[status] || ['', status || 'Unknown'])[1]; }

function tone(status) { return (statuses[status] || ['', '', 'info'])[2]; }

function badge(status) {
  const [sym, word, t] = statuses[status] || ['•', status || 'Unknown', 'info'];
  return el('span', { class: `badge ${t}` }, el('span', { 'aria-hidden': 'true' }, sym), word);
}

// ---- pages ------------------------------------------------------------

let stopLive = () => {};
// generation counts route changes: a page whose data arrives after the
// person went elsewhere draws nothing.
let generation = 0;

async function route() {
  stopLive();
  stopLive = () => {};
  const hash = location.hash || '#/';
  if (!hash.startsWith('#/')) return undefined; // an anchor in the page (the skip link, a channel)
  const gen = ++generation;
  const current = () => gen === generation;
  try {
    if (hash === '#/signin') return await signInPage();
    if (!me && !(await loadMe())) {
      location.hash = '#/signin';
      return undefined;
    }
    const m = hash.match(/^#\/apps\/([^/]+)\/services\/([^/]+)$/);
    if (m) return await servicePage(decodeURIComponent(m[1]), decodeURIComponent(m[2]), current);
    const r = hash.match(/^#\/apps\/([^/]+)\/releases(?:\/([^/]+))?$/);
    if (r && r[2]) return await releasePage(decodeURIComponent(r[1]), decodeURIComponent(r[2]), current);
    if (r) return await releasesPage(decodeURIComponent(r[1]), current);
    const a = hash.match(/^#\/apps\/([^/]+)$/);
    if (a) return await appPage(decodeURIComponent(a[1]), current);
    if (hash === '#/runtimes') return await runtimesPage(current);
    if (hash === '#/notifications') return await notificationsPage(current);
    return await servicesPage(current);
  } catch (e) {
    if (!current()) return undefined;
    if (e.status === 401) { me = null; location.hash = '#/signin'; return undefined; }
    main.replaceChildren(el('h1', {}, 'Something went wrong'), el('p', { class: 'error', role: 'alert' }, e.message),
      el('p', {}, button('Try again', 'secondary', () => route())));
    return undefined;
  }
}

function show(title, ...content) {
  document.title = `${title} · drover`;
  main.replaceChildren(...content);
  main.focus({ preventScroll: true });
}

async function signInPage() {
  const info = await api('/v1/auth/info').catch(() => ({}));
  const err = el('p', { class: 'error', role: 'alert' });
  // No name: were the script to fail, the browser would not send the
  // token anywhere with the form.
  const input = el('input', { id: 'token', type: 'password', autocomplete: 'off', required: true });
  const form = el('form', {
    class: 'inline',
    method: 'post',
    onsubmit: async (ev) => {
      ev.preventDefault();
      err.textContent = '';
      try {
        await api('/v1/auth/token', { token: input.value });
        input.value = '';
        if (!(await loadMe())) {
          err.textContent = 'Signed in, but the browser did not keep the session cookie: open the server over HTTPS (or on this machine, at 127.0.0.1).';
          return;
        }
        location.hash = '#/';
      } catch (e) { err.textContent = e.message; }
    },
  },
  el('label', { for: 'token' }, 'API token (drover tokens create), or the server\'s local token'),
  input,
  el('button', { type: 'submit' }, 'Sign in with a token'));
  const sso = info.oidc
    ? el('p', {}, el('a', { class: 'button', href: `${info.oidc.loginPath}?return=${encodeURIComponent('/#/')}` }, 'Sign in with your identity provider'))
    : null;
  show('Sign in', el('section', { class: 'signin' }, el('h1', {}, 'Sign in to drover'), sso, form, err));
}

// The services page: every service the person may read, sortable by each
// column (a button in its header, aria-sort saying which), with a filter
// that matches application, service and status as one types, and pages of
// `perPage` rows, so it stays quick with ten thousand services. It is live:
// read again on the server's events (at most once a second) and every 10 s,
// keeping the filter, the order, the page and the focus. The filter, order
// and page stay as they were when one comes back to the list.
const listState = { q: '', sort: 'service', desc: false, page: 0 };

// toneRank orders statuses by how much they ask for attention.
const toneRank = { bad: 0, warn: 1, info: 2, ok: 3 };

const listColumns = [
  { key: 'service', label: 'Service', value: (s) => `${s.application}/${s.service}` },
  { key: 'status', label: 'Status', value: (s) => `${toneRank[tone(s.status)]} ${word(s.status)}` },
  { key: 'version', label: 'Version', value: (s) => s.displayName || s.desiredVersion || '' },
  { key: 'channels', label: 'Channels', value: (s) => (s.channels ? s.converged / s.channels : 0) },
  { key: 'application', label: 'Application', value: (s) => `${s.application}/${s.service}` },
];

function compare(a, b) {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  return String(a).localeCompare(String(b), undefined, { numeric: true });
}

async function servicesPage(current) {
  const perPage = 200;
  const state = listState;
  let list = (await api('/v1/services:summary')).services || [];
  if (!current()) return;
  const rows = el('tbody');
  const count = el('p', { class: 'muted', 'aria-live': 'polite' });
  const input = el('input', { type: 'search', id: 'search', value: state.q, placeholder: 'Filter: application, service or status', 'aria-label': 'Filter services' });
  const prev = button('← Previous page', 'secondary', () => { state.page -= 1; draw(); });
  const next = button('Next page →', 'secondary', () => { state.page += 1; draw(); });
  const pager = el('div', { class: 'actions pager' }, prev, next);
  const heads = listColumns.map((col) => {
    const arrow = el('span', { 'aria-hidden': 'true', class: 'arrow' });
    const th = el('th', { scope: 'col', 'data-sort': col.key }, el('button', {
      type: 'button',
      class: 'sort',
      onclick: () => {
        if (state.sort === col.key) state.desc = !state.desc; else { state.sort = col.key; state.desc = false; }
        state.page = 0;
        draw();
      },
    }, col.label, arrow));
    return { col, th, arrow };
  });
  let keyed = [];
  const index = () => {
    keyed = list.map((s) => ({ s, key: `${s.application}/${s.service} ${s.application} ${s.service} ${s.status} ${word(s.status)}`.toLowerCase() }));
  };
  index();
  function draw() {
    const q = input.value.trim().toLowerCase();
    state.q = input.value;
    const match = q ? keyed.filter((k) => k.key.includes(q)) : keyed.slice();
    const col = listColumns.find((c) => c.key === state.sort) || listColumns[0];
    const name = listColumns[0].value;
    match.sort((a, b) => (state.desc ? -1 : 1) * (compare(col.value(a.s), col.value(b.s)) || compare(name(a.s), name(b.s))));
    const pages = Math.max(1, Math.ceil(match.length / perPage));
    state.page = Math.min(Math.max(state.page, 0), pages - 1);
    const from = state.page * perPage;
    const shown = match.slice(from, from + perPage);
    rows.replaceChildren(...shown.map(({ s }) => el('tr', { 'data-service': `${s.application}/${s.service}` },
      el('td', {}, el('a', { href: `#/apps/${encodeURIComponent(s.application)}/services/${encodeURIComponent(s.service)}` }, `${s.application}/${s.service}`)),
      el('td', {}, badge(s.status)),
      el('td', { class: 'mono' }, named(s.desiredVersion, s.displayName)),
      el('td', {}, `${s.converged}/${s.channels} channels converged`),
      el('td', {}, el('a', { href: `#/apps/${encodeURIComponent(s.application)}`, 'aria-label': `Application ${s.application}` }, s.application)))));
    for (const h of heads) {
      const on = h.col.key === state.sort;
      h.th.setAttribute('aria-sort', on ? (state.desc ? 'descending' : 'ascending') : 'none');
      h.arrow.textContent = on ? (state.desc ? ' ▼' : ' ▲') : ' ↕';
      h.arrow.className = on ? 'arrow' : 'arrow muted';
    }
    const of = match.length === list.length ? `${list.length} services` : `${match.length} matching services (of ${list.length})`;
    count.textContent = match.length > perPage
      ? `Showing ${from + 1}–${from + shown.length} of ${of}, page ${state.page + 1} of ${pages}.`
      : `${match.length} of ${list.length} services.`;
    // A button that goes away would take the focus with it: the one left keeps it.
    const had = document.activeElement;
    prev.disabled = state.page === 0;
    next.disabled = state.page >= pages - 1;
    pager.hidden = pages === 1;
    if ((had === prev || had === next) && had.disabled) (had === prev ? next : prev).focus();
  }
  let timer;
  input.addEventListener('input', () => { clearTimeout(timer); timer = setTimeout(() => { state.page = 0; draw(); }, 80); });
  draw();
  show('Services', el('h1', {}, 'Services'), el('div', { class: 'search' }, input), count,
    el('table', { class: 'list' }, el('thead', {}, el('tr', {}, heads.map((h) => h.th))), rows), pager);
  input.focus();
  // Live: the summary is read again on events, at most once a second.
  let pending = null; let last = 0;
  const reload = async () => {
    pending = null; last = Date.now();
    try {
      const fresh = (await api('/v1/services:summary')).services || [];
      if (!current()) return;
      list = fresh; index(); draw();
    } catch (e) { if (current()) say(e.message); }
  };
  const soon = () => { if (!pending) pending = setTimeout(reload, Math.max(250, 1000 - (Date.now() - last))); };
  const es = new EventSource('/v1/watch');
  es.addEventListener('event', soon);
  const tick = setInterval(soon, 10000);
  stopLive = () => { es.close(); clearTimeout(pending); clearTimeout(timer); clearInterval(tick); };
}

// Pipeline layout: a channel's column is one more than the deepest channel
// it depends on; channels of a group are boxed together.
function layout(chans) {
  const byName = new Map(chans.map((c) => [c.name, c]));
  const depth = new Map();
  const depthOf = (c, seen = new Set()) => {
    if (depth.has(c.name)) return depth.get(c.name);
    if (seen.has(c.name)) return 0;
    seen.add(c.name);
    let d = 0;
    for (const dep of c.dependsOn || []) if (byName.has(dep)) d = Math.max(d, depthOf(byName.get(dep), seen) + 1);
    depth.set(c.name, d);
    return d;
  };
  chans.forEach((c) => depthOf(c));
  const cols = [];
  for (const c of chans) (cols[depth.get(c.name)] ||= []).push(c);
  return cols;
}

function pipeline(st) {
  const chans = st.releaseChannels || [];
  const cols = layout(chans);
  const W = 190; const H = 64; const GX = 60; const GY = 22; const PAD = 24;
  const pos = new Map();
  cols.forEach((col, x) => col.forEach((c, y) => pos.set(c.name, { x: PAD + x * (W + GX), y: PAD + 14 + y * (H + GY) })));
  const width = PAD * 2 + cols.length * W + Math.max(cols.length - 1, 0) * GX;
  const height = PAD * 2 + 14 + Math.max(1, ...cols.map((c) => c.length)) * (H + GY);
  const g = svg('svg', { width, height, viewBox: `0 0 ${width} ${height}`, role: 'group', 'aria-label': `Pipeline of ${st.service}: ${chans.length} release channels` });
  // Groups: a dashed box around their channels.
  const groups = new Map();
  for (const c of chans) if (c.group) (groups.get(c.group) || groups.set(c.group, []).get(c.group)).push(pos.get(c.name));
  for (const [name, ps] of groups) {
    const x0 = Math.min(...ps.map((p) => p.x)) - 8; const y0 = Math.min(...ps.map((p) => p.y)) - 18;
    const x1 = Math.max(...ps.map((p) => p.x)) + W + 8; const y1 = Math.max(...ps.map((p) => p.y)) + H + 8;
    g.append(svg('rect', { class: 'group', x: x0, y: y0, width: x1 - x0, height: y1 - y0, rx: 8 }),
      svg('text', { class: 'grouplabel', x: x0 + 6, y: y0 + 12 }, `group ${name}`));
  }
  for (const c of chans) {
    const to = pos.get(c.name);
    for (const dep of c.dependsOn || []) {
      const from = pos.get(dep);
      if (!from) continue;
      const x1 = from.x + W; const y1 = from.y + H / 2; const x2 = to.x; const y2 = to.y + H / 2;
      g.append(svg('path', { class: 'edge', d: `M${x1},${y1} C${x1 + GX / 2},${y1} ${x2 - GX / 2},${y2} ${x2 - 6},${y2}`, 'marker-end': 'url(#arrow)' }));
    }
  }
  g.prepend(svg('defs', {}, svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 8, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto' },
    svg('path', { d: 'M0,0 L10,5 L0,10 z', fill: '#4d5560' }))));
  for (const c of chans) {
    const p = pos.get(c.name);
    const [sym, word] = statuses[c.status] || ['•', c.status];
    // The link's name is its text: the channel, its status, its version.
    const a = svg('a', { href: `#ch-${encodeURIComponent(c.name)}`, class: `node ${tone(c.status)}` },
      svg('rect', { x: p.x, y: p.y, width: W, height: H, rx: 6 }),
      svg('text', { x: p.x + 10, y: p.y + 20 }, svg('tspan', { 'aria-hidden': 'true' }, `${sym} `), c.name),
      svg('text', { class: 'sub', x: p.x + 10, y: p.y + 38 }, word),
      svg('text', { class: 'sub', x: p.x + 10, y: p.y + 54 }, `runs ${named(c.version, c.displayName)}`));
    a.addEventListener('click', (ev) => {
      ev.preventDefault();
      const card = document.getElementById(`ch-${c.name}`);
      if (card) { card.scrollIntoView({ block: 'nearest' }); card.focus(); }
    });
    g.append(a);
  }
  return el('div', { class: 'pipeline' }, g);
}

function replicas(c) {
  const objs = c.objects || [];
  const withReplicas = objs.filter((o) => o.targetReplicas || o.replicas);
  if (!withReplicas.length) return null;
  return withReplicas.map((o) => `${o.name}: ${o.availableReplicas || 0}/${o.targetReplicas || o.replicas} available`).join('; ');
}

// when says when a moment to come is, in the reader's time: "Mon 09:00"
// within the week, with the date beyond it.
function when(t) {
  const d = new Date(t);
  const far = d - Date.now() > 6 * 86400e3;
  return d.toLocaleString(undefined, far
    ? { weekday: 'short', day: 'numeric', month: 'short', hour: '2-digit', minute: '2-digit' }
    : { weekday: 'short', hour: '2-digit', minute: '2-digit' });
}

// since says how long ago t was, without "ago": "3 min".
function since(t) { return ago(t).replace(/ ago$/, ''); }

// agentDown says that the channel's runtime is served by an agent that is
// not connected, and since when ("" when it is connected, or direct).
function agentDown(c, runtimes) {
  let r = runtimes && runtimes.get(c.runtime);
  // A runtime whose commands run through another's agent (proxyRuntime).
  if (r && !r.linked && r.via) r = runtimes.get(r.via);
  if (!r || !r.linked || !r.agent || r.agent.state === 'connected') return '';
  if (r.agent.state === 'never connected') return `runtime ${r.name}: its agent never connected`;
  const at = r.agent.disconnectedAt || r.agent.heartbeatAt;
  return `runtime ${r.name} disconnected${at ? ` ${since(at)}` : ''}`;
}

// reason says in words why a channel is where it is, from what the
// status says of its gates; the engine's own message otherwise.
function reason(c, runtimes, byName, nested) {
  const parts = [];
  const down = agentDown(c, runtimes);
  if (down) parts.push(down);
  // The engine's last pass failed: its status is the last one planned.
  if (c.reason === 'ENGINE_ERROR') return [...parts, `engine error: ${c.message || 'the engine cannot plan this service'}`].join('; ');
  if (c.status === 'WAITING_MANUAL_APPROVAL') {
    const gates = (c.approvals || []).map((a) => {
      const more = a.minApprovers - (a.approvedBy || []).length;
      const what = a.description || a.topic;
      return more > 0 && !a.rejectedBy ? `waiting for ${more} more approval${more > 1 ? 's' : ''}${what ? ` (${what})` : ''}` : '';
    }).filter(Boolean);
    if (gates.length) return [...parts, ...gates].join('; ');
  }
  if (c.status === 'BLOCKED') {
    const held = (c.checks || []).filter((k) => k.state === 'failing' || k.state === 'pending' || k.state === 'notEvaluated');
    const words = held.map((k) => {
      if (k.name === 'deployWindows' && k.state === 'failing') {
        return k.nextChange ? `outside the deploy window until ${when(k.nextChange)}` : 'outside the deploy window';
      }
      if (k.name === 'alertGate' && k.state === 'failing') return `an alert is firing${k.message ? `: ${k.message}` : ''}`;
      const name = k.attachment || k.name;
      const next = k.nextChange ? ` (next check ${when(k.nextChange)})` : '';
      if (k.state === 'failing') return `held by ${name}${k.message ? `: ${k.message}` : ''}${next}`;
      if (k.state === 'notEvaluated') return `held by ${name}: drover does not evaluate it yet (bypass to go on)`;
      return `waiting for ${name} to run${next}`;
    });
    // One line per protection, not per phase it holds in.
    if (words.length) return [...parts, ...new Set(words)].join('; ');
  }
  if (c.reason === 'RELEASE_CHANNEL_DEPENDENCY_UNMET' && byName && !nested) {
    // The channels it waits for, each with its own reason in brief.
    const waits = (c.dependsOn || []).map((n) => byName.get(n))
      .filter((d) => d && !(d.status === 'CONVERGED' && d.version === c.desiredVersion));
    if (waits.length) {
      const why = waits.map((d) => {
        const r = reason(d, runtimes, byName, true);
        return `${d.name} is ${word(d.status).toLowerCase()}${r ? `: ${r}` : ''}`;
      });
      const open = (c.approvals || []).filter((a) => (a.approvedBy || []).length < a.minApprovers);
      parts.push(`waiting for ${waits.map((d) => d.name).join(' and ')} to run ${short(c.desiredVersion)} converged (${why.join('; ')})${open.length ? ', then for an approval' : ''}`);
      return parts.join('; ');
    }
  }
  if (c.message) parts.push(c.message);
  return parts.join('; ');
}

// act sends one change; it says how it went and reports whether it worked.
async function act(what, path, body, refresh) {
  try {
    await api(path, body);
    say(`${what}: done`);
    refresh();
    return true;
  } catch (e) {
    say(`${what} refused: ${e.message}`);
    return false;
  }
}

// busy disables a form's buttons while fn runs (no double submit).
async function busy(form, fn) {
  const buttons = [...form.querySelectorAll('button')];
  buttons.forEach((b) => { b.disabled = true; });
  try { return await fn(); } finally { buttons.forEach((b) => { b.disabled = false; }); }
}

function commentForm(label, submit, onDone) {
  const id = `c${Math.random().toString(36).slice(2)}`;
  const text = el('textarea', { id, rows: 2 });
  const err = el('p', { class: 'error', role: 'alert' });
  const f = el('form', {
    class: 'inline',
    onsubmit: async (ev) => {
      ev.preventDefault();
      err.textContent = '';
      const ok = await busy(f, () => submit(text.value));
      if (ok) onDone(); else err.textContent = `${label} did not go through: see the message, then try again.`;
    },
  }, el('label', { for: id }, 'Comment (optional)'), text, el('div', { class: 'actions' }, el('button', { type: 'submit' }, label),
    el('button', { type: 'button', class: 'secondary', onclick: onDone }, 'Cancel')), err);
  setTimeout(() => text.focus(), 0);
  return f;
}

// keptOpen is a <details> that stays open across live redraws: page.opened
// holds the keys of those open; onopen runs at each opening.
function keptOpen(page, key, summary, content, onopen) {
  const d = el('details', {
    open: page.opened.has(key),
    ontoggle: () => {
      if (d.open) { page.opened.add(key); if (onopen) onopen(); } else page.opened.delete(key);
    },
  }, el('summary', {}, summary), content);
  return d; // one drawn open fires toggle too: onopen runs then
}

// diffView shows a unified diff line by line: added and removed lines are
// marked by their + and - as well as their colour.
function diffView(text, label) {
  return el('pre', { class: 'log diff', tabindex: '0', 'aria-label': label }, text.split('\n').map((line) => {
    const cls = line.startsWith('+') && !line.startsWith('+++') ? 'add' : line.startsWith('-') && !line.startsWith('---') ? 'del' : line.startsWith('@@') ? 'hunk' : '';
    return el('span', { class: cls }, `${line}\n`);
  }));
}

const changeWords = { created: ['+', 'created'], changed: ['~', 'changed'], deleted: ['−', 'deleted'], unchanged: ['=', 'unchanged'] };

// previewView shows what approving a channel rolls out: the version it
// gets, what stands before it, and each object's diff against what was
// last applied (secrets redacted by the server).
function previewView(p) {
  const env = (p.env || []).map((e) => `${{ '+': 'added', '~': 'changed', '-': 'removed' }[e[0]] || ''} ${e.slice(1)}`);
  const objs = p.objects || [];
  const same = objs.filter((o) => o.action === 'unchanged');
  return el('div', { class: 'preview' },
    el('p', {}, p.from ? `Runs ${short(p.from)} now; gets ` : 'Nothing rolled out yet; gets ', el('span', { class: 'mono' }, p.to)),
    p.unchanged ? el('p', {}, 'Its objects and environment stay as they are.') : null,
    (p.params || []).length ? el('div', {}, el('p', {}, 'Parameters that change:'), el('ul', {}, p.params.map((x) => el('li', {},
      el('span', { class: 'mono' }, x.name), `: ${x.from || '(default)'} → ${x.to || '(default)'}`)))) : null,
    (p.gates || []).length ? el('div', {}, el('p', {}, 'Before it rolls out:'), el('ul', {}, p.gates.map((g) => el('li', {}, g)))) : null,
    env.length ? el('p', {}, `Environment: ${env.join(', ')} (values not shown)`) : null,
    p.plan ? el('p', {}, 'Terraform: ', el('span', { class: 'mono' }, p.plan)) : null,
    objs.filter((o) => o.action !== 'unchanged').map((o) => {
      const [sym, w] = changeWords[o.action] || ['•', o.action];
      return el('div', { class: 'object' }, el('p', {}, el('span', { 'aria-hidden': 'true' }, `${sym} `), el('span', { class: 'mono' }, o.object), ` ${w}`),
        o.diff ? diffView(o.diff, `Diff of ${o.object}`) : null);
    }),
    same.length ? el('p', { class: 'muted' }, `Unchanged: ${same.map((o) => o.object).join(', ')}`) : null,
    p.note ? el('p', { class: 'muted' }, p.note) : null);
}

// compiledView shows a channel's compiled config: its settings, then each
// object the runtime applies.
function compiledView(c) {
  const gates = (c.approvals || []).map((a) => `${a.minApprovers} approver${a.minApprovers > 1 ? 's' : ''}${a.topic ? ` (${a.description || a.topic})` : ''}`);
  if (c.everyAction) gates.push('an approval before each apply that heals drift');
  const rows = [
    ['Runtime', `${c.runtime}${c.runtimeKind ? ` (${c.runtimeKind})` : ''}${c.namespace ? `, namespace ${c.namespace}` : ''}`],
    ['After', (c.dependsOn || []).join(', ')],
    ['Approvals', gates.join('; ')],
    ['Checks', (c.checks || []).map((k) => `${k.kind === 'protection' ? 'protection' : 'extension'} ${k.attachment && k.attachment !== k.name ? `${k.attachment} (${k.name})` : k.name} in ${k.phase}`).join('; ')],
    ['Rollback', c.autoRollback ? 'automatic on failure' : ''],
    ['Deadline', c.progressDeadline],
    ['Grace', c.convergenceGrace],
    ['Env', Object.entries(c.env || {}).sort().map(([k, v]) => `${k}=${v}`).join(', ')],
  ].filter(([, v]) => v);
  return el('div', {},
    el('dl', {}, rows.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)])),
    (c.objects || []).map((o) => el('div', { class: 'object' }, el('p', { class: 'mono' }, o.object), el('pre', { class: 'log', tabindex: '0', 'aria-label': o.object }, o.yaml))));
}

// channelCard draws one channel. slots keeps each channel's form area
// across redraws, so a live update does not wipe what someone is typing.
function channelCard(st, c, refresh, page) {
  const slots = page.slots;
  const app = st.application; const svc = st.service;
  const base = `/v1/apps/${encodeURIComponent(app)}/services/${encodeURIComponent(svc)}`;
  const rc = { releaseChannel: c.name };
  if (!slots.has(c.name)) slots.set(c.name, el('div'));
  const slot = slots.get(c.name);
  const acts = el('div', { class: 'actions' });
  const open = (form) => { slot.replaceChildren(form); };
  const close = () => slot.replaceChildren();
  const open_ = (c.approvals || []).filter((a) => (a.approvedBy || []).length < a.minApprovers && !a.rejectedBy);
  if (c.status === 'WAITING_MANUAL_APPROVAL' && can('approve', app, c.name)) {
    for (const gate of open_) {
      // One pair of buttons per open gate, naming its topic when there are several.
      const what = open_.length > 1 && gate.topic ? `${c.name} (${gate.topic})` : c.name;
      const topic = gate.topic || undefined;
      acts.append(
        button(`Approve ${what}…`, '', () => open(commentForm(`Approve ${what}`, (comment) => act(`Approve ${what}`, `${base}:approve`,
          { ...rc, topic, desiredStateId: st.desiredStateId, comment }, refresh), close))),
        button(`Reject ${what}…`, 'secondary', () => open(commentForm(`Reject ${what}`, (comment) => act(`Reject ${what}`, `${base}:approve`,
          { ...rc, topic, desiredStateId: st.desiredStateId, reject: true, comment }, refresh), close))),
      );
    }
  }
  if (can('operate', app, c.name)) {
    acts.append(c.paused
      ? button(`Resume ${c.name}`, 'secondary', () => act(`Resume ${c.name}`, `${base}:resume`, rc, refresh))
      : button(`Pause ${c.name}`, 'secondary', () => act(`Pause ${c.name}`, `${base}:pause`, rc, refresh)));
    if (c.version) {
      acts.append(button(`Roll back ${c.name}…`, 'danger', () => {
        const f = el('form', {
          class: 'inline',
          onsubmit: async (ev) => {
            ev.preventDefault();
            if (await busy(f, () => act(`Roll back ${c.name}`, `${base}:rollback`, rc, refresh))) close();
          },
        }, el('p', {}, `Roll ${c.name} back from ${named(c.version, c.displayName)} to the version it ran before?`),
        el('div', { class: 'actions' }, el('button', { type: 'submit', class: 'danger' }, `Roll back ${c.name}`),
          el('button', { type: 'button', class: 'secondary', onclick: close }, 'Cancel')));
        open(f);
        setTimeout(() => f.querySelector('button').focus(), 0);
      }));
    }
  }
  const offered = new Set();
  for (const chk of c.checks || []) {
    const name = chk.attachment || chk.name;
    if ((chk.state === 'failing' || chk.state === 'notEvaluated' || chk.state === 'pending') && can('bypass', app, c.name) && !offered.has(name)) {
      offered.add(name);
      acts.append(button(`Bypass ${name}…`, 'danger', () => open(commentForm(`Bypass ${name} in ${c.name}`, (comment) => act(`Bypass ${name}`, `${base}:bypass`,
        { ...rc, protection: name, desiredStateId: st.desiredStateId, comment }, refresh), close))));
    }
  }
  const rows = [
    ['Runs', el('span', { class: 'mono' }, c.version ? named(c.version, c.displayName) : '— (nothing yet)')],
    ['Desired', el('span', { class: 'mono' }, named(c.desiredVersion, c.desiredDisplayName))],
    ['Runtime', c.runtime],
    ['Replicas', replicas(c)],
    ['Group', c.group],
    ['After', (c.dependsOn || []).join(', ')],
    ['Approvals', (c.approvals || []).map((a) => `${a.description || (c.approvals.length > 1 && a.topic) ? `${a.description || a.topic}: ` : ''}${(a.approvedBy || []).length}/${a.minApprovers}${a.approvedBy && a.approvedBy.length ? ` by ${a.approvedBy.join(', ')}` : ''}${a.rejectedBy ? `, rejected by ${a.rejectedBy}` : ''}`).join('; ')],
    ['Checks', (c.checks || []).map((k) => `${k.attachment || k.name} (${k.phase}): ${k.state}`).join('; ')],
    ['Updated', ago(c.updatedAt)],
  ].filter(([, v]) => v);
  const key = (what) => `${st.desiredStateId}/${c.name}/${what}`;
  const preview = c.preview ? keptOpen(page, key('preview'), `What approving ${c.name} rolls out`, previewView(c.preview)) : null;
  const info = (c.info || []).length ? keptOpen(page, key('info'), 'Runtime info (getInfo)',
    c.info.map((i) => el('pre', { class: 'log', tabindex: '0', 'aria-label': `getInfo ${i.name || ''}` }, i.name ? `${i.name}\n${i.text || ''}` : JSON.stringify(i, null, 2)))) : null;
  // The compiled config is read when first opened, once per desired state.
  const compiledBox = el('div', {}, page.compiled.get(key('compiled')) || el('p', { class: 'muted' }, 'Loading…'));
  const compiled = keptOpen(page, key('compiled'), 'Compiled config', compiledBox, async () => {
    if (page.compiled.has(key('compiled'))) return;
    try {
      const res = await api(`${base}/compiled?desiredStateId=${encodeURIComponent(st.desiredStateId)}&releaseChannel=${encodeURIComponent(c.name)}`);
      page.compiled.set(key('compiled'), compiledView(res.releaseChannels[0]));
    } catch (e) { compiledBox.replaceChildren(el('p', { class: 'error' }, e.message)); return; }
    compiledBox.replaceChildren(page.compiled.get(key('compiled')));
  });
  return el('section', { class: 'card', id: `ch-${c.name}`, tabindex: '-1', 'aria-label': `Release channel ${c.name}` },
    el('h3', {}, c.name, badge(c.status), c.paused ? el('span', { class: 'badge warn' }, 'paused') : null),
    el('p', { class: 'reason' }, reason(c, page.runtimes, new Map((st.releaseChannels || []).map((x) => [x.name, x])))),
    el('dl', {}, rows.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)])),
    preview, info, compiled, acts, slot);
}

// versionsView lists the service's earlier versions (its desired states,
// newest first) with, per release channel, whether it runs or ran there,
// and a "Roll back to this" action where the person may operate: it asks
// first, and a refusal (approvals, the running version...) is shown.
function versionsView(st, list, refresh, page) {
  const app = st.application; const svc = st.service;
  const base = `/v1/apps/${encodeURIComponent(app)}/services/${encodeURIComponent(svc)}`;
  if (!page.versionSlot) page.versionSlot = el('div');
  const slot = page.versionSlot;
  const close = () => slot.replaceChildren();
  const rows = list.map((v) => {
    const acts = [];
    for (const c of v.releaseChannels || []) {
      const now = (st.releaseChannels || []).find((x) => x.name === c.name);
      if (!now || c.running || v.pruned || !can('operate', app, c.name) || now.desiredVersion === c.version) continue;
      const what = `${c.name} to ${named(c.version, c.displayName)}`;
      acts.push(button(`Roll back ${c.name} to this…`, 'danger', () => {
        const err = el('p', { class: 'error', role: 'alert' });
        const f = el('form', {
          class: 'inline',
          'aria-label': `Roll back ${what}`,
          onsubmit: async (ev) => {
            ev.preventDefault();
            err.textContent = '';
            const ok = await busy(f, async () => {
              try {
                const res = await api(`${base}:rollback`, { releaseChannel: c.name, to: v.desiredStateId });
                const r = (res.rollbacks || [])[0];
                say(`Roll back ${c.name}: desired state ${res.desiredStateId}${r ? `, ${c.name} goes back to ${named(r.version, r.displayName)}` : ''}`);
                refresh();
                return true;
              } catch (e) { err.textContent = `Refused: ${e.message}`; return false; }
            });
            if (ok) close();
          },
        }, el('p', {}, `Roll ${c.name} back from ${named(now.version, now.displayName)} to ${named(c.version, c.displayName)}? `,
          `It is gated like a push: ${c.name}'s approvals, protections and freezes apply.`),
        el('div', { class: 'actions' }, el('button', { type: 'submit', class: 'danger' }, `Roll back ${c.name}`),
          el('button', { type: 'button', class: 'secondary', onclick: close }, 'Cancel')), err);
        slot.replaceChildren(f);
        setTimeout(() => f.querySelector('button').focus(), 0);
      }));
    }
    // A rollback's channels may hold other versions than its own: named.
    const where = (v.releaseChannels || []).map((c) => `${c.name}${c.version !== v.version ? ` → ${named(c.version, c.displayName)}` : ''}${c.running ? ' (runs now)' : c.ran ? ' (ran)' : ''}`).join(', ');
    const notes = [v.active && 'active', v.rollback && 'rollback', v.pruned && 'pruned'].filter(Boolean).join(', ');
    return el('tr', {},
      el('td', { class: 'mono', title: v.version }, v.displayName || short(v.version)),
      el('td', { class: 'mono', title: v.desiredStateId }, short(v.version)),
      el('td', { title: v.createdAt }, `${ago(v.createdAt)}${v.createdBy ? ` by ${v.createdBy}` : ''}`),
      el('td', {}, where + (notes ? ` — ${notes}` : '')),
      el('td', {}, el('div', { class: 'actions' }, acts)));
  });
  return [el('h2', {}, 'Versions'), el('div', { class: 'scroll', tabindex: '0', role: 'region', 'aria-label': 'Versions' }, el('table', {},
    el('thead', {}, el('tr', {}, el('th', {}, 'Version'), el('th', {}, 'Id'), el('th', {}, 'Pushed'), el('th', {}, 'Release channels'), el('th', {}, 'Roll back'))),
    el('tbody', {}, rows))), slot];
}

// pushForm asks for the service's parameters, typed as its config says.
async function pushForm(app, svc, refresh) {
  const params = (await api(`/v1/apps/${encodeURIComponent(app)}/services/${encodeURIComponent(svc)}/parameters`)).parameters || [];
  const inputs = [];
  const fields = params.map((p) => {
    const id = `p-${p.name}`;
    const req = p.required || undefined;
    let input;
    if (p.type === 'secret') input = el('input', { id, type: 'password', autocomplete: 'off', required: req });
    else if (p.type === 'int') input = el('input', { id, type: 'number', step: 1, value: p.default || undefined, required: req });
    else if (p.type === 'dockerImage') input = el('input', { id, type: 'text', placeholder: `tag of ${p.image || 'the image'}`, value: p.default || undefined, required: req });
    else input = el('input', { id, type: 'text', value: p.default || undefined, required: req });
    inputs.push([p.name, input]);
    const kind = { secret: 'secret', int: 'integer', dockerImage: 'docker image tag', commit: 'commit' }[p.type] || 'string';
    return el('label', { for: id }, `${p.name} (${kind}${p.required ? ', required' : ''})${p.description ? ` — ${p.description}` : ''}`, input);
  });
  const err = el('p', { class: 'error', role: 'alert' });
  return el('form', {
    class: 'inline',
    onsubmit: async (ev) => {
      ev.preventDefault();
      err.textContent = '';
      const body = { params: inputs.filter(([, i]) => i.value !== '').map(([name, i]) => ({ name, value: i.value })) };
      await busy(ev.target, async () => {
        try {
          const res = await api(`/v1/apps/${encodeURIComponent(app)}/services/${encodeURIComponent(svc)}:push`, body);
          say(`Pushed ${short(res.bundleVersion)}`);
          refresh();
        } catch (e) { err.textContent = e.message; }
      });
    },
  }, fields.length ? fields : el('p', { class: 'muted' }, 'This service takes no parameters.'), el('button', { type: 'submit' }, `Push ${svc}`), err);
}

async function servicePage(app, svc, current) {
  const base = `/v1/apps/${encodeURIComponent(app)}/services/${encodeURIComponent(svc)}`;
  const body = el('div');
  const history = el('div');
  const pushSlot = el('div');
  // What stays across redraws: forms being filled (slots), open details,
  // compiled configs read, and the runtimes (for their agents' state).
  const page = { slots: new Map(), opened: new Set(), compiled: new Map(), runtimes: null };
  const events = [];
  const versions = el('div');
  let lastSeq = 0;
  const draw = async () => {
    const [st, ev, rts, vs] = await Promise.all([api(base), api(`${base}/events?after=${lastSeq}`), api('/v1/runtimes').catch(() => null),
      api(`${base}/versions`).catch(() => null)]);
    const fresh = ev.events || [];
    if (rts) page.runtimes = new Map((rts.runtimes || []).map((r) => [r.name, r]));
    if (!current()) return;
    for (const e of fresh) { events.push(e); lastSeq = Math.max(lastSeq, e.seq); }
    // A redraw keeps what the person was doing: the forms (slots) move
    // into the new cards, and the focus goes back where it was.
    const focused = document.activeElement;
    body.replaceChildren(
      el('p', {}, badge(st.status), ' desired ', el('span', { class: 'mono' }, named(st.desiredVersion, st.displayName))),
      pipeline(st),
      el('h2', {}, 'Release channels'),
      el('div', { class: 'cards' }, (st.releaseChannels || []).map((c) => channelCard(st, c, refreshSoon, page))),
    );
    if (vs) versions.replaceChildren(...versionsView(st, vs.versions || [], refreshSoon, page));
    if (focused && focused !== document.activeElement && document.contains(focused)) focused.focus({ preventScroll: true });
    history.replaceChildren(el('h2', {}, 'History'), el('div', { class: 'scroll', tabindex: '0', role: 'region', 'aria-label': 'History' }, el('table', {},
      el('thead', {}, el('tr', {}, el('th', {}, 'When'), el('th', {}, 'What'), el('th', {}, 'Channel'), el('th', {}, 'Who'), el('th', {}, 'Details'))),
      el('tbody', {}, events.slice(-50).reverse().map((e) => el('tr', {},
        el('td', { title: e.time }, ago(e.time)), el('td', {}, e.type), el('td', {}, e.releaseChannel || ''), el('td', {}, e.actor || ''),
        el('td', {}, e.message || '')))))));
  };
  let timer = null;
  function refreshSoon() { clearTimeout(timer); timer = setTimeout(() => draw().catch((e) => say(e.message)), 250); }
  await draw();
  if (!current()) return;
  const top = el('div', { class: 'actions' });
  if (can('push', app, '')) {
    top.append(button(`Push a new version…`, '', async () => {
      try {
        pushSlot.replaceChildren(await pushForm(app, svc, refreshSoon));
        const first = pushSlot.querySelector('input, button');
        if (first) first.focus();
      } catch (e) { say(e.message); }
    }));
  }
  const runs = el('div');
  show(`${app}/${svc}`, el('p', {}, el('a', { href: '#/' }, '← Services'), ' · ', el('a', { href: `#/apps/${encodeURIComponent(app)}` }, `Application ${app}`),
    ' · ', el('a', { href: releaseHref(app) }, `Releases of ${app}`)),
    el('h1', {}, `${app} / ${svc}`), top, pushSlot, body, versions, runs, history);
  drawRuns(base, runs, current).catch((e) => say(e.message));
  // Live: the server's event stream says when something changed (only
  // what happened after the events already drawn).
  const es = new EventSource(`/v1/watch?app=${encodeURIComponent(app)}&service=${encodeURIComponent(svc)}&after=${lastSeq}`);
  es.addEventListener('event', refreshSoon);
  // Some changes are no event (an agent going away, a fetch failing, a
  // wait's "3 min" growing): the page is also read again every 10 s.
  const tick = setInterval(refreshSoon, 10000);
  stopLive = () => { es.close(); clearTimeout(timer); clearInterval(tick); };
}

// drawRuns lists the service's runs (commands a runtime ran: custom
// runtimes, Terraform), newest first; a run's output is read when opened.
async function drawRuns(base, into, current) {
  const list = (await api(`${base}/runs?limit=30`)).runs || [];
  if (!current() || !list.length) return;
  into.replaceChildren(el('h2', {}, 'Runs'), el('div', { class: 'runs' }, list.slice(0, 30).map((r) => {
    const out = el('div');
    const ok = r.exitCode === 0 && !r.error;
    const d = el('details', {
      ontoggle: async () => {
        if (!d.open || out.childElementCount) return;
        try {
          const full = await api(`/v1/runs/${r.id}`);
          out.replaceChildren(el('div', {},
            el('p', { class: 'mono' }, (full.command || []).join(' ')),
            full.error ? el('p', { class: 'error' }, full.error) : null,
            el('h3', {}, 'stdout'), el('pre', { class: 'log', tabindex: '0', 'aria-label': 'stdout' }, full.stdout || '(empty)'),
            el('h3', {}, 'stderr'), el('pre', { class: 'log', tabindex: '0', 'aria-label': 'stderr' }, full.stderr || '(empty)'),
            full.truncated ? el('p', { class: 'muted' }, 'Output truncated.') : null));
        } catch (e) { out.replaceChildren(el('p', { class: 'error' }, e.message)); }
      },
    }, el('summary', {}, el('span', { class: `badge ${ok ? 'ok' : 'bad'}` }, el('span', { 'aria-hidden': 'true' }, ok ? '✓' : '✗'), ok ? 'ok' : `exit ${r.exitCode}`),
      ` ${r.kind} in ${r.releaseChannel} (${r.runtime}) ${short(r.version)}, ${ago(r.startedAt)}`), out);
    return d;
  })));
}

// ---- the application page ---------------------------------------------

// openGates are a channel's manual approvals still to give (none rejected).
function openGates(c) {
  return (c.approvals || []).filter((a) => (a.approvedBy || []).length < a.minApprovers && !a.rejectedBy);
}

// waitsForApproval: the channel asks for an approval, now or once what it
// waits for (other services, other channels) is there.
function waitsForApproval(c) {
  return c.status === 'WAITING_MANUAL_APPROVAL' || (c.status !== 'CONVERGED' && openGates(c).length > 0);
}

// clip shortens a line for a grid's cell (the whole of it goes in a title).
function clip(text, n = 70) { return text && text.length > n ? `${text.slice(0, n - 1)}…` : text; }

// blockingPath is the set of cells ("svc/channel") holding a service that
// waits for another: the waiting cells and, recursively, the dependencies
// they wait for (blockedBy is the whole chain).
function blockingPath(sts) {
  const held = new Set();
  for (const st of sts) {
    for (const c of st.releaseChannels || []) {
      if (c.reason !== 'SERVICE_DEPENDENCY_UNMET') continue;
      held.add(`${st.service}/${c.name}`);
      for (const b of c.blockedBy || []) held.add(`${b.service}/${b.releaseChannel}`);
    }
  }
  return held;
}

// chainLine says in one line what holds a waiting cell: "web in prod waits
// for api in prod, which waits for db in prod: waiting for approval".
function chainLine(svc, c) {
  const links = c.blockedBy || [];
  if (!links.length) return `${svc} in ${c.name} waits for other services${c.message ? `: ${c.message}` : ''}`;
  const parts = links.map((b, i) => `${i ? ', which waits for' : ' waits for'} ${b.service} in ${b.releaseChannel}`);
  const last = links[links.length - 1];
  const why = last.status === 'WAITING_MANUAL_APPROVAL' ? last.message || 'waiting for approval'
    : `${word(last.status).toLowerCase()}${last.message ? ` (${last.message})` : ''}`;
  return `${svc} in ${c.name}${parts.join('')}: ${why}`;
}

// appGraph draws one release channel's service graph: a node per service
// (its status as a symbol and a word), an arrow from each dependency to
// the service that waits for it (the order they roll out in); the cells
// and edges of the blocking path are drawn thicker and say "holding".
function appGraph(app, channel, sts, path) {
  const nodes = sts.map((st) => {
    const c = (st.releaseChannels || []).find((x) => x.name === channel);
    const deps = c ? (c.serviceDependsOn || []).filter((d) => d.releaseChannel === channel).map((d) => d.service) : [];
    return { name: st.service, dependsOn: deps, c };
  });
  const wanted = new Set(nodes.flatMap((n) => (n.c ? n.dependsOn : [])));
  nodes.splice(0, nodes.length, ...nodes.filter((n) => n.c || wanted.has(n.name)));
  const cols = layout(nodes);
  const W = 150; const H = 50; const GX = 50; const GY = 14; const PAD = 12;
  const pos = new Map();
  cols.forEach((col, x) => col.forEach((n, y) => pos.set(n.name, { x: PAD + x * (W + GX), y: PAD + y * (H + GY) })));
  const width = PAD * 2 + cols.length * W + Math.max(cols.length - 1, 0) * GX;
  const height = PAD * 2 + Math.max(1, ...cols.map((c) => c.length)) * (H + GY) - GY;
  const edges = [];
  for (const n of nodes) for (const d of n.dependsOn) if (pos.has(d)) edges.push([d, n.name]);
  const words = edges.length ? edges.map(([d, n]) => `${n} waits for ${d}`).join('; ') : 'no service waits for another';
  const g = svg('svg', { width, height, viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': `Services of ${app} in ${channel}: ${words}` });
  g.append(svg('defs', {}, svg('marker', { id: `arrow-${channel}`, viewBox: '0 0 10 10', refX: 8, refY: 5, markerWidth: 10, markerHeight: 10, markerUnits: 'userSpaceOnUse', orient: 'auto' },
    svg('path', { d: 'M0,0 L10,5 L0,10 z', fill: '#4d5560' }))));
  for (const [d, n] of edges) {
    const from = pos.get(d); const to = pos.get(n);
    const hot = path.has(`${n}/${channel}`) && path.has(`${d}/${channel}`);
    const x1 = from.x + W; const y1 = from.y + H / 2; const x2 = to.x; const y2 = to.y + H / 2;
    g.append(svg('path', { class: `edge${hot ? ' hot' : ''}`, d: `M${x1},${y1} C${x1 + GX / 2},${y1} ${x2 - GX / 2},${y2} ${x2 - 6},${y2}`, 'marker-end': `url(#arrow-${channel})` }));
  }
  for (const n of nodes) {
    const p = pos.get(n.name);
    const [sym, w] = n.c ? statuses[n.c.status] || ['•', n.c.status] : ['…', 'No rollout yet'];
    const hot = path.has(`${n.name}/${channel}`);
    g.append(svg('g', { class: `node ${n.c ? tone(n.c.status) : 'info'}${hot ? ' hot' : ''}` },
      svg('rect', { x: p.x, y: p.y, width: W, height: H, rx: 6 }),
      svg('text', { x: p.x + 8, y: p.y + 19 }, `${sym} ${n.name}`),
      svg('text', { class: 'sub', x: p.x + 8, y: p.y + 37 }, `${w}${hot ? ' · holding' : ''}`)));
  }
  return el('figure', { class: 'appgraph' }, el('figcaption', {}, `${channel}: ${words}`), el('div', { class: 'pipeline' }, g));
}

// appPage shows an application: every service (rows) in every release
// channel (columns), the graph of their service dependencies per channel
// with the path that holds services highlighted, and per channel a button
// that approves every service waiting there for a manual approval.
async function appPage(app, current) {
  const page = { runtimes: null, results: new Map(), slots: new Map() };
  const body = el('div');
  const draw = async () => {
    // The services are those configured (a service never pushed has no
    // status yet, but others may wait for it) and those with a status.
    const [sum, cfgs, rts, rels] = await Promise.all([api('/v1/services:summary'), api('/v1/configs?kind=service').catch(() => null),
      api('/v1/runtimes').catch(() => null), api(`/v1/apps/${encodeURIComponent(app)}/releases`).catch(() => null)]);
    const names = [...new Set([
      ...(sum.services || []).filter((s) => s.application === app).map((s) => s.service),
      ...((cfgs && cfgs.configs) || []).filter((c) => c.name.startsWith(`${app}/`)).map((c) => c.name.slice(app.length + 1)),
    ])].sort();
    const sts = await Promise.all(names.map((svc) => api(`/v1/apps/${encodeURIComponent(app)}/services/${encodeURIComponent(svc)}`)
      .catch((e) => { if (e.status === 404) return { application: app, service: svc, releaseChannels: [], unpushed: true }; throw e; })));
    if (rts) page.runtimes = new Map((rts.runtimes || []).map((r) => [r.name, r]));
    if (!current()) return;
    const channels = [];
    for (const st of sts) for (const c of st.releaseChannels || []) if (!channels.includes(c.name)) channels.push(c.name);
    const path = blockingPath(sts);
    const focused = document.activeElement;
    const head = el('tr', {}, el('th', { scope: 'col' }, 'Service'), channels.map((ch) => {
      const waiting = sts.filter((st) => (st.releaseChannels || []).some((c) => c.name === ch && waitsForApproval(c) && openGates(c).length));
      return el('th', { scope: 'col', 'data-channel': ch }, ch,
        waiting.length && can('approve', app, ch) ? approveAll(app, ch, waiting, page, refreshSoon) : null,
        page.slots.get(ch), resultsView(page.results.get(ch)));
    }));
    const rows = sts.map((st) => {
      const byName = new Map((st.releaseChannels || []).map((x) => [x.name, x]));
      return el('tr', {}, el('th', { scope: 'row' }, el('a', { href: `#/apps/${encodeURIComponent(app)}/services/${encodeURIComponent(st.service)}` }, st.service)),
        channels.map((ch) => {
          const c = byName.get(ch);
          if (!c) {
            const hot = path.has(`${st.service}/${ch}`);
            return el('td', { class: `cell${hot ? ' hot' : ''}`, 'data-service': st.service, 'data-channel': ch },
              hot ? el('span', { class: 'badge warn holding' }, el('span', { 'aria-hidden': 'true' }, '⇢'), 'blocking path') : null,
              el('div', { class: 'muted' }, st.unpushed ? '— nothing pushed yet' : '— not in this channel'));
          }
          const hot = path.has(`${st.service}/${ch}`);
          const why = c.status === 'CONVERGED' ? '' : reason(c, page.runtimes, byName);
          return el('td', { class: `cell ${tone(c.status)}${hot ? ' hot' : ''}`, 'data-service': st.service, 'data-channel': ch },
            badge(c.status),
            hot ? el('span', { class: 'badge warn holding' }, el('span', { 'aria-hidden': 'true' }, '⇢'), 'blocking path') : null,
            el('div', { class: 'mono' }, c.version ? `runs ${named(c.version, c.displayName)}` : 'runs nothing yet'),
            c.desiredVersion && c.desiredVersion !== c.version ? el('div', { class: 'mono muted' }, `gets ${named(c.desiredVersion, c.desiredDisplayName)}`) : null,
            why ? el('div', { class: 'why', title: why }, clip(why)) : null);
        }));
    });
    const chains = [];
    for (const st of sts) {
      for (const c of st.releaseChannels || []) {
        if (c.reason !== 'SERVICE_DEPENDENCY_UNMET') continue;
        // Only the chains no other waiting service's chain already holds.
        const inner = sts.some((o) => (o.releaseChannels || []).some((x) => x.reason === 'SERVICE_DEPENDENCY_UNMET' &&
          (x.blockedBy || []).some((b) => b.service === st.service && b.releaseChannel === c.name)));
        if (!inner) chains.push(chainLine(st.service, c));
      }
    }
    body.replaceChildren(...[
      releaseLine(app, rels),
      names.length ? null : el('p', { class: 'muted' }, `No service of ${app} you may read.`),
      el('div', { class: 'scroll', tabindex: '0', role: 'region', 'aria-label': `Services of ${app} by release channel` },
        el('table', { class: 'appgrid' }, el('thead', {}, head), el('tbody', {}, rows))),
      el('h2', {}, 'What holds services'),
      chains.length ? el('ul', { class: 'chains' }, chains.map((line) => el('li', {}, el('span', { 'aria-hidden': 'true' }, '⇢ '), line)))
        : el('p', { class: 'muted' }, 'No service waits for another.'),
      el('h2', {}, 'Service dependencies'),
      el('div', { class: 'graphs' }, channels.map((ch) => appGraph(app, ch, sts, path)))].filter(Boolean));
    if (focused && focused !== document.activeElement && document.contains(focused)) focused.focus({ preventScroll: true });
  };
  let timer = null;
  function refreshSoon() { clearTimeout(timer); timer = setTimeout(() => draw().catch((e) => say(e.message)), 250); }
  await draw();
  if (!current()) return;
  show(`${app}`, el('p', {}, el('a', { href: '#/' }, '← Services')), el('h1', {}, `Application ${app}`), body);
  // Live as a service's page: the application's events, and a read every 10 s.
  const es = new EventSource(`/v1/watch?app=${encodeURIComponent(app)}`);
  es.addEventListener('event', refreshSoon);
  const tick = setInterval(refreshSoon, 10000);
  stopLive = () => { es.close(); clearTimeout(timer); clearInterval(tick); };
}

// approveAll is a channel's "Approve every waiting channel" button: it asks
// for a comment, then approves each waiting service's open gates in that
// channel, one approval (and one record) per service, and lists how each
// went.
function approveAll(app, ch, waiting, page, refresh) {
  if (!page.slots.has(ch)) page.slots.set(ch, el('div'));
  const slot = page.slots.get(ch);
  const svcs = waiting.map((st) => st.service);
  const close = () => slot.replaceChildren();
  return el('div', { class: 'actions' }, button('Approve every waiting channel', '', () => {
    slot.replaceChildren(commentForm(`Approve ${svcs.join(', ')} in ${ch}`, async (comment) => {
      const results = [];
      for (const st of waiting) {
        const c = (st.releaseChannels || []).find((x) => x.name === ch);
        const gates = openGates(c);
        const base = `/v1/apps/${encodeURIComponent(app)}/services/${encodeURIComponent(st.service)}`;
        try {
          for (const gate of gates) {
            await api(`${base}:approve`, { releaseChannel: ch, topic: gate.topic || undefined, desiredStateId: st.desiredStateId, comment });
          }
          results.push({ service: st.service, ok: true, text: 'approved' });
        } catch (e) { results.push({ service: st.service, ok: false, text: `refused: ${e.message}` }); }
      }
      page.results.set(ch, results);
      const bad = results.filter((r) => !r.ok).length;
      say(`Approve in ${ch}: ${results.length - bad} approved${bad ? `, ${bad} refused` : ''}`);
      refresh();
      return true;
    }, close));
  }, ));
}

function resultsView(results) {
  if (!results || !results.length) return null;
  return el('ul', { class: 'results', 'aria-live': 'polite' }, results.map((r) => el('li', { 'data-service': r.service },
    el('span', { 'aria-hidden': 'true' }, r.ok ? '✓ ' : '✗ '), `${r.service}: ${r.text}`)));
}

// ---- releases -----------------------------------------------------------

const inFlight = (r) => r.status === 'PENDING' || r.status === 'IN_PROGRESS';

function releaseHref(app, id) { return `#/apps/${encodeURIComponent(app)}/releases${id ? `/${encodeURIComponent(id)}` : ''}`; }

// releaseLine is the application page's line on its releases: the newest
// one in flight with its status and a link, and a link to them all.
function releaseLine(app, rels) {
  if (!rels) return null;
  const list = rels.releases || [];
  const live = list.find(inFlight);
  const all = el('a', { href: releaseHref(app) }, `All releases (${list.length})`);
  if (!live) return el('p', { class: 'release-line' }, list.length ? 'No release in flight. ' : 'No release yet. ', all);
  return el('p', { class: 'release-line' }, 'Release in flight: ', el('a', { href: releaseHref(app, live.id), class: 'mono' }, live.id), ' ', badge(live.status),
    ` ${(live.releaseChannels || []).map((c) => `${c.name} ${word(c.status).toLowerCase()}`).join(', ')} · `, all);
}

// channelBadges are a release's status per release channel, "staging ✓ Succeeded".
function channelBadges(r) {
  return (r.releaseChannels || []).map((c) => el('span', { class: 'chanstate', 'data-channel': c.name }, `${c.name} `, badge(c.status)));
}

// releasesPage lists an application's releases, newest first.
async function releasesPage(app, current) {
  const body = el('div');
  const draw = async () => {
    const list = (await api(`/v1/apps/${encodeURIComponent(app)}/releases`)).releases || [];
    if (!current()) return;
    body.replaceChildren(list.length ? el('div', { class: 'scroll', tabindex: '0', role: 'region', 'aria-label': `Releases of ${app}` }, el('table', { class: 'releases' },
      el('thead', {}, el('tr', {}, el('th', { scope: 'col' }, 'Release'), el('th', { scope: 'col' }, 'Status'), el('th', { scope: 'col' }, 'Release channels'),
        el('th', { scope: 'col' }, 'Services'), el('th', { scope: 'col' }, 'Created'))),
      el('tbody', {}, list.map((r) => el('tr', { 'data-release': r.id },
        el('td', {}, el('a', { href: releaseHref(app, r.id), class: 'mono' }, r.id)),
        el('td', {}, badge(r.status)),
        el('td', {}, el('div', { class: 'chanstates' }, channelBadges(r))),
        el('td', {}, (r.services || []).map((m) => `${m.service} ${named(m.version, m.displayName)}`).join(', ')),
        el('td', { title: r.createdAt || '' }, `${ago(r.createdAt)}${r.createdBy ? ` by ${r.createdBy}` : ''}`))))))
      : el('p', { class: 'muted' }, `No release of ${app} yet: drover release create --app ${app} --param SERVICE.NAME=VALUE …`));
  };
  await draw();
  if (!current()) return;
  show(`Releases of ${app}`, el('p', {}, el('a', { href: '#/' }, '← Services'), ' · ', el('a', { href: `#/apps/${encodeURIComponent(app)}` }, `Application ${app}`)),
    el('h1', {}, `Releases of ${app}`), body);
  live(app, draw);
}

// live redraws a page on the application's events, and every 10 s.
function live(app, draw) {
  let timer = null;
  const soon = () => { clearTimeout(timer); timer = setTimeout(() => draw().catch((e) => say(e.message)), 250); };
  const es = new EventSource(`/v1/watch?app=${encodeURIComponent(app)}`);
  es.addEventListener('event', soon);
  const tick = setInterval(soon, 10000);
  stopLive = () => { es.close(); clearTimeout(timer); clearInterval(tick); };
  return soon;
}

// releasePage shows one release: its status, a grid of its services by
// release channel, the order it takes, its history, and per channel where
// one of its services waits for an approval an "Approve release in CHANNEL"
// button that answers them all with one call.
async function releasePage(app, id, current) {
  const base = `/v1/apps/${encodeURIComponent(app)}/releases/${encodeURIComponent(id)}`;
  const page = { results: new Map(), slots: new Map() };
  const body = el('div');
  let refresh = () => {};
  const draw = async () => {
    const r = await api(base);
    if (!current()) return;
    const channels = (r.releaseChannels || []).map((c) => c.name);
    for (const m of r.services || []) for (const c of m.releaseChannels || []) if (!channels.includes(c.name)) channels.push(c.name);
    const relState = new Map((r.releaseChannels || []).map((c) => [c.name, c.status]));
    const focused = document.activeElement;
    const head = el('tr', {}, el('th', { scope: 'col' }, 'Service'), channels.map((ch) => {
      const waiting = (r.services || []).filter((m) => (m.releaseChannels || []).some((c) => c.name === ch && waitsForApproval(c) && openGates(c).length));
      return el('th', { scope: 'col', 'data-channel': ch }, el('div', {}, ch), relState.has(ch) ? badge(relState.get(ch)) : el('div', { class: 'muted' }, 'not started'),
        waiting.length && can('approve', app, ch) ? approveRelease(base, ch, waiting, page, () => refresh()) : null,
        page.slots.get(ch), resultsView(page.results.get(ch)));
    }));
    const rows = (r.services || []).map((m) => {
      const byName = new Map((m.releaseChannels || []).map((c) => [c.name, c]));
      return el('tr', {}, el('th', { scope: 'row' },
        el('a', { href: `#/apps/${encodeURIComponent(app)}/services/${encodeURIComponent(m.service)}` }, m.service),
        el('div', { class: 'mono muted' }, named(m.version, m.displayName)), badge(m.status)),
      channels.map((ch) => {
        const c = byName.get(ch);
        if (!c) {
          return el('td', { class: 'cell', 'data-service': m.service, 'data-channel': ch },
            el('div', { class: 'muted' }, m.status === 'SKIPPED' ? '— a later push replaced the release\'s' : '— not in this channel'));
        }
        const mine = c.desiredVersion === m.version || c.version === m.version;
        const waits = c.status !== 'CONVERGED' && c.message;
        return el('td', { class: `cell ${tone(c.status)}`, 'data-service': m.service, 'data-channel': ch },
          badge(c.status),
          el('div', { class: 'mono' }, c.version ? `runs ${named(c.version, c.displayName)}` : 'runs nothing yet'),
          mine ? null : el('div', { class: 'muted' }, 'not the release\'s version'),
          waits ? el('div', { class: 'why', title: c.message }, clip(c.message)) : null);
      }));
    });
    const events = (r.events || []).slice(-100).reverse();
    const order = r.order || [];
    body.replaceChildren(
      el('p', {}, badge(r.status), ` ${(r.services || []).length} services · created ${ago(r.createdAt)}${r.createdBy ? ` by ${r.createdBy}` : ''}`),
      el('div', { class: 'scroll', tabindex: '0', role: 'region', 'aria-label': `Services of release ${r.id} by release channel` },
        el('table', { class: 'appgrid relgrid' }, el('thead', {}, head), el('tbody', {}, rows))),
      el('h2', {}, 'Order'),
      order.length ? el('ol', { class: 'order' }, order.map((step) => el('li', {}, `${step.releaseChannel}: ${step.services.join(', ')}`)))
        : el('p', { class: 'muted' }, 'No service of the release has a release channel yet.'),
      el('h2', {}, 'History'),
      events.length ? el('ol', { class: 'history', reversed: true }, events.map((e) => el('li', {},
        el('span', { title: e.time }, ago(e.time)), ` · ${e.type}${e.service ? ` · ${e.service}` : ''}${e.releaseChannel ? ` in ${e.releaseChannel}` : ''}${e.actor ? ` by ${e.actor}` : ''}`,
        e.message ? `: ${e.message}` : '')))
        : el('p', { class: 'muted' }, 'Nothing happened yet.'));
    if (focused && focused !== document.activeElement && document.contains(focused)) focused.focus({ preventScroll: true });
  };
  await draw();
  if (!current()) return;
  show(`Release ${id}`, el('p', {}, el('a', { href: '#/' }, '← Services'), ' · ', el('a', { href: `#/apps/${encodeURIComponent(app)}` }, `Application ${app}`),
    ' · ', el('a', { href: releaseHref(app) }, 'Releases')), el('h1', {}, 'Release ', el('span', { class: 'mono' }, id)), body);
  refresh = live(app, draw);
}

// approveRelease is a channel's "Approve release in CHANNEL" button: it
// asks for a comment, then calls the release's :approve once, which
// answers every service of it waiting there, and lists how each went.
function approveRelease(base, ch, waiting, page, refresh) {
  if (!page.slots.has(ch)) page.slots.set(ch, el('div'));
  const slot = page.slots.get(ch);
  const close = () => slot.replaceChildren();
  const label = `Approve release in ${ch}`;
  return el('div', { class: 'actions' }, button(`${label}…`, '', () => {
    slot.replaceChildren(commentForm(label, async (comment) => {
      try {
        const res = await api(`${base}:approve`, { releaseChannel: ch, comment });
        const results = (res.results || []).map((x) => ({ service: x.service, ok: !x.error,
          text: x.error ? `not answered: ${x.error}` : `approved${(x.topics || []).filter(Boolean).length ? ` (${x.topics.filter(Boolean).join(', ')})` : ''}` }));
        page.results.set(ch, results);
        const bad = results.filter((x) => !x.ok).length;
        say(`${label}: ${results.length - bad} approved${bad ? `, ${bad} not answered` : ''}`);
        refresh();
        return true;
      } catch (e) {
        page.results.set(ch, [{ service: waiting.map((m) => m.service).join(', '), ok: false, text: `refused: ${e.message}` }]);
        say(`${label} refused: ${e.message}`);
        refresh();
        return false;
      }
    }, close));
  }));
}


// ---- notifications ------------------------------------------------------

// notifyState is the notifications page's filters: they stay across live
// redraws and when one comes back to the page.
const notifyState = { state: '', target: '' };

const deliveryStates = {
  pending: ['…', 'Pending', 'info'],
  retrying: ['↻', 'Pending, failed before', 'warn'],
  delivered: ['✓', 'Delivered', 'ok'],
  dead: ['✗', 'Dead', 'bad'],
};

function deliveryBadge(d) {
  const key = d.state === 'pending' && d.lastError ? 'retrying' : d.state;
  const [sym, w, t] = deliveryStates[key] || ['•', d.state || 'Unknown', 'info'];
  return el('span', { class: `badge ${t}` }, el('span', { 'aria-hidden': 'true' }, sym), w);
}

// filterText is a target's filter in words, as drover notifications
// prints it: "all", or its lists.
function filterText(f) {
  f = f || {};
  const parts = [['', f.types], ['app=', f.applications], ['service=', f.services], ['channel=', f.releaseChannels], ['status=', f.statuses]]
    .filter(([, v]) => v && v.length).map(([k, v]) => `${k}${v.join(',')}`);
  return parts.length ? parts.join(' ') : 'all';
}

// until says when a moment to come is: "in 12 s", "in 3 min", or when().
function until(t) {
  const s = Math.round((Date.parse(t) - Date.now()) / 1000);
  if (s <= 0) return 'now';
  if (s < 60) return `in ${s} s`;
  if (s < 3600) return `in ${Math.round(s / 60)} min`;
  return when(t);
}

// mayConfigure: the person holds the configure permission somewhere, so
// the retry buttons are theirs to try (the server wants it on every
// application, and says so when it refuses).
function mayConfigure() {
  return !!me && me.roles.some((b) => (grants[b.split('@')[0]] || []).includes('configure'));
}

// notificationsPage lists where notifications go (GET /v1/notifications)
// with the counts of their deliveries, then the deliveries themselves
// (GET /v1/notifications/deliveries), newest first, filtered by state and
// target and paged with "Show older deliveries"; "Retry dead" makes dead
// deliveries pending again (POST /v1/notifications:retry). It is read
// again on the server's events and every 5 s (deliveries change without
// events), keeping the filters, the pages loaded and the focus.
async function notificationsPage(current) {
  const perPage = 50;
  const state = notifyState;
  const targetsBox = el('div');
  const rows = el('tbody');
  const count = el('p', { class: 'muted', 'aria-live': 'polite' });
  const note = el('p', { class: 'note', role: 'status' });
  const err = el('p', { class: 'error', role: 'alert' });
  const stateSel = el('select', { id: 'delivery-state' },
    [['', 'all'], ['failed', 'failed (dead, or retrying)'], ['pending', 'pending'], ['delivered', 'delivered'], ['dead', 'dead']]
      .map(([v, label]) => el('option', { value: v }, label)));
  const targetSel = el('select', { id: 'delivery-target' });
  stateSel.value = state.state;
  let targets = [];
  let list = []; // the deliveries shown
  let next = 0; // the page after them (0: none)
  const more = button('Show older deliveries', 'secondary', async () => {
    try { await loadMore(); } catch (e) { say(e.message); }
  });
  const pager = el('div', { class: 'actions pager' }, more);
  const query = (before, limit) => {
    const q = new URLSearchParams();
    if (state.target) q.set('target', state.target);
    if (state.state) q.set('state', state.state);
    if (before) q.set('before', before);
    q.set('limit', limit);
    return `/v1/notifications/deliveries?${q}`;
  };
  const retry = async (what, body) => {
    err.textContent = '';
    note.textContent = '';
    try {
      const res = await api('/v1/notifications:retry', body);
      note.textContent = `${what}: ${res.retried} ${res.retried === 1 ? 'delivery' : 'deliveries'} pending again.`;
    } catch (e) {
      err.textContent = `${what} refused: ${e.message}`;
    }
    soon();
  };
  const mine = mayConfigure();
  const drawTargets = () => {
    if (!targets.length) {
      targetsBox.replaceChildren(el('p', { class: 'muted' }, 'No notification target yet: drover notifications add NAME --url URL --secret-file FILE, or an application\'s notifications.slack.'));
      return;
    }
    targetsBox.replaceChildren(el('div', { class: 'scroll', tabindex: '0', role: 'region', 'aria-label': 'Notification targets' }, el('table', { class: 'targets' },
      el('thead', {}, el('tr', {}, ['Target', 'Kind', 'Where', 'Events', 'Source', 'Deliveries', 'Actions'].map((h) => el('th', { scope: 'col' }, h)))),
      el('tbody', {}, targets.map((t) => {
        const on = state.target === t.name;
        const where = t.kind === 'slack'
          ? `Slack ${t.channel || '(no channel)'}${t.errorChannel ? `, errors to ${t.errorChannel}` : ''}`
          : t.url || '';
        return el('tr', {
          'data-target': t.name,
          class: on ? 'selected' : undefined,
          onclick: (ev) => { if (!ev.target.closest('button')) pick(on ? '' : t.name); },
        },
        el('td', {}, el('button', {
          type: 'button', class: 'link', 'aria-pressed': on ? 'true' : 'false', 'data-key': `target-${t.name}`,
          title: on ? 'Show the deliveries of every target' : `Show only the deliveries of ${t.name}`,
          onclick: () => pick(on ? '' : t.name),
        }, t.name)),
        el('td', {}, t.kind),
        el('td', { class: t.kind === 'slack' ? undefined : 'mono' }, where),
        el('td', {}, filterText(t.filter)),
        el('td', { title: t.createdAt ? `created ${t.createdAt}${t.createdBy ? ` by ${t.createdBy}` : ''}` : undefined }, t.source === 'config' ? 'config (notifications.slack)' : t.source || ''),
        el('td', { class: 'counts' }, `${t.pending} pending · ${t.delivered} delivered · `,
          t.dead > 0 ? el('span', { class: 'badge bad dead' }, el('span', { 'aria-hidden': 'true' }, '✗'), `${t.dead} dead`) : `${t.dead} dead`),
        el('td', {}, t.dead > 0 && mine ? el('button', { type: 'button', class: 'secondary', 'data-key': `retry-${t.name}`, onclick: () => retry(`Retry dead of ${t.name}`, { target: t.name }) },
          `Retry dead of ${t.name}`) : null));
      })))));
    targetSel.replaceChildren(el('option', { value: '' }, 'every target'),
      ...[...new Set([...targets.map((t) => t.name), state.target].filter(Boolean))].map((n) => el('option', { value: n }, n)));
    targetSel.value = state.target;
  };
  const drawDeliveries = () => {
    rows.replaceChildren(...list.map((d) => {
      const svcLink = d.application && d.service
        ? el('a', { href: `#/apps/${encodeURIComponent(d.application)}/services/${encodeURIComponent(d.service)}` }, `${d.application}/${d.service}`)
        : d.application ? el('a', { href: `#/apps/${encodeURIComponent(d.application)}` }, d.application) : null;
      const time = d.state === 'delivered' && d.deliveredAt ? d.deliveredAt : d.createdAt;
      return el('tr', { 'data-delivery': d.id, 'data-state': d.state },
        el('td', { class: 'mono' }, d.id),
        el('td', {}, d.target),
        el('td', { title: d.cloudEventType || undefined }, d.type, d.message ? el('div', { class: 'why', title: d.message }, clip(d.message)) : null),
        el('td', {}, svcLink, d.releaseChannel ? `${svcLink ? ' in ' : ''}${d.releaseChannel}` : null, !svcLink && !d.releaseChannel ? '—' : null),
        el('td', {}, deliveryBadge(d), d.state === 'pending' && d.nextAttemptAt
          ? el('div', { class: 'muted', title: d.nextAttemptAt }, `next attempt ${until(d.nextAttemptAt)}`) : null),
        el('td', { class: 'attempts' }, d.attempts),
        el('td', { title: time }, `${d.state === 'delivered' ? 'delivered ' : ''}${ago(time)}`),
        el('td', { class: 'lasterror' }, d.lastError || ''),
        el('td', {}, d.state === 'dead' && mine ? el('button', { type: 'button', class: 'secondary', 'data-key': `retry-${d.id}`, onclick: () => retry(`Retry delivery ${d.id}`, { ids: [d.id] }) },
          'Retry', el('span', { class: 'visually-hidden' }, ` delivery ${d.id}`)) : null));
    }));
    const what = `${state.state ? `${state.state} ` : ''}deliver${list.length === 1 ? 'y' : 'ies'}${state.target ? ` of ${state.target}` : ''}`;
    count.textContent = list.length ? `${list.length} ${what}${next ? ', older ones on request' : ''}.` : `No ${what}.`;
    const had = document.activeElement === more;
    pager.hidden = !next;
    if (had && !next) targetSel.focus();
  };
  // draw reads the targets and the deliveries again: as many as are shown
  // (the pages loaded stay loaded), from the newest.
  const draw = async () => {
    const [ts, ds] = await Promise.all([api('/v1/notifications'), api(query(0, Math.min(1000, Math.max(perPage, list.length))))]);
    if (!current()) return;
    const key = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.key : undefined;
    targets = ts.targets || [];
    list = ds.deliveries || [];
    next = ds.next || 0;
    drawTargets();
    drawDeliveries();
    if (key) {
      const again = main.querySelector(`[data-key="${CSS.escape(key)}"]`);
      if (again) again.focus({ preventScroll: true });
    }
  };
  const loadMore = async () => {
    if (!next) return;
    const ds = await api(query(next, perPage));
    if (!current()) return;
    list = list.concat(ds.deliveries || []);
    next = ds.next || 0;
    drawDeliveries();
  };
  const pick = (target) => {
    state.target = target;
    list = [];
    draw().catch((e) => say(e.message));
  };
  stateSel.addEventListener('change', () => { state.state = stateSel.value; list = []; draw().catch((e) => say(e.message)); });
  targetSel.addEventListener('change', () => pick(targetSel.value));
  try {
    await draw();
  } catch (e) {
    // Reading notifications takes the read permission on every
    // application: a person bound to some says so, not "went wrong".
    if (e.status !== 403) throw e;
    if (current()) show('Notifications', el('h1', {}, 'Notifications'), el('p', { class: 'error', role: 'alert' }, e.message));
    return;
  }
  if (!current()) return;
  show('Notifications', el('h1', {}, 'Notifications'),
    el('h2', {}, 'Targets'), targetsBox, note, err,
    el('h2', {}, 'Deliveries'),
    el('div', { class: 'search' },
      el('label', { for: 'delivery-state' }, 'State '), stateSel,
      el('label', { for: 'delivery-target' }, 'Target '), targetSel),
    count,
    el('div', { class: 'scroll', tabindex: '0', role: 'region', 'aria-label': 'Deliveries' }, el('table', { class: 'deliveries' },
      el('thead', {}, el('tr', {}, ['Id', 'Target', 'Type', 'Where', 'State', 'Attempts', 'Time', 'Last error', 'Actions'].map((h) => el('th', { scope: 'col' }, h)))),
      rows)),
    pager);
  // Live: read again on the server's events, at most once a second, and
  // every 5 s for what changes without one (an attempt, a retry's wait).
  let pending = null; let last = 0;
  const reload = async () => {
    pending = null; last = Date.now();
    try { await draw(); } catch (e) { if (current()) say(e.message); }
  };
  function soon() { if (!pending) pending = setTimeout(reload, Math.max(250, 1000 - (Date.now() - last))); }
  const es = new EventSource('/v1/watch');
  es.addEventListener('event', soon);
  const tick = setInterval(soon, 5000);
  stopLive = () => { es.close(); clearTimeout(pending); clearInterval(tick); };
}


async function runtimesPage(current) {
  const list = (await api('/v1/runtimes')).runtimes || [];
  if (!current()) return;
  show('Runtimes', el('h1', {}, 'Runtimes'), el('div', { class: 'scroll', tabindex: '0', role: 'region', 'aria-label': 'Runtimes' }, el('table', {},
    el('thead', {}, el('tr', {}, el('th', {}, 'Name'), el('th', {}, 'Kind'), el('th', {}, 'Labels'), el('th', {}, 'Connection'))),
    el('tbody', {}, list.map((r) => el('tr', {},
      el('td', {}, r.name), el('td', {}, r.kind || ''),
      el('td', {}, Object.entries(r.labels || {}).map(([k, v]) => `${k}=${v}`).join(', ')),
      el('td', {}, r.linked ? `agent ${r.agent ? r.agent.state : 'never connected'}${r.agent && r.agent.host ? ` (${r.agent.host})` : ''}` : r.via ? `through ${r.via}` : 'direct')))))));
}

window.addEventListener('hashchange', () => { route(); });
document.querySelector('.skip').addEventListener('click', (ev) => { ev.preventDefault(); main.focus(); });
route();
