"""``rocketq serve`` as a process: NameServer and broker in one, routes work, SIGTERM stops it cleanly."""

import asyncio
import os
import re
import select
import signal
import subprocess
import sys

from rocketq.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode

BOOT = re.compile(r"NameServer [\d.]+:(\d+), broker \S+ \(\S+\) [\d.]+:(\d+)")


def start_serve(tmp_path, *args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-m", "rocketq.cli.main", "serve", "--store-path", str(tmp_path / "s"),
                             "--host", "127.0.0.1", "--port", "0", "--namesrv-port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    ready, _, _ = select.select([proc.stdout], [], [], 60)
    line = proc.stdout.readline() if ready else ""
    match = BOOT.search(line)
    if not match:
        proc.kill()
        raise AssertionError(f"no boot line: {line!r}; stderr: {proc.stderr.read()}")
    proc.boot_line = line
    return proc, int(match.group(1)), int(match.group(2))


async def send_and_route(namesrv_port: int, broker_port: int) -> None:
    broker = RemotingClient("127.0.0.1", broker_port)
    namesrv = RemotingClient("127.0.0.1", namesrv_port)
    try:
        sent = await broker.invoke(RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, {
            "a": "P", "b": "ServeTopic", "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 0, "h": 0, "i": "",
            "j": 0, "k": False}, b"hello"), timeout_s=10)
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        ask = RemotingCommand.create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "ServeTopic"})
        for _ in range(200):                     # the new topic reaches the NameServer with the next registration
            route = await namesrv.invoke(ask, timeout_s=10)
            if route.code == ResponseCode.SUCCESS:
                break
            await asyncio.sleep(0.05)
        assert route.code == ResponseCode.SUCCESS and f":{broker_port}".encode() in route.body
    finally:
        await broker.close()
        await namesrv.close()


def test_serve_runs_namesrv_and_broker_and_stops_cleanly(tmp_path):
    proc, namesrv_port, broker_port = start_serve(tmp_path, "--no-grpc")
    try:
        assert (tmp_path / "s" / "abort").exists()
        asyncio.run(send_and_route(namesrv_port, broker_port))
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "stopped cleanly" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not (tmp_path / "s" / "abort").exists()


def test_serve_refuses_a_bad_config_in_one_line(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("listenPort=10911\nbrokerNmae=x\n")
    res = subprocess.run([sys.executable, "-m", "rocketq.cli.main", "serve", "-c", str(conf)], capture_output=True,
                         text=True, timeout=60, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert res.returncode == 1
    assert res.stderr.strip().splitlines() == [
        f"rocketq: error: {conf}:2: unknown key 'brokerNmae' (did you mean 'brokerName'?)"]


def test_serve_also_serves_grpc(tmp_path):
    import grpc

    proc, _, _ = start_serve(tmp_path, "--grpc-port", "0")
    try:
        # the boot line names the gRPC address; an HTTP/2 channel to it becomes ready (the RPCs are
        # tested against the endpoint itself in tests/grpc_endpoint)
        port = int(re.search(r"gRPC [\d.]+:(\d+)", proc.boot_line).group(1))
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(channel).result(timeout=20)
        channel.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0
