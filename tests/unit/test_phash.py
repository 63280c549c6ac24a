"""The perceptual hash (chalicelib/imaging/phash.py): imagehash's pHash, bit for bit, without
scipy; the worker's ready job carries it. Its robustness on real photos is measured by
benchmarks/phash.py."""
from __future__ import annotations

import imagehash
import numpy as np
import pytest
from PIL import Image

from chalicelib.imaging import render
from chalicelib.imaging.phash import distance, phash
from tests.images import photo_as, photo_image

PHOTOS = ["coffee.png", "astronaut.png", "chelsea.png", "rocket.jpg", "motorcycle_left.png", "camera.png"]


@pytest.mark.parametrize("name", PHOTOS)
def test_the_hash_is_imagehashs_phash(name):
    im = photo_image(name)
    assert phash(im) == str(imagehash.phash(im))
    assert len(phash(im)) == 16


def _pictures():
    """Pictures whose DCT has exact zeros (flat, mirrored, a pixel wide), where rounding's
    noise would decide bits imagehash leaves clear, and random ones of every small size."""
    rng = np.random.default_rng(7)
    ramp = np.arange(256, dtype=np.uint8)
    yield "flat", Image.new("RGB", (300, 200), (120, 130, 140))
    yield "black", Image.new("RGB", (64, 64))
    yield "one pixel", Image.new("RGB", (1, 1), (9, 9, 9))
    yield "ramp across", Image.fromarray(np.tile(ramp, (100, 1))).convert("RGB")
    yield "ramp down", Image.fromarray(np.tile(ramp[:, None], (1, 100))).convert("RGB")
    yield "checker", Image.fromarray((np.indices((64, 64)).sum(0) % 2 * 255).astype(np.uint8)).convert("RGB")
    for i in range(150):
        size = (int(rng.integers(1, 80)), int(rng.integers(1, 80)), 3)
        yield f"random {i}", Image.fromarray(rng.integers(0, 256, size, dtype=np.uint8))


def test_the_hash_is_imagehashs_on_degenerate_and_random_pictures():
    wrong = {name: (phash(im), str(imagehash.phash(im))) for name, im in _pictures()
             if phash(im) != str(imagehash.phash(im))}
    assert wrong == {}


def test_distance_counts_the_bits_that_differ():
    assert distance("0000000000000000", "ffffffffffffffff") == 64
    assert distance("bb8320376c0f3637", "bb8320376c0f3637") == 0
    assert distance("0000000000000001", "8000000000000000") == 2


def test_make_images_hashes_the_decoded_picture_upright():
    import io

    from PIL import Image

    from tests.images import private_exif

    upright = render.make_images(photo_as("JPEG", quality=92), 50_000_000)
    out = io.BytesIO()  # stored sideways, with the orientation that shows it upright
    photo_image().transpose(Image.Transpose.ROTATE_90).save(
        out, "JPEG", quality=92, exif=private_exif(orientation=6).tobytes())
    turned = render.make_images(out.getvalue(), 50_000_000).phash
    assert distance(upright.phash, turned) <= 2
    assert distance(upright.phash, phash(photo_image().transpose(Image.Transpose.ROTATE_90))) > 20
    assert distance(upright.phash, phash(photo_image())) <= 4  # the display rendition's, not the file's
