// The page: where the token comes from, the drop zone, and one card per photo.
import { Auth, loadConfig } from "./auth.js";
import { JobCard } from "./card.js";
import { Live, formatsOf, makeClient } from "./service.js";

// The jobs of this page, kept across reloads so that polling resumes from the job id alone.
class JobStore {
  constructor(api) {
    this.key = `image-jobs:jobs:${api}`;
  }

  all() {
    try {
      return JSON.parse(localStorage.getItem(this.key) || "[]");
    } catch {
      return [];
    }
  }

  save(card) {
    const rest = this.all().filter((saved) => saved.jobId !== card.jobId);
    const { jobId, name, size, startedAt } = card;
    localStorage.setItem(this.key, JSON.stringify([...rest, { jobId, name, size, startedAt }]));
  }

  forget(card) {
    localStorage.setItem(this.key, JSON.stringify(this.all().filter((s) => s.jobId !== card.jobId)));
  }
}

const $ = (selector) => document.querySelector(selector);

async function main() {
  const config = await loadConfig();
  const auth = new Auth(config);
  const signInError = await auth.completeSignIn();
  const who = $("#who");
  if (!auth.signedIn) {
    showSignIn(auth, signInError);
    who.textContent = signInError || "Sign in to upload photos.";
    return;
  }
  const client = makeClient(config, auth);
  describe(who, auth);

  const live = new Live(client); // one socket for every card; cards poll while it is down
  const page = { client, live, store: new JobStore(auth.api), formats: formatsOf(config) };
  const list = $("#jobs");
  const template = $("#job-template");
  const shown = new Set();
  for (const saved of page.store.all().reverse()) {
    const card = new JobCard(template, page, saved);
    list.append(card.element);
    card.track();
    shown.add(saved.jobId);
  }
  live.start();
  listed(page, template, list, shown); // the rest, from any browser

  const add = (files) => {
    const cards = files.map(() => new JobCard(template, page));
    list.prepend(...cards.map((card) => card.element)); // newest first, in the order picked
    cards.forEach((card, i) => card.upload(files[i]));
  };
  const input = $("#files");
  input.addEventListener("change", () => { add([...input.files]); input.value = ""; });
  const drop = $("#drop");
  drop.addEventListener("dragover", (event) => { event.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (event) => {
    event.preventDefault();
    drop.classList.remove("over");
    add([...event.dataTransfer.files]);
  });
  drop.addEventListener("keydown", (event) => {
    if (event.key === "Enter" || event.key === " ") { event.preventDefault(); input.click(); }
  });
  document.body.dataset.ready = "true"; // for tests: the page is wired
}

// The owner's jobs that this browser did not save (another browser's, or cleared storage):
// the first pages of GET /image-jobs (the package's client.jobs()), newest first, after the
// saved ones.
const LISTED_PAGES = 2;
const PAGE_SIZE = 50;

async function listed(page, template, list, shown) {
  let seen = 0;
  try {
    for await (const job of page.client.jobs({ pageSize: PAGE_SIZE })) {
      if (++seen > LISTED_PAGES * PAGE_SIZE) break;
      if (shown.has(job.jobId) || page.live.has(job.jobId)) continue; // saved, or uploading here
      shown.add(job.jobId);
      const saved = { jobId: job.jobId, name: job.metadata.name || "", startedAt: job.createdAt?.getTime() };
      const card = new JobCard(template, page, saved, job);
      list.append(card.element);
      card.show();
      card.track();
    }
  } catch (error) {
    console.warn("the list of jobs could not be read:", error.message); // the saved ones stay
  }
  list.dataset.listed = "true"; // for tests: the list is read
}

function describe(who, auth) {
  const host = new URL(auth.api).host;
  const text = { local: `Local mode: dev token, API ${host}`, cognito: `Signed in, API ${host}`,
    pasted: `Pasted token, API ${host}` }[auth.mode];
  who.textContent = text;
  if (auth.mode !== "local") {
    const out = document.createElement("button");
    out.type = "button";
    out.textContent = "Sign out";
    out.className = "link";
    out.addEventListener("click", () => auth.signOut());
    who.append(" ", out);
  }
}

function showSignIn(auth, error) {
  $("#signin").hidden = false;
  $("#drop").hidden = true;
  if (auth.cognito) {
    const button = $("#signin-cognito");
    button.hidden = false;
    button.addEventListener("click", () => auth.signIn());
  }
  if (auth.config.api) $("#api-url").value = auth.config.api;
  $("#token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const form = new FormData(event.target);
    auth.usePasted(form.get("api").trim(), form.get("token").trim());
    location.reload();
  });
  if (error) console.warn(error);
}

main();
