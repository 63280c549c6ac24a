// The package's size as a browser or React Native app ships it: dist/ with blurhash,
// bundled and minified by esbuild, then gzipped. Prints {minified, gzipped} in bytes.
import { build } from "esbuild";
import { gzipSync } from "node:zlib";

const out = await build({ entryPoints: ["dist/index.js"], bundle: true, minify: true, format: "esm",
  platform: "neutral", write: false, mainFields: ["module", "main"] });
const code = out.outputFiles[0].contents;
console.log(JSON.stringify({ minified: code.length, gzipped: gzipSync(code, { level: 9 }).length }));
