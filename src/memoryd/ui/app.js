
'use strict';
(function () {
  // Every URL here is relative: it resolves against the page's <base href>, the launch's secret path.
  // Search as you type: the server renders the results (escaped); we swap them in.
  const form = document.getElementById('memory-filters');
  if (form) {
    let timer = null, seq = 0;
    const refresh = () => {
      const params = new URLSearchParams(new FormData(form));
      params.set('fragment', '1');
      const mine = ++seq;
      fetch('memories?' + params.toString(), {credentials: 'same-origin'})
        .then(r => r.text())
        .then(html => {
          if (mine !== seq) return;  // an older answer arriving late must not win
          const holder = document.getElementById('results');
          const doc = new DOMParser().parseFromString(html, 'text/html');
          holder.replaceChildren(...doc.body.childNodes);
          params.delete('fragment');
          history.replaceState(null, '', 'memories?' + params.toString());
        });
    };
    form.addEventListener('input', () => { clearTimeout(timer); timer = setTimeout(refresh, 180); });
    form.addEventListener('change', () => { clearTimeout(timer); timer = setTimeout(refresh, 10); });
  }
  // The live feed: server-sent events, one row per event, written with textContent only.
  const feed = document.getElementById('feed');
  if (feed) {
    const body = feed.querySelector('tbody');
    const state = document.getElementById('feed-state');
    const source = new EventSource('events/stream');
    const cell = (row, text) => { const td = document.createElement('td'); td.textContent = text; row.appendChild(td); };
    source.addEventListener('open', () => { state.textContent = 'live'; state.className = 'ok'; });
    source.addEventListener('error', () => { state.textContent = 'reconnecting…'; state.className = 'bad'; });
    source.addEventListener('message', (msg) => {
      const ev = JSON.parse(msg.data);
      const row = document.createElement('tr');
      row.className = 'new';
      row.dataset.kind = ev.kind || '';
      cell(row, String(ev.seq));
      cell(row, (ev.ts || '').replace('T', ' ').slice(0, 19));
      cell(row, ev.kind || '');
      cell(row, ev.session || '');
      const rest = Object.assign({}, ev);
      for (const k of ['seq', 'ts', 'kind', 'session', 'prev', 'hash']) delete rest[k];
      cell(row, JSON.stringify(rest));
      body.insertBefore(row, body.firstChild);
      while (body.children.length > 300) body.removeChild(body.lastChild);
    });
  }
})();
