/**
 * Summarizes a V8 .cpuprofile (node --cpu-prof) of the provider process:
 * where the main thread's time goes, by package and by function, and the
 * inclusive time of the plugin's own functions.
 *
 *   node build/bench/profile.js FILE.cpuprofile... [--top N]
 *
 * Samples under the bench's own frames (bench/server.ts answering the load
 * generator, stopping the profiler) are left out. Only the main thread is sampled: work Node hands to its thread pool (WebCrypto
 * signatures, which jose uses) does not appear here except as the JS that
 * schedules it and the callbacks that resume it.
 */
import { readFileSync } from 'node:fs';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

const SPECIAL = new Set(['(idle)', '(program)', '(garbage collector)', '(root)']);
/** Whose functions get their inclusive time listed: the plugin's, and the demo's when the demo is profiled. */
const INCLUSIVE_BUCKETS = new Set(['plugin (lib/)', 'demo (demo/)']);

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
  if (url.includes('/build/demo/')) return 'demo (demo/)';
  if (url.includes('/build/fixtures/') || url.includes('/build/test/')) return 'fixture provider';
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

export interface SummaryOptions {
  /** Requests served while the profiles ran: adds microseconds per request. */
  requests?: number;
  top?: number;
}

/** Microseconds of main-thread time added up over the profiles of one summary. */
interface Tally {
  /** Self time per package (bucketOf). */
  byBucket: Map<string, number>;
  /** Self time per function (frameKey). */
  byFunction: Map<string, number>;
  /** Inclusive time per plugin function. */
  inclusive: Map<string, number>;
  /** All self time counted. */
  total: number;
  /** Seconds the profiles spanned. */
  seconds: number;
}

function add(map: Map<string, number>, key: string, micros: number): void {
  map.set(key, (map.get(key) ?? 0) + micros);
}

/** Self and inclusive times of one or more profiles (e.g. every window of one scenario), added up. */
export function summarizeProfile(files: string | string[], { requests, top = 20 }: SummaryOptions = {}): string[] {
  const tally: Tally = { byBucket: new Map(), byFunction: new Map(), inclusive: new Map(), total: 0, seconds: 0 };
  for (const file of Array.isArray(files) ? files : [files]) {
    const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
    tally.seconds += (profile.endTime - profile.startTime) / 1e6;
    const byId = new Map(profile.nodes.map((node) => [node.id, node]));
    const self = selfTimes(profile, benchNodes(profile, byId));
    addSelfTimes(tally, byId, self);
    addPluginInclusiveTimes(tally, profile, byId, self);
  }
  return summaryLines(tally, requests, top);
}

/**
 * The bench's own work in the provider (answering stats, stopping and
 * serializing this very profile): every node under a bench frame, to be left out.
 */
function benchNodes(profile: CpuProfile, byId: Map<number, ProfileNode>): Set<number> {
  const ours = new Set<number>();
  const markOurs = (node: ProfileNode, inside: boolean): void => {
    const mine = inside || bucketOf(node.callFrame) === 'bench';
    if (mine) ours.add(node.id);
    for (const child of node.children ?? []) markOurs(byId.get(child)!, mine);
  };
  markOurs(profile.nodes[0]!, false);
  return ours;
}

/** Microseconds each node was on top of the stack, the nodes in `leftOut` not counted. */
function selfTimes(profile: CpuProfile, leftOut: Set<number>): Map<number, number> {
  const self = new Map<number, number>();
  // timeDeltas[i] is the time since the previous sample; charge it to the sample it ends.
  for (let index = 0; index < profile.samples.length; index += 1) {
    const id = profile.samples[index]!;
    if (leftOut.has(id)) continue;
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[index] ?? 0));
  }
  return self;
}

function addSelfTimes(tally: Tally, byId: Map<number, ProfileNode>, self: Map<number, number>): void {
  for (const [id, micros] of self) {
    tally.total += micros;
    const frame = byId.get(id)!.callFrame;
    add(tally.byBucket, bucketOf(frame), micros);
    if (!SPECIAL.has(frame.functionName)) add(tally.byFunction, frameKey(frame), micros);
  }
}

/** Inclusive time of the plugin's (and the demo's) functions, counted once per stack even when one recurses. */
function addPluginInclusiveTimes(
  tally: Tally,
  profile: CpuProfile,
  byId: Map<number, ProfileNode>,
  self: Map<number, number>,
): void {
  const totalOf = new Map<number, number>();
  const computeTotal = (node: ProfileNode): number => {
    let sum = self.get(node.id) ?? 0;
    for (const child of node.children ?? []) sum += computeTotal(byId.get(child)!);
    totalOf.set(node.id, sum);
    return sum;
  };
  const root = profile.nodes[0]!;
  computeTotal(root);
  const walk = (node: ProfileNode, onStack: Set<string>): void => {
    const key = frameKey(node.callFrame);
    const fresh = !onStack.has(key);
    if (fresh && INCLUSIVE_BUCKETS.has(bucketOf(node.callFrame))) add(tally.inclusive, key, totalOf.get(node.id)!);
    if (fresh) onStack.add(key);
    for (const child of node.children ?? []) walk(byId.get(child)!, onStack);
    if (fresh) onStack.delete(key);
  };
  walk(root, new Set());
}

function summaryLines(
  { byBucket, byFunction, inclusive, total, seconds }: Tally,
  requests: number | undefined,
  top: number,
): string[] {
  const idle = byBucket.get('(idle)') ?? 0;
  const share = (micros: number): string =>
    `${((micros / total) * 100).toFixed(1).padStart(5)}%` +
    (requests ? ` ${(micros / requests).toFixed(1).padStart(6)} µs/req` : '');
  const list = (map: Map<string, number>, count: number): string[] =>
    [...map]
      .sort((a, b) => b[1] - a[1])
      .slice(0, count)
      .map(([name, micros]) => `  ${share(micros)}  ${name}`);
  return [
    `main thread: ${seconds.toFixed(1)} s sampled, busy ${((1 - idle / total) * 100).toFixed(1)}%` +
      (requests
        ? `, ${((total - idle) / requests).toFixed(0)} µs of main-thread time per request (${requests} requests)`
        : ''),
    'self time by package:',
    ...list(byBucket, 14),
    `top ${top} functions by self time:`,
    ...list(byFunction, top),
    'plugin (and demo) functions by inclusive time:',
    ...list(inclusive, top),
  ];
}

if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  if (!process.argv[2]) throw new TypeError('usage: node build/bench/profile.js FILE.cpuprofile... [--top N]');
  const topIndex = process.argv.indexOf('--top');
  const files = process.argv.slice(2).filter((arg, index, all) => arg !== '--top' && all[index - 1] !== '--top');
  for (const line of summarizeProfile(files, { top: topIndex > 0 ? Number(process.argv[topIndex + 1]) : 20 }))
    console.log(line);
}
