/**
 * The memory behind the read cache (`CredentialRepoCache`): answers keyed by service and client id,
 * bounded by design and evicted by what a write changed.
 *
 * - Two stores, each with its own bound: answers about live credentials (what a complete catalogue
 *   holds; sized for 100,000 credentials), and negative answers (unknown services, unknown or
 *   deleted client ids: what clients can make up, so kept few). A full store evicts one entry, the
 *   least recently used by a clock sweep (a hit only sets a flag), never the whole store.
 * - Every entry is indexed by its profile and service, so a write evicts exactly its scope.
 * - A read that began before an eviction of its scope (or before a clear) must not store what it
 *   read: `mark` is taken before the read, `storable` checks the evictions since, from a short log.
 */
import { type CatalogueScope, covers } from "./CatalogueScope.js"

/** Entries about live credentials kept at most (two per credential: token target and route). */
export const MAX_LIVE_ENTRIES = 250_000
/** Negative answers kept at most: unknown names sent by clients must not grow memory. */
export const MAX_NEGATIVE_ENTRIES = 10_000
/** Evictions remembered for reads under way; a read that overlapped more stores nothing. */
const LOG_SIZE = 4_096

interface Slot<V> {
  value: V
  used: boolean
  readonly profile: string
  readonly service: string
}

/** One bounded store: a map in clock order, indexed by profile, then by environment and uuid. */
export class BoundedEntries<V> {
  private readonly entries = new Map<string, Slot<V>>()
  private readonly byProfile = new Map<string, Map<string, Set<string>>>()

  constructor(readonly capacity: number, private readonly onDelete: (key: string, value: V) => void = () => {}) {}

  get size(): number {
    return this.entries.size
  }

  get(key: string): V | undefined {
    const slot = this.entries.get(key)
    if (slot === undefined) return undefined
    slot.used = true
    return slot.value
  }

  /** Replaces the value of an entry that is held (not a use: the clock is left alone). */
  update(key: string, value: V): boolean {
    const slot = this.entries.get(key)
    if (slot === undefined) return false
    slot.value = value
    return true
  }

  set(key: string, profile: string, environment: string, uuid: string, value: V): void {
    const held = this.entries.get(key)
    if (held !== undefined) {
      held.value = value
      return
    }
    if (this.entries.size >= this.capacity) this.evictOne()
    const service = `${environment}\u0000${uuid}`
    this.entries.set(key, { value, used: false, profile, service })
    let services = this.byProfile.get(profile)
    if (services === undefined) this.byProfile.set(profile, services = new Map())
    let keys = services.get(service)
    if (keys === undefined) services.set(service, keys = new Set())
    keys.add(key)
  }

  delete(key: string): void {
    const slot = this.entries.get(key)
    if (slot === undefined) return
    this.entries.delete(key)
    const services = this.byProfile.get(slot.profile)
    const keys = services?.get(slot.service)
    keys?.delete(key)
    if (keys !== undefined && keys.size === 0) services!.delete(slot.service)
    if (services !== undefined && services.size === 0) this.byProfile.delete(slot.profile)
    this.onDelete(key, slot.value)
  }

  /** Every entry of the scope, and nothing else. */
  evict(scope: CatalogueScope): void {
    const services = this.byProfile.get(scope[0])
    if (services === undefined) return
    const doomed: Array<string> = []
    if (scope.length === 3) {
      for (const key of services.get(`${scope[1]}\u0000${scope[2]}`) ?? []) doomed.push(key)
    } else {
      const prefix = scope.length === 2 ? `${scope[1]}\u0000` : ""
      for (const [service, keys] of services) {
        if (service.startsWith(prefix)) { for (const key of keys) doomed.push(key) }
      }
    }
    for (const key of doomed) this.delete(key)
  }

  clear(): void {
    const held = [...this.entries]
    this.entries.clear()
    this.byProfile.clear()
    for (const [key, slot] of held) this.onDelete(key, slot.value)
  }

  /** The clock sweep: entries used since the last sweep get a second chance (moved to the end). */
  private evictOne(): void {
    for (let step = 0; step <= this.entries.size; step++) {
      const first = this.entries.entries().next()
      if (first.done === true) return
      const [key, slot] = first.value
      if (!slot.used) return this.delete(key)
      slot.used = false
      this.entries.delete(key)
      this.entries.set(key, slot)
    }
  }
}

/** The two stores and the log of evictions that reads under way are checked against. */
export class CatalogueMemory<V> {
  readonly live: BoundedEntries<V>
  readonly negative: BoundedEntries<V>
  private sequence = 0
  /** The scope of each recent eviction by sequence number (modulo the size); "all" for a clear. */
  private readonly log: Array<CatalogueScope | "all"> = new Array(LOG_SIZE)

  constructor(
    capacities: { readonly live: number; readonly negative: number },
    onDelete?: (key: string, value: V) => void
  ) {
    this.live = new BoundedEntries(capacities.live, onDelete)
    this.negative = new BoundedEntries(capacities.negative, onDelete)
  }

  get(key: string): V | undefined {
    return this.live.get(key) ?? this.negative.get(key)
  }

  /** Taken before a read: what `storable` compares with. */
  mark(): number {
    return this.sequence
  }

  evict(scopes: ReadonlyArray<CatalogueScope>): void {
    for (const scope of scopes) {
      this.log[++this.sequence % LOG_SIZE] = scope
      this.live.evict(scope)
      this.negative.evict(scope)
    }
  }

  clear(): void {
    this.log[++this.sequence % LOG_SIZE] = "all"
    if (this.live.size > 0) this.live.clear()
    if (this.negative.size > 0) this.negative.clear()
  }

  /** Whether a read of this service that began at `mark` overlapped no eviction of it. */
  storable(mark: number, profile: string, environment: string, uuid: string): boolean {
    if (this.sequence === mark) return true
    if (this.sequence - mark >= LOG_SIZE) return false
    for (let at = mark + 1; at <= this.sequence; at++) {
      const scope = this.log[at % LOG_SIZE]!
      if (scope === "all" || covers(scope, profile, environment, uuid)) return false
    }
    return true
  }

  /** Stores an answer read since `mark`, in the store its kind belongs to, unless it overlapped an eviction. */
  store(mark: number, key: string, profile: string, environment: string, uuid: string, value: V, live: boolean): boolean {
    if (!this.storable(mark, profile, environment, uuid)) return false
    ;(live ? this.negative : this.live).delete(key)
    ;(live ? this.live : this.negative).set(key, profile, environment, uuid, value)
    return true
  }
}
