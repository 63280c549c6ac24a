// The placeholder of a ready job, decoded by the `blurhash` package (Wolt's, the reference
// encoder's companion) at the renditions' aspect: BlurHash carries no aspect of its own.
import { decode } from "blurhash";
import type { Job } from "./job.js";

export interface Decoded {
  /** RGBA, ready for new ImageData(pixels, width, height). */
  pixels: Uint8ClampedArray;
  width: number;
  height: number;
  averageColor: string | null;
}

/** The placeholder at `size` px along its longer side (small: scale it up), or null when the
 * job has none (not ready, or made before placeholders existed). */
export function decodePlaceholder(job: Job, size = 32): Decoded | null {
  const placeholder = job.placeholder;
  if (!placeholder?.blurhash) return null;
  const display = job.renditions.display;
  const aspect = display?.width && display.height ? display.width / display.height : 1;
  const width = aspect >= 1 ? size : Math.max(1, Math.round(size * aspect));
  const height = aspect >= 1 ? Math.max(1, Math.round(size / aspect)) : size;
  return { pixels: decode(placeholder.blurhash, width, height), width, height,
    averageColor: placeholder.average_color ?? null };
}
