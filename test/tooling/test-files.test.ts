import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { expect } from 'chai';
import { loadTestFiles, type TestFiles } from '../support/test-files.js';

/**
 * scripts/test-files.mjs, which picks the spec files the Redis, PostgreSQL and
 * oidc-provider runs take from what each loads: on a build/ tree of its own,
 * each way a file can come to run on TEST_ADAPTER's store or touch oidc-provider.
 */
describe('the selection of spec files for the store and oidc-provider runs', function () {
  let testFiles: TestFiles;
  let build: string;

  const write = (path: string, javascript: string) => {
    mkdirSync(dirname(join(build, path)), { recursive: true });
    writeFileSync(join(build, path), javascript);
  };
  const selected = (selection: string) =>
    testFiles.select(selection, new testFiles.ModuleGraph(build)).map((file) => file.slice(build.length + 1));

  before(async function () {
    testFiles = await loadTestFiles();
    build = mkdtempSync(join(tmpdir(), 'test-files-'));
    write(
      'test/support/adapters.js',
      `export function suiteAdapterKind() { return adapterKind(); }\nexport const ADAPTERS = [];\n`,
    );
    // `\u0028` is `(`: the selection reads JavaScript as text, and this file itself calls and loads none of it.
    write(
      'test/support/provider.js',
      `import { suiteAdapterKind } from './adapters.js';\nexport const start = (kind = suiteAdapterKind\u0028)) => kind;\n`,
    );
    write('test/support/child.js', `import { start } from './provider.js';\nstart();\n`);
    write(
      'lib/index.js',
      `import Provider from 'oidc-provider';\nimport { check } from './provider-internals.js';\nexport { Provider, check };\n`,
    );
    write(
      'lib/provider-internals.js',
      `import * as grants from 'oidc-provider/lib/helpers/grants.js';\nexport const check = grants;\n`,
    );
    write('fixtures/provider.js', `import Provider, { errors } from 'oidc-provider';\nexport { Provider, errors };\n`);

    write('test/exchange/through-helper.test.js', `import {\n  start,\n} from '../support/provider.js';\nstart();\n`);
    write(
      'test/stores/every-adapter.test.js',
      `import { ADAPTERS } from '../support/adapters.js';\nimport '../../lib/index.js';\n`,
    );
    write(
      'test/stores/child.test.js',
      `const script = fileURLToPath(new URL\u0028'../support/child.js', import.meta.url));\nspawn(process.execPath, [script]);\n`,
    );
    write('test/stores/lazy.test.js', `const { start } = await import\u0028'../support/provider.js');\n`);
    write('test/plugin/fixture.test.js', `import { Provider } from '../../fixtures/provider.js';\n`);
    write('test/plugin/internals.test.js', `export * from '../../lib/provider-internals.js';\n`);
    write('test/redis-cluster/cluster.test.js', `import { start } from '../support/provider.js';\n`);
  });

  after(function () {
    rmSync(build, { recursive: true, force: true });
  });

  it('the store runs take what reaches a call of suiteAdapterKind: through helpers, a started script, a dynamic import', function () {
    expect(selected('store')).to.deep.equal([
      'test/exchange/through-helper.test.js',
      'test/stores/child.test.js',
      'test/stores/lazy.test.js',
    ]);
  });

  it('a file that imports the list of adapters, and runs on each itself, is not taken again', function () {
    expect(selected('store')).not.to.include('test/stores/every-adapter.test.js');
    expect(selected('suite')).to.include('test/stores/every-adapter.test.js');
  });

  it('the oidc-provider runs take what loads oidc-provider, or lib/provider-internals.js, outside lib/', function () {
    expect(selected('provider')).to.deep.equal(['test/plugin/fixture.test.js', 'test/plugin/internals.test.js']);
  });

  it('the Redis Cluster files make a run of their own, out of the suite', function () {
    expect(selected('cluster')).to.deep.equal(['test/redis-cluster/cluster.test.js']);
    expect(selected('suite')).not.to.include('test/redis-cluster/cluster.test.js');
    expect(selected('store')).not.to.include('test/redis-cluster/cluster.test.js');
  });

  it('reads the imports tsc writes over several lines, re-exports and started scripts, and resolves relative ones', function () {
    const file = '/tree/build/test/a/x.test.js';
    const javascript = [
      `import {\n  a,\n  b,\n} from '../support/one.js';`,
      `import 'side-effect';`,
      `export * from './two.js';`,
      `const three = await import('../../lib/three.js');`,
      `new Worker(new URL('./knock.js', import.meta.url));`,
      `const text = "import nothing from 'here'";`,
    ].join('\n');
    expect(testFiles.runtimeSpecifiers(javascript, file)).to.have.members([
      '/tree/build/test/support/one.js',
      'side-effect',
      '/tree/build/test/a/two.js',
      '/tree/build/lib/three.js',
      '/tree/build/test/a/knock.js',
    ]);
  });
});
