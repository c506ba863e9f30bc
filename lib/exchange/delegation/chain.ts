import { invalidRequest } from '../../errors.js';

/** RFC 8693 4.1: the new actor on top of the subject token's chain, copied whole so no actor is dropped. */
export function nestedAct(
  actor: Record<string, unknown>,
  earlier: Record<string, unknown> | undefined,
  maxDepth: number,
): { act: Record<string, unknown>; depth: number } {
  const depth = 1 + chainDepth(earlier);
  if (depth > maxDepth) {
    throw invalidRequest(`the act chain would name ${depth} actors; this server allows at most ${maxDepth}`);
  }
  return { act: earlier === undefined ? { ...actor } : { ...actor, act: earlier }, depth };
}

/** Actors an `act` claim names; a chain deeper than any limit stops the count (and so is refused). */
export function chainDepth(act: Record<string, unknown> | undefined): number {
  let depth = 0;
  for (let level: unknown = act; isObject(level); level = level['act']) {
    depth += 1;
    if (depth > 64) break;
  }
  return depth;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
