"""The web view's stylesheet and script, served as files so the Content-Security-Policy can forbid
every inline script and style (a stored `<script>` that escaped escaping still would not run).

No build step: plain CSS and a little vanilla JS (search as you type, the live feed). The script
reads data only through `textContent` and `fetch` of server-rendered, escaped fragments.
"""

from __future__ import annotations

CSS = """
:root { --fg: #1d2330; --muted: #5d6778; --line: #dfe3ea; --bg: #f6f7f9; --accent: #2f5fd0;
        --warn: #a15c00; --bad: #b42318; --ok: #1f7a3a; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg);
       background: var(--bg); }
header { background: #1d2330; color: #fff; padding: 0 24px; display: flex; align-items: center; gap: 24px; }
header .brand { font-weight: 700; padding: 12px 0; letter-spacing: .02em; }
header nav a { color: #c9d3e6; text-decoration: none; padding: 14px 10px; display: inline-block; }
header nav a.on, header nav a:hover { color: #fff; box-shadow: inset 0 -3px 0 #7aa2ff; }
main { max-width: 1180px; margin: 0 auto; padding: 20px 24px 48px; }
h1 { font-size: 20px; margin: 4px 0 16px; }
h2 { font-size: 16px; margin: 22px 0 10px; }
a { color: var(--accent); }
.card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 14px 16px; margin-bottom: 12px; }
.muted { color: var(--muted); }
.mono, code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: 12.5px; }
pre.content { white-space: pre-wrap; word-break: break-word; background: #fbfbfd; border: 1px solid var(--line);
              border-radius: 6px; padding: 12px; margin: 0; }
table { width: 100%; border-collapse: collapse; background: #fff; border: 1px solid var(--line); border-radius: 8px; }
th, td { text-align: left; padding: 8px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-weight: 600; color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
tr:last-child td { border-bottom: 0; }
.filters { display: flex; gap: 8px; flex-wrap: wrap; margin-bottom: 14px; align-items: center; }
input[type=search], input[type=text], select { padding: 7px 9px; border: 1px solid #c5ccd8; border-radius: 6px;
              font: inherit; background: #fff; }
input[type=search] { flex: 1 1 320px; }
textarea { width: 100%; min-height: 140px; padding: 9px; border: 1px solid #c5ccd8; border-radius: 6px; font: 13px/1.45 ui-monospace, Menlo, Consolas, monospace; margin: 8px 0; }
details > summary { cursor: pointer; font-weight: 600; }
button { font: inherit; padding: 6px 12px; border-radius: 6px; border: 1px solid #c5ccd8; background: #fff; cursor: pointer; }
button.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
button.danger { color: var(--bad); border-color: #e6b4ae; }
form.inline { display: inline-flex; gap: 6px; margin: 0; }
.tag { display: inline-block; padding: 1px 7px; border-radius: 10px; background: #eef1f6; font-size: 12px; margin: 1px 2px 1px 0; }
.v-fresh { color: var(--ok); } .v-spot_check_recommended { color: var(--warn); } .v-spot_check_required { color: var(--bad); }
.bad { color: var(--bad); } .ok { color: var(--ok); }
dl.fields { display: grid; grid-template-columns: 150px 1fr; gap: 6px 12px; margin: 0; }
dl.fields dt { color: var(--muted); } dl.fields dd { margin: 0; word-break: break-word; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(170px, 1fr)); gap: 12px; margin-bottom: 12px; }
.stat { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px; }
.stat b { display: block; font-size: 22px; }
.timeline { border-left: 3px solid var(--line); margin-left: 8px; padding-left: 18px; }
.timeline .item { position: relative; margin-bottom: 14px; }
.timeline .item::before { content: ""; position: absolute; left: -26px; top: 16px; width: 11px; height: 11px;
                          border-radius: 50%; background: var(--accent); border: 2px solid #fff; }
.timeline .item.open::before { background: var(--ok); }
.cols { display: grid; grid-template-columns: 260px 1fr; gap: 18px; }
.side a { display: block; padding: 6px 8px; border-radius: 6px; text-decoration: none; word-break: break-all; }
.side a.on { background: #e5ecfb; }
#feed td { font-size: 12.5px; }
#feed td:nth-child(2) { white-space: nowrap; }
#feed td:last-child { word-break: break-all; font-family: ui-monospace, Menlo, Consolas, monospace; }
.card h2:first-child { margin-top: 0; }
.cols2 { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; }
.cols2 .card { margin-bottom: 12px; }
.head { display: flex; justify-content: space-between; align-items: center; gap: 12px; flex-wrap: wrap; }
#feed tr.new { animation: flash 1.2s ease-out; }
@keyframes flash { from { background: #fff4c2; } to { background: #fff; } }
.banner { padding: 10px 14px; border-radius: 6px; background: #fdecea; color: var(--bad); margin-bottom: 14px; }
.notice { padding: 10px 14px; border-radius: 6px; background: #e8f4ec; color: var(--ok); margin-bottom: 14px; }
"""

JS = """
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
"""
