"""The console's guards through HTTP, against a real ``rocketq serve``: bad names, huge bodies, HTML
in bodies and properties (escaped), CSRF, and ACL (nothing without a login; a login acts as its
account).  The browser tests (test_console_browser.py) drive the same pages in Chromium."""

from __future__ import annotations

import json
import re
import time

from console_helpers import Browserless, rocketq, start_serve, stop_serve, served  # noqa: F401 (a fixture)

from rocketq.console.forms import MAX_BODY_BYTES, MAX_FORM_BYTES


def test_illegal_topic_names_are_refused_with_the_rule(served):
    b = Browserless(served.console)
    token = b.csrf("/topics")
    for bad in ("has space", "a/../b", "<script>x</script>", "x" * 200, ""):
        status, html, _ = b.request("/topics", {"csrf": token, "topic": bad, "queues": "2"})
        assert status == 400, bad
        assert "a topic name is 1 to 127 characters" in html
        assert "<script>x</script>" not in html
    status, html, _ = b.request("/topics/bad%20name")
    assert status == 400 and "illegal characters" in html
    status, _, _ = b.request("/topics", {"csrf": token, "topic": "GoodName", "queues": "99999"})
    assert status == 400


def test_bodies_over_the_limit_are_refused(served):
    b = Browserless(served.console)
    token = b.csrf()
    status, html, _ = b.request("/send", {"csrf": token, "topic": "BigT", "body": "x" * (MAX_BODY_BYTES + 1)})
    assert status == 400 and "over the 4,194,304-byte limit" in html
    status, _, _ = b.request("/send", raw=b"csrf=" + token.encode() + b"&body=" + b"x" * (MAX_FORM_BYTES + 10),
                             headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 413


def test_html_in_bodies_and_properties_is_escaped(served):
    evil = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    r = rocketq("send", "EvilT", evil, "--key", "evil-1", "--property", f"note={evil}", "--namesrv", served.namesrv)
    assert r.exit_code == 0, r.output
    msg_id = r.stdout.split("msgId=")[1].split()[0]
    b = Browserless(served.console)
    status, html, headers = b.request(f"/messages/{msg_id}?topic=EvilT")
    assert status == 200
    assert evil not in html and "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
    assert "script-src" not in headers["Content-Security-Policy"] and "default-src 'self'" in \
        headers["Content-Security-Policy"]
    status, html, _ = b.request("/messages?mode=key&topic=EvilT&key=evil-1")
    assert status == 200 and "1 message(s)" in html


def test_posts_without_the_sessions_csrf_token_or_from_another_site_are_refused(served):
    b = Browserless(served.console)
    token = b.csrf("/topics")
    status, html, _ = b.request("/topics", {"topic": "CsrfT", "queues": "1"})
    assert status == 403 and "CSRF" in html
    status, _, _ = b.request("/topics", {"csrf": "forged", "topic": "CsrfT", "queues": "1"})
    assert status == 403
    status, _, _ = b.request("/topics", {"csrf": token, "topic": "CsrfT", "queues": "1"},
                             headers={"Origin": "http://evil.example"})
    assert status == 403
    other = Browserless(served.console)               # another browser's token is not this one's
    other.csrf("/topics")
    status, _, _ = other.request("/topics", {"csrf": token, "topic": "CsrfT", "queues": "1"})
    assert status == 403
    status, _, headers = b.request("/topics", {"csrf": token, "topic": "CsrfT", "queues": "1"})
    assert status == 302 and headers["Location"] == "/topics/CsrfT"


def test_acl_on_nothing_without_a_login_and_a_login_acts_as_its_account(tmp_path):
    acl = tmp_path / "plain_acl.yml"
    acl.write_text("accounts:\n"
                   "  - accessKey: RocketMQ\n    secretKey: '12345678'\n    admin: true\n"
                   "  - accessKey: reader\n    secretKey: readerSecret\n    admin: false\n"
                   "    defaultTopicPerm: SUB\n    defaultGroupPerm: SUB\n")
    served = start_serve(tmp_path, "--acl", str(acl))
    try:
        b = Browserless(served.console)
        for path in ("/", "/topics", "/groups/G", "/messages?mode=key&topic=T&key=k", "/send"):
            status, _, headers = b.request(path)
            assert status == 302 and headers["Location"] == "/login", path
        status, _, _ = b.request("/api/throughput")
        assert status == 401
        token = b.csrf("/login")
        status, _, _ = b.request("/topics", {"csrf": token, "topic": "NoLoginT", "queues": "1"})
        assert status == 302                                     # to the login page; nothing created
        status, html, _ = b.request("/login", {"csrf": token, "access_key": "RocketMQ", "secret_key": "wrong"})
        assert status == 401 and "not an account" in html
        status, _, _ = b.request("/login", {"csrf": token, "access_key": "reader", "secret_key": "readerSecret"})
        assert status == 302
        token = b.csrf("/topics")                                 # a new session after the login
        status, html, _ = b.request("/topics", {"csrf": token, "topic": "ReaderT", "queues": "1"})
        assert status == 502 and re.search(r"topic not created: .*(NO_PERMISSION|admin|permission)", html, re.I)
        admin = Browserless(served.console)
        token = admin.csrf("/login")
        admin.request("/login", {"csrf": token, "access_key": "RocketMQ", "secret_key": "12345678"})
        token = admin.csrf("/topics")
        status, _, headers = admin.request("/topics", {"csrf": token, "topic": "AdminT", "queues": "1"})
        assert status == 302 and headers["Location"] == "/topics/AdminT"
        status, html, _ = admin.request("/")
        assert status == 200 and "broker-a" in html and "RocketMQ" in html
        # the charts' sampler reads the brokers with the broker's own admin keys: samples arrive under ACL too
        deadline = time.monotonic() + 30
        while len(json.loads(admin.request("/api/throughput")[1])["t"]) < 2:
            assert time.monotonic() < deadline, "no throughput samples under ACL"
            time.sleep(0.2)
        status, _, _ = b.request("/api/groups/GID_NONE/lag")          # reader: the brokers answer for its account
        assert status in (200, 403)
    finally:
        stop_serve(served)
