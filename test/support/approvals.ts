/**
 * A provider with the customer in the loop (the `approvals` option), and what
 * its tests do again and again: ask for a subject token as a backend, read an
 * approval request back, and act as the customer through the library
 * functions of lib/approvals/actions.ts on the provider's own store.
 */
import { randomBytes } from 'node:crypto';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { instantiateAdapter } from '../../lib/adapters/contracts/entries.js';
import type { AdapterSource } from '../../lib/core-options.js';
import type { BoundedIndexes } from '../../lib/adapters/contracts/indexes.js';
import type { SessionAdapter } from '../../lib/adapters/contracts/sessions.js';
import type { ApprovalDependencies } from '../../lib/approvals/deps.js';
import type { ApprovalOptions, ApprovalRequirement } from '../../lib/approvals/options.js';
import { APPROVAL_MODEL } from '../../lib/adapters/models.js';
import { ApprovalStore } from '../../lib/approvals/store.js';
import { answerTo } from '../../lib/http/answer.js';
import type { ImpersonationOptions } from '../../lib/index.js';
import { resolveOptions } from '../../lib/options.js';
import { installedEventBus } from '../../lib/plugin.js';
import { SESSION_MODEL, SessionStore } from '../../lib/sessions/store.js';
import type { AdapterKind } from './adapters.js';
import { apiRequest, managementRequest, m2mToken, type ClientCredentials, type Reply } from './http.js';
import { CLIENTS, MANAGEMENT, startProvider, type TestProvider, type TestProviderOptions } from './provider.js';

/** The customer's support-access API, as the deployment names it. */
export const CUSTOMER_API = 'https://id.example.com/support-access';
export const REQUESTS = '/api/approval-requests';

/** What `approvals.require` answers: tests set it before they ask. */
export interface Policy {
  answer: ApprovalRequirement;
}

export interface ApprovalProvider {
  tp: TestProvider;
  /** The customer's operations run on the provider's own store. */
  deps: ApprovalDependencies;
  policy: Policy;
}

export interface ApprovalProviderOptions extends Pick<TestProviderOptions, 'issuer' | 'mount'> {
  approvals?: Partial<ApprovalOptions>;
  plugin?: Partial<ImpersonationOptions>;
  configuration?: TestProviderOptions['configuration'];
  /** Default: a new deployment of `kind`, the suite's adapter unless named. */
  adapter?: AdapterSource;
  kind?: AdapterKind;
}

/**
 * The fixture provider with `approvals` set; its `require` answers
 * `policy.answer` (`grant` to start with). Every account id but `nobody`
 * exists, so that each test has customers of its own (newCustomer()).
 */
export async function startApprovalProvider(options: ApprovalProviderOptions = {}): Promise<ApprovalProvider> {
  const policy: Policy = { answer: 'grant' };
  const plugin: Partial<ImpersonationOptions> = {
    ...options.plugin,
    approvals: { customerResource: CUSTOMER_API, require: () => policy.answer, ...options.approvals },
  };
  const tp = await startProvider(
    {
      ...(options.adapter ? { adapter: options.adapter } : {}),
      ...(options.issuer ? { issuer: options.issuer } : {}),
      ...(options.mount ? { mount: options.mount } : {}),
      plugin,
      configuration: {
        findAccount: (_ctx: KoaContextWithOIDC, sub: string) =>
          sub === 'nobody' ? undefined : { accountId: sub, claims: () => ({ sub }) },
        ...options.configuration,
      },
    },
    ...(options.kind ? [options.kind] : []),
  );
  const open = (model: string) => instantiateAdapter(tp.adapter, model) as SessionAdapter & BoundedIndexes;
  const deps: ApprovalDependencies = {
    bus: installedEventBus(tp.provider)!,
    options: resolveOptions({ managementResource: MANAGEMENT, ...plugin } as ImpersonationOptions),
    approvals: new ApprovalStore(open(APPROVAL_MODEL)),
    sessions: new SessionStore(open(SESSION_MODEL)),
  };
  return { tp, deps, policy };
}

/** An account id no other test uses. */
export function newCustomer(): string {
  return `customer-${randomBytes(6).toString('hex')}`;
}

/** POST {managementPath} as `client` (the backend by default) with a fresh M2M token; the reply as it comes. */
export async function askForSubjectToken(
  tp: TestProvider,
  body: Record<string, unknown>,
  client: ClientCredentials = CLIENTS.backend,
): Promise<Reply> {
  return managementRequest(tp, body, await m2mToken(tp, client));
}

/** GET {requestsPath}/{id} as `client` (the backend by default); the reply as it comes. */
export async function readApprovalRequest(
  tp: TestProvider,
  id: string,
  client: ClientCredentials = CLIENTS.backend,
): Promise<Reply> {
  return apiRequest(tp, 'GET', `${REQUESTS}/${id}`, await m2mToken(tp, client));
}

/** The id of the approval request a 202 answered with. */
export function requestIdOf(reply: Reply): string {
  const request = reply.body['approvalRequest'] as { id?: unknown } | undefined;
  if (reply.status !== 202 || typeof request?.id !== 'string') {
    throw new Error(`expected a pending approval request, got ${reply.status} ${JSON.stringify(reply.body)}`);
  }
  return request.id;
}

/** What a library call threw, answered as the API that calls it answers: its status, code and description. */
export async function refusalOf(call: Promise<unknown>): Promise<{ status: number; error: string; message: string }> {
  try {
    await call;
  } catch (error) {
    // Answered as the API that calls the operation answers it.
    const { status, error: code, message } = answerTo(error);
    return { status, error: code, message };
  }
  throw new Error('expected a refusal');
}
