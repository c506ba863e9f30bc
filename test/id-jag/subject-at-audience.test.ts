/**
 * The user and the client as the audience knows them (the draft's Cross-Domain Client ID Handling): the deployment's
 * `idJagIssuance.subjectAtAudience` sets `sub`, `aud_sub`, `tenant` and `client_id` in the ID-JAG, over HTTP at a real
 * provider on TEST_ADAPTER's store, redeemed at a second provider whose `accountOf` reads them; any other answer fails
 * the issue with nothing issued or charged; the session here keeps the local user and client.
 */
import { createHash } from 'node:crypto';
import { expect } from 'chai';
import {
  createImpersonation,
  createMemoryAuditLog,
  EVENTS,
  onImpersonationEvent,
  type IdJagIssueInput,
  type IdJagSubjectAtAudience,
  type ImpersonationEvent,
} from '../../lib/index.js';
import { JWT_BEARER_GRANT } from '../../lib/exchange/id-jag.js';
import { API, FIXTURE_CLIENTS, startProvider, type TestProvider } from '../support/provider.js';
import { apiRequest, decodeJwt, expectError, tokenRequest, userSignIn, type Reply } from '../support/http.js';
import { adminToken, SESSIONS, trailEvents } from '../support/impersonations.js';
import { AGENT, agentAtIdp, agentAtRedeemer, CHAT, exchangeForIdJag } from '../support/id-jag.js';

const CALENDAR = 'https://calendar.example.com';
/** The same agent as the chat application registered it. */
const AGENT_AT_CHAT = { client_id: 'acme-chat-agent', client_secret: 'acme-chat-agent-secret' };

const AGENT_AT_IDP = agentAtIdp(AGENT, `${CHAT} ${CALENDAR}`);
const CHAT_CLIENT = agentAtRedeemer(AGENT_AT_CHAT);

/** A pairwise-like subject: stable for one user at one audience, telling the audience nothing of the local account. */
const pairwise = (subject: string, audience: string) =>
  createHash('sha256').update(`${audience}\n${subject}\nidp-secret-salt`).digest('base64url');

/** The deployment's hook at the chat application: its tenant, the user's pairwise id, the client's id there. */
const atChat = ({ subject, clientId, audience }: IdJagIssueInput): IdJagSubjectAtAudience | undefined =>
  audience === CHAT
    ? { tenant: 'acme', aud_sub: pairwise(subject, audience), client_id: `acme-${clientId}` }
    : undefined;

describe('ID-JAG issuance: the subject and client as the audience knows them (subjectAtAudience)', function () {
  this.timeout(60_000);
  let idp: TestProvider;
  let chat: TestProvider;
  let behaviour: (input: IdJagIssueInput) => unknown = atChat;
  const asked: IdJagIssueInput[] = [];
  const issued: Array<ImpersonationEvent<typeof EVENTS.idJagIssued>> = [];
  const idTokens: Record<string, string> = {};

  before(async () => {
    idp = await startProvider({
      plugin: {
        auditLog: createMemoryAuditLog(),
        idJagIssuance: {
          maxPerUser: 3,
          canIssue: ({ subject, scope }) =>
            subject === 'admin' ? false : { scope: scope.filter((name) => name !== 'chat.admin') },
          subjectAtAudience: (input) => {
            asked.push(input);
            return behaviour(input) as IdJagSubjectAtAudience | undefined;
          },
        },
      },
      configuration: { clients: [...FIXTURE_CLIENTS, AGENT_AT_IDP] },
    });
    onImpersonationEvent(idp.provider, EVENTS.idJagIssued, (event) => issued.push(event));
    const jwks = await (await fetch(`${idp.base}/jwks`)).json();
    // The chat application knows alice, by her pairwise id in the acme tenant, as its own account carol.
    const accounts = new Map([[`acme ${pairwise('alice', CHAT)}`, 'carol']]);
    chat = await startProvider({
      issuer: CHAT,
      plugin: {
        idJag: {
          trustedIssuers: [
            { issuer: idp.issuer, jwks, accountOf: ({ tenant, aud_sub }) => accounts.get(`${tenant} ${aud_sub}`) },
          ],
        },
      },
      configuration: { clients: [...FIXTURE_CLIENTS, CHAT_CLIENT] },
    });
    for (const user of ['alice', 'bob', 'carol', 'admin'])
      idTokens[user] = (await userSignIn(idp, user, { client: AGENT, scope: 'openid' })).idToken!;
  });
  beforeEach(() => {
    behaviour = atChat;
    asked.length = 0;
  });
  after(async () => {
    await idp?.close();
    await chat?.close();
  });

  const requestIdJag = (user: string, params: Record<string, string> = {}): Promise<Reply> =>
    exchangeForIdJag(idp, AGENT, { subject_token: idTokens[user]!, audience: CHAT, ...params });

  it("signs the hook's claims, asked after canIssue with its scopes; the other side redeems by tenant and aud_sub", async () => {
    const reply = await requestIdJag('alice', {
      resource: API,
      scope: 'profile:read chat.admin',
    });
    expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
    const assertion = reply.body['access_token'] as string;
    expect(decodeJwt(assertion)).to.include({
      sub: 'alice',
      tenant: 'acme',
      aud_sub: pairwise('alice', CHAT),
      client_id: AGENT_AT_CHAT.client_id,
      aud: CHAT,
    });
    expect(asked).to.deep.equal([
      {
        clientId: AGENT.client_id,
        subject: 'alice',
        audience: CHAT,
        resource: [API],
        scope: ['profile:read'],
      },
    ]);
    // Here, the session and the trail name the local user and client.
    const event = issued.at(-1)!;
    expect(event).to.include({ subject: 'alice', clientId: AGENT.client_id });
    const admin = await adminToken(idp);
    const listed = await apiRequest(idp, 'GET', `${SESSIONS}/${event.sessionId!}`, admin);
    expect(listed.body).to.include({ type: 'id-jag', subject: 'alice', clientId: AGENT.client_id });
    const trail = (await trailEvents(idp, admin, '?subject=alice')).body['items'] as Array<Record<string, unknown>>;
    expect(trail.find((row) => row['sessionId'] === event.sessionId)).to.include({
      event: EVENTS.idJagIssued,
      clientId: AGENT.client_id,
    });

    const redeemed = await tokenRequest(chat, { grant_type: JWT_BEARER_GRANT, assertion }, AGENT_AT_CHAT);
    expect(redeemed.status, JSON.stringify(redeemed.body)).to.equal(200);
    expect(decodeJwt(redeemed.body['access_token'] as string)).to.include({
      sub: 'carol',
      client_id: AGENT_AT_CHAT.client_id,
      iss: CHAT,
    });
  });

  it('a given sub replaces the local one; members not given, or no answer, keep the local names', async () => {
    behaviour = () => ({ sub: 'acme|00u1a2b3c4' });
    const renamed = decodeJwt((await requestIdJag('carol')).body['access_token'] as string);
    expect(renamed).to.include({ sub: 'acme|00u1a2b3c4', client_id: AGENT.client_id });
    expect(renamed).not.to.have.any.keys('tenant', 'aud_sub');
    expect(issued.at(-1)).to.include({ subject: 'carol', clientId: AGENT.client_id });

    for (const answer of [undefined, {}]) {
      behaviour = () => answer;
      const reply = await requestIdJag('alice', { audience: CALENDAR });
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      const claims = decodeJwt(reply.body['access_token'] as string);
      expect(claims).to.include({ sub: 'alice', client_id: AGENT.client_id, aud: CALENDAR });
      expect(claims).not.to.have.any.keys('tenant', 'aud_sub');
    }
  });

  it('a policy refusal asks nothing of the hook', async () => {
    expectError(await requestIdJag('admin'), 400, 'invalid_request', /the ID-JAG policy refused this ID-JAG/);
    expect(asked).to.deep.equal([]);
  });

  it('a hook that throws or answers anything else: 500, no value named, nothing issued or charged', async () => {
    const secret = 'acme-secret-tenant';
    const failures: Array<[string, (input: IdJagIssueInput) => unknown]> = [
      [
        'throws',
        () => {
          throw new Error(secret);
        },
      ],
      ['rejects', () => Promise.reject(new Error(secret))],
      ['null', () => null],
      ['a string', () => secret],
      ['an array', () => [secret]],
      ['another claim', () => ({ tenant: 'acme', iss: secret })],
      ['act', () => ({ act: { sub: secret } })],
      ['an empty value', () => ({ tenant: '', aud_sub: secret })],
      ['a value too long', () => ({ aud_sub: secret.padEnd(256, 'x') })],
      ['a value no string', () => ({ tenant: 42, aud_sub: secret })],
      ['a member left undefined', () => ({ tenant: undefined, aud_sub: secret })],
      ['an object', () => ({ tenant: { name: secret } })],
    ];
    const before = issued.length;
    for (const [name, failing] of failures) {
      behaviour = failing;
      const reply = await requestIdJag('bob');
      expectError(reply, 500, 'server_error');
      expect(JSON.stringify(reply.body), name).not.to.include(secret).and.not.to.include('acme');
      expect(reply.body, name).not.to.have.property('access_token');
    }
    expect(issued.length, 'no ID-JAG issued').to.equal(before);
    const admin = await adminToken(idp);
    const listed = await apiRequest(idp, 'GET', `${SESSIONS}?subject=bob`, admin);
    expect(listed.body['items'], 'no session').to.deep.equal([]);
    // bob's share (maxPerUser: 3) was not charged by the failures: all three are still his.
    behaviour = atChat;
    for (let issue = 0; issue < 3; issue += 1) expect((await requestIdJag('bob')).status).to.equal(200);
    expectError(await requestIdJag('bob'), 429, 'invalid_request', /as many ID-JAGs/);
  });

  it('is checked at start-up', () => {
    const create = (subjectAtAudience: unknown) => () =>
      createImpersonation({
        managementResource: 'https://id.example.com/api',
        idJagIssuance: { subjectAtAudience },
      } as never);
    expect(create(atChat)).not.to.throw();
    expect(create({ tenant: 'acme' })).to.throw(/idJagIssuance\.subjectAtAudience" must be a function/);
  });
});
