"""The page at the local runner's web port, in headless chromium: photos in, jobs watched,
cancel, delete, errors, the polling schedule, and CORS on the way (page, API and storage are
three origins)."""
from __future__ import annotations

import base64
import hashlib
import time
from urllib.parse import parse_qs, urlsplit

import requests
from playwright.sync_api import expect

from chalicelib.config import Settings
from chalicelib.http import problems
from chalicelib.http.auth import mint_token
from tests.browser.photos import landscape, large_landscape

SETTINGS = Settings()
READY_TIMEOUT = 60_000
# A multipart upload's parts (8 MiB each) go through the browser and the moto server: on a
# loaded 2-core CI machine one took over 120 s (still awaiting_upload); well under pytest's 300.
PARTS_TIMEOUT = 240_000


REAL_SIZE = ("img => new Promise(done => { const copy = new Image(); copy.onload = () => done([copy.naturalWidth, copy.naturalHeight]); copy.src = img.currentSrc; })")


def open_page(page, runner):
    page.goto(runner.web)
    page.wait_for_selector("body[data-ready=true]")
    return page


def pick(page, *files):
    page.set_input_files("#files", files=[
        {"name": name, "mimeType": mime, "buffer": data} for name, mime, data in files
    ])


def card(page, name):
    return page.locator("li.job", has=page.locator(".name", has_text=name))


def without_push(page, runner):
    """For the tests of polling: GET /push says this service has none (tests/browser/test_push.py
    has the page with push)."""
    page.route(f"{runner.api}/api/v1/push", lambda route: route.fulfill(
        status=200, json={"url": None, "protocols": ["image-jobs.v1", "bearer.<token>"]},
        headers={"Access-Control-Allow-Origin": "*", "Cache-Control": "no-store"}))


def owner_headers(page):
    """The bearer of the page's owner (the browser conftest gives each test its own)."""
    return {"Authorization": f"Bearer {mint_token(page.owner, SETTINGS.jwt_secret, 600, int(time.time()))}"}


def api_get(page, runner, job_id):
    """The job as the page's owner sees it."""
    return requests.get(f"{runner.api}/api/v1/image-jobs/{job_id}", timeout=10, headers=owner_headers(page))


def test_two_photos_become_ready_with_their_thumbnails_rendered(page, runner, artifacts):
    origins = {urlsplit(url).netloc for url in (runner.web, runner.api, runner.aws)}
    assert len(origins) == 3  # so the browser really checks CORS on the API and the bucket
    requests_seen, console_errors, direct_bodies = [], [], []
    page.on("request", lambda r: requests_seen.append((r.method, r.url)))
    page.on("request", lambda r: r.url.endswith("/api/v1/uploads") and direct_bodies.append(r.post_data_json))
    page.on("console", lambda m: m.type == "error" and console_errors.append(m.text))
    open_page(page, runner)
    expect(page.locator("#who")).to_contain_text("Local mode")
    large = large_landscape(SETTINGS.max_upload_bytes)
    pick(page, ("sunset.jpg", "image/jpeg", landscape(1600, 1200)),
         ("dusk-large.jpg", "image/jpeg", large))

    for name in ("sunset.jpg", "dusk-large.jpg"):
        job = card(page, name)
        expect(job).to_have_attribute("data-status", "ready", timeout=READY_TIMEOUT)
        thumb = job.locator(".thumb img")
        expect(thumb).to_be_visible()
        page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=thumb.element_handle())
        # The srcset's choice (256 or 512 px by the screen's density), at its own size.
        width, height = thumb.evaluate(REAL_SIZE)
        assert width == height and width in (256, 512)
        link = job.locator("a.display")
        expect(link).to_have_text("Display size 1280×960")
        assert link.get_attribute("href").startswith(runner.aws)
        expect(job.locator(".elapsed")).to_contain_text("s")
        expect(job.locator(".cancel")).to_be_disabled()
    # The small photo went through the API, the large one straight to storage by one PUT.
    posts = [urlsplit(url) for method, url in requests_seen if method == "POST"]
    assert sum(p.path == "/api/v1/images" for p in posts) == 1
    assert sum(p.path == "/api/v1/uploads" for p in posts) == 1
    assert sum(f"{p.scheme}://{p.netloc}" == runner.aws for p in posts) == 0
    puts = [urlsplit(url) for method, url in requests_seen if method == "PUT"]
    assert [f"{p.scheme}://{p.netloc}" for p in puts] == [runner.aws]
    # Both ask for the stage's extra formats (config.json's "formats": RENDITION_FORMATS).
    assert [p.query for p in posts if p.path == "/api/v1/images"] == ["formats=webp,avif"]
    assert [body["formats"] for body in direct_bodies] == [["webp", "avif"]]
    # No CORS refusal anywhere (a blocked header or request is logged as a console error).
    assert console_errors == []
    page.screenshot(path=str(artifacts / "two-photos-ready.png"))


def test_a_bad_file_shows_the_problems_title_and_a_failed_job_its_error(page, runner, artifacts):
    open_page(page, runner)
    broken = landscape(800, 600)[:3000]  # a JPEG header, then nothing: the worker fails it
    pick(page, ("notes.txt", "text/plain", b"these are not pixels"),
         ("broken.jpg", "image/jpeg", broken))

    bad = card(page, "notes.txt")
    expect(bad).to_have_attribute("data-status", "error")
    expect(bad.locator(".error .title")).to_have_text(problems.message_of("unsupported_format"))
    failed = card(page, "broken.jpg")
    expect(failed).to_have_attribute("data-status", "failed", timeout=READY_TIMEOUT)
    expect(failed.locator(".error .title")).to_have_text(problems.message_of("invalid_image"))
    expect(failed.locator(".error .detail")).to_have_text("invalid_image")
    page.screenshot(path=str(artifacts / "errors.png"))


def test_cancel_while_the_large_photo_is_still_on_its_way_to_storage(page, runner, artifacts):
    """Deterministic: the browser holds the upload to storage (the route is never answered)
    until the test lets it go, so the job is surely in flight when Cancel is pressed."""
    held = []

    def hold(route):
        if route.request.method != "PUT":
            return route.fallback()
        held.append(route)  # answered below, after the cancel

    page.route(f"{runner.aws}/**", hold)
    open_page(page, runner)
    pick(page, ("dusk-large.jpg", "image/jpeg", large_landscape(SETTINGS.max_upload_bytes)))
    job = card(page, "dusk-large.jpg")
    expect(job).to_have_attribute("data-status", "awaiting_upload")
    expect(job.locator(".status")).to_have_text("awaiting upload")
    for _ in range(100):
        if held:
            break
        page.wait_for_timeout(100)
    assert held, "the upload to storage never started"
    job_id = job.get_attribute("data-job-id")
    assert api_get(page, runner, job_id).json()["status"] == "awaiting_upload"

    job.locator(".cancel").click()
    expect(job).to_have_attribute("data-status", "cancelled")
    expect(job.locator(".cancel")).to_be_disabled()
    answer = api_get(page, runner, job_id).json()
    assert answer["status"] == "cancelled" and "finished_at" in answer
    page.screenshot(path=str(artifacts / "cancelled.png"))
    for route in held:
        try:
            route.abort()
        except Exception:
            pass  # the page already dropped it when Cancel stopped the upload


def test_polls_are_held_and_a_server_that_does_not_hold_gets_the_contracts_schedule(page, runner):
    """The first poll goes at once, asking to be held (Prefer: wait); answered without
    Preference-Applied, the page falls back to the schedule: 3, 5, ... s with ±20 % jitter,
    and never less than a Retry-After the server sends (here, once, 6 s)."""
    polls, prefers, fake = [], [], [("6", "processing"), ("2", "processing")]

    def answer(route):
        if route.request.method != "GET":
            return route.fallback()
        polls.append(time.monotonic())
        prefers.append(route.request.headers.get("prefer"))
        if not fake:
            return route.fallback()  # the real job: the real server holds this one until ready
        retry_after, status = fake.pop(0)
        job_id = route.request.url.rsplit("/", 1)[1]
        route.fulfill(status=200, json={"job_id": job_id, "status": status}, headers={
            "Retry-After": retry_after, "Access-Control-Allow-Origin": "*",
            "Access-Control-Expose-Headers": "Location,Retry-After,ETag,Preference-Applied"})

    page.route(f"{runner.api}/api/v1/image-jobs/*", answer)
    without_push(page, runner)
    open_page(page, runner)
    accepted = []
    page.on("response", lambda r: urlsplit(r.url).path == "/api/v1/images" and accepted.append(time.monotonic()))
    pick(page, ("sunset.jpg", "image/jpeg", landscape(640, 480)))
    job = card(page, "sunset.jpg")
    expect(job).to_have_attribute("data-status", "ready", timeout=READY_TIMEOUT)

    assert len(polls) == 3, polls
    assert prefers == ["wait=20"] * 3
    waits = [polls[0] - accepted[0], polls[1] - polls[0], polls[2] - polls[1]]
    slack = 0.5  # the browser's timers and the route's round trip
    assert waits[0] <= slack, waits  # held polls need no Retry-After first
    assert 6.0 - 0.05 <= waits[1] <= 6 + slack, waits  # 3 s ± 20 % was due; Retry-After 6 wins
    assert 5 * 0.8 - 0.05 <= waits[2] <= 5 * 1.2 + slack, waits


def test_the_page_holds_at_most_four_polls_at_once_and_learns_at_once(page, runner):
    """Six photos: at most four held polls are open at once (a browser has six connections
    per origin over HTTP/1.1), and every photo still ends ready."""
    without_push(page, runner)
    open_page(page, runner)
    held, peak = set(), [0]

    def sent(request):
        if request.method == "GET" and "/image-jobs/" in request.url and request.headers.get("prefer"):
            held.add(request)
            peak[0] = max(peak[0], len(held))

    page.on("request", sent)
    page.on("requestfinished", lambda r: held.discard(r))
    page.on("requestfailed", lambda r: held.discard(r))
    names = [f"p{i}.jpg" for i in range(6)]
    pick(page, *[(name, "image/jpeg", landscape(640 + i, 480)) for i, name in enumerate(names)])
    for name in names:
        expect(card(page, name)).to_have_attribute("data-status", "ready", timeout=READY_TIMEOUT)
    assert 1 <= peak[0] <= 4, peak


def test_jobs_outlive_a_reload_and_delete_removes_them(page, runner, artifacts):
    open_page(page, runner)
    pick(page, ("keep.jpg", "image/jpeg", landscape(900, 600, sky=(120, 200, 255), seed=7)))
    job = card(page, "keep.jpg")
    expect(job).to_have_attribute("data-status", "ready", timeout=READY_TIMEOUT)
    job_id = job.get_attribute("data-job-id")

    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    job = card(page, "keep.jpg")
    expect(job).to_have_attribute("data-status", "ready")
    expect(job.locator(".thumb img")).to_be_visible()

    # Readable on a phone: nothing wider than the screen.
    page.set_viewport_size({"width": 375, "height": 720})
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    page.screenshot(path=str(artifacts / "phone.png"))

    job.locator(".delete").click()
    expect(job).to_have_count(0)
    assert api_get(page, runner, job_id).status_code == 404
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    expect(card(page, "keep.jpg")).to_have_count(0)


def test_a_photo_over_the_api_limit_goes_by_one_put_pinned_to_its_checksum(page, runner):
    bodies = []
    page.on("request", lambda r: r.url.endswith("/api/v1/uploads") and r.method == "POST"
            and bodies.append(r.post_data_json))
    open_page(page, runner)
    large = large_landscape(SETTINGS.max_upload_bytes)
    pick(page, ("dusk-large.jpg", "image/jpeg", large))
    expect(card(page, "dusk-large.jpg")).to_have_attribute("data-status", "ready", timeout=READY_TIMEOUT)
    (body,) = bodies
    assert body["method"] == "PUT" and body["size"] == len(large)
    assert base64.b64decode(body["sha256"]) == hashlib.sha256(large).digest()


def test_a_photo_over_the_multipart_threshold_goes_in_parts_a_few_at_a_time(page, runner, tmp_path):
    """40 MB: five parts of 8 MiB but the last, at most four in flight, progress as they go,
    then the completion with every part's ETag (the bucket's CORS exposes it)."""
    from tests.e2e.test_upload_methods import padded_jpeg

    size, part = 40_000_000, SETTINGS.multipart_part_bytes
    photo = tmp_path / "panorama.jpg"
    photo.write_bytes(padded_jpeg(size))
    created, parts, completions, flying, peak = [], [], [], set(), [0]

    def sent(request):
        if request.url.endswith("/api/v1/uploads") and request.method == "POST":
            created.append(request.post_data_json)
        elif request.method == "PUT" and request.url.startswith(runner.aws):
            parts.append(request.url)
            flying.add(request)
            peak[0] = max(peak[0], len(flying))
        elif request.method == "POST" and request.url.endswith("/upload"):
            completions.append(request.post_data_json)

    page.on("request", sent)
    page.on("requestfinished", lambda r: flying.discard(r))
    page.on("requestfailed", lambda r: flying.discard(r))
    open_page(page, runner)
    page.set_input_files("#files", files=[str(photo)])
    job = card(page, "panorama.jpg")
    progress = job.locator("progress")
    page.wait_for_function("p => p.value > 0 && p.value < 1", arg=progress.element_handle())
    expect(job).to_have_attribute("data-status", "ready", timeout=PARTS_TIMEOUT)

    assert [body["method"] for body in created] == ["multipart"]
    numbers = sorted(int(parse_qs(urlsplit(url).query)["partNumber"][0]) for url in parts)
    assert numbers == [1, 2, 3, 4, 5] and -(-size // part) == 5
    assert 2 <= peak[0] <= 4, peak
    (completion,) = completions
    assert [p["part_number"] for p in completion["parts"]] == [1, 2, 3, 4, 5]
    assert all(p["etag"] for p in completion["parts"])
    job_id = job.get_attribute("data-job-id")
    assert api_get(page, runner, job_id).json()["status"] == "ready"


def test_parts_complete_without_etags_and_an_expired_part_url_is_renewed(page, runner, tmp_path):
    """Storage that hides ETag (no ExposeHeaders): the page completes with an empty body and
    the server lists the parts. A part URL storage refuses (403, as an expired one is): the
    page asks GET .../upload for a fresh one, once, and the job still ends ready."""
    from tests.e2e.test_upload_methods import padded_jpeg

    photo = tmp_path / "wide.jpg"
    photo.write_bytes(padded_jpeg(17 * 1024 * 1024))  # 3 parts: 8, 8 and 1 MiB
    refused, renewed, completions = [], [], []

    def storage(route):
        request = route.request
        if request.method != "PUT":
            return route.fallback()
        number = parse_qs(urlsplit(request.url).query)["partNumber"][0]
        if number == "2" and not refused:
            refused.append(request.url)
            return route.fulfill(status=403, content_type="application/xml", headers={
                "Access-Control-Allow-Origin": "*"},
                body="<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>")
        answer = route.fetch()
        hidden = {k: v for k, v in answer.headers.items() if k.lower() != "access-control-expose-headers"}
        route.fulfill(response=answer, headers=hidden)

    def sent(request):
        if request.method == "GET" and request.url.endswith("/upload"):
            renewed.append(request.url)
        elif request.method == "POST" and request.url.endswith("/upload"):
            completions.append(request.post_data)

    page.route(f"{runner.aws}/**", storage)
    page.on("request", sent)
    open_page(page, runner)
    page.set_input_files("#files", files=[str(photo)])
    job = card(page, "wide.jpg")
    expect(job).to_have_attribute("data-status", "ready", timeout=PARTS_TIMEOUT)
    assert len(refused) == 1 and len(renewed) == 1
    assert completions == [None]  # no body: the server took the parts storage holds


def test_a_job_the_list_finds_while_its_photo_uploads_is_shown_once(page, runner):
    """The list (GET /image-jobs, read as the page opens) answered after the upload made the
    job but before the page learned it: two cards of one job, one never updated, until the
    card uploading it took the job over (seen in a full run, with a 17 MB multipart upload)."""
    created, lists = [], []
    # Only the first of each is held: on a loaded machine the page's POST can time out while
    # held and be sent again, and a re-send held too left the card uploading for good.
    page.route(f"{runner.api}/api/v1/image-jobs?*",
               lambda route: route.fallback() if lists else lists.append(route))
    page.route(f"{runner.api}/api/v1/images*",
               lambda route: route.fallback() if created else created.append((route, route.fetch())))
    open_page(page, runner)
    pick(page, ("solo.jpg", "image/jpeg", landscape(800, 600, seed=5)))
    deadline = time.monotonic() + 30
    while not (created and lists) and time.monotonic() < deadline:
        page.wait_for_timeout(50)
    assert created and lists, (created, lists)
    lists[0].fallback()  # the list now holds the job the page does not know yet
    expect(page.locator("#jobs")).to_have_attribute("data-listed", "true")
    job = card(page, "solo.jpg")
    expect(job).to_have_count(2)  # the listed card beside the uploading one
    route, answer = created[0]
    route.fulfill(response=answer)  # and now the page learns it
    # One card first: until the page has read the answer both are there, and an expect on a
    # locator matching two fails at once (a strict mode violation is never retried).
    expect(job).to_have_count(1)
    expect(job).to_have_attribute("data-job-id", answer.json()["job_id"])
    expect(job).to_have_attribute("data-status", "ready", timeout=READY_TIMEOUT)


def test_another_browser_lists_the_owners_jobs_from_the_api_with_their_names(page, runner):
    """What the page did not save itself (another browser's, the phone's, cleared storage)
    comes from GET /image-jobs, newest first; a name beyond ASCII travels in the
    Image-Jobs-Metadata header as JSON escapes and comes back as given."""
    open_page(page, runner)
    pick(page, ("été à Paris.jpg", "image/jpeg", landscape(800, 600, seed=3)))
    mine = card(page, "été à Paris.jpg")
    expect(mine).to_have_attribute("data-status", "ready", timeout=READY_TIMEOUT)
    mine_id = mine.get_attribute("data-job-id")
    assert api_get(page, runner, mine_id).json()["metadata"] == {"name": "été à Paris.jpg"}
    # A job the page never saw: made by the same owner from elsewhere, still unfinished.
    held = requests.post(f"{runner.api}/api/v1/uploads", timeout=10, headers=owner_headers(page),
                         json={"content_type": "image/jpeg", "size": 1234, "metadata": {"name": "phone.jpg"}})
    assert held.status_code == 202, held.text

    page.evaluate("localStorage.clear()")  # as another browser: nothing saved
    page.reload()
    page.wait_for_selector("#jobs[data-listed=true]")
    assert page.locator("li.job .name").all_inner_texts() == ["phone.jpg", "été à Paris.jpg"]
    expect(card(page, "phone.jpg")).to_have_attribute("data-status", "awaiting_upload")
    listed = card(page, "été à Paris.jpg")
    expect(listed).to_have_attribute("data-status", "ready")
    expect(listed).to_have_attribute("data-job-id", mine_id)
    expect(listed.locator(".thumb img")).to_be_visible()


# Every value the page's progress bars are given, in order (the card sets it in onProgress).
RECORD_PROGRESS = """
window.__progress = [];
const value = Object.getOwnPropertyDescriptor(HTMLProgressElement.prototype, "value");
Object.defineProperty(HTMLProgressElement.prototype, "value", {
  get() { return value.get.call(this); },
  set(v) { window.__progress.push(v); value.set.call(this, v); },
});
"""


def test_a_photo_on_its_way_to_storage_shows_its_progress_by_the_byte(page, runner):
    """fetch cannot tell how much of a request body has gone: the package sends the file by
    XMLHttpRequest and follows its upload.onprogress. The uplink is held to 2 MiB/s (Chrome's
    network emulation) so that the browser has time to tell."""
    page.add_init_script(RECORD_PROGRESS)
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send("Network.emulateNetworkConditions", {"offline": False, "latency": 0, "downloadThroughput": -1,
                                                  "uploadThroughput": 2 * 1024 * 1024})
    open_page(page, runner)
    large = large_landscape(SETTINGS.max_upload_bytes)
    pick(page, ("dusk-slow.jpg", "image/jpeg", large))
    expect(card(page, "dusk-slow.jpg")).to_have_attribute("data-status", "ready", timeout=READY_TIMEOUT)
    values = page.evaluate("window.__progress")
    between = [v for v in values if 0 < v < 1]
    assert len(between) >= 10, values
    assert between == sorted(between) and values[-1] == 1, values
