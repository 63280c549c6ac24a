// One photo on the page: its upload, its job's status (from the page's push socket while it
// is open, else polled), and its buttons. The job is the package's Job (service.js's Client):
// upload, wait, cancel and delete are its calls.
import {
  ConnectionFailed, JobExpired, JobFinished, JobNotFound, StorageError, TERMINAL, UploadStopped,
  WaitCancelled, WaitTimeout, decodePlaceholder,
} from "../vendor/image-jobs-client.js";

// Give up polling a job that is still not finished after this long; a reload resumes.
const DEADLINE_SECONDS = 30 * 60;
const LABELS = { awaiting_upload: "awaiting upload" };
// The placeholder is decoded this small (the longer side) and scaled up: it is a blur.
const PLACEHOLDER_SIDE = 32;
const SOURCE_TYPES = ["image/avif", "image/webp"];

export class JobCard {
  // saved: {jobId, name, size, startedAt} of a job made before a reload, to resume polling.
  // live: the page's one socket (service.js); formats: the extra formats uploads ask for.
  // job: the package's Job when the page has it already (client.jobs()).
  constructor(template, { client, live, store, formats }, saved = {}, job = null) {
    this.client = client;
    this.live = live;
    this.store = store;
    this.formats = formats;
    this.polling = new AbortController(); // stops the polling alone, when the socket opens
    this.element = template.content.firstElementChild.cloneNode(true);
    this.$ = (selector) => this.element.querySelector(selector);
    this.job = job ?? (saved.jobId ? client.job(saved.jobId) : null);
    this.name = saved.name || "";
    this.size = saved.size || 0;
    this.startedAt = saved.startedAt || Date.now();
    this.controller = new AbortController(); // stops the upload and the polling
    this.$(".cancel").addEventListener("click", () => this.cancel());
    this.$(".delete").addEventListener("click", () => this.remove());
    this.render(saved.jobId ? "checking" : "uploading");
    if (this.job) this.live.follow(this);
  }

  get jobId() {
    return this.job?.jobId ?? null;
  }

  async upload(file) {
    this.uploading = true; // until the file is stored: this card is the job's (service.js's follow)
    try {
      await this.send(file);
    } finally {
      this.uploading = false;
    }
  }

  async send(file) {
    this.name = file.name;
    this.size = file.size;
    this.render("uploading");
    const progress = this.$("progress");
    progress.hidden = false;
    const { signal } = this.controller;
    const since = this.live.open ? this.live.connects : null;
    try {
      await this.client.upload(file, {
        formats: this.formats, metadata: nameMetadata(file.name), signal,
        onProgress: (sent, total) => { progress.value = total ? sent / total : 0; },
        onCreated: (job) => {
          this.job = job;
          this.store.save(this);
          this.live.follow(this); // a newer state the socket already brought is taken
          this.show();
          // A socket opened since the upload began may have missed the job's first changes
          // (the package re-read the jobs it watched then, and this one was not among them).
          if (this.live.open && since !== this.live.connects) this.reread();
        },
      });
      progress.hidden = true;
      this.show();
      await this.track();
    } catch (error) {
      progress.hidden = true;
      if (signal.aborted || error instanceof UploadStopped) return;
      this.fail(error);
    }
  }

  // Polls the job until it is finished (the package's job.wait(): held polls while one of the
  // client's four held slots is free, else CONTRACT.md's schedule). Not while the push socket
  // is open: it brings the changes, and pushClosed() polls again.
  async track() {
    if (!this.job || this.job.finished || this.live.open) return;
    this.polling.abort();
    this.polling = new AbortController();
    const signal = AbortSignal.any([this.controller.signal, this.polling.signal]);
    try {
      await this.job.wait({ signal, timeout: DEADLINE_SECONDS, onStatus: () => this.show() });
      this.show();
    } catch (error) {
      if (error instanceof WaitCancelled) return;
      if (error instanceof WaitTimeout) {
        this.render(this.job.status || "unknown", "Stopped checking; reload the page to check again");
        return;
      }
      this.fail(error);
    }
  }

  // The push socket opened: stop polling (the package re-reads the job by GET).
  pushOpened() {
    this.polling.abort();
    this.polling = new AbortController();
  }

  async reread() {
    try {
      await this.job.refresh({ signal: this.controller.signal });
      this.show();
    } catch (error) {
      if (this.controller.signal.aborted) return;
      this.fail(error);
    }
  }

  // The socket closed: poll until it is back.
  pushClosed() {
    this.track();
  }

  // The socket (or the package's re-read after it opened) brought a newer state of the job.
  pushed() {
    this.show();
  }

  async cancel() {
    this.stopWork();
    if (!this.job) {
      this.render("cancelled", "Stopped before the upload finished");
      return;
    }
    try {
      await this.job.cancel();
      this.show();
    } catch (error) {
      this.fail(error);
      if (!(error instanceof JobFinished)) return;
    }
    if (!this.job.finished) this.track(); // job_finished: show how it ended
  }

  async remove() {
    this.stopWork();
    if (this.job) {
      try {
        await this.job.delete();
      } catch (error) {
        if (!(error instanceof JobNotFound || error instanceof JobExpired)) return this.fail(error);
      }
    }
    this.store.forget(this);
    this.live.forget(this);
    this.element.remove();
    clearInterval(this.ticker);
  }

  // Another card shows this job (service.js's follow): this one goes, the job stays.
  drop() {
    this.stopWork();
    this.element.remove();
    clearInterval(this.ticker);
  }

  stopWork() {
    this.controller.abort();
    this.controller = new AbortController();
  }

  // The job as last read (upload answer, GET, cancel, or a push message).
  show() {
    const job = this.job;
    if (!job?.status) return;
    this.render(job.status);
    const { display, thumb, thumb_512: thumb512 } = job.renditions;
    const ready = job.ready && display && thumb;
    const img = this.$("img");
    this.$(".links").hidden = !ready;
    if (ready) {
      if (!img.src) { // a fresher URL for the same image would only reload it
        this.showPlaceholder(display, img);
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

  // CONTRACT.md's placeholder: the average colour at once, the BlurHash over it (the package
  // decodes it at the renditions' aspect; cropped as the square thumbnail is), both gone once
  // the thumbnail loads.
  showPlaceholder(display, img) {
    const box = this.$(".thumb");
    let decoded;
    try {
      decoded = decodePlaceholder(this.job, PLACEHOLDER_SIDE);
    } catch (error) {
      console.warn("placeholder not shown:", error.message); // the colour alone then
    }
    const colour = decoded?.averageColor ?? this.job.placeholder?.average_color;
    if (!colour) return; // jobs made ready before placeholders existed
    box.style.background = colour;
    const canvas = document.createElement("canvas");
    canvas.className = "placeholder";
    if (decoded) {
      canvas.width = decoded.width;
      canvas.height = decoded.height;
      canvas.getContext("2d").putImageData(new ImageData(decoded.pixels, decoded.width, decoded.height), 0, 0);
      box.prepend(canvas);
    }
    img.addEventListener("load", () => {
      canvas.remove();
      box.style.background = "";
    }, { once: true });
  }

  fail(error) {
    if (error instanceof StorageError) {
      this.showError("Storage refused the upload", error.storageMessage);
    } else if (error instanceof ConnectionFailed) {
      this.showError("The service could not be reached", "");
    } else {
      const title = error.title || error.message;
      this.showError(title, (error.detail !== title && error.detail) || error.code || "");
    }
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
    const { createdAt, finishedAt } = this.job ?? {};
    let seconds;
    if (createdAt && finishedAt) {
      seconds = (finishedAt - createdAt) / 1000;
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

// A <source> per extra format that every size has, each a srcset of the sizes by width. An
// animated source's animations come first (docs/contract.md "Animations"): a browser that
// shows WebP plays them, one that does not takes the stills after them.
function addSources(img, sizes) {
  if (sizes.every(([r]) => r.animation)) {
    const source = document.createElement("source");
    source.type = sizes[0][0].animation.contentType;
    source.className = "animation";
    source.sizes = THUMB_SIZES;
    // By each animation's own width (never upscaled: a small source's squares may be one
    // size); a width already offered adds nothing.
    const widths = new Map();
    for (const [r, box] of sizes) {
      const width = r.animation.width ?? box;
      if (!widths.has(width)) widths.set(width, r.animation.url);
    }
    source.srcset = [...widths].map(([width, url]) => `${url} ${width}w`).join(", ");
    img.before(source);
  }
  for (const type of SOURCE_TYPES) {
    if (!sizes.every(([r]) => r.variants && r.variants[type])) continue;
    const source = document.createElement("source");
    source.type = type;
    source.sizes = THUMB_SIZES;
    source.srcset = sizes.map(([r, width]) => `${r.variants[type].url} ${width}w`).join(", ");
    img.before(source);
  }
}

// The job's metadata (docs/contract.md "Metadata"): the file's name, so that the page's list
// shows it in another browser too. Within the bounds: 200 characters (2,048 bytes in all), no
// control characters.
export function nameMetadata(name) {
  return { name: [...name.replace(/[\u0000-\u001f\u007f-\u009f]/g, "")].slice(0, 200).join("") || "photo" };
}

function formatBytes(bytes) {
  if (bytes < 1024 * 1024) return `${Math.max(1, Math.round(bytes / 1024))} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}
