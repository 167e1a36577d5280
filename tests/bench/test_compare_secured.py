"""`rocketq bench compare`'s rocketq rows against secured servers (issue 23): the remoting row with
ACL and TLS (enforcing), and the gRPC row (the official client) with credentials and TLS, run in
a process of its own because the CA reaches gRPC through a process-wide variable."""

import json
import os
import subprocess
import sys
import textwrap

from secured import ADMIN, ADMIN_SECRET, WRONG_SECRET, write_security

from rocketq.bench import official_client
from rocketq.bench.compare.rocketq_grpc import RocketqGrpc
from rocketq.bench.compare.rocketq_remoting import Rocketq
from rocketq.bench.compare.runner import _run
from rocketq.bench.security import BenchSecurity
from rocketq.client.access import resolve
from rocketq.client.model import MQClientError


def _security(tmp_path, secret=ADMIN_SECRET, **tls) -> BenchSecurity:
    ca, cert, key, acl, conf = write_security(tmp_path)
    access = resolve({"access_key": ADMIN, "secret_key": secret, "ca_file": str(ca), **tls}, environ={})
    return BenchSecurity(acl_file=acl, server_config=conf, access=access)


def _produce_and_consume(system, n=50):
    system.start()
    try:
        lat = _run(system.produce_one(n, b"x" * 128))
        got, _ = _run(system.consume(n + 1))          # the warm-up send of produce_one counts too
        return len(lat), got
    finally:
        system.stop()


def test_remoting_row_runs_secured_and_a_wrong_secret_is_refused(tmp_path):
    security = _security(tmp_path / "ok")
    assert _produce_and_consume(Rocketq(tmp_path / "ok" / "root", security=security)) == (50, 51)
    bad = _security(tmp_path / "bad", secret=WRONG_SECRET)
    try:
        _produce_and_consume(Rocketq(tmp_path / "bad" / "root", security=bad))
        raise AssertionError("a wrong secret was accepted")
    except MQClientError as exc:
        assert "does not match" in str(exc)


def test_grpc_row_takes_credentials_and_tls_but_says_why_not_mutual_tls(tmp_path):
    assert RocketqGrpc.refuses(_security(tmp_path / "m", cert_file=str(tmp_path / "c.pem"),
                                         key_file=str(tmp_path / "k.pem"))) \
        == "the official 5.x Python client cannot present a client certificate (mutual TLS)"
    if official_client.available() is not None:
        return
    script = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {os.path.dirname(os.path.dirname(__file__))!r})
        from pathlib import Path
        from test_compare_secured_helper import run
        print(json.dumps(run(Path({str(tmp_path / 'g')!r}))))
    """)
    (tmp_path / "test_compare_secured_helper.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_compare_secured import _security, _produce_and_consume
        from rocketq.bench.compare.rocketq_grpc import RocketqGrpc
        def run(root):
            security = _security(root)
            return _produce_and_consume(RocketqGrpc(root / "root", security=security), n=20)
    """))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path)] + sys.path))
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=240)
    assert p.returncode == 0, p.stderr[-3000:]
    sent, got = json.loads(p.stdout.strip().splitlines()[-1])
    assert sent == 20 and got >= 20
