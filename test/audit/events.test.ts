import { expect } from 'chai';
import { approveRequest, denyRequest, endAccessGrant } from '../../lib/approvals/actions.js';
import { newApprovalRequestId } from '../../lib/approvals/record.js';
import { EVENTS, onImpersonationEvent, type ImpersonationEvent, type ImpersonationEventName } from '../../lib/index.js';
import {
  askForSubjectToken,
  newCustomer,
  readApprovalRequest,
  requestIdOf,
  startApprovalProvider,
  type ApprovalProvider,
} from '../support/approvals.js';
import { API, CLIENTS, DOWNSTREAM_API, type TestProvider } from '../support/provider.js';
import {
  apiRequest,
  exchange,
  logout,
  managementRequest,
  m2mToken,
  subjectToken,
  userSignIn,
} from '../support/http.js';
import { adminToken, exchangeAsActor, impersonate, revokeSession, SESSIONS } from '../support/impersonations.js';

/** The fields an event's type says it always carries. */
type Always<Event> = {
  [Field in keyof Event]-?: object extends Pick<Event, Field> ? never : Field;
}[keyof Event];
/** The fields an event's type lets it carry at all (the others are declared absent). */
type Carried<Event> = {
  [Field in keyof Event]-?: [Exclude<Event[Field], undefined>] extends [never] ? never : Field;
}[keyof Event];

type Shapes = {
  [Name in ImpersonationEventName]: {
    always: ReadonlyArray<Always<ImpersonationEvent<Name>>>;
    whenKnown: ReadonlyArray<Exclude<Carried<ImpersonationEvent<Name>>, Always<ImpersonationEvent<Name>>>>;
  };
};

const SESSION = [
  'name',
  'sessionId',
  'subject',
  'clientId',
  'resource',
  'scope',
  'context',
  'subjectTokenId',
  'accessTokenId',
  'expiresAt',
] as const;

const GRANT = ['name', 'accessGrantId', 'subject', 'expiresAt'] as const;
const GRANT_DETAILS = ['actor', 'resource', 'scope', 'approvalRequestId'] as const;
const REQUEST = ['name', 'approvalRequestId', 'subject', 'actor', 'createdBy', 'context', 'expiresAt'] as const;
const REQUEST_DETAILS = ['clientId', 'resource', 'scope'] as const;

/** Each event's fields as its type states them, spelled out for the checks below. */
const SHAPES = {
  [EVENTS.subjectTokenCreated]: {
    always: ['name', 'subjectTokenId', 'subject', 'createdBy', 'context', 'expiresAt'],
    whenKnown: ['clientId', 'actor', 'accessGrantId'],
  },
  [EVENTS.subjectTokenRefused]: {
    always: ['name', 'subject', 'createdBy', 'context', 'error', 'reason'],
    whenKnown: ['clientId', 'actor'],
  },
  [EVENTS.exchangeSucceeded]: { always: [...SESSION, 'createdBy'], whenKnown: ['actor', 'accessGrantId'] },
  [EVENTS.exchangeRefused]: {
    always: ['name', 'clientId', 'error', 'reason'],
    whenKnown: [
      'sessionId',
      'subject',
      'resource',
      'scope',
      'context',
      'subjectTokenId',
      'accessTokenId',
      'expiresAt',
      'createdBy',
      'actor',
      'accessGrantId',
    ],
  },
  [EVENTS.subjectTokenWithdrawn]: { always: ['name', 'subjectTokenId', 'revokedBy'], whenKnown: [] },
  [EVENTS.sessionRevoked]: { always: [...SESSION, 'revokedBy'], whenKnown: ['actor', 'reason', 'parentSessionId'] },
  [EVENTS.sessionEnded]: {
    always: [...SESSION, 'endReason'],
    whenKnown: ['actor', 'accessGrantId', 'parentSessionId'],
  },
  [EVENTS.revocationsServed]: { always: ['name', 'count'], whenKnown: [] },
  [EVENTS.accessGrantCreated]: { always: GRANT, whenKnown: GRANT_DETAILS },
  [EVENTS.accessGrantEnded]: { always: GRANT, whenKnown: GRANT_DETAILS },
  [EVENTS.approvalRequested]: { always: REQUEST, whenKnown: REQUEST_DETAILS },
  [EVENTS.approvalApproved]: { always: [...REQUEST, 'accessGrantId'], whenKnown: REQUEST_DETAILS },
  [EVENTS.approvalDenied]: { always: REQUEST, whenKnown: [...REQUEST_DETAILS, 'reason'] },
  [EVENTS.approvalExpired]: { always: REQUEST, whenKnown: REQUEST_DETAILS },
  [EVENTS.breakGlassUsed]: {
    always: ['name', 'subjectTokenId', 'subject', 'createdBy', 'context', 'expiresAt', 'reason'],
    whenKnown: ['clientId', 'actor'],
  },
  [EVENTS.delegationSucceeded]: {
    always: [
      'name',
      'sessionId',
      'subject',
      'actor',
      'clientId',
      'resource',
      'scope',
      'subjectTokenId',
      'subjectTokenType',
      'accessTokenId',
      'expiresAt',
      'depth',
    ],
    whenKnown: ['parentSessionId'],
  },
  [EVENTS.delegationRefused]: {
    always: ['name', 'clientId', 'error', 'reason'],
    whenKnown: [
      'subject',
      'actor',
      'resource',
      'scope',
      'subjectTokenId',
      'subjectTokenType',
      'parentSessionId',
      'depth',
    ],
  },
  [EVENTS.idJagRedeemed]: {
    always: ['name', 'sessionId', 'subject', 'clientId', 'resource', 'scope', 'context', 'accessTokenId', 'expiresAt'],
    whenKnown: ['actor'],
  },
  [EVENTS.idJagIssued]: {
    always: [...SESSION],
    whenKnown: ['actor'],
  },
} as const satisfies Shapes;

/** Fails the build when SHAPES leaves out a field a type names. */
type Unlisted = {
  [Name in ImpersonationEventName]: Exclude<
    Carried<ImpersonationEvent<Name>>,
    (typeof SHAPES)[Name]['always'][number] | (typeof SHAPES)[Name]['whenKnown'][number]
  >;
}[ImpersonationEventName];
const everyFieldListed: [Unlisted] extends [never] ? true : Unlisted = true;

/**
 * Every event the plugin emits, as listeners get it: named by `name`, with
 * each field its type says it always carries, and no field its type does not
 * let it carry. A listener that trusts the types never reads `undefined` where
 * they promise a value.
 */
describe('impersonation events: what each carries', () => {
  let ap: ApprovalProvider;
  let tp: TestProvider;
  const received: Array<[ImpersonationEventName, ImpersonationEvent]> = [];

  before(async () => {
    ap = await startApprovalProvider({
      plugin: { canImpersonate: ({ subject }) => subject !== 'carol' || { reason: 'carol is never impersonated' } },
      approvals: { breakGlassClients: [CLIENTS.oncall.client_id] },
    });
    tp = ap.tp;
    // The customer's approval only where the test asks for it.
    ap.policy.answer = 'none';
    for (const name of Object.values(EVENTS)) {
      onImpersonationEvent(tp.provider, name, (event) => received.push([name, event]));
    }
  });
  after(() => tp.close());

  it('emits each event with its name and the fields its type promises', async () => {
    expect(everyFieldListed).to.equal(true);
    const signedIn = await userSignIn(tp, 'alice');
    const backend = await m2mToken(tp);
    const admin = await adminToken(tp);

    // Created, then exchanged with and without an actor; refused before and after the token was found.
    const impersonated = await impersonate(tp, { actorToken: signedIn.accessToken, scope: 'profile:read' });
    const { session } = impersonated;
    // A delegation (of the first impersonation's token: it names its parent session, and ends with it at the sign-out below), and one refused.
    const delegated = await exchange(
      tp,
      { subject_token: impersonated.token, resource: DOWNSTREAM_API },
      CLIENTS.orders,
    );
    expect(delegated.status, JSON.stringify(delegated.body)).to.equal(200);
    const wider = { subject_token: impersonated.token, resource: DOWNSTREAM_API, scope: 'orders:read' };
    expect((await exchange(tp, wider, CLIENTS.orders)).status).to.equal(400);

    expect((await exchange(tp, { subject_token: await subjectToken(tp), resource: API })).status).to.equal(200);
    expect((await exchange(tp, { subject_token: 'st_unknown', resource: API })).status).to.equal(400);
    const refused = await exchangeAsActor(tp, {
      subjectToken: await subjectToken(tp, { userId: 'bob', clientId: CLIENTS.console.client_id, actorId: 'alice' }),
      actorToken: 'not-a-token',
    });
    expect(refused.status).to.equal(400);
    // Refused by canImpersonate; withdrawn before redemption.
    expect((await managementRequest(tp, { userId: 'carol' }, backend)).status).to.equal(403);
    const { id } = (await managementRequest(tp, { userId: 'bob' }, backend)).body as { id: string };
    expect((await apiRequest(tp, 'DELETE', `/api/subject-tokens/${id}`, admin)).status).to.equal(204);
    // Revoked with a reason; ended by the actor's sign-out; the feed read.
    const other = await impersonate(tp, { actorToken: signedIn.accessToken, scope: 'profile:read' });
    expect((await revokeSession(tp, admin, other.session, { reason: 'ticket closed' })).status).to.equal(204);
    await logout(tp, signedIn.cookies);
    for (let waited = 0; !received.some(([name]) => name === EVENTS.sessionEnded) && waited < 2000; waited += 25)
      await new Promise((resolve) => setTimeout(resolve, 25));
    expect((await apiRequest(tp, 'GET', `${SESSIONS}/revocations`)).status).to.equal(200);

    // The customer in the loop: a request approved (its grant, a session under it, the grant ended), one denied,
    // one expired unanswered; break-glass.
    ap.policy.answer = 'grant';
    const customer = newCustomer();
    const ask = {
      userId: customer,
      actorId: 'alice',
      clientId: CLIENTS.console.client_id,
      context: { ticketId: 'T-8' },
      resource: API,
    };
    const approved = requestIdOf(await askForSubjectToken(tp, { ...ask, scope: ['profile:read'] }));
    const { grant } = await approveRequest(ap.deps, customer, approved, { duration: 600 });
    const covered = await askForSubjectToken(tp, ask);
    expect(covered.status, JSON.stringify(covered.body)).to.equal(201);
    const underGrant = await exchangeAsActor(tp, {
      subjectToken: covered.body['subjectToken'] as string,
      actorToken: (await userSignIn(tp, 'alice')).accessToken,
      scope: 'profile:read',
    });
    expect(underGrant.status, JSON.stringify(underGrant.body)).to.equal(200);
    await endAccessGrant(ap.deps, customer, grant.id);
    const denied = requestIdOf(await askForSubjectToken(tp, { ...ask, actorId: 'dave' }));
    await denyRequest(ap.deps, customer, denied, { reason: 'not this one' });
    const late = newApprovalRequestId();
    const now = Math.floor(Date.now() / 1000);
    await ap.deps.approvals.saveRequest(
      {
        id: late,
        subject: customer,
        actor: 'alice',
        requestedBy: CLIENTS.backend.client_id,
        context: {},
        createdAt: now - 120,
        expiresAt: now - 60,
      },
      20,
    );
    expect((await readApprovalRequest(tp, late)).body).to.include({ status: 'expired' });
    const glass = await askForSubjectToken(tp, { ...ask, breakGlass: { reason: 'outage' } }, CLIENTS.oncall);
    expect(glass.status, JSON.stringify(glass.body)).to.equal(201);

    // ID-JAGs are issued and redeemed in test/id-jag/, which emits their events and checks their shapes.
    const emitted = Object.values(EVENTS).filter(
      (name) => name !== EVENTS.idJagRedeemed && name !== EVENTS.idJagIssued,
    );
    expect(new Set(received.map(([name]) => name))).to.deep.equal(new Set(emitted));
    for (const [name, event] of received) {
      const shape: { always: readonly string[]; whenKnown: readonly string[] } = SHAPES[name];
      const fields = Object.entries(event)
        .filter(([, value]) => value !== undefined)
        .map(([field]) => field);
      const described = `${name}: ${JSON.stringify(event)}`;
      expect(event.name, described).to.equal(name);
      expect(fields, described).to.include.members([...shape.always]);
      expect(fields.filter((field) => !shape.always.includes(field) && !shape.whenKnown.includes(field))).to.deep.equal(
        [],
        described,
      );
    }
    const ended = received.filter(([name]) => name === EVENTS.sessionEnded).map(([, event]) => event);
    expect(ended.find((event) => event.sessionId === session)).to.include({
      endReason: 'actor_logout',
      actor: 'alice',
    });
    // The delegation ended first, with its parent.
    expect(ended[0]).to.include({ parentSessionId: session, endReason: 'parent_session_stopped' });
    expect(ended.find((event) => event.endReason === 'access_grant_ended')).to.include({
      accessGrantId: grant.id,
      subject: customer,
    });
  });
});
