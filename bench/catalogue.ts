/**
 * The catalogue scenarios of `npm run bench` (run after the reference ones, on the same server):
 * `CATALOGUE_SERVICES` oauth services (default 10,000) with 2 credentials each, provisioned
 * through the admin API (services one request each, credentials by profile saves of 25), then:
 *
 * - cold, once: every token request with a credential never used before;
 * - then BENCH_ROUNDS rounds of, for tokens and then for calls, back to back:
 *   - hot: one credential (or its token) on every request;
 *   - spread: a random credential (or token) of the whole catalogue on every request (calls are
 *     warm: every token has been called once before, as the hot one has);
 *   - spread while a side loop makes ~5 catalogue writes a second in another profile (creating
 *     and deleting services).
 *
 * Each ratio is taken within a round and the report gives their medians: spread/hot (target
 * >= 0.9), with writes/without (>= 0.8); cold/hot (>= 0.3) against the median hot rate; with the
 * server's RSS at the full catalogue. `bench/run.ts` runs them on the
 * embedded database and, when DATABASE_URL is set, on PostgreSQL too, and prints both side by side
 * (`printCatalogue`). CATALOGUE_SERVICES=0 skips them.
 */
import autocannon from "autocannon"

export interface CatalogueBench {
  /** Which database the server runs on, for the report. */
  readonly database: string
  readonly base: string
  readonly seconds: number
  readonly rounds: number
  readonly connections: number
  readonly admin: (base: string, method: string, path: string, body?: unknown) => Promise<any>
  readonly rssMb: () => number
}

interface Credential {
  readonly body: string
  /** The service call path of its service. */
  readonly path: string
}

export const SERVICES = Number(process.env.CATALOGUE_SERVICES ?? 10_000)
const WRITES_PER_SECOND = 5

const pool = async <A>(items: ReadonlyArray<A>, width: number, each: (item: A) => Promise<void>) => {
  let next = 0
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < items.length) await each(items[next++]!)
  }))
}

const tokenBody = (profile: string, environment: string, uuid: string, clientId: string, secret: string) =>
  new URLSearchParams({
    grant_type: "client_credentials",
    client_id: clientId,
    client_secret: secret,
    profile,
    environment,
    service_uuid: uuid
  }).toString()

interface Rate {
  readonly rps: number
  readonly failed: number
}

/** What one round measured, back to back. */
interface RoundRates {
  readonly hotTokens: Rate
  readonly spreadTokens: Rate
  readonly writeTokens: Rate
  readonly hotCalls: Rate
  readonly spreadCalls: Rate
  readonly writeCalls: Rate
}

/** What one database's run measured. */
export interface CatalogueResult {
  readonly database: string
  readonly services: number
  readonly credentials: number
  readonly provisionedS: number
  readonly cold: Rate
  readonly coldUsed: number
  readonly rounds: ReadonlyArray<RoundRates>
  readonly writeRate: number
  readonly rssMb: number
}

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

/** Loads the server with a request chosen afresh for each request; answers req/s and failures. */
const measure = async (
  bench: CatalogueBench,
  path: string,
  headers: Record<string, string>,
  pick: () => Credential,
  onBody?: (body: string, chosen: Credential) => void
) => {
  const result = await autocannon({
    url: `${bench.base}${path}`,
    method: "POST",
    connections: bench.connections,
    duration: bench.seconds,
    requests: [{
      method: "POST",
      path,
      setupRequest: (request: any, context: any) => {
        const chosen = pick()
        context.chosen = chosen
        return { ...request, body: chosen.body, headers }
      },
      ...(onBody === undefined ? {} : {
        onResponse: (status: number, body: string, context: any) => status === 200 && onBody(body, context.chosen)
      })
    }]
  } as any)
  return { rps: result.requests.average, failed: result.non2xx + result.errors + result.timeouts }
}

export const runCatalogue = async (bench: CatalogueBench): Promise<CatalogueResult> => {
  const { base } = bench
  // A loaded machine may let an admin request time out or answer 503 (catalogue writes queue on
  // one lock): tried again (a service created twice only leaves an extra one nobody uses).
  const admin = async (b: string, method: string, path: string, body?: unknown) => {
    for (let attempt = 1;; attempt++) {
      try {
        return await bench.admin(b, method, path, body)
      } catch (error) {
        // A 204 (a deletion) has no JSON to read; any failing status was thrown before the body.
        if (error instanceof SyntaxError) return undefined
        if (attempt >= 5 || !/timeout|: 503 /.test(String(error))) throw error
        await new Promise((resolve) => setTimeout(resolve, 200 * attempt))
      }
    }
  }
  const profile = `catalogue-${crypto.randomUUID().slice(0, 8)}`
  const environment = "production"
  const startedAt = performance.now()
  await admin(base, "PUT", `/admin/profiles/${profile}`)
  await admin(base, "PUT", `/admin/profiles/${profile}/environments/${environment}`)
  const uuids: Array<string> = []
  // Several requests in flight: the server's admin path, not this loop's round trips, sets the pace.
  await pool(Array.from({ length: SERVICES }, (_, i) => i), 8, async (i) => {
    const service = await admin(base, "POST", `/admin/profiles/${profile}/environments/${environment}/services`, {
      name: `s${i}`,
      auth_type: "oauth"
    })
    uuids.push(service.uuid)
  })
  const credentials: Array<Credential> = []
  const batches: Array<Array<string>> = []
  for (let i = 0; i < uuids.length; i += 25) batches.push(uuids.slice(i, i + 25)) // short transactions
  await pool(batches, 4, async (batch) => {
    const changes = batch.flatMap((uuid) => [0, 1].map(() => ({ op: "add_credential", environment, service_uuid: uuid })))
    const saved = await admin(base, "POST", `/admin/profiles/${profile}/save`, { changes })
    for (const created of saved.created) {
      credentials.push({
        body: tokenBody(profile, environment, created.service_uuid, created.client_id, created.client_secret),
        path: `/service/${profile}/${environment}/json/${created.service_uuid}`
      })
    }
  })
  const provisionedS = (performance.now() - startedAt) / 1000
  console.log(
    `\ncatalogue (${bench.database}): ${uuids.length} services, ${credentials.length} credentials provisioned through ` +
      `the admin API in ${provisionedS.toFixed(1)} s; server RSS ${bench.rssMb().toFixed(0)} MB`
  )

  const form = { "content-type": "application/x-www-form-urlencoded" }
  const random = <A>(list: ReadonlyArray<A>) => list[Math.floor(Math.random() * list.length)]!
  const tokens: Array<{ readonly path: string; readonly token: string }> = []

  // Cold first: every request a credential never used (its token kept for the calls).
  let unused = 0
  const cold = await measure(bench, "/oauth/token", form, () => credentials[unused++ % credentials.length]!, (body, chosen) => {
    if (tokens.length < 20_000) tokens.push({ path: chosen.path, token: JSON.parse(body).access_token })
  })
  const coldUsed = Math.min(unused, credentials.length)
  // Tokens of the cold run, each with its credential's service path.
  const calls = tokens
  const hotCredential = credentials[0]!
  const hotCall = calls[0]!
  const json = { "content-type": "application/json" }

  // For calls, each request picks a token and its service's path.
  const measureCalls = (pick: () => { readonly path: string; readonly token: string }) =>
    autocannon({
      url: base,
      connections: bench.connections,
      duration: bench.seconds,
      requests: [{
        method: "POST",
        setupRequest: (request: any) => {
          const call = pick()
          return { ...request, path: call.path, body: `{"amount":42}`, headers: { ...json, authorization: `Bearer ${call.token}` } }
        }
      }]
    } as any).then((result: any) => ({ rps: result.requests.average, failed: result.non2xx + result.errors + result.timeouts }))

  // Warm: each token called once before the calls are measured, as the hot one is by its first
  // request (a token's first call checks its signature; later ones find it verified).
  await pool(calls, 8, async (call) => {
    const response = await fetch(`${base}${call.path}`, {
      method: "POST",
      headers: { ...json, authorization: `Bearer ${call.token}` },
      body: `{"amount":42}`,
      signal: AbortSignal.timeout(10_000)
    })
    await response.arrayBuffer()
  })

  // ~5 catalogue writes a second in another profile while `during` runs.
  const other = `catalogue-writes-${crypto.randomUUID().slice(0, 8)}`
  await admin(base, "PUT", `/admin/profiles/${other}`)
  await admin(base, "PUT", `/admin/profiles/${other}/environments/${environment}`)
  let writes = 0
  let writingFor = 0
  const withWrites = async <A>(during: () => Promise<A>): Promise<A> => {
    let writing = true
    const writer = (async () => {
      while (writing) {
        const tick = performance.now()
        const service = await admin(base, "POST", `/admin/profiles/${other}/environments/${environment}/services`, { auth_type: "oauth" })
        await admin(base, "DELETE", `/admin/profiles/${other}/environments/${environment}/services/${service.uuid}`)
        writes += 2
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, 2_000 / WRITES_PER_SECOND - (performance.now() - tick))))
      }
    })()
    const startedAt = performance.now()
    try {
      return await during()
    } finally {
      writing = false
      await writer
      writingFor += (performance.now() - startedAt) / 1000
    }
  }

  // Rounds, each measuring hot, spread and spread with writes back to back (hot and spread in
  // alternating order), so that each ratio is taken within a round; the report gives the medians.
  const rounds: Array<RoundRates> = []
  for (let round = 1; round <= bench.rounds; round++) {
    const pair = async <A>(hot: () => Promise<A>, spread: () => Promise<A>) =>
      round % 2 === 1 ? { hot: await hot(), spread: await spread() } : { spread: await spread(), hot: await hot() }
    const tokenPair = await pair(
      () => measure(bench, "/oauth/token", form, () => hotCredential),
      () => measure(bench, "/oauth/token", form, () => random(credentials))
    )
    const writeTokens = await withWrites(() => measure(bench, "/oauth/token", form, () => random(credentials)))
    const callPair = await pair(() => measureCalls(() => hotCall), () => measureCalls(() => random(calls)))
    const writeCalls = await withWrites(() => measureCalls(() => random(calls)))
    rounds.push({
      hotTokens: tokenPair.hot,
      spreadTokens: tokenPair.spread,
      writeTokens,
      hotCalls: callPair.hot,
      spreadCalls: callPair.spread,
      writeCalls
    })
  }
  const rssFull = bench.rssMb()
  const writeRate = writes / writingFor

  return {
    database: bench.database,
    services: uuids.length,
    credentials: credentials.length,
    provisionedS,
    cold,
    coldUsed,
    rounds,
    writeRate,
    rssMb: rssFull
  }
}

/** The runs side by side, one column a database, each ratio with its target. */
export const printCatalogue = (results: ReadonlyArray<CatalogueResult>, seconds: number, connections: number) => {
  if (results.length === 0) return
  const f = (n: number) => n.toLocaleString("en-US", { maximumFractionDigits: 0 })
  type Pick = (round: RoundRates) => Rate
  /** The median rate of every round. */
  const rate = (r: CatalogueResult, pick: Pick) => median(r.rounds.map((round) => pick(round).rps))
  /** The median of the per-round ratios, beside the median rate of the numerator. */
  const ratio = (r: CatalogueResult, a: Pick, b: Pick) =>
    `${f(rate(r, a))}/s (${median(r.rounds.map((round) => a(round).rps / b(round).rps)).toFixed(2)}x)`
  const rows: Array<[string, (r: CatalogueResult) => string, string]> = [
    ["services, credentials", (r) => `${f(r.services)}, ${f(r.credentials)}`, ""],
    ["provisioned (admin API)", (r) => `${r.provisionedS.toFixed(0)} s`, ""],
    ["tokens hot", (r) => `${f(rate(r, (x) => x.hotTokens))}/s`, ""],
    ["tokens spread / hot", (r) => ratio(r, (x) => x.spreadTokens, (x) => x.hotTokens), ">= 0.9"],
    // Cold happens once per credential: against the median hot rate.
    ["tokens cold / hot", (r) => `${f(r.cold.rps)}/s (${(r.cold.rps / rate(r, (x) => x.hotTokens)).toFixed(2)}x)`, ">= 0.3"],
    ["tokens with writes / spread", (r) => ratio(r, (x) => x.writeTokens, (x) => x.spreadTokens), ">= 0.8"],
    ["calls hot", (r) => `${f(rate(r, (x) => x.hotCalls))}/s`, ""],
    ["calls spread / hot", (r) => ratio(r, (x) => x.spreadCalls, (x) => x.hotCalls), ">= 0.9"],
    ["calls with writes / spread", (r) => ratio(r, (x) => x.writeCalls, (x) => x.spreadCalls), ">= 0.8"],
    ["writes in another profile", (r) => `${r.writeRate.toFixed(1)}/s`, "~5"],
    ["server RSS, catalogue loaded", (r) => `${f(r.rssMb)} MB`, "<= 350 embedded, <= 250 PostgreSQL"]
  ]
  const width = 22
  const rounds = results[0]!.rounds.length
  console.log("")
  console.log(
    `catalogue scenarios: ${connections} connections, ${seconds} s per run, ${rounds} round${rounds === 1 ? "" : "s"} ` +
      `(medians of the rounds' rates and of their ratios), first uses: ${results.map((r) => f(r.coldUsed)).join(" / ")}`
  )
  console.log(["".padEnd(30), ...results.map((r) => r.database.padEnd(width)), "target"].join(" "))
  for (const [label, cell, target] of rows) {
    console.log([label.padEnd(30), ...results.map((r) => cell(r).padEnd(width)), target].join(" ").trimEnd())
  }
  const failed = results.reduce(
    (n, r) => n + r.cold.failed + r.rounds.flatMap((round) => Object.values(round)).reduce((m, x) => m + x.failed, 0),
    0
  )
  if (failed > 0) {
    console.error(`!! catalogue: ${failed} requests did not succeed !!`)
    process.exitCode = 1
  }
}
