"""The page's ready cards: a <picture> with the job's AVIF and WebP before its JPEG, chromium
loading the AVIF, and the BlurHash placeholder painted until the thumbnail arrives (the
browser holds the thumbnail's answer until the test has looked)."""
from __future__ import annotations

import io
from pathlib import Path
from urllib.parse import urlsplit

import blurhash
import pytest
import skimage.data
from PIL import Image
from playwright.sync_api import expect

from chalicelib.imaging.placeholder import make_placeholder
from tests.browser.test_page import READY_TIMEOUT, api_get, card, open_page, pick


def photo(name: str) -> bytes:
    """A real photograph scikit-image ships, as a phone would send it (the set of
    benchmarks/renditions.py, where both extra formats beat this one's JPEG thumbnail)."""
    out = io.BytesIO()
    Image.open(Path(skimage.data.__file__).parent / name).convert("RGB").save(out, "JPEG", quality=95)
    return out.getvalue()


def path_of(url: str) -> str:
    return urlsplit(url).path  # presigned twice, one object: the signatures differ


def pixels_of(canvas) -> list[list[int]]:
    return canvas.evaluate("""c => {
        const data = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
        const rows = [];
        for (let y = 0; y < c.height; y++) {
            const row = [];
            for (let x = 0; x < c.width; x++) row.push(...data.slice(4 * (x + y * c.width), 4 * (x + y * c.width) + 3));
            rows.push(row);
        }
        return rows;
    }""")


def test_a_ready_card_offers_avif_and_webp_loads_the_avif_and_paints_the_placeholder_until_then(page, runner):
    held, thumbs, posts = [], [], []

    def hold(route):
        if route.request.method == "GET" and "/thumb." in route.request.url:
            held.append(route)  # let go below, once the placeholder has been looked at
        else:
            route.fallback()

    page.route(f"{runner.aws}/**", hold)
    page.on("response", lambda r: "/thumb." in r.url and thumbs.append((r.url, r.headers.get("content-type"))))
    page.on("request", lambda r: r.method == "POST" and posts.append(r.url))
    open_page(page, runner)
    pick(page, ("coffee.jpg", "image/jpeg", photo("coffee.png")))
    job = card(page, "coffee.jpg")
    expect(job).to_have_attribute("data-status", "ready", timeout=READY_TIMEOUT)
    assert [sorted(urlsplit(u).query.removeprefix("formats=").split(","))
            for u in posts if urlsplit(u).path == "/api/v1/images"] == [["avif", "webp"]]
    answer = api_get(page, runner, job.get_attribute("data-job-id")).json()
    thumb, display = answer["renditions"]["thumb"], answer["renditions"]["display"]
    thumb_512 = answer["renditions"]["thumb_512"]
    assert set(thumb["variants"]) == set(thumb_512["variants"]) == {"image/avif", "image/webp"}

    # The <picture>: AVIF, then WebP, then the JPEG in the <img>; each a srcset of both
    # thumbnails by width, so that 2x and 3x screens take the 512 px one.
    def parsed(srcset):
        return [(path_of(url), width) for url, width in (c.rsplit(" ", 1) for c in srcset.split(", "))]

    sources = job.locator(".thumb picture source")
    assert sources.evaluate_all("s => s.map(e => e.type)") == ["image/avif", "image/webp"]
    srcsets = sources.evaluate_all("s => s.map(e => e.srcset)")
    assert [parsed(s) for s in srcsets] == [
        [(path_of(thumb["variants"][t]["url"]), "256w"), (path_of(thumb_512["variants"][t]["url"]), "512w")]
        for t in ("image/avif", "image/webp")]
    img = job.locator(".thumb picture img")
    assert path_of(img.get_attribute("src")) == path_of(thumb["url"])
    assert parsed(img.get_attribute("srcset")) == [(path_of(thumb["url"]), "256w"), (path_of(thumb_512["url"]), "512w")]

    # Before the thumbnail arrives: the average colour and the BlurHash, at the display's aspect.
    for _ in range(100):
        if held:
            break
        page.wait_for_timeout(100)
    assert [path_of(r.request.url) for r in held] == [path_of(thumb["variants"]["image/avif"]["url"])]
    assert img.evaluate("i => i.complete") is False
    placeholder = answer["placeholder"]
    box = job.locator(".thumb")
    colour = tuple(int(placeholder["average_color"][i:i + 2], 16) for i in (1, 3, 5))
    assert box.evaluate("b => getComputedStyle(b).backgroundColor") == "rgb(%d, %d, %d)" % colour
    canvas = job.locator(".thumb canvas.placeholder")
    expect(canvas).to_be_visible()
    width, height = canvas.evaluate("c => [c.width, c.height]")
    assert (width, height) == (32, round(32 * display["height"] / display["width"])) == (32, 21)
    expected = [sum(px, []) for px in blurhash.decode(placeholder["blurhash"], width, height)]
    assert pixels_of(canvas) == expected  # the very pixels of the Python decoder

    # Then the AVIF itself, and the placeholder goes.
    for route in held:
        route.fallback()
    page.wait_for_function("i => i.complete && i.naturalWidth > 0", arg=img.element_handle())
    assert path_of(img.evaluate("i => i.currentSrc")) == path_of(thumb["variants"]["image/avif"]["url"])
    assert thumbs and all(t == "image/avif" for _, t in thumbs), thumbs
    # The 256 px candidate at density 1 (its width descriptor over the box's 104 CSS px), so
    # the natural size is in CSS pixels: the box's, not the file's.
    assert img.evaluate("i => i.naturalWidth === i.naturalHeight && i.naturalWidth <= 110")
    expect(canvas).to_have_count(0)
    assert box.evaluate("b => getComputedStyle(b).backgroundColor") != "rgb(%d, %d, %d)" % colour


@pytest.mark.parametrize("size", [(600, 400), (300, 500), (640, 640)])
def test_the_packages_blurhash_decoder_paints_what_the_reference_decoder_does(page, runner, size):
    """The page decodes with the package's decodePlaceholder (the `blurhash` npm package, in
    the page's bundle): the pixels of the Python decoder, at the display rendition's aspect."""
    source = Image.open(io.BytesIO(photo("chelsea.png"))).resize(size)
    hash_ = make_placeholder(source).blurhash
    open_page(page, runner)
    decoded = page.evaluate("""async ([hash, width, height]) => {
        const sdk = await import("/vendor/image-jobs-client.js");
        const client = new sdk.Client({ baseUrl: location.origin });
        const job = new sdk.Job(client, `${location.origin}/j`, { job_id: "j", status: "ready",
            placeholder: { blurhash: hash, average_color: "#808080" },
            renditions: { display: { url: "d", width, height } } });
        const { pixels, width: w, height: h } = sdk.decodePlaceholder(job, 32);
        return [w, h, Array.from(pixels)];
    }""", [hash_, *size])
    width, height, painted = decoded
    assert max(width, height) == 32 and (width, height) == ((32, round(32 * size[1] / size[0])) if size[0] >= size[1]
                                                            else (round(32 * size[0] / size[1]), 32))
    expected = [channel for row in blurhash.decode(hash_, width, height) for px in row for channel in (*px, 255)]
    assert painted == expected


def test_an_animated_gif_plays_on_its_card(page, runner):
    """Issue 51: the card offers the thumbnails' animations first; chromium takes the animated
    WebP and plays it (the frame drawn from the <img> changes while the page is watched)."""
    from tests.animations import animated

    open_page(page, runner)
    pick(page, ("cat.gif", "image/gif", animated("gif", frames=6, size=(300, 200), durations=120, name="chelsea.png")))
    job = card(page, "cat.gif")
    expect(job).to_have_attribute("data-status", "ready", timeout=READY_TIMEOUT)
    answer = api_get(page, runner, job.get_attribute("data-job-id")).json()
    thumb, thumb_512 = answer["renditions"]["thumb"], answer["renditions"]["thumb_512"]
    assert answer["source"]["animated"] is True
    first = job.locator(".thumb picture source").first
    assert first.get_attribute("type") == "image/webp" and first.get_attribute("class") == "animation"
    # Each animation by its own width: a 200-high GIF's squares are both 200 wide (never
    # upscaled), so one is offered.
    assert (thumb["animation"]["width"], thumb_512["animation"]["width"]) == (200, 200)
    assert first.get_attribute("srcset").split(", ") == [thumb["animation"]["url"] + " 200w"]
    img = job.locator(".thumb picture img")
    page.wait_for_function("i => i.complete && i.naturalWidth > 0", arg=img.element_handle())
    assert path_of(img.evaluate("i => i.currentSrc")) in {path_of(thumb["animation"]["url"]),
                                                          path_of(thumb_512["animation"]["url"])}
    # What the screen shows now, then later: chromium has moved to another frame. (A canvas
    # cannot tell: drawImage takes an animation's first frame, as the HTML standard says.)
    first = img.screenshot(animations="allow")
    for _ in range(50):  # each screenshot takes a rendering frame or more: no sleep needed
        if img.screenshot(animations="allow") != first:
            break
    else:
        raise AssertionError("the thumbnail did not move")
