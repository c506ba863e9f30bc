/** An audit trail in memory, chained and verified as the PostgreSQL log is; it lasts as long as the process. */
import { optionChecks } from '../config/checks.js';
import { storeFull } from '../errors.js';
import type { ImpersonationEvent, ImpersonationEventName } from '../event-types.js';
import type { AuditLog } from './sink.js';
import {
  canonicalContent,
  GENESIS,
  limitOf,
  pageOf,
  rowHash,
  rowOf,
  seqOfCursor,
  walkChain,
  type AuditEntry,
  type ChainedRow,
} from './chain.js';

export interface MemoryAuditLogOptions {
  /** Most rows kept. Default 100,000; a full log refuses appends (fail closed) rather than drop rows. */
  maxRows?: number | undefined;
}

/** `verify()` walks the chain kept, as `createPostgresAuditLog().verify()` does. */
export interface MemoryAuditLog extends AuditLog {
  /** The rows as kept, oldest first (live: what a test or an export reads, and what tampering would change). */
  readonly rows: ChainedRow[];
}

export function createMemoryAuditLog(options: MemoryAuditLogOptions = {}): MemoryAuditLog {
  const check = optionChecks('createMemoryAuditLog');
  check.known(options, ['maxRows']);
  const maxRows = check.positive('maxRows', options.maxRows ?? 100_000);
  const rows: ChainedRow[] = [];
  const head = { seq: 0, hash: GENESIS };

  return {
    rows,
    append: async (name: ImpersonationEventName, event: ImpersonationEvent) => {
      if (head.seq >= maxRows) throw storeFull('audit log');
      const row = rowOf(name, event);
      const content = canonicalContent(row);
      const seq = head.seq + 1;
      const hash = rowHash(head.hash, seq, content);
      rows.push(Object.assign(row, { seq, content, prevHash: head.hash, hash })); // the row is this append's own
      head.seq = seq;
      head.hash = hash;
    },
    verify: async () => {
      const walk = await walkChain([rows], async () => ({ ...head }));
      return walk.ok ? { ok: true, count: walk.count, checkpoints: 0 } : walk.failure;
    },
    query: async (filter = {}) => {
      const limit = limitOf(filter.limit);
      const before = filter.cursor === undefined ? Infinity : seqOfCursor(filter.cursor);
      const since = filter.since?.getTime() ?? -Infinity;
      const until = filter.until?.getTime() ?? Infinity;
      const items: AuditEntry[] = [];
      for (let index = rows.length - 1; index >= 0 && items.length < limit; index -= 1) {
        const stored = rows[index]!;
        if (stored.seq >= before) continue;
        if (filter.subject !== undefined && stored.subject !== filter.subject) continue;
        if (filter.actor !== undefined && stored.actor !== filter.actor) continue;
        if (filter.events !== undefined && !filter.events.includes(stored.event as ImpersonationEventName)) continue;
        const at = Date.parse(stored.at);
        if (at < since || at >= until) continue;
        const { content: _content, prevHash: _prevHash, ...entry } = stored;
        items.push(structuredClone(entry));
      }
      return pageOf(items, limit);
    },
  };
}
