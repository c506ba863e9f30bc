import type { IndexEntry } from './contracts/indexes.js';

/** Expiries left behind `head` before the expiries' array is compacted (then at most half of it is dead). */
const COMPACT_AFTER = 1024;

/** The members of one expiry: its one entry (most expiries have one), else appended, sorted by member once read (`sorted`). */
type Group = IndexEntry | (IndexEntry[] & { unsorted?: boolean });

/** Where a model's members are listed: by member, each index holding it followed by its entry there. */
export type Placements = Map<string, Array<MemoryIndex | IndexEntry | undefined>>;

/** One sorted index of the memory adapter, members grouped by expiry: an insertion moves only a new expiry's group. */
export class MemoryIndex {
  /** The groups' expiries, ascending from `#head` on, each group beside its expiry: expired ones leave by moving it. */
  #expiries: number[] = [];
  #groups: Array<Group | undefined> = [];
  #head = 0;
  #size = 0;
  /** Shared by a model's indexes: one lookup finds a member in all of them. */
  readonly #places: Placements;

  constructor(places: Placements = new Map()) {
    this.#places = places;
  }

  /** Live and expired members not yet pruned. */
  get size(): number {
    return this.#size;
  }

  has(member: string): boolean {
    return this.#places.get(member)?.includes(this) ?? false;
  }

  /** Adds `entry` (frozen: several indexes may hold it), moving its member if listed; whether it was. */
  add(entry: IndexEntry): boolean {
    const places = this.#places.get(entry.member);
    const at = places ? places.indexOf(this) : -1;
    if (at >= 0) this.#ungroup(places![at + 1] as IndexEntry);
    if (at >= 0) places![at + 1] = entry;
    else if (places)
      places.splice(places.includes(undefined) ? places.indexOf(undefined) : places.length, 2, this, entry);
    else this.#places.set(entry.member, [this, entry]);
    this.#group(entry);
    return at >= 0;
  }

  /** Adds `entry` (frozen, shared) to each of `indexes`; how many newly list it. A member new to all: one array, its size. */
  static addToAll(indexes: readonly MemoryIndex[], entry: IndexEntry): number {
    const places = indexes.length ? indexes[0]!.#places : undefined;
    if (!places || places.has(entry.member) || indexes.some((index, at) => indexes.indexOf(index) !== at))
      return indexes.filter((index) => !index.add(entry)).length;
    const placed = new Array<MemoryIndex | IndexEntry | undefined>(indexes.length * 2);
    indexes.forEach((index, at) => ((placed[at * 2] = index), (placed[at * 2 + 1] = entry), index.#group(entry)));
    places.set(entry.member, placed);
    return indexes.length;
  }

  /** Removes `member`; whether it was listed. */
  remove(member: string): boolean {
    const places = this.#places.get(member);
    const at = places ? places.indexOf(this) : -1;
    if (at < 0) return false;
    this.#ungroup(places![at + 1] as IndexEntry);
    this.#unplace(member, places!, at);
    return true;
  }

  /** Files `entry` under its expiry, counting it. */
  #group(entry: IndexEntry): void {
    const [expiries, groups] = [this.#expiries, this.#groups];
    // New members usually expire last: the last group, or a new one after it, is the common case.
    const last = expiries.length - 1;
    const appended = last < this.#head || entry.expiresAt > expiries[last]!;
    const at = appended ? last + 1 : searchFrom(expiries, this.#head, entry.expiresAt);
    const group = expiries[at] === entry.expiresAt ? groups[at] : undefined;
    this.#size += 1;
    if (Array.isArray(group)) {
      if (entry.member < group[group.length - 1]!.member) group.unsorted = true;
      group.push(entry);
    } else if (group) {
      groups[at] = group.member < entry.member ? [group, entry] : [entry, group];
    } else {
      expiries.splice(at, 0, entry.expiresAt);
      groups.splice(at, 0, entry);
    }
  }

  /** Takes `entry` out of its expiry's group, and the group out when it empties. */
  #ungroup({ member, expiresAt }: IndexEntry): void {
    this.#size -= 1;
    const at = searchFrom(this.#expiries, this.#head, expiresAt);
    const group = this.#groups[at]!;
    if (Array.isArray(group)) {
      group.splice(memberBound(sorted(group), member), 1);
      if (group.length === 1) this.#groups[at] = group[0]!;
      return;
    }
    this.#expiries.splice(at, 1);
    this.#groups.splice(at, 1);
  }

  /** Clears this index's pair (at `at`) in `member`'s places, for the next index it joins; the member once none is left. */
  #unplace(member: string, places: Array<MemoryIndex | IndexEntry | undefined>, at: number): void {
    places[at] = places[at + 1] = undefined;
    if (places.every((place) => place === undefined)) this.#places.delete(member);
  }

  /** Drops the members that expired by `now`; how many. */
  prune(now: number): number {
    const expiries = this.#expiries;
    let head = this.#head;
    let dropped = 0;
    while (head < expiries.length && expiries[head]! <= now) {
      const group = [this.#groups[head]!].flat();
      for (const { member } of group) {
        const places = this.#places.get(member)!;
        this.#unplace(member, places, places.indexOf(this));
      }
      this.#size -= group.length;
      dropped += group.length;
      this.#groups[head] = undefined;
      head += 1;
    }
    if (head >= COMPACT_AFTER && head * 2 >= expiries.length) {
      expiries.splice(0, head);
      this.#groups.splice(0, head);
      head = 0;
    }
    this.#head = head;
    return dropped;
  }

  /** Live members, latest expiry first (ties by member, descending), strictly after `after`, at most `limit`. */
  range(after: IndexEntry | undefined, limit: number, now: number): IndexEntry[] {
    const expiries = this.#expiries;
    const found: IndexEntry[] = [];
    let at = (after ? searchFrom(expiries, this.#head, after.expiresAt, true) : expiries.length) - 1;
    for (; at >= this.#head && found.length < limit; at -= 1) {
      const expiresAt = expiries[at]!;
      if (expiresAt <= now) break;
      const group = sorted(this.#groups[at]!);
      let position = after && expiresAt === after.expiresAt ? memberBound(group, after.member) : group.length;
      while (position > 0 && found.length < limit) found.push(group[(position -= 1)]!);
    }
    return found;
  }
}

function sorted(group: Group): readonly IndexEntry[] {
  if (!Array.isArray(group)) return [group];
  if (!group.unsorted) return group;
  group.unsorted = false;
  return group.sort((a, b) => (a.member < b.member ? -1 : 1));
}

/** The first position from `from` whose value is at least `value` (`above`: above it). */
function searchFrom(values: readonly number[], from: number, value: number, above = false): number {
  return lowerBound(from, values.length, (at) => values[at]! < value || (above && values[at] === value));
}

/** The first position in `group` whose member sorts at or after `member`. */
function memberBound(group: readonly IndexEntry[], member: string): number {
  return lowerBound(0, group.length, (at) => group[at]!.member < member);
}

/** The first position in [low, high) where `before` no longer holds (it holds on a prefix of them). */
function lowerBound(low: number, high: number, before: (at: number) => boolean): number {
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (before(middle)) low = middle + 1;
    else high = middle;
  }
  return low;
}
