"""Every client command against a real `rocketq serve` with ACL and TLS (enforcing) on (issue 23).

For each command, table-driven: the right credentials work; a wrong secret is the server's refusal
in one line and exit code 1; no credentials, or no TLS, says which option or variable to set.  No
secret ever appears in stdout, stderr (``-v`` DEBUG logs included) or ``--json`` output.  One
server for the module (tests/secured.py); the commands run in-process (CliRunner), with an empty
XDG_CONFIG_HOME and none of the user's ROCKETQ_* client variables.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Callable

import pytest
from click.testing import CliRunner
from secured import ADMIN, ADMIN_SECRET, PRODUCER, PRODUCER_SECRET, WRONG_SECRET, assert_no_secret, secured_server

from rocketq.cli.main import cli
from rocketq.client.access import CLIENT_ENV_VARS

TOPIC, GROUP, KEY = "SecT", "GID_SEC", "sec-key"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with secured_server(tmp_path_factory.mktemp("secured")) as s:
        yield s


@pytest.fixture(scope="module")
def run(server, tmp_path_factory):
    """``run(*args, env=..., verbose=False)``: rocketq in-process with only the given client variables."""
    config_home = tmp_path_factory.mktemp("xdg")

    def invoke(*args, env=None, verbose=False):
        clean = {name: None for name in CLIENT_ENV_VARS} | {"XDG_CONFIG_HOME": str(config_home), "COLUMNS": "240"}
        argv = (["-v"] if verbose else []) + [str(a) for a in args]
        return CliRunner(env=clean | (env or {})).invoke(cli, argv)
    return invoke


def creds(secret=ADMIN_SECRET, key=ADMIN) -> dict:
    return {"ROCKETQ_ACCESS_KEY": key, "ROCKETQ_SECRET_KEY": secret}


@pytest.fixture(scope="module")
def seeded(server, run):
    """A topic with a keyed message and a group that has read it: what every command needs to succeed."""
    ns = ("--namesrv", server.namesrv, "--ca-file", server.ca)
    sent = run("send", TOPIC, "hello secured", "--key", KEY, "--json", *ns, env=creds())
    assert sent.exit_code == 0, sent.output
    got = run("consume", TOPIC, "--group", GROUP, "--from", "first", "--count", "1", *ns, env=creds())
    assert got.exit_code == 0, got.output
    return json.loads(sent.stdout)


@dataclass
class Cmd:
    name: str
    args: Callable[[dict], list]        # seeded send result -> arguments
    broker_checked: bool = True         # False: only the NameServer is asked, which checks no reads (as RocketMQ's)
    setup: tuple = ()                   # a command to run first (with the right credentials)


COMMANDS = [
    Cmd("send", lambda s: ["send", TOPIC, "one more", "--json"]),
    Cmd("send --count", lambda s: ["send", TOPIC, "--count", 5, "--size", 16, "--json"]),
    Cmd("consume", lambda s: ["consume", TOPIC, "--from", "first", "--count", 1, "--idle", 5, "--json"]),
    Cmd("consume --group", lambda s: ["consume", TOPIC, "--group", GROUP, "--from", "first", "--idle", 1]),
    Cmd("topic create", lambda s: ["topic", "create", "SecMade", "--queues", 2]),
    Cmd("topic route", lambda s: ["topic", "route", TOPIC, "--json"], broker_checked=False),
    Cmd("topic list", lambda s: ["topic", "list", "--json"], broker_checked=False),
    Cmd("topic delete", lambda s: ["topic", "delete", "SecGone"], setup=("topic", "create", "SecGone")),
    Cmd("group list", lambda s: ["group", "list", "--json"]),
    Cmd("group lag", lambda s: ["group", "lag", GROUP, "--json"]),
    Cmd("cluster", lambda s: ["cluster", "--json"]),
    Cmd("message query --key", lambda s: ["message", "query", TOPIC, "--key", KEY, "--json"]),
    Cmd("message query --id", lambda s: ["message", "query", "--id", s["offset_msg_id"], "--json"]),
]
IDS = [c.name for c in COMMANDS]


def _with(server, cmd: Cmd, seeded, *extra) -> list:
    return cmd.args(seeded) + ["--namesrv", server.namesrv, *extra]


def one_error_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1 and lines[0].startswith("rocketq: error: "), result.output
    return lines[0]


@pytest.mark.parametrize("cmd", COMMANDS, ids=IDS)
def test_right_credentials_work_and_no_secret_is_printed_or_logged(server, run, seeded, cmd):
    if cmd.setup:
        assert run(*cmd.setup, "--namesrv", server.namesrv, "--ca-file", server.ca, env=creds()).exit_code == 0
    r = run(*_with(server, cmd, seeded, "--ca-file", server.ca), env=creds(), verbose=True)
    assert r.exit_code == 0, r.output
    assert_no_secret(r.stdout, r.stderr)
    assert "DEBUG" in r.stderr and f"access key {ADMIN} (from environment ROCKETQ_ACCESS_KEY)" in r.stderr
    if "--json" in cmd.args(seeded):
        for line in r.stdout.strip().splitlines() if cmd.name.startswith("consume") else [r.stdout]:
            json.loads(line)


@pytest.mark.parametrize("cmd", COMMANDS, ids=IDS)
def test_a_wrong_secret_is_the_servers_refusal_in_one_line(server, run, seeded, cmd):
    r = run(*_with(server, cmd, seeded, "--ca-file", server.ca), env=creds(WRONG_SECRET))
    assert_no_secret(r.stdout, r.stderr)
    if not cmd.broker_checked:
        assert r.exit_code == 0, r.output
        return
    line = one_error_line(r)
    assert f"does not match for AccessKey '{ADMIN}'" in line         # the server's own words
    assert "the secret key is wrong for this access key (it came from environment ROCKETQ_SECRET_KEY)" in line


@pytest.mark.parametrize("cmd", COMMANDS, ids=IDS)
def test_missing_credentials_say_which_option_or_variable_to_set(server, run, seeded, cmd):
    r = run(*_with(server, cmd, seeded, "--ca-file", server.ca))
    if not cmd.broker_checked:
        assert r.exit_code == 0, r.output
        return
    line = one_error_line(r)
    assert "carries no AccessKey" in line
    assert "give --access-key and --secret-key, set ROCKETQ_ACCESS_KEY and ROCKETQ_SECRET_KEY" in line


@pytest.mark.parametrize("cmd", COMMANDS, ids=IDS)
def test_without_tls_the_error_says_to_add_it(server, run, seeded, cmd):
    line = one_error_line(run(*_with(server, cmd, seeded), env=creds()))
    assert "if the server requires TLS, add --tls (and --ca-file with its CA)" in line


@pytest.mark.parametrize("cmd", [c for c in COMMANDS if c.name in ("send", "consume", "cluster")],
                         ids=["send", "consume", "cluster"])
def test_an_untrusted_server_certificate_says_to_give_its_ca(server, run, seeded, cmd):
    line = one_error_line(run(*_with(server, cmd, seeded, "--tls"), env=creds()))
    assert "CERTIFICATE_VERIFY_FAILED" in line and "give the CA that signed it with --ca-file" in line
    r = run(*_with(server, cmd, seeded, "--insecure"), env=creds())         # RocketMQ's default test mode
    assert r.exit_code == 0, r.output


def test_flags_work_as_the_variables_do_and_an_account_keeps_its_limits(server, run, seeded):
    ns = ("--namesrv", server.namesrv, "--ca-file", server.ca)
    r = run("send", TOPIC, "by flags", *ns, "--access-key", PRODUCER, "--secret-key", PRODUCER_SECRET)
    assert r.exit_code == 0 and r.stdout.startswith("SEND_OK"), r.output
    line = one_error_line(run("group", "list", *ns, "--access-key", PRODUCER, "--secret-key", PRODUCER_SECRET))
    assert f"AccessKey '{PRODUCER}' is not one" in line                # an admin request, refused by the server
    line = one_error_line(run("topic", "create", "X", *ns, "--access-key", ADMIN, "--secret-key", WRONG_SECRET))
    assert "(it came from --secret-key)" in line and WRONG_SECRET not in line
    r = run("send", TOPIC, "x", *ns, "--access-key", ADMIN)
    assert r.exit_code == 2 and "an access key (from --access-key) but no secret key: set --secret-key, " \
                               "ROCKETQ_SECRET_KEY, or secret_key in a profile" in r.stderr


def test_a_profile_file_carries_namesrv_credentials_and_tls(server, run, seeded, tmp_path):
    path = tmp_path / "client.toml"
    path.write_text(f'default_profile = "sec"\n[profiles.sec]\nnamesrv = "{server.namesrv}"\naccess_key = "{ADMIN}"\n'
                    f'secret_key = "{ADMIN_SECRET}"\nca_file = "{server.ca}"\n'
                    f'[profiles.wrong]\nnamesrv = "{server.namesrv}"\naccess_key = "{ADMIN}"\n'
                    f'secret_key = "{WRONG_SECRET}"\nca_file = "{server.ca}"\n')
    path.chmod(0o600)
    env = {"ROCKETQ_CLIENT_CONFIG": str(path)}
    r = run("group", "lag", GROUP, "--json", env=env, verbose=True)        # no flag at all: the default profile
    assert r.exit_code == 0 and json.loads(r.stdout)["group"] == GROUP, r.output
    assert f"profile sec ({path})" in r.stderr
    assert_no_secret(r.stdout, r.stderr)
    line = one_error_line(run("group", "lag", GROUP, "--profile", "wrong", env=env))
    assert f"(it came from profile wrong in {path})" in line
    assert run("group", "lag", GROUP, "--profile", "wrong", env=env | creds()).exit_code == 0   # env over profile
    path.chmod(0o644)
    line = one_error_line(run("group", "lag", GROUP, env=env))
    assert f"chmod 600 {path}" in line and "mode 644" in line


def test_verbose_wrong_secret_in_a_real_process_prints_no_secret(server, seeded, tmp_path):
    """The whole stderr of real processes, -v tracebacks and all."""
    env = {k: v for k, v in os.environ.items() if k not in CLIENT_ENV_VARS}
    env.update(creds(WRONG_SECRET), XDG_CONFIG_HOME=str(tmp_path), PYTHONPATH=os.pathsep.join(sys.path))
    for args in (["send", TOPIC, "x"], ["consume", TOPIC, "--count", "1", "--from", "first", "--json"],
                 ["topic", "create", "Y"]):
        p = subprocess.run([sys.executable, "-m", "rocketq.cli.main", "-v", *args, "--namesrv", server.namesrv,
                            "--ca-file", str(server.ca)], capture_output=True, text=True, env=env, timeout=60)
        assert p.returncode == 1 and "does not match" in p.stderr, p.stderr
        assert_no_secret(p.stdout, p.stderr)


def test_mutual_tls_needs_a_client_certificate(tmp_path, run):
    with secured_server(tmp_path, client_auth="require") as mtls:
        ns = ("--namesrv", mtls.namesrv, "--ca-file", mtls.ca)
        line = one_error_line(run("cluster", *ns, env=creds()))
        assert "if it wants a client certificate it trusts (mutual TLS), give --cert-file and --key-file" in line
        r = run("send", "MtlsT", "hello", *ns, "--cert-file", mtls.client_cert, "--key-file", mtls.client_key,
                env=creds())
        assert r.exit_code == 0 and r.stdout.startswith("SEND_OK"), r.output
        r = run("send", "MtlsT", "x", *ns, "--key-file", mtls.client_key, env=creds())
        assert r.exit_code == 2 and "no client certificate: set --cert-file, ROCKETQ_CERT_FILE" in r.stderr
