// The page's one Client of the service, and its one push socket, both from the package
// @image-jobs/client (clients/js, bundled into web/vendor/ by `make web`). Every API, upload,
// poll and push call of the page goes through them.
import { Client, PushUnavailable, memoryStorage } from "../vendor/image-jobs-client.js";

// What the page shows in <picture> (card.js), unless config.json names the stage's formats.
const DEFAULT_FORMATS = ["avif", "webp"];
// A browser opens at most six connections to one origin over HTTP/1.1: four held polls leave
// two for uploads, cancels and fresh polls.
const MAX_HELD = 4;
// After the package gives up connecting (its tries spent, or no push on this stage), the page
// polls, and looks for the socket again this much later.
const PUSH_AGAIN_MS = 60_000;

// The package's base URL is the service's origin; config.json names the API root under it.
function origin(api) {
  const root = api.replace(/\/+$/, "");
  if (!root.endsWith("/api/v1")) throw new Error(`the API's address should end in /api/v1: ${api}`);
  return root.slice(0, -"/api/v1".length);
}

export function makeClient(config, auth) {
  return new Client({
    baseUrl: origin(auth.api),
    token: () => auth.token(),
    maxUploadBytes: config.max_upload_bytes,
    multipartThreshold: config.multipart_min_bytes,
    maxHeld: MAX_HELD,
    // An unfinished upload is kept by file (name, size, date): the same photo picked again
    // after a reload sends only what storage does not hold.
    storage: storageOrMemory(),
  });
}

export function formatsOf(config) {
  return Array.isArray(config.formats) ? config.formats : DEFAULT_FORMATS;
}

function storageOrMemory() {
  try {
    localStorage.setItem("image-jobs:probe", "1");
    localStorage.removeItem("image-jobs:probe");
    return localStorage;
  } catch {
    return memoryStorage(); // storage blocked (private mode, policy): resume within the tab only
  }
}

// The page's one socket: every card's job is watched on it. While it is open cards do not
// poll; when it closes (or never opens) they do (card.js). The package re-reads the watched
// unfinished jobs by GET after each open, orders messages (sequence, ETag, status) and reads a
// quiet job again after 15 s.
export class Live {
  constructor(client) {
    this.client = client;
    this.cards = new Map(); // job id -> card
    this.watch = null;
    this.connects = 0; // sockets opened so far: a job made while none was open may have missed news
  }

  get open() {
    return Boolean(this.watch?.connected);
  }

  start() {
    const watch = this.client.watch(null, {
      // A page shows many jobs that may wait their turn longer than 15 s (twenty uploads
      // at once): a quiet job is read again after a minute, so the socket alone carries them.
      quiet: 60,
      onOpen: () => {
        this.connects += 1;
        document.body.dataset.push = "open"; // for tests
        for (const card of this.cards.values()) card.pushOpened();
      },
      onClose: () => {
        document.body.dataset.push = "closed";
        for (const card of this.cards.values()) card.pushClosed();
      },
    });
    for (const card of this.cards.values()) watch.add(card.job);
    this.watch = watch;
    this.run(watch);
  }

  async run(watch) {
    try {
      for await (const job of watch) this.cards.get(job.jobId)?.pushed();
    } catch (error) {
      if (!(error instanceof PushUnavailable)) console.warn("push:", error.message);
      setTimeout(() => this.start(), PUSH_AGAIN_MS);
    }
  }

  // A card's job is followed here from now on (the card's Job object is updated in place).
  // One card a job: a list read while a photo was uploading may have shown its job already;
  // the card uploading it stays, the other goes.
  follow(card) {
    const other = this.cards.get(card.job.jobId);
    if (other && other !== card) {
      if (!card.uploading) return card.drop();
      other.drop();
    }
    this.cards.set(card.job.jobId, card);
    this.watch?.add(card.job);
  }

  has(jobId) {
    return this.cards.has(jobId);
  }

  forget(card) {
    if (card.job) this.cards.delete(card.job.jobId);
  }
}
