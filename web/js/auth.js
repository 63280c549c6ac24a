// Where the bearer token comes from:
//  - "local": the local runner's config.json carries a fresh dev token (never in the cloud);
//  - "cognito": the Cognito hosted UI (authorization code with PKCE), ID token kept for the tab;
//  - "pasted": a token the person pasted, kept for the tab.

const PASTED = "image-jobs:pasted";
const COGNITO = "image-jobs:cognito";
const PKCE = "image-jobs:pkce";

export async function loadConfig() {
  try {
    const response = await fetch("config.json", { cache: "no-store" });
    return response.ok ? await response.json() : {};
  } catch {
    return {};
  }
}

export class Auth {
  constructor(config) {
    this.config = config;
    this.mode = config.token ? "local" : sessionStorage.getItem(COGNITO) ? "cognito"
      : sessionStorage.getItem(PASTED) ? "pasted" : null;
  }

  get api() {
    return this.config.api || JSON.parse(sessionStorage.getItem(PASTED) || "{}").api || null;
  }

  get signedIn() {
    return this.mode !== null && Boolean(this.api);
  }

  // The bearer token: the package asks before every request, and again after a 401.
  async token() {
    if (this.mode === "local") {
      if (expired(this.config.token)) {
        const config = await loadConfig(); // the runner mints a fresh one with each config.json
        if (config.token) this.config = config;
      }
      return this.config.token;
    }
    if (this.mode === "cognito") return JSON.parse(sessionStorage.getItem(COGNITO)).id_token;
    if (this.mode === "pasted") return JSON.parse(sessionStorage.getItem(PASTED)).token;
    return "";
  }

  usePasted(api, token) {
    sessionStorage.setItem(PASTED, JSON.stringify({ api, token }));
    this.mode = "pasted";
  }

  get cognito() {
    return this.config.cognito || null; // {domain: "https://….amazoncognito.com", client_id}
  }

  redirectUri() {
    return this.config.redirect_uri || `${location.origin}${location.pathname}`;
  }

  async signIn() {
    const verifier = base64url(crypto.getRandomValues(new Uint8Array(32)));
    const state = base64url(crypto.getRandomValues(new Uint8Array(16)));
    const challenge = base64url(new Uint8Array(
      await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier))));
    sessionStorage.setItem(PKCE, JSON.stringify({ verifier, state }));
    const query = new URLSearchParams({
      response_type: "code", client_id: this.cognito.client_id, redirect_uri: this.redirectUri(),
      scope: "openid email", state, code_challenge: challenge, code_challenge_method: "S256",
    });
    location.assign(`${this.cognito.domain}/oauth2/authorize?${query}`);
  }

  // Back from the hosted UI with ?code=…&state=…: trade the code for tokens. Returns an error
  // message, or null.
  async completeSignIn() {
    const params = new URLSearchParams(location.search);
    if (!this.cognito || !params.has("code")) return null;
    const pkce = JSON.parse(sessionStorage.getItem(PKCE) || "{}");
    sessionStorage.removeItem(PKCE);
    history.replaceState(null, "", this.redirectUri()); // the code is single use: drop it from the URL
    if (!pkce.state || params.get("state") !== pkce.state) return "Sign-in failed: start again";
    let response;
    try {
      response = await fetch(`${this.cognito.domain}/oauth2/token`, {
        method: "POST",
        headers: { "Content-Type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({
          grant_type: "authorization_code", client_id: this.cognito.client_id,
          code: params.get("code"), redirect_uri: this.redirectUri(), code_verifier: pkce.verifier,
        }),
      });
    } catch {
      return "Sign-in failed: Cognito could not be reached";
    }
    if (!response.ok) return "Sign-in failed: the code was refused";
    const tokens = await response.json();
    // API Gateway's Cognito authorizer (without OAuth scopes) takes the ID token.
    sessionStorage.setItem(COGNITO, JSON.stringify({ id_token: tokens.id_token }));
    this.mode = "cognito";
    return null;
  }

  signOut() {
    sessionStorage.removeItem(COGNITO);
    sessionStorage.removeItem(PASTED);
    if (this.mode === "cognito" && this.cognito) {
      const query = new URLSearchParams({ client_id: this.cognito.client_id, logout_uri: this.redirectUri() });
      location.assign(`${this.cognito.domain}/logout?${query}`);
      return;
    }
    location.reload();
  }
}

function base64url(bytes) {
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

// A JWT whose `exp` is less than a minute away (or unreadable: then the server decides).
function expired(token) {
  try {
    const payload = JSON.parse(atob(token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));
    return typeof payload.exp === "number" && payload.exp * 1000 < Date.now() + 60_000;
  } catch {
    return false;
  }
}
