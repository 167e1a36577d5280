"""The console's message pages: search (key, id, time range), one message, its trace, send, live.

A body is previewed three ways, each escaped by the template: as text when it is UTF-8, as
indented JSON when it parses, and as a hex dump; previews stop at ``PREVIEW_BYTES`` (the page says
how many bytes there are in all).
"""

from __future__ import annotations

import json
import time
from urllib.parse import quote

from aiohttp import web

from rocketq.console import forms
from rocketq.console.views import CLUSTER_ERRORS, _console

PREVIEW_BYTES = 64 * 1024
HEX_ROW_BYTES = 16
DEFAULT_RANGE_MS = 3600 * 1000          # a time-range search without times: the last hour


def routes(app: web.Application) -> None:
    r = app.router
    r.add_get("/messages", search)
    r.add_get("/messages/{id}", message)
    r.add_get("/trace/{id}", trace)
    r.add_get("/send", send_page)
    r.add_post("/send", send)
    r.add_get("/live", live)


def _summary(m) -> dict:
    return {"msg_id": m.uniq_key or m.msg_id, "offset_msg_id": m.msg_id, "topic": m.topic, "tags": m.tags or "",
            "keys": " ".join(m.keys), "queue_id": m.queue_id, "queue_offset": m.queue_offset,
            "store_timestamp": m.store_timestamp, "born_timestamp": m.born_timestamp, "size": len(m.body),
            "reconsume_times": m.reconsume_times, "born_host": str(m.born_host)}


def previews(body: bytes) -> dict:
    shown = body[:PREVIEW_BYTES]
    try:
        text = shown.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    pretty = None
    if text is not None:
        try:
            pretty = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            pretty = None
    rows = []
    for at in range(0, len(shown), HEX_ROW_BYTES):
        chunk = shown[at:at + HEX_ROW_BYTES]
        printable = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        rows.append(f"{at:08x}  {chunk.hex(' '):<{HEX_ROW_BYTES * 3}} {printable}")
    return {"text": text, "json": pretty, "hex": "\n".join(rows), "size": len(body),
            "truncated": len(body) > PREVIEW_BYTES}


async def search(request: web.Request) -> web.Response:
    console, q = _console(request), request.query
    mode = q.get("mode", "key")
    found, error, status = [], "", 200
    if "topic" in q or "id" in q:
        creds = console.credentials(request)
        try:
            if mode == "id":
                topic_name = forms.topic(q["topic"]) if q.get("topic") else None
                found = [await console.data.by_id(forms.message_id(q.get("id")), topic_name, creds)]
            elif mode == "time":
                now = int(time.time() * 1000)
                begin = forms.when(q.get("begin"), "begin") if q.get("begin") else now - DEFAULT_RANGE_MS
                end = forms.when(q.get("end"), "end") if q.get("end") else now
                if end < begin:
                    raise forms.FormError("end: before the beginning of the range")
                found = await console.data.by_time(forms.topic(q.get("topic")), begin, end, creds)
            else:
                key = forms.text(q.get("key"), "key", forms.MAX_KEYS_CHARS, required=True)
                found = await console.data.by_key(forms.topic(q.get("topic")), key, creds)
        except forms.FormError as exc:
            error, status = str(exc), 400
        except CLUSTER_ERRORS as exc:
            error, status = str(exc), 404
    return console.render(request, "messages.html", mode=mode, q=dict(q), found=[_summary(m) for m in found],
                          error=error, status=status, searched=bool(q))


async def message(request: web.Request) -> web.Response:
    console = _console(request)
    try:
        msg_id = forms.message_id(request.match_info["id"])
        topic_name = forms.topic(request.query["topic"]) if request.query.get("topic") else None
        m = await console.data.by_id(msg_id, topic_name, console.credentials(request))
    except forms.FormError as exc:
        return console.render(request, "error.html", status=400, error=str(exc))
    except CLUSTER_ERRORS as exc:
        return console.render(request, "error.html", status=404, error=str(exc))
    return console.render(request, "message.html", m=_summary(m), properties=sorted(m.properties.items()),
                          body=previews(m.body))


async def trace(request: web.Request) -> web.Response:
    console = _console(request)
    try:
        msg_id = forms.message_id(request.match_info["id"])
    except forms.FormError as exc:
        return console.render(request, "error.html", status=400, error=str(exc))
    try:
        steps, error = await console.data.trace(msg_id, console.credentials(request)), ""
    except CLUSTER_ERRORS as exc:
        steps, error = [], str(exc)
    return console.render(request, "trace.html", msg_id=msg_id, steps=steps, error=error)


async def send_page(request: web.Request, *, error: str = "", status: int = 200, values=None) -> web.Response:
    values = values or {"topic": request.query.get("topic", "")}
    return _console(request).render(request, "send.html", error=error, status=status, v=values)


async def send(request: web.Request) -> web.Response:
    console, form = _console(request), request["form"]
    values = {k: str(form.get(k, ""))[:256] for k in ("topic", "tags", "keys")}
    try:
        topic_name = forms.topic(form.get("topic"))
        tags = forms.text(form.get("tags"), "tags", forms.MAX_TAG_CHARS)
        keys = forms.text(form.get("keys"), "keys", forms.MAX_KEYS_CHARS)
        body = forms.body(form.get("body"))
        result = await console.data.send(topic_name, body, tags, keys, console.credentials(request))
    except forms.FormError as exc:
        return await send_page(request, error=str(exc), status=400, values=values)
    except CLUSTER_ERRORS as exc:
        return await send_page(request, error=f"not sent: {exc}", status=502, values=values)
    raise console.redirect(request, f"/messages/{quote(result.msg_id)}?topic={quote(topic_name)}",
                           f"sent to {topic_name} queue {result.queue.queue_id} offset {result.queue_offset}: "
                           f"{result.status.value}")


async def live(request: web.Request) -> web.Response:
    return _console(request).render(request, "live.html")
