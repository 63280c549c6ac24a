"""The focus of a decoded picture (chalicelib/imaging/focus.py): faces, else saliency, else the
centre, on scikit-image's real photographs."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageOps

from chalicelib.domain.focus import Focus, FocusSource
from chalicelib.imaging import focus
from tests.images import photo_image

# The astronaut's face in scikit-image's 512x512 photo (Eileen Collins), by eye: its centre.
ASTRONAUT_FACE = (0.44, 0.22)


def on_canvas(image: Image.Image, size: tuple[int, int], at: tuple[float, float],
              background=(214, 210, 200)) -> tuple[Image.Image, tuple[float, float]]:
    """image pasted with its centre at `at` (fractions, kept inside); the canvas and where the
    image's own (x, y) fractions land: a function of them."""
    canvas = Image.new("RGB", size, background)
    left = int(min(max(0, at[0] * size[0] - image.width / 2), size[0] - image.width))
    top = int(min(max(0, at[1] * size[1] - image.height / 2), size[1] - image.height))
    canvas.paste(image, (left, top))
    return canvas, (left, top, image.width, image.height)


def inside(point: Focus, box: tuple[int, int, int, int], size: tuple[int, int]) -> bool:
    left, top, width, height = box
    return (left <= point.x * size[0] <= left + width) and (top <= point.y * size[1] <= top + height)


def test_the_vendored_model_is_the_file_scikit_image_ships_byte_for_byte():
    import skimage.data

    shipped = Path(skimage.data.lbp_frontal_face_cascade_filename()).read_bytes()
    assert focus.MODEL.read_bytes() == shipped


def test_the_detector_finds_what_scikit_images_own_cascade_finds():
    """The numpy cascade against scikit-image's (Cython) on the same grey picture and model."""
    import skimage.data
    from skimage.feature import Cascade

    grey = np.asarray(focus._shrunk(photo_image("astronaut.png"), focus.FACE_SIDE).convert("L"))
    theirs = Cascade(skimage.data.lbp_frontal_face_cascade_filename()).detect_multi_scale(
        grey, scale_factor=1.1, step_ratio=1, min_size=(24, 24), max_size=(200, 200))
    x, y, side, _ = focus.detect_faces(grey)[0]  # the largest
    centre = (x + side / 2, y + side / 2)
    assert any(abs(centre[0] - (t["c"] + t["width"] / 2)) < side / 4 and abs(centre[1] - (t["r"] + t["height"] / 2)) < side / 4
               for t in theirs)


def test_a_face_is_the_focus():
    found = focus.find(photo_image("astronaut.png"))
    assert found.source is FocusSource.FACES
    assert abs(found.x - ASTRONAUT_FACE[0]) < 0.05 and abs(found.y - ASTRONAUT_FACE[1]) < 0.05


def head(face: int) -> tuple[Image.Image, tuple[float, float]]:
    """The astronaut's head and shoulders, scaled so that her face is about `face` px high;
    and where the face's centre is in it (px)."""
    crop = photo_image("astronaut.png").crop((145, 23, 305, 213))
    scale = face / 96  # her face is about 96 px in the 512 px photo
    size = (round(crop.width * scale), round(crop.height * scale))
    return crop.resize(size, Image.Resampling.LANCZOS), (80 * scale, 90 * scale)


@pytest.mark.parametrize("size,at", [((1280, 720), (60, 300)), ((720, 1280), (400, 80))], ids=["landscape", "portrait"])
def test_a_face_off_centre_is_found_on_landscape_and_portrait_canvases(size, at):
    """Faces from about a ninth of the long side up (the cascade's window on the working copy)."""
    image, face = head(200)
    canvas = Image.new("RGB", size, (214, 210, 200))
    canvas.paste(image, at)
    found = focus.find(canvas)
    assert found.source is FocusSource.FACES
    assert abs(found.x - (at[0] + face[0]) / size[0]) < 0.03 and abs(found.y - (at[1] + face[1]) / size[1]) < 0.03


def test_several_faces_give_the_box_around_them():
    image, face = head(200)
    canvas = Image.new("RGB", (1280, 640), (214, 210, 200))
    canvas.paste(image, (40, 280))
    canvas.paste(image, (950, 20))
    found = focus.find(canvas)
    assert found.source is FocusSource.FACES
    assert abs(found.x - (40 + 950 + 2 * face[0]) / 2 / 1280) < 0.03
    assert abs(found.y - (280 + 20 + 2 * face[1]) / 2 / 640) < 0.05


def test_a_far_smaller_face_stays_out_of_the_box():
    """A passer-by (or a false hit) under half the size of the largest face does not move it."""
    big, big_face = head(110)
    small, small_face = head(40)
    canvas = Image.new("RGB", (400, 225), (214, 210, 200))
    canvas.paste(big, (10, 10))
    canvas.paste(small, (330, 140))
    faces = focus.detect_faces(np.asarray(canvas.convert("L")))
    assert len(faces) >= 2  # both are found...
    left, top, right, bottom = focus.faces_box(canvas)
    assert right * 400 < 200  # ...and only the big one is in the box
    assert abs((left + right) / 2 * 400 - (10 + big_face[0])) < 10


@pytest.mark.parametrize("name,size,at", [("coffee.png", (1280, 720), (0.8, 0.5)),
                                           ("rocket.jpg", (720, 1280), (0.5, 0.2)),
                                           ("chelsea.png", (1280, 720), (0.15, 0.5))])
def test_without_a_face_the_focus_is_on_the_salient_subject(name, size, at):
    subject = photo_image(name)
    subject = subject.resize((subject.width * 360 // subject.height, 360))
    canvas, box = on_canvas(subject, size, at)
    found = focus.find(canvas)
    assert found.source is FocusSource.SALIENCY
    assert inside(found, box, size)


def test_a_subject_on_a_texture_is_found():
    grass = ImageOps.colorize(photo_image("grass.png").convert("L").resize((1280, 1280)).crop((0, 0, 1280, 720)),
                              (0, 0, 0), (90, 140, 70))
    cup = photo_image("coffee.png").resize((380, 360))
    grass.paste(cup, (860, 180))
    found = focus.find(grass)
    assert found.source is FocusSource.SALIENCY
    assert inside(found, (860, 180, 380, 360), grass.size)


@pytest.mark.parametrize("colour", [(128, 128, 128), (255, 255, 255), (0, 0, 0), (200, 30, 40)])
def test_a_flat_picture_has_its_focus_in_the_centre(colour):
    assert focus.find(Image.new("RGB", (1280, 960), colour)) == Focus(0.5, 0.5, FocusSource.CENTRE)


def test_a_gentle_gradient_is_flat_too():
    gradient = Image.linear_gradient("L").resize((1280, 720)).point(lambda v: 100 + v // 8).convert("RGB")
    assert focus.find(gradient).source is FocusSource.CENTRE


def test_the_same_picture_gives_the_same_focus():
    canvas, _ = on_canvas(photo_image("coffee.png"), (1280, 720), (0.7, 0.5))
    assert len({focus.find(canvas) for _ in range(3)}) == 1
    assert focus.find(canvas.copy()) == focus.find(canvas)


@pytest.mark.parametrize("size", [(1, 1), (2, 1), (1, 300), (23, 23), (40, 30), (64, 2000)])
def test_tiny_and_thin_pictures_have_a_focus_in_range(size):
    noise = Image.effect_noise(size, 60).convert("RGB")
    found = focus.find(noise)
    assert 0 <= found.x <= 1 and 0 <= found.y <= 1
    assert found.source is not FocusSource.CLIENT


@pytest.mark.parametrize("mode", ["L", "LA", "RGBA", "P", "CMYK", "I;16"])
def test_other_modes_are_converted(mode):
    """The worker hands RGB; any other mode still gives the face's focus (L's grey included)."""
    photo = photo_image("astronaut.png")
    image = photo.convert("L").convert(mode) if mode == "I;16" else photo.convert(mode)
    found = focus.find(image)
    assert 0 <= found.x <= 1 and 0 <= found.y <= 1
    if mode in ("L", "LA", "RGBA", "P", "CMYK"):
        assert found.source is FocusSource.FACES
