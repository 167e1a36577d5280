"""`rocketq bench broker` end to end at smoke size: every scenario runs against a real server."""

import json


def test_bench_broker_quick(invoke, tmp_path):
    res = invoke("bench", "broker", "--quick", "--runs", "1", "--backlog", "2000", "--json", tmp_path / "b.json")
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "b.json").read_text())
    by_name = {s["name"]: s for s in report["scenarios"]}
    assert len(by_name) == 8
    assert all(s["msgs_per_s"] and s["msgs_per_s"][0] > 0 for s in by_name.values())
    assert "drain 1KiB backlog" in res.output


def test_bench_replication_smoke(invoke, tmp_path):
    res = invoke("bench", "replication", "--runs", "1", "--count", "1000", "--json", tmp_path / "r.json")
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert all(v["msgs_per_s"][0] > 0 for v in report["produce_1KiB_64_senders"].values())
    assert report["failover_read_from_slave_s"][0] > 0 and report["failover_send_to_other_master_s"][0] > 0


def test_bench_grpc_smoke(invoke, tmp_path):
    res = invoke("bench", "grpc", "--runs", "1", "--count", "50", "--json", tmp_path / "g.json")
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "g.json").read_text())
    assert all(v > 0 for v in report["ratios"].values())


def test_bench_broker_against_a_secured_server(tmp_path):
    """ACL and TLS (enforcing) on the servers it starts; its clients sign and verify with the CLI's
    settings (issue 23).  The report says what was secured and holds no secret."""
    from click.testing import CliRunner
    from secured import ADMIN, ADMIN_SECRET, WRONG_SECRET, assert_no_secret, write_security

    from rocketq.cli.main import cli
    from rocketq.client.access import CLIENT_ENV_VARS
    ca, _, _, acl, tls = write_security(tmp_path)
    env = {name: None for name in CLIENT_ENV_VARS} | {"XDG_CONFIG_HOME": str(tmp_path), "COLUMNS": "240",
                                                       "ROCKETQ_ACCESS_KEY": ADMIN, "ROCKETQ_SECRET_KEY": ADMIN_SECRET}
    args = ["bench", "broker", "--quick", "--runs", "1", "--backlog", "2000", "--acl", str(acl),
            "--server-config", str(tls), "--ca-file", str(ca)]
    res = CliRunner(env=env).invoke(cli, args + ["--json", str(tmp_path / "b.json")])
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "b.json").read_text())
    assert all(s["msgs_per_s"] and s["msgs_per_s"][0] > 0 for s in report["scenarios"])
    assert "ACL on (plain_acl.yml), server config tls.toml" in report["security"]
    assert f"access key {ADMIN}" in report["security"] and "TLS on, server verified against" in report["security"]
    assert_no_secret(res.stdout, res.stderr, (tmp_path / "b.json").read_text())

    res = CliRunner(env=env | {"ROCKETQ_SECRET_KEY": WRONG_SECRET}).invoke(cli, args)
    errors = [line for line in res.stderr.splitlines() if line.startswith("rocketq: error: ")]
    assert res.exit_code == 1 and len(errors) == 1 and "does not match for AccessKey" in errors[0], res.output
    assert res.stderr.strip().splitlines()[-1] == errors[0]      # after the line saying what is secured
    assert_no_secret(res.stdout, res.stderr)
