/** The soak's report: counts, errors, violations and each server life's RSS slope after warm-up, with its V8 heap. */
import type { Counts } from "./soak-loops.js"
import type { Sample, Server } from "./soak-servers.js"

export interface LifeFit {
  readonly server: string
  readonly life: number
  readonly minutes: number
  readonly startMb: number
  readonly endMb: number
  readonly minMb: number
  readonly maxMb: number
  /** The V8 heap reserved at the life's first and last samples that have it. */
  readonly heapStartMb: number | undefined
  readonly heapEndMb: number | undefined
  /** Least-squares slope of the samples after warm-up, MB a minute; undefined with fewer than 3. */
  readonly slopeMbPerMin: number | undefined
  /** The fitted line's change over the fitted span, relative to its value at the span's start. */
  readonly fittedChange: number | undefined
  readonly fitted: number
}

export interface ModeResult {
  readonly mode: string
  readonly minutes: number
  readonly counts: Counts
  readonly lives: ReadonlyArray<LifeFit>
}

/** Least squares: y = a + b x. */
export const leastSquares = (samples: ReadonlyArray<Sample>) => {
  const n = samples.length
  const mx = samples.reduce((s, p) => s + p.atMinute, 0) / n
  const my = samples.reduce((s, p) => s + p.rssMb, 0) / n
  const sxx = samples.reduce((s, p) => s + (p.atMinute - mx) ** 2, 0)
  const sxy = samples.reduce((s, p) => s + (p.atMinute - mx) * (p.rssMb - my), 0)
  const slope = sxx === 0 ? 0 : sxy / sxx
  return { slope, intercept: my - slope * mx }
}

export const fitLives = (servers: ReadonlyArray<Server>, warmupMinutes: number): Array<LifeFit> =>
  servers.flatMap((server) =>
    server.lives.map((life, index) => {
      const rss = life.samples.map((s) => s.rssMb)
      const heaps = life.samples.flatMap((s) => (s.heapMb === undefined ? [] : [s.heapMb]))
      const after = life.samples.filter((s) => s.atMinute - life.startedAtMinute >= warmupMinutes)
      const fit = after.length >= 3 ? leastSquares(after) : undefined
      const first = after[0]?.atMinute ?? 0
      const last = after.at(-1)?.atMinute ?? 0
      const fittedStart = fit === undefined ? 0 : fit.intercept + fit.slope * first
      return {
        server: server.name,
        life: index + 1,
        minutes: (life.samples.at(-1)?.atMinute ?? life.startedAtMinute) - life.startedAtMinute,
        startMb: rss[0] ?? 0,
        endMb: rss.at(-1) ?? 0,
        minMb: rss.length === 0 ? 0 : Math.min(...rss),
        maxMb: rss.length === 0 ? 0 : Math.max(...rss),
        heapStartMb: heaps[0],
        heapEndMb: heaps.at(-1),
        slopeMbPerMin: fit?.slope,
        fittedChange: fit === undefined || fittedStart <= 0 ? undefined : (fit.slope * (last - first)) / fittedStart,
        fitted: after.length
      }
    })
  )

const format = (value: number | undefined, digits: number, suffix = "") =>
  value === undefined ? "n/a" : `${value >= 0 ? "+" : ""}${value.toFixed(digits)}${suffix}`

/** Prints the report; true when anything failed (an error, a violation). */
export const printReport = (results: ReadonlyArray<ModeResult>, warmupMinutes: number): boolean => {
  let failed = false
  for (const result of results) {
    const { counts } = result
    const errors = [...counts.errors.values()].reduce((a, b) => a + b, 0)
    failed ||= errors > 0 || counts.violations > 0
    console.log(`\n== ${result.mode}: ${result.minutes.toFixed(1)} min of load`)
    console.log(
      `tokens ${counts.tokens}, calls ${counts.calls}, services created/called/deleted ${counts.lifecycles}, ` +
        `noise requests ${counts.noise}`
    )
    console.log(
      `errors ${errors}, deleted-service checks ${counts.deletedChecked}, violations ${counts.violations}, ` +
        `requests cut by the kill or a heap snapshot ${counts.interrupted}`
    )
    for (const [what, n] of counts.errors) console.log(`  error x${n}: ${what}`)
    console.log(
      `| instance (life) | minutes | start | end | min | max | slope after ${warmupMinutes} min | fitted change | samples fitted | V8 heap start, end |`
    )
    console.log("|---|---|---|---|---|---|---|---|---|---|")
    for (const life of result.lives) {
      console.log(
        `| ${life.server} (${life.life}) | ${life.minutes.toFixed(1)} | ${life.startMb.toFixed(0)} MB | ${life.endMb.toFixed(0)} MB | ` +
          `${life.minMb.toFixed(0)} MB | ${life.maxMb.toFixed(0)} MB | ${format(life.slopeMbPerMin, 3, " MB/min")} | ` +
          `${format(life.fittedChange === undefined ? undefined : life.fittedChange * 100, 1, "%")} | ${life.fitted} | ` +
          `${life.heapStartMb?.toFixed(0) ?? "?"} MB, ${life.heapEndMb?.toFixed(0) ?? "?"} MB |`
      )
    }
  }
  return failed
}
