// What the end-to-end tests share: the stack's addresses from the environment (set by
// tests/e2e/test_js_sdk.py), a fetch that counts requests, a file-backed storage and a
// TCP proxy that can cut the push socket.
import fs from "node:fs";
import net from "node:net";
import WebSocket from "ws";
import { Client } from "../../dist/index.js";

export const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run through tests/e2e/test_js_sdk.py`);
  return value;
};

export function counting() {
  const calls = [];
  const fetchImpl = (url, init = {}) => {
    calls.push({ method: init.method ?? "GET", url: String(url), prefer: init.headers?.Prefer ?? null });
    return fetch(url, init);
  };
  return { calls, fetch: fetchImpl };
}

export function client(options = {}) {
  return new Client({ baseUrl: env("IMAGE_JOBS_URL"), token: env("IMAGE_JOBS_TOKEN"), WebSocket, ...options });
}

/** An UploadStorage kept in a JSON file: what an app's AsyncStorage is across restarts. */
export function fileStorage(path) {
  const read = () => { try { return JSON.parse(fs.readFileSync(path, "utf8")); } catch { return {}; } };
  const write = (items) => fs.writeFileSync(path, JSON.stringify(items));
  return {
    getItem: async (key) => read()[key] ?? null,
    setItem: async (key, value) => write({ ...read(), [key]: value }),
    removeItem: async (key) => { const items = read(); delete items[key]; write(items); },
  };
}

/** 127.0.0.1:listenPort forwarding to targetPort; cut() ends every connection open now. */
export function cuttableProxy(listenPort, targetPort) {
  const open = new Set();
  const server = net.createServer((downstream) => {
    const upstream = net.connect(targetPort, "127.0.0.1");
    open.add(downstream);
    downstream.pipe(upstream).pipe(downstream);
    const end = () => { open.delete(downstream); downstream.destroy(); upstream.destroy(); };
    downstream.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
  });
  return new Promise((resolve) => server.listen(listenPort, "127.0.0.1", () => resolve({
    accepted: () => open.size,
    cut() { for (const socket of open) socket.destroy(); },
    close() { this.cut(); server.close(); },
  })));
}
