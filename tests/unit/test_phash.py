"""The perceptual hash (chalicelib/imaging/phash.py): imagehash's pHash, bit for bit, without
numpy; the worker's ready job carries it. Its robustness on real photos is measured by
benchmarks/phash.py."""
from __future__ import annotations

import imagehash
import pytest

from chalicelib.imaging import render
from chalicelib.imaging.phash import distance, phash
from tests.images import photo_as, photo_image

PHOTOS = ["coffee.png", "astronaut.png", "chelsea.png", "rocket.jpg", "motorcycle_left.png", "camera.png"]


@pytest.mark.parametrize("name", PHOTOS)
def test_the_hash_is_imagehashs_phash(name):
    im = photo_image(name)
    assert phash(im) == str(imagehash.phash(im))
    assert len(phash(im)) == 16


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
