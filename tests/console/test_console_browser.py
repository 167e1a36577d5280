"""The console in a real headless Chromium (Debian's ``chromium`` + ``chromium-driver``, driven by
Selenium; no browser is ever downloaded): create a topic, send, find the message by key, watch a
group's lag fall after consuming, reset its offsets by time, read a message's trace.

A screenshot of every page is kept under the test's tmp dir (``screens/``); with
``ROCKETQ_TEST_CONSOLE_SCREENSHOTS=<dir>`` they are copied there too (how docs/console/ was made).
Skipped, saying why, when chromium or chromedriver is not installed (``make test`` installs them
when it runs as root: see the Makefile).
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import time
from pathlib import Path

import pytest
from console_helpers import rocketq, served  # noqa: F401 (a fixture)

from rocketq.client import Message, Producer
import asyncio
from rocketq.common import trace

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
WAIT_S = 20.0
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1400,1000")

pytestmark = pytest.mark.skipif(not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
                                reason="Debian's chromium and chromium-driver are not installed "
                                       "(apt-get install chromium chromium-driver; make test does it as root)")


@pytest.fixture
def browser(tmp_path):
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the test extra)")
    from selenium.webdriver.chrome.service import Service
    os.environ.setdefault("SE_OFFLINE", "true")          # Selenium Manager must never fetch a driver
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for flag in FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)
    driver.set_page_load_timeout(WAIT_S)
    yield driver
    driver.quit()


class Pages:
    def __init__(self, driver, base: str, shots: Path):
        self.d, self.base, self.shots = driver, base.rstrip("/"), shots
        shots.mkdir(parents=True, exist_ok=True)

    def open(self, path: str) -> None:
        self.d.get(self.base + path)

    def el(self, css: str):
        from selenium.webdriver.common.by import By
        return self.d.find_element(By.CSS_SELECTOR, css)

    def text(self, css: str) -> str:
        return self.el(css).text

    def fill(self, css: str, value: str) -> None:
        field = self.el(css)
        field.clear()
        field.send_keys(value)

    def set_value(self, css: str, value: str) -> None:
        self.d.execute_script("arguments[0].value = arguments[1]", self.el(css), value)

    def until(self, what: str, condition) -> None:
        """Wait (re-checking, never a fixed sleep) until *condition()* holds."""
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                if condition():
                    return
            except Exception:        # the element is not there yet
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what} on {self.d.current_url}")
            time.sleep(0.1)

    def shot(self, name: str) -> None:
        path = self.shots / f"{name}.png"
        self.d.save_screenshot(str(path))
        target = os.environ.get("ROCKETQ_TEST_CONSOLE_SCREENSHOTS")
        if target:
            Path(target).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(target) / path.name)


def total_lag(p: Pages) -> int:
    p.d.refresh()
    return int(p.text("#total-lag"))


def test_topic_send_search_lag_reset_and_trace(browser, served, tmp_path):
    p = Pages(browser, served.console, tmp_path / "screens")
    ns = ("--namesrv", served.namesrv)

    p.open("/")
    p.until("the broker row", lambda: "broker-a" in p.text("#brokers"))
    assert "ASYNC_MASTER" in p.text("#brokers")

    p.open("/topics")
    p.fill("#topic", "ConsoleTopic")
    p.fill("#queues", "2")
    p.el("#create").click()
    p.until("the new topic's page", lambda: p.text("#topic-name") == "ConsoleTopic")
    assert "created with 2 queues" in p.text("#flash")
    p.shot("topic")

    p.open("/send?topic=ConsoleTopic")
    p.fill("#send-tags", "TagA")
    p.fill("#send-keys", "order-42")
    p.fill("#send-body", '{"item": "<b>book</b>", "qty": 2}')
    p.shot("send")
    p.el("#send").click()
    p.until("the sent message's page", lambda: p.text("#message-id"))
    assert "SEND_OK" in p.text("#flash")
    assert '"<b>book</b>"' in p.text("#body-text")                   # shown as text, not as markup
    assert not p.d.find_elements("css selector", "#body-text b")
    msg_id = p.text("#message-id")
    p.el("nav[data-tabs] a[data-show='body-json']").click()
    p.until("the JSON preview", lambda: '"qty": 2' in p.text("#body-json"))
    p.shot("message")

    p.open("/messages?mode=key")
    p.fill("#search-topic", "ConsoleTopic")
    p.fill("#search-key", "order-42")
    p.el("#search").click()
    p.until("one message found", lambda: p.text("#found-count") == "1 message(s)")
    assert msg_id in p.text("#found")
    p.shot("messages")

    assert rocketq("send", "ConsoleTopic", "--count", "20", "--size", "32", *ns).exit_code == 0
    assert rocketq("consume", "ConsoleTopic", "--group", "GID_CONSOLE", "--from", "first", "--count", "5",
                   *ns).exit_code == 0
    p.open("/groups/GID_CONSOLE")
    lag_before = total_lag(p)
    assert lag_before == 16
    assert rocketq("consume", "ConsoleTopic", "--group", "GID_CONSOLE", "--count", "16", *ns).exit_code == 0
    p.until("the lag to fall to 0", lambda: total_lag(p) == 0)
    p.until("the lag chart", lambda: int(p.el("#lag-chart").get_attribute("data-drawn") or 0) >= 2)
    p.shot("group")

    an_hour_ago = (dt.datetime.now() - dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S")
    p.set_value("#reset-time", an_hour_ago)
    p.el("#reset").click()
    p.until("the reset's result", lambda: "reset" in p.text("#flash"))
    assert total_lag(p) == 21                                   # back to the first message of every queue
    p.shot("group-reset")

    p.open("/topics")
    p.until("the topic in the list", lambda: "ConsoleTopic" in p.text("#topics"))
    p.shot("topics")
    p.open("/groups")
    p.until("the group in the list", lambda: "GID_CONSOLE" in p.text("#groups"))
    p.shot("groups")

    _send_trace_records(served.namesrv, msg_id)
    p.open(f"/trace/{msg_id}")
    p.until("the trace rows", lambda: "consumed" in p.text("#trace"))
    rows = p.text("#trace")
    assert "sent" in rows and "PID_TRACE" in rows and "GID_TRACE" in rows and "success" in rows
    p.shot("trace")

    p.open("/live")
    p.until("the live chart", lambda: int(p.el("#live-chart").get_attribute("data-drawn") or 0) >= 2)
    p.shot("live")
    p.open("/")
    p.shot("cluster")
    assert all((tmp_path / "screens" / f"{n}.png").stat().st_size > 10_000
               for n in ("cluster", "topics", "topic", "send", "message", "messages", "groups", "group", "group-reset",
                         "trace", "live"))


def _send_trace_records(namesrv: str, msg_id: str) -> None:
    """What a traced Java producer and consumer send to RMQ_SYS_TRACE_TOPIC for one message."""
    now = int(time.time() * 1000)
    records = [
        trace.TraceRecord(trace.PUB, msg_id=msg_id, timestamp_ms=now - 30, group="PID_TRACE", topic="ConsoleTopic",
                          tags="TagA", keys="order-42", store_host="127.0.0.1:10911", body_length=33, cost_ms=2,
                          msg_type="Normal_Msg", offset_msg_id="", success=True),
        trace.TraceRecord(trace.SUB_BEFORE, msg_id=msg_id, timestamp_ms=now - 20, group="GID_TRACE",
                          request_id="req-1", keys="order-42", region_id="DefaultRegion"),
        trace.TraceRecord(trace.SUB_AFTER, msg_id=msg_id, request_id="req-1", cost_ms=7, success=True,
                          keys="order-42", timestamp_ms=now - 10),
    ]

    async def send():
        async with Producer("PID_TRACE_SENDER", namesrv) as producer:
            for r in records:
                await producer.send(Message(topic=trace.TRACE_TOPIC, body=trace.encode(r).encode(),
                                            keys=trace.trace_keys(r)))
    asyncio.run(send())
