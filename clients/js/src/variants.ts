// Which file of a rendition to show: the first of the formats the app can show that the
// rendition has, else its JPEG (docs/contract.md "Formats and the placeholder").
import type { Rendition } from "./job.js";

export interface Picked {
  url: string;
  contentType: string;
  bytes: number | null;
  /** What to key an image cache by (the URL changes from one window to the next). */
  cacheKey: string | null;
}

/** `supported`: formats the app can decode, best first, as names ("avif", "webp") or media
 * types ("image/avif"). The JPEG is always there, so this always answers. */
export function pickVariant(rendition: Rendition, supported: readonly string[] = []): Picked {
  for (const format of supported) {
    const kind = format.includes("/") ? format.toLowerCase() : `image/${format.toLowerCase()}`;
    const variant = rendition.variants[kind];
    if (variant) return { url: variant.url, contentType: kind, bytes: variant.bytes, cacheKey: variant.cacheKey ?? null };
  }
  return { url: rendition.url, contentType: rendition.contentType ?? "image/jpeg", bytes: null, cacheKey: rendition.cacheKey ?? null };
}
