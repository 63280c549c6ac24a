// A guess of the image type from the first bytes, for the Content-Type the server asks for.
// The server sniffs the bytes itself and decides; this only names an allowed type.
export const OCTET_STREAM = "application/octet-stream";

const BRANDS: Record<string, string> = {
  avif: "image/avif", avis: "image/avif",
  heic: "image/heic", heix: "image/heic", hevc: "image/heic", hevx: "image/heic", heim: "image/heic", heis: "image/heic",
  mif1: "image/heif", msf1: "image/heif",
};

const ascii = (head: Uint8Array, start: number, end: number) => String.fromCharCode(...head.subarray(start, end));
const startsWith = (head: Uint8Array, bytes: number[]) => bytes.every((b, i) => head[i] === b);

export function guessType(head: Uint8Array): string | null {
  if (startsWith(head, [0xff, 0xd8, 0xff])) return "image/jpeg";
  if (startsWith(head, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return "image/png";
  const six = ascii(head, 0, 6);
  if (six === "GIF87a" || six === "GIF89a") return "image/gif";
  if (ascii(head, 0, 4) === "RIFF" && ascii(head, 8, 12) === "WEBP") return "image/webp";
  if (startsWith(head, [0x49, 0x49, 0x2a, 0x00]) || startsWith(head, [0x4d, 0x4d, 0x00, 0x2a])) return "image/tiff";
  if (head.length >= 12 && ascii(head, 4, 8) === "ftyp") {
    const size = ((head[0]! << 24) >>> 0) + (head[1]! << 16) + (head[2]! << 8) + head[3]!;
    const brands = [ascii(head, 8, 12)];
    for (let i = 16; i < Math.min(size, head.length) - 3; i += 4) brands.push(ascii(head, i, i + 4));
    for (const brand of brands) if (BRANDS[brand]) return BRANDS[brand]!;
  }
  return null;
}
