/**
 * Summarizes a V8 .cpuprofile (node --cpu-prof) of the provider process:
 * where the main thread's time goes, by package and by function, and the
 * inclusive time of the plugin's own functions.
 *
 *   node build/bench/profile.js FILE.cpuprofile [--top N]
 *
 * Only the main thread is sampled: work Node hands to its thread pool (WebCrypto
 * signatures, which jose uses) does not appear here except as the JS that
 * schedules it and the callbacks that resume it.
 */
import { readFileSync } from 'node:fs';

interface CallFrame { functionName: string; url: string; lineNumber: number; columnNumber: number }
interface ProfileNode { id: number; callFrame: CallFrame; children?: number[] }
interface CpuProfile { nodes: ProfileNode[]; startTime: number; endTime: number; samples: number[]; timeDeltas: number[] }

const SPECIAL = new Set(['(idle)', '(program)', '(garbage collector)', '(root)']);

/** Which package (or part of Node) a frame belongs to. */
export function bucketOf(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (!url) return SPECIAL.has(functionName) ? functionName : '(native)';
  if (url.startsWith('node:')) {
    const module = url.slice('node:'.length).replace(/^internal\//, '');
    return `node:${module.split('/')[0]}`;
  }
  const modules = url.lastIndexOf('/node_modules/');
  if (modules >= 0) {
    const rest = url.slice(modules + '/node_modules/'.length).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  if (url.includes('/build/lib/') || url.includes('/dist/')) return 'plugin (lib/)';
  if (url.includes('/build/test/')) return 'test harness';
  if (url.includes('/build/bench/')) return 'bench';
  return url;
}

function shortUrl(url: string): string {
  const modules = url.lastIndexOf('/node_modules/');
  if (modules >= 0) return url.slice(modules + '/node_modules/'.length);
  const build = url.indexOf('/build/');
  return build >= 0 ? url.slice(build + '/build/'.length) : url;
}

function frameKey(frame: CallFrame): string {
  return `${frame.functionName || '(anonymous)'} ${shortUrl(frame.url)}:${frame.lineNumber + 1}`;
}

export function summarizeProfile(file: string, top = 20): string[] {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const self = new Map<number, number>();
  // timeDeltas[i] is the time since the previous sample; charge it to the sample it ends.
  for (let index = 0; index < profile.samples.length; index += 1) {
    const id = profile.samples[index]!;
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[index] ?? 0));
  }
  const total = [...self.values()].reduce((sum, value) => sum + value, 0);
  const share = (micros: number): string => `${((micros / total) * 100).toFixed(1).padStart(5)}%`;

  const byBucket = new Map<string, number>();
  const byFunction = new Map<string, number>();
  for (const [id, micros] of self) {
    const frame = byId.get(id)!.callFrame;
    const bucket = bucketOf(frame);
    byBucket.set(bucket, (byBucket.get(bucket) ?? 0) + micros);
    if (!SPECIAL.has(frame.functionName)) byFunction.set(frameKey(frame), (byFunction.get(frameKey(frame)) ?? 0) + micros);
  }

  // Inclusive time of each function, counted once per stack even when it recurses.
  const inclusive = new Map<string, number>();
  const root = profile.nodes[0]!;
  const totalOf = new Map<number, number>();
  const computeTotal = (node: ProfileNode): number => {
    let sum = self.get(node.id) ?? 0;
    for (const child of node.children ?? []) sum += computeTotal(byId.get(child)!);
    totalOf.set(node.id, sum);
    return sum;
  };
  computeTotal(root);
  const walk = (node: ProfileNode, onStack: Set<string>): void => {
    const key = frameKey(node.callFrame);
    const fresh = !onStack.has(key);
    if (fresh && bucketOf(node.callFrame) === 'plugin (lib/)') inclusive.set(key, (inclusive.get(key) ?? 0) + totalOf.get(node.id)!);
    if (fresh) onStack.add(key);
    for (const child of node.children ?? []) walk(byId.get(child)!, onStack);
    if (fresh) onStack.delete(key);
  };
  walk(root, new Set());

  const idle = byBucket.get('(idle)') ?? 0;
  const seconds = (profile.endTime - profile.startTime) / 1e6;
  const lines = [
    `main thread: ${seconds.toFixed(1)} s sampled, busy ${share(total - idle).trim()} (idle ${share(idle).trim()})`,
    'self time by package:',
    ...[...byBucket].sort((a, b) => b[1] - a[1]).slice(0, 14).map(([name, micros]) => `  ${share(micros)}  ${name}`),
    `top ${top} functions by self time:`,
    ...[...byFunction].sort((a, b) => b[1] - a[1]).slice(0, top).map(([name, micros]) => `  ${share(micros)}  ${name}`),
    'plugin functions by inclusive time:',
    ...[...inclusive].sort((a, b) => b[1] - a[1]).slice(0, 15).map(([name, micros]) => `  ${share(micros)}  ${name}`),
  ];
  return lines;
}

if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  const file = process.argv[2];
  if (!file) throw new TypeError('usage: node build/bench/profile.js FILE.cpuprofile [--top N]');
  const topIndex = process.argv.indexOf('--top');
  for (const line of summarizeProfile(file, topIndex > 0 ? Number(process.argv[topIndex + 1]) : 20)) console.log(line);
}
