// Near-duplicates by the `phash` of ready jobs (docs/contract.md "The photo's facts").

/** At most this many bits apart: the same photo re-encoded, resized or converted; different
 * photos lie 20 and more apart (benchmarks/phash.py). */
export const PHASH_NEAR = 8;

/** How many of the 64 bits of two `phash` values (16 hex characters) differ. */
export function phashDistance(a: string, b: string): number {
  let x = BigInt(`0x${a}`) ^ BigInt(`0x${b}`);
  let bits = 0;
  for (; x; x &= x - 1n) bits += 1;
  return bits;
}
