// BlurHash (https://blurha.sh) decoding, written from its specification: a hash is a few
// cosine components in base 83, the first the average colour (sRGB), the others its detail.
// The page has no build step and no library; the Python `blurhash` package the server uses
// decodes the same pixels (tests/browser/test_placeholder.py compares them).

const DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz#$%*+,-.:;=?@[]^_{|}~";

function base83(text) {
  let value = 0;
  for (const char of text) {
    const digit = DIGITS.indexOf(char);
    if (digit < 0) throw new Error("not a BlurHash");
    value = value * 83 + digit;
  }
  return value;
}

function toLinear(value) {
  const v = value / 255;
  return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
}

function toSrgb(value) {
  const v = Math.max(0, Math.min(1, value));
  return Math.trunc(v <= 0.0031308 ? v * 12.92 * 255 + 0.5 : (1.055 * v ** (1 / 2.4) - 0.055) * 255 + 0.5);
}

const signedSquare = (value) => Math.sign(value) * value * value;

// The hash's pixels at width x height, RGBA, ready for new ImageData(pixels, width, height).
// BlurHash carries no aspect: pass the image's own (a rendition's width and height).
export function decode(hash, width, height) {
  if (typeof hash !== "string" || hash.length < 6) throw new Error("not a BlurHash");
  const sizes = base83(hash[0]);
  const across = (sizes % 9) + 1;
  const down = Math.floor(sizes / 9) + 1;
  if (hash.length !== 4 + 2 * across * down) throw new Error("not a BlurHash");
  const maximum = (base83(hash[1]) + 1) / 166;
  const colours = [];
  const dc = base83(hash.slice(2, 6));
  colours.push([toLinear(dc >> 16), toLinear((dc >> 8) & 255), toLinear(dc & 255)]);
  for (let i = 1; i < across * down; i++) {
    const ac = base83(hash.slice(4 + i * 2, 6 + i * 2));
    colours.push([Math.floor(ac / 361), Math.floor(ac / 19) % 19, ac % 19]
      .map((q) => signedSquare((q - 9) / 9) * maximum));
  }
  const pixels = new Uint8ClampedArray(width * height * 4);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      let r = 0, g = 0, b = 0;
      for (let j = 0; j < down; j++) {
        for (let i = 0; i < across; i++) {
          const basis = Math.cos((Math.PI * x * i) / width) * Math.cos((Math.PI * y * j) / height);
          const [cr, cg, cb] = colours[i + j * across];
          r += cr * basis;
          g += cg * basis;
          b += cb * basis;
        }
      }
      const at = 4 * (x + y * width);
      pixels[at] = toSrgb(r);
      pixels[at + 1] = toSrgb(g);
      pixels[at + 2] = toSrgb(b);
      pixels[at + 3] = 255;
    }
  }
  return pixels;
}
