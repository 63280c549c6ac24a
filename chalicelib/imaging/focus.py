"""Where a decoded picture's subject is (`find`): its faces, else its most salient region, else
its centre. Pixels in, a Focus out; deterministic (no randomness, no threads, no state but
the model read once).

Faces: OpenCV's LBP frontal-face cascade (models/lbpcascade_frontalface_opencv.xml, the file
scikit-image ships; see models/README.md), evaluated here with numpy on a small grey copy:
the levels of a pyramid are laid out in one picture with one integral image, scanned by the
first stage over every window at once (array slices), and by the later stages only over the
windows still alive (one gather a stage), as OpenCV's detectMultiScale rejects early. Overlapping hits are grouped as OpenCV's
groupRectangles does; a face needs several. With several faces, the focus is the centre of
the box around them, leaving out faces much smaller than the largest (in a photo of a group,
a far smaller "face" is a false hit or a passer-by).

Saliency, when there is no face: what libvips' attention crop weighs (edges, skin, colour
saturation), on a copy of a hundred-odd pixels, with two changes: each map counts by how far
it lies from the picture's median (a subject on grass or gravel stands out from the texture,
not the texture from it), and skin weighs more than colour, so a person beside a brighter
object keeps the focus. The map is summed over squares of a third of the short side, and the
focus is the best square's centre of mass. A picture with nothing to find (flat, or a peak no
higher than the rest) has its focus in the centre.

Costs and how often the thumbnail keeps its subject: benchmarks/focus.py.
"""
from __future__ import annotations

import threading
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageFilter

from chalicelib.domain.focus import Focus, FocusSource

MODEL = Path(__file__).with_name("models") / "lbpcascade_frontalface_opencv.xml"

# Faces are looked for on a grey copy this long on its long side: the cascade's 24 px window
# then finds faces from an eighth of the picture's long side up. Smaller faces are left to the
# saliency map's skin (benchmarks/focus.py: each step up in this side costs CPU per job).
FACE_SIDE = 192
# Each level of the pyramid is this much smaller than the one before (OpenCV's default is 1.1:
# fewer levels, fewer windows; overlapping hits still meet at neighbouring scales).
_PYRAMID_STEP = 1.25
# Windows are tried every second pixel of each level (OpenCV's step below scale 2).
_WINDOW_STEP = 2
# The stages the grid's windows pass before the windows around them are tried too.
_EXPAND_AT = 6
# Hits of one face that overlap (OpenCV's groupRectangles eps) and how many make a face.
_GROUP_EPS = 0.2
_MIN_NEIGHBOURS = 2
# Faces less than this share of the largest face's side are left out of the box.
_FACE_SHARE = 0.5
# In a colour picture, the least share of skin in the middle of a face.
_FACE_SKIN = 0.25
# A picture whose chroma stays this near grey everywhere is grey (Cb and Cr from 128).
_GREY_CHROMA = 3

# Saliency is computed on a copy this long on its long side.
SALIENCY_SIDE = 96
# The weights of the three maps (each 0..1): skin first, then edges, then saturation.
_SKIN, _EDGES, _SATURATION = 2.0, 1.0, 1.0
# An edge this many times weaker than black against white already counts fully.
_EDGE_GAIN = 4
# Edges are counted as their density over a square of this radius (px of the saliency copy).
_DENSITY_RADIUS = 2
# Below this mean of the weighted map there is nothing to look at (a flat or near-flat picture).
_FLAT = 0.02
# The best square's mean must be this many times the picture's mean, or nothing stands out
# and the centre is as good as any point.
_PEAK_CONTRAST = 1.15


def find(image: Image.Image) -> Focus:
    """The focus of a decoded, upright image (any mode; RGB expected): faces, else saliency,
    else the centre."""
    if image.mode != "RGB":
        image = image.convert("RGB")
    width, height = image.size
    if min(width, height) < 2:
        return Focus(0.5, 0.5, FocusSource.CENTRE)
    small = _shrunk(image, FACE_SIDE)
    box = faces_box(small)
    if box is not None:
        left, top, right, bottom = box
        return Focus(_clamp((left + right) / 2), _clamp((top + bottom) / 2), FocusSource.FACES)
    point = salient_point(_shrunk(small, SALIENCY_SIDE))
    if point is not None:
        return Focus(_clamp(point[0]), _clamp(point[1]), FocusSource.SALIENCY)
    return Focus(0.5, 0.5, FocusSource.CENTRE)


def small(image: Image.Image) -> Image.Image:
    """The copy of a decoded, upright RGB image that find() works on (as find(image) would
    make it): whoever also needs a small copy of the picture (the placeholder) reads this one,
    and find() takes it as it is."""
    return _shrunk(image if image.mode == "RGB" else image.convert("RGB"), FACE_SIDE)


def _clamp(value: float) -> float:
    return round(min(1.0, max(0.0, value)), 4)


def _shrunk(image: Image.Image, side: int) -> Image.Image:
    """A copy whose long side is at most `side`: a box reduce by the largest integer factor
    (cheap), then a bilinear resample of what is left (less than 2x)."""
    width, height = image.size
    scale = side / max(width, height)
    if scale >= 1:
        return image
    factor = int(1 / scale)
    if factor >= 2:
        image = image.reduce(factor)
    target = (max(1, round(width * scale)), max(1, round(height * scale)))
    return image.resize(target, Image.Resampling.BILINEAR)


# ------------------------------------------------------------------------------ faces


@dataclass(frozen=True)
class _Stage:
    threshold: float
    # Each stump's LBP feature as the 4x4 corners of its 3x3 cells in the integral image,
    # row by row, as (dy, dx) from the window's top left: shape (stumps, 16) each.
    dy: np.ndarray
    dx: np.ndarray
    votes: np.ndarray  # (stumps, 256): each stump's vote for each LBP code (float32)

    def __post_init__(self):
        # What each pass of the stage uses, laid out once: the corners as (16, stumps, 1), int32
        # as the windows' indices are (half the bytes of numpy's default to add and read); the
        # votes flat, and where each stump's 256 start in them.
        object.__setattr__(self, "_rows", np.ascontiguousarray(self.dy.T, dtype=np.int32)[:, :, None])
        object.__setattr__(self, "_columns", np.ascontiguousarray(self.dx.T, dtype=np.int32)[:, :, None])
        object.__setattr__(self, "_table", np.ascontiguousarray(self.votes).ravel())
        object.__setattr__(self, "_starts", (np.arange(len(self.votes)) * 256)[:, None])

    def offsets(self, stride: int) -> np.ndarray:
        """The 16 corners of every stump in an integral image `stride` wide: (16, stumps, 1)."""
        return self._rows * np.int32(stride) + self._columns

    def sums(self, codes: np.ndarray) -> np.ndarray:
        """Each window's sum of its stumps' votes, from their codes (stumps, windows)."""
        return _summed(self._table[codes + self._starts])


@dataclass(frozen=True)
class Cascade:
    window: int
    stages: tuple[_Stage, ...]

    @classmethod
    def read(cls, path: Path) -> "Cascade":
        """An OpenCV cascade of LBP stumps (the XML format OpenCV's traincascade writes)."""
        root = ElementTree.parse(path).getroot().find("cascade")
        if root.findtext("featureType").strip() != "LBP":
            raise ValueError("not an LBP cascade")
        window = int(root.findtext("width"))
        rects = [tuple(int(v) for v in f.findtext("rect").split()) for f in root.find("features")]
        if max(w * h for _, _, w, h in rects) * 255 >= 2 ** 16:
            raise ValueError("cells too large for detect_faces's 16-bit integral image")
        codes = np.arange(256)
        grid = np.arange(4)
        stages = []
        for stage in root.find("stages"):
            dys, dxs, leaves = [], [], []
            for tree in stage.find("weakClassifiers"):
                nodes = [int(v) for v in tree.findtext("internalNodes").split()]
                left, right = (float(v) for v in tree.findtext("leafValues").split())
                x, y, w, h = rects[nodes[2]]
                dys.append(np.repeat(y + grid * h, 4))
                dxs.append(np.tile(x + grid * w, 4))
                subset = np.array([v & 0xFFFFFFFF for v in nodes[3:11]], dtype=np.uint64)
                # OpenCV: the left leaf where the code's bit is set in the 256-bit subset.
                inside = (subset[codes >> 5] >> (codes & 31).astype(np.uint64)) & 1
                leaves.append(np.where(inside == 1, left, right))
            stages.append(_Stage(np.float32(stage.findtext("stageThreshold")), np.array(dys), np.array(dxs),
                                 np.array(leaves, dtype=np.float32)))
        return cls(window, tuple(stages))


_cascade: Cascade | None = None
_cascade_lock = threading.Lock()


def cascade() -> Cascade:
    """The model, read once per process."""
    global _cascade
    with _cascade_lock:
        if _cascade is None:
            _cascade = Cascade.read(MODEL)
        return _cascade


def detect_faces(grey: np.ndarray, model: Cascade | None = None) -> list[tuple[float, float, float, int]]:
    """Faces in a 2-D uint8 array: (x, y, side, hits) in its pixels, grouped, largest first.

    Every level of the pyramid is laid out in one picture (an atlas) with one integral image,
    so that one pass of each stage covers the windows of all levels."""
    model = model or cascade()
    window = model.window
    height, width = grey.shape
    sizes, scales, scale = [], [], 1.0
    while min(round(width / scale), round(height / scale)) >= window:
        sizes.append((round(width / scale), round(height / scale)))
        scales.append(scale)
        scale *= _PYRAMID_STEP
    if not sizes:
        return []
    places, atlas_size = _atlas_layout(sizes)
    atlas = Image.new("L", atlas_size)
    level = Image.fromarray(grey)
    for size, place in zip(sizes, places):
        if level.size != size:  # each from the one before: a small resample each
            level = level.resize(size, Image.Resampling.BILINEAR)
        atlas.paste(level, place)
    # One integral image for all levels: a rectangle's sum inside a level is exact wherever
    # the level lies, so the levels can touch. It is kept modulo 2**16 (uint16, wrapping): a
    # cell's sum (Cascade.read checks) is below 2**16, so its four corners' difference
    # modulo 2**16 is the sum itself, and half the bytes move.
    columns, rows = atlas_size
    stride = columns + 1
    integral = np.zeros((rows + 1, stride), dtype=np.uint16)
    np.cumsum(np.cumsum(np.asarray(atlas), axis=0, dtype=np.uint16), axis=1, out=integral[1:, 1:])
    flat = integral.ravel()
    # Per top-left corner (as an index in the integral image): the level whose window it is,
    # or -1 (a window that would reach past its level's right or bottom edge).
    level_of = np.full(integral.shape, -1, dtype=np.int8)
    for index, ((w, h), (left, top)) in enumerate(zip(sizes, places)):
        level_of[top: top + h - window + 1, left: left + w - window + 1] = index
    level_of = level_of.ravel()

    # The first stage over every window of the grid at once: for each stump, the sums of its
    # cell's size at every pixel (one whole-array expression), split by the parity of row and
    # column, so that each of the 9 cells of all the grid's windows is a contiguous slice of one.
    first = model.stages[0]
    grid_rows = (rows - window) // _WINDOW_STEP + 1
    grid_cols = (columns - window) // _WINDOW_STEP + 1
    votes = []
    for dy, dx, leaf in zip(first.dy, first.dx, first.votes):
        y, x, h, w = int(dy[0]), int(dx[0]), int(dy[4] - dy[0]), int(dx[1] - dx[0])
        sums = integral[h:, w:] - integral[:-h, w:] - integral[h:, :-w] + integral[:-h, :-w]
        parts = {}
        cells = []
        for top in (y, y + h, y + 2 * h):
            for left in (x, x + w, x + 2 * w):
                parity = (top % _WINDOW_STEP, left % _WINDOW_STEP)
                if parity not in parts:
                    parts[parity] = np.ascontiguousarray(sums[parity[0]::_WINDOW_STEP, parity[1]::_WINDOW_STEP])
                row, column = top // _WINDOW_STEP, left // _WINDOW_STEP
                cells.append(parts[parity][row: row + grid_rows, column: column + grid_cols])
        bits = np.empty((9, grid_rows, grid_cols), dtype=bool)
        for cell, out in zip(cells, bits):
            np.greater_equal(cell, cells[4], out=out)
        votes.append(leaf[_weighed(bits.reshape(3, 3, grid_rows, grid_cols))])
    total = _summed(votes)
    gy, gx = np.nonzero(total >= first.threshold)
    grid = (gy * _WINDOW_STEP * stride + gx * _WINDOW_STEP).astype(np.int32)
    grid = grid[level_of[grid] >= 0]  # windows inside one level only
    # The grid skips three windows in four, and a face passes every stage at a few windows
    # only: the windows on the grid still alive after the first _EXPAND_AT stages (near-faces,
    # by then few) bring the windows one pixel around them (each once), and all go through
    # the rest.
    near = _passing(flat, stride, grid, model.stages[1:_EXPAND_AT])
    if near.size == 0:
        return []
    steps = np.array([dy * stride + dx for dy in (-1, 0, 1) for dx in (-1, 0, 1) if dy or dx], dtype=np.int32)
    around = (near[None, :] + steps[:, None]).ravel()
    around = np.unique(around[level_of[around] == np.tile(level_of[near], len(steps))])
    around = _passing(flat, stride, around, model.stages[:_EXPAND_AT])
    origin = _passing(flat, stride, np.concatenate([near, around]), model.stages[_EXPAND_AT:])
    index = level_of[origin].astype(np.intp)
    lefts, tops = (np.array(v) for v in zip(*places))
    ys, xs = np.divmod(origin, stride)
    xs, ys = xs - lefts[index], ys - tops[index]
    hits = []
    for i in np.lexsort((xs, ys, index)).tolist():  # by level, then row, then column
        scale = scales[index[i]]
        hits.append((int(xs[i]) * scale, int(ys[i]) * scale, window * scale))
    return _grouped(hits)


def _atlas_layout(sizes: list[tuple[int, int]]) -> tuple[list[tuple[int, int]], tuple[int, int]]:
    """Where each level goes in the atlas (left, top; even, on the windows' grid) and the
    atlas's size: in shelves as wide as the two largest levels side by side (stacked one above
    the other, half the grid's windows would reach past their level's edge)."""
    def even(value: int) -> int:
        return value + value % _WINDOW_STEP

    width = sum(even(w) for w, _ in sizes[:2])
    places, left, top, shelf = [], 0, 0, 0
    for w, h in sizes:
        if left + w > width:
            left, top, shelf = 0, top + even(shelf), 0
        places.append((left, top))
        left += even(w)
        shelf = max(shelf, h)
    return places, (width, top + shelf)


def _passing(flat: np.ndarray, stride: int, origin: np.ndarray, stages) -> np.ndarray:
    """The windows (by their top-left corner's index in the flat integral image) that pass
    every stage; each stage sees only the windows that passed the one before."""
    for stage in stages:
        if origin.size == 0:
            break
        # One gather a stage: every corner of every stump for every window, (16, stumps,
        # windows): the windows last, as numpy's loops are slow over a short last axis.
        corners = np.take(flat, stage.offsets(stride) + origin)
        codes = _codes(corners.reshape(4, 4, *corners.shape[1:]))  # (stumps, windows)
        total = stage.sums(codes)
        origin = origin[total >= stage.threshold]
    return origin


def _summed(votes) -> np.ndarray:
    """A stage's sum of its stumps' float32 votes (a sequence of equal arrays, one a stump), in
    the order numpy sums a short row of float32 (one by one below eight stumps; else the first
    eight as four pairs of pairs, then the rest one by one), each window on its own whatever
    the others. A window's sum often ties with its stage's threshold (training sets each
    threshold to a face's sum), so the order decides which windows pass: this is the order the
    detector was measured with (benchmarks/focus.py)."""
    votes = np.asarray(votes)
    if len(votes) < 8:
        return np.add.reduce(votes, axis=0)  # row by row, in order
    pairs = votes[0:8:2] + votes[1:8:2]
    total = (pairs[0] + pairs[1]) + (pairs[2] + pairs[3])
    for vote in votes[8:]:
        total += vote
    return total


# A feature's 3x3 cells row by row, and the bit each outer cell's comparison sets in OpenCV's
# LBP code (the top-left cell the highest bit, then clockwise; the centre none).
_BITS = np.array([128, 64, 32, 1, 0, 16, 2, 4, 8], dtype=np.uint8).reshape(3, 3, 1, 1)


def _codes(corners: np.ndarray) -> np.ndarray:
    """OpenCV's LBP code of 3x3 grids of cells from their 4x4 integral-image corners (the two
    first axes, then the grids' own two): a bit for each outer cell whose sum is at least the
    centre's (uint8)."""
    across = corners[:, 1:] - corners[:, :-1]
    cells = across[1:] - across[:-1]
    return _weighed(cells >= cells[1, 1])


def _weighed(bits: np.ndarray) -> np.ndarray:
    """The LBP codes (uint8) from the 3x3 comparisons with the centre (bool, the first two axes)."""
    bits = bits.view(np.uint8)
    bits *= _BITS
    return bits.sum(axis=(0, 1), dtype=np.uint8)


def _grouped(hits: list[tuple[float, float, float]]) -> list[tuple[float, float, float, int]]:
    """OpenCV's groupRectangles for squares: hits whose corners are within eps of each other's
    size join one group (transitively); a group of at least _MIN_NEIGHBOURS hits is a face at
    its mean; a face inside a larger one with more hits is dropped."""
    if not hits:
        return []
    boxes = np.array(hits, dtype=np.float64)
    x, y, s = boxes[:, 0], boxes[:, 1], boxes[:, 2]
    delta = _GROUP_EPS * np.minimum(s[:, None], s[None, :])
    near = ((np.abs(x[:, None] - x[None, :]) <= delta) & (np.abs(y[:, None] - y[None, :]) <= delta)
            & (np.abs(x[:, None] + s[:, None] - x[None, :] - s[None, :]) <= delta))
    labels = np.arange(len(hits))
    while True:  # each hit takes the least label among its neighbours until none changes
        spread = np.where(near, labels[None, :], len(hits)).min(axis=1)
        if np.array_equal(spread, labels):
            break
        labels = spread
    faces = []
    for label in np.unique(labels):
        members = boxes[labels == label]
        if len(members) >= _MIN_NEIGHBOURS:
            mx, my, ms = members.mean(axis=0)
            faces.append((float(mx), float(my), float(ms), len(members)))
    kept = []
    for face in faces:
        fx, fy, fs, n = face
        inside = any(o is not face and ox <= fx and oy <= fy and fx + fs <= ox + os_ and fy + fs <= oy + os_
                     and on >= n for o in faces for ox, oy, os_, on in [o])
        if not inside:
            kept.append(face)
    return sorted(kept, key=lambda f: (-f[2], f[0], f[1]))


def faces_box(image: Image.Image) -> tuple[float, float, float, float] | None:
    """The box around the image's faces (left, top, right, bottom as fractions of its sides),
    leaving out faces under _FACE_SHARE of the largest one's side; None without a face.

    In a colour picture a face must have skin's colours in its middle (the cascade sees grey
    only, and its false hits are on shirts, walls and foliage); in a grey one, any face counts."""
    found = detect_faces(np.asarray(image.convert("L")))
    if found and image.mode == "RGB":
        skin = _skin(np.asarray(image.convert("YCbCr"), dtype=np.int16))
        if skin is not None:
            found = [f for f in found if _skin_share(skin, f) >= _FACE_SKIN]
    if not found:
        return None
    largest = max(f[2] for f in found)
    kept = [f for f in found if f[2] >= _FACE_SHARE * largest]
    width, height = image.size
    return (min(f[0] for f in kept) / width, min(f[1] for f in kept) / height,
            max(f[0] + f[2] for f in kept) / width, max(f[1] + f[2] for f in kept) / height)


def _skin(ycbcr: np.ndarray) -> np.ndarray | None:
    """Where the picture has skin's colours (bool), or None for a grey picture (no colour)."""
    cb, cr, luma = ycbcr[:, :, 1], ycbcr[:, :, 2], ycbcr[:, :, 0]
    if max(np.abs(cb - 128).max(), np.abs(cr - 128).max()) <= _GREY_CHROMA:
        return None
    # Skin of every complexion in YCbCr (Chai and Ngan's chroma box), away from the extremes of light.
    return (cb >= 77) & (cb <= 127) & (cr >= 137) & (cr <= 173) & (luma > 40) & (luma < 240)


def _skin_share(skin: np.ndarray, face: tuple[float, float, float, int]) -> float:
    """The share of skin in the middle half of a face's box."""
    x, y, side, _ = face
    middle = skin[int(y + side / 4): int(y + side * 3 / 4) + 1, int(x + side / 4): int(x + side * 3 / 4) + 1]
    return float(middle.mean()) if middle.size else 0.0


# --------------------------------------------------------------------------- saliency


def saliency_map(image: Image.Image) -> np.ndarray:
    """Per pixel, 0..: how far its skin, edge density and saturation lie from the picture's
    median of each (what is everywhere, a texture or a tint, is not salient; a smooth subject
    on a busy ground is), weighed as the constants above say."""
    rgb = np.asarray(image, dtype=np.float32) / 255
    edges = np.asarray(image.convert("L").filter(ImageFilter.FIND_EDGES), dtype=np.float32) / 255
    edges[0, :] = edges[-1, :] = 0  # FIND_EDGES leaves the border as it was
    edges[:, 0] = edges[:, -1] = 0
    edges = np.minimum(edges * _EDGE_GAIN, 1)
    density = _box_sums(edges, _DENSITY_RADIUS) / _box_areas(edges.shape, _DENSITY_RADIUS)
    red, green, blue = rgb[:, :, 0], rgb[:, :, 1], rgb[:, :, 2]  # (numpy's max over a last axis of 3 is slow)
    top, bottom = np.maximum(np.maximum(red, green), blue), np.minimum(np.minimum(red, green), blue)
    saturation = top - bottom  # HSV's saturation times value: dark is not colourful
    found = _skin(np.asarray(image.convert("YCbCr"), dtype=np.int16))
    skin = np.zeros(rgb.shape[:2], dtype=np.float32) if found is None else found.astype(np.float32)
    skin, density, saturation = (np.abs(m - np.median(m)) for m in (skin, density, saturation))
    return _SKIN * skin + _EDGES * density + _SATURATION * saturation


def salient_point(image: Image.Image) -> tuple[float, float] | None:
    """The centre of mass of the saliency map in its best square (the one of a third of the
    short side holding most of it), as fractions of the sides; None when nothing stands out."""
    energy = saliency_map(image)
    height, width = energy.shape
    if float(energy.mean()) < _FLAT:
        return None
    radius = max(1, round(min(width, height) / 6))
    peak_map = _box_sums(energy, radius)
    y, x = np.unravel_index(int(np.argmax(peak_map)), peak_map.shape)
    if peak_map[y, x] < _PEAK_CONTRAST * float(energy.mean()) * _box_areas(energy.shape, radius)[y, x]:
        return None
    top, bottom = max(0, y - radius), min(height, y + radius + 1)
    left, right = max(0, x - radius), min(width, x + radius + 1)
    region = energy[top:bottom, left:right]
    mass = float(region.sum())
    ys, xs = np.mgrid[top:bottom, left:right]
    cx = float((region * xs).sum()) / mass
    cy = float((region * ys).sum()) / mass
    return (cx + 0.5) / width, (cy + 0.5) / height


def _box_sums(values: np.ndarray, radius: int) -> np.ndarray:
    """Each pixel's sum over the square of `radius` around it (cut at the edges)."""
    height, width = values.shape
    integral = np.zeros((height + 1, width + 1), dtype=np.float64)
    np.cumsum(np.cumsum(values, axis=0), axis=1, out=integral[1:, 1:])
    (top, bottom), (left, right) = _box_edges(height, radius), _box_edges(width, radius)
    below, above = integral[bottom], integral[top]
    return below[:, right] - above[:, right] - below[:, left] + above[:, left]


def _box_areas(shape: tuple[int, int], radius: int) -> np.ndarray:
    """Each pixel's count of pixels in the square of `radius` around it (cut at the edges), as
    _box_sums of ones gives it."""
    (top, bottom), (left, right) = _box_edges(shape[0], radius), _box_edges(shape[1], radius)
    return ((bottom - top)[:, None] * (right - left)[None, :]).astype(np.float64)


def _box_edges(length: int, radius: int) -> tuple[np.ndarray, np.ndarray]:
    """Where each pixel's square of `radius` starts and ends along an axis of `length`."""
    along = np.arange(length)
    return np.maximum(along - radius, 0), np.minimum(along + radius + 1, length)
