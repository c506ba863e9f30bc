/**
 * The identity service's pages: sign-in, the landing page, and the pages
 * oidc-provider asks the deployment to render (errors, sign-out). Each takes
 * what it shows and returns the HTML.
 */
import type { Interaction } from 'oidc-provider';
import { escapeHtml, page } from '../http.js';
import { describeUser, type DemoUser } from '../seed.js';

export function loginPage(
  details: Interaction,
  clientId: string,
  users: readonly DemoUser[],
  login = '',
  error?: string,
): string {
  const uid = encodeURIComponent(details.uid);
  const scope = typeof details.params['scope'] === 'string' ? details.params['scope'] : '';
  return page(
    'Sign in',
    `<header><h1>Identity service</h1></header>
<main>
  <div class="card" style="max-width: 420px; margin: 40px auto;">
    <h2>Sign in to continue to <code>${escapeHtml(clientId)}</code></h2>
    ${error ? `<div class="error" role="alert" id="login-error">${escapeHtml(error)}</div>` : ''}
    <form method="post" action="/interaction/${uid}/login" autocomplete="off">
      <label for="login">Login</label>
      <input id="login" name="login" value="${escapeHtml(login)}" required autofocus autocapitalize="off" spellcheck="false">
      <label for="password">Password</label>
      <input id="password" name="password" type="password" required>
      <button type="submit">Sign in</button>
      <a class="button secondary" href="/interaction/${uid}/abort">Cancel</a>
    </form>
    <p class="muted">Requested scope: <code>${escapeHtml(scope)}</code>. Demo users (their passwords are in the terminal that runs the demo):</p>
    <ul class="muted" id="demo-users">${users.map((user) => `<li>${escapeHtml(describeUser(user))}</li>`).join('')}</ul>
  </div>
</main>`,
  );
}

/** A sign-in that cannot go on (expired, already done, another browser's). */
export function signInProblemPage(message: string): string {
  return page(
    'Sign-in problem',
    `<header><h1>Identity service</h1></header>
<main><div class="card"><h2>Something went wrong</h2><div class="error" role="alert">${escapeHtml(message)}</div></div></main>`,
  );
}

/** oidc-provider's errors (its `renderError`); its own pages load a web font from the internet, these stay on this machine. */
export function providerErrorPage(error: string, description?: string): string {
  return messagePage(
    'Something went wrong',
    `<div class="error" role="alert" id="oidc-error">${escapeHtml([error, description].filter(Boolean).join(': '))}</div>`,
  );
}

/** RP-initiated logout's question; `form` is oidc-provider's hidden form, which the buttons submit. */
export function logoutPage(host: string, form: string): string {
  return messagePage(
    'Sign out',
    `<p>Sign out of the identity service at <code>${escapeHtml(host)}</code>?</p>
${form}
<button id="logout-yes" type="submit" form="op.logoutForm" name="logout" value="yes" autofocus>Sign out</button>
<button class="secondary" type="submit" form="op.logoutForm">Stay signed in</button>`,
  );
}

export function signedOutPage(): string {
  return messagePage('Signed out', '<p>You are signed out of the identity service.</p>');
}

export function landingPage(issuer: string, backendOrigin: string): string {
  return page(
    'Identity service',
    `<header><h1>Identity service</h1></header>
<main><div class="card">
  <h2>oidc-provider with user impersonation</h2>
  <table>
    <tr><th>Issuer</th><td><code>${escapeHtml(issuer)}</code></td></tr>
    <tr><th>Discovery</th><td><a href="${escapeHtml(`${issuer}/.well-known/openid-configuration`)}">${escapeHtml(`${issuer}/.well-known/openid-configuration`)}</a></td></tr>
    <tr><th>Management API</th><td><code>POST /api/subject-tokens</code></td></tr>
    <tr><th>Support console</th><td><a href="${escapeHtml(`${backendOrigin}/`)}">${escapeHtml(`${backendOrigin}/`)}</a></td></tr>
  </table>
</div></main>`,
  );
}

function messagePage(title: string, content: string): string {
  return page(
    title,
    `<header><h1>Identity service</h1></header>
<main><div class="card" style="max-width: 480px; margin: 40px auto;"><h2>${escapeHtml(title)}</h2>
${content}
</div></main>`,
  );
}
