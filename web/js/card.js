// One photo on the page: its upload, its job's status (from the page's push socket while it
// is open, else polled), and its buttons.
import { ProblemError } from "./api.js";
import { decode } from "./blurhash.js";
import { HOLD_SECONDS, MIN_HELD_MS, STOP_HTTP, TERMINAL, holds, pollDelay, sleep } from "./poll.js";

// Give up polling a job that is still not finished after this long; "Check again" resumes.
const DEADLINE_MS = 30 * 60 * 1000;
const LABELS = { awaiting_upload: "awaiting upload" };
// The placeholder is decoded this small (the longer side) and scaled up: it is a blur.
const PLACEHOLDER_SIDE = 32;
const SOURCE_TYPES = ["image/avif", "image/webp"];
// With the push socket open, an unfinished job with no news for this long is read by GET: a
// message may be lost without the socket closing. The schedule's longest wait, so that a card
// never learns later than polling would.
const QUIET_MS = 15_000;

export class JobCard {
  // saved: {jobId, name, size, startedAt} of a job made before a reload, to resume polling.
  // push: the page's PushChannel (push.js), or null.
  constructor(template, api, store, saved = {}, push = null) {
    this.api = api;
    this.store = store;
    this.push = push;
    this.etag = null; // the state shown, as its ETag
    this.polling = new AbortController(); // stops the polling alone, when the socket opens
    this.element = template.content.firstElementChild.cloneNode(true);
    this.$ = (selector) => this.element.querySelector(selector);
    this.jobId = saved.jobId || null;
    this.name = saved.name || "";
    this.size = saved.size || 0;
    this.startedAt = saved.startedAt || Date.now();
    this.job = null;
    this.controller = new AbortController(); // stops the upload and the polling
    this.$(".cancel").addEventListener("click", () => this.cancel());
    this.$(".delete").addEventListener("click", () => this.remove());
    this.render(saved.jobId ? "checking" : "uploading");
    if (this.jobId) this.push?.watch(this);
  }

  async upload(file) {
    this.name = file.name;
    this.size = file.size;
    this.render("uploading");
    const progress = this.$("progress");
    progress.hidden = false;
    const since = this.push?.open ? this.push.opened : null;
    try {
      const accepted = await this.api.upload(file, {
        signal: this.controller.signal,
        onProgress: (fraction) => { progress.value = fraction; },
        onCreated: (created) => {
          this.jobId = created.body.job_id;
          this.store.save(this);
          this.show(created.body);
          this.push?.watch(this, since);
        },
      });
      progress.hidden = true;
      await this.track(accepted.retryAfter);
    } catch (error) {
      progress.hidden = true;
      if (error.name === "AbortError") return;
      this.fail(error);
    }
  }

  // Polls the job until it is finished, per CONTRACT.md "How a client polls": each poll asks
  // to be held until the job changes (Prefer: wait) while one of the page's held slots is
  // free, and goes again at once after a held answer; otherwise it waits as scheduled.
  // Not while the push socket is open: it brings the changes, and pushClosed() polls again.
  async track(firstRetryAfter = null) {
    const signal = AbortSignal.any([this.controller.signal, this.polling.signal]);
    const deadline = Date.now() + DEADLINE_MS;
    let release = holds.take();
    let wait = release || firstRetryAfter === null ? 0 : pollDelay(0, firstRetryAfter);
    for (let poll = 1; ; poll++) {
      try {
        await sleep(wait, signal);
        if (this.push?.open) return release?.();
        release = release || holds.take();
        const asked = Date.now();
        const before = this.job?.status;
        let answer;
        try {
          answer = await this.api.getJob(this.jobId, signal, { waitSeconds: release ? HOLD_SECONDS : 0, etag: this.etag });
        } finally {
          release?.();
          release = null;
        }
        this.etag = answer.etag;
        this.show(answer.body);
        if (TERMINAL.has(answer.body.status)) return;
        const news = answer.body.status !== before || Date.now() - asked >= MIN_HELD_MS;
        wait = answer.held && news ? 0 : pollDelay(poll, answer.retryAfter);
      } catch (error) {
        if (error.name === "AbortError") return;
        if (!(error instanceof ProblemError) || STOP_HTTP.has(error.status)) return this.fail(error);
        // 429, 503, or the network: wait as told (or as scheduled) and ask again.
        wait = pollDelay(poll, error.retryAfter);
      }
      if (Date.now() > deadline) {
        this.render(this.job?.status || "unknown", "Stopped checking; reload the page to check again");
        return;
      }
    }
  }

  // The push socket opened: stop polling, and read the job once, since what changed while it
  // was down was never sent.
  async pushOpened() {
    if (!this.jobId || TERMINAL.has(this.job?.status)) return;
    this.polling.abort();
    this.polling = new AbortController();
    try {
      const answer = await this.api.getJob(this.jobId, this.controller.signal);
      this.pushed(answer.body, answer.etag);
      this.quiet();
    } catch (error) {
      if (error.name === "AbortError") return;
      if (!(error instanceof ProblemError) || STOP_HTTP.has(error.status)) return this.fail(error);
      setTimeout(() => this.pushOpened(), pollDelay(1, error.retryAfter));
    }
  }

  // The socket closed: poll until it is back.
  pushClosed() {
    if (this.jobId && !TERMINAL.has(this.job?.status)) this.track();
  }

  // A state from the socket (or the re-read after it opened), unless older than the one shown.
  pushed(job, etag) {
    if (!this.push.newer(this, job.status, etag)) return;
    this.etag = etag;
    this.show(job);
    this.quiet();
  }

  // Reads the job again after QUIET_MS without news while the socket is open.
  quiet() {
    clearTimeout(this.quietTimer);
    if (TERMINAL.has(this.job?.status)) return;
    this.quietTimer = setTimeout(() => { if (this.push?.open) this.pushOpened(); }, QUIET_MS);
  }

  async cancel() {
    this.stopWork();
    if (!this.jobId) {
      this.render("cancelled", "Stopped before the upload finished");
      return;
    }
    try {
      this.show((await this.api.cancel(this.jobId)).body);
    } catch (error) {
      this.fail(error);
      if (error.code !== "job_finished") return;
    }
    if (!TERMINAL.has(this.job?.status)) this.track(); // job_finished: show how it ended
  }

  async remove() {
    this.stopWork();
    if (this.jobId) {
      try {
        await this.api.remove(this.jobId);
      } catch (error) {
        if (error.status !== 404 && error.status !== 410) return this.fail(error);
      }
    }
    this.store.forget(this);
    this.push?.forget(this);
    clearTimeout(this.quietTimer);
    this.element.remove();
    clearInterval(this.ticker);
  }

  stopWork() {
    this.controller.abort();
    this.controller = new AbortController();
  }

  // A job resource (GET, cancel, or the 202's body).
  show(job) {
    this.job = { ...this.job, ...job };
    this.render(job.status);
    const ready = job.status === "ready" && job.renditions;
    const img = this.$("img");
    this.$(".links").hidden = !ready;
    if (ready) {
      const { display, thumb, thumb_512: thumb512 } = job.renditions;
      if (!img.src) { // a fresher URL for the same image would only reload it
        this.showPlaceholder(job.placeholder, display, img);
        // Both thumbnails, by width: the browser takes 512 px on 2x and 3x screens (jobs made
        // before thumb_512 existed have only the 256 px one).
        const sizes = [[thumb, 256], ...(thumb512 ? [[thumb512, 512]] : [])];
        addSources(img, sizes);
        img.sizes = THUMB_SIZES;
        img.srcset = sizes.map(([r, width]) => `${r.url} ${width}w`).join(", ");
        img.src = thumb.url;
      }
      img.alt = `Thumbnail of ${this.name || "the photo"}`;
      img.hidden = false;
      const link = this.$(".display");
      link.href = display.url;
      link.textContent = `Display size ${display.width}×${display.height}`;
    }
    if (job.status === "failed" && job.error) {
      this.showError(job.error.message, job.error.code);
    }
  }

  // CONTRACT.md's placeholder: the average colour at once, the BlurHash over it (decoded at
  // the renditions' aspect, cropped as the square thumbnail is), both gone once it loads.
  showPlaceholder(placeholder, display, img) {
    if (!placeholder) return; // jobs made ready before placeholders existed
    const box = this.$(".thumb");
    box.style.background = placeholder.average_color;
    const canvas = document.createElement("canvas");
    canvas.className = "placeholder";
    try {
      const scale = PLACEHOLDER_SIDE / Math.max(display.width, display.height);
      canvas.width = Math.max(1, Math.round(display.width * scale));
      canvas.height = Math.max(1, Math.round(display.height * scale));
      const pixels = decode(placeholder.blurhash, canvas.width, canvas.height);
      canvas.getContext("2d").putImageData(new ImageData(pixels, canvas.width, canvas.height), 0, 0);
      box.prepend(canvas);
    } catch (error) {
      console.warn("placeholder not shown:", error.message); // the colour alone then
    }
    img.addEventListener("load", () => {
      canvas.remove();
      box.style.background = "";
    }, { once: true });
  }

  fail(error) {
    this.showError(error.title || error.message, error.detail || error.code || "");
    if (!this.job || !TERMINAL.has(this.job.status)) this.render(this.job?.status || "error");
  }

  showError(title, detail) {
    this.$(".error").hidden = false;
    this.$(".error .title").textContent = title;
    this.$(".error .detail").textContent = detail || "";
  }

  render(status, note = "") {
    this.status = status;
    this.element.dataset.status = status;
    if (this.jobId) this.element.dataset.jobId = this.jobId;
    this.$(".name").textContent = this.name;
    this.$(".name").title = this.jobId ? `job ${this.jobId}` : "";
    this.$(".status").textContent = note || LABELS[status] || status;
    this.$(".size").textContent = this.size ? formatBytes(this.size) : "";
    this.$(".cancel").disabled = TERMINAL.has(status) || status === "error";
    this.tick();
    if (!this.ticker) this.ticker = setInterval(() => this.tick(), 1000);
    if (TERMINAL.has(status) || status === "error") {
      clearInterval(this.ticker);
      this.ticker = 0;
    }
  }

  // The time it took: the service's own (created → finished) once finished, else so far.
  tick() {
    const job = this.job || {};
    let seconds;
    if (job.finished_at && job.created_at) {
      seconds = (Date.parse(job.finished_at) - Date.parse(job.created_at)) / 1000;
    } else if (TERMINAL.has(this.status) || this.status === "error") {
      return;
    } else {
      seconds = (Date.now() - this.startedAt) / 1000;
    }
    this.$(".elapsed").textContent = seconds < 1 ? "<1 s" : `${Math.round(seconds)} s`;
  }
}

// The extra formats a rendition has, best first, as <source>s the browser picks from before
// the JPEG of the <img>; a format the browser cannot show it skips.
// The thumbnail box's width in CSS pixels (style.css: 6.5rem, 5rem on narrow screens).
const THUMB_SIZES = "(max-width: 30rem) 80px, 104px";

// A <source> per extra format that every size has, each a srcset of the sizes by width.
function addSources(img, sizes) {
  for (const type of SOURCE_TYPES) {
    if (!sizes.every(([r]) => r.variants && r.variants[type])) continue;
    const source = document.createElement("source");
    source.type = type;
    source.sizes = THUMB_SIZES;
    source.srcset = sizes.map(([r, width]) => `${r.variants[type].url} ${width}w`).join(", ");
    img.before(source);
  }
}

function formatBytes(bytes) {
  if (bytes < 1024 * 1024) return `${Math.max(1, Math.round(bytes / 1024))} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}
