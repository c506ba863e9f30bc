import { expect } from 'chai';
import { isSessionId, newSessionId } from '../../lib/sessions/record.js';

describe('impersonation session ids', () => {
  it('are well formed and never repeat, across refills of their random pool', () => {
    const ids = Array.from({ length: 2000 }, () => newSessionId());
    for (const id of ids) expect(isSessionId(id), id).to.equal(true);
    expect(new Set(ids).size).to.equal(ids.length);
    // 16 random bytes each: no shared prefix beyond chance between consecutive ids.
    const sharedPrefixes = ids.slice(1).filter((id, at) => id.slice(4, 10) === ids[at]!.slice(4, 10)).length;
    expect(sharedPrefixes).to.equal(0);
  });
});
