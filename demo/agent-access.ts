/**
 * The agents acting for a customer, as their account page shows them: each
 * ID-JAG the identity service issued for them (a session of type `id-jag`,
 * listed by the Management API) is "an agent of client X may act for you at
 * application Y until …", with a button that stops it. The backend reads and
 * stops them with its own M2M token, and only ever the signed-in customer's.
 * Also the agent's redirect URI (`/agent/callback`), where its sign-in comes
 * back with the code it redeems.
 */
import type Router from '@koa/router';
import { formatDate } from './activity.js';
import { escapeHtml, HttpError, page } from './http.js';
import { AGENT_NAMES } from './seed.js';
import type { Management } from './stop-routes.js';

/** An ID-JAG session as the Management API shows it. */
export interface AgentSession {
  id: string;
  clientId: string;
  /** The application (its authorization server's issuer) the agent may act at. */
  resource: string;
  expiresAt: string;
}

export const SESSION_ID = /^imp_[A-Za-z0-9_-]{22}$/;
/** Pages of 100 read for one customer, at most: more agents than that are not listed. */
const MAX_PAGES = 5;

export interface AgentAccess {
  /** The customer's agents acting now, soonest to end first. */
  of(customer: string): Promise<AgentSession[]>;
  /** Stops one, if it is the customer's agent; false when it is not theirs (or no longer exists). */
  end(customer: string, id: string): Promise<boolean>;
}

export function agentAccess(management: Management, sessionsUrl: string): AgentAccess {
  return {
    async of(customer) {
      const agents: AgentSession[] = [];
      let cursor: string | null = null;
      for (let read = 0; read < MAX_PAGES; read += 1) {
        const query = new URLSearchParams({ subject: customer, limit: '100', ...(cursor ? { cursor } : {}) });
        const answer = await management('GET', `${sessionsUrl}?${query}`);
        if (answer.status !== 200 || !Array.isArray(answer.body?.['items']))
          throw new HttpError(502, 'bad_gateway', `the Management API answered ${answer.status}`);
        for (const item of answer.body['items'] as Array<Record<string, unknown>>) {
          if (item['type'] === 'id-jag' && item['state'] === 'active') agents.push(item as unknown as AgentSession);
        }
        const next: unknown = answer.body['nextCursor'];
        cursor = typeof next === 'string' ? next : null;
        if (!cursor) break;
      }
      return agents.sort((a, b) => a.expiresAt.localeCompare(b.expiresAt));
    },
    async end(customer, id) {
      if (!SESSION_ID.test(id)) return false;
      const found = await management('GET', `${sessionsUrl}/${id}`);
      if (found.status !== 200 || found.body?.['subject'] !== customer || found.body['type'] !== 'id-jag') return false;
      const ended = await management('DELETE', `${sessionsUrl}/${id}`, { reason: 'ended by the customer' });
      return ended.status === 204;
    },
  };
}

function nameOf(id: string): string {
  const name = AGENT_NAMES.get(id);
  return name ? `${name} (${id})` : id;
}

/** The section's HTML: one line and one button per agent. */
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
  return `<section class="card" id="agent-access" aria-labelledby="agents-title">
<h2 id="agents-title">Agents acting for you</h2>
<p class="muted">Applications you signed in to may let an agent act for you at another application, for a few minutes at a time.</p>
${
  agents.length
    ? `<ul class="items" id="agents" aria-labelledby="agents-title">${items}</ul>`
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
