import { readFileSync } from 'node:fs';
import { expect } from 'chai';

/** scripts/check-services.mjs, run before `npm test`: it names what is missing and installs nothing. */
describe("npm test's check of the services", () => {
  const script = readFileSync(new URL('../../../scripts/check-services.mjs', import.meta.url), 'utf8');

  it('runs no command (no apt-get behind the back of whoever runs npm test as root)', () => {
    expect(script).to.not.match(/child_process|execFile|spawn/);
  });

  it('names the package and the command that provides the browser', () => {
    expect(script).to.include('apt-get install -y chromium');
  });
});
