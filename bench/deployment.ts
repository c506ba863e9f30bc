/**
 * What a deployment adds to the provider that the plain bench configurations
 * leave out, set up as the demo's identity service sets it up: a
 * `getCustomJwtClaims` hook that copies the subject token's creation context
 * into the token, and an audit listener that writes every impersonation event
 * as one JSON line (here to a file that is deleted afterwards, where a
 * deployment writes to its log).
 */
import { createWriteStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Provider } from 'oidc-provider';
import { EVENTS, onImpersonationEvent, TOKEN_EXCHANGE_GRANT, type ImpersonationOptions } from '../lib/index.js';

export interface DeploymentSetup {
  plugin: Partial<ImpersonationOptions>;
  /** Writes one line to the audit log. */
  write(line: Record<string, unknown>): void;
  /** Subscribes the audit listener to every impersonation event of the provider. */
  listen(provider: Provider): void;
  /** Closes and deletes the audit file; resolves how many lines it held. */
  close(): Promise<number>;
}

/** What the hook adds to a token: the subject token's creation context (ticket, reason). */
export function contextClaims({ ticketId, reason }: Record<string, unknown>): Record<string, unknown> {
  return { impersonation_context: { ticket_id: ticketId, reason } };
}

export function deploymentSetup(): DeploymentSetup {
  const file = join(tmpdir(), `oidc-provider-impersonation-bench-audit-${process.pid}.jsonl`);
  const out = createWriteStream(file);
  let lines = 0;
  const write = (line: Record<string, unknown>) => {
    lines += 1;
    out.write(`${JSON.stringify({ time: new Date().toISOString(), ...line })}\n`);
  };
  return {
    plugin: {
      getCustomJwtClaims: ({ context }) =>
        context.grant.type === TOKEN_EXCHANGE_GRANT ? contextClaims(context.grant.subjectTokenContext) : {},
    },
    write,
    listen(provider) {
      for (const name of Object.values(EVENTS)) {
        onImpersonationEvent(provider, name, (event) => write({ event: name, ...event }));
      }
    },
    async close() {
      await new Promise<void>((resolve) => {
        out.end(resolve);
      });
      await rm(file, { force: true });
      return lines;
    },
  };
}
