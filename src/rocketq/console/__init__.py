"""The web console: watch and operate a rocketq cluster from a browser (RocketMQ Dashboard's job).

Served by ``rocketq serve`` and ``rocketq broker`` themselves on ``consolePort`` (8080; loopback
unless ``bindAddress`` says otherwise; ``--no-console`` turns it off), by aiohttp on the server's
own event loop: one process, no thread, nothing else to install.  Pages are rendered on the server
from Jinja2 templates with autoescaping on (every name, property and message body a client sent
is escaped, never executed); the only JavaScript (``static/console.js``, shipped in the package,
nothing fetched from elsewhere) draws the charts and refreshes them from small JSON endpoints.

The console is a client like any other: it reads and changes the cluster through the NameServers
and brokers with :class:`rocketq.client.Admin` (:mod:`.data`), never by reaching into a broker's
objects, so it shows every broker registered with the NameServer, and with ACL on every action
is signed with the logged-in account's own keys and the brokers' ACL decides (:mod:`.auth`).

Modules: :mod:`.server` (the aiohttp application, its guards and its life cycle), :mod:`.auth`
(sessions, login, CSRF tokens), :mod:`.forms` (input checks), :mod:`.data` (cluster reads and
writes), :mod:`.history` (bounded time series for the charts), :mod:`.views` and
:mod:`.message_views` (the pages).
"""

from rocketq.console.server import DEFAULT_CONSOLE_PORT, ConsoleServer

__all__ = ["ConsoleServer", "DEFAULT_CONSOLE_PORT"]
