/**
 * Effect's metric snapshot in the Prometheus text exposition format (version 0.0.4): one `# HELP`
 * and `# TYPE` per family, then its samples; histograms as cumulative `_bucket{le}`, `_sum` and
 * `_count`. Only this server's families are written (their names start with one of `prefixes`):
 * the registry is global to the process, and a library's metrics are not ours to publish.
 */
import { MetricState, Option } from "effect"
import type { MetricPair } from "effect"

export const CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

const escapeLabelValue = (value: string) => value.replace(/\\/g, "\\\\").replace(/"/g, "\\\"").replace(/\n/g, "\\n")
const escapeHelp = (text: string) => text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")

const formatNumber = (value: number | bigint): string =>
  typeof value === "bigint"
    ? value.toString()
    : Number.isNaN(value)
    ? "NaN"
    : value === Number.POSITIVE_INFINITY
    ? "+Inf"
    : value === Number.NEGATIVE_INFINITY
    ? "-Inf"
    : String(value)

const formatLabels = (labels: ReadonlyArray<readonly [string, string]>) =>
  labels.length === 0 ? "" : `{${labels.map(([key, value]) => `${key}="${escapeLabelValue(value)}"`).join(",")}}`

const sampleLines = (pair: MetricPair.MetricPair.Untyped): { readonly type: string; readonly lines: Array<string> } => {
  const name = pair.metricKey.name
  const labels = pair.metricKey.tags
    .map((tag) => [tag.key, tag.value] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  const state = pair.metricState
  if (MetricState.isCounterState(state)) {
    return { type: "counter", lines: [`${name}${formatLabels(labels)} ${formatNumber(state.count)}`] }
  }
  if (MetricState.isGaugeState(state)) {
    return { type: "gauge", lines: [`${name}${formatLabels(labels)} ${formatNumber(state.value)}`] }
  }
  if (MetricState.isHistogramState(state)) {
    // Effect's buckets are already cumulative and end with +Inf (MetricBoundaries adds it).
    const buckets = state.buckets.map(([bound, count]) =>
      `${name}_bucket${formatLabels([...labels, ["le", formatNumber(bound)]])} ${count}`
    )
    if (!state.buckets.some(([bound]) => bound === Number.POSITIVE_INFINITY)) {
      buckets.push(`${name}_bucket${formatLabels([...labels, ["le", "+Inf"]])} ${state.count}`)
    }
    return {
      type: "histogram",
      lines: [
        ...buckets,
        `${name}_sum${formatLabels(labels)} ${formatNumber(state.sum)}`,
        `${name}_count${formatLabels(labels)} ${state.count}`
      ]
    }
  }
  return { type: "untyped", lines: [] }
}

/** The exposition text of every metric in `snapshot` whose name starts with one of `prefixes`. */
export const render = (
  snapshot: ReadonlyArray<MetricPair.MetricPair.Untyped>,
  prefixes: ReadonlyArray<string>
): string => {
  const families = new Map<string, { help: string; type: string; lines: Array<string> }>()
  // Series in a stable order (by their labels), so that two scrapes of the same state read the same;
  // a histogram's own lines keep their order (buckets by increasing bound).
  const seriesKey = (pair: MetricPair.MetricPair.Untyped) => pair.metricKey.tags.map((tag) => `${tag.key}=${tag.value}`).sort().join(",")
  const ordered = [...snapshot].sort((a, b) => {
    const [ka, kb] = [seriesKey(a), seriesKey(b)]
    return ka < kb ? -1 : ka > kb ? 1 : 0
  })
  for (const pair of ordered) {
    const name = pair.metricKey.name
    if (!prefixes.some((prefix) => name.startsWith(prefix))) continue
    const { lines, type } = sampleLines(pair)
    if (lines.length === 0) continue
    const family = families.get(name) ?? {
      help: Option.getOrElse(pair.metricKey.description, () => name),
      type,
      lines: []
    }
    family.lines.push(...lines)
    families.set(name, family)
  }
  const out: Array<string> = []
  for (const name of [...families.keys()].sort()) {
    const family = families.get(name)!
    out.push(`# HELP ${name} ${escapeHelp(family.help)}`, `# TYPE ${name} ${family.type}`, ...family.lines)
  }
  return `${out.join("\n")}\n`
}
