// The page: where the token comes from, the drop zone, and one card per photo.
import { Api } from "./api.js";
import { Auth, loadConfig } from "./auth.js";
import { JobCard } from "./card.js";
import { PushChannel } from "./push.js";

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
  const api = new Api(auth.api, auth, {
    maxUploadBytes: config.max_upload_bytes, multipartMinBytes: config.multipart_min_bytes,
    formats: config.formats });
  describe(who, auth);

  const push = new PushChannel(api); // one socket for every card; cards poll while it is down
  push.start();
  const store = new JobStore(auth.api);
  const list = $("#jobs");
  const template = $("#job-template");
  for (const saved of store.all().reverse()) {
    const card = new JobCard(template, api, store, saved, push);
    list.append(card.element);
    card.track();
  }

  const add = (files) => {
    const cards = files.map(() => new JobCard(template, api, store, {}, push));
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
