/**
 * The agents acting for a customer, as their account page shows them: each
 * ID-JAG the identity service issued for them (a session of type `id-jag`,
 * listed by the customer's API, `GET …/sessions`) is "an agent of client X may
 * act for you at application Y until …", with a button that stops it
 * (`DELETE …/sessions/{id}`). Each ID-JAG is a session of its own, and
 * stopping one leaves the others: an agent that asked for several (from the
 * customer's ID token, then from its refresh token) has a button that stops
 * them all. Both calls carry the customer's own access token: the identity
 * service lists and stops only that customer's sessions.
 * Also the agent's redirect URI (`/agent/callback`), where its sign-in comes
 * back with the code it redeems.
 */
import type Router from '@koa/router';
import { formatDate } from './activity.js';
import { escapeHtml, HttpError, page } from './http.js';
import { AGENT_NAMES } from './seed.js';
import type { CustomerTokens, SupportAccessApi } from './support-access.js';

/** An ID-JAG session as the customer's API shows it. */
export interface AgentSession {
  id: string;
  clientId: string;
  /** The application (its authorization server's issuer) the agent may act at. */
  resource: string;
  expiresAt: string;
}

export const SESSION_ID = /^imp_[A-Za-z0-9_-]{22}$/;
/** A client id as the page's forms name it in their path. */
const CLIENT_ID = /^[A-Za-z0-9._-]{1,100}$/;
/** Pages of 100 read for one customer, at most: more agents than that are not listed. */
const MAX_PAGES = 5;

export interface AgentAccess {
  /** The customer's agents acting now, soonest to end first; none once the customer's sign-in here has ended. */
  of(tokens: CustomerTokens | undefined): Promise<AgentSession[]>;
  /** Stops one of the customer's sessions; false when it is not theirs (or no longer exists). */
  end(tokens: CustomerTokens | undefined, id: string): Promise<boolean>;
  /** Stops every session of one agent (client) acting for the customer now: how many were stopped, and how many failed. */
  endAll(tokens: CustomerTokens | undefined, clientId: string): Promise<{ ended: number; failed: number }>;
}

export function agentAccess(api: SupportAccessApi): AgentAccess {
  const access: AgentAccess = {
    async of(tokens) {
      const agents: AgentSession[] = [];
      let cursor: string | null = null;
      for (let read = 0; read < MAX_PAGES; read += 1) {
        const query = new URLSearchParams({ limit: '100', ...(cursor ? { cursor } : {}) });
        const answer = await api.call(tokens, 'GET', `/sessions?${query}`);
        // Signed out: the support-access section says so, and there is nothing to list.
        if (answer.status === 401) return [];
        if (answer.status !== 200 || !Array.isArray(answer.body?.['items']))
          throw new HttpError(502, 'bad_gateway', `the customer's API answered ${answer.status}`);
        for (const item of answer.body['items'] as Array<Record<string, unknown>>) {
          if (item['type'] === 'id-jag' && item['state'] === 'active') agents.push(item as unknown as AgentSession);
        }
        const next: unknown = answer.body['nextCursor'];
        cursor = typeof next === 'string' ? next : null;
        if (!cursor) break;
      }
      return agents.sort((a, b) => a.expiresAt.localeCompare(b.expiresAt));
    },
    async end(tokens, id) {
      if (!SESSION_ID.test(id)) return false;
      return (await api.call(tokens, 'DELETE', `/sessions/${id}`)).status === 204;
    },
    async endAll(tokens, clientId) {
      if (!CLIENT_ID.test(clientId)) return { ended: 0, failed: 0 };
      const agents = (await access.of(tokens)).filter((agent) => agent.clientId === clientId);
      const results = await Promise.all(agents.map((agent) => access.end(tokens, agent.id)));
      const ended = results.filter(Boolean).length;
      return { ended, failed: results.length - ended };
    },
  };
  return access;
}

function nameOf(id: string): string {
  const name = AGENT_NAMES.get(id);
  return name ? `${name} (${id})` : id;
}

/** The section's HTML: one line and one button per ID-JAG, and one button per agent that ends all of its. */
export function agentSection(agents: readonly AgentSession[], csrf: string): string {
  const items = agents
    .map((agent) => {
      const id = escapeHtml(agent.id);
      const text = `An agent of client ${nameOf(agent.clientId)} may act for you at application ${nameOf(agent.resource)} until ${formatDate(agent.expiresAt)}.`;
      return `<li class="agent" id="agent-${id}">
<p>${escapeHtml(text)}</p>
<form method="post" action="/account/agents/${id}/end" aria-label="End this agent's access">
<input type="hidden" name="csrf" value="${escapeHtml(csrf)}">
<button class="secondary" type="submit">End access</button>
</form>
</li>`;
    })
    .join('');
  const everyAgent = [...new Set(agents.map((agent) => agent.clientId))]
    .map((clientId) => {
      const id = escapeHtml(clientId);
      return `<form method="post" action="/account/agent-clients/${encodeURIComponent(clientId)}/end" id="agent-client-${id}">
<input type="hidden" name="csrf" value="${escapeHtml(csrf)}">
<button type="submit">End all access of ${escapeHtml(nameOf(clientId))}</button>
</form>`;
    })
    .join('');
  return `<section class="card" id="agent-access" aria-labelledby="agents-title">
<h2 id="agents-title">Agents acting for you</h2>
<p class="muted">Applications you signed in to may let an agent act for you at another application, for a few minutes at a time.</p>
${
  agents.length
    ? `<ul class="items" id="agents" aria-labelledby="agents-title">${items}</ul>${everyAgent}`
    : '<p id="agents-empty">No agent acts for you.</p>'
}
</section>`;
}

/** The agent's redirect URI: a sign-in comes back here with the code, which the agent redeems itself. */
export function agentCallbackRoute(router: Router): void {
  router.get('/agent/callback', (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.set('Referrer-Policy', 'no-referrer');
    const code = typeof ctx.query['code'] === 'string' ? ctx.query['code'] : undefined;
    const error = typeof ctx.query['error'] === 'string' ? ctx.query['error'] : undefined;
    ctx.type = 'html';
    ctx.body = page(
      'Orders assistant',
      `<header><h1>Orders assistant</h1></header>
<main><div class="card">${
        code
          ? `<h2>Signed in</h2><p>The agent redeems this code at the identity service's token endpoint, with its PKCE verifier:</p><pre id="code">${escapeHtml(code)}</pre>`
          : `<h2>Sign-in failed</h2><div class="error" role="alert">${escapeHtml(error ?? 'no code came back')}</div>`
      }</div></main>`,
    );
  });
}
