// One WebSocket for every card on the page (docs/contract.md "Push"). While it is open, cards
// learn their job's changes from it and do not poll; when it closes (or never opens), they
// poll as before (card.js, poll.js), and after a reconnect each unfinished card reads its job
// once by GET, since messages sent while the socket was down are lost.

export const PUSH_PROTOCOL = "image-jobs.v1";
// Reconnect waits: doubling from the first, capped, each between half and all of it, so that
// pages dropped together do not all come back in the same instant.
const BACKOFF_FIRST_MS = 500;
const BACKOFF_MAX_MS = 30_000;
// A job's status never moves back along this order (a re-claim stays "processing"): a GET
// answer, which has no sequence, still orders against the messages.
const STEP = { awaiting_upload: 0, queued: 1, processing: 2, ready: 3, failed: 3, cancelled: 3 };

export class PushChannel {
  constructor(api, random = Math.random) {
    this.api = api;
    this.random = random;
    this.cards = new Map(); // job id -> card
    this.latest = new Map(); // job id -> {sequence, etag, job}: a message before its card exists
    this.open = false;
    this.opened = 0; // sockets opened so far: a card that saw another one may have missed a message
    this.socket = null;
    this.failures = 0;
  }

  // Finds the URL and connects; false when the service has no push (cards just poll).
  async start() {
    let url;
    try {
      url = (await this.api.call("GET", `${this.api.base}/push`)).body?.url;
    } catch {
      url = null;
    }
    if (!url) return false;
    this.url = url;
    this.connect();
    return true;
  }

  async connect() {
    const token = await this.api.auth.token();
    let socket;
    try {
      socket = new WebSocket(this.url, [PUSH_PROTOCOL, `bearer.${token}`]);
    } catch {
      return this.retry();
    }
    this.socket = socket;
    socket.onopen = () => {
      this.open = true;
      this.opened += 1;
      this.failures = 0;
      document.body.dataset.push = "open"; // for tests
      for (const card of this.cards.values()) card.pushOpened();
    };
    socket.onmessage = (event) => this.take(event.data);
    socket.onclose = () => {
      const wasOpen = this.open;
      this.open = false;
      this.socket = null;
      document.body.dataset.push = "closed";
      if (wasOpen) for (const card of this.cards.values()) card.pushClosed();
      else this.failures += 1;
      this.retry();
    };
  }

  retry() {
    const base = Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** Math.max(0, this.failures - 1));
    setTimeout(() => this.connect(), base * (0.5 + 0.5 * this.random()));
  }

  // A card with a job id follows its job here from now on. since: the `opened` count when
  // its upload began; a socket opened since then may have missed the job's first changes.
  watch(card, since = null) {
    this.cards.set(card.jobId, card);
    const known = this.latest.get(card.jobId);
    if (known) card.pushed(known.job, known.etag);
    if (this.open && since !== this.opened) card.pushOpened();
    else card.quiet();
  }

  forget(card) {
    this.cards.delete(card.jobId);
  }

  take(data) {
    let message;
    try { message = JSON.parse(data); } catch { return; }
    if (message?.type !== "job" || typeof message.job?.job_id !== "string") return; // unknown types: ignored
    const { job, sequence, etag } = message;
    const held = this.latest.get(job.job_id);
    if (held && sequence <= held.sequence) return;
    this.latest.set(job.job_id, { sequence, etag, job });
    this.cards.get(job.job_id)?.pushed(job, etag);
  }

  // Older than, or the same as, what the card shows (perhaps from a GET): dropped.
  newer(card, status, etag) {
    if (etag && etag === card.etag) return false;
    const held = STEP[card.job?.status];
    const step = STEP[status];
    return held === undefined || step === undefined || step >= held;
  }
}
