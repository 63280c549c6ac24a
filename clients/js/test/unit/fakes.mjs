// A scripted fetch and WebSocket: the answers a test lists, and the requests it records.
export function scriptedFetch(answers) {
  const requests = [];
  const fetchImpl = async (url, init = {}) => {
    requests.push({ url: String(url), method: init.method ?? "GET", headers: { ...(init.headers ?? {}) }, body: init.body });
    const next = answers.shift();
    if (!next) throw new Error(`no answer scripted for ${init.method ?? "GET"} ${url}`);
    if (next instanceof Error) throw next;
    const { status = 200, body = null, headers = {} } = typeof next === "function" ? next(String(url), init) : next;
    const text = body === null ? "" : typeof body === "string" ? body : JSON.stringify(body);
    return new Response(status === 204 ? null : text, { status, headers });
  };
  return { fetch: fetchImpl, requests };
}

export class FakeSocket {
  static sockets = [];
  constructor(url, protocols) {
    this.url = url;
    this.protocols = protocols;
    this.onopen = this.onmessage = this.onclose = this.onerror = null;
    FakeSocket.sockets.push(this);
    queueMicrotask(() => this.onopen?.({}));
  }
  send(job, sequence, etag) {
    this.onmessage?.({ data: JSON.stringify({ type: "job", sequence, etag, job }) });
  }
  raw(data) { this.onmessage?.({ data }); }
  close() { const onclose = this.onclose; this.onclose = null; onclose?.({}); }
}
