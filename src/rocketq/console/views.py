"""The console's pages for the cluster, topics and consumer groups (login and logout too).

Each handler reads its inputs through :mod:`rocketq.console.forms`, asks
:class:`rocketq.console.data.ConsoleData` with the session's credentials, and renders a template;
actions (POST) redirect back with a one-line result, or show the form again with the error.
"""

from __future__ import annotations

import asyncio
from urllib.parse import quote

from aiohttp import web

from rocketq.acl.http_auth import HttpAuthError, verify
from rocketq.client.model import MQClientError
from rocketq.console import forms
from rocketq.console.server import CONSOLE_KEY, SESSION_KEY

CLUSTER_ERRORS = (MQClientError, OSError, asyncio.TimeoutError)


def routes(app: web.Application) -> None:
    r = app.router
    r.add_get("/", cluster)
    r.add_get("/login", login_page)
    r.add_post("/login", login)
    r.add_post("/logout", logout)
    r.add_get("/topics", topics)
    r.add_post("/topics", topic_create)
    r.add_get("/topics/{name}", topic)
    r.add_post("/topics/{name}/update", topic_update)
    r.add_post("/topics/{name}/delete", topic_delete)
    r.add_get("/groups", groups)
    r.add_get("/groups/{name}", group)
    r.add_post("/groups/{name}/reset", group_reset)
    r.add_get("/api/groups/{name}/lag", group_lag_json)
    r.add_get("/api/throughput", throughput_json)


def _console(request: web.Request):
    return request.app[CONSOLE_KEY]


# -- login ------------------------------------------------------------------------------------

async def login_page(request: web.Request) -> web.Response:
    return _console(request).render(request, "login.html", error="")


async def login(request: web.Request) -> web.Response:
    console, form = _console(request), request["form"]
    if console.acl is None:
        raise console.redirect(request, "/", "ACL is off: no login needed")
    try:
        account = verify(console.acl, str(form.get("access_key", "")), str(form.get("secret_key", "")))
    except HttpAuthError as exc:
        return console.render(request, "login.html", status=401, error=str(exc))
    session = console.sessions.renew(request[SESSION_KEY])
    session.access_key, session.secret_key = account.access_key, account.secret_key
    request[SESSION_KEY], request["session_renewed"] = session, True
    raise console.redirect(request, "/", f"logged in as {account.access_key}")


async def logout(request: web.Request) -> web.Response:
    console = _console(request)
    console.sessions.drop(request[SESSION_KEY].sid)
    request[SESSION_KEY], request["session_renewed"] = console.sessions.new(), True
    raise web.HTTPFound("/login" if console.acl is not None else "/")


# -- cluster ----------------------------------------------------------------------------------

async def cluster(request: web.Request) -> web.Response:
    console = _console(request)
    try:
        brokers, error = await console.data.brokers(console.credentials(request)), ""
    except CLUSTER_ERRORS as exc:
        brokers, error = [], str(exc)
    return console.render(request, "cluster.html", brokers=brokers, error=error)


async def throughput_json(request: web.Request) -> web.Response:
    return web.json_response(_console(request).history.throughput_json())


# -- topics -----------------------------------------------------------------------------------

async def topics(request: web.Request, *, error: str = "", status: int = 200) -> web.Response:
    console = _console(request)
    show_all = request.query.get("all") == "1"
    try:
        rows = await console.data.topics(console.credentials(request))
    except CLUSTER_ERRORS as exc:
        rows, error = [], error or str(exc)
    rows = [r for r in rows if show_all or r["kind"] == "user"]
    return console.render(request, "topics.html", topics=rows, show_all=show_all, error=error, status=status)


async def topic_create(request: web.Request) -> web.Response:
    console, form = _console(request), request["form"]
    try:
        name = forms.topic(form.get("topic"))
        queues = forms.integer(form.get("queues"), "queues", 1, forms.MAX_QUEUES, default=8)
        await console.data.create_topic(name, queues, form.get("order") == "on", console.credentials(request))
    except forms.FormError as exc:
        return await topics(request, error=str(exc), status=400)
    except CLUSTER_ERRORS as exc:
        return await topics(request, error=f"topic not created: {exc}", status=502)
    raise console.redirect(request, f"/topics/{quote(name)}", f"topic {name} created with {queues} queues")


async def topic(request: web.Request, *, error: str = "", status: int = 200) -> web.Response:
    console = _console(request)
    try:
        name = forms.topic(request.match_info["name"])
    except forms.FormError as exc:
        return console.render(request, "error.html", status=400, error=str(exc))
    try:
        info = await console.data.topic(name, console.credentials(request))
    except CLUSTER_ERRORS as exc:
        return console.render(request, "error.html", status=404, error=str(exc))
    return console.render(request, "topic.html", t=info, error=error, status=status)


async def topic_update(request: web.Request) -> web.Response:
    console, form = _console(request), request["form"]
    try:
        name = forms.topic(request.match_info["name"])
        queues = forms.integer(form.get("queues"), "queues", 1, forms.MAX_QUEUES)
        await console.data.create_topic(name, queues, form.get("order") == "on", console.credentials(request))
    except forms.FormError as exc:
        return await topic(request, error=str(exc), status=400)
    except CLUSTER_ERRORS as exc:
        return await topic(request, error=f"topic not updated: {exc}", status=502)
    raise console.redirect(request, f"/topics/{quote(name)}", f"topic {name} now has {queues} queues")


async def topic_delete(request: web.Request) -> web.Response:
    console = _console(request)
    try:
        name = forms.topic(request.match_info["name"])
        await console.data.delete_topic(name, console.credentials(request))
    except forms.FormError as exc:
        return await topics(request, error=str(exc), status=400)
    except CLUSTER_ERRORS as exc:
        return await topics(request, error=f"topic not deleted: {exc}", status=502)
    raise console.redirect(request, "/topics", f"topic {name} deleted")


# -- groups -----------------------------------------------------------------------------------

async def groups(request: web.Request) -> web.Response:
    console, error = _console(request), ""
    show_all = request.query.get("all") == "1"
    try:
        names = await console.data.groups(console.credentials(request), show_all=show_all)
    except CLUSTER_ERRORS as exc:
        names, error = [], str(exc)
    return console.render(request, "groups.html", groups=names, show_all=show_all, error=error)


async def group(request: web.Request, *, error: str = "", status: int = 200) -> web.Response:
    console = _console(request)
    try:
        name = forms.group(request.match_info["name"])
    except forms.FormError as exc:
        return console.render(request, "error.html", status=400, error=str(exc))
    creds = console.credentials(request)
    console.history.watch(name)
    try:
        lag, members = await console.data.lag(name, creds), await console.data.members(name, creds)
        topics = {t["topic"] for t in await console.data.topics(creds)}
    except CLUSTER_ERRORS as exc:
        lag, members, topics, error = [], [], set(), error or str(exc)
    side = [t for t in (f"%RETRY%{name}", f"%DLQ%{name}") if t in topics]
    return console.render(request, "group.html", group=name, lag=lag, members=members, side_topics=side,
                          total=sum(r["lag"] for r in lag), error=error, status=status,
                          group_topics=sorted({r["topic"] for r in lag}))


async def group_reset(request: web.Request) -> web.Response:
    console, form = _console(request), request["form"]
    try:
        name = forms.group(request.match_info["name"])
        topic_name = forms.topic(form.get("topic"))
        at = forms.when(form.get("time"), "time")
        done = await console.data.reset_offset_by_time(name, topic_name, at, console.credentials(request))
    except forms.FormError as exc:
        return await group(request, error=str(exc), status=400)
    except CLUSTER_ERRORS as exc:
        return await group(request, error=f"offsets not reset: {exc}", status=502)
    offsets = ", ".join(f"#{d['queue_id']}→{d['offset']}" for d in done)
    raise console.redirect(request, f"/groups/{quote(name)}", f"offsets of {name} on {topic_name} reset: {offsets}")


async def group_lag_json(request: web.Request) -> web.Response:
    console = _console(request)
    try:
        name = forms.group(request.match_info["name"])
    except forms.FormError as exc:
        raise web.HTTPBadRequest(text=str(exc))
    if console.acl is not None:      # the samples are taken with the broker's keys: show them to who may read them
        try:
            await console.data.lag(name, console.credentials(request))
        except CLUSTER_ERRORS as exc:
            raise web.HTTPForbidden(text=str(exc))
    console.history.watch(name)
    return web.json_response(console.history.lag_json(name))
