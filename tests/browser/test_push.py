"""The page's one push socket (web/js/service.js, on the package's watch()): cards learn every change from it without
polling, and poll as before when it is refused or closes, re-reading by GET after a reconnect.
On every backend: the embedded stack, LocalStack, and the AMQP path."""
from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from tests.browser.photos import landscape
from tests.browser.test_page import READY_TIMEOUT, card, open_page, pick
from tests.conftest import free_port
from tests.local_runner import BACKENDS, runner_on

@pytest.fixture(scope="module", params=BACKENDS)
def runner(request):
    """The session's embedded runner, and runners on LocalStack and on the AMQP path."""
    if request.param == "embedded":
        yield request.getfixturevalue("embedded_runner")
        return
    with runner_on(request.param, request) as started:
        yield started


PUSH = re.compile(r"^ws://127\.0\.0\.1:\d+/?$")  # the runner's push gateway


def job_gets(page) -> list[str]:
    """The URLs of the page's GETs of a job, from now on."""
    gets: list[str] = []
    page.on("request", lambda r: r.method == "GET" and "/api/v1/image-jobs/" in r.url and gets.append(r.url))
    return gets


def photos(count: int, prefix: str):
    return [(f"{prefix}{i}.jpg", "image/jpeg", landscape(320 + i, 240)) for i in range(count)]


def test_twenty_uploads_reach_ready_over_one_socket_with_no_poll(page, runner):
    sockets = []
    page.on("websocket", lambda ws: sockets.append(ws))
    open_page(page, runner)
    page.wait_for_selector("body[data-push=open]")
    gets = job_gets(page)
    pick(page, *photos(20, "push"))
    for i in range(20):
        expect(card(page, f"push{i}.jpg")).to_have_attribute("data-status", "ready", timeout=READY_TIMEOUT)
        expect(card(page, f"push{i}.jpg").locator(".thumb img")).to_be_visible()
    assert gets == [], gets  # every change came over the socket
    assert len(sockets) == 1 and PUSH.match(sockets[0].url), [s.url for s in sockets]


def test_with_the_socket_refused_the_page_finishes_every_photo_by_polling(page_without_csp, runner):
    page = page_without_csp  # the policy would block the dead port before any refusal
    dead = f"ws://127.0.0.1:{free_port()}"  # nothing listens: every connect is refused
    page.route(f"{runner.api}/api/v1/push", lambda route: route.fulfill(
        status=200, json={"url": dead, "protocols": ["image-jobs.v1", "bearer.<token>"]},
        headers={"Access-Control-Allow-Origin": "*", "Cache-Control": "no-store"}))
    open_page(page, runner)
    gets = job_gets(page)
    pick(page, *photos(5, "refused"))
    for i in range(5):
        expect(card(page, f"refused{i}.jpg")).to_have_attribute("data-status", "ready", timeout=READY_TIMEOUT)
    assert gets, "the cards were never polled"
    assert page.evaluate("document.body.dataset.push") in (None, "closed")


def test_a_socket_that_closes_hands_the_cards_to_polling_and_a_reconnect_rereads(page, runner):
    """The first socket is cut after its first message; the cards poll until the next one
    opens, which reads every unfinished card once by GET."""
    connections = []

    def relay(ws):
        server = ws.connect_to_server()
        connections.append(ws)
        first = len(connections) == 1

        def to_page(message):
            ws.send(message)
            if first:
                ws.close()

        server.on_message(to_page)
        ws.on_message(lambda message: server.send(message))

    page.route_web_socket(PUSH, relay)
    open_page(page, runner)
    page.wait_for_selector("body[data-push=open]")
    gets = job_gets(page)
    pick(page, *photos(3, "cut"))
    for i in range(3):
        expect(card(page, f"cut{i}.jpg")).to_have_attribute("data-status", "ready", timeout=READY_TIMEOUT)
    assert len(connections) >= 2, "the page did not connect again"
    assert gets, "between the sockets the cards were not polled or re-read"


def test_a_message_older_than_the_card_shows_is_dropped(page, runner):
    """Two senders may deliver a job's changes out of order: `sequence` orders them."""
    sockets = []

    def relay(ws):
        server = ws.connect_to_server()
        sockets.append(ws)
        server.on_message(lambda message: ws.send(message))

    page.route_web_socket(PUSH, relay)
    open_page(page, runner)
    page.wait_for_selector("body[data-push=open]")
    pick(page, ("late.jpg", "image/jpeg", landscape(300, 200)))
    job = card(page, "late.jpg")
    expect(job).to_have_attribute("data-status", "ready", timeout=READY_TIMEOUT)
    job_id = job.get_attribute("data-job-id")
    sockets[0].send(json.dumps({"type": "job", "etag": 'W/"old"', "sequence": 1,
                                "job": {"job_id": job_id, "status": "queued"}}))
    sockets[0].send(json.dumps({"type": "unknown-type", "job": {"job_id": job_id, "status": "failed"}}))
    page.wait_for_timeout(500)
    expect(job).to_have_attribute("data-status", "ready")
