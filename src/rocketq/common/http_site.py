"""One aiohttp site on the broker's event loop: the web console's and ``/metrics``' listener.

Binding names the setting that chose the port when it fails (``consolePort``,
``metricsPromExporterPort``), and ``port`` is the bound one (a configured 0 lets the system pick).
"""

from __future__ import annotations

from aiohttp import web

SHUTDOWN_TIMEOUT_S = 2.0          # what a closing site waits for requests still being answered


class HttpSite:
    def __init__(self, host: str, port: int, *, setting: str, what: str):
        self.host, self._port, self._setting, self._what = host, port, setting, what
        self._runner: web.AppRunner | None = None

    @property
    def port(self) -> int:
        for addr in self._runner.addresses if self._runner else ():
            return addr[1]
        return self._port

    async def start(self, app: web.Application) -> None:
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT_S)
        await self._runner.setup()
        try:
            await web.TCPSite(self._runner, self.host, self._port, reuse_address=True).start()
        except OSError as exc:
            await self.close()
            raise OSError(exc.errno, f"{self._what} port {self.host}:{self._port} ({self._setting}): "
                                     f"{exc.strerror}") from None

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
