"""``rocketq namesrv`` as a process: it boots, answers, and exits 0 on SIGTERM."""

from __future__ import annotations

import asyncio
import re
import select
import signal
import subprocess
import sys

from rocketq.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode

BOOT_LINE = re.compile(r"boot success\. listening on [\d.]+:(\d+)")
RUN_CLI = "import sys; from rocketq.namesrv.cli import namesrv; namesrv(sys.argv[1:])"


def test_cli_serves_until_sigterm(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", RUN_CLI, "--host", "127.0.0.1", "--port", "0",
                             "--kv-config", str(tmp_path / "kv.json")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 20)      # the boot line, or EOF if it died
        assert ready, "rocketq namesrv printed nothing within 20 s"
        line = proc.stdout.readline()
        match = BOOT_LINE.search(line)
        assert match, f"no boot line: {line!r}, stderr: {proc.stderr.read() if proc.poll() is not None else ''}"
        port = int(match.group(1))

        async def ask() -> int:
            client = RemotingClient("127.0.0.1", port)
            try:
                request = RemotingCommand.create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
                return (await client.invoke(request, timeout_s=5)).code
            finally:
                await client.close()
        assert asyncio.run(ask()) == ResponseCode.TOPIC_NOT_EXIST
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
