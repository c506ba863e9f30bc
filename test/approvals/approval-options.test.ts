import { expect } from 'chai';
import { createImpersonation } from '../../lib/index.js';
import type { ImpersonationOptions } from '../../lib/index.js';

const base = { managementResource: 'https://idp.example/api' } satisfies ImpersonationOptions;

function withApprovals(approvals: unknown) {
  return () => createImpersonation({ ...base, approvals } as ImpersonationOptions);
}

describe('the approvals option', () => {
  it('is off by default: nothing waits for a customer', () => {
    expect(createImpersonation(base).options.approvals).to.equal(undefined);
  });

  it('fills its defaults around the customer API resource', () => {
    const { approvals } = createImpersonation({
      ...base,
      approvals: { customerResource: 'https://idp.example/support-access' },
    }).options;
    expect(approvals).to.include({
      customerResource: 'https://idp.example/support-access',
      customerScope: 'support-access',
      customerPath: '/api/support-access',
      requestsPath: '/api/approval-requests',
      maxGrantDuration: 2_592_000,
      requestTTL: 900,
      maxGrantsPerCustomer: 20,
      maxPendingPerCustomer: 20,
    });
    expect(approvals?.breakGlassClients).to.deep.equal([]);
    // An approval's grant is bound to all that was asked unless the deployment says otherwise.
    expect(approvals?.widenApprovedGrants).to.deep.equal([]);
    expect(Object.isFrozen(approvals)).to.equal(true);
  });

  const refusals: [string, unknown, RegExp][] = [
    ['no object', 'yes', /"approvals" must be an object/],
    ['no customer resource', {}, /"approvals\.customerResource" must be an absolute URI/],
    ['a resource with a fragment', { customerResource: 'https://x.example/#a' }, /customerResource/],
    [
      'the Management API resource',
      { customerResource: base.managementResource },
      /must differ from "managementResource"/,
    ],
    [
      'a misspelt option',
      { customerResource: 'https://c.example', requestTtl: 60 },
      /"approvals\.requestTtl" is unknown; did you mean "approvals\.requestTTL"\?/,
    ],
    [
      'a scope of the Management API',
      { customerResource: 'https://c.example', customerScope: 'subject-tokens:create' },
      /customerScope/,
    ],
    ['two scopes', { customerResource: 'https://c.example', customerScope: 'a b' }, /single scope/],
    [
      'the sessions path',
      { customerResource: 'https://c.example', customerPath: '/api/impersonations' },
      /customerPath/,
    ],
    ['one path twice', { customerResource: 'https://c.example', requestsPath: '/api/support-access' }, /requestsPath/],
    ['a policy that is no function', { customerResource: 'https://c.example', require: 'grant' }, /approvals\.require/],
    [
      'a grant of more than a year',
      { customerResource: 'https://c.example', maxGrantDuration: 400 * 86_400 },
      /maxGrantDuration/,
    ],
    ['a request that never expires', { customerResource: 'https://c.example', requestTTL: 0 }, /requestTTL/],
    [
      'a break-glass client that is no id',
      { customerResource: 'https://c.example', breakGlassClients: [''] },
      /breakGlassClients/,
    ],
    [
      'a widening that names nothing an approval binds',
      { customerResource: 'https://c.example', widenApprovedGrants: ['actor'] },
      /"approvals\.widenApprovedGrants" must be an array of "clientId", "caller", "context"/,
    ],
    [
      'a widening that is no array',
      { customerResource: 'https://c.example', widenApprovedGrants: 'clientId' },
      /widenApprovedGrants/,
    ],
  ];
  for (const [what, approvals, message] of refusals) {
    it(`refuses ${what}, naming the option`, () => {
      expect(withApprovals(approvals)).to.throw(message);
    });
  }
});
