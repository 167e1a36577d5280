"""The console's aiohttp application: guards, rendering and life cycle.

Why aiohttp: it is a small, well-kept asyncio HTTP server that runs on the event loop the broker
already has (uvloop included), so the console needs no thread, no second loop and no other
process; its request size limit (``client_max_size``) and form parsing are built in, and Jinja2
(autoescaping) renders the pages.  The standard library's ``http.server`` is threaded and blocking;
Starlette would need uvicorn beside it for the same job.

Every request passes :func:`_guard` first: it attaches the browser's session (making one), asks
for a login when ACL is on and the session has none (the login page and ``/static`` excepted),
refuses POSTs without the session's CSRF token or from another origin, and adds security headers
to every answer (a Content-Security-Policy that allows only the console's own scripts and styles,
no framing, no MIME sniffing).  Bodies over ``forms.MAX_FORM_BYTES`` are refused by aiohttp (413).
A :class:`forms.FormError` or a cluster error becomes the page again with the error shown, never a
traceback.
"""

from __future__ import annotations

import logging
from pathlib import Path

import jinja2
from aiohttp import web

from rocketq.client.model import Credentials
from rocketq.common.http_site import HttpSite
from rocketq.console import auth, forms
from rocketq.console.data import ConsoleData
from rocketq.console.history import History

log = logging.getLogger(__name__)

DEFAULT_CONSOLE_PORT = 8080
HERE = Path(__file__).parent
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; frame-ancestors 'none'; "
                               "base-uri 'none'; form-action 'self'",
    # same-origin, not no-referrer: with no-referrer browsers post forms with "Origin: null", which the
    # cross-site check refuses
    "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
OPEN_PATHS = ("/login", "/static/")
SESSION_KEY = "console_session"
CONSOLE_KEY: web.AppKey["ConsoleServer"] = web.AppKey("console", object)


class ConsoleServer:
    """``ConsoleServer(namesrv, host=..., port=..., acl=...)``: ``await start()`` / ``await close()``."""

    def __init__(self, namesrv: str, *, host: str = "127.0.0.1", port: int = DEFAULT_CONSOLE_PORT, acl=None,
                 ssl_context=None, title: str = "rocketq", history_interval_s: float | None = None,
                 sampler_credentials: Credentials | None = None):
        self._site = HttpSite(host, port, setting="consolePort", what="console")
        self.acl = acl                      # the broker's AclValidator, or None
        self.title = title
        self.data = ConsoleData(namesrv, ssl_context=ssl_context)
        self.history = History(self.data, credentials=sampler_credentials,
                               **({} if history_interval_s is None else {"interval_s": history_interval_s}))
        self.sessions = auth.Sessions()
        self.templates = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"),
                                            autoescape=True, undefined=jinja2.StrictUndefined)
        self.templates.filters["when"] = _when

    @property
    def host(self) -> str:
        return self._site.host

    @property
    def port(self) -> int:
        return self._site.port

    def app(self) -> web.Application:
        from rocketq.console import message_views, views
        app = web.Application(client_max_size=forms.MAX_FORM_BYTES, middlewares=[self._guard])
        app[CONSOLE_KEY] = self
        views.routes(app)
        message_views.routes(app)
        app.router.add_static("/static/", HERE / "static", show_index=False, follow_symlinks=False)
        return app

    async def start(self) -> "ConsoleServer":
        await self._site.start(self.app())
        self.history.start()
        log.info("web console on http://%s:%d/", self.host, self.port)
        return self

    async def close(self) -> None:
        await self.history.close()
        await self._site.close()
        await self.data.close()

    # -- guards ------------------------------------------------------------------------------

    @web.middleware
    async def _guard(self, request: web.Request, handler):
        session = self.sessions.get(request.cookies.get(auth.COOKIE))
        fresh = session is None
        if fresh:
            session = self.sessions.new()
        request[SESSION_KEY] = session
        try:
            response = await self._checked(request, handler, session)
        except web.HTTPException as exc:        # redirects and refusals, answered as plain responses
            response = web.Response(status=exc.status, text=exc.text, headers=exc.headers)
        if fresh or request.get("session_renewed"):
            response.set_cookie(auth.COOKIE, request[SESSION_KEY].sid, httponly=True, samesite="Strict", path="/")
        response.headers.update(SECURITY_HEADERS)
        return response

    async def _checked(self, request: web.Request, handler, session: auth.Session):
        if request.method == "POST":
            if not auth.same_origin(request.headers.get("Origin"), request.headers.get("Host")):
                raise web.HTTPForbidden(text="refused: the form was posted from another site")
            form = await request.post()
            request["form"] = form
            if not auth.csrf_ok(session, form.get("csrf")):
                raise web.HTTPForbidden(text="refused: the form's CSRF token is missing or stale; reload the page")
        elif request.method not in ("GET", "HEAD"):
            raise web.HTTPMethodNotAllowed(request.method, ["GET", "POST"])
        if self.acl is not None and session.access_key is None and not request.path.startswith(OPEN_PATHS):
            if request.path.startswith("/api/"):
                raise web.HTTPUnauthorized(text="log in first")
            raise web.HTTPFound("/login")
        return await handler(request)

    # -- helpers for the views ---------------------------------------------------------------

    def credentials(self, request: web.Request) -> Credentials | None:
        s = request[SESSION_KEY]
        return Credentials(s.access_key, s.secret_key) if s.access_key else None

    def render(self, request: web.Request, template: str, *, status: int = 200, **context) -> web.Response:
        s = request[SESSION_KEY]
        flash, s.flash = s.flash, ""
        context.setdefault("error", "")
        html = self.templates.get_template(template).render(
            csrf=s.csrf, user=s.access_key, acl=self.acl is not None, title=self.title, flash=flash,
            path=request.path, **context)
        return web.Response(text=html, content_type="text/html", status=status)

    def redirect(self, request: web.Request, location: str, flash: str = "") -> web.HTTPFound:
        request[SESSION_KEY].flash = flash
        return web.HTTPFound(location)


def _when(ms) -> str:
    import datetime as dt
    try:
        ms = int(ms)
    except (TypeError, ValueError):
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000).isoformat(" ", "seconds") if ms > 0 else "-"


async def start_for(broker, namesrv: str | None, port: int | None) -> ConsoleServer | None:
    """The console a server process runs beside *broker* (``consolePort`` *port*: None is the default
    8080, or a free port when the broker's own port is 0 as in tests; -1 is off), or None."""
    if port == -1:
        return None
    if not namesrv:
        log.warning("web console not started: it reads the cluster through a NameServer and namesrvAddr is empty")
        return None
    s = broker.settings
    port = port if port is not None else (DEFAULT_CONSOLE_PORT if s.port else 0)
    first = namesrv.split(";")[0]
    own = broker.credentials()                 # the charts' sampler signs with the broker's admin keys under ACL
    return await ConsoleServer(first, host=s.host, port=port, acl=broker.acl, ssl_context=broker.client_ssl_context(),
                               title=f"rocketq {s.cluster_name}",
                               sampler_credentials=Credentials(*own) if own else None).start()
