import { consoleId } from './console-elements.js';
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
  /** The scope asked for in the exchange: reading, and reading and changing. */
  scope: string;
  editScope: string;
  /** Where a customer sees their own account. */
  accountUrl: string;
}

const CONSOLE_STYLE = `
.banner { background: #fff4e5; border-bottom: 3px solid #b54708; color: #7a2e0e; padding: 10px 24px; display: flex; align-items: center; gap: 16px; flex-wrap: wrap; }
.banner p { margin: 0; flex: 1; font-size: 15px; }
.banner button { margin: 0; background: #b42318; }
.notice { border: 1px solid #abefc6; background: var(--ok-bg); color: var(--ok); border-radius: 6px; padding: 10px 14px; margin: 12px 0; }
/* The shared .error keeps a message's line breaks (pre-wrap); here the lines are elements, and the
   page's own line breaks and indentation between them would show as blank lines. */
.error { white-space: normal; }
.error p { margin: 0; white-space: pre-wrap; }
.error .code { font-size: 12px; color: #7a271a; margin-top: 4px; font-family: ui-monospace, Menlo, monospace; }
.error button { margin-top: 8px; }
.steps { list-style: none; padding: 0; margin: 0; }
.steps li { padding: 6px 0 6px 28px; position: relative; }
.steps li::before { position: absolute; left: 0; width: 20px; text-align: center; }
.steps li.pending::before { content: "…"; color: var(--muted); }
.steps li.done::before { content: "✓"; color: var(--ok); font-weight: 700; }
.steps li.failed::before { content: "✗"; color: var(--bad); font-weight: 700; }
.row { display: grid; grid-template-columns: 1fr 1fr; gap: 0 16px; }
.badge { display: inline-block; padding: 2px 8px; border-radius: 10px; background: #e0e8f9; font-size: 12px; font-weight: 600; }
.countdown.expired { color: var(--bad); font-weight: 600; }
dl.profile { display: grid; grid-template-columns: 170px 1fr; gap: 4px 12px; margin: 0; }
dl.profile dt { color: var(--muted); font-weight: 600; }
dl.profile dd { margin: 0; }
.card h3 { font-size: 15px; margin: 20px 0 8px; }
details.protocol > summary { cursor: pointer; font-weight: 600; }
.waiting { border-left: 4px solid var(--accent); }
.waiting-message { font-size: 17px; font-weight: 600; margin: 0 0 6px; }
[hidden] { display: none !important; }
`;

export function consolePage(config: ConsoleConfig): string {
  // `<` is escaped so the JSON cannot close the script element.
  const json = JSON.stringify(config).replace(/</g, '\\u003c');
  return page(
    'Support console',
    `<header>
  <h1>Support console</h1>
  <span class="who" id="${consoleId('signed-in-user')}" hidden></span>
  <button class="secondary" id="${consoleId('sign-out')}" type="button" hidden style="margin: 0">Sign out</button>
</header>
<div class="banner" id="${consoleId('acting-banner')}" role="status" hidden>
  <p>Acting as <strong id="${consoleId('banner-customer')}"></strong> · ticket <strong id="${consoleId('banner-ticket')}"></strong> · <span id="${consoleId('banner-time')}"></span></p>
  <button id="${consoleId('stop')}" type="button">Stop impersonating</button>
</div>
<main>
  <div class="error" id="${consoleId('error')}" role="alert" hidden>
    <p id="${consoleId('error-message')}"></p>
    <p class="code" id="${consoleId('error-code')}"></p>
    <button id="${consoleId('error-action')}" type="button" hidden>Sign in again</button>
  </div>
  <div class="notice" id="${consoleId('notice')}" role="status" hidden></div>

  <section class="card" id="${consoleId('sign-in-card')}" hidden>
    <h2>Sign in</h2>
    <p>Support engineers sign in at the identity service (authorization code with PKCE, public client
    <code>${escapeHtml(config.clientId)}</code>).</p>
    <button id="${consoleId('sign-in')}" type="button">Sign in</button>
  </section>

  <section class="card" id="${consoleId('not-support-card')}" hidden>
    <h2>This console is for support staff</h2>
    <p>Your account has no access to other customers' accounts. To see who from support accessed
    your own account, open <a href="${escapeHtml(config.accountUrl)}">your account's activity</a>.</p>
  </section>

  <section class="card" id="${consoleId('impersonate-card')}" hidden>
    <h2>Act as a customer</h2>
    <form id="${consoleId('impersonate-form')}">
      <label for="${consoleId('user')}">Customer (login)</label>
      <input id="${consoleId('user')}" name="user" required placeholder="bob" autocomplete="off" spellcheck="false">
      <div class="row">
        <div>
          <label for="${consoleId('reason')}">Reason</label>
          <input id="${consoleId('reason')}" name="reason" required placeholder="Customer cannot see their invoices">
        </div>
        <div>
          <label for="${consoleId('ticket')}">Ticket</label>
          <input id="${consoleId('ticket')}" name="ticket" required placeholder="T-1234" autocomplete="off">
        </div>
      </div>
      <button id="${consoleId('impersonate')}" type="submit">Impersonate</button>
    </form>
  </section>

  <section class="card waiting" id="${consoleId('waiting-card')}" hidden>
    <h2>Asking the customer</h2>
    <p class="waiting-message" id="${consoleId('waiting-message')}" role="status"></p>
    <p class="muted" id="${consoleId('waiting-detail')}"></p>
    <button class="secondary" id="${consoleId('stop-waiting')}" type="button">Stop waiting</button>
  </section>

  <section class="card" id="${consoleId('customer-card')}" hidden aria-labelledby="${consoleId('customer-title')}">
    <h2 id="${consoleId('customer-title')}"></h2>
    <p class="muted" id="${consoleId('customer-access')}"></p>
    <dl class="profile">
      <dt>Name</dt><dd id="${consoleId('profile-name')}"></dd>
      <dt>Email</dt><dd id="${consoleId('profile-email')}"></dd>
      <dt>Plan</dt><dd id="${consoleId('profile-plan')}"></dd>
      <dt>Customer since</dt><dd id="${consoleId('profile-since')}"></dd>
      <dt>Shipping address</dt><dd id="${consoleId('profile-address')}"></dd>
    </dl>
    <button class="secondary" id="${consoleId('edit-address')}" type="button">Edit shipping address</button>
    <form id="${consoleId('address-form')}" hidden>
      <label for="${consoleId('address-line1')}">Street</label>
      <input id="${consoleId('address-line1')}" name="line1" required autocomplete="off">
      <div class="row">
        <div><label for="${consoleId('address-city')}">City</label><input id="${consoleId('address-city')}" name="city" required autocomplete="off"></div>
        <div><label for="${consoleId('address-postcode')}">Postcode</label><input id="${consoleId('address-postcode')}" name="postcode" required autocomplete="off"></div>
      </div>
      <label for="${consoleId('address-country')}">Country</label>
      <input id="${consoleId('address-country')}" name="country" required autocomplete="off">
      <button id="${consoleId('save-address')}" type="submit">Save address</button>
      <button class="secondary" id="${consoleId('cancel-address')}" type="button">Cancel</button>
    </form>
    <h3>Orders</h3>
    <table id="${consoleId('orders')}"><thead><tr><th scope="col">Order</th><th scope="col">Placed on</th><th scope="col">Items</th><th scope="col">Total</th><th scope="col">Status</th></tr></thead><tbody></tbody></table>
    <h3>Invoices</h3>
    <table id="${consoleId('invoices')}"><thead><tr><th scope="col">Invoice</th><th scope="col">Issued on</th><th scope="col">Amount</th><th scope="col">Status</th></tr></thead><tbody></tbody></table>
  </section>

  <details class="card protocol" id="${consoleId('details')}">
    <summary>Details (the protocol, for developers)</summary>
    <section id="${consoleId('progress-card')}" hidden>
      <h2>Flow</h2>
      <ol class="steps" id="${consoleId('steps')}"></ol>
    </section>
    <section id="${consoleId('token-card')}" hidden>
      <h2>Impersonation access token</h2>
      <table>
        <tr><th scope="row">sub (acting as)</th><td><code id="${consoleId('claim-sub')}"></code></td></tr>
        <tr><th scope="row">act (actor)</th><td><code id="${consoleId('claim-act')}"></code></td></tr>
        <tr><th scope="row">aud (resource)</th><td><code id="${consoleId('claim-aud')}"></code></td></tr>
        <tr><th scope="row">scope</th><td><code id="${consoleId('claim-scope')}"></code></td></tr>
        <tr><th scope="row">impersonation_context</th><td><pre id="${consoleId('claim-context')}"></pre></td></tr>
        <tr><th scope="row">exp</th><td><span class="countdown" id="${consoleId('claim-exp')}"></span></td></tr>
      </table>
      <details>
        <summary class="muted">All claims</summary>
        <pre id="${consoleId('claims-raw')}"></pre>
      </details>
    </section>
    <section id="${consoleId('api-card')}" hidden>
      <h2>Demo resource API <span class="badge">GET /api/me</span></h2>
      <p id="${consoleId('api-message')}"></p>
      <pre id="${consoleId('api-answer')}"></pre>
    </section>
    <p class="muted" id="${consoleId('details-empty')}">Nothing yet: impersonate a customer to see the token exchange step by step.</p>
  </details>
</main>
<script type="application/json" id="${consoleId('config')}">${json}</script>
<script type="module" src="/console.js"></script>`,
    `<style>${CONSOLE_STYLE}</style>`,
  );
}
