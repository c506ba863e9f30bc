import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import type { Provider } from 'oidc-provider';
import ts from 'typescript';
import type { PoolSource as AdapterPoolSource } from '../../lib/adapters/postgres.js';
import type { PoolSource, SignatureAlgorithm } from '../../lib/audit-postgres/index.js';
import {
  EVENTS,
  onImpersonationEvent,
  type ActorAuthentication,
  type AuditLog,
  type AuditPage,
  type EndReason,
  type ExchangeDecision,
  type ImpersonationAdapterClass,
  type ImpersonationEvent,
  type ImpersonationListener,
  type ImpersonationOptions,
} from '../../lib/index.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const { exports: entryPoints } = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as {
  exports: Record<string, { types: string }>;
};

/**
 * The public declarations as a consumer's compiler sees them: every type they
 * refer to that a module of the package exports must be importable from one of
 * the entry points, or a consumer could not name what an option takes. Types a
 * module keeps to itself (helpers that build other types) need no name.
 */
function typesWithoutAName(): string[] {
  const dist = `${root}dist/`;
  const entries = Object.values(entryPoints).map(({ types }) => `${root}${types.replace(/^\.\//, '')}`);
  const program = ts.createProgram(entries, {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    skipLibCheck: true,
    noEmit: true,
  });
  const checker = program.getTypeChecker();
  const resolved = (symbol: ts.Symbol) =>
    symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
  const exportsOf = (file: ts.SourceFile) => {
    const module = checker.getSymbolAtLocation(file);
    return new Set(module ? checker.getExportsOfModule(module).map(resolved) : []);
  };
  const nameable = new Set(entries.flatMap((entry) => [...exportsOf(program.getSourceFile(entry)!)]));
  const inPackage = (symbol: ts.Symbol) =>
    !!symbol.declarations?.length &&
    symbol.declarations.every((node) => node.getSourceFile().fileName.startsWith(dist));
  const unnamed = new Set<string>();
  const seen = new Set<ts.Symbol>();
  const visit = (symbol: ts.Symbol, path: string): void => {
    if (seen.has(symbol)) return;
    seen.add(symbol);
    for (const declaration of symbol.declarations ?? []) {
      const walk = (node: ts.Node): void => {
        const name = ts.isTypeReferenceNode(node)
          ? node.typeName
          : ts.isExpressionWithTypeArguments(node)
            ? node.expression
            : ts.isTypeQueryNode(node)
              ? node.exprName
              : undefined;
        const found = name && checker.getSymbolAtLocation(name);
        if (found) {
          const target = resolved(found);
          if (inPackage(target) && !(target.flags & ts.SymbolFlags.TypeParameter)) {
            const file = target.declarations![0]!.getSourceFile();
            if (exportsOf(file).has(target) && !nameable.has(target)) unnamed.add(`${path} -> ${target.name}`);
            visit(target, `${path} -> ${target.name}`);
          }
        }
        ts.forEachChild(node, walk);
      };
      walk(declaration);
    }
  };
  for (const symbol of nameable) visit(symbol, symbol.name);
  return [...unnamed];
}

/**
 * The diagnostics of test/fixtures/strict-consumer/ as `tsc -p` prints them: a
 * consumer of the built declarations under the strictest flags a consumer may
 * use (.ci/tsconfig.strictest.json), exactOptionalPropertyTypes among them.
 */
function strictConsumerDiagnostics(): string[] {
  const config = `${root}test/fixtures/strict-consumer/tsconfig.json`;
  const parsed = ts.getParsedCommandLineOfConfigFile(config, undefined, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
      throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'));
    },
  })!;
  expect(parsed.options.exactOptionalPropertyTypes, 'the fixture compiles with exactOptionalPropertyTypes').to.equal(
    true,
  );
  const program = ts.createProgram(parsed.fileNames, parsed.options);
  const host: ts.FormatDiagnosticsHost = {
    getCanonicalFileName: (name) => name,
    getCurrentDirectory: () => root,
    getNewLine: () => '\n',
  };
  return [...parsed.errors, ...ts.getPreEmitDiagnostics(program)].map((diagnostic) =>
    ts.formatDiagnostic(diagnostic, host).trim(),
  );
}

describe('public types', () => {
  it('every type the public declarations refer to can be imported from an entry point', function () {
    this.timeout(60_000);
    expect(typesWithoutAName()).to.deep.equal([]);
  });

  it('under exactOptionalPropertyTypes, every optional option accepts an explicit undefined (`url: process.env[...]`)', function () {
    this.timeout(60_000);
    expect(strictConsumerDiagnostics()).to.deep.equal([]);
  });

  it('an exchange policy and the step-up option are typed with exported names', () => {
    const decision: ExchangeDecision = { scope: ['profile:read'] };
    const stepUp: ActorAuthentication = { maxAge: 300, acrValues: ['urn:mfa'] };
    const options: ImpersonationOptions = {
      managementResource: 'https://id.example.com/api',
      canExchange: (): ExchangeDecision => decision,
      actorAuthentication: stepUp,
    };
    expect(options.actorAuthentication).to.equal(stepUp);
  });
});

/*
 * What the compiler accepts and refuses: checked when the tests are built
 * (`tsc -p tsconfig.test.json`), never called. Each `@ts-expect-error` fails
 * the build when its line compiles.
 */
export function typedListeners(provider: Provider): void {
  onImpersonationEvent(provider, EVENTS.exchangeSucceeded, (event) => {
    // Every exchange that succeeded names its subject, session, token and expiry.
    const always: [string, string, string, string, number, string] = [
      event.subject,
      event.sessionId,
      event.subjectTokenId,
      event.accessTokenId,
      event.expiresAt,
      event.scope,
    ];
    // Only an exchange with an actor token names an actor.
    // @ts-expect-error: string | undefined
    const actor: string = event.actor;
    // @ts-expect-error: a success carries no error
    const error: string = event.error;
    void [always, actor, error];
  });

  onImpersonationEvent(provider, EVENTS.exchangeRefused, (event) => {
    const always: [string, string, string] = [event.clientId, event.error, event.reason];
    // A refusal before the subject token was found knows no subject.
    // @ts-expect-error: string | undefined
    const subject: string = event.subject;
    void [always, subject];
  });

  onImpersonationEvent(provider, EVENTS.sessionEnded, (event) => {
    const reason: EndReason = event.endReason;
    void reason;
  });

  // A listener written for one event does not fit another.
  const onSuccess: ImpersonationListener<typeof EVENTS.exchangeSucceeded> = (event) => void event.subject.length;
  // @ts-expect-error: a success listener for the revocation feed's event
  onImpersonationEvent(provider, EVENTS.revocationsServed, onSuccess);
  // @ts-expect-error: not an event name of the plugin
  onImpersonationEvent(provider, 'impersonation.exchange.done', () => {});
  // @ts-expect-error: the feed's event has a count, not a subject
  onImpersonationEvent(provider, EVENTS.revocationsServed, (event) => event.subject.length);

  // oidc-provider's own `on` knows the plugin's events too.
  provider.on(EVENTS.exchangeSucceeded, (event, ctx) => void [event.subject.length, ctx?.ip]);
  provider.once(EVENTS.subjectTokenCreated, (event) => void event.createdBy.length);
  // @ts-expect-error: string | undefined until narrowed
  provider.on(EVENTS.exchangeRefused, (event) => void event.subject.length);
  provider.on('grant.success', (ctx) => void ctx.oidc.client);

  // One listener for every event tells them apart by `name`; a field read on the union stays optional.
  for (const name of Object.values(EVENTS)) {
    onImpersonationEvent(provider, name, (event: ImpersonationEvent) => {
      if (event.name === EVENTS.sessionRevoked) void event.revokedBy.length;
      else if (event.name === EVENTS.revocationsServed) void event.count.toFixed();
      // @ts-expect-error: string | undefined on the union
      else void event.subject.length;
      const subject: string | undefined = event.subject;
      void subject;
    });
  }
}

/** The types a deployment that writes its own store, trail or PostgreSQL pool option needs, by name. */
export type NamedForDeployments = [
  ImpersonationAdapterClass,
  AuditLog,
  AuditPage,
  PoolSource,
  AdapterPoolSource,
  SignatureAlgorithm,
];
