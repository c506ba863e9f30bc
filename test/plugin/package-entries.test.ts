import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { packageOf, packagesLoadedBy } from '../support/loaded-packages.js';

interface PackageJson {
  exports: Record<string, { default: string }>;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional?: boolean }>;
}
const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as PackageJson;

/** The store drivers: each an optional peer, loaded by its own subpath only. */
const DRIVERS = { ioredis: ['./adapters/redis'], pg: ['./adapters/postgres', './audit-postgres'] };

/** The packages an export of package.json loads, from its lib/ source; `node:` built-ins left out. */
function loadedBy(subpath: string): string[] {
  const target = pkg.exports[subpath]!.default.replace(/^\.\/dist\//, '').replace(/\.js$/, '.ts');
  const loaded = [...packagesLoadedBy(target)].filter((specifier) => !specifier.startsWith('node:')).map(packageOf);
  return [...new Set(loaded)].sort();
}

/*
 * What an installation pays for: the main entry must run where only
 * oidc-provider and the package's dependencies are installed, and a driver
 * is installed by the deployments that use its store. .ci/consumer-check.sh
 * checks the same on the packed tarball, installed.
 */
describe('package entry points', () => {
  it("the main entry loads oidc-provider and the package's dependencies, no store driver", () => {
    expect(loadedBy('.')).to.deep.equal([...Object.keys(pkg.dependencies), 'oidc-provider'].sort());
  });

  it('each store driver is an optional peer (and a development dependency), loaded by its subpaths only', () => {
    for (const [driver, subpaths] of Object.entries(DRIVERS)) {
      expect(pkg.dependencies, driver).to.not.have.property(driver);
      expect(pkg.peerDependencies, driver).to.have.property(driver);
      expect(pkg.peerDependenciesMeta[driver]?.optional, driver).to.equal(true);
      expect(pkg.devDependencies, driver).to.have.property(driver);
      const loading = Object.keys(pkg.exports).filter((subpath) => loadedBy(subpath).includes(driver));
      expect(loading, `the entry points that load ${driver}`).to.deep.equal(subpaths);
    }
  });

  it('every entry point loads only what package.json declares, and none a development dependency', () => {
    const declared = new Set([...Object.keys(pkg.dependencies), ...Object.keys(pkg.peerDependencies)]);
    for (const subpath of Object.keys(pkg.exports))
      expect(
        loadedBy(subpath).filter((name) => !declared.has(name)),
        subpath,
      ).to.deep.equal([]);
  });

  it('the resource-server helper loads jose only: it stands without oidc-provider, Koa or a driver', () => {
    expect(loadedBy('./resource-server')).to.deep.equal(['jose']);
    expect(pkg.peerDependenciesMeta['oidc-provider']?.optional, 'installed without oidc-provider').to.equal(true);
  });

  it('@opentelemetry/api is an optional peer (and a development dependency), imported by no entry point', () => {
    const api = '@opentelemetry/api';
    expect(pkg.dependencies).to.not.have.property(api);
    expect(pkg.peerDependencies).to.have.property(api);
    expect(pkg.peerDependenciesMeta[api]?.optional).to.equal(true);
    expect(pkg.devDependencies).to.have.property(api);
    for (const subpath of Object.keys(pkg.exports)) expect(loadedBy(subpath), subpath).to.not.include(api);
  });

  describe('the main entry where @opentelemetry/api is not installed, or not wanted', function () {
    this.timeout(30_000);
    const main = new URL('../../lib/index.js', import.meta.url).href;
    /** Runs `code` in a Node process of its own; `absent` makes @opentelemetry/api unresolvable there. */
    function run(code: string, absent: boolean): string {
      const dir = mkdtempSync(join(tmpdir(), 'otel-absent-'));
      const preload = join(dir, 'absent.cjs');
      writeFileSync(
        preload,
        `const Module = require('node:module');
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (request.startsWith('@opentelemetry/')) throw Object.assign(new Error('not installed'), { code: 'MODULE_NOT_FOUND' });
  return resolve.call(this, request, ...rest);
};`,
      );
      const script = `const { createImpersonation } = await import(${JSON.stringify(main)});
const { createRequire } = await import('node:module');
const loaded = () => Object.keys(createRequire(import.meta.url).cache).some((file) => file.includes('@opentelemetry'));
${code}`;
      return execFileSync(process.execPath, [...(absent ? ['-r', preload] : []), '--input-type=module', '-e', script], {
        encoding: 'utf8',
      }).trim();
    }

    it('starts, and createImpersonation() works, with nothing of OpenTelemetry loaded', () => {
      const code = `createImpersonation({ managementResource: 'https://management.example' });
console.log(loaded());`;
      expect(run(code, true)).to.equal('false');
    });

    it('loads nothing of OpenTelemetry with `telemetry: false`, and the API when the option is left out', () => {
      const code = `createImpersonation({ managementResource: 'https://management.example', telemetry: false });
const off = loaded();
createImpersonation({ managementResource: 'https://management.example' });
console.log(off, loaded());`;
      expect(run(code, false)).to.equal('false true');
    });
  });
});
