"""The web view's pages, laid out from the daemon's results. Contract: every daemon value goes through
`e()` (agent-written text: a stored `<script>` must show as text); every changing form carries the CSRF
value; every link is relative to `<base href>`, the launch's secret path prefix (docs/security.md)."""

from __future__ import annotations

import html
import json
from typing import Any
from urllib.parse import quote, urlencode

CATEGORIES = ("fact", "user-inference", "ambient", "handoff")
NAV = (("memories", "Memories"), ("pending", "Pending"), ("sessions", "Sessions"), ("health", "Health"),
       ("events", "Live feed"))  # page (its link too) and label


def e(value: Any) -> str:
    """Any value as escaped text (None as an empty string)."""
    return html.escape("" if value is None else str(value), quote=True)


def layout(title: str, active: str, body: str, notice: str | None = None, error: str | None = None,
           base: str = "") -> str:
    links = "".join(f'<a href="{key}" class="{"on" if key == active else ""}">{label}</a>' for key, label in NAV)
    banners = (f'<div class="notice">{e(notice)}</div>' if notice else "") + \
              (f'<div class="banner">{e(error)}</div>' if error else "")
    return ("<!doctype html><html lang=en><head><meta charset=utf-8>"
            + (f'<base href="{e(base)}">' if base else "") +
            '<meta name=viewport content="width=device-width, initial-scale=1">'
            f"<title>{e(title)} · memoryd</title><link rel=stylesheet href=static/app.css></head><body>"
            f'<header><span class=brand>memoryd</span><nav>{links}</nav></header>'
            f"<main>{banners}<h1>{e(title)}</h1>{body}</main>"
            "<script src=static/app.js></script></body></html>")


def csrf(token: str) -> str:
    return f'<input type=hidden name=csrf value="{e(token)}">'


def post(action: str, token: str, inner: str) -> str:
    """An inline form posting to `action` (already quoted) with the CSRF value."""
    return f'<form class=inline method=post action="{action}">{csrf(token)}{inner}</form>'


def table(heads: tuple[str, ...], rows: str, attrs: str = "") -> str:
    cells = "".join(f"<th>{h}</th>" for h in heads)
    return f"<table{attrs}><thead><tr>{cells}</tr></thead><tbody>{rows}</tbody></table>"


def listed(items: str) -> str:
    return f"<ul>{items}</ul>" if items else "<p class=muted>none</p>"


def counted(title: str, total: Any) -> str:
    return f'<h2>{e(title)} <span class=muted>({e(total)})</span></h2>'


def tags(values: Any) -> str:
    return "".join(f'<span class=tag>{e(v)}</span>' for v in values or [])


def ts(value: Any) -> str:
    """An ISO time shown to the second, the full value on hover."""
    text = "" if value is None else str(value)
    return f'<span title="{e(text)}">{e(text[:19].replace("T", " "))}</span>'


def verdict(value: Any) -> str:
    return f'<span class="v-{e(value)}">{e(value or "-")}</span>'


def mem_link(memory_id: Any) -> str:
    return f'<a class=mono href="memory/{quote(str(memory_id))}">{e(memory_id)}</a>'


def session_link(session_id: Any) -> str:
    if not session_id:
        return '<span class=muted>-</span>'
    return f'<a class=mono href="session/{quote(str(session_id))}">{e(session_id)}</a>'


def memory_filters(q: str, scope: str, project: str, category: str, removed: bool) -> str:
    options = "".join(f'<option value="{c}"{" selected" if c == category else ""}>{c}</option>' for c in CATEGORIES)
    return ('<form id=memory-filters class=filters method=get action=memories role=search>'
            f'<input type=search name=q value="{e(q)}" placeholder="Search memories (as you type)" '
            'autocomplete=off autofocus aria-label=Search>'
            f'<input type=text name=scope value="{e(scope)}" placeholder="scope, e.g. projects:web" aria-label=Scope>'
            f'<input type=text name=project value="{e(project)}" placeholder=project aria-label=Project>'
            f'<select name=category aria-label=Category><option value="">any category</option>{options}</select>'
            f'<label><input type=checkbox name=removed value=1{" checked" if removed else ""}> removed</label>'
            '<noscript><button>Search</button></noscript></form>')


def memory_results(result: dict[str, Any], mode: str) -> str:
    """The results table of a search, a list or the tombstones (the fragment search swaps in)."""
    heads: tuple[str, ...]
    if mode == "removed":
        items, heads = result["tombstones"], ("id", "removed", "reason", "first line")
        cells = [[ts(t.get("removed_at")), e(t.get("reason")), e(t.get("first_line"))] for t in items]
    elif mode == "search":
        items, heads = result["results"], ("id", "relevance", "staleness", "category", "scopes", "text")
        cells = [[e(h.get("relevance")), verdict(h.get("staleness_verdict")), e(h.get("category")),
                  tags(h.get("scopes")), e(_first(h.get("content")))] for h in items]
    else:
        items, heads = result["memories"], ("id", "updated", "category", "scopes", "first line")
        cells = [[ts(m.get("updated")), e(m.get("category")), tags(m.get("scopes")), e(m.get("first_line"))]
                 for m in items]
    count, total = len(items), result.get("total", len(items))
    if not count:
        return f'<p class="muted" id=result-count data-count=0>Nothing matches (of {e(total)}).</p>'
    rows = "".join(f'<tr data-id="{e(item["id"])}"><td>{mem_link(item["id"])}</td>'
                   + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for item, row in zip(items, cells))
    return (f'<p class=muted id=result-count data-count="{count}">{count} shown of {e(total)}</p>'
            + table(heads, rows, f" class=memories data-mode={mode}"))


def _first(text: Any) -> str:
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= 240 else flat[:239] + "…"


def memories_page(filters: str, results: str, **banners: Any) -> str:
    return layout("Memories", "memories", f"{filters}<div id=results>{results}</div>", **banners)


def memory_page(memory: dict[str, Any], history: dict[str, Any], token: str, draft: str | None = None,
                **banners: Any) -> str:
    """One memory; `draft` is the text of an edit that was not saved (kept in the open edit form)."""
    origin = memory.get("origin") or {}
    live = memory["status"] == "live"
    fields = [*((key, e(memory.get(key))) for key in ("status", "category", "confidence", "source")),
              ("scopes", tags(memory.get("scopes"))), ("created", ts(memory.get("created"))),
              ("updated", ts(memory.get("updated"))),
              ("pinned", "yes — listed first at every session start" if memory.get("pinned") else "no")]
    if live:
        drift = (memory.get("path_drift") or {}).get("missing") or []
        fields += [("staleness", f'{verdict(memory.get("staleness_verdict"))} · {e(memory.get("age_days"))} days'
                                 + (f' · missing paths: {e(", ".join(drift))}' if drift else "")
                                 + (f' · {e(memory.get("commits_since_verified"))} commits since'
                                    if memory.get("commits_since_verified") else "")),
                   ("last verified", ts(memory.get("last_verified_at")) if memory.get("last_verified_at") else "never")]
    else:
        fields += [("removed", f'{ts(memory.get("removed_at"))} — {e(memory.get("removed_reason"))}')]
    if memory.get("tainted"):
        fields.append(("tainted", f'<span class=bad>{e(", ".join(memory.get("taint") or []))}</span>'))
    provenance = [("session", session_link(memory.get("session_id"))), ("worktree", e(origin.get("worktree"))),
                  ("repo", e(origin.get("repo"))), ("project", e(origin.get("project"))),
                  ("branch", e(origin.get("branch"))), ("commit", f'<span class=mono>{e(origin.get("commit"))}</span>'),
                  ("client", e(origin.get("client")))]
    links = memory.get("links") or {}
    link_rows = "".join(f"<li>{e(link['type'])} → {mem_link(link['target_id'])} "
                        f"<span class=muted>({e(link.get('target_state'))})</span></li>"
                        for link in links.get("outgoing", []))
    link_rows += "".join(f"<li>{mem_link(link['source_id'])} {e(link['type'])} this</li>"
                         for link in links.get("incoming", []))
    events = "".join(f"<tr><td>{ts(ev.get('ts'))}</td><td>{e(ev.get('kind'))}</td><td>{e(ev.get('status'))}</td>"
                     f"<td>{session_link(ev.get('session'))}</td><td class=mono>{e(ev.get('seq'))}</td></tr>"
                     for ev in history.get("events", []))
    here, pin = f'memory/{quote(memory["id"])}', "unpin" if memory.get("pinned") else "pin"
    action = (post(f"{here}/{pin}", token, f'<button id=pin-toggle aria-pressed={str(pin == "unpin").lower()}>'
                                           f'{pin.capitalize()}</button>')
              + post(f"{here}/remove", token, '<input type=text name=reason placeholder="reason (kept with the '
                     'tombstone)" size=36><button class=danger id=remove>Remove</button>') if live else
              post(f"{here}/restore", token, '<button class=primary id=restore>Restore</button>'))
    body = (f'<div class="card head"><span class=mono id=memory-id>{e(memory["id"])}</span>{action}</div>'
            f'<div class=card><h2>Content</h2><pre class=content id=content>{e(memory.get("content"))}</pre></div>'
            + (edit_form(memory, token, draft) if live else "") +
            f'<div class=cols2><div class=card><h2>Record</h2>{_dl(fields)}</div>'
            f'<div class=card><h2>Provenance</h2>{_dl(provenance)}</div></div>'
            f'<div class=card><h2>Links</h2>{listed(link_rows)}</div>'
            f'<div class=card><h2>History</h2>{table(("when", "event", "status", "session", "seq"), events)}</div>')
    return layout("Memory", "memories", body, **banners)


def edit_form(memory: dict[str, Any], token: str, draft: str | None) -> str:
    """New content for a live memory; `expected_updated`, the version shown, makes the save compare-and-set."""
    text = memory.get("content") if draft is None else draft
    return (f'<details class=card id=edit-box{" open" if draft is not None else ""}><summary>Edit</summary>'
            f'<form id=edit-form method=post action="memory/{quote(memory["id"])}/edit">{csrf(token)}'
            f'<input type=hidden name=expected_updated value="{e(memory.get("updated"))}">'
            f'<textarea name=content id=edit-content rows=8 aria-label="New content">{e(text)}</textarea>'
            '<div class=filters><label><input type=checkbox name=acknowledge_transient value=1> it states '
            'something time-bound on purpose</label><button class=primary id=save>Save</button>'
            '<span class=muted>through the same gates as an agent\'s edit; recorded in the history</span></div>'
            '</form></details>')


def id_match(candidates: list[dict[str, Any]]) -> str:
    """The memories whose id starts with what was typed in the search box (one: it; several: each)."""
    if not candidates:
        return ""
    items = "".join(f'<li>{mem_link(c["id"])}' + (f' <span class=muted>({e(c.get("status"))})</span> '
                                                   f'{e(_first(c.get("first_line")))}' if "status" in c else "")
                    + "</li>" for c in candidates)
    label = "Memory with this id" if len(candidates) == 1 else "Ids that start with this (give more characters)"
    return f'<div class=card id=id-match><b>{label}</b><ul>{items}</ul></div>'


def _dl(pairs: list[tuple[str, str]]) -> str:
    """Pairs of (label, already-escaped HTML)."""
    return "<dl class=fields>" + "".join(f"<dt>{e(k)}</dt><dd>{v}</dd>" for k, v in pairs) + "</dl>"


def pending_page(result: dict[str, Any], token: str, **banners: Any) -> str:
    rows = ""
    for p in result["pending"]:
        pid = quote(p["pending_id"])
        buttons = (post(f"pending/{pid}/confirm", token, "<button class=primary name=confirm>Confirm</button>") + " "
                   + post(f"pending/{pid}/cancel", token, "<button class=danger name=cancel>Cancel</button>"))
        expired = ' <span class=bad>expired</span>' if p.get("expired") else ""
        rows += (f'<tr data-id="{e(p["pending_id"])}"><td class=mono>{e(p["pending_id"])}</td>'
                 f'<td>{session_link(p.get("session_id"))}<div class=muted>{e(p.get("worktree"))}</div></td>'
                 f'<td><pre class=content>{e(p.get("content") or p.get("preview"))}</pre>'
                 f'<div class=muted>{e(p.get("reason"))}</div></td><td>{tags(p.get("scopes"))}</td>'
                 f'<td>{ts(p.get("expires_at"))}{expired}</td><td>{buttons}</td></tr>')
    body = ('<p class=muted>Writes waiting for your yes (claims about you). Confirming commits the write '
            'through the same gates the agent would run; the event log names you as the one who decided.</p>')
    body += (table(("id", "session", "content", "scopes", "expires", ""), rows, " id=pending") if rows
             else "<p class=muted id=pending-empty>No pending writes.</p>")
    return layout("Pending writes", "pending", body, **banners)


def sessions_page(worktrees: dict[str, Any], sessions: dict[str, Any], selected: str | None, **banners: Any) -> str:
    side = f'<a href="sessions" class="{"" if selected else "on"}">all worktrees</a>'
    for w in worktrees["worktrees"]:
        name = w["worktree"] if w["worktree"] is not None else "(no worktree)"
        href = "sessions?" + urlencode({"worktree": w["worktree"] or ""})
        side += (f'<a href="{e(href)}" class="{"on" if w["worktree"] == selected else ""}">{e(name)} '
                 f'<span class=muted>({e(w["sessions"])})</span></a>')
    items = "".join(session_item(s) for s in sessions["sessions"]) or '<p class=muted>No sessions.</p>'
    body = (f'<div class=cols><div class="side card">{side}</div>'
            f'<div><p class=muted>{len(sessions["sessions"])} of {e(sessions["total"])} sessions, '
            f'most recently active first</p><div class=timeline id=timeline>{items}</div></div></div>')
    return layout("Sessions and handoffs", "sessions", body, **banners)


def session_item(s: dict[str, Any]) -> str:
    handoff = s.get("handoff")
    handoff_html = (f'<h2>Handoff {mem_link(handoff["id"])}</h2><pre class=content>{e(handoff["text"])}</pre>'
                    if handoff else "")
    summary = f'<p><b>Summary:</b> {e(s["summary"])}</p>' if s.get("summary") else ""
    return (f'<div class="item card{" open" if s["ended"] == "open" else ""}" data-session="{e(s["session_id"])}">'
            f'<div>{session_link(s["session_id"])} · <b>{e(s["ended"])}</b> · {ts(s["started_at"])} → '
            f'{ts(s.get("ended_at") or s.get("last_active"))}</div>'
            f'<div class=muted>{e(s.get("worktree") or "(no worktree)")} · {e(s.get("client"))} · '
            f'{e(s["calls"])} calls · {e(s["episodes"])} episodes</div>{summary}{handoff_html}</div>')


def injections_table(injections: dict[str, Any]) -> str:
    """What the hooks put in front of the session's agent, in order (daemon/sessions/receipts.py)."""
    rows = "".join(f'<tr><td>{ts(r.get("ts"))}</td><td>{e(r.get("hook"))}</td><td>{e(r.get("chars"))}</td><td>'
                   + ", ".join(f'{mem_link(i["id"])} <span class=muted>{e(i["tier"])}</span>' for i in r["items"])
                   + "</td></tr>" for r in injections.get("injections", []))
    if not rows:
        return '<p class=muted>Nothing was injected automatically.</p>'
    return (table(("when", "hook", "chars", "memories (tier)"), rows, " id=injections")
            + f'<p class=muted>{e(injections.get("chars"))} chars in all</p>')


def session_page(session: dict[str, Any], episodes: dict[str, Any], injections: dict[str, Any], **banners: Any) -> str:
    rows = "".join(f'<tr><td>{ts(ep.get("created"))}</td><td class=mono>{e(ep.get("id"))}</td>'
                   f'<td>{e(ep.get("provenance"))}</td><td>{tags(ep.get("scopes"))}</td>'
                   f'<td>{e(ep.get("takeaway"))}</td></tr>' for ep in episodes.get("episodes", []))
    listing = (table(("created", "id", "provenance", "scopes", "takeaway"), rows, " id=episodes") if rows
               else "<p class=muted>No live episodes (none written, promoted, or expired).</p>")
    return layout(f"Session {session['session_id']}", "sessions",
                  f'<div class=timeline>{session_item(session)}</div><h2>Episodes</h2>{listing}'
                  f'<h2>Injected by the hooks</h2>{injections_table(injections)}', **banners)


def health_page(status: dict[str, Any], health: dict[str, Any], conflicts: dict[str, Any],
                pending_total: int, **banners: Any) -> str:
    counts = status.get("counts") or {}
    log = health.get("log") or {}
    stats = [("memories", counts.get("memories")), ("removed", counts.get("tombstones")),
             ("pending", pending_total), ("episodes", counts.get("episodes")), ("sessions", counts.get("sessions")),
             ("events", log.get("events")), ("connections", status.get("connections")),
             ("stale", (health.get("stale") or {}).get("total")), ("conflicts", conflicts.get("total")),
             ("bad files", (health.get("bad_files") or {}).get("total"))]
    grid = "".join(f'<div class=stat data-stat="{e(k)}"><b>{e(v if v is not None else 0)}</b>{e(k)}</div>'
                   for k, v in stats)
    chain = ('<span class=ok>intact</span>' if log.get("chain_ok")
             else '<span class=bad>BROKEN — run memoryd log verify</span>')
    info = [("daemon", e(f"{status.get('version')} · pid {status.get('pid')} · up {status.get('uptime_s')} s")),
            ("store", f'<span class=mono>{e(status.get("store"))}</span>'), ("log chain", chain),
            ("reaper", e(f"last run {(health.get('reaper') or {}).get('last_run') or 'never'}, "
                         f"{(health.get('reaper') or {}).get('episodes_pruned', 0)} episodes pruned")),
            ("pending expired", e(health.get("pending_expired")))]
    sections = "".join(_group(title, health.get(key) or {}) for key, title in (
        ("stale", "Stale (spot check required)"), ("tainted", "Tainted"), ("never_retrieved", "Never retrieved"),
        ("bad_files", "Bad files"), ("hand_edited", "Hand-edited"), ("unaccounted", "Unaccounted"),
        ("missing", "Missing")))
    sync = health.get("sync")
    if sync:  # set up with `memoryd sync init` (docs/sync.md)
        last = sync.get("last") or {}
        info.append(("sync", e(f"{sync.get('remote')} · last {last.get('finished_at') or 'never'} "
                               f"{last.get('status') or ''} · {sync.get('quarantined', 0)} quarantined")))
        sections += _group("Sync conflicts (kept versions)", sync.get("conflicts") or {})
    conflict_rows = "".join(f'<li>{mem_link(c["id"])} {e(c["first_line"])} <b>contradicts</b> '
                            f'{mem_link(c["target_id"])} {e(c["target_first_line"])}</li>'
                            for c in conflicts.get("conflicts", []))
    body = (f'<div class=grid>{grid}</div><div class=card>{_dl(info)}</div>'
            f'<div class=card>{counted("Conflicts", conflicts.get("total", 0))}{listed(conflict_rows)}{sections}</div>')
    return layout("Health", "health", body, **banners)


def _group(title: str, group: dict[str, Any]) -> str:
    """`title` with the group's total, then each item: its memory's link when it names one, then the rest as JSON."""
    items = group.get("items") or []
    rests = [json.dumps({k: v for k, v in item.items() if k != "id"}, ensure_ascii=False) for item in items]
    rows = "".join(f"<li>{mem_link(item['id']) if 'id' in item else ''} <span class=muted>{e(rest)}</span></li>"
                   for item, rest in zip(items, rests))
    return counted(title, group.get("total", 0)) + listed(rows)


def events_page(**banners: Any) -> str:
    body = ('<p>Events as the daemon appends them (ids, counts and hashes — never content). '
            'Status: <span id=feed-state class=muted>connecting…</span></p>'
            + table(("seq", "time", "kind", "session", "fields"), "", " id=feed"))
    return layout("Live feed", "events", body, **banners)


def error_page(status: int, message: str, base: str = "", candidates: list[dict[str, Any]] | None = None) -> str:
    """An error; `candidates` are the memories an ambiguous id prefix could mean, as links."""
    return layout(f"{status}", "", f'<div class=banner id=error>{e(message)}</div>' + id_match(candidates or []),
                  base=base)
