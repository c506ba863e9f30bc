#!/usr/bin/env node
// oidc-provider's own test suite with the plugin on every Provider it builds, installed as
// docs/adding-to-your-deployment.md says. Not part of CI: the suite takes many minutes.
// From a checkout of oidc-provider (its dev dependencies installed, its lib/ replaced by a link to
// this package's node_modules/oidc-provider/lib), after `npm run build` here:
//   node <this file> --plain plain.txt && node <this file> plugin.txt && diff plain.txt plugin.txt
// Each run writes one line per test, "pass <title>" or "fail <title>", sorted (titles holding generated keys differ).
import { register, createRequire } from 'node:module';
import { once } from 'node:events';
import { createServer } from 'node:http';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import Provider, { errors } from 'oidc-provider';

export * from 'oidc-provider';

const role = new URL(import.meta.url).search;
// Loaded only where a Provider is wrapped, so that the plain run has none of the plugin.
const { createImpersonation, createMemoryAdapter } = role === '?provider' ? await import('../dist/index.js') : {};
let tests;
let lib;

export function initialize(data) {
  ({ tests, lib } = data);
}

// The suite's imports of oidc-provider's lib/index.js get the wrapped Provider below instead.
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  return result.url === lib && context.parentURL?.startsWith(tests)
    ? { ...result, url: `${import.meta.url.split('?')[0]}?provider` }
    : result;
}

const wrapped = new Proxy(Provider, {
  construct(target, [issuer, configuration = {}, ...rest], newTarget) {
    let impersonation;
    let configured;
    try {
      impersonation = createImpersonation({
        managementResource: `${issuer}/api`,
        // The plugin's records in a store of its own where the test brings its adapter.
        ...(configuration.adapter && { store: createMemoryAdapter() }),
      });
      // oidc-provider's default answer when the test names no resource server: every resource is unknown.
      const getResourceServerInfo = () => {
        throw new errors.InvalidTarget();
      };
      const resourceIndicators = { getResourceServerInfo, ...configuration.features?.resourceIndicators };
      configured = impersonation.configure({
        ...configuration,
        features: { ...configuration.features, resourceIndicators },
      });
    } catch (error) {
      // A configuration the plugin refuses at start-up (an invalid issuer, resource indicators off): built as it is.
      console.error(`plugin refused ${String(issuer)}: ${error.message}`);
      return Reflect.construct(target, [issuer, configuration, ...rest], newTarget);
    }
    const provider = Reflect.construct(target, [issuer, configured, ...rest], newTarget);
    impersonation.install(provider);
    return provider;
  },
});
export default wrapped;

if (role === '') {
  const plain = process.argv[2] === '--plain';
  const output = process.argv[plain ? 3 : 2] ?? 'results.txt';
  if (!plain) {
    const tests = pathToFileURL(join(process.cwd(), 'test/')).href;
    register(`${import.meta.url}?hooks`, { data: { tests, lib: import.meta.resolve('oidc-provider') } });
  }
  const require = createRequire(join(process.cwd(), 'package.json'));
  const Mocha = require('mocha');
  const esm = require('mocha/lib/nodejs/esm-utils.js');
  const requireOrImport = esm.requireOrImport;
  // A spec file written for another release of lib/ may not load: it is named, and the others run.
  esm.requireOrImport = (file, decorator) =>
    requireOrImport(file, decorator).catch((error) => {
      console.error(`not loaded ${file}: ${error.message}`);
      return {};
    });
  globalThis.server = createServer().listen(0, '::');
  await once(globalThis.server, 'listening');
  process.env.MOUNT_VIA ??= '';
  process.env.MOUNT_TO ??= '/';
  const mocha = new Mocha({ timeout: 3000 });
  mocha.files = require('mocha/lib/cli/lookup-files.js')('test/**/*.test.js', ['js'], true);
  await mocha.loadFilesAsync();
  const lines = [];
  await new Promise((done) => {
    const runner = mocha.run(done);
    runner.on('pass', (test) => lines.push(`pass ${test.fullTitle()}`));
    runner.on('fail', (test) => lines.push(`fail ${test.fullTitle()}`));
  });
  writeFileSync(output, `${lines.sort().join('\n')}\n`);
  globalThis.server.close();
  process.exit(0);
}
