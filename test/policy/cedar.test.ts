/**
 * The `authzen` option against a decision point whose decisions come from a
 * policy engine: Cedar (`@cedar-policy/cedar-wasm`, the Cedar authorizer
 * compiled to WebAssembly). The AuthZEN 1.0 Access Evaluation endpoint on
 * 127.0.0.1 (test/support/decision-point.ts) turns each evaluation the
 * plugin sends into a Cedar request over a small directory, and answers
 * Cedar's decision, with words for the user named after the policy that
 * refused. The policies: agents act for the customers of their own
 * organisation; an agent of the read-only tier exchanges for read scopes
 * only; an administrator is never impersonated. On the suite's store
 * (TEST_ADAPTER), through a real provider over HTTP.
 */
import { isAuthorized, type EntityJson } from '@cedar-policy/cedar-wasm/nodejs';
import { expect } from 'chai';
import { createMemoryAuditLog } from '../../lib/index.js';
import { startDecisionPoint, type DecisionPoint, type DecisionPointAnswer } from '../support/decision-point.js';
import { m2mToken, managementRequest, userAccessToken, type Reply } from '../support/http.js';
import { exchangeAsActor } from '../support/impersonations.js';
import { startProvider, type TestProvider } from '../support/provider.js';

/** The Cedar policies, by id: the id of a `forbid` that decides names the words the user reads. */
const POLICIES: Record<string, string> = {
  'own-organisation': `
    permit (
      principal in Role::"agent",
      action in [Action::"impersonate", Action::"exchange"],
      resource in Role::"customer"
    ) when { principal.org == resource.org };`,
  'read-only-tier': `
    forbid (principal, action == Action::"exchange", resource)
    when {
      principal.tier == "read-only" &&
      (!(context has scopes) || !["profile:read", "orders:read"].containsAll(context.scopes))
    };`,
  'never-administrators': `
    forbid (principal, action, resource in Role::"administrator");`,
};

const REASONS: Record<string, string> = {
  'read-only-tier': 'your tier reads only: ask for read scopes',
  'never-administrators': 'administrators are never impersonated',
};
/** When no policy permits. */
const NOT_PERMITTED = 'you do not support this customer';

const user = (id: string, attrs: EntityJson['attrs'], ...roles: string[]): EntityJson => ({
  uid: { type: 'User', id },
  attrs,
  parents: roles.map((role) => ({ type: 'Role', id: role })),
});

/** The directory the decision point reads: the fixture provider's accounts. */
const DIRECTORY: readonly EntityJson[] = [
  user('alice', { org: 'acme', tier: 'full' }, 'agent'),
  user('carol', { org: 'acme', tier: 'read-only' }, 'agent'),
  user('bob', { org: 'acme' }, 'customer'),
  user('admin', { org: 'acme' }, 'customer', 'administrator'),
];
/** What the decision point reads now: a test changes it, and each evaluation reads it afresh. */
let directory: readonly EntityJson[] = DIRECTORY;

/** The directory with `id`'s attributes replaced. */
function changed(id: string, attrs: EntityJson['attrs']): EntityJson[] {
  return DIRECTORY.map((entity) => ('id' in entity.uid && entity.uid.id === id ? { ...entity, attrs } : entity));
}

/** AuthZEN's entity types, as Cedar's. */
const TYPES: Record<string, string> = { user: 'User', client: 'Client' };

/**
 * One Access Evaluation, decided by Cedar. Fails closed: a request Cedar
 * cannot evaluate, or a policy that errs on it, answers 500 (an erring
 * `forbid` would otherwise be skipped).
 */
function decide(evaluation: DecisionPoint['received'][number]['body']): DecisionPointAnswer {
  const scopes = evaluation.context['scopes'];
  const answer = isAuthorized({
    principal: { type: TYPES[evaluation.subject.type] ?? 'Unknown', id: evaluation.subject.id },
    action: { type: 'Action', id: evaluation.action.name },
    resource: { type: TYPES[evaluation.resource.type] ?? 'Unknown', id: evaluation.resource.id },
    context: Array.isArray(scopes) ? { scopes: scopes.filter((scope) => typeof scope === 'string') } : {},
    policies: { staticPolicies: POLICIES },
    entities: [...directory],
  });
  if (answer.type !== 'success' || answer.response.diagnostics.errors.length) return { status: 500 };
  const { decision, diagnostics } = answer.response;
  if (decision === 'allow') return { allow: true };
  const forbidding = diagnostics.reason.map((id) => REASONS[id]).find((words) => words !== undefined);
  return { deny: forbidding ?? NOT_PERMITTED };
}

describe('an AuthZEN decision point deciding with Cedar policies (the authzen option)', function () {
  this.timeout(60_000);
  let pdp: DecisionPoint;
  let tp: TestProvider;

  before(async () => {
    pdp = await startDecisionPoint();
    pdp.answer = decide;
    tp = await startProvider({
      plugin: { auditLog: createMemoryAuditLog(), authzen: { url: pdp.url, timeout: 2000 } },
    });
  });
  beforeEach(() => {
    directory = DIRECTORY;
    pdp.answer = decide;
    pdp.received.length = 0;
  });
  after(async () => {
    await tp?.close();
    await pdp?.close();
  });

  /** A subject token for `customer`, created for `actor` (the backend's Management API call). */
  async function create(actor: string, customer: string): Promise<Reply> {
    return managementRequest(
      tp,
      { userId: customer, actorId: actor, context: { ticketId: 'T-9', reason: 'invoice question' } },
      await m2mToken(tp),
    );
  }

  async function exchangeFor(actor: string, subjectToken: string, scope?: string): Promise<Reply> {
    return exchangeAsActor(tp, {
      subjectToken,
      actorToken: await userAccessToken(tp, actor),
      ...(scope === undefined ? {} : { scope }),
    });
  }

  /** The actions the decision point was asked about, in order, and what Cedar answered each. */
  const asked = () => pdp.received.map(({ body }) => `${body.action.name} ${body.subject.id}→${body.resource.id}`);

  it('lets an agent impersonate a customer of their organisation and exchange for any scope', async () => {
    const created = await create('alice', 'bob');
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const exchanged = await exchangeFor('alice', created.body['subjectToken'] as string, 'profile:read profile:write');
    expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
    expect(String(exchanged.body['scope']).split(' ')).to.have.members(['profile:read', 'profile:write']);
    expect(asked()).to.deep.equal(['impersonate alice→bob', 'exchange alice→bob']);
  });

  it("refuses a customer of another organisation (403), in the decision point's words, and creates no token", async () => {
    // bob's account moves to another organisation: the next evaluation reads it.
    directory = changed('bob', { org: 'globex' });
    const refused = await create('alice', 'bob');
    expect(refused.status).to.equal(403);
    expect(refused.body).to.deep.equal({ error: 'access_denied', error_description: NOT_PERMITTED });
    expect(refused.body).to.not.have.property('subjectToken');
  });

  it('never impersonates an administrator, though a customer of the same organisation', async () => {
    const refused = await create('alice', 'admin');
    expect(refused.status).to.equal(403);
    expect(refused.body['error_description']).to.equal(REASONS['never-administrators']);
    expect(asked()).to.deep.equal(['impersonate alice→admin']);
  });

  it('lets a read-only agent exchange for read scopes only: a write scope is refused, and the token stays unburned', async () => {
    const created = await create('carol', 'bob');
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const subjectToken = created.body['subjectToken'] as string;
    const refused = await exchangeFor('carol', subjectToken, 'profile:read profile:write');
    expect(refused.status).to.equal(400);
    expect(refused.body).to.deep.equal({
      error: 'invalid_request',
      error_description: REASONS['read-only-tier'],
    });
    expect(pdp.received.at(-1)!.body.context['scopes']).to.deep.equal(['profile:read', 'profile:write']);
    const read = await exchangeFor('carol', subjectToken, 'profile:read');
    expect(read.status, JSON.stringify(read.body)).to.equal(200);
    expect(read.body['scope']).to.equal('profile:read');
  });

  it('answers no decision (503) when a policy cannot be evaluated, and decides again once it can', async () => {
    const created = await create('carol', 'bob');
    const subjectToken = created.body['subjectToken'] as string;
    // The read-only rule reads the agent's tier: without it, that forbid errs, and Cedar would skip it.
    directory = changed('carol', { org: 'acme' });
    const unanswered = await exchangeFor('carol', subjectToken, 'profile:read profile:write');
    expect(unanswered.status, JSON.stringify(unanswered.body)).to.equal(503);
    expect(unanswered.body['error']).to.equal('temporarily_unavailable');
    directory = DIRECTORY;
    expect((await exchangeFor('carol', subjectToken, 'profile:read')).status).to.equal(200);
  });
});
