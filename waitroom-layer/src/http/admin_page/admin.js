// The waiting room's status page: reads `stats` every few seconds and sends the operator's actions. No build
// step, no dependency; served by the room under a strict Content-Security-Policy (no inline script).
'use strict';
(function () {
  const base = document.body.dataset.base + '/admin/';
  const $ = (id) => document.getElementById(id);
  const EVERY_MS = 2000;
  let timer = null;

  const num = (v) => (v === null || v === undefined) ? '–' : Math.round(v).toLocaleString('en');
  const when = (ms) => (ms === null || ms === undefined) ? 'not set' : new Date(ms).toISOString().replace('.000Z', 'Z');
  const duration = (s) => {
    if (s === null || s === undefined) return '–';
    if (s < 60) return s + ' s';
    if (s < 3600) return Math.round(s / 60) + ' min';
    return (s / 3600).toFixed(1) + ' h';
  };
  // datetime-local works in the browser's local time, without seconds' fractions.
  const toLocalInput = (ms) => {
    if (ms === null || ms === undefined) return '';
    const d = new Date(ms);
    const p = (n) => String(n).padStart(2, '0');
    return d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' + p(d.getDate()) + 'T' + p(d.getHours()) + ':' +
      p(d.getMinutes()) + ':' + p(d.getSeconds());
  };
  const fromLocalInput = (v) => v ? new Date(v).getTime() : null;
  const set = (id, text) => { const e = $(id); if (e) e.textContent = text; };
  const say = (text) => set('message', text);

  function render(s) {
    set('door-state', s.door.state.replace('_', ' '));
    set('door-why', s.door.why);
    set('waiting', num(s.waiting));
    set('prequeue', num(s.prequeue));
    set('active', num(s.active));
    set('capacity', num(s.capacity));
    set('admitted-pm', num(s.admitted_per_minute));
    set('apm', s.admit_per_minute === null ? 'none' : num(s.admit_per_minute));
    set('head-rate', s.head_rate_per_minute === null ? 'not measured yet' : num(s.head_rate_per_minute));
    set('tail-eta', s.waiting > 0 ? duration(s.tail_eta_seconds) : 'nobody waits');
    const inv = s.inventory;
    set('seats-sold', inv ? num(inv.sold) : '–');
    set('seats-held', inv ? num(inv.held) : '–');
    set('seats-left', inv ? num(inv.total - inv.sold - inv.held) : 'not reported');
    set('joined', num(s.counters.joined));
    set('admitted', num(s.counters.admitted));
    set('finished', num(s.counters.finished));
    set('opens-at', when(s.opens_at_ms));
    set('prequeue-at', when(s.prequeue_opens_at_ms));
    set('closes-at', when(s.closes_at_ms));
    set('updated', 'Updated ' + when(s.now_ms) + '.');
    set('store', s.store_ok ? '' : 'The store has not answered lately.');
    document.body.dataset.door = s.door.state;
    document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
  }

  function fillSchedule(s) {
    $('opens-input').value = toLocalInput(s.opens_at_ms);
    $('prequeue-input').value = toLocalInput(s.prequeue_opens_at_ms);
    $('closes-input').value = toLocalInput(s.closes_at_ms);
  }

  async function call(path, body) {
    const init = { credentials: 'same-origin', headers: { accept: 'application/json' } };
    if (body !== undefined) {
      init.method = 'POST';
      init.headers['content-type'] = 'application/json';
      init.headers['x-waitroom-admin'] = '1';
      init.body = JSON.stringify(body);
    }
    const res = await fetch(base + path, init);
    if (res.status === 401) { location.reload(); throw new Error('signed out'); }
    const data = await res.json().catch(() => ({}));
    if (!res.ok) throw new Error(data.detail || ('HTTP ' + res.status));
    return data;
  }

  async function poll() {
    clearTimeout(timer);
    try {
      render(await call('stats'));
    } catch (e) {
      set('store', 'Could not read the figures: ' + e.message);
    }
    timer = setTimeout(poll, EVERY_MS);
  }

  async function act(path, body, done) {
    try {
      const s = await call(path, body === undefined ? {} : body);
      if (s.door) render(s);
      say(done);
      loadAudit();
      return s;
    } catch (e) {
      say('Not done: ' + e.message);
      return null;
    }
  }

  // Destructive actions ask first, on the page itself.
  let pending = null;
  function confirmThen(text, run) {
    pending = run;
    set('confirm-text', text);
    $('confirm').hidden = false;
  }
  $('confirm-yes').addEventListener('click', () => { $('confirm').hidden = true; const r = pending; pending = null; if (r) r(); });
  $('confirm-no').addEventListener('click', () => { $('confirm').hidden = true; pending = null; say('Cancelled.'); });

  $('pause').addEventListener('click', () => act('pause', undefined, 'The door is paused.'));
  $('resume').addEventListener('click', () => act('resume', undefined, 'The door is letting people in again.'));
  $('open-now').addEventListener('click', (e) => confirmThen(e.target.dataset.confirm, () => act('open-now', undefined, 'The door is open.')));
  $('close').addEventListener('click', (e) => confirmThen(e.target.dataset.confirm, () => act('close', undefined, 'The on-sale is closed.')));
  $('capacity-form').addEventListener('submit', (e) => {
    e.preventDefault();
    act('capacity', { capacity: Number($('capacity-input').value) }, 'Capacity set.');
  });
  $('apm-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const v = $('apm-input').value;
    act('admit-per-minute', { per_minute: v ? Number(v) : null }, v ? 'Per-minute cap set.' : 'Per-minute cap removed.');
  });
  $('schedule-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const s = await act('schedule', {
      opens_at: fromLocalInput($('opens-input').value),
      prequeue_opens_at: fromLocalInput($('prequeue-input').value),
      closes_at: fromLocalInput($('closes-input').value),
    }, 'Timetable saved.');
    if (s) fillSchedule(s);
  });

  function cell(tr, text) { const td = document.createElement('td'); td.textContent = text; tr.appendChild(td); return td; }

  $('session-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const rows = $('session-rows');
    rows.textContent = '';
    try {
      const r = await call('session?fingerprint=' + encodeURIComponent($('session-fp').value.trim()));
      if (r.sessions.length === 0) say('No session has that fingerprint.');
      for (const s of r.sessions) {
        const tr = document.createElement('tr');
        cell(tr, s.fingerprint);
        cell(tr, s.state);
        cell(tr, s.position !== null ? 'position ' + s.position : (s.number !== null ? 'number ' + s.number : '–'));
        cell(tr, s.admitted_at || '–');
        const td = cell(tr, '');
        if (s.state === 'admitted' || s.state === 'active') {
          const b = document.createElement('button');
          b.textContent = 'End this session';
          b.className = 'danger';
          b.addEventListener('click', () => confirmThen('End session ' + s.fingerprint + '? Its place frees and its pass stops working.',
            () => act('session/finish', { fingerprint: s.fingerprint }, 'Session ' + s.fingerprint + ' ended.')));
          td.appendChild(b);
        }
        if (s.state === 'waiting' && s.number !== null) {
          const b = document.createElement('button');
          b.textContent = 'Move to the front';
          b.addEventListener('click', () => confirmThen('Move session ' + s.fingerprint + ' to the front? It goes in at the next free place, before everyone in line.',
            () => act('session/front', { fingerprint: s.fingerprint }, 'Session ' + s.fingerprint + ' moved to the front.')));
          td.appendChild(b);
        }
        rows.appendChild(tr);
      }
    } catch (err) {
      say('Lookup failed: ' + err.message);
    }
  });

  async function loadAudit() {
    try {
      const r = await call('audit?limit=20');
      const rows = $('audit-rows');
      rows.textContent = '';
      for (const a of r.entries) {
        const tr = document.createElement('tr');
        cell(tr, when(a.at_ms));
        cell(tr, a.who);
        cell(tr, a.action);
        cell(tr, a.detail);
        rows.appendChild(tr);
      }
    } catch (e) { /* the figures say why */ }
  }

  call('stats').then((s) => { render(s); fillSchedule(s); }).catch(() => {});
  loadAudit();
  timer = setTimeout(poll, EVERY_MS);
})();
