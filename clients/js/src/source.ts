// What upload() takes, read the same way everywhere: a browser File/Blob, bytes (Uint8Array,
// Node's Buffer, ArrayBuffer), React Native's `{uri, type, size}` of a photo (read by
// fetch(uri).blob(), as React Native reads local files), or in Node a file's path (read by
// the package's Node entry, src/node.ts, which registers its reader here).
import { OCTET_STREAM, guessType } from "./sniff.js";

export interface UriSource {
  uri: string;
  type?: string | null;
  size?: number | null;
  name?: string | null;
  fileName?: string | null;
}

/** A string is a file's path, in Node only. */
export type Source = Blob | Uint8Array | ArrayBuffer | UriSource | string;

/** The file as the uploader uses it: its size, its slices as fetch bodies, and its bytes. */
export interface Body {
  size: number;
  name: string;
  type: string | null;
  /** What a resume recognises the file by, when the caller gives no fingerprint. */
  identity: string | null;
  slice(start: number, end: number): Blob | Uint8Array;
  bytes(): Promise<Uint8Array>;
  /** React Native's FormData takes a file as {uri, type, name}, not as a Blob. */
  uri: string | null;
  /** base64 of its SHA-256, where the source hashes itself without reading it whole (a path). */
  sha256?: () => Promise<string | null>;
}

type PathReader = (path: string) => Promise<Body>;
let pathReader: PathReader | null = null;

/** @internal The Node entry's reader of files by path. */
export function setPathReader(reader: PathReader): void {
  pathReader = reader;
}

export function isUriSource(source: unknown): source is UriSource {
  return typeof source === "object" && source !== null && typeof (source as UriSource).uri === "string";
}

export async function readSource(source: Source, fetchImpl: typeof fetch): Promise<Body> {
  if (typeof source === "string") {
    if (!pathReader) throw new TypeError("a file's path is read in Node only: elsewhere pass a File, Blob, bytes or {uri, type, size}");
    return pathReader(source);
  }
  if (source instanceof Uint8Array || source instanceof ArrayBuffer) {
    const data = source instanceof Uint8Array ? source : new Uint8Array(source);
    return {
      size: data.byteLength, name: "upload", type: null, identity: null, uri: null,
      slice: (start, end) => data.subarray(start, end),
      bytes: async () => data,
    };
  }
  if (isUriSource(source)) {
    const response = await fetchImpl(source.uri);
    if (!response.ok) throw new TypeError(`could not read ${source.uri}: ${response.status}`);
    const blob = await response.blob();
    const name = source.name ?? source.fileName ?? source.uri.split("/").pop() ?? "upload";
    return fromBlob(blob, name || "upload", source.type || blob.type || null,
      `uri:${source.uri}:${blob.size}`, source.uri);
  }
  if (typeof Blob !== "undefined" && source instanceof Blob) {
    const file = source as Blob & { name?: string; lastModified?: number };
    const identity = typeof file.name === "string"
      ? `file:${file.name}:${file.size}:${file.lastModified ?? ""}:${file.type}` : null;
    return fromBlob(file, file.name || "upload", file.type || null, identity, null);
  }
  throw new TypeError("upload() takes a File or Blob, bytes (Uint8Array, ArrayBuffer), {uri, type, size}, or in Node a path");
}

function fromBlob(blob: Blob, name: string, type: string | null, identity: string | null, uri: string | null): Body {
  return {
    size: blob.size, name, type, identity, uri,
    slice: (start, end) => blob.slice(start, end),
    // React Native's Blob has no arrayBuffer(); a Response reads any Blob.
    bytes: async () => new Uint8Array(typeof blob.arrayBuffer === "function"
      ? await blob.arrayBuffer() : await new Response(blob).arrayBuffer()),
  };
}

/** The Content-Type to declare: the caller's, the file's own, or a guess from its first bytes. */
export async function contentTypeOf(body: Body, given?: string): Promise<string> {
  if (given) return given;
  if (body.type === "image/jpg") return "image/jpeg";
  if (body.type) return body.type;
  const head = body.slice(0, 64);
  const bytes = head instanceof Uint8Array ? head : new Uint8Array(await new Response(head).arrayBuffer());
  return guessType(bytes) ?? OCTET_STREAM;
}

/** base64 of the SHA-256 (S3's x-amz-checksum-sha256), or null where Web Crypto is missing
 * (React Native without a polyfill, or a page off https): the PUT then goes without one. */
export async function sha256Base64(body: Body): Promise<string | null> {
  if (body.sha256) return body.sha256();
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) return null;
  const digest = new Uint8Array(await subtle.digest("SHA-256", (await body.bytes()) as Uint8Array<ArrayBuffer>));
  let text = "";
  for (const byte of digest) text += String.fromCharCode(byte);
  return btoa(text);
}

/** What prepareUpload() needs of a React Native `{uri, type, size}` that gives both: nothing is
 * read (the platform's uploader reads the file); else the file as readSource reads it. */
export async function describeSource(source: Source, fetchImpl: typeof fetch): Promise<Body> {
  if (isUriSource(source) && typeof source.size === "number" && source.size > 0 && source.type) {
    const unread = () => { throw new TypeError(`${source.uri} is not read here: the platform's uploader sends it`); };
    return {
      size: source.size, name: source.name ?? source.fileName ?? source.uri.split("/").pop() ?? "upload",
      type: source.type, identity: `uri:${source.uri}:${source.size}`, uri: source.uri,
      slice: unread, bytes: async () => unread(), sha256: async () => null,
    };
  }
  return readSource(source, fetchImpl);
}
