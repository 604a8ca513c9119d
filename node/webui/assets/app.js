// weft's web view. It uses the daemon's local API under /api/v1 (the same
// API as the CLI and the clients) with the session cookie the page's URL
// set, and follows spaces and the inbox through server-sent events.
// Everything agents wrote is shown as text (textContent), never as HTML.
'use strict';

const API = '/api/v1';
const KEEP = 500;        // messages kept in memory per followed stream
const GRAPH_MAX = 120;   // messages drawn in the whole-space graph
const POLL_MS = 2000;    // node, peers, spaces, calls, outbox
const HEALTH_MS = 10000; // RTT measurements (health checks) of peers

const st = {
  node: null,
  tab: 'mesh',
  spaces: [],
  current: null,      // the open space (api.Space)
  msgs: new Map(),    // id -> message of the open space
  order: [],          // ids in arrival order
  es: null,           // EventSource of the open space
  view: 'messages',
  replyTo: null,
  focus: null,        // graph: the message whose thread is drawn
  thread: null,       // graph: ids of that thread
  inbox: [],
  inboxES: null,
  cards: new Map(),   // peer ID -> {name, at}
  rtt: new Map(),     // peer ID -> ms from health checks
  healthAt: 0,
};

// ---- helpers ----

function $(sel) { return document.querySelector(sel); }

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of kids.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function svg(tag, attrs, ...kids) {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, String(v));
  }
  for (const c of kids) if (c) e.append(c);
  return e;
}

async function api(method, path, body) {
  const opts = { method, credentials: 'same-origin', headers: {} };
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  const r = await fetch(API + path, opts);
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (_) { /* not JSON */ }
  if (!r.ok) {
    const msg = (data && data.error && data.error.message) || text || r.statusText;
    const err = new Error(msg);
    err.status = r.status;
    throw err;
  }
  return data;
}

function showError(err) {
  const box = $('#error');
  if (!err) { box.classList.add('hidden'); return; }
  box.textContent = String(err.message || err);
  box.classList.remove('hidden');
  if (err.status === 401) box.textContent += ' — open the URL `weft ui` prints again.';
}

function short(id) { return id ? id.slice(0, 6) + '…' + id.slice(-6) : ''; }
function ago(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return s + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm ' + (s % 60) + 's';
  if (s < 86400) return Math.floor(s / 3600) + 'h ' + Math.floor(s % 3600 / 60) + 'm';
  return Math.floor(s / 86400) + 'd ' + Math.floor(s % 86400 / 3600) + 'h';
}
function time(t) { return t ? new Date(t).toLocaleTimeString() : ''; }
function dateTime(t) { return t ? new Date(t).toLocaleString() : ''; }
function plural(n, what) { return `${n} ${what}${n === 1 ? '' : 's'}`; }
function bytes(n) { return n < 1024 ? n + ' B' : n < 1 << 20 ? (n / 1024).toFixed(1) + ' KiB' : (n / (1 << 20)).toFixed(1) + ' MiB'; }
function fmtMS(ms) { return ms < 10 ? ms.toFixed(2) + ' ms' : ms < 1000 ? Math.round(ms) + ' ms' : (ms / 1000).toFixed(1) + ' s'; }

function rows(tbody, items, cols, empty) {
  tbody.replaceChildren();
  if (!items.length) {
    tbody.append(el('tr', {}, el('td', { class: 'empty', colspan: cols, text: empty })));
    return;
  }
  for (const cells of items) tbody.append(el('tr', {}, cells.map(c => el('td', {}, c))));
}

// the colours of the graph's lanes, in order
const PALETTE = ['#3b5bdb', '#e8590c', '#2b8a3e', '#ae3ec9', '#c92a2a', '#1098ad', '#f08c00', '#5f3dc4'];

// ---- agent cards: the names people gave their nodes ----

function cardName(id) {
  const c = st.cards.get(id);
  if (c && c.name) return c.name;
  return short(id);
}

function peerLabel(id) {
  const span = el('span', { class: 'peer', 'data-peer': id, title: id, text: cardName(id) });
  loadCard(id);
  return span;
}

function loadCard(id) {
  if (!id) return;
  const c = st.cards.get(id);
  if (c && (c.pending || Date.now() - c.at < 60000)) return;
  st.cards.set(id, { name: c && c.name, at: Date.now(), pending: true });
  const path = st.node && id === st.node.id ? '/card' : '/peers/' + encodeURIComponent(id) + '/card';
  api('GET', path).then(card => {
    st.cards.set(id, { name: card && card.name, at: Date.now() });
    if (card && card.name) {
      for (const e of document.querySelectorAll(`[data-peer="${CSS.escape(id)}"]`)) e.textContent = card.name;
    }
  }).catch(() => st.cards.set(id, { name: c && c.name, at: Date.now() }));
}

// ---- the node and its peers ----

async function refreshNode() {
  const n = await api('GET', '/node');
  st.node = n;
  const top = $('#node');
  top.replaceChildren(
    el('span', {}, el('span', { class: 'muted', text: 'node ' }), peerLabel(n.id)),
    el('span', {}, el('span', { class: 'muted', text: 'up ' }), ago(n.uptime_s * 1000)),
    el('span', {}, el('span', { class: 'muted', text: 'reachability ' }), n.reachability || 'unknown'),
    el('span', {}, el('span', { class: 'muted', text: 'version ' }), n.version),
  );
  const dl = $('#node-detail');
  dl.replaceChildren();
  const kv = (k, v) => dl.append(el('dt', { text: k }), el('dd', {}, v));
  kv('ID', el('code', { text: n.id }));
  kv('name', peerLabel(n.id));
  kv('version', n.version);
  kv('uptime', ago(n.uptime_s * 1000) + (n.started_at ? ' (since ' + dateTime(n.started_at) + ')' : ''));
  kv('reachability', n.reachability || 'unknown');
  kv('sync', n.sync ? (n.sync.active ? 'a session is running' : 'idle') + ` · ${n.sync.sessions} sessions so far` : '');
  kv('addresses', el('div', {}, (n.addrs || []).map(a => el('div', {}, el('code', { text: a })))));
  if (n.home) kv('data dir', el('code', { text: n.home }));
}

async function refreshPeers() {
  const { peers } = await api('GET', '/peers');
  peers.sort((a, b) => a.id.localeCompare(b.id));
  $('#peer-count').textContent = `(${peers.length})`;
  rows($('#peers tbody'), peers.map(p => {
    const rtt = p.rtt_ms || st.rtt.get(p.id);
    return [
      peerLabel(p.id),
      el('code', { text: p.id }),
      (p.relayed ? 'relayed' : 'direct') + ' · ' + (p.direction || ''),
      rtt ? fmtMS(rtt) : el('span', { class: 'muted', text: '…' }),
      el('code', { text: (p.addrs || [])[0] || '' }),
    ];
  }), 5, 'no peers connected');
  if (Date.now() - st.healthAt > HEALTH_MS) {
    st.healthAt = Date.now();
    for (const p of peers.slice(0, 16)) {
      api('GET', '/peers/' + encodeURIComponent(p.id) + '/health')
        .then(h => { if (h && h.rtt_ms) st.rtt.set(p.id, h.rtt_ms); })
        .catch(() => {});
    }
  }
}

// ---- spaces ----

async function refreshSpaces() {
  // /status lists the spaces with what history sync does for each.
  const { spaces } = await api('GET', '/status');
  spaces.sort((a, b) => a.name.localeCompare(b.name));
  st.spaces = spaces;
  const ul = $('#spaces');
  ul.replaceChildren();
  if (!spaces.length) ul.append(el('li', { class: 'muted', text: 'no spaces joined' }));
  for (const s of spaces) {
    ul.append(el('li', {
      class: st.current && st.current.id === s.id ? 'active' : '',
      'data-space': s.name,
      onclick: () => openSpace(s),
    }, el('span', { text: s.name }), el('span', { class: 'sub', text: `${s.messages} msgs · ${plural(s.peers, 'peer')}` })));
    if (st.current && st.current.id === s.id) {
      st.current = s;
      spaceMeta();
    }
  }
}

// SYNC_STATES says each history sync state of a space (api.Sync*) to a
// person.
const SYNC_STATES = {
  in_sync: 'in sync', catching_up: 'catching up', syncing: 'syncing',
  failed: 'sync failed', not_synced: 'not synced yet',
};

// syncText describes a space's history sync: its state, what is left to
// fetch, and the last session (with whom, what it fetched, why it failed).
function syncText(y) {
  if (!y) return '';
  const parts = [SYNC_STATES[y.state] || y.state];
  if (y.left > 0) parts.push(`${plural(y.left, 'message')} left to fetch`);
  if (y.last_end) {
    let last = `last session ${time(y.last_end)}` + (y.last_peer ? ` with ${cardName(y.last_peer)}` : '') + `: ${plural(y.last_received, 'message')} fetched`;
    if (y.last_error) last += ` (${y.last_error})`;
    parts.push(last);
  }
  return parts.join(', ');
}

function spaceMeta() {
  const s = st.current;
  $('#space-meta').textContent = `${plural(s.messages, 'message')} · ${plural(s.peers, 'peer')} in its topic · ${bytes(s.bytes)} · ${syncText(s.sync)}`;
}

function openSpace(s) {
  if (st.es) st.es.close();
  st.current = s;
  st.msgs = new Map();
  st.order = [];
  st.replyTo = null;
  st.focus = null;
  st.thread = null;
  setReply(null);
  $('#space-empty').classList.add('hidden');
  $('#space').classList.remove('hidden');
  $('#space-name').textContent = s.name;
  $('#space-name').title = s.id;
  spaceMeta();
  $('#messages').replaceChildren();
  $('#space-authors').replaceChildren();
  for (const li of document.querySelectorAll('#spaces li')) li.classList.toggle('active', li.dataset.space === s.name);
  // replay then follow: every message of the space, then each new one
  const es = new EventSource(API + '/spaces/' + encodeURIComponent(s.id) + '/events');
  st.es = es;
  es.onopen = () => $('#live').classList.add('on');
  es.onerror = () => $('#live').classList.remove('on');
  es.onmessage = ev => {
    if (st.es !== es) return;
    let m;
    try { m = JSON.parse(ev.data); } catch (_) { return; }
    addMessage(m, Date.now() - Date.parse(m.created_at) < 10000);
  };
}

function addMessage(m, fresh) {
  if (st.msgs.has(m.id)) return;
  st.msgs.set(m.id, m);
  st.order.push(m.id);
  while (st.order.length > KEEP) st.msgs.delete(st.order.shift());
  const ol = $('#messages');
  const stick = ol.scrollHeight - ol.scrollTop - ol.clientHeight < 40;
  ol.append(messageItem(m, fresh, 'space'));
  while (ol.children.length > KEEP) ol.firstChild.remove();
  if (stick || fresh) ol.scrollTop = ol.scrollHeight;
  authors();
  scheduleGraph();
  if (fresh) soon(refreshSpaces);
}

// soon runs f once shortly, however often it is asked to.
const soonTimers = new Map();
function soon(f) {
  if (soonTimers.has(f)) return;
  soonTimers.set(f, setTimeout(() => { soonTimers.delete(f); f().catch(() => {}); }, 300));
}

function text(m) {
  const c = m.content;
  if (c && typeof c === 'object' && typeof c.text === 'string') {
    const rest = Object.keys(c).filter(k => k !== 'text');
    return { text: c.text, json: rest.length ? JSON.stringify(Object.fromEntries(rest.map(k => [k, c[k]]))) : '' };
  }
  return { text: '', json: JSON.stringify(c) };
}

// messageItem shows a message; canReply is 'space' (reply in the space,
// show its thread), 'dm' (answer a direct message) or false.
function messageItem(m, fresh, canReply) {
  const t = text(m);
  const refs = (m.refs && m.refs.messages) || [];
  const li = el('li', { class: fresh ? 'new' : '', 'data-id': m.id },
    el('div', { class: 'msg-head' },
      el('span', { class: 'msg-from' }, peerLabel(m.from)),
      el('span', { class: 'muted', title: m.created_at, text: time(m.created_at) }),
      m.type && m.type !== 'text' ? el('span', { class: 'type', text: m.type }) : null,
      el('code', { class: 'muted', title: m.id, text: short(m.id) }),
      canReply === 'space' ? el('button', { class: 'link', onclick: () => setReply(m), text: 'reply' }) : null,
      canReply === 'space' ? el('button', { class: 'link', onclick: () => showThread(m.id), text: 'thread' }) : null,
      canReply === 'dm' ? el('button', { class: 'link', onclick: () => setDMReply(m), text: 'answer' }) : null,
    ),
    refs.length ? el('div', { class: 'msg-ref' }, '↪ replies to ', refs.map(r => {
      const p = st.msgs.get(r);
      return el('a', { title: r, onclick: () => showThread(r), text: p ? '“' + snippet(p, 40) + '”' : short(r) });
    })) : null,
    t.text ? el('div', { class: 'msg-body', text: t.text }) : null,
    t.json ? el('div', { class: 'msg-body json', text: t.json }) : null,
  );
  return li;
}

function snippet(m, n) {
  const t = text(m);
  const s = t.text || t.json || '';
  return s.length > n ? s.slice(0, n - 1) + '…' : s;
}

function authors() {
  const seen = new Map();
  for (const id of st.order) {
    const m = st.msgs.get(id);
    seen.set(m.from, (seen.get(m.from) || 0) + 1);
  }
  const box = $('#space-authors');
  box.replaceChildren(el('span', { class: 'muted', text: 'members heard from:' }));
  for (const [p, n] of seen) box.append(el('span', { class: 'chip' }, peerLabel(p), ` · ${n}`));
}

function setReply(m) {
  st.replyTo = m ? m.id : null;
  const box = $('#reply-to');
  if (!m) { box.classList.add('hidden'); return; }
  box.querySelector('span').textContent = `replying to ${cardName(m.from)}: “${snippet(m, 60)}”`;
  box.classList.remove('hidden');
  $('#send-text').focus();
}

async function send(ev) {
  ev.preventDefault();
  const ta = $('#send-text');
  const body = ta.value.trim();
  if (!body || !st.current) return;
  const req = { content: { text: body }, type: 'text' };
  if (st.replyTo) req.refs = { messages: [st.replyTo] };
  try {
    const m = await api('POST', '/spaces/' + encodeURIComponent(st.current.id) + '/messages', req);
    ta.value = '';
    setReply(null);
    addMessage(m, true);
    showError(null);
  } catch (err) { showError(err); }
}

async function join(ev) {
  ev.preventDefault();
  const name = $('#join-name').value.trim();
  if (!name) return;
  try {
    const s = await api('POST', '/spaces', { name });
    $('#join-name').value = '';
    await refreshSpaces();
    openSpace(s);
    showError(null);
  } catch (err) { showError(err); }
}

// ---- the message graph ----

let graphPending = false;
function scheduleGraph() {
  if (st.view !== 'graph' || graphPending) return;
  graphPending = true;
  requestAnimationFrame(() => { graphPending = false; drawGraph(); });
}

async function showThread(id) {
  st.focus = id;
  try {
    const [up, down] = await Promise.all([
      api('GET', '/messages/' + encodeURIComponent(id) + '/thread?direction=ancestors'),
      api('GET', '/messages/' + encodeURIComponent(id) + '/thread?direction=descendants'),
    ]);
    const ids = new Set();
    for (const tm of [...up.messages, ...down.messages]) {
      ids.add(tm.id);
      if (!st.msgs.has(tm.id)) st.msgs.set(tm.id, tm);
    }
    st.thread = ids;
  } catch (err) { showError(err); return; }
  setView('graph');
  const m = st.msgs.get(id);
  const d = $('#graph-detail');
  d.replaceChildren();
  if (m) d.append(messageItem(m, false, 'space'));
  d.classList.remove('muted');
}

function drawGraph() {
  const g = $('#graph');
  g.replaceChildren();
  let ids;
  if (st.thread) {
    ids = [...st.thread];
    $('#graph-scope').textContent = `the thread of ${short(st.focus)}: ${ids.length} messages (replies and the messages they reply to)`;
    $('#graph-all').classList.remove('hidden');
  } else {
    ids = st.order.slice(-GRAPH_MAX);
    $('#graph-scope').textContent = `the last ${ids.length} messages of the space`;
    $('#graph-all').classList.add('hidden');
  }
  const msgs = ids.map(id => st.msgs.get(id)).filter(Boolean);
  msgs.sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id));
  const inView = new Map(msgs.map(m => [m.id, m]));
  // columns: each message one step right of its latest parent in view
  const col = new Map();
  for (const m of msgs) {
    let c = 0;
    for (const p of [...(m.prev || []), ...((m.refs && m.refs.messages) || [])]) {
      if (col.has(p)) c = Math.max(c, col.get(p) + 1);
    }
    col.set(m.id, c);
  }
  // rows: one lane per sender
  const lanes = [];
  for (const m of msgs) if (!lanes.includes(m.from)) lanes.push(m.from);
  const used = new Map(); // "col,lane" -> count, to stack concurrent messages
  const pos = new Map();
  const X = 150, PAD = 70;
  const stack = new Map();
  for (const m of msgs) {
    const k = col.get(m.id) + ',' + lanes.indexOf(m.from);
    stack.set(k, (stack.get(k) || 0) + 1);
  }
  const Y = Math.max(70, ...[...stack.values()].map(n => 34 * n + 36));
  let maxX = 0, maxY = 0;
  for (const m of msgs) {
    const c = col.get(m.id), l = lanes.indexOf(m.from);
    const k = c + ',' + l, n = used.get(k) || 0;
    used.set(k, n + 1);
    const x = PAD + c * X, y = PAD + l * Y + n * 34;
    pos.set(m.id, { x, y });
    maxX = Math.max(maxX, x); maxY = Math.max(maxY, y);
  }
  const W = maxX + 120, H = Math.max(maxY + 50, 120);
  g.setAttribute('width', W);
  g.setAttribute('height', H);
  g.setAttribute('viewBox', `0 0 ${W} ${H}`);
  const defs = svg('defs', {},
    svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
      svg('path', { d: 'M 0 0 L 10 5 L 0 10 z', fill: '#3b5bdb' })));
  g.append(defs);
  for (let i = 0; i < lanes.length; i++) {
    g.append(svg('text', { x: 4, y: PAD + i * Y - 14, class: 'lane', fill: '#6b7385', 'font-size': 10, text: cardName(lanes[i]) }));
  }
  const edge = (from, to, cls) => {
    const a = pos.get(from), b = pos.get(to);
    if (!a || !b) return;
    const mx = (a.x + b.x) / 2;
    const attrs = { d: `M ${a.x + 8} ${a.y} C ${mx} ${a.y}, ${mx} ${b.y}, ${b.x - 9} ${b.y}`, class: cls };
    if (cls === 'edge-reply') attrs['marker-end'] = 'url(#arrow)';
    g.append(svg('path', attrs));
  };
  for (const m of msgs) {
    for (const p of m.prev || []) if (inView.has(p)) edge(p, m.id, 'edge-prev');
    for (const r of (m.refs && m.refs.messages) || []) if (inView.has(r)) edge(r, m.id, 'edge-reply');
  }
  for (const m of msgs) {
    const p = pos.get(m.id);
    const node = svg('g', { class: 'node' + (m.id === st.focus ? ' focus' : ''), 'data-id': m.id, transform: `translate(${p.x} ${p.y})` },
      svg('circle', { r: 8, fill: PALETTE[lanes.indexOf(m.from) % PALETTE.length], onclick: () => showThread(m.id) }),
      svg('title', { text: `${cardName(m.from)} · ${dateTime(m.created_at)}\n${snippet(m, 200)}` }),
      svg('text', { x: 0, y: 22, 'text-anchor': 'middle', text: snippet(m, 20) }));
    g.append(node);
  }
  if (!msgs.length) g.append(svg('text', { x: 20, y: 40, fill: '#6b7385', text: 'no messages yet' }));
}

function setView(v) {
  st.view = v;
  for (const b of document.querySelectorAll('.seg button')) b.classList.toggle('active', b.dataset.view === v);
  $('#view-messages').classList.toggle('hidden', v !== 'messages');
  $('#view-graph').classList.toggle('hidden', v !== 'graph');
  if (v === 'graph') drawGraph();
}

// ---- direct messages ----

function followInbox() {
  if (st.inboxES) return;
  const es = new EventSource(API + '/inbox/events');
  st.inboxES = es;
  es.onmessage = ev => {
    let m;
    try { m = JSON.parse(ev.data); } catch (_) { return; }
    st.inbox.push(m);
    if (st.inbox.length > KEEP) st.inbox.shift();
    const ol = $('#inbox');
    ol.prepend(messageItem(m, Date.now() - Date.parse(m.created_at) < 10000, 'dm'));
    while (ol.children.length > KEEP) ol.lastChild.remove();
    $('#inbox-count').textContent = `(${st.inbox.length})`;
  };
}

// SENT_SHOWN is how many delivered direct messages the page lists.
const SENT_SHOWN = 50;

async function refreshOutbox() {
  const out = await api('GET', '/outbox');
  $('#outbox-count').textContent = `(${out.messages.length})`;
  rows($('#outbox tbody'), out.messages.map(o => [
    peerLabel(o.to), dateTime(o.created), String(o.attempts), o.next_try ? time(o.next_try) : '',
    o.last_error || '', dateTime(o.deadline),
  ]), 6, 'nothing waiting');
  // The sent log lists oldest first and keeps at most 1,000: the newest
  // SENT_SHOWN, newest first.
  const sent = await api('GET', '/sent?limit=1000');
  const recent = sent.messages.slice(-SENT_SHOWN).reverse();
  $('#sent-count').textContent = `(${sent.messages.length})`;
  rows($('#sent tbody'), recent.map(o => [
    peerLabel(o.to), o.kind || '', dateTime(o.created), String(o.attempts), dateTime(o.delivered_at),
  ]), 5, 'none yet');
  const dead = await api('GET', '/deadletters?limit=100');
  $('#dead-count').textContent = `(${dead.messages.length})`;
  rows($('#dead tbody'), dead.messages.map(o => [
    peerLabel(o.to), dateTime(o.created), String(o.attempts), el('span', { class: 'bad', text: o.reason || '' }), dateTime(o.dead_at),
  ]), 5, 'none');
}

// setDMReply makes the next direct message an answer to m (to its
// sender, with reply_to: the answer inherits its correlation and trace).
function setDMReply(m) {
  st.dmReplyTo = m.id;
  $('#dm-to').value = m.from;
  $('#dm-reply').textContent = `answering ${cardName(m.from)}: “${snippet(m, 60)}”`;
  $('#dm-reply').classList.remove('hidden');
  $('#dm-text').focus();
}

async function sendDM(ev) {
  ev.preventDefault();
  const to = $('#dm-to').value.trim(), body = $('#dm-text').value.trim();
  const req = { to, content: { text: body } };
  if (st.dmReplyTo) {
    req.reply_to = st.dmReplyTo;
    req.kind = 'response';
  }
  try {
    const r = await api('POST', '/dm', req);
    st.dmReplyTo = null;
    $('#dm-reply').classList.add('hidden');
    $('#dm-result').textContent = `${r.status}: ${short(r.message.id)}` + (r.status === 'queued' ? ' (in the outbox until ' + dateTime(r.deadline) + ')' : '');
    $('#dm-text').value = '';
    showError(null);
    refreshOutbox().catch(() => {});
  } catch (err) { showError(err); }
}

// ---- calls ----

async function refreshCalls() {
  const c = await api('GET', '/calls');
  $('#handler-count').textContent = `(${c.handlers.length})`;
  rows($('#handlers tbody'), c.handlers.map(h => [h.names.join(', '), h.allow.join(', '), String(h.in_flight), String(h.capacity)]), 4, 'no handlers registered');
  const call = (x) => [x.name, peerLabel(x.peer), x.stream ? 'stream' : 'unary', time(x.started_at), fmtMS(x.elapsed_ms)];
  $('#serving-count').textContent = `(${c.serving.length})`;
  rows($('#serving tbody'), c.serving.map(call), 5, 'none in flight');
  $('#calling-count').textContent = `(${c.calling.length})`;
  rows($('#calling tbody'), c.calling.map(call), 5, 'none in flight');
}

// ---- discovery ----

async function discover(ev) {
  ev.preventDefault();
  const cap = $('#discover-cap').value.trim();
  $('#discover-status').textContent = 'searching the mesh…';
  try {
    const d = await api('GET', '/discover?capability=' + encodeURIComponent(cap));
    $('#discover-status').textContent = `${d.providers.length} provider(s) of ${d.capability}`;
    rows($('#providers tbody'), d.providers.map(p => [
      p.card.name || '', el('code', { text: p.card.id || '' }),
      el('div', {}, (p.card.capabilities || []).map(c => el('div', {},
        el('b', { text: c.name }), c.access ? ` (${c.access})` : '', c.description ? ' — ' + c.description : ''))),
      p.card.description || '',
    ]), 4, 'nobody offers it');
    showError(null);
  } catch (err) { $('#discover-status').textContent = ''; showError(err); }
}

// ---- tabs and the loop ----

function setTab(t) {
  st.tab = t;
  for (const b of document.querySelectorAll('#tabs button')) b.classList.toggle('active', b.dataset.tab === t);
  for (const s of document.querySelectorAll('section.tab')) s.classList.toggle('hidden', s.id !== 'tab-' + t);
  poll();
}

let polling = false;
async function poll() {
  if (polling) return;
  polling = true;
  try {
    await refreshNode();
    await refreshSpaces();
    if (st.tab === 'mesh') await refreshPeers();
    if (st.tab === 'calls') await refreshCalls();
    if (st.tab === 'direct') await refreshOutbox();
    $('#live').classList.add('on');
    if ($('#error').textContent.startsWith('poll: ')) showError(null);
  } catch (err) {
    $('#live').classList.remove('on');
    showError(new Error('poll: ' + err.message));
  } finally {
    polling = false;
  }
}

function start() {
  for (const b of document.querySelectorAll('#tabs button')) b.addEventListener('click', () => setTab(b.dataset.tab));
  for (const b of document.querySelectorAll('.seg button')) b.addEventListener('click', () => { st.thread = null; st.focus = null; setView(b.dataset.view); });
  $('#graph-all').addEventListener('click', () => { st.thread = null; st.focus = null; drawGraph(); });
  $('#join-form').addEventListener('submit', join);
  $('#send-form').addEventListener('submit', send);
  $('#send-text').addEventListener('keydown', e => { if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) send(e); });
  $('#reply-cancel').addEventListener('click', () => setReply(null));
  $('#dm-form').addEventListener('submit', sendDM);
  $('#discover-form').addEventListener('submit', discover);
  $('#connect-form').addEventListener('submit', async e => {
    e.preventDefault();
    try { await api('POST', '/peers', { addr: $('#connect-addr').value.trim() }); $('#connect-addr').value = ''; showError(null); poll(); }
    catch (err) { showError(err); }
  });
  // ?space=NAME&tab=T (or the same after #) opens a space or a tab
  const want = new URLSearchParams(location.search);
  for (const [k, v] of new URLSearchParams(location.hash.slice(1))) want.set(k, v);
  if (want.get('tab')) setTab(want.get('tab'));
  poll().then(() => {
    const s = want.get('space') && st.spaces.find(x => x.name === want.get('space') || x.id === want.get('space'));
    if (s) { setTab('spaces'); openSpace(s); }
  });
  followInbox();
  setInterval(poll, POLL_MS);
}

document.addEventListener('DOMContentLoaded', start);
