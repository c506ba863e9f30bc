import { escapeHtml, page } from './http.js';

/** What the console script needs to know; embedded in the page as JSON. */
export interface ConsoleConfig {
  issuer: string;
  clientId: string;
  redirectUri: string;
  authorizationEndpoint: string;
  tokenEndpoint: string;
  userinfoEndpoint: string;
  /** RP-initiated logout: signing out ends the identity service's session too. */
  endSessionEndpoint: string;
  postLogoutRedirectUri: string;
  /** The resource the impersonation token is for. */
  resource: string;
  /** The scope asked for in the exchange. */
  scope: string;
}

const CONSOLE_STYLE = `
.steps { list-style: none; padding: 0; margin: 0; }
.steps li { padding: 6px 0 6px 28px; position: relative; }
.steps li::before { position: absolute; left: 0; width: 20px; text-align: center; }
.steps li.pending::before { content: "…"; color: var(--muted); }
.steps li.done::before { content: "✓"; color: var(--ok); font-weight: 700; }
.steps li.failed::before { content: "✗"; color: var(--bad); font-weight: 700; }
.row { display: grid; grid-template-columns: 1fr 1fr; gap: 0 16px; }
.badge { display: inline-block; padding: 2px 8px; border-radius: 10px; background: #e0e8f9; font-size: 12px; font-weight: 600; }
.countdown.expired { color: var(--bad); font-weight: 600; }
[hidden] { display: none !important; }
`;

export function consolePage(config: ConsoleConfig): string {
  // `<` is escaped so the JSON cannot close the script element.
  const json = JSON.stringify(config).replace(/</g, '\\u003c');
  return page('Support console', `<header>
  <h1>Support console</h1>
  <span class="who" id="signed-in-user" hidden></span>
  <button class="secondary" id="sign-out" type="button" hidden style="margin: 0">Sign out</button>
</header>
<main>
  <div class="error" id="error" role="alert" hidden></div>

  <section class="card" id="sign-in-card" hidden>
    <h2>Sign in</h2>
    <p>Support engineers sign in at the identity service (authorization code with PKCE, public client
    <code>${escapeHtml(config.clientId)}</code>).</p>
    <button id="sign-in" type="button">Sign in</button>
  </section>

  <section class="card" id="impersonate-card" hidden>
    <h2>Impersonate a user</h2>
    <form id="impersonate-form">
      <label for="user">User</label>
      <input id="user" name="user" required placeholder="bob" autocomplete="off" spellcheck="false">
      <div class="row">
        <div>
          <label for="reason">Reason</label>
          <input id="reason" name="reason" required placeholder="Customer cannot see their invoices">
        </div>
        <div>
          <label for="ticket">Ticket</label>
          <input id="ticket" name="ticket" required placeholder="T-1234" autocomplete="off">
        </div>
      </div>
      <button id="impersonate" type="submit">Impersonate</button>
    </form>
  </section>

  <section class="card" id="progress-card" hidden>
    <h2>Flow</h2>
    <ol class="steps" id="steps"></ol>
  </section>

  <section class="card" id="token-card" hidden>
    <h2>Impersonation access token</h2>
    <table>
      <tr><th>sub (acting as)</th><td><code id="claim-sub"></code></td></tr>
      <tr><th>act (actor)</th><td><code id="claim-act"></code></td></tr>
      <tr><th>aud (resource)</th><td><code id="claim-aud"></code></td></tr>
      <tr><th>scope</th><td><code id="claim-scope"></code></td></tr>
      <tr><th>impersonation_context</th><td><pre id="claim-context"></pre></td></tr>
      <tr><th>exp</th><td><span class="countdown" id="claim-exp"></span></td></tr>
    </table>
    <details>
      <summary class="muted">All claims</summary>
      <pre id="claims-raw"></pre>
    </details>
  </section>

  <section class="card" id="api-card" hidden>
    <h2>Demo resource API <span class="badge">GET /api/me</span></h2>
    <p id="api-message"></p>
    <pre id="api-answer"></pre>
  </section>
</main>
<script type="application/json" id="config">${json}</script>
<script type="module" src="/console.js"></script>`, `<style>${CONSOLE_STYLE}</style>`);
}
