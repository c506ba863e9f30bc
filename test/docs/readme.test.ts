import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { networkInterfaces } from 'node:os';
import { expect } from 'chai';
import { decodeJwt } from '../support/http.js';
import { scaled } from '../support/time.js';

const root = new URL('../../../', import.meta.url);

/** The README's quick start, as a newcomer would paste it. */
function quickStart(): string {
  const readme = readFileSync(new URL('README.md', root), 'utf8');
  const match = /<!-- quick-start -->\n```js\n([\s\S]*?)```/.exec(readme);
  if (!match) throw new Error('README has no quick-start block');
  return match[1]!;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('README quick start', () => {
  let child: ChildProcess;
  let base: string;
  let port: number;

  before(async () => {
    // Inside the package, so `oidc-provider-impersonation` resolves to its own dist/ (self-reference).
    const file = new URL('build/quick-start.mjs', root);
    writeFileSync(file, quickStart());
    port = await freePort();
    base = `http://localhost:${port}`;
    child = spawn(process.execPath, [file.pathname], {
      env: { ...process.env, PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('quick start did not start in time')), scaled(10_000));
      child.stdout!.on('data', (chunk: Buffer) => {
        if (String(chunk).includes('listening')) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`quick start exited with ${code}`));
      });
    });
  });
  after(() => {
    child?.kill();
  });

  it('listens on the loopback interface only', async () => {
    const others = Object.values(networkInterfaces())
      .flat()
      .filter((each) => each && !each.internal && !each.address.startsWith('fe80'))
      .map((each) => each!.address);
    for (const host of ['::1', ...others]) {
      const answered = await new Promise<boolean>((resolve) => {
        const socket = connect(port, host, () => resolve(true)).on('error', () => resolve(false));
        socket.on('connect', () => socket.destroy());
      });
      expect(answered, host).to.equal(false);
    }
  });

  it('names the port of every curl command through PORT', () => {
    const readme = readFileSync(new URL('README.md', root), 'utf8');
    for (const name of ['quick-start-curl', 'quick-start-actor']) {
      const block = readme.slice(readme.indexOf(`<!-- ${name} -->`)).split('```')[1]!;
      expect(block, name).to.include('ISSUER=http://localhost:${PORT:-3000}').and.not.include('localhost:3000');
    }
    // Run in a shell without the server's PORT, they must say which port they could not reach, not print nothing.
    const curl = readme.slice(readme.indexOf('<!-- quick-start-curl -->')).split('```')[1]!;
    expect(curl.match(/curl -sS /g)).to.have.length(3);
    expect(curl).to.not.match(/curl -s /);
  });

  it("runs, and the README's curl walk-through works against it", async () => {
    const m2m = (await fetch(`${base}/token`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from('impersonation-backend:change-me').toString('base64')}` },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        scope: 'subject-tokens:create',
        resource: `${base}/api`,
      }),
    }).then((response) => response.json())) as { access_token: string };
    expect(m2m.access_token).to.be.a('string');

    const created = await fetch(`${base}/api/subject-tokens`, {
      method: 'POST',
      headers: { authorization: `Bearer ${m2m.access_token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ userId: 'bob', context: { ticketId: 'T-1', reason: 'checkout fails' } }),
    });
    expect(created.status).to.equal(201);
    const { subjectToken } = (await created.json()) as { subjectToken: string };

    const exchanged = await fetch(`${base}/token`, {
      method: 'POST',
      body: new URLSearchParams({
        grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
        client_id: 'support-console',
        subject_token: subjectToken,
        subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
        resource: 'https://api.example.com',
        scope: 'profile:read',
      }),
    });
    const body = (await exchanged.json()) as Record<string, string>;
    expect(exchanged.status, JSON.stringify(body)).to.equal(200);
    const claims = decodeJwt(body['access_token']!);
    expect(claims).to.include({ sub: 'bob', aud: 'https://api.example.com' });
    expect(claims['impersonation_context']).to.deep.equal({ ticket_id: 'T-1' });
  });
});
