// Verify a webhook the service sent (Standard Webhooks, https://www.standardwebhooks.com):
//
//   const event = await verifyWebhook(secret, req.headers, rawBody); // the job, or a webhook.test
//
// The signature is base64(HMAC-SHA256(key, "<webhook-id>.<webhook-timestamp>.<body>")), key the
// base64 after `whsec_`; `webhook-signature` holds one `v1,<signature>` per secret the service
// signed with, space-separated (two for a day after a rotation). Pass every secret you accept
// during your own switch-over; any one matching is enough. Web Crypto's HMAC (Node 20+,
// browsers, edge runtimes) both signs and compares, in constant time; no other dependency.
import { ImageJobsError } from "./errors.js";

/** The webhook's signature matches no secret, its timestamp is out of tolerance, or it lacks
 * the Standard Webhooks headers. Answer it 4xx and drop it. */
export class WebhookVerificationError extends ImageJobsError {
  override name = "WebhookVerificationError";
}

export const WEBHOOK_SECRET_PREFIX = "whsec_";
/** How far the sender's timestamp may be from this clock, either way (the spec's default). */
export const WEBHOOK_TOLERANCE_SECONDS = 300;

/** Node's IncomingHttpHeaders, a fetch Headers, or any plain map of names to values. */
export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

export interface VerifyOptions {
  /** Seconds either way; default WEBHOOK_TOLERANCE_SECONDS. */
  tolerance?: number;
  /** This clock, in Unix seconds; default now. */
  now?: number;
}

/** The event's JSON body, once its signature matches one of `secret` and its timestamp is
 * within the tolerance. `body`: the raw bytes or text as received (re-serialised JSON would not
 * match). Rejects with WebhookVerificationError otherwise. */
export async function verifyWebhook(secret: string | readonly string[], headers: WebhookHeaders,
  body: string | Uint8Array | ArrayBuffer, options: VerifyOptions = {}): Promise<unknown> {
  const keys = (typeof secret === "string" ? [secret] : [...secret]).map(keyBytes);
  if (keys.length === 0) throw new TypeError("verifyWebhook needs at least one secret");
  const id = header(headers, "webhook-id");
  const timestamp = header(headers, "webhook-timestamp");
  const signatures = header(headers, "webhook-signature");
  if (!id || !timestamp || !signatures) {
    throw new WebhookVerificationError("missing webhook-id, webhook-timestamp or webhook-signature");
  }
  if (!/^\d+$/.test(timestamp)) throw new WebhookVerificationError("webhook-timestamp is not a number");
  const now = options.now ?? Date.now() / 1000;
  if (Math.abs(now - Number(timestamp)) > (options.tolerance ?? WEBHOOK_TOLERANCE_SECONDS)) {
    throw new WebhookVerificationError("webhook-timestamp is too old or too new");
  }
  const raw = typeof body === "string" ? new TextEncoder().encode(body)
    : body instanceof Uint8Array ? body : new Uint8Array(body);
  const prefix = new TextEncoder().encode(`${id}.${timestamp}.`);
  const signed = new Uint8Array(prefix.length + raw.length);
  signed.set(prefix);
  signed.set(raw, prefix.length);
  const given = signatures.split(" ").filter((s) => s.startsWith("v1,")).map((s) => s.slice(3));
  const subtle = globalThis.crypto.subtle;
  for (const key of keys) {
    const hmac = await subtle.importKey("raw", key, { name: "HMAC", hash: "SHA-256" }, false, ["verify"]);
    for (const signature of given) {
      const bytes = base64Bytes(signature);
      if (bytes && await subtle.verify("HMAC", hmac, bytes, signed)) return parse(raw);
    }
  }
  throw new WebhookVerificationError("no signature matches");
}

function header(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof (headers as Headers).get === "function") return (headers as Headers).get(name) ?? undefined;
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === name) return Array.isArray(value) ? value.join(" ") : value;
  }
  return undefined;
}

function keyBytes(secret: string): Uint8Array<ArrayBuffer> {
  const text = secret.startsWith(WEBHOOK_SECRET_PREFIX) ? secret.slice(WEBHOOK_SECRET_PREFIX.length) : secret;
  const bytes = base64Bytes(text);
  if (!bytes) throw new TypeError("a webhook secret is whsec_ followed by base64");
  return bytes;
}

function base64Bytes(text: string): Uint8Array<ArrayBuffer> | null {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0) return null;
  const binary = atob(text);
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}

function parse(raw: Uint8Array): unknown {
  try {
    return JSON.parse(new TextDecoder().decode(raw));
  } catch {
    throw new WebhookVerificationError("the body is not JSON");
  }
}
