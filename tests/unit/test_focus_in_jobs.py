"""The focus (issue 49) on the API's side: the client's focus parsed or refused (400
invalid_request), the window of a square rendition around a focus, the squares placed by it
in upright coordinates (an EXIF-rotated photo), the focus in the idempotency fingerprint and
the duplicate key, and the focus a ready job shows. The detector itself is
chalicelib/imaging/focus.py's (its own tests)."""
from __future__ import annotations

import io
import json
import math
import time
from decimal import Decimal
from datetime import datetime, timezone

import pytest
from chalice.test import Client
from hypothesis import given, strategies as st
from PIL import Image

import app as application
from chalicelib.config import Settings
from chalicelib.domain.errors import IdempotencyKeyReused, InvalidRequest
from chalicelib.domain.events import ObjectCreated
from chalicelib.domain.focus import (
    CENTRE, Focus, FocusSource, focus_at, parse_object, parse_query, square_window,
)
from chalicelib.domain.renditions import Fit, RenditionName, RenditionSpec
from chalicelib.http.auth import mint_token
from chalicelib.http.views import job_body
from chalicelib.imaging import focus, render
from chalicelib.usecases import UseCases, duplicates
from chalicelib.usecases.worker import Worker
from tests.fakes import Clock, FakeJobStore, FakeObjectStore, FakeQueue, fake_context
from tests.images import photo, unique

START = datetime(2026, 7, 15, 10, 0, tzinfo=timezone.utc)


def at(x, y):
    return Focus(x, y, FocusSource.CLIENT)


# ------------------------------------------------------------------------------ the window


@pytest.mark.parametrize("size, focus, window", [
    # Landscape: the whole height, slid along the width.
    ((400, 200), at(0.5, 0.5), (100, 0, 300, 200)),
    ((400, 200), at(0.25, 0.9), (0, 0, 200, 200)),    # clamped at the left edge
    ((400, 200), at(0.6, 0.5), (140, 0, 340, 200)),   # focus at the square's centre: 240
    ((400, 200), at(0.0, 0.0), (0, 0, 200, 200)),
    ((400, 200), at(1.0, 1.0), (200, 0, 400, 200)),   # clamped at the right edge
    # Portrait: the whole width, slid along the height.
    ((300, 900), at(0.5, 0.2), (0, 30, 300, 330)),
    ((300, 900), at(0.9, 0.1), (0, 0, 300, 300)),     # the head in the top tenth: kept
    ((300, 900), at(0.5, 1.0), (0, 600, 300, 900)),
    ((300, 900), at(0.5, 0.0), (0, 0, 300, 300)),
    # Square: all of it, wherever the focus.
    ((500, 500), at(0.0, 1.0), (0, 0, 500, 500)),
    ((500, 500), at(0.3, 0.7), (0, 0, 500, 500)),
    # The centre is the centre crop of before.
    ((640, 480), CENTRE, (80, 0, 560, 480)),
])
def test_the_square_keeps_the_short_side_and_slides_to_the_focus_clamped_at_the_edges(size, focus, window):
    assert square_window(*size, focus) == pytest.approx(window)


@given(st.integers(1, 5000), st.integers(1, 5000), st.floats(0, 1), st.floats(0, 1))
def test_the_window_is_a_square_inside_the_image_with_the_focus_as_near_its_centre_as_can_be(w, h, x, y):
    left, top, right, bottom = square_window(w, h, at(x, y))
    side = min(w, h)
    assert right - left == pytest.approx(side) and bottom - top == pytest.approx(side)
    assert 0 <= left <= w - side and 0 <= top <= h - side
    for start, length, point in ((left, w, x * w), (top, h, y * h)):
        centre = start + side / 2
        if length == side:  # no room to slide: all of that side
            assert start == 0
        elif 0 < start < length - side:  # not clamped: centred exactly
            assert centre == pytest.approx(point)
        elif start == 0:
            assert point <= centre + 1e-9
        else:
            assert point >= centre - 1e-9


# ------------------------------------------------------------------------ the client's focus


@pytest.mark.parametrize("text, expected", [
    ("0.31,0.22", (0.31, 0.22)), ("0,1", (0.0, 1.0)), ("1,0", (1.0, 0.0)), (" 0.5 , 0.5 ", (0.5, 0.5)),
    ("1.000,0.0", (1.0, 0.0)), ("\t0.5,0.5\n", (0.5, 0.5)), ("0.123456,0.98765", (0.1235, 0.9877)),
])
def test_focus_x_y_in_the_query_is_the_clients_focus_rounded_to_four_places(text, expected):
    assert parse_query(text) == Focus(*expected, FocusSource.CLIENT)


@pytest.mark.parametrize("text", [
    "", "0.5", "0.5,", ",0.5", "0.5,0.5,0.5", "1.5,0.5", "0.5,-0.1", "-1,0", "nan,0.5", "0.5,inf",
    "NaN,NaN", "infinity,0", "x,y", "0.5;0.5", "0.5 0.5", "+0.5,0.5", ".5,.5", "1_0,0", "0x1,0",
    "true,false", "[0.5,0.5]", '{"x":0.5,"y":0.5}', "0.5,0.5\n0", "１,0", "5e-1,0.5", "0.5,1E0",
    "-0,0", "1.0001,0", "01,0", "0.,0", "0.5\t,0.5",
])
def test_anything_but_two_fractions_in_the_query_is_invalid_request(text):
    with pytest.raises(InvalidRequest) as refused:
        parse_query(text)
    assert "focus" in refused.value.detail and "0..1" in refused.value.detail


@pytest.mark.parametrize("value", [
    None, "0.5,0.5", [0.5, 0.5], 0.5, {}, {"x": 0.5}, {"y": 0.5}, {"x": 0.5, "y": 0.5, "z": 0},
    {"x": 0.5, "y": 0.5, "source": "client"}, {"x": True, "y": 0.5}, {"x": 0.5, "y": False},
    {"x": "0.5", "y": 0.5}, {"x": None, "y": 0.5}, {"x": 1.0001, "y": 0.5}, {"x": 0.5, "y": -0.0001},
    {"x": math.nan, "y": 0.5}, {"x": 0.5, "y": math.inf}, {"x": -math.inf, "y": 0}, {"x": 2, "y": 0},
    {"x": [0.5], "y": 0.5}, {"x": {"v": 0.5}, "y": 0.5},
])
def test_anything_but_an_object_of_two_fractions_in_the_body_is_invalid_request(value):
    with pytest.raises(InvalidRequest) as refused:
        parse_object(value)
    assert "focus" in refused.value.detail


@given(st.floats(0, 1), st.floats(0, 1))
def test_every_point_of_the_image_is_a_focus_and_the_query_and_the_body_agree(x, y):
    text = f"{Decimal(x):f},{Decimal(y):f}"  # exactly x and y, in plain decimals
    assert parse_object({"x": x, "y": y}) == parse_query(text) == focus_at(x, y, FocusSource.CLIENT)


@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True).filter(lambda v: not 0 <= v <= 1),
                 st.text(max_size=8), st.booleans(), st.none(), st.lists(st.floats(0, 1), max_size=2)))
def test_a_value_that_is_no_fraction_is_refused_in_either_member(bad):
    for value in ({"x": bad, "y": 0.5}, {"x": 0.5, "y": bad}):
        with pytest.raises(InvalidRequest):
            parse_object(value)


@given(st.text(max_size=20))
def test_the_query_never_answers_anything_but_a_focus_or_invalid_request(text):
    try:
        focus = parse_query(text)
    except InvalidRequest:
        return
    assert 0 <= focus.x <= 1 and 0 <= focus.y <= 1 and focus.source is FocusSource.CLIENT


def test_a_found_focus_is_kept_clamped_and_rounded_as_the_clients():
    assert focus_at(0.123449, 1.2, FocusSource.FACES) == Focus(0.1234, 1.0, FocusSource.FACES)
    assert focus_at(-0.0, -3, FocusSource.SALIENCY) == Focus(0.0, 0.0, FocusSource.SALIENCY)
    assert str(focus_at(-0.0, 0, "centre").x) == "0.0"


# ---------------------------------------------------------------------- squares in the child


BANDS = ((220, 30, 30), (30, 200, 30), (30, 30, 220))  # red, green, blue from the top, upright


def upright_bands(width=200, height=600) -> Image.Image:
    im = Image.new("RGB", (width, height))
    for i, colour in enumerate(BANDS):
        im.paste(colour, (0, i * height // 3, width, (i + 1) * height // 3))
    return im


def jpeg_of(im: Image.Image, **save) -> bytes:
    out = io.BytesIO()
    im.save(out, "JPEG", quality=95, **save)
    return out.getvalue()


def colour_of(data: bytes) -> int:
    """Which band a square shows most: 0 red, 1 green, 2 blue."""
    with Image.open(io.BytesIO(data)) as im:
        r, g, b = im.convert("RGB").resize((1, 1), Image.Resampling.BOX).getpixel((0, 0))
    return max(range(3), key=lambda i: (r, g, b)[i])


THUMB = (RenditionSpec(RenditionName.DISPLAY, Fit.CONTAIN, 600), RenditionSpec(RenditionName.THUMB, Fit.COVER, 64))


@pytest.mark.parametrize("y, band", [(0.0, 0), (0.5, 1), (1.0, 2), (0.1, 0), (0.9, 2)])
def test_an_exif_rotated_photos_square_is_placed_by_the_clients_focus_in_upright_coordinates(y, band):
    exif = Image.Exif()
    exif[0x0112] = 6  # stored landscape, shown turned 90° clockwise: upright it is portrait
    stored = upright_bands().transpose(Image.Transpose.ROTATE_90)
    assert stored.size == (600, 200)
    rendered = render.make_images(jpeg_of(stored, exif=exif.tobytes()), 10_000_000, THUMB, focus=at(0.5, y))
    assert rendered.focus == at(0.5, y)
    assert colour_of(rendered.renditions[RenditionName.THUMB].data) == band
    display = rendered.renditions[RenditionName.DISPLAY]
    assert (display.width, display.height) == (200, 600)  # display renditions are unchanged


def test_without_a_clients_focus_the_child_finds_one_on_the_decoded_upright_picture(monkeypatch):
    seen = []

    def find(image):
        seen.append(image.size)
        return Focus(0.5, 0.987654, FocusSource.FACES)

    monkeypatch.setattr(focus, "find", find)
    exif = Image.Exif()
    exif[0x0112] = 6
    data = jpeg_of(upright_bands().transpose(Image.Transpose.ROTATE_90), exif=exif.tobytes())
    rendered = render.make_images(data, 10_000_000, THUMB)
    # Once, upright, on the focus's small copy of the largest rendition's pixels (200x600):
    # no second decode.
    assert seen == [focus.small(Image.new("RGB", (200, 600))).size] == [(64, 192)]
    assert rendered.focus == Focus(0.5, 0.9877, FocusSource.FACES)
    assert colour_of(rendered.renditions[RenditionName.THUMB].data) == 2


# ------------------------------------------------------------ the job: fingerprint, duplicates


@pytest.fixture
def use_cases():
    clock = Clock(START)
    settings = Settings(bucket="images", max_upload_bytes=2_000_000)
    queue = FakeQueue(clock)
    return UseCases(fake_context(settings=settings, jobs=FakeJobStore(), objects=FakeObjectStore(clock),
                                 publisher=queue, backlog=queue, clock=clock))


def made(use_cases, owner="alice", data=None, **asked):
    job = use_cases.uploads.accept_upload(owner, data or photo(), **asked).job
    event = ObjectCreated("images", job.original_key, 0, "e")
    assert use_cases.worker.handle_object_created(event) == "ready"
    return use_cases.ctx.jobs.items[job.job_id]


def test_the_clients_focus_is_part_of_the_fingerprint_however_it_is_spelt(use_cases):
    first = use_cases.uploads.accept_upload("alice", photo(), "key-1", focus=parse_query("0.5,0.25")).job
    again = use_cases.uploads.accept_upload("alice", photo(), "key-1", focus=parse_query("0.50,0.2500"))
    assert again.replayed and again.job.job_id == first.job_id
    for other in (parse_query("0.5,0.26"), None):
        with pytest.raises(IdempotencyKeyReused):
            use_cases.uploads.accept_upload("alice", photo(), "key-1", focus=other)
    use_cases.uploads.accept_upload("alice", photo(), "key-2")
    with pytest.raises(IdempotencyKeyReused):
        use_cases.uploads.accept_upload("alice", photo(), "key-2", focus=at(0.5, 0.5))
    direct = use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", 1000, "key-3",
                                                           focus=parse_object({"x": 0, "y": 1})).job
    assert direct.focus == at(0.0, 1.0)
    assert use_cases.direct_uploads.create_direct_upload(
        "alice", "image/jpeg", 1000, "key-3", focus=parse_object({"x": 0.0, "y": 1})).job.job_id == direct.job_id
    with pytest.raises(IdempotencyKeyReused):
        use_cases.direct_uploads.create_direct_upload("alice", "image/jpeg", 1000, "key-3")


def test_a_fingerprint_without_a_focus_is_what_it_was_before_the_focus():
    from chalicelib.usecases.idempotency import fingerprint_of
    assert fingerprint_of(b"images", b"bytes") == fingerprint_of(b"images", b"bytes", focus=None)
    assert fingerprint_of(b"images", b"bytes") != fingerprint_of(b"images", b"bytes", focus=CENTRE)


def test_a_ready_job_keeps_the_clients_focus_and_shows_it(use_cases):
    job = made(use_cases, focus=parse_query("0.31,0.22"))
    assert job.focus == at(0.31, 0.22)
    body = job_body(job, use_cases.manage.urls(job))
    assert body["focus"] == {"x": 0.31, "y": 0.22, "source": "client"}


def test_without_a_clients_focus_a_ready_job_shows_the_one_found_and_no_job_before_ready_shows_one(use_cases):
    job = use_cases.uploads.accept_upload("alice", photo()).job
    assert "focus" not in job_body(job, None)
    queued_with = use_cases.uploads.accept_upload("alice", unique(photo(), "1"), focus=at(0.1, 0.2)).job
    assert "focus" not in job_body(queued_with, None)  # the client's, kept, shown once ready
    ready = made(use_cases, data=unique(photo(), "2"))
    shown = job_body(ready, use_cases.manage.urls(ready))["focus"]
    assert set(shown) == {"x", "y", "source"} and 0 <= shown["x"] <= 1 and 0 <= shown["y"] <= 1
    assert shown["source"] in {"faces", "saliency", "centre"}  # found, whichever way


def test_the_same_bytes_with_another_clients_focus_are_no_duplicate(use_cases):
    first = made(use_cases, focus=at(0.2, 0.2))
    use_cases.ctx.clock.advance(60)
    other = made(use_cases, focus=at(0.8, 0.8))
    found = made(use_cases)
    same = made(use_cases, focus=parse_query("0.20,0.2"))
    again = made(use_cases)
    assert other.duplicate_of is None and found.duplicate_of is None
    assert same.duplicate_of == first.job_id and same.focus == first.focus
    assert again.duplicate_of == found.job_id and again.focus == found.focus


def test_the_duplicate_key_names_the_clients_focus_and_how_squares_are_placed(use_cases):
    ctx = use_cases.ctx
    data = photo()
    keys = {duplicates.content_of(ctx, data), duplicates.content_of(ctx, data, at(0.2, 0.2)),
            duplicates.content_of(ctx, data, at(0.2, 0.3))}
    assert len(keys) == 3
    assert duplicates.content_of(ctx, data, at(0.2, 0.2)) == duplicates.content_of(ctx, data, parse_query("0.2000,0.20"))


def test_a_job_made_before_the_focus_is_never_copied_for_a_new_one(use_cases, monkeypatch):
    old = made(use_cases)  # keyed by the recipe of before: centre crops
    monkeypatch.setattr(duplicates, "SQUARES", "a new placing")
    new = made(use_cases)
    assert new.duplicate_of is None and old.job_id != new.job_id


# --------------------------------------------------------------------------------- HTTP edge


@pytest.fixture
def client(monkeypatch):
    service = UseCases(fake_context(settings=application.settings, jobs=FakeJobStore(), objects=FakeObjectStore(),
                                    clock=Clock(datetime.now(timezone.utc))))
    monkeypatch.setattr(application, "use_cases", lambda: service)
    with Client(application.app) as c:
        yield c, service


def auth(owner="alice"):
    return {"Authorization": f"Bearer {mint_token(owner, application.settings.jwt_secret, 300, int(time.time()))}"}


def test_post_images_takes_focus_and_refuses_a_bad_one_with_400(client):
    c, service = client
    headers = {**auth(), "Content-Type": "image/jpeg"}
    r = c.http.post("/api/v1/images?focus=0.31,0.22", headers=headers, body=photo())
    assert r.status_code == 202
    assert service.ctx.jobs.items[json.loads(r.body)["job_id"]].focus == at(0.31, 0.22)
    for bad in ("1.2,0.5", "0.5", "nan,0.5", "a,b", "0.5,0.5&focus=0.5,0.5"):
        r = c.http.post(f"/api/v1/images?focus={bad}", headers=headers, body=photo())
        assert r.status_code == 400 and json.loads(r.body)["code"] == "invalid_request", bad


def test_post_uploads_takes_focus_and_refuses_a_bad_one_with_400(client):
    c, service = client
    headers = {**auth(), "Content-Type": "application/json"}
    body = {"content_type": "image/jpeg", "size": 1000}
    r = c.http.post("/api/v1/uploads", headers=headers, body=json.dumps({**body, "focus": {"x": 0, "y": 0.75}}))
    assert r.status_code == 202
    assert service.ctx.jobs.items[json.loads(r.body)["job_id"]].focus == at(0.0, 0.75)
    for bad in ('null', '"0.5,0.5"', '{"x": 0.5}', '{"x": 0.5, "y": 0.5, "z": 1}', '{"x": true, "y": 0}',
                '{"x": NaN, "y": 0}', '{"x": 1e999, "y": 0}', '{"x": 0.5, "y": 1.01}'):
        r = c.http.post("/api/v1/uploads", headers=headers,
                        body=json.dumps(body)[:-1] + f', "focus": {bad}}}')
        assert r.status_code == 400 and json.loads(r.body)["code"] == "invalid_request", bad


def test_the_focus_goes_into_the_decoding_child_and_comes_back_with_the_renditions():
    from chalicelib.imaging.sandbox import run_limited

    exif = Image.Exif()
    exif[0x0112] = 6
    data = jpeg_of(upright_bands().transpose(Image.Transpose.ROTATE_90), exif=exif.tobytes())
    args = (data, 10_000_000, THUMB, render.Coding(), render.DecodeLimits(), ())
    given = run_limited(render.make_images, *args, at(0.5, 1.0), cpu_seconds=20, wall_seconds=120)
    assert given.focus == at(0.5, 1.0) and colour_of(given.renditions[RenditionName.THUMB].data) == 2
    found = run_limited(render.make_images, *args, None, cpu_seconds=20, wall_seconds=120)
    assert found.focus == render.make_images(*args).focus  # found there as here
    assert found.focus.source is not FocusSource.CLIENT
