// @image-jobs/client in Node 20+ (the "node" export condition): the package, and files by path.
// upload("photo.jpg") reads the file as it is sent (fs.openAsBlob: a Blob backed by the file,
// whose slices are read from disk as fetch pulls them), never whole, and hashes it as a
// stream; its resume fingerprint is the absolute path, the size and the modification time.
import { createHash } from "node:crypto";
import { createReadStream, openAsBlob } from "node:fs";
import { stat } from "node:fs/promises";
import { basename, resolve } from "node:path";
import { setPathReader, type Body } from "./source.js";

export * from "./index.js";

setPathReader(async (path: string): Promise<Body> => {
  const file = resolve(path);
  const info = await stat(file);
  if (!info.isFile()) throw new TypeError(`${path} is not a file`);
  const blob = await openAsBlob(file);
  return {
    size: blob.size, name: basename(file), type: null, uri: null,
    identity: `path:${file}:${info.size}:${info.mtimeMs}`,
    slice: (start, end) => blob.slice(start, end),
    bytes: async () => new Uint8Array(await blob.arrayBuffer()),
    sha256: () => new Promise<string>((done, failed) => {
      const hash = createHash("sha256");
      createReadStream(file).on("error", failed).on("data", (chunk) => hash.update(chunk))
        .on("end", () => done(hash.digest("base64")));
    }),
  };
});
