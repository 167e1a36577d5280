"""How a client's credentials and TLS settings are resolved (rocketq.client.access): options over
ROCKETQ_* variables over the profile file, the file's rules, and that no message, repr or
description ever holds the secret.  Real files in a temporary XDG_CONFIG_HOME; no server here
(tests/cli/test_secured_commands.py and tests/spark/test_security.py take these to one)."""

import os
import stat

import pytest

from rocketq.client.access import (
    CLIENT_ENV_VARS,
    AccessError,
    MissingSetting,
    config_path,
    explain,
    resolve,
)
from rocketq.spark.options import SPARK_NAMES, Secret, access_spec

SECRET = "s3cr3t-Value-XYZ"


def write_profiles(home, text, mode=0o600):
    path = home / "rocketq" / "client.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.fixture
def env(tmp_path):
    """A clean environment whose profile file lives under tmp_path (XDG_CONFIG_HOME)."""
    return {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}


PROFILES = f"""
default_profile = "prod"
[profiles.prod]
namesrv = "mq1:9876;mq2:9876"
access_key = "prod-app"
secret_key = "{SECRET}"
ca_file = "certs/ca.pem"
[profiles.dev]
access_key = "dev-app"
secret_key = "dev-secret"
insecure = true
"""


def test_flags_win_over_the_environment_which_wins_over_the_profile(tmp_path, env):
    write_profiles(tmp_path / "xdg", PROFILES)
    a = resolve({}, environ=env)
    assert (a.profile, a.namesrv, a.access_key, a.secret_key) == ("prod", "mq1:9876;mq2:9876", "prod-app", SECRET)
    assert a.tls and a.ca_file == str(tmp_path / "xdg" / "rocketq" / "certs" / "ca.pem")   # relative to the file
    assert a.source("secret_key").startswith("profile prod in ")
    env.update(ROCKETQ_ACCESS_KEY="env-app", ROCKETQ_SECRET_KEY="env-secret", ROCKETQ_NAMESRV="env:9876")
    a = resolve({}, environ=env)
    assert (a.access_key, a.secret_key, a.namesrv) == ("env-app", "env-secret", "env:9876")
    assert a.source("secret_key") == "environment ROCKETQ_SECRET_KEY"
    a = resolve({"access_key": "flag-app", "secret_key": "flag-secret"}, environ=env)
    assert (a.access_key, a.secret_key, a.source("access_key")) == ("flag-app", "flag-secret", "--access-key")
    a = resolve({}, profile="dev", environ=env)                # --profile picks another profile
    assert a.profile == "dev" and a.tls and a.insecure and a.ca_file is None
    env["ROCKETQ_PROFILE"] = "dev"
    assert resolve({}, environ=dict(env, ROCKETQ_ACCESS_KEY="", ROCKETQ_SECRET_KEY="")).access_key == "dev-app"


def test_the_file_is_found_by_xdg_config_home_home_or_rocketq_client_config(tmp_path):
    assert config_path({"HOME": "/h"}) == config_path({"HOME": "/h", "XDG_CONFIG_HOME": "relative"}) \
        == __import__("pathlib").Path("/h/.config/rocketq/client.toml")
    assert str(config_path({"HOME": "/h", "XDG_CONFIG_HOME": "/x"})) == "/x/rocketq/client.toml"
    assert str(config_path({"HOME": "/h", "ROCKETQ_CLIENT_CONFIG": "/etc/c.toml"})) == "/etc/c.toml"


def test_without_default_profile_a_profile_named_default_is_used_and_none_otherwise(tmp_path, env):
    path = write_profiles(tmp_path / "xdg", '[profiles.default]\naccess_key = "d"\nsecret_key = "x"\n')
    assert resolve({}, environ=env).access_key == "d"
    path.write_text('[profiles.other]\naccess_key = "o"\nsecret_key = "x"\n')
    a = resolve({}, environ=env)
    assert a.profile is None and a.access_key is None and not a.tls
    assert resolve({}, environ={"HOME": str(tmp_path / "nobody")}).credentials() is None    # no file at all


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o620])
def test_a_profile_file_others_can_read_or_write_is_refused_with_the_chmod(tmp_path, env, mode):
    path = write_profiles(tmp_path / "xdg", PROFILES, mode=mode)
    with pytest.raises(AccessError) as caught:
        resolve({"access_key": "a", "secret_key": "b"}, environ=env)
    text = str(caught.value)
    assert f"chmod 600 {path}" in text and f"mode {mode:03o}" in text and SECRET not in text
    path.chmod(0o600)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and resolve({}, environ=env).profile == "prod"


@pytest.mark.parametrize("text, expected", [
    ('[profiles.p]\nsecret_kee = "v"\n', "unknown key profiles.p.secret_kee (did you mean secret_key?)"),
    ('defualt_profile = "p"\n', "unknown key defualt_profile (did you mean default_profile?)"),
    (f'[profiles.p]\nsecret_key = 12\naccess_key = "a"\n', "profiles.p.secret_key must be a string"),
    (f'[profiles.p]\ntls = "{SECRET}"\n', "profiles.p.tls must be true or false"),
    (f'[profiles.p]\nsecret_key = "{SECRET}\n', "line 2"),                     # TOML error: where, not what
])
def test_a_bad_profile_file_names_the_file_and_key_never_the_value(tmp_path, env, text, expected):
    path = write_profiles(tmp_path / "xdg", text)
    with pytest.raises(AccessError) as caught:
        resolve({}, profile="p", environ=env)
    assert expected in str(caught.value) and str(path) in str(caught.value) and SECRET not in str(caught.value)


def test_an_unknown_or_missing_profile_says_what_there_is(tmp_path, env):
    with pytest.raises(AccessError, match="profile 'prod' .*--profile.* does not exist"):
        resolve({}, profile="prod", environ=env)
    write_profiles(tmp_path / "xdg", PROFILES)
    with pytest.raises(AccessError, match=r"no profile 'qa' \(asked for by environment ROCKETQ_PROFILE; it has dev, prod\)"):
        resolve({}, environ=dict(env, ROCKETQ_PROFILE="qa"))


@pytest.mark.parametrize("given, names, says", [
    ({"access_key": "a"}, None, "an access key (from --access-key) but no secret key: set --secret-key, "
                                "ROCKETQ_SECRET_KEY, or secret_key in a profile in"),
    ({"secret_key": SECRET}, None, "a secret key (from --secret-key) but no access key: set --access-key, "
                                   "ROCKETQ_ACCESS_KEY"),
    ({"access_key": "a"}, SPARK_NAMES, "an access key (from accessKey) but no secret key: set secretKey, "
                                       "ROCKETQ_SECRET_KEY"),
    ({"key_file": "/k.pem"}, None, "a client key (from --key-file) but no client certificate: set --cert-file"),
])
def test_half_a_pair_says_which_option_or_variable_to_set(env, given, names, says):
    with pytest.raises(MissingSetting) as caught:
        resolve(given, environ=env, **({"names": names} if names else {}))
    assert says in str(caught.value) and SECRET not in str(caught.value)


def test_tls_follows_from_a_ca_a_client_certificate_or_insecure_and_files_are_checked(tmp_path, env):
    assert not resolve({}, environ=env).tls
    a = resolve({}, environ=dict(env, ROCKETQ_CA_FILE=str(tmp_path / "missing.pem")))
    assert a.tls and a.source("tls") == "environment ROCKETQ_CA_FILE"
    with pytest.raises(AccessError, match=r"ca file .*missing.pem \(from environment ROCKETQ_CA_FILE\) does not exist"):
        a.ssl_context()
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate")
    with pytest.raises(AccessError, match=r"cannot load ca file .*bad.pem \(from --ca-file\)"):
        resolve({"ca_file": str(bad)}, environ=env).ssl_context()
    with pytest.raises(AccessError, match="ROCKETQ_TLS must be true or false"):
        resolve({}, environ=dict(env, ROCKETQ_TLS="maybe"))
    insecure = resolve({"insecure": True}, environ=env).ssl_context()
    assert insecure.verify_mode.name == "CERT_NONE" and not insecure.check_hostname
    assert resolve({"tls": True}, environ=env).ssl_context().verify_mode.name == "CERT_REQUIRED"


def test_the_secret_is_in_no_repr_description_or_pickle_text(tmp_path, env):
    write_profiles(tmp_path / "xdg", PROFILES)
    a = resolve({}, environ=env)
    for text in (repr(a), str(a), a.describe(), repr(a.credentials()), str(a.credentials())):
        assert SECRET not in text
    assert "access key prod-app" in a.describe() and "secret key from profile prod" in a.describe()
    spec = access_spec({"accessKey": "k", "secretKey": SECRET, "tlsCaFile": "/ca.pem"})
    assert SECRET not in repr(spec) and SECRET not in str(spec.secret_key) and spec.secret_key == Secret(SECRET)
    assert spec.resolve().secret_key == SECRET and spec.resolve().source("secret_key") == "secretKey"
    import pickle
    assert pickle.loads(pickle.dumps(spec)) == spec


@pytest.mark.parametrize("refusal, hint", [
    ("code 16 from 1.2.3.4:10911: request code 310 from 1.2.3.4 carries no AccessKey; ACL is enabled on this broker",
     "this server wants credentials: give --access-key and --secret-key, set ROCKETQ_ACCESS_KEY and "
     "ROCKETQ_SECRET_KEY"),
    ("code 16 from 1.2.3.4:10911: signature of request code 310 does not match for AccessKey 'app'",
     "the secret key is wrong for this access key (it came from environment ROCKETQ_SECRET_KEY)"),
    ("code 16 from x: no ACL account for AccessKey 'app'", "the server has no such account (the access key came "
                                                           "from environment ROCKETQ_ACCESS_KEY)"),
])
def test_refusals_are_explained_with_what_to_set(env, refusal, hint):
    a = resolve({}, environ=dict(env, ROCKETQ_ACCESS_KEY="app", ROCKETQ_SECRET_KEY=SECRET))
    text = explain(refusal, a if "AccessKey 'app'" in refusal else None)
    assert text.startswith(refusal) and hint in text and SECRET not in text and "\n" not in text


def test_the_servers_skip_every_client_variable():
    from rocketq.server.config import read_env
    assert read_env({name: "x" for name in CLIENT_ENV_VARS}, client_keys=False) == []
    assert {"ROCKETQ_ACCESS_KEY", "ROCKETQ_SECRET_KEY", "ROCKETQ_PROFILE", "ROCKETQ_CLIENT_CONFIG", "ROCKETQ_TLS",
            "ROCKETQ_CA_FILE", "ROCKETQ_CERT_FILE", "ROCKETQ_KEY_FILE"} <= CLIENT_ENV_VARS


@pytest.mark.parametrize("closed", [
    "RemotingConnectionClosedError: connection to 127.0.0.1:9876 closed",
    "RemotingConnectionClosedError: connection to 127.0.0.1:9876 closed: [Errno 104] Connection reset by peer",
])
def test_a_tls_connection_closed_after_the_handshake_points_at_a_client_certificate(env, closed):
    """A TLS 1.3 server refuses a missing client certificate after the client's handshake is done: the client
    reads the alert, or the server's reset when that arrives first. Either way the hint is mutual TLS, not
    "does it speak TLS?"."""
    text = explain(closed, resolve({"tls": True}, environ=env))
    assert "if it wants a client certificate it trusts (mutual TLS), give --cert-file and --key-file" in text, text
