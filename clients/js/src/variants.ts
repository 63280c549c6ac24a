// Which file of a rendition to show: the first of the formats the app can show that the
// rendition has, else its JPEG (docs/contract.md "Formats and the placeholder").
import type { Rendition } from "./job.js";

export interface Picked {
  url: string;
  contentType: string;
  bytes: number | null;
  /** What to key an image cache by (the URL changes from one window to the next). */
  cacheKey: string | null;
  /** The rendition's animation (an animated WebP) rather than a still. */
  animated: boolean;
}

export interface PickOptions {
  /** Pick an animated source's animation where WebP is among `supported` (default true):
   * false shows stills only (a grid that should not move, say). */
  animate?: boolean;
}

/** `supported`: formats the app can decode, best first, as names ("avif", "webp") or media
 * types ("image/avif"). An animated source's rendition answers its animation when the app
 * can show WebP (every browser and phone that shows a WebP plays an animated one), unless
 * `animate: false`. The JPEG is always there, so this always answers. */
export function pickVariant(rendition: Rendition, supported: readonly string[] = [], options: PickOptions = {}): Picked {
  const kinds = supported.map((f) => (f.includes("/") ? f.toLowerCase() : `image/${f.toLowerCase()}`));
  const animation = rendition.animation;
  if (animation && options.animate !== false && kinds.includes(animation.contentType)) {
    return { url: animation.url, contentType: animation.contentType, bytes: animation.bytes,
      cacheKey: animation.cacheKey ?? null, animated: true };
  }
  for (const format of supported) {
    const kind = format.includes("/") ? format.toLowerCase() : `image/${format.toLowerCase()}`;
    const variant = rendition.variants[kind];
    if (variant) return { url: variant.url, contentType: kind, bytes: variant.bytes, cacheKey: variant.cacheKey ?? null,
      animated: false };
  }
  return { url: rendition.url, contentType: rendition.contentType ?? "image/jpeg", bytes: null,
    cacheKey: rendition.cacheKey ?? null, animated: false };
}
