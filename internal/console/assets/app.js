// kbroker console: renders the state the broker pushes over server-sent
// events. Every value from the server is put in the page as text (text
// nodes, attribute values), never parsed as markup.
'use strict';
(function () {
  const started = performance.now();
  const api = window.__kbrokerConsole = { renders: 0, firstRenderMs: -1, events: 0, state: null };
  const $ = (id) => document.getElementById(id);

  // el builds an element; children are nodes or text.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    if (attrs) {
      for (const k of Object.keys(attrs)) {
        const v = attrs[k];
        if (v === undefined || v === null) continue;
        if (k === 'class') e.className = v; else e.setAttribute(k, String(v));
      }
    }
    for (const c of children) {
      if (c === undefined || c === null) continue;
      e.append(typeof c === 'object' ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  // The actions token is in the page only when the broker enables
  // actions (kbroker.console.actions.enable).
  const tokenMeta = document.querySelector('meta[name="kbroker-actions-token"]');
  const actionsToken = tokenMeta ? tokenMeta.content : '';
  api.actions = actionsToken !== '';

  const fmt = (n) => (n === undefined || n === null || n < 0) ? '–' : String(n);
  function human(n) {
    if (n >= 1e9) return (n / 1e9).toFixed(1) + 'G';
    if (n >= 1e6) return (n / 1e6).toFixed(1) + 'M';
    if (n >= 1e3) return (n / 1e3).toFixed(1) + 'k';
    return n.toFixed(n < 10 ? 1 : 0);
  }

  function renderBrokers(s) {
    const box = el('div');
    for (const b of s.brokers || []) {
      const cls = 'broker' + (b.alive ? '' : ' dead') + (b.controller ? ' ctrl' : '');
      box.append(el('div', { class: cls, 'data-broker': b.id, 'data-alive': b.alive, 'data-controller': b.controller },
        el('strong', null, 'broker ' + b.id),
        b.rack ? ' rack ' + b.rack : '',
        b.controller ? ' · controller' : '',
        b.alive ? '' : ' · DOWN',
        b.id === s.self ? ' · this broker' : '',
        el('div', null, (b.endpoints || []).join(' '))));
    }
    $('brokers').replaceChildren(box);
    $('cluster').textContent = 'cluster ' + (s.cluster_id || '?') + ' · controller ' + (s.controller_id >= 0 ? s.controller_id : 'none');
  }

  function replicaState(p, id, offline) {
    if (offline.has(id)) return 'offline';
    if (id === p.leader) return 'leader';
    return (p.isr || []).includes(id) ? 'insync' : 'outofsync';
  }

  function renderTopics(s) {
    const frag = document.createDocumentFragment();
    for (const t of s.topics || []) {
      const table = el('table', null, el('thead', null, el('tr', null,
        el('th', null, 'partition'), el('th', null, 'leader'), el('th', null, 'epoch'), el('th', null, 'replicas'),
        el('th', null, 'log start'), el('th', null, 'HW'), el('th', null, 'LEO'), el('th', null, 'follower lag'),
        api.actions ? el('th', null, 'actions') : null)));
      const body = el('tbody');
      let maxLag = 1;
      for (const p of t.partitions) for (const k in (p.follower_lag || {})) maxLag = Math.max(maxLag, p.follower_lag[k]);
      for (const p of t.partitions) {
        const offline = new Set(p.offline || []);
        const reps = el('td', { class: 'replicas' });
        for (const id of p.replicas || []) {
          const st = replicaState(p, id, offline);
          reps.append(el('span', { class: 'rep ' + st, 'data-broker': id, 'data-state': st, title: 'broker ' + id + ': ' + st }, id));
        }
        const lag = el('td', { class: 'lagcell' });
        for (const id of Object.keys(p.follower_lag || {})) {
          const v = p.follower_lag[id];
          lag.append(el('div', { 'data-follower': id, 'data-lag': v }, 'b' + id + ' ',
            el('span', { class: 'bar', style: null }), el('span', { class: 'lagv' }, v < 0 ? 'not fetched' : v)));
          const bar = lag.lastChild.querySelector('.bar');
          bar.style.width = (v > 0 ? Math.max(2, Math.round(80 * v / maxLag)) : 0) + 'px';
        }
        let cls = '';
        if (p.leader < 0) cls = 'offline'; else if ((p.isr || []).length < (p.replicas || []).length) cls = 'under';
        body.append(el('tr', { class: cls, 'data-topic': t.name, 'data-partition': p.partition, 'data-leader': p.leader,
          'data-epoch': p.leader_epoch, 'data-isr': (p.isr || []).join(','), 'data-replicas': (p.replicas || []).join(',') },
          el('td', null, p.partition), el('td', { class: 'leader' }, p.leader >= 0 ? p.leader : 'OFFLINE'), el('td', null, p.leader_epoch),
          reps, el('td', null, fmt(p.log_start)), el('td', null, fmt(p.hw)), el('td', null, fmt(p.leo)), lag,
          api.actions ? actionCell(t.name, p) : null));
      }
      table.append(body);
      frag.append(el('div', { class: 'topic', 'data-topic': t.name }, el('h3', null, t.name, t.internal ? ' (internal)' : ''), table));
    }
    $('topics').replaceChildren(frag);
  }

  // actionCell offers a preferred election where the partition has a
  // live leader that is not its first replica.
  function actionCell(topic, p) {
    const td = el('td', { class: 'actions' });
    const preferred = (p.replicas || [])[0];
    if (p.leader >= 0 && preferred !== undefined && p.leader !== preferred) {
      td.append(el('button', { type: 'button', 'data-action': 'elect-preferred', 'data-topic': topic, 'data-partition': p.partition,
        title: 'move leadership back to the preferred replica ' + preferred }, 'elect ' + preferred));
    }
    return td;
  }

  function showResult(ok, text) {
    const out = $('action-result');
    out.textContent = text;
    out.className = ok ? 'ok' : 'failed';
  }

  // act POSTs an action with the page's token; same-origin only.
  async function act(action, body) {
    showResult(true, action + '…');
    try {
      const resp = await fetch('/api/actions/' + action, {
        method: 'POST', credentials: 'same-origin', cache: 'no-store',
        headers: { 'Content-Type': 'application/json', 'X-Kbroker-Console-Token': actionsToken },
        body: JSON.stringify(body),
      });
      const res = await resp.json().catch(() => ({ ok: false, message: resp.status + ' ' + resp.statusText }));
      showResult(resp.ok && res.ok, res.message || String(resp.status));
    } catch (err) {
      showResult(false, action + ': ' + err);
    }
  }

  function setUpActions() {
    if (!api.actions) return;
    $('actions-section').hidden = false;
    // Delegated: rows are re-rendered every push.
    $('topics').addEventListener('click', (e) => {
      const b = e.target.closest('button[data-action="elect-preferred"]');
      if (!b) return;
      act('elect-preferred', { topic: b.dataset.topic, partition: +b.dataset.partition });
    });
    $('delete-records').addEventListener('submit', (e) => {
      e.preventDefault();
      const f = e.target;
      act('delete-records', { topic: f.elements.topic.value, partition: +f.elements.partition.value, offset: +f.elements.offset.value });
    });
  }

  function renderGroups(s) {
    const frag = document.createDocumentFragment();
    const groups = s.groups || [];
    if (groups.length === 0) frag.append(el('p', { class: 'legend' }, 'none'));
    for (const g of groups) {
      const offs = el('tbody');
      for (const o of g.offsets || []) {
        offs.append(el('tr', { 'data-topic': o.topic, 'data-partition': o.partition, 'data-lag': o.lag },
          el('td', null, o.topic), el('td', null, o.partition), el('td', null, o.committed), el('td', null, fmt(o.end)), el('td', null, fmt(o.lag))));
      }
      const members = el('ul');
      for (const m of g.members || []) {
        const parts = [];
        for (const t of Object.keys(m.assigned || {})) parts.push(t + ' ' + m.assigned[t].join(','));
        members.append(el('li', { 'data-member': m.id }, m.client_id, ' @ ', m.client_host, parts.length ? ': ' + parts.join('; ') : ''));
      }
      frag.append(el('div', { class: 'group', 'data-group': g.name },
        el('h3', null, el('span', { class: 'group-name' }, g.name), ' ', el('small', null, g.state + ' · ' + (g.members || []).length + ' members · lag ' + g.lag)),
        members,
        el('table', null, el('thead', null, el('tr', null, el('th', null, 'topic'), el('th', null, 'partition'), el('th', null, 'committed'), el('th', null, 'HW'), el('th', null, 'lag'))), offs)));
    }
    $('groups').replaceChildren(frag);
  }

  function spark(values, label, unit) {
    const w = 180, h = 28;
    const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
    svg.setAttribute('class', 'spark'); svg.setAttribute('width', w); svg.setAttribute('height', h);
    const maxV = Math.max(1e-9, ...values);
    const pts = values.map((v, i) => ((values.length > 1 ? i * w / (values.length - 1) : 0).toFixed(1) + ',' + (h - 2 - (h - 4) * v / maxV).toFixed(1)));
    const line = document.createElementNS('http://www.w3.org/2000/svg', 'polyline');
    line.setAttribute('points', pts.join(' '));
    svg.append(line);
    const last = values.length ? values[values.length - 1] : 0;
    return el('div', { 'data-spark': label }, label + ': ' + human(last) + unit, svg);
  }

  function renderRates(rates) {
    const r = rates || [];
    $('rates').replaceChildren(
      spark(r.map((x) => x.bytes_in), 'bytes in', '/s'),
      spark(r.map((x) => x.bytes_out), 'bytes out', '/s'),
      spark(r.map((x) => x.messages_in), 'messages in', '/s'),
      spark(r.map((x) => x.requests), 'requests', '/s'),
      spark(r.map((x) => x.latency_ms), 'mean request latency', ' ms'));
  }

  let lastSeq = 0;
  function addEvents(events) {
    const list = $('timeline');
    for (const e of events) {
      if (e.seq <= lastSeq) continue;
      lastSeq = e.seq;
      api.events++;
      const when = new Date(e.time);
      list.prepend(el('li', { class: e.kind, 'data-kind': e.kind, 'data-topic': e.topic || '', 'data-partition': e.partition, 'data-broker': e.broker, 'data-seq': e.seq,
        'data-election': e.election || '', 'data-controller-epoch': e.controller_epoch, title: 'controller epoch ' + e.controller_epoch },
        el('time', { datetime: e.time }, when.toLocaleTimeString()), e.text));
    }
    while (list.childElementCount > 500) list.lastElementChild.remove();
  }

  function render(state) {
    if (!state || !state.snapshot) return;
    const s = state.snapshot;
    api.state = s;
    renderBrokers(s);
    renderTopics(s);
    renderGroups(s);
    renderRates(state.rates);
    api.rates = (state.rates || []).length;
    api.renders++;
    if (api.firstRenderMs < 0) {
      api.firstRenderMs = performance.now() - started;
      // Since the navigation started (performance's time origin): what
      // "the page loads in" means.
      api.renderedAtMs = performance.now();
      document.body.setAttribute('data-rendered', '1');
    }
  }

  setUpActions();
  try {
    render(JSON.parse($('initial-state').textContent));
  } catch (err) {
    console.warn('no initial state', err);
  }
  const conn = $('conn');
  const es = new EventSource('/api/events');
  es.addEventListener('open', () => { conn.textContent = 'live'; conn.className = 'conn live'; });
  es.addEventListener('error', () => { conn.textContent = 'reconnecting…'; conn.className = 'conn down'; });
  es.addEventListener('state', (e) => render(JSON.parse(e.data)));
  es.addEventListener('timeline', (e) => addEvents(JSON.parse(e.data)));
})();
