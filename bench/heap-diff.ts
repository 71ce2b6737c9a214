/**
 * Compares two V8 heap snapshots of one process (taken minutes apart, e.g. by the soak's
 * SOAK_HEAP_SNAPSHOT_MINUTES) and prints what grew: per constructor or type, the change in count
 * and self size, then for the top growers where their new objects (ids absent from the first
 * snapshot; V8 keeps an object's id across the snapshots of one process) are held from: the
 * retaining chains, a few levels up, counted.
 *
 *   node --max-old-space-size=4096 --import tsx bench/heap-diff.ts OLD.heapsnapshot NEW.heapsnapshot [top]
 */
import { readFileSync } from "node:fs"

interface Snapshot {
  readonly snapshot: {
    readonly meta: {
      readonly node_fields: ReadonlyArray<string>
      readonly node_types: ReadonlyArray<ReadonlyArray<string> | string>
      readonly edge_fields: ReadonlyArray<string>
      readonly edge_types: ReadonlyArray<ReadonlyArray<string> | string>
    }
  }
  readonly nodes: ReadonlyArray<number>
  readonly edges: ReadonlyArray<number>
  readonly strings: ReadonlyArray<string>
}

/** A parsed snapshot: nodes by ordinal, with a group name, an id, a self size and their retainers. */
interface Heap {
  readonly count: number
  readonly group: (node: number) => string
  readonly id: (node: number) => number
  readonly selfSize: (node: number) => number
  /** Retainers of `node`: [retainer ordinal, edge label] pairs, weak edges left out. */
  readonly retainers: (node: number) => ReadonlyArray<readonly [number, string]>
}

/** Strings and numbers by type; everything else by constructor or name, closures marked. */
const groupOf = (type: string, name: string): string => {
  switch (type) {
    case "object":
    case "native":
    case "hidden":
    case "array":
    case "synthetic":
      if (name === "") return `(${type})`
      return name.length > 80 ? `${name.slice(0, 77)}...` : name
    case "closure":
      return `(closure) ${name || "anonymous"}`
    default:
      return `(${type})`
  }
}

const load = (path: string): Heap => {
  const raw = JSON.parse(readFileSync(path, "utf8")) as Snapshot
  const meta = raw.snapshot.meta
  const nodeWidth = meta.node_fields.length
  const edgeWidth = meta.edge_fields.length
  const [typeAt, nameAt, idAt, sizeAt, edgesAt] = ["type", "name", "id", "self_size", "edge_count"].map((f) =>
    meta.node_fields.indexOf(f)
  ) as [number, number, number, number, number]
  const [edgeTypeAt, edgeNameAt, toAt] = ["type", "name_or_index", "to_node"].map((f) => meta.edge_fields.indexOf(f)) as [
    number,
    number,
    number
  ]
  const nodeTypes = meta.node_types[typeAt] as ReadonlyArray<string>
  const edgeTypes = meta.edge_types[edgeTypeAt] as ReadonlyArray<string>
  const nodes = Int32Array.from(raw.nodes)
  const edges = Int32Array.from(raw.edges)
  const strings = raw.strings
  const count = nodes.length / nodeWidth
  // Reverse edges: for each node, the edges pointing at it (as edge offsets), and their owners.
  const firstEdge = new Int32Array(count + 1)
  for (let n = 0; n < count; n++) firstEdge[n + 1] = firstEdge[n]! + nodes[n * nodeWidth + edgesAt]! * edgeWidth
  const inCount = new Int32Array(count + 1)
  for (let e = 0; e < edges.length; e += edgeWidth) inCount[edges[e + toAt]! / nodeWidth + 1]!++
  for (let n = 0; n < count; n++) inCount[n + 1]! += inCount[n]!
  const inEdges = new Int32Array(edges.length / edgeWidth)
  const inOwners = new Int32Array(edges.length / edgeWidth)
  const fill = inCount.slice()
  for (let n = 0; n < count; n++) {
    for (let e = firstEdge[n]!; e < firstEdge[n + 1]!; e += edgeWidth) {
      const to = edges[e + toAt]! / nodeWidth
      const slot = fill[to]!++
      inEdges[slot] = e
      inOwners[slot] = n
    }
  }
  const edgeLabel = (e: number) => {
    const type = edgeTypes[edges[e + edgeTypeAt]!]!
    const nameOrIndex = edges[e + edgeNameAt]!
    // Indices are left out so that the chains of many elements of one array count as one.
    return type === "element" || type === "hidden" ? "[]" : `${strings[nameOrIndex]}`
  }
  return {
    count,
    group: (n) => groupOf(nodeTypes[nodes[n * nodeWidth + typeAt]!]!, strings[nodes[n * nodeWidth + nameAt]!]!),
    id: (n) => nodes[n * nodeWidth + idAt]!,
    selfSize: (n) => nodes[n * nodeWidth + sizeAt]!,
    retainers: (n) => {
      const found: Array<readonly [number, string]> = []
      for (let slot = inCount[n]!; slot < inCount[n + 1]!; slot++) {
        const e = inEdges[slot]!
        if (edgeTypes[edges[e + edgeTypeAt]!] === "weak") continue
        found.push([inOwners[slot]!, edgeLabel(e)])
      }
      return found
    }
  }
}

interface Totals {
  count: number
  size: number
}

const totals = (heap: Heap) => {
  const byGroup = new Map<string, Totals>()
  for (let n = 0; n < heap.count; n++) {
    const group = heap.group(n)
    const entry = byGroup.get(group) ?? { count: 0, size: 0 }
    entry.count++
    entry.size += heap.selfSize(n)
    byGroup.set(group, entry)
  }
  return byGroup
}

/** A chain of up to `depth` retainers above `node`, each step the first retainer not seen yet. */
const chainOf = (heap: Heap, node: number, depth: number): string => {
  const steps: Array<string> = []
  const seen = new Set([node])
  let at = node
  for (let level = 0; level < depth; level++) {
    const next = heap.retainers(at).find(([owner]) => !seen.has(owner))
    if (next === undefined) break
    const [owner, label] = next
    steps.push(`${heap.group(owner)}.${label}`)
    seen.add(owner)
    at = owner
  }
  return steps.join(" <- ")
}

const main = () => {
  const [oldPath, newPath, topRaw] = process.argv.slice(2)
  if (oldPath === undefined || newPath === undefined) {
    console.error("usage: bench/heap-diff.ts OLD.heapsnapshot NEW.heapsnapshot [top]")
    process.exit(2)
  }
  const top = Number(topRaw ?? 25)
  const before = load(oldPath)
  const oldIds = new Set<number>()
  for (let n = 0; n < before.count; n++) oldIds.add(before.id(n))
  const oldTotals = totals(before)
  const after = load(newPath)
  const newTotals = totals(after)
  const sum = (map: Map<string, Totals>) =>
    [...map.values()].reduce((a, t) => ({ count: a.count + t.count, size: a.size + t.size }), { count: 0, size: 0 })
  const [a, b] = [sum(oldTotals), sum(newTotals)]
  console.log(
    `nodes ${a.count} -> ${b.count} (${b.count - a.count >= 0 ? "+" : ""}${b.count - a.count}); self size ${
      (a.size / 1e6).toFixed(2)
    } MB -> ${(b.size / 1e6).toFixed(2)} MB`
  )
  const rows = [...new Set([...oldTotals.keys(), ...newTotals.keys()])].map((group) => {
    const o = oldTotals.get(group) ?? { count: 0, size: 0 }
    const n = newTotals.get(group) ?? { count: 0, size: 0 }
    return { group, count: n.count, dCount: n.count - o.count, size: n.size, dSize: n.size - o.size }
  })
  rows.sort((x, y) => y.dSize - x.dSize)
  const sign = (v: number) => (v >= 0 ? `+${v}` : `${v}`)
  console.log("\nself size delta  count delta  count now  group")
  for (const row of rows.slice(0, top)) {
    console.log(`${sign(row.dSize).padStart(15)}  ${sign(row.dCount).padStart(11)}  ${String(row.count).padStart(9)}  ${row.group}`)
  }
  // Retainers of the new objects of the top growers.
  const growers = new Set(rows.slice(0, Math.min(top, 10)).filter((r) => r.dSize > 0).map((r) => r.group))
  const samples = new Map<string, Array<number>>()
  for (let n = 0; n < after.count; n++) {
    const group = after.group(n)
    if (!growers.has(group) || oldIds.has(after.id(n))) continue
    const list = samples.get(group) ?? []
    if (list.length < 2_000) list.push(n)
    samples.set(group, list)
  }
  for (const group of growers) {
    const nodes = samples.get(group) ?? []
    const chains = new Map<string, number>()
    for (const node of nodes) {
      const chain = chainOf(after, node, 5)
      chains.set(chain, (chains.get(chain) ?? 0) + 1)
    }
    console.log(`\n${group}: ${nodes.length} new objects sampled; held from`)
    for (const [chain, n] of [...chains].sort((x, y) => y[1] - x[1]).slice(0, 5)) console.log(`  ${String(n).padStart(5)}  ${chain}`)
  }
}

main()
