// Run by provider-lifetime.test.ts under node --expose-gc: prints one JSON line of what it measured.
import Provider from 'oidc-provider';
import { createImpersonation, EVENTS, type Impersonation } from '../../lib/index.js';
import { MINIMAL_CONFIGURATION } from '../support/keys.js';

const gc = (globalThis as { gc?: () => void }).gc!;
const ISSUER = 'https://id.example.com';
const SECRET = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;

function installed(withDeliveries: boolean, keep?: (impersonation: Impersonation) => void): Provider {
  const impersonation = createImpersonation({
    managementResource: `${ISSUER}/api`,
    ...(withDeliveries && {
      webhooks: {
        subscriptions: [
          { id: 'crm', url: 'https://crm.example/hooks', events: [EVENTS.sessionRevoked], secret: SECRET },
        ],
        pollInterval: 10,
      },
      ssf: {},
    }),
  });
  const provider = new Provider(ISSUER, impersonation.configure({ ...MINIMAL_CONFIGURATION, clients: [] }));
  impersonation.install(provider);
  keep?.(impersonation);
  return provider;
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 20));
const retained = () => {
  const { heapUsed, arrayBuffers } = process.memoryUsage();
  return heapUsed + arrayBuffers;
};

/** Each install's time and what it keeps, after warm-up: `[ms, bytes]` for each of `count`. */
async function installCost(count: number): Promise<Array<[number, number]>> {
  const kept: Provider[] = [];
  for (let warm = 0; warm < 3; warm += 1) kept.push(installed(false));
  const measured: Array<[number, number]> = [];
  for (let round = 0; round < count; round += 1) {
    await settle();
    gc();
    const before = retained();
    const start = performance.now();
    kept.push(installed(false));
    const ms = performance.now() - start;
    await settle();
    gc();
    measured.push([ms, retained() - before]);
  }
  return measured;
}

const kept: unknown[] = [];

/** Whether a provider with webhooks and SSF, dropped without stop(), is collected; `keep` says what the process keeps. */
async function collected(keep?: (impersonation: Impersonation) => unknown): Promise<boolean> {
  let freed = false;
  const registry = new FinalizationRegistry(() => {
    freed = true;
  });
  registry.register(installed(true, keep && ((impersonation) => kept.push(keep(impersonation)))), 'provider');
  for (let round = 0; round < 100 && !freed; round += 1) {
    await settle();
    gc();
  }
  return freed;
}

const mode = process.argv[2];
console.log(
  JSON.stringify(
    mode === 'collect'
      ? { collected: await collected() }
      : mode === 'kept'
        ? {
            byImpersonation: !(await collected((impersonation) => impersonation)),
            byWebhooks: !(await collected((impersonation) => impersonation.webhooks())),
          }
        : { installs: await installCost(7) },
  ),
);
